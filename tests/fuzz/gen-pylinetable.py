#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes seeds for fuzz-pylinetable (tests/fuzz/corpus/pylinetable/) from
real code objects: run it with each CPython 3.8-3.13 (pyenv's), e.g.
  for v in 3.8 3.9 3.10 3.11 3.12 3.13; do python$v gen-pylinetable.py; done
Each seed is the harness's header (minor - 8, co_firstlineno, a bytecode
offset, little-endian) and the line table: co_lnotab before 3.10,
co_linetable after."""
import os
import struct
import sys


def sample(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += i
        else:
            try:
                total -= 1
            except ValueError:
                pass
    return total


def nested(x):
    def inner(y):
        return [v * 2 for v in range(y)
                if v % 2]
    return inner(x) + [x]


out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "pylinetable")
os.makedirs(out, exist_ok=True)
minor = sys.version_info[1]
for fn in (sample, nested, os.path.join):
    code = fn.__code__
    table = code.co_lnotab if minor < 10 else code.co_linetable
    offset = len(code.co_code) // 2  # an instruction in the middle
    offset -= offset % 2
    seed = struct.pack("<Bii", minor - 8, code.co_firstlineno, offset) + table
    with open(os.path.join(out, f"3.{minor}-{fn.__name__}"), "wb") as f:
        f.write(seed)
