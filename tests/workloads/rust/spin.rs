// spin.rs - proves Rust names are demangled, in both manglings (built twice:
// legacy, and -C symbol-mangling-version=v0): the hot function is
// engine::core::hot_rust_function.
//
// usage: rust-spin-{legacy,v0} CPU_SECONDS
mod engine {
    pub mod core {
        #[inline(never)]
        pub fn hot_rust_function(n: u64) -> u64 {
            let mut x = n | 1;
            for i in 0..200_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            x
        }
    }
}

fn main() {
    let secs: f64 = std::env::args().nth(1).expect("usage: CPU_SECONDS").parse().expect("seconds");
    let start = std::time::Instant::now();
    let mut s = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        s = s.wrapping_add(engine::core::hot_rust_function(s));
    }
    println!("{}", s);
}
