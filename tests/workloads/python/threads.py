"""threads.py - two Python threads, each burning CPU in its own function,
on CPython 3.8 and later (threading.get_native_id()).

Thread "py-alpha" runs spin_alpha(), thread "py-beta" runs spin_beta(): pure
Python loops, so they take turns holding the GIL and each gets about half
of one CPU.  Each thread names itself (its kernel comm, written to
/proc/self/task/TID/comm) and then prints

    alpha TID
    beta TID

with TID its kernel thread id, so every sample taken after those lines
carries the new name.  The main thread prints "ready CPython 3.X.Y" once
both lines are out and waits for them in time.sleep() (off CPU, without
the GIL), waking every 0.1 s to look.  At its end each thread prints

    alpha ran CPU WALL

with CPU its CPU seconds (time.thread_time()) and WALL its seconds alive
since it named itself: its share of CPU time is the share of its time it
held the GIL, less a little (the GIL's hand-over, preemptions).

The hot lines carry "# HOT: alpha" and "# HOT: beta".

usage: python3 /abs/path/threads.py [CPU_SECONDS]
    runs until the process has used CPU_SECONDS of CPU time, or until killed
"""
import platform
import sys
import threading
import time


def spin_alpha(limit):
    x = 0
    while limit is None or time.process_time() < limit:
        for i in range(10000):
            x = (x + i * i) % 1000003  # HOT: alpha
    return x


def spin_beta(limit):
    y = 0
    while limit is None or time.process_time() < limit:
        for i in range(10000):
            y = (y * 7 + i) % 1000033  # HOT: beta
    return y


def start(name, target, limit, started):
    def run():
        tid = threading.get_native_id()
        with open("/proc/self/task/%d/comm" % tid, "w") as f:
            f.write("py-" + name)
        t0 = time.monotonic()
        print(name, tid, flush=True)
        started.release()
        target(limit)  # CALL: target
        # one write: print() writes its pieces apart, and the other
        # thread's line would come between them
        sys.stdout.write("%s ran %.4f %.4f\n" % (name, time.thread_time(), time.monotonic() - t0))
        sys.stdout.flush()
    t = threading.Thread(target=run, name="py-" + name, daemon=True)
    t.start()
    return t


def main(limit):
    started = threading.Semaphore(0)
    threads = [start("alpha", spin_alpha, limit, started)]
    started.acquire()  # alpha's line first: the test reads them in order
    threads.append(start("beta", spin_beta, limit, started))
    started.acquire()
    print("ready", platform.python_implementation(),
          "%d.%d.%d" % sys.version_info[:3], flush=True)
    while any(t.is_alive() for t in threads):
        time.sleep(0.1)  # SLEEP: main


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else None)
