"""forks.py - Python in two kinds of child process, on CPython 3.6 and
later: a child made by os.fork() alone (the interpreter's memory copied,
no exec), which runs forked_work(), and a new interpreter started with
subprocess (fork + exec of sys.executable on this script), which runs
subprocess_work().  The parent prints

    forked PID
    subprocess PID
    ready CPython 3.X.Y

and waits for both children.  Each child spins in pure Python (hot lines
"# HOT: forked" and "# HOT: subprocess", called from "# CALL: step")
until it has used CPU_SECONDS of CPU time of its own, and then exits; the
parent exits once both have.  A child also exits of its own accord once
its parent is gone, so killing the parent alone leaves nothing behind.

usage: python3 /abs/path/forks.py [CPU_SECONDS]
    without CPU_SECONDS, everything runs until the parent is killed
"""
import os
import platform
import subprocess
import sys
import time


def spin_until_orphaned(parent, step, cpu_seconds):
    x = 0
    while os.getppid() == parent and (cpu_seconds is None or
                                      time.process_time() < cpu_seconds):
        x = step(x)  # CALL: step
    return x


def forked_work(x):
    for i in range(10000):
        x = (x + i * i) % 1000003  # HOT: forked
    return x


def subprocess_work(x):
    for i in range(10000):
        x = (x * 7 + i) % 1000033  # HOT: subprocess
    return x


def main(cpu_seconds):
    parent = os.getpid()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            spin_until_orphaned(parent, forked_work, cpu_seconds)  # CALL: forked
            status = 0
        finally:
            os._exit(status)
    argv = [sys.executable, os.path.abspath(__file__), "--child", str(parent)]
    if cpu_seconds is not None:
        argv.append(str(cpu_seconds))
    child = subprocess.Popen(argv)
    print("forked", pid, flush=True)
    print("subprocess", child.pid, flush=True)
    print("ready", platform.python_implementation(),
          "%d.%d.%d" % sys.version_info[:3], flush=True)
    try:
        forked_status = os.waitpid(pid, 0)[1]
        subprocess_status = child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    if forked_status or subprocess_status:
        sys.exit("children exited with %d and %d" % (forked_status, subprocess_status))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        limit = float(sys.argv[3]) if len(sys.argv) > 3 else None
        spin_until_orphaned(int(sys.argv[2]), subprocess_work, limit)  # CALL: subprocess
    else:
        main(float(sys.argv[1]) if len(sys.argv) > 1 else None)  # CALL: main
