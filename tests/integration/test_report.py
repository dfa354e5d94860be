"""perfctl report (issue 12): a pstats-like table of functions, from perfd
or from a snapshot file in any format perfd writes that carries stacks.

One run of the coordinator workload (coordinator() calls leaf_a() for 3
work units and leaf_b() for 1, and does next to nothing itself) is
profiled once for the module on the 999 Hz daemon, about 5000 samples;
every test reports the same finished range with --from/--to, so the
live report and the reports of the folded, json and pprof snapshots of
that range are of the very same samples and must agree row for row.
The tolerance of the 3:1 split is the issue's: 2 points (the standard
error of a 75 % share of 5000 samples is 0.6 point).  A memory report of
grow 256 16 shows bytes under grow_big.
"""

import json
import re
import shutil
import time

import pytest

import perfdtest

CPU_SECONDS = 5
MIN_SAMPLES = 4000
TOLERANCE = 2.0  # percentage points


@pytest.fixture(scope="module")
def coordinator_run(perfd_fast):
    """A finished run of coordinator and the range (--from, --to) holding it."""
    return perfdtest.finished_range("coordinator", CPU_SECONDS)


def report(daemon, *args):
    """perfctl --json report ARGS: the parsed document, asserted ok."""
    doc = daemon.perfctl_json("report", *args)
    assert doc.get("ok") is True and isinstance(doc.get("functions"), list), doc
    return doc


def names(doc):
    return [r["function"] for r in doc["functions"]]


def row(doc, function):
    rows = [r for r in doc["functions"] if r["function"] == function and not r["kernel"]]
    assert len(rows) == 1, f"{len(rows)} rows of {function}:\n{json.dumps(doc['functions'][:12], indent=1)}"
    return rows[0]


def test_sort_self_puts_the_hot_leaf_first_and_the_coordinator_low(perfd_fast, coordinator_run):
    _, selection = coordinator_run
    doc = report(perfd_fast, *selection, "--top", "0")
    assert doc["kind"] == "cpu" and doc["unit"] == "samples" and doc["sort"] == "self"
    assert doc["total"] >= MIN_SAMPLES, f"only {doc['total']} samples of coordinator"
    assert doc["period_ns"] == round(1e9 / perfdtest.FAST_HZ), doc["period_ns"]
    order = names(doc)
    assert order[:2] == ["leaf_a", "leaf_b"], order[:10]
    coord = row(doc, "coordinator")
    assert coord["self_percent"] < 1.0, coord
    assert coord["total_percent"] > 95.0, coord
    # an order of magnitude below the colder leaf's self (~25%); not a rank
    # among the rest: those are kernel frames and markers of ~0.5% each,
    # above or below the coordinator's as the machine's load goes
    assert coord["self"] * 10 < row(doc, "leaf_b")["self"], (coord, row(doc, "leaf_b"))
    leaf = row(doc, "leaf_a")
    assert leaf["self_ns"] == leaf["self"] * doc["period_ns"], leaf

    # the table people read: the same first row, in samples and seconds
    rc, out, err = perfd_fast.perfctl("report", *selection, "--top", "3")
    assert rc == 0, err
    lines = out.splitlines()
    assert re.match(r"^perfd: cpu, \d+ samples = [\d.]+s at 1.00ms a sample; \d+ functions$",
                    lines[0]), out
    table = lines[lines.index(next(l for l in lines if l.lstrip().startswith("SELF"))) + 1:]
    assert len(table) == 3, out
    assert re.match(rf"^\s*{leaf['self']}\s+[\d.]+s\s+[\d.]+%\s+{leaf['total']}\s+[\d.]+s\s+[\d.]+%\s+leaf_a$",
                    table[0]), out


def test_sort_total_puts_the_coordinator_above_its_leaves(perfd_fast, coordinator_run):
    _, selection = coordinator_run
    doc = report(perfd_fast, *selection, "--sort", "total", "--top", "0")
    order = names(doc)
    assert order.index("coordinator") < order.index("leaf_a") < order.index("leaf_b"), order[:10]
    totals = [r["total"] for r in doc["functions"]]
    assert totals == sorted(totals, reverse=True), "not sorted by total"
    assert row(doc, "main")["total"] >= row(doc, "coordinator")["total"]

    by_name = names(report(perfd_fast, *selection, "--sort", "name", "--top", "0"))
    assert by_name == sorted(by_name), by_name


