#!/usr/bin/python3
"""pprof-answer.py - the size of a big pprof snapshot answer on the socket
and its time from request to file, for two builds in one run: before and
after a change to how the answer travels (issue 29: base64 inside the JSON
line, then a frame of raw bytes after it).

    git worktree add /work/wt-frame-old da3015a
    make -C /work/wt-frame-old -j2 all workloads
    make -j2 all workloads
    tests/bench/pprof-answer.py --old /work/wt-frame-old/build --new build

Starts the two perfds (--frequency HZ, --max-memory MIB, --no-state, and
room for a million stacks of 50 frames: unique_stacks' are 100 deep, more
than the default frames cap holds of 100k), each from its own
build, side by side, and runs unique_stacks (tests/workloads: a new stack at
nearly every sample) on two CPUs for SECONDS, so that both stores hold the
very same span of the very same process, then stops it and waits until
both stores hold all of that span (its samples the same twice).  For it,
alternately old and new, RUNS times each:
  - a raw socket client asks for the pprof snapshot and reads the whole
    answer: its bytes on the socket (a line with base64 inside, or a line
    and its frame, as the answer says) and the time from connect to the
    last byte;
  - that build's perfctl snapshot -o FILE.pb.gz: the time from its start to
    its exit (the file written, synced and renamed), and its peak RSS
    (/usr/bin/time's).
Prints the unique stacks (lines of each build's folded snapshot of the
span), the samples, and the median and range of each figure.  As root.  The
times move with the host's load; the sizes do not.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import benchlib  # noqa: E402
import perfdtest  # noqa: E402


def perfctl_to_file(build, socket_path, span, out, tmp):
    """build's perfctl snapshot SPAN -o OUT: (seconds, peak RSS in KiB).
    The RSS is /usr/bin/time's: the wait status of a child forked from
    this process would count this process's RSS, which the fork copies."""
    rss = Path(tmp) / "rss"
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss), str(Path(build) / "perfctl"),
                        "--socket", socket_path, "snapshot", *span, "-o", str(out)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        raise benchlib.BenchError(f"perfctl exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    if out.read_bytes()[:2] != b"\x1f\x8b":
        raise benchlib.BenchError(f"{out} is not gzip")
    return elapsed, int(rss.read_text().split()[-1])


def settled(daemon, req, timeout=60):
    """Waits until daemon's answers for req (folded) hold the same samples
    twice a second apart: every sample of the span is in its store.
    Returns the last answer."""
    last, deadline = None, time.monotonic() + timeout
    while True:
        answer = benchlib.request(daemon.socket, dict(req, format="folded"), 300)[0]
        if last is not None and answer["samples"] == last["samples"]:
            return answer
        if time.monotonic() > deadline:
            raise benchlib.BenchError(f"the span's samples still change: {answer['samples']}")
        last = answer
        time.sleep(1)


def figure(values, fmt):
    return f"median {fmt(statistics.median(values))} ({fmt(min(values))} .. {fmt(max(values))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="the build folder before (perfd, perfctl)")
    ap.add_argument("--new", default=str(perfdtest.build_dir()), help="the build folder after")
    ap.add_argument("--seconds", type=float, default=25, help="of unique_stacks (25)")
    ap.add_argument("--frequency", type=int, default=9999, help="both perfds' (9999)")
    ap.add_argument("--max-memory", type=int, default=2048,
                    help="both perfds' MiB (2048): the span must outlive the runs, whatever "
                         "else the machine runs meanwhile")
    ap.add_argument("--runs", type=int, default=5, help="of each measurement (5)")
    args = ap.parse_args()
    builds = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}

    procs = benchlib.Procs()
    tmp = Path(tempfile.mkdtemp(prefix="pprof-answer-"))
    try:
        daemons = {name: benchlib.Perfd(procs, str(b / "perfd"), tmp, args.frequency,
                                        extra=["--no-state", "--max-memory", str(args.max_memory),
                                               "--max-stacks", "1000000",
                                               "--max-frames", "50000000"])
                   for name, b in builds.items()}
        benchlib.log(f"unique_stacks on 2 CPUs for {args.seconds:g} s at {args.frequency} Hz")
        w, begin, end = perfdtest.fill_with_unique_stacks(args.seconds)
        span = ("--pid", str(w.pid), "--from", f"{begin:.3f}", "--to", f"{end:.3f}")
        req = {"version": 1, "command": "snapshot", "pid": w.pid, "from": begin, "to": end}
        folded = {name: settled(d, req) for name, d in daemons.items()}
        stacks = {name: a["profile"].count("\n") for name, a in folded.items()}
        figures = {name: {"bytes": [], "socket_s": [], "file_s": [], "rss_kib": [], "samples": set()}
                   for name in builds}
        for run in range(args.runs):
            for name, d in daemons.items():
                head, took, size = benchlib.request(d.socket, dict(req, format="pprof"), 300)
                f = figures[name]
                f["bytes"].append(size)
                f["socket_s"].append(took)
                f["samples"].add(head["samples"])
                secs, rss = perfctl_to_file(builds[name], d.socket, span, tmp / f"{name}.pb.gz", tmp)
                f["file_s"].append(secs)
                f["rss_kib"].append(rss)
            benchlib.log(f"run {run + 1} of {args.runs} done")
        print(f"profile: unique stacks (folded lines) {stacks}, samples "
              f"{ {n: sorted(f['samples']) for n, f in figures.items()} }")
        for name, f in figures.items():
            print(f"{name} ({builds[name]}):")
            print(f"  answer on the socket: {figure(f['bytes'], lambda v: f'{v / 2**20:.2f} MiB')}")
            print(f"  raw client, connect to last byte: {figure(f['socket_s'], lambda v: f'{v:.3f} s')}")
            print(f"  perfctl -o FILE, start to exit: {figure(f['file_s'], lambda v: f'{v:.3f} s')}")
            print(f"  perfctl peak RSS: {figure(f['rss_kib'], lambda v: f'{v / 1024:.1f} MiB')}")
        ratios = [n / o for n, o in zip(figures["new"]["bytes"], figures["old"]["bytes"])]
        print(f"new / old answer bytes, run by run: {figure(ratios, lambda v: f'{v:.3f}')}")
        for d in daemons.values():
            d.stop()
    finally:
        procs.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
