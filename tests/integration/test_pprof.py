"""The pprof snapshot format (issue 12), read by its real consumer, go tool
pprof (Debian's golang-go), never by a parser of ours.

One split run (3:1 between hot_three_quarters and cold_one_quarter) is
profiled once for the module; every CPU test snapshots the same finished
range with --from/--to, so pprof's figures and perfd's own folded output
are of the very same samples and their shares must agree to rounding (the
2 points the issue allows are generous).  A memory snapshot of grow 256 16
shows its bytes under grow_big.  perfctl writes the .pb.gz with -o, the
format chosen by the extension alone.  `go tool pprof -raw` prints every
Location with its functions' start lines ("fn file:line s=START") and the
Mappings with their build-ids and flags: the start lines of a C and of a
Python workload function must be the lines their definitions are on in
the source, and kernel frames must sit in one [kernel.kallsyms] mapping
with the running kernel's build-id.  A big pprof (and speedscope) answer
is encoded and compressed off perfd's loop: root's status answers
meanwhile, and go tool pprof reads every sample of it.  A pprof answer is
its line and then a frame of exactly "profile_bytes" raw bytes
(include/perfd/protocol.h), which perfctl streams to the file; a frame cut
short leaves no file.
"""

import base64
import gzip
import json
import os
import re
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import perfdtest
from perfdtest import function, go_pprof, parse_folded, top_rows

PYTHON = "/usr/bin/python3.11"  # Debian's, as test_python.py runs it


def snapshot_pprof(daemon, tmp_path, name, *args):
    """perfctl snapshot ARGS -o tmp_path/NAME.pb.gz; returns the path."""
    out = tmp_path / f"{name}.pb.gz"
    rc, _, err = daemon.perfctl("snapshot", *args, "-o", str(out), timeout=60)
    assert rc == 0, f"perfctl snapshot {' '.join(args)} -o {out} exited {rc}: {err}"
    data = out.read_bytes()
    assert data[:2] == b"\x1f\x8b", f"{out} is not gzip: {data[:40]!r}"
    return out


def test_top_matches_perfds_folded_output(perfd_fast, split_c_run, tmp_path, gohome):
    """go tool pprof -top puts hot_three_quarters first, and its flat shares
    of hot and cold are perfd's folded self shares of the same range."""
    pid, selection = split_c_run
    rc, out, err = perfd_fast.perfctl("snapshot", *selection)
    assert rc == 0, err
    stacks = parse_folded(out)
    whole = sum(stacks.values())
    assert whole >= 1000, f"only {whole} samples of split"
    folded = {}
    for s, n in stacks.items():
        folded[function(s[-1])] = folded.get(function(s[-1]), 0) + n

    top = go_pprof(gohome, snapshot_pprof(perfd_fast, tmp_path, "split", *selection), "-top")
    rows = top_rows(top)
    assert rows and rows[0][2] == "hot_three_quarters", f"pprof's top is not hot:\n{top}"
    flat = {fn: pct for pct, _, fn, _ in rows}
    for fn in ("hot_three_quarters", "cold_one_quarter"):
        mine = 100.0 * folded.get(fn, 0) / whole
        assert fn in flat, f"{fn} missing from pprof -top:\n{top}"
        assert abs(flat[fn] - mine) <= 2.0, \
            f"{fn}: pprof says {flat[fn]:.2f}%, perfd's folded {mine:.2f}%\n{top}"
    assert 0.70 <= flat["hot_three_quarters"] / (flat["hot_three_quarters"] +
                                                 flat["cold_one_quarter"]) <= 0.80, top


def test_tags_show_pid_comm_and_tid(perfd_fast, split_c_run, tmp_path, gohome):
    pid, selection = split_c_run
    tags = go_pprof(gohome, snapshot_pprof(perfd_fast, tmp_path, "threads", *selection,
                                           "--threads"), "-tags")
    assert re.search(r"^\s*pid: Total", tags, re.M), tags
    assert re.search(rf"\(\s*100%\): {pid}$", tags, re.M), f"no pid {pid} tag:\n{tags}"
    assert re.search(r"^\s*comm: Total", tags, re.M) and re.search(r": split$", tags, re.M), tags
    # split is single-threaded: its one thread is the process
    assert re.search(r"^\s*tid: Total", tags, re.M), f"no tid tag with --threads:\n{tags}"
    assert re.search(rf"\(\s*100%\): {pid}$", tags.split("tid: Total", 1)[1], re.M), tags


