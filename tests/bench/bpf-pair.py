#!/usr/bin/env python3
"""bpf-pair.py - two perfd builds' tick programs measured in the same window.

    tests/bench/bpf-pair.py PERFD_A PERFD_B SECONDS COMMAND [ARGS...]

Starts PERFD_A and PERFD_B at 999 Hz at once, two copies of COMMAND (one per
CPU of a 2-CPU machine), and prints each one's on_cpu_clock run time per run
(per tick) over SECONDS after 1 s of warm-up, and B/A.  Both programs run on
the same ticks of the same processes, so the machine's drift between runs,
which bpf-cost.sh's alternating runs must beat, cancels; what is left is the
order of the two programs on each tick (the second runs with warmer caches):
run it both ways.  As root; bpf_stats_enabled is restored, and every process
it started ends with it.
"""
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BenchError, BpfStats, CpuWindow, Perfd, Procs  # noqa: E402


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: bpf-pair.py PERFD_A PERFD_B SECONDS COMMAND [ARGS...]")
    a, b, seconds, cmd = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
    procs = Procs()
    try:
        with tempfile.TemporaryDirectory(prefix="perfd-pair.") as tmp, BpfStats():
            daemons = [Perfd(procs, binary, tmp, 999) for binary in (a, b)]
            time.sleep(2)  # both past their first reading of every process
            for _ in range(2):
                procs.start(cmd)
            time.sleep(1)
            # on_cpu_clock is each perfd's one perf_event program
            windows = [CpuWindow(d.pid) for d in daemons]
            for w in windows:
                w.start()
            time.sleep(seconds)
            for w in windows:
                w.stop()
            if not all(w.stats_stayed_on for w in windows):
                raise BenchError("kernel.bpf_stats_enabled was turned off during the window")
            (ta, tb), (na, nb) = ([w.ns_per_run() for w in windows], [w.run_cnt for w in windows])
            print(f"A {ta:.0f} ns/tick ({na} ticks)  B {tb:.0f} ns/tick ({nb} ticks)  B/A {tb / ta:.3f}")
    except BenchError as e:
        sys.exit(f"bpf-pair.py: {e}")
    finally:
        procs.cleanup()


if __name__ == "__main__":
    main()