def test_callers_of_the_hot_leaf_is_its_one_caller(perfd_fast, coordinator_run):
    _, selection = coordinator_run
    doc = report(perfd_fast, *selection, "--callers", "leaf_a")
    callers = doc["callers"]
    assert callers["function"] == "leaf_a"
    assert callers["total"] == row(doc, "leaf_a")["total"]
    top = callers["callers"][0]
    assert top["function"] == "coordinator" and top["percent"] >= 99.0, callers
    assert sum(c["value"] for c in callers["callers"]) == callers["total"]

    rc, out, err = perfd_fast.perfctl("report", *selection, "--callers", "leaf_a")
    assert rc == 0, err
    assert re.search(r"^Callers of leaf_a: \d+ samples", out, re.M), out
    assert re.search(r"^\s*\d+\s+[\d.]+s\s+(99\.\d\d|100\.00)%\s+coordinator$", out, re.M), out


def test_callees_of_the_coordinator_split_3_to_1(perfd_fast, coordinator_run):
    _, selection = coordinator_run
    doc = report(perfd_fast, *selection, "--callees", "coordinator")
    callees = doc["callees"]
    assert callees["total"] >= MIN_SAMPLES * 0.95, callees["total"]
    share = {c.get("function"): c["percent"] for c in callees["callees"]}
    assert abs(share.get("leaf_a", 0) - 75.0) <= TOLERANCE, callees
    assert abs(share.get("leaf_b", 0) - 25.0) <= TOLERANCE, callees
    assert callees["self_percent"] < 1.0, callees
    assert callees["self"] + sum(c["value"] for c in callees["callees"]) == callees["total"]

    rc, out, err = perfd_fast.perfctl("report", *selection, "--callees", "coordinator")
    assert rc == 0, err
    assert re.search(r"^\s*\d+\s+\S+\s+[\d.]+%\s+\(self\)$", out, re.M), out
    assert re.search(r"^\s*\d+\s+[\d.]+s\s+7\d\.\d\d%\s+leaf_a$", out, re.M), out


def snapshot_file(daemon, tmp_path, name, *args):
    path = tmp_path / name
    rc, _, err = daemon.perfctl("snapshot", *args, "-o", str(path), timeout=60)
    assert rc == 0, f"perfctl snapshot {' '.join(args)} -o {path} exited {rc}: {err}"
    return path


def table(doc, drop=()):
    """The rows, with the keys in drop left out."""
    return [{k: v for k, v in r.items() if k not in drop} for r in doc["functions"]]


def test_every_format_of_one_range_gives_the_same_table(perfd_fast, coordinator_run, tmp_path):
    _, selection = coordinator_run
    live = report(perfd_fast, *selection, "--top", "0")
    files = {fmt: snapshot_file(perfd_fast, tmp_path, f"c.{ext}", *selection)
             for fmt, ext in (("pprof", "pb.gz"), ("json", "json"), ("folded", "folded"))}
    docs = {fmt: report(perfd_fast, str(path), "--top", "0") for fmt, path in files.items()}
    for fmt, doc in docs.items():
        assert doc["source"] == "file" and doc["format"] == fmt, doc
        assert doc["total"] == live["total"], f"{fmt}: {doc['total']} != {live['total']}"
    assert table(docs["pprof"]) == table(docs["json"]), "pprof and json rows differ"
    assert table(docs["json"]) == table(live), "the json file's rows differ from perfd's"
    assert docs["pprof"]["period_ns"] == live["period_ns"]
    # folded carries no period: the same rows but for the times
    no_time = ("self_ns", "total_ns")
    assert table(docs["folded"], no_time) == table(live, no_time), "folded rows differ"
    assert "period_ns" not in docs["folded"]

    # the format is told by the content, not by the name
    for fmt, path in files.items():
        anon = tmp_path / f"profile-{fmt}.dat"
        shutil.copy(path, anon)
        assert table(report(perfd_fast, str(anon), "--top", "0")) == table(docs[fmt]), fmt