def test_lines_show_line_numbers(perfd_fast, split_c_run, tmp_path, gohome):
    _, selection = split_c_run
    top = go_pprof(gohome, snapshot_pprof(perfd_fast, tmp_path, "lines", *selection,
                                          "--lines"), "-top", "-lines")
    rows = top_rows(top)
    assert rows and rows[0][2] == "hot_three_quarters", top
    assert re.fullmatch(r"\S*split\.c:\d+", rows[0][3]), f"no file:line for hot:\n{top}"


def test_memory_snapshot_shows_bytes_under_grow_big(perfd, workloads, tmp_path, gohome):
    """grow 256 16 faults in 256 MiB from grow_big and 16 from grow_small:
    pprof reads space in bytes, grow_big above grow_small by their cum.
    (256 MiB make ~64 samples at the default 4 MiB a sample: a standard
    error of an eighth, so 60 % is three of them below.)"""
    w = perfdtest.grow_finished(workloads, 256, 16)
    path = snapshot_pprof(perfd, tmp_path, "memory", "--pid", str(w.pid), "--since", "1m",
                          "--kind", "memory")
    top = go_pprof(gohome, path, "-top", "-cum", "-sample_index=space")
    assert re.search(r"^Type: space$", top, re.M), top
    rows = top_rows(top)
    cum = {fn: c for _, c, fn, _ in rows}
    assert "grow_big" in cum, f"grow_big missing from pprof -top:\n{top}"
    assert re.fullmatch(r"[\d.]+[kMG]?B", cum["grow_big"]), f"not bytes: {cum['grow_big']}\n{top}"
    names = [fn for _, _, fn, _ in rows]
    assert "grow_small" not in names or names.index("grow_big") < names.index("grow_small"), top
    big = float(cum["grow_big"][:-2]) if cum["grow_big"].endswith("MB") else 0
    assert big >= 0.6 * 256 * 1.048576, f"grow_big holds {cum['grow_big']} of 256 MiB\n{top}"


def test_a_pprof_answer_is_a_frame_of_raw_bytes(perfd_fast, split_c_run, tmp_path, gohome):
    """Over the raw socket, a pprof snapshot's line says "encoding":
    "frame" and "profile_bytes": N, and exactly N bytes follow it: a status
    pipelined behind the snapshot is answered right after them, and a
    frame one byte longer or shorter would leave that answer unreadable.
    The bytes are a gzip file that go tool pprof -raw reads, of the very
    samples the file perfctl writes for the same range holds."""
    pid, selection = split_c_run
    begin, end = float(selection[3]), float(selection[5])
    snap = {"version": 1, "command": "snapshot", "pid": pid, "from": begin, "to": end,
            "format": "pprof", "frame": True}
    with perfd_fast.connect(timeout=60) as s:
        s.sendall((json.dumps(snap) + "\n").encode() + b'{"version": 1, "command": "status"}\n')
        buf = b""
        while buf.count(b"\n") < 1:
            chunk = s.recv(65536)
            assert chunk, f"perfd closed the connection before its answer: {buf[:200]!r}"
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        head = perfdtest.decode_answer(line + b"\n", "a pprof snapshot")
        assert head.get("ok") is True and head.get("encoding") == "frame", head
        assert "profile" not in head, head
        n = head["profile_bytes"]
        assert isinstance(n, int) and n > 0, head
        while len(rest) < n or b"\n" not in rest[n:]:
            chunk = s.recv(65536)
            assert chunk, f"perfd closed the connection {len(rest)} bytes after a {n}-byte frame's line"
            rest += chunk
    frame, after = rest[:n], rest[n:]
    status = perfdtest.decode_answer(after, "status after the frame")
    assert status.get("ok") is True and "frequency_hz" in status, str(status)[:500]
    assert frame[:2] == b"\x1f\x8b" and gzip.decompress(frame), frame[:40]

    # a client that does not ask for a frame (one written before frames)
    # gets the same bytes in base64 in the line, and nothing after it
    del snap["frame"]
    with perfd_fast.connect(timeout=60) as s:
        s.sendall((json.dumps(snap) + "\n").encode() + b'{"version": 1, "command": "status"}\n')
        lines = perfdtest.read_lines(s, 2)
    old = perfdtest.decode_answer(lines[0], "a pprof snapshot without a frame")
    assert old.get("encoding") == "base64" and "profile_bytes" not in old, \
        {k: v for k, v in old.items() if k != "profile"}
    assert "frequency_hz" in perfdtest.decode_answer(lines[1], "status after it")

    raw, b64 = tmp_path / "raw.pb.gz", tmp_path / "base64.pb.gz"
    raw.write_bytes(frame)
    b64.write_bytes(base64.b64decode(old["profile"], validate=True))
    mine = snapshot_pprof(perfd_fast, tmp_path, "perfctl", *selection)
    assert "hot_three_quarters" in go_pprof(gohome, raw, "-raw")
    tops = [top_rows(go_pprof(gohome, path, "-top", "-sample_index=samples"))
            for path in (raw, mine, b64)]
    assert tops[0] and tops[0] == tops[1] == tops[2], \
        f"the frame, perfctl's file and the base64 answer differ:\n{tops}"


