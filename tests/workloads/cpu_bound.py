"""cpu_bound.py - a CPU-bound Python program for Debian's /usr/bin/python3.11,
which is built without frame pointers: its native stacks (interpreter loop
inside Py_BytesMain inside main) can only be unwound with its .eh_frame.

usage: python3.11 cpu_bound.py CPU_SECONDS
"""
import sys
import time


def inner(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def outer(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        inner(20000)


if __name__ == "__main__":
    outer(float(sys.argv[1]))
