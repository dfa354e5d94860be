"""split.py - a text-processing loop whose CPU splits 3:1 between two
Python functions, by construction, on CPython 3.6 and later (3.6, which
has no time.thread_time(), times with time.process_time()).

main() deduplicates words twice over: slow_path() checks each word against
a list (a linear scan in list_contains, ~75% of the CPU), fast_path()
against a set (~25%).  Each call is a short chunk of work (0.5-2
ms), and main() picks the next call by the thread CPU time each
function has used so far (time.thread_time(), which counts only this
thread's CPU, user and kernel): whichever is behind its share runs next.
So the 3:1 split holds over any window longer than a few dozen chunks, on
an idle or a loaded machine, without calibrating iteration counts.  Chunk
sizes vary at random (0.5x to 1.5x): chunks of one fixed length, about as
long as the 1 ms sampling period, made the calls beat with the timer, and
Debian's 3.11 showed 78-88% instead of 75% in one function.

The CPU that main() itself spends timing the calls is outside both
functions, and is under 1% of the total.

Lines the tests look up carry a marker comment: "# HOT: slow" (where
slow_path spends its time), "# HOT: fast", "# CALL: slow" / "# CALL: fast"
(main's calls) and "# CALL: main" (<module>'s call).

usage: python3 /abs/path/split.py [CPU_SECONDS]
    prints "ready CPython 3.X.Y" (the interpreter's own idea of what it is)
    once both functions have run, then runs for CPU_SECONDS of this
    thread's CPU time in all, or until killed when no argument is given
"""
import platform
import random
import sys
import time

WORDS = ["w%05d" % i for i in range(0, 20000, 7)]   # the "text"
SEEN = ["s%05d" % i for i in range(1000)]           # no word is ever seen
SEEN_SET = set(SEEN)
# Words per call, and passes over them in fast_path: each call of either
# function is then 0.5-2 ms of CPU on a current x86 core, long against the
# ~1.5 us that reading the thread's CPU clock costs.
CHUNK = 100
FAST_PASSES = 400


def slow_path(words, seen):
    hits = 0
    for w in words:
        if w in seen:  # HOT: slow
            hits += 1
    return hits


def fast_path(words, seen):
    hits = 0
    for _ in range(FAST_PASSES):
        for w in words:
            if w in seen:  # HOT: fast
                hits += 1
    return hits


def main(cpu_seconds):
    clock = getattr(time, "thread_time", time.process_time)  # 3.6: process_time
    slow_time = fast_time = 0.0
    i = 0
    rng = random.Random(1)
    announced = False
    start = clock()
    while cpu_seconds is None or clock() - start < cpu_seconds:
        n = rng.randrange(CHUNK // 2, CHUNK * 3 // 2)
        words = WORDS[i:i + n]
        i = (i + n) % (len(WORDS) - 2 * CHUNK)
        t0 = clock()
        if slow_time <= 3.0 * fast_time:
            slow_path(words, SEEN)  # CALL: slow
            slow_time += clock() - t0
        else:
            fast_path(words, SEEN_SET)  # CALL: fast
            fast_time += clock() - t0
        if not announced and fast_time > 0.01:
            print("ready", platform.python_implementation(),
                  "%d.%d.%d" % sys.version_info[:3], flush=True)
            announced = True


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else None)  # CALL: main
