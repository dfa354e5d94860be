/*
 * entry.c - a short-lived program whose every stack can be walked whole by
 * frame pointers, to its entry: _start -> entry_main -> spin.
 *
 * It has its own _start and no libc (-nostdlib -static), because Debian's
 * libc keeps no frame pointers: __libc_start_main uses rbp for argc, so a
 * frame-pointer walk of any program started by it stops short of _start.
 * Here _start clears rbp and calls entry_main, which keeps frame pointers,
 * as spin does.  A frame-pointer walk of any sample therefore ends at the
 * return address into _start, a few bytes past the entry point: what
 * perfd must take as a whole stack before it has the process's tables
 * (bpf/sample.bpf.h, "A stack walked before the daemon described its
 * process").
 *
 * Built at -O0, so that spin keeps its frame pointer too (GCC's -O1 left
 * it out of this leaf) and each round is really run.  Runs ~30 ms of CPU
 * (a fixed number of rounds) and exits 0.
 *
 * usage: entry
 */
#define ROUNDS 15
#define ROUND_ITERATIONS 1000000UL

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long spin(unsigned long n, unsigned long seed)
{
	unsigned long x = seed;

	for (unsigned long i = 0; i < n; i++)
		x += i * i ^ (x >> 3);
	return x;
}

__attribute__((noinline, used, noreturn)) void entry_main(void)
{
	for (int r = 0; r < ROUNDS; r++)
		sink += spin(ROUND_ITERATIONS, sink);
	/* hlt (never run) keeps the address after the syscall, where a tick
	 * in it leaves the pc, inside this function */
	__asm__ volatile("syscall\n\thlt" : : "a"(231 /* exit_group */), "D"(0)
			 : "rcx", "r11", "memory");
	__builtin_unreachable();
}

/* rsp is 16-byte aligned here; the call leaves it as the ABI wants. */
__asm__(".globl _start\n"
	".type _start, @function\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	call entry_main\n"
	"	hlt\n"
	".size _start, . - _start\n");