def serve_once(path, reply):
    """A daemon of one answer at path: it reads one request line, sends
    reply (bytes) and closes.  Returns its thread."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def run():
        with srv:
            c, _ = srv.accept()
            with c:
                buf = b""
                while b"\n" not in buf:
                    chunk = c.recv(4096)
                    if not chunk:
                        return
                    buf += chunk
                c.sendall(reply)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


FRAME_HEAD = {"version": 1, "ok": True, "pid": 1, "comm": "x", "processes": [], "from": 1.0,
              "to": 2.0, "duration_seconds": 1.0, "kind": "cpu", "unit": "samples",
              "samples": 5, "value": 5, "period_ns": 1000000, "sampling": "fixed",
              "exited": False, "format": "pprof", "encoding": "frame"}


def snapshot_from(path, out):
    return perfdtest.run_perfctl("--socket", str(path), "snapshot", "--pid", "1", "--since", "10",
                                 "-o", str(out), timeout=30)


def test_a_frame_cut_short_leaves_no_file(tmp_path):
    """A daemon that dies mid-frame (here: one that says 1000 bytes and
    closes after 100) makes perfctl fail, saying how many bytes of how many
    came, and leaves neither a file claimed whole nor its .tmp; a file that
    was there before stays as it was."""
    sock = tmp_path / "fake.sock"
    out = tmp_path / "cut.pb.gz"
    head = dict(FRAME_HEAD, profile_bytes=1000)
    t = serve_once(sock, json.dumps(head).encode() + b"\n" + os.urandom(100))
    rc, _, err = snapshot_from(sock, out)
    t.join(10)
    assert rc != 0, f"perfctl took a cut frame: {err}"
    assert "100 of the profile's 1000 bytes" in err and str(out) in err, err
    assert not out.exists() and not Path(f"{out}.tmp").exists(), list(tmp_path.iterdir())

    out.write_bytes(b"before")
    sock.unlink()
    t = serve_once(sock, json.dumps(head).encode() + b"\n" + os.urandom(999))
    rc, _, err = snapshot_from(sock, out)
    t.join(10)
    assert rc != 0, err
    assert out.read_bytes() == b"before" and not Path(f"{out}.tmp").exists(), err


def test_a_whole_frame_is_written_as_it_came(tmp_path):
    """The frame's bytes, exactly, and nothing of what follows them."""
    sock = tmp_path / "fake.sock"
    out = tmp_path / "whole.pb.gz"
    payload = os.urandom(300000)
    head = dict(FRAME_HEAD, profile_bytes=len(payload))
    t = serve_once(sock, json.dumps(head).encode() + b"\n" + payload + b"trailing")
    rc, _, err = snapshot_from(sock, out)
    t.join(10)
    assert rc == 0, err
    assert out.read_bytes() == payload


