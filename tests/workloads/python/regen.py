"""regen.py - one function whose code is replaced again and again, each
new code object at the freed one's address, each of them hot: what
IPython's autoreload and other hot-reloaders do to a running program
(they assign a function's __code__).

It first spins in warm_up until it gets SIGUSR1 (so that a test can wait
until the profiler has described it).  Then generation G compiles, with
exec(), a function named gen_G whose body is the same as every other
generation's but whose first line is G lines further down: each
generation's code object has the same size and another co_firstlineno.
The one function `hot` is given its code back to a placeholder first, so
that the last generation's code object is freed before the next is
compiled and the allocator hands its memory to the next; then hot gets
gen_G's code and spins until the process has used SECONDS more of CPU
time, and on to the next 0.93-0.95 s of CLOCK_MONOTONIC.  Function object, globals and code address are then the same in
every generation: only the code object's contents tell them apart.

usage: python3 /abs/path/regen.py GENERATIONS SECONDS
    prints "ready CPython 3.X.Y"; after SIGUSR1, for each generation,
    before it spins, "gen G CODE FUNC TIME" (id() of hot's code object and
    of hot, time.monotonic(): CLOCK_MONOTONIC, perfd's sample clock), and
    "end TIME" at the end
"""
import gc
import platform
import signal
import sys
import time

# A generation spins its CPU time, then on until the next 0.93-0.95 s of
# the monotonic clock, so that the next one starts just before a whole
# second of perfd's clock (a test looks at the whole seconds after).
BODY = """def gen_{g}(until):
    x = 0
    while time.process_time() < until or not 0.93 <= time.monotonic() % 1.0 < 0.95:
        for i in range(1000):
            x += i
    return x
"""

go = False


def on_usr1(signum, frame):
    global go
    go = True


def warm_up():
    x = 0
    while not go:
        for i in range(1000):
            x += i
    return x


def placeholder(until):
    return until


def hot(until):
    return until


def main():
    generations, seconds = int(sys.argv[1]), float(sys.argv[2])
    signal.signal(signal.SIGUSR1, on_usr1)
    print("ready", platform.python_implementation(),
          "%d.%d.%d" % sys.version_info[:3], flush=True)
    warm_up()
    last = None
    for g in range(generations):
        hot.__code__ = placeholder.__code__  # the last generation's code is freed
        for attempt in range(20):
            gc.collect()
            scope = {}
            exec(compile("\n" * g + BODY.format(g=g), "<regen>", "exec"), scope)
            code = scope.pop("gen_%d" % g).__code__
            del scope
            # (3.8 frees it a little later: compile again until its
            # memory is the new one's)
            if last is None or id(code) == last or attempt == 19:
                break
            del code
        hot.__code__ = code
        last = id(code)
        del code
        print("gen", g, id(hot.__code__), id(hot), "%.6f" % time.monotonic(), flush=True)
        hot(time.process_time() + seconds)
    print("end", "%.6f" % time.monotonic(), flush=True)


main()
