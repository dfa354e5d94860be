#!/usr/bin/env python3
"""gen-pyeval.py - writes the seeds of fuzz-pyeval.c into
tests/fuzz/corpus/pyeval/: a function at 0x3000 that jumps twice into the
FDE at 0x1000 (and once into others, and tail-calls one), an .eh_frame_hdr
at 0x100000 listing FDEs from 0x1000 to 0x6000 in the usual encoding, and
the FDEs from 0x100200 on, 32 bytes apart, the one at 0x1000 a part (its
instructions define the CFA first), the others functions; then the same
with jcc, and with a pc-relative table.

usage: python3 tests/fuzz/gen-pyeval.py"""
import os
import struct

FUNC, HDR, EH, FDE_SIZE, PART_SIZE = 0x3000, 0x100000, 0x100200, 32, 0x800
STARTS = [0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000]


def hdr(table_enc=0x3b):
    out = bytes([1, 0x1b, 0x03, table_enc]) + struct.pack("<iI", 0, len(STARTS))
    for i, s in enumerate(STARTS):
        out += struct.pack("<ii", s - HDR, EH + FDE_SIZE * i - HDR)
    return out


def fdes(parts):
    out = b""
    for i, s in enumerate(STARTS):
        at = EH + FDE_SIZE * i
        fde = struct.pack("<IiiI", FDE_SIZE - 4, 0x100, s - (at + 8), PART_SIZE) + b"\0"
        fde += b"\x0e\x20" if i in parts else b"\x41\x0e\x10"
        out += fde.ljust(FDE_SIZE, b"\0")
    return out


def jump(at, target, jcc=False):
    size = 6 if jcc else 5
    op = b"\x0f\x85" if jcc else b"\xe9"
    return at, op + struct.pack("<i", target - (FUNC + at + size))


def func(jumps, size=64):
    f = bytearray(size)
    for at, code in jumps:
        f[at:at + len(code)] = code
    return bytes(f)


def seed(f, h, e):
    return struct.pack("<H", len(f)) + f + struct.pack("<H", len(h)) + h + e


seeds = {
    "two-jumps": seed(func([jump(0, 0x1000), jump(10, 0x1234), jump(20, 0x2000),
                            jump(30, 0x5100)]), hdr(), fdes({0})),
    "jcc": seed(func([jump(0, 0x1100, True), jump(10, 0x1200, True)]), hdr(), fdes({0})),
    "function-first": seed(func([jump(0, 0x2100), jump(5, 0x2200), jump(10, 0x2300),
                                 jump(20, 0x6100), jump(30, 0x6200)]), hdr(), fdes({5})),
    "pcrel-table": seed(func([jump(0, 0x1100), jump(10, 0x1200)]), hdr(0x1b), fdes({0})),
}
d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "pyeval")
os.makedirs(d, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
