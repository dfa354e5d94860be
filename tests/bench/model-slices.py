#!/usr/bin/python3
"""model-slices.py - how long one big snapshot answer's model holds perfd's
event loop, for before/after comparisons of building it in slices
(api/model_slices.h).

    PERFD_BUILD=build tests/bench/model-slices.py [SECONDS]

Starts perfd from PERFD_BUILD (1999 Hz, --max-memory 256, --verbose),
runs unique_stacks (a new stack at nearly every sample) on two CPUs for
SECONDS (20), stops it, and asks for one pprof snapshot of that span while
root's status is asked every 5 ms from a process of its own.  bpftrace
times model_build (one go: the whole hold) and each model_builder_step
(one slice) in perfd itself.  Prints the samples, the status latencies,
the longest call of each, the slices' count and sum, and perfd's own line
on the build ("Model: ... in N slices ..., T ms in all", sliced builds
only).  Then, under the same probes and status polling, a second
unique_stacks runs while `top -b -d 10s` asks for its functions (--pid)
and for every process's (-f): the parts' copy and release
(aggregator_query, aggregator_release_parts) and top's function table
(top_write_function_table, on the answers' lanes since ef7e6b1) are timed
too.  As root; needs bpftrace.  The figures move with the host's load.
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import perfdtest  # noqa: E402

PROBES = """
uprobe:BIN:FN /pid == $1/ { @FN_in[tid] = nsecs; }
uretprobe:BIN:FN /@FN_in[tid]/ {
  $us = (nsecs - @FN_in[tid]) / 1000;
  @FN_calls = count(); @FN_max_us = max($us); @FN_sum_us = sum($us);
  delete(@FN_in[tid]);
}
"""


def main():
    secs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    binary = perfdtest.perfd_binary()
    symbols = subprocess.run(["nm", binary], capture_output=True, text=True).stdout
    fns = [fn for fn in ("model_build", "model_builder_step", "aggregator_query",
                         "aggregator_release_parts", "top_write_function_table")
           if f" T {fn}\n" in symbols or f" t {fn}\n" in symbols]
    script = "".join(PROBES.replace("BIN", binary).replace("FN", fn) for fn in fns)
    d = perfdtest.start_perfd(frequency=1999, extra_args=["--max-memory", "256", "--verbose"])
    try:
        w, begin, end = perfdtest.fill_with_unique_stacks(secs)
        bt = subprocess.Popen(["bpftrace", "-e", script, str(d.pid)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        time.sleep(3)  # its probes attached
        poller = perfdtest.StatusPoller(d, interval=0.005)
        t0 = time.monotonic()
        r = subprocess.run([perfdtest.perfctl_binary(), "--socket", d.socket_path, "snapshot",
                            "--pid", str(w.pid), "--from", f"{begin:.3f}", "--to", f"{end:.3f}",
                            "-o", "/dev/null", "--format", "pprof"],
                           capture_output=True, text=True)
        took = time.monotonic() - t0
        latencies = poller.stop()
        # top's function views need a live window: a workload of their own
        live = perfdtest.Workload("unique_stacks", 2, 3600)
        try:
            time.sleep(10)
            poller = perfdtest.StatusPoller(d, interval=0.005)
            for args in (["--pid", str(live.pid)], ["-f"]):
                subprocess.run([perfdtest.perfctl_binary(), "--socket", d.socket_path, "top",
                                "-b", "-n", "1", "-d", "10s", *args],
                               capture_output=True, text=True, check=True)
            top_latencies = poller.stop()
        finally:
            live.kill()
        bt.send_signal(2)
        out = bt.communicate(timeout=30)[0]
        print(f"snapshot: {took:.2f} s, {r.stderr.strip()[:100]}")
        print(f"status: {perfdtest.status_figures(latencies)}")
        print(f"status during top: {perfdtest.status_figures(top_latencies)}")
        print("\n".join(line for line in out.splitlines() if line.startswith("@") and "_in[" not in line))
        print("\n".join(line for line in d.stderr().splitlines() if "Model:" in line))
    finally:
        d.stop()


if __name__ == "__main__":
    main()