def test_a_base64_answer_of_an_older_perfd_is_written_decoded(tmp_path):
    """A perfd from before frames ignores "frame" and sends the bytes in
    base64 in the line: perfctl writes them decoded, exactly; one that is
    not base64 is an error and no file."""
    sock = tmp_path / "fake.sock"
    out = tmp_path / "old.pb.gz"
    payload = os.urandom(100000)
    head = dict(FRAME_HEAD, encoding="base64", profile=base64.b64encode(payload).decode())
    t = serve_once(sock, json.dumps(head).encode() + b"\n")
    rc, _, err = snapshot_from(sock, out)
    t.join(10)
    assert rc == 0, err
    assert out.read_bytes() == payload
    sock.unlink()
    bad = tmp_path / "bad.pb.gz"
    t = serve_once(sock, json.dumps(dict(head, profile="not base64!")).encode() + b"\n")
    rc, _, err = snapshot_from(sock, bad)
    t.join(10)
    assert rc != 0 and "not base64" in err, err
    assert not bad.exists() and not list(tmp_path.glob("bad.pb.gz*"))


# -raw: "    12: 0x11cf M=5 hot_three_quarters /path/split.c:51 s=49", inlined
# lines on the lines below it; "3: 0x0/0xffffffff8226e97a/0x0 [kernel.kallsyms]
# 24a3...ac [FN][FL][LN][IN]" under Mappings.
RAW_LOCATION = re.compile(r"^\s*(\d+): 0x([0-9a-f]+)(?: M=(\d+))? (.*)$")
RAW_LINE = re.compile(r"(\S*) (\S*):(\d+) s=(\d+)")
RAW_MAPPING = re.compile(r"^(\d+): 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ (\S+) (\S*)\s*(.*)$")


def raw_tables(text):
    """go tool pprof -raw's Locations as {id: (address, mapping id or None,
    [(function, file, line, start_line)])} and Mappings as {id: (file,
    build_id, flags)}."""
    locations, mappings, section, last = {}, {}, None, None
    for line in text.splitlines():
        if line in ("Locations", "Mappings"):
            section = line
            continue
        if section == "Locations":
            m = RAW_LOCATION.match(line)
            if m:
                last = int(m.group(1))
                locations[last] = (int(m.group(2), 16),
                                   int(m.group(3)) if m.group(3) else None, [])
                rest = m.group(4)
            elif last is not None:
                rest = line
            else:
                continue
            for fn, file, ln, start in RAW_LINE.findall(rest):
                locations[last][2].append((fn, file, int(ln), int(start)))
        elif section == "Mappings":
            m = RAW_MAPPING.match(line)
            if m:
                mappings[int(m.group(1))] = (m.group(2), m.group(3), m.group(4))
    assert locations and mappings, f"no Locations or Mappings in pprof -raw:\n{text[:3000]}"
    return locations, mappings


def def_line(path, text):
    """The 1-based number of the one line of the file at path that holds
    text (a function's definition)."""
    found = [n for n, line in enumerate(Path(path).read_text().splitlines(), 1) if text in line]
    assert len(found) == 1, f"{path}: {len(found)} lines hold {text!r}: {found}"
    return found[0]


def kernel_build_id():
    """The running kernel's build-id, from /sys/kernel/notes (4-aligned ELF
    notes), read here independently of perfd."""
    data = Path("/sys/kernel/notes").read_bytes()
    off = 0
    while off + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from("<III", data, off)
        name = data[off + 12:off + 12 + namesz]
        desc = off + 12 + (namesz + 3) // 4 * 4
        if kind == 3 and name == b"GNU\0":
            return data[desc:desc + descsz].hex()
        off = desc + (descsz + 3) // 4 * 4
    raise AssertionError(f"no GNU build-id note in /sys/kernel/notes: {data.hex()}")


def test_raw_shows_the_start_line_of_a_c_function(perfd_fast, split_c_run, tmp_path, gohome):
    """With --lines, hot_three_quarters' Function starts on the line of its
    definition in split.c (DWARF's decl line), and so does main."""
    _, selection = split_c_run
    raw = go_pprof(gohome, snapshot_pprof(perfd_fast, tmp_path, "starts", *selection,
                                          "--lines"), "-raw")
    locations, _ = raw_tables(raw)
    split_c = perfdtest.REPO / "tests" / "workloads" / "split.c"
    want = {"hot_three_quarters": def_line(split_c, "static void hot_three_quarters("),
            "main": def_line(split_c, "int main(")}
    for fn, line in want.items():
        got = {(file, start) for _, _, lines in locations.values()
               for f, file, _, start in lines if f == fn}
        assert got, f"no {fn} in pprof -raw:\n{raw[:3000]}"
        assert got == {(str(split_c), line)}, f"{fn} starts at {got}, not split.c:{line}"


