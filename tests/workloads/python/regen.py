"""regen.py - one function whose code is replaced again and again, each
new code object at the freed one's address, each of them hot: what
IPython's autoreload and other hot-reloaders do to a running program
(they assign a function's __code__).

Generation G compiles, with exec(), a function named gen_G whose body is
the same as every other generation's but whose first line is G lines
further down: each generation's code object has the same size and another
co_firstlineno.  The one function `hot` is given the previous
generation's code back to a placeholder first, so that its code object is
freed before the next is compiled, and the allocator hands its memory to
the next; then hot gets gen_G's code and spins until the process has used
SECONDS more of CPU time.  Function object, globals and code address are
then the same in every generation: only the code object's contents tell
them apart.

usage: python3 /abs/path/regen.py GENERATIONS SECONDS
    prints "ready CPython 3.X.Y", sleeps 0.5 s, then for each generation,
    before it spins, "gen G CODE FUNC" (id() of hot's code object and of
    hot)
"""
import gc
import platform
import sys
import time

BODY = """def gen_{g}(until):
    x = 0
    while time.process_time() < until:
        for i in range(1000):
            x += i
    return x
"""


def placeholder(until):
    return until


def hot(until):
    return until


def main():
    generations, seconds = int(sys.argv[1]), float(sys.argv[2])
    print("ready", platform.python_implementation(),
          "%d.%d.%d" % sys.version_info[:3], flush=True)
    time.sleep(0.5)  # a snapshot started at "ready" sees all of generation 0
    for g in range(generations):
        hot.__code__ = placeholder.__code__  # the last generation's code is freed
        gc.collect()
        scope = {}
        exec(compile("\n" * g + BODY.format(g=g), "<regen>", "exec"), scope)
        hot.__code__ = scope.pop("gen_%d" % g).__code__
        del scope
        print("gen", g, id(hot.__code__), id(hot), flush=True)
        hot(time.process_time() + seconds)


main()
