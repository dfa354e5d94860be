#!/usr/bin/python3
"""Seeds for fuzz-state from a real state file: its first records, and
those up to its first window, in the harness's odd (record) mode, and the first bytes of the file as they are in
its even (whole file) mode.

usage: gen-state.py SEGMENT OUTDIR
"""
import struct
import sys
from pathlib import Path

seg, out = Path(sys.argv[1]), Path(sys.argv[2])
data = seg.read_bytes()
pos, records = 32, []
while pos + 9 <= len(data):
    length, _crc, rtype = struct.unpack_from("<IIB", data, pos)
    records.append((rtype, data[pos + 9:pos + 9 + length]))
    pos += 9 + length
for n in (8, 40, 160):
    body = b"".join(struct.pack("<BH", t, len(p)) + p for t, p in records[:n] if len(p) < 65536)
    (out / f"records-{n}").write_bytes(b"\x01" + body)
first_window = next(i for i, (t, _) in enumerate(records) if t == 6)
body = b"".join(struct.pack("<BH", t, len(p)) + p for t, p in records[:first_window + 1])
(out / "records-to-a-window").write_bytes(b"\x01" + body)
(out / "file-head").write_bytes(b"\x00" + data[:4096])
