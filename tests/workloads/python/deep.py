"""deep.py - a Python stack DEPTH calls deep (30 by default) that spins at
its leaf, on CPython 3.6 and later:

    <module> -> main -> recurse x DEPTH -> Spinner.spin

Every recurse frame but the deepest is on the line marked
"# CALL: recurse", the deepest calls the spinner from "# CALL: spin", and
Spinner.spin runs the line marked "# HOT: deep".  spin is a method, so its
co_qualname ("Spinner.spin", 3.11+) differs from its co_name ("spin").
For benchmarks of the frame walk's cost per frame, and for tests of deep
stacks and qualified names.

usage: python3 /abs/path/deep.py [CPU_SECONDS [DEPTH]]
    prints "ready CPython 3.X.Y" once at depth, then spins until the
    process has used CPU_SECONDS of CPU time, or until killed
"""
import platform
import sys
import time


class Spinner:
    def __init__(self, cpu_seconds):
        self.cpu_seconds = cpu_seconds

    def spin(self):
        print("ready", platform.python_implementation(),
              "%d.%d.%d" % sys.version_info[:3], flush=True)
        x = 0
        while self.cpu_seconds is None or time.process_time() < self.cpu_seconds:
            for i in range(10000):
                x = (x + i * i) % 1000003  # HOT: deep
        return x


def recurse(depth, spinner):
    if depth > 1:
        return recurse(depth - 1, spinner) + 1  # CALL: recurse
    return spinner.spin() + 1  # CALL: spin


def main(cpu_seconds, depth):
    return recurse(depth, Spinner(cpu_seconds))  # CALL: deep


if __name__ == "__main__":
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    main(float(sys.argv[1]) if len(sys.argv) > 1 else None, depth)  # CALL: main