def test_lines_give_rows_per_line_in_every_format(perfd_fast, coordinator_run, tmp_path):
    _, selection = coordinator_run
    live = report(perfd_fast, *selection, "--lines", "--top", "0")
    pb = snapshot_file(perfd_fast, tmp_path, "l.pb.gz", *selection, "--lines")
    js = snapshot_file(perfd_fast, tmp_path, "l.json", *selection, "--lines")
    from_pprof = report(perfd_fast, str(pb), "--lines", "--top", "0")
    assert table(from_pprof) == table(report(perfd_fast, str(js), "--lines", "--top", "0"))
    assert table(from_pprof) == table(live)
    leaf = live["functions"][0]
    assert leaf["function"] == "leaf_a" and leaf["file"].endswith("tests/workloads/coordinator.c"), leaf
    assert leaf["line"] > 0, leaf
    # the callers with lines name the call sites: coordinator's line that calls leaf_a
    doc = report(perfd_fast, *selection, "--lines", "--callers", "leaf_a")
    site = doc["callers"]["callers"][0]
    source = (perfdtest.REPO / "tests/workloads/coordinator.c").read_text().splitlines()
    assert site["function"] == "coordinator" and "leaf_a(" in source[site["line"] - 1], site


def test_memory_report_is_in_bytes_with_grow_big_first(perfd_mem, workloads, tmp_path):
    """grow 256 16: 256 MiB faulted in from grow_big, 16 from grow_small;
    kernel frames (the fault path under every memory sample) are left out,
    so the growth is the functions' self."""
    w = perfdtest.grow_finished(workloads, 256, 16)
    selection = ("--pid", str(w.pid), "--since", "1m", "--kind", "memory")
    doc = report(perfd_mem, *selection)
    assert doc["kind"] == "memory" and doc["unit"] == "bytes", doc
    assert doc["kernel_frames"] is False
    assert names(doc)[0] == "grow_big", names(doc)
    big = row(doc, "grow_big")
    assert big["self"] >= 0.6 * 256 * 2**20, big
    assert "self_ns" not in big
    assert names(doc).index("grow_small") == 1, names(doc)

    rc, out, err = perfd_mem.perfctl("report", *selection)
    assert rc == 0, err
    assert re.search(r"^\s*\d+\.\dM\s+\d+\.\d\d%\s+\d+\.\dM\s+\d+\.\d\d%\s+grow_big$", out, re.M), out

    pb = snapshot_file(perfd_mem, tmp_path, "m.pb.gz", *selection)
    assert table(report(perfd_mem, str(pb))) == table(doc), "the memory pprof's rows differ"


def test_bad_input_is_a_clear_error(perfd_fast, coordinator_run, tmp_path):
    _, selection = coordinator_run
    good = snapshot_file(perfd_fast, tmp_path, "g.pb.gz", *selection).read_bytes()
    cases = {
        "garbage.folded": b"this is not a profile\n",
        "cut.pb.gz": good[: len(good) // 2],
        "cut.json": b'{"frames": [',
        "binary": bytes(range(256)),
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        rc, out, err = perfd_fast.perfctl("report", str(path))
        assert rc == 1, f"{name}: exit {rc}\n{out}\n{err}"
        assert err.startswith(f"perfctl: report: cannot read {path}: "), f"{name}: {err}"
        rc, out, _ = perfd_fast.perfctl("--json", "report", str(path))
        assert rc == 1 and json.loads(out)["error"]["code"] == "bad_profile", f"{name}: {out}"
    rc, _, err = perfd_fast.perfctl("report", str(tmp_path / "missing.pb.gz"))
    assert rc == 1 and "No such file or directory" in err, err
    rc, _, err = perfd_fast.perfctl("report", str(tmp_path), "--pid", "1", "--since", "1m")
    assert rc == 2, err
    rc, _, err = perfd_fast.perfctl("report", *selection, "--callers", "no_such_function")
    assert rc == 1 and "no function 'no_such_function'" in err, err
    rc, _, err = perfd_fast.perfctl("report", str(tmp_path / "g.pb.gz"), "--kind", "memory")
    assert rc == 1 and "no memory samples" in err, err