def test_raw_shows_the_start_line_of_a_python_function(perfd_fast, workloads, tmp_path,
                                                        gohome):
    """Debian's CPython 3.11 running split.py: slow_path's Function starts
    on its def line (co_firstlineno), also without --lines."""
    split = perfdtest.python_workload("split")
    w = workloads("split.py", command=[PYTHON, split, "2"])
    w.expect_line("ready", timeout=60)
    path = snapshot_pprof(perfd_fast, tmp_path, "python", "--pid", str(w.pid), "--duration", "2")
    w.finish()
    raw = go_pprof(gohome, path, "-raw")
    locations, _ = raw_tables(raw)
    for fn in ("slow_path", "fast_path"):
        line = def_line(split, f"def {fn}(")
        got = {(file, start) for _, _, lines in locations.values()
               for f, file, _, start in lines if f == fn}
        assert got == {(split, line)}, f"{fn} starts at {got}, not {split}:{line}\n{raw[:3000]}"


def test_kernel_frames_are_in_the_kernel_mapping(perfd_fast, workloads, tmp_path, gohome):
    """syscalls spends its CPU in read(2): every kernel location (a kernel
    address) is in one Mapping, [kernel.kallsyms] with the running
    kernel's build-id and [FN] (pprof does not symbolize it again), and
    no user location is."""
    w = workloads("syscalls", 3)
    path = snapshot_pprof(perfd_fast, tmp_path, "kernel", "--pid", str(w.pid), "--duration", "2")
    w.finish()
    raw = go_pprof(gohome, path, "-raw")
    locations, mappings = raw_tables(raw)
    kernel = [i for i, (file, _, _) in mappings.items() if file == "[kernel.kallsyms]"]
    assert len(kernel) == 1, f"kernel mappings {kernel} in:\n{raw[-3000:]}"
    file, build_id, flags = mappings[kernel[0]]
    assert build_id == kernel_build_id(), f"kernel build-id {build_id!r}"
    assert "[FN]" in flags, flags
    in_kernel = [loc for loc in locations.values() if loc[0] >= 0xffff800000000000]
    assert len(in_kernel) >= 3, f"only {len(in_kernel)} kernel locations:\n{raw[:3000]}"
    assert all(m == kernel[0] for _, m, _ in in_kernel), \
        [loc for loc in in_kernel if loc[1] != kernel[0]][:5]
    assert any(fn == "vfs_read" for _, _, lines in in_kernel for fn, _, _, _ in lines), \
        f"no vfs_read among the kernel locations:\n{raw[:3000]}"
    user = [loc for loc in locations.values() if 0 < loc[0] < 0xffff800000000000 and loc[1]]
    assert user and all(m != kernel[0] for _, m, _ in user)


BIG_FILL_SECONDS = 20  # of unique_stacks at 1999 Hz: some 30k samples, each stack new
# Root's status while big models are built (in slices of MODEL_SLICE_NS,
# api/model_slices.h) and encoded (on the lanes), with margin for the load
# of a shared two-CPU machine: issue 27 asks 100 ms.  Built in one go, one
# such model held the loop 340-650 ms.
BIG_STATUS_DEADLINE = 0.25


