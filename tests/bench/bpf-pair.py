#!/usr/bin/env python3
"""bpf-pair.py - two perfd builds' tick programs measured in the same window.

    tests/bench/bpf-pair.py PERFD_A PERFD_B SECONDS COMMAND [ARGS...]

Starts PERFD_A and PERFD_B at 999 Hz at once, two copies of COMMAND (one per
CPU of a 2-CPU machine), and prints bpf_stats' run_time_ns / run_cnt of each
one's on_cpu_clock over SECONDS after 1 s of warm-up, and B/A.  Both
programs run on the same ticks of the same processes, so the machine's drift
between runs, which bpf-cost.sh's alternating runs must beat, cancels; what
is left is the order of the two programs on each tick (the second runs with
warmer caches): run it both ways and take the geometric mean of B/A and
1/(A/B).  As root; bpf_stats_enabled is restored.  COMMAND must end by
itself or die with its process group (deep: -t).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def tick_programs():
    progs = json.loads(subprocess.check_output(["bpftool", "prog", "show", "-j"]))
    return {p["id"]: p for p in progs if p.get("name") == "on_cpu_clock"}


def start_perfd(binary, sock, known):
    p = subprocess.Popen([binary, "--socket", sock, "--frequency", "999"],
                         stderr=subprocess.DEVNULL)
    for _ in range(100):
        new = set(tick_programs()) - known
        if new:
            return p, max(new)
        time.sleep(0.1)
    p.kill()
    sys.exit(f"{binary}: no on_cpu_clock program after 10 s")


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    a, b, seconds, cmd = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    tmp = tempfile.mkdtemp(prefix="perfd-pair.")
    daemons, workers = [], []
    try:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
        known = set(tick_programs())
        pa, ida = start_perfd(a, os.path.join(tmp, "a.sock"), known)
        daemons.append(pa)
        pb, idb = start_perfd(b, os.path.join(tmp, "b.sock"), known | {ida})
        daemons.append(pb)
        time.sleep(2)  # both past their first reading of every process
        workers = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True) for _ in range(2)]
        time.sleep(1)
        before = tick_programs()
        time.sleep(seconds)
        after = tick_programs()

        def per_tick(i):
            runs = after[i]["run_cnt"] - before[i]["run_cnt"]
            return (after[i]["run_time_ns"] - before[i]["run_time_ns"]) / max(runs, 1), runs

        (ta, na), (tb, nb) = per_tick(ida), per_tick(idb)
        print(f"A {ta:.0f} ns/tick ({na} ticks)  B {tb:.0f} ns/tick ({nb} ticks)  B/A {tb / ta:.3f}")
    finally:
        for w in workers:
            try:
                os.killpg(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for d in daemons:
            d.terminate()
            d.wait()
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={old}"])
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
