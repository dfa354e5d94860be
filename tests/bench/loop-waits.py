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
total and longest, the status latencies and the loop's own turn figures.
A lock the loop shares with a lane shows as long sleeps here.  Before the
lock-free done list and an arena per thread, a perf trace of the same
setup had them up to 120 ms each, ~1.1 s in 40 s, mostly taking finished
jobs; after, one run had none over 1.4 ms, but another of this script
still had 16 sleeps, 978 ms in all, the longest 511 ms: offload_submit and
offload_bump still take the lanes' mutex, and malloc's stats and trim
walk every arena.  As root; needs bpftrace.
"""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import perfdtest  # noqa: E402

FUTEX_SLEEPS = """
tracepoint:syscalls:sys_enter_futex /tid == $1 && (args->op & 127) != 1/ { @start = nsecs; }
tracepoint:syscalls:sys_exit_futex /tid == $1 && @start/ {
  $us = (nsecs - @start) / 1000; @n = count(); @total_us = sum($us); @max_us = max($us); @start = 0;
}
"""


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
    print(f"status: {len(took)} answers, p50 {percentile(took, .5):.1f}, p99 {percentile(took, .99):.1f}, "
          f"max {max(took):.1f} ms")
    print(f"loop: longest turn {st['loop']['longest_turn_ms']:.1f} ms, {st['loop']['slow_turns']} of "
          f"{st['loop']['turns']} turns over {st['loop']['slow_turn_ms']:.0f} ms; "
          f"{st['symbols']['modules']} modules, {st['unwind']['tables_built']} tables built")


if __name__ == "__main__":
    main()