def test_a_big_answer_is_encoded_off_the_loop(tmp_path, gohome):
    """While a pprof and a speedscope snapshot of BIG_FILL_SECONDS of
    unique_stacks (some 30k unique stacks) are answered at once, their
    models built in slices on the loop and encoded on the lanes, root's
    status answers every time within BIG_STATUS_DEADLINE (built in one go,
    the models held it 340-650 ms each; encoded on the loop, the pprof alone
    2-5 s), and both answers hold every sample of the range: go tool
    pprof's total is the count perfctl reports, and the speedscope weights
    are that count times the period.  Meanwhile a third client asks for the
    same pprof and goes away while its model is being built (the build is
    cancelled: status counts it; the sanitized build's LSan checks that
    nothing leaks), and a fourth sends "stop" while its model is being
    built (taken: its answer still comes, whole)."""
    d = perfdtest.start_perfd(frequency=1999, extra_args=["--max-memory", "256"])
    try:
        w, begin, end = perfdtest.fill_with_unique_stacks(BIG_FILL_SECONDS)
        span = ("--pid", str(w.pid), "--from", f"{begin:.3f}", "--to", f"{end:.3f}")
        request = json.dumps({"version": 1, "command": "snapshot", "pid": w.pid,
                              "from": begin, "to": end, "format": "pprof",
                              "frame": True}).encode() + b"\n"
        outs = {"pprof": tmp_path / "big.pb.gz", "speedscope": tmp_path / "big.speedscope.json"}
        before = perfdtest.status_within_deadline(d)[1]["loop"]
        poller = perfdtest.StatusPoller(d)
        try:
            with d.connect(timeout=120) as gone, d.connect(timeout=120) as stopper:
                gone.sendall(request)
                stopper.sendall(request)
                # once both models are being built (some 30k stacks each:
                # far from built yet), one client goes away, the other stops
                deadline = time.monotonic() + 10
                while perfdtest.status_within_deadline(d)[1]["loop"]["models_building"] < 2:
                    assert time.monotonic() < deadline, "the models were not being built in 10 s"
                    time.sleep(0.005)
                gone.close()
                stopper.sendall(b'{"version": 1, "command": "stop"}\n')
                runs = {fmt: subprocess.Popen([perfdtest.perfctl_binary(), "--socket", d.socket_path,
                                               "snapshot", *span, "-o", str(out)],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                        for fmt, out in outs.items()}
                stopped = perfdtest.read_answers(stopper, 1, "snapshot")[0]
            errs = {fmt: p.communicate(timeout=120)[1].decode(errors="replace")
                    for fmt, p in runs.items()}
        finally:
            took = poller.stop()
        for fmt, p in runs.items():
            assert p.returncode == 0, f"perfctl snapshot -o {outs[fmt]} exited {p.returncode}: {errs[fmt]}"
        assert len(took) >= 10, f"status asked only {len(took)} times during the answers"
        after = perfdtest.status_within_deadline(d)[1]["loop"]
        print(f"status during the big answers: {perfdtest.status_figures(took)}; loop {after}")
        assert max(took) < BIG_STATUS_DEADLINE, \
            f"status waited for the big answers: {perfdtest.status_figures(took)}"

        counts = {fmt: re.search(r"(\d+) samples", err) for fmt, err in errs.items()}
        assert all(counts.values()), f"no sample count in perfctl's summaries: {errs}"
        n = int(counts["pprof"].group(1))
        assert n >= 15000, f"only {n} samples of unique_stacks: not a big answer"
        assert int(counts["speedscope"].group(1)) == n, errs
        assert stopped.get("ok") is True and stopped.get("samples") == n, \
            f"the answer of the client that sent stop mid-build: {str(stopped)[:500]}"
        assert after["model_builds_cancelled"] - before["model_builds_cancelled"] == 1, \
            f"the build of the client that went away was not cancelled: {before} -> {after}"
        assert after["models_built"] - before["models_built"] == 3 and after["models_building"] == 0, \
            f"builds: {before} -> {after}"

        top = go_pprof(gohome, outs["pprof"], "-top", "-sample_index=samples")
        total = re.search(r"of (\d+) total", top)
        assert total and int(total.group(1)) == n, \
            f"go tool pprof counts {total and total.group(1)} samples, perfctl {n}:\n{top[:2000]}"
        functions = {fn for _, _, fn, _ in top_rows(top)}
        assert {"bottom", "descend"} <= functions, f"unique_stacks' functions missing:\n{top[:2000]}"

        doc = json.loads(outs["speedscope"].read_text())
        weights = sum(sum(p["weights"]) for p in doc["profiles"])
        period = weights // n
        assert weights == n * period and abs(period - 1e9 / 1999) < 1000, \
            f"speedscope weighs {weights} for {n} samples"
        perfdtest.status_within_deadline(d)
    finally:
        d.stop()
