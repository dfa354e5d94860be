"""The pprof snapshot format (issue 12), read by its real consumer, go tool
pprof (Debian's golang-go), never by a parser of ours.

One split run (3:1 between hot_three_quarters and cold_one_quarter) is
profiled once for the module; every CPU test snapshots the same finished
range with --from/--to, so pprof's figures and perfd's own folded output
are of the very same samples and their shares must agree to rounding (the
2 points the issue allows are generous).  A memory snapshot of grow 256 16
shows its bytes under grow_big.  perfctl writes the .pb.gz with -o, the
format chosen by the extension alone.
"""

import os
import re
import shutil
import subprocess
import tempfile

import pytest

import perfdtest
from perfdtest import function, parse_folded

GO = shutil.which("go") or "/usr/bin/go"

# "  1529.53ms 76.59% 76.59%  1535.54ms 76.89%  hot_three_quarters [file:line]"
TOP_ROW = re.compile(r"^\s*(\S+)\s+([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+([\d.]+)%\s+(\S+)(.*)$")


@pytest.fixture(scope="module")
def gohome():
    """go writes its cache under HOME/GOCACHE: a throwaway one."""
    d = tempfile.mkdtemp(prefix="perfd-go-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def go_pprof(gohome, path, *args):
    """Runs `go tool pprof ARGS PATH` offline; returns its stdout."""
    assert os.access(GO, os.X_OK), "go is not installed (Debian's golang-go, make deps-test)"
    env = dict(os.environ, HOME=gohome, GOCACHE=os.path.join(gohome, "cache"),
               GOPATH=os.path.join(gohome, "gopath"), GOPROXY="off", GOFLAGS="",
               PPROF_TMPDIR=gohome)
    p = subprocess.run([GO, "tool", "pprof", *args, str(path)], capture_output=True,
                       env=env, timeout=60)
    assert p.returncode == 0, \
        f"go tool pprof {' '.join(args)} exited {p.returncode}: {p.stderr.decode(errors='replace')}"
    return p.stdout.decode(errors="replace")


def top_rows(text):
    """-top's table as [(flat_percent, cum_text, function, rest)]."""
    rows = []
    for line in text.splitlines():
        m = TOP_ROW.match(line)
        if m and m.group(1) != "flat":
            rows.append((float(m.group(2)), m.group(4), m.group(6), m.group(7).strip()))
    return rows


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
