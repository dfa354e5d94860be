#!/usr/bin/python3
"""loop-waits.py - how long perfd's event loop sleeps on locks while the
host is saturated and perfd's lanes are busy, for A/B comparisons (run old
and new alternately; the figures move with the host's load).

    PERFD_BUILD=build tests/bench/loop-waits.py [SECONDS]

Starts perfd from PERFD_BUILD with its defaults, three `spin` hogs at nice
0 (more than the CPUs of a 2-CPU host), and `manymaps` mapping 20,000
small executables, so that the symbol and unwind lanes (nice 10) always
have work and are preempted often.  Meanwhile bpftrace sums the loop
thread's futex sleeps, each from its sys_enter_futex to its exit, and
root's `status` is asked ten times a second.  Prints the sleeps' count,
total and longest, the calls that walk malloc's arenas (mallinfo2,
malloc_trim) by thread, the loop's waits for a lock of libc's own (a
malloc arena's), the status latencies and the loop's own turn figures.
A lock the loop shares with a lane shows as long sleeps here.  Before the
lock-free done list and an arena per thread, a perf trace of the same
setup had them up to 120 ms each, ~1.1 s in 40 s, mostly taking finished
jobs.  After, the loop still walked the arenas for every status and trim:
in two 40 s runs at load 10-12, 385 such calls each, the longest 420 and
405 ms, with 1.3-1.5 s of futex sleeps inside them.  With the walks on
the heap's lane (base/heap.h), four runs had none on the loop; the
loop's sleeps that began during the lane's walk were 2 (the longest
70.9 ms, not attributed), 1 (1.4 ms), 0 and 0, and of the arena-lock
waits timed (three runs) none began during it.  offload_submit and
offload_bump no longer take the lanes' mutex (tests/bench/offloadbench.c
measures them alone).  One run still had 5 waits on libc's locks outside
any walk, up to 90 ms (not traced to a stack: a free() of a block a lane
allocated takes that lane's arena lock, the likeliest).  As root; needs
bpftrace.
"""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import perfdtest  # noqa: E402

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
# Sleeps of the loop ($1, perfd's main thread) on a futex, and malloc's
# walks of every arena (mallinfo2, malloc_trim) by the thread that made
# them: the loop's own, and another thread's.  A loop sleep that began
# while another thread was in such a walk, or inside the loop's own, is
# also counted apart (heap_*): the walk holds each arena's lock in turn.
# The loop's waits for one of libc's own locks (__lll_lock_wait_private:
# a malloc arena's, mostly) are timed too (arena_*), and apart those that
# began while another thread walked the arenas (arena_heap_*).
FUTEX_SLEEPS = """
uprobe:LIBC:mallinfo2, uprobe:LIBC:malloc_trim /pid == $1/ {
  @in[tid] = nsecs; if (tid != $1) { @busy = 1; }
}
uretprobe:LIBC:mallinfo2, uretprobe:LIBC:malloc_trim /pid == $1 && @in[tid]/ {
  $us = (nsecs - @in[tid]) / 1000;
  if (tid == $1) { @loop_walks = count(); @loop_walk_total_us = sum($us); @loop_walk_max_us = max($us); }
  else { @other_walks = count(); @other_walk_max_us = max($us); @busy = 0; }
  delete(@in[tid]);
}
uprobe:LIBC:__lll_lock_wait_private /tid == $1/ { @lockw = nsecs; @lockw_heap = @busy; }
uretprobe:LIBC:__lll_lock_wait_private /tid == $1 && @lockw/ {
  $us = (nsecs - @lockw) / 1000; @arena_n = count(); @arena_total_us = sum($us); @arena_max_us = max($us);
  if (@lockw_heap) { @arena_heap_n = count(); @arena_heap_max_us = max($us); }
  @lockw = 0;
}
tracepoint:syscalls:sys_enter_futex /tid == $1 && (args->op & 127) != 1/ {
  @start = nsecs; @heap = @busy || @in[tid];
}
tracepoint:syscalls:sys_exit_futex /tid == $1 && @start/ {
  $us = (nsecs - @start) / 1000; @n = count(); @total_us = sum($us); @max_us = max($us); @start = 0;
  if (@heap) { @heap_n = count(); @heap_total_us = sum($us); @heap_max_us = max($us); }
}
END { clear(@in); }
""".replace("LIBC", LIBC)

def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 40
    d = perfdtest.start_perfd()
    tmp = tempfile.mkdtemp(prefix="perfd-loop-waits-")
    hogs, maps, trace = [], None, None
    try:
        time.sleep(3)  # the host's processes found, their tables built
        hogs = [perfdtest.Workload("spin", 3600) for _ in range(3)]
        maps = subprocess.Popen([perfdtest.workload_binary("manymaps"),
                                 perfdtest.workload_binary("libtiny.so"), tmp, "20000", "20", "2"],
                                stdout=subprocess.DEVNULL)
        trace = subprocess.Popen(["bpftrace", "-e", FUTEX_SLEEPS, str(d.pid)], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
        took, until = [], time.monotonic() + seconds
        while time.monotonic() < until:
            t, _ = perfdtest.status_within_deadline(d)
            took.append(t * 1000)
            time.sleep(0.1)
        trace.send_signal(2)
        out, _ = trace.communicate(timeout=30)
        st = d.status()
    finally:
        if trace and trace.poll() is None:
            trace.kill()
        if maps:
            maps.kill()
            maps.wait()
        for h in hogs:
            h.kill()
        d.stop()
        subprocess.run(["rm", "-rf", tmp])
    figures = {line.split(":")[0].lstrip("@"): int(line.split(":")[1])
               for line in out.splitlines() if line.startswith("@")}
    print(f"loop's futex sleeps: {figures.get('n', 0)}, {figures.get('total_us', 0) / 1000:.1f} ms in all, "
          f"longest {figures.get('max_us', 0) / 1000:.1f} ms ({seconds:.0f} s)")
    print(f"of which during a walk of the arenas: {figures.get('heap_n', 0)}, "
          f"{figures.get('heap_total_us', 0) / 1000:.1f} ms in all, longest {figures.get('heap_max_us', 0) / 1000:.1f} ms")
    print(f"mallinfo2/malloc_trim on the loop: {figures.get('loop_walks', 0)} calls, "
          f"{figures.get('loop_walk_total_us', 0) / 1000:.1f} ms in all, longest "
          f"{figures.get('loop_walk_max_us', 0) / 1000:.1f} ms; on other threads: {figures.get('other_walks', 0)} "
          f"calls, longest {figures.get('other_walk_max_us', 0) / 1000:.1f} ms")
    print(f"loop's waits on libc's locks (malloc arenas): {figures.get('arena_n', 0)}, "
          f"{figures.get('arena_total_us', 0) / 1000:.1f} ms in all, longest "
          f"{figures.get('arena_max_us', 0) / 1000:.1f} ms; begun during another thread's walk: "
          f"{figures.get('arena_heap_n', 0)}, longest {figures.get('arena_heap_max_us', 0) / 1000:.1f} ms")
    print(f"status: {len(took)} answers, p50 {percentile(took, .5):.1f}, p99 {percentile(took, .99):.1f}, "
          f"max {max(took):.1f} ms")
    print(f"loop: longest turn {st['loop']['longest_turn_ms']:.1f} ms, {st['loop']['slow_turns']} of "
          f"{st['loop']['turns']} turns over {st['loop']['slow_turn_ms']:.0f} ms; "
          f"{st['symbols']['modules']} modules, {st['unwind']['tables_built']} tables built; "
          f"heap: {st['heap']}")


if __name__ == "__main__":
    main()
