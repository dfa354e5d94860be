#!/usr/bin/python3
"""starved-build.py - how long root's snapshot takes while a nobody client
keeps ps requests pipelined on 16 connections, with perfd and that client
pinned to one CPU (base/loopstep.h: a model's slices behind the clients,
never starved by them).

    PERFD_BUILD=build-san tests/bench/starved-build.py [SNAPSHOTS]

Starts perfd from PERFD_BUILD (1999 Hz, --verbose), fills its store with
3 s of unique_stacks, pins perfd to CPU 0, starts test_trust.py's chatter
as nobody on CPU 0 too, and asks for SNAPSHOTS (3) pprof snapshots of that
span.  Prints each snapshot's time from request to file and perfd's own
line on each model build ("Model: ... built in N slices ..., T ms in all").
A figure, not a test: the integration test (test_trust.py) asserts only
that the snapshot is answered while the client still runs.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import perfdtest  # noqa: E402
import test_trust  # noqa: E402


def main():
    snapshots = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    tmpdir = perfdtest.make_tmpdir()
    os.chmod(tmpdir, 0o755)
    d = perfdtest.start_perfd(frequency=1999, tmpdir=tmpdir, extra_args=("--verbose",))
    child = None
    try:
        w, begin, end = perfdtest.fill_with_unique_stacks(3)
        subprocess.run(["taskset", "-a", "-p", "-c", "0", str(d.pid)], capture_output=True,
                       check=True)
        child = test_trust.as_nobody(test_trust.chatter, d.socket_path, 40)
        subprocess.run(["taskset", "-p", "-c", "0", str(child[0])], capture_output=True,
                       check=True)
        time.sleep(1)  # its requests flowing
        for _ in range(snapshots):
            t0 = time.monotonic()
            p = subprocess.run([perfdtest.perfctl_binary(), "--socket", d.socket_path,
                                "snapshot", "--pid", str(w.pid), "--from", f"{begin:.3f}",
                                "--to", f"{end:.3f}", "-o", os.path.join(tmpdir, "s.pb.gz")],
                               capture_output=True, text=True, timeout=60)
            print(f"snapshot answered in {time.monotonic() - t0:.2f} s (rc {p.returncode})",
                  flush=True)
    finally:
        if child:
            os.kill(child[0], signal.SIGKILL)
        log = d.stderr()
        d.stop()
    for line in log.splitlines():
        if "Model:" in line:
            print(line)


if __name__ == "__main__":
    main()
