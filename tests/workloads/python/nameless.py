"""nameless.py - a hot Python function whose code object has an empty name,
as code.replace() or a code generator may leave one: co_name (and on 3.11
and later co_qualname) is "".  CPython runs it as any other; only a
profiler that takes a name for granted notices.

spin() spins in a loop whose body is one line, marked "# HOT: nameless",
checking the CPU time every 2,000 turns; <module> calls it once, until
the process has used CPU_SECONDS of CPU time.

usage: python3 /abs/path/nameless.py CPU_SECONDS
    prints "ready CPython 3.X.Y" once the code object is renamed, and
    "done" at the end
"""
import platform
import sys
import time


def spin(until):
    x = 0
    while time.process_time() < until:
        for i in range(2000):
            x += i  # HOT: nameless
    return x


names = {"co_name": ""}
if sys.version_info >= (3, 11):
    names["co_qualname"] = ""
spin.__code__ = spin.__code__.replace(**names)
assert spin.__code__.co_name == ""
print("ready", platform.python_implementation(), platform.python_version(), flush=True)
spin(time.process_time() + float(sys.argv[1]))
print("done", flush=True)
