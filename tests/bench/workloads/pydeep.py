"""pydeep.py - a CPython process whose every sample has a Python stack of
exactly DEPTH frames, for the benchmark's cost of walking Python frames.

    DEPTH 1:   <module> spins itself
    DEPTH n:   <module> -> recurse x (n - 1), the deepest one spinning

so a profiler that walks Python frames records DEPTH of them per sample
(recurse is one function: the code object is the same at every level, as
it would be in a recursive program, so the daemon reads it once).  The
spin is pure bytecode (no calls but a clock read every 10,000 rounds), so
almost no sample lands in a C function called from Python.

CPython 3.8 and later; the benchmark starts one per CPU (the GIL keeps a
process on one CPU at a time).

usage: python3 pydeep.py DEPTH [CPU_SECONDS]
    prints "ready DEPTH" once at depth, then spins until the process has
    used CPU_SECONDS of CPU time (default: until killed)
"""
import sys
import time


def recurse(depth, limit):
    if depth > 1:
        return recurse(depth - 1, limit)
    print("ready", DEPTH, flush=True)
    x = 0
    while time.process_time() < limit:
        for i in range(10000):
            x = (x + i * i) % 1000003
    return x


DEPTH = int(sys.argv[1])
LIMIT = float(sys.argv[2]) if len(sys.argv) > 2 else float("inf")
if DEPTH < 1:
    sys.exit("pydeep.py: DEPTH must be at least 1")
if DEPTH == 1:
    print("ready", DEPTH, flush=True)
    x = 0
    while time.process_time() < LIMIT:
        for i in range(10000):
            x = (x + i * i) % 1000003
else:
    recurse(DEPTH - 1, LIMIT)
