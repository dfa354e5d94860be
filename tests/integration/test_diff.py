"""perfctl diff (issue 12): per function, the change of its self and total
share between two snapshot files, of any formats perfd writes.

Two runs of the tunable workload, the same program but for the cost of its
hot function: before, work_hot() does 4 work units a round and work_other()
1; after, work_hot() 1 and work_other() 1 - work_hot got 4x cheaper.  So
work_hot's self share goes from 80 % to 50 % of the samples (-30 points)
and work_other's from 20 % to 50 % (+30).  Both runs go at once, each for
CPU_SECONDS of CPU on the 999 Hz daemon (about 4000 samples each); each is
snapshotted over the finished range that holds it, before as pprof, after
as folded, so the diff reads two formats.  The tolerance is the issue's,
3 points: the standard error of the difference of an 80 % and a 50 % share
of 4000 samples each is 1.1 points.

The same pair drawn as a differential flame graph (--format html, or -o
FILE.html / FILE.svg) is opened in its real consumer, headless Chromium,
through test_flamegraph.py's harness: the page must load without errors,
paint work_hot as shrinkage (blue) and work_other as growth (red), and its
figures must be the table's; a frame BEFORE alone has must be named at
AFTER's widths and drawn at BEFORE's; the SVG must be well-formed, load
as a document and an image, colour the same way and draw work_hot as wide
as its AFTER share.  Screenshots are saved, their paths printed.
"""

import json
import re
import time
from decimal import ROUND_HALF_UP, Decimal

import pytest

import perfdtest

CPU_SECONDS = 4
MIN_SAMPLES = 3000
TOLERANCE = 3.0  # percentage points


@pytest.fixture(scope="module")
def before_after(perfd_fast, tmp_path_factory):
    """Snapshot files of a 4:1 run (pprof) and a 1:1 run (folded); the 4:1
    one as folded too, beside them."""
    started = time.time() - 1
    runs = [perfdtest.Workload("tunable", CPU_SECONDS, 4, 1),
            perfdtest.Workload("tunable", CPU_SECONDS, 1, 1)]
    try:
        for w in runs:
            w.finish(timeout=120)
    finally:
        for w in runs:
            w.kill()
    time.sleep(1.5)  # the last samples reach the store
    until = time.time()
    tmp = tmp_path_factory.mktemp("diff")
    files = []
    # before.folded too, for a test that adds a frame to it
    for w, name in zip((*runs, runs[0]), ("before.pb.gz", "after.folded", "before.folded")):
        path = tmp / name
        rc, _, err = perfd_fast.perfctl("snapshot", "--pid", str(w.pid), "--from", f"{started:.3f}",
                                        "--to", f"{until:.3f}", "-o", str(path), timeout=60)
        assert rc == 0, f"snapshot of {name} exited {rc}: {err}"
        files.append(path)
    return files[:2]


def diff(daemon, *args):
    doc = daemon.perfctl_json("diff", *args)
    assert doc.get("ok") is True and isinstance(doc.get("functions"), list), doc
    return doc


def row(doc, function):
    rows = [r for r in doc["functions"] if r["function"] == function and not r["kernel"]]
    assert len(rows) == 1, f"{len(rows)} rows of {function}:\n{json.dumps(doc['functions'][:8], indent=1)}"
    return rows[0]


def test_the_cheaper_hot_function_is_the_largest_change(perfd_fast, before_after):
    before, after = before_after
    doc = diff(perfd_fast, str(before), str(after), "--top", "0")
    assert doc["kind"] == "cpu" and doc["unit"] == "samples" and doc["sort"] == "change", doc
    assert doc["before"]["format"] == "pprof" and doc["after"]["format"] == "folded", doc
    assert doc["before"]["total"] >= MIN_SAMPLES and doc["after"]["total"] >= MIN_SAMPLES, \
        (doc["before"], doc["after"])
    first = doc["functions"][0]
    hot, other = row(doc, "work_hot"), row(doc, "work_other")
    assert first["function"] in ("work_hot", "work_other"), doc["functions"][:4]
    # both move by ~30 points, in opposite directions; the drop is work_hot's
    assert abs(hot["self_delta"] - (-30.0)) <= TOLERANCE, hot
    assert abs(other["self_delta"] - 30.0) <= TOLERANCE, other
    assert abs(hot["before"]["self_percent"] - 80.0) <= TOLERANCE, hot
    assert abs(hot["after"]["self_percent"] - 50.0) <= TOLERANCE, hot
    # the two changes are equal by construction (one's share goes to the
    # other): either may come first, as long as the order is by change
    assert {r["function"] for r in doc["functions"][:2]} == {"work_hot", "work_other"} and \
        doc["functions"][0]["change"] >= doc["functions"][1]["change"], doc["functions"][:3]
    # every other function moved less than either
    for r in doc["functions"][2:]:
        assert r["change"] < 5.0, r
    changes = [r["change"] for r in doc["functions"]]
    assert changes == sorted(changes, reverse=True), "not sorted by the larger change"
    for r in doc["functions"]:
        assert r["change"] == max(abs(r["self_delta"]), abs(r["total_delta"])), r
    # values and shares of both sides: the shares are of each side's total
    assert hot["before"]["self"] > 0 and hot["after"]["self"] > 0
    assert abs(hot["after"]["self_percent"] - 100 * hot["after"]["self"] / doc["after"]["total"]) < 0.01
    assert "self_ns" in hot["before"] and "self_ns" not in hot["after"], hot  # folded: no period
    assert row(doc, "main")["total_delta"] == pytest.approx(0, abs=1.0)


def test_the_table_agrees_with_the_json(perfd_fast, before_after):
    before, after = before_after
    doc = diff(perfd_fast, str(before), str(after), "--top", "5")
    assert len(doc["functions"]) == 5 and doc["rows"] > 5
    rc, out, err = perfd_fast.perfctl("diff", str(before), str(after), "--top", "5")
    assert rc == 0, err
    lines = out.splitlines()
    assert re.match(rf"^before: {re.escape(str(before))} \(pprof\): cpu, {doc['before']['total']} samples$",
                    lines[0]), out
    assert re.match(rf"^after:  {re.escape(str(after))} \(folded\): cpu, {doc['after']['total']} samples$",
                    lines[1]), out
    assert "sorted by the larger of |delta self%| and |delta total%|, the top 5:" in out, out
    heading = next(i for i, l in enumerate(lines) if l.rstrip().endswith("FUNCTION"))
    table = lines[heading + 1:]
    assert len(table) == 5, out
    for text, r in zip(table, doc["functions"]):
        b, a = r["before"], r["after"]
        name = re.escape(r["function"] + ("_[k]" if r["kernel"] else ""))
        ds, dt = (re.escape(f"{r[k]:+.2f}") for k in ("self_delta", "total_delta"))
        want = (rf"^\s*{b['self']}\s+{b['self_percent']:.2f}%\s+{a['self']}\s+{a['self_percent']:.2f}%"
                rf"\s+{ds}\s+{b['total']}\s+{b['total_percent']:.2f}%\s+{a['total']}"
                rf"\s+{a['total_percent']:.2f}%\s+{dt}\s+{name}$")
        assert re.match(want, text), f"{text!r} !~ {want}"


def test_reversed_the_changes_change_sign(perfd_fast, before_after):
    before, after = before_after
    fwd = {r["function"]: r for r in diff(perfd_fast, str(before), str(after), "--top", "0")["functions"]}
    back = diff(perfd_fast, str(after), str(before), "--top", "0")
    assert back["before"]["format"] == "folded"
    for r in back["functions"]:
        if r["kernel"]:
            continue
        f = fwd[r["function"]]
        assert r["self_delta"] == pytest.approx(-f["self_delta"], abs=0.011), (r, f)
        assert r["before"] == {k: v for k, v in f["after"].items()}, (r, f)


def test_a_function_on_one_side_only_has_zeros_on_the_other(perfd_fast, before_after, tmp_path):
    before, after = before_after
    only = tmp_path / "only.folded"
    only.write_text("tunable;main;brand_new 500\n" + after.read_text())
    doc = diff(perfd_fast, str(before), str(only), "--top", "0")
    new = row(doc, "brand_new")
    assert new["before"] == {"self": 0, "self_ns": 0, "self_percent": 0, "total": 0, "total_ns": 0,
                             "total_percent": 0}, new
    assert new["after"]["self"] == 500 and new["self_delta"] > 0, new


def test_mismatched_kinds_are_an_error(perfd_fast, before_after, workloads, tmp_path):
    before, _ = before_after
    w = perfdtest.grow_finished(workloads, 64, 8)
    mem = tmp_path / "mem.pb.gz"
    rc, _, err = perfd_fast.perfctl("snapshot", "--pid", str(w.pid), "--since", "1m", "--kind", "memory",
                                    "-o", str(mem), timeout=60)
    assert rc == 0, err
    rc, out, err = perfd_fast.perfctl("diff", str(mem), str(before))
    assert rc == 1, f"exit {rc}\n{out}\n{err}"
    assert re.match(rf"^perfctl: diff: {re.escape(str(mem))} holds a memory profile \(bytes\) and "
                    rf"{re.escape(str(before))} a cpu one \(samples\): they do not compare", err), err
    rc, out, _ = perfd_fast.perfctl("--json", "diff", str(mem), str(before))
    assert rc == 1 and json.loads(out)["error"]["code"] == "kind_mismatch", out
    # --kind memory asks both for memory: the CPU profile has none
    rc, _, err = perfd_fast.perfctl("diff", str(mem), str(before), "--kind", "memory")
    assert rc == 1 and "no memory samples" in err, err
    # memory against memory compares, in bytes
    doc = diff(perfd_fast, str(mem), str(mem))
    assert doc["kind"] == "memory" and doc["unit"] == "bytes" and doc["kernel_frames"] is False, doc
    assert all(r["change"] == 0 for r in doc["functions"]), doc["functions"][:3]
    assert doc["functions"] and not any(r["kernel"] for r in doc["functions"]), doc["functions"][:3]


def test_bad_input_is_a_clear_error(perfd_fast, before_after, tmp_path):
    before, after = before_after
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"this is not a profile\n")
    cut = tmp_path / "cut.pb.gz"
    cut.write_bytes(before.read_bytes()[: before.stat().st_size // 2])
    for bad in (garbage, cut):
        for args in ((str(bad), str(after)), (str(before), str(bad))):
            rc, out, err = perfd_fast.perfctl("diff", *args)
            assert rc == 1, f"{args}: exit {rc}\n{out}\n{err}"
            assert err.startswith(f"perfctl: diff: cannot read {bad}: "), err
            rc, out, _ = perfd_fast.perfctl("--json", "diff", *args)
            assert rc == 1 and json.loads(out)["error"]["code"] == "bad_profile", out
    rc, _, err = perfd_fast.perfctl("diff", str(tmp_path / "missing"), str(after))
    assert rc == 1 and "No such file or directory" in err, err
    for args in ((str(before),), (str(before), str(after), str(after)), (str(before), str(after), "--top", "x")):
        rc, _, err = perfd_fast.perfctl("diff", *args)
        assert rc == 2, f"{args}: exit {rc}: {err}"


# --- the differential flame graph ----------------------------------------------

COLOUR_MARGIN = 60  # of blue over red (shrinkage) or red over blue (growth), of 255


def blue(pixel):
    return pixel[2] > pixel[0] + COLOUR_MARGIN


def red(pixel):
    return pixel[0] > pixel[2] + COLOUR_MARGIN


def write_graph(daemon, *args):
    rc, out, err = daemon.perfctl("diff", *args)
    assert rc == 0, f"perfctl diff {' '.join(args)} exited {rc}: {err}"
    return out, err


def js_fixed(x, digits=2):
    """x as the page's Number.prototype.toFixed(digits) writes it: the
    nearest decimal of the double's exact value, a tie away from zero
    (79.125 is "79.13"), where Python's format rounds a tie to even
    ("79.12")."""
    sign = "-" if x < 0 else ""
    q = abs(Decimal(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{sign}{q}"


def test_the_differential_page_paints_the_cheaper_function_blue(perfd_fast, before_after, tmp_path):
    before, after = before_after
    page = tmp_path / "diff.html"
    _, err = write_graph(perfd_fast, str(before), str(after), "-o", str(page))  # html by its extension
    assert f"written to {page}" in err, err
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>"), text[:200]
    out, _ = write_graph(perfd_fast, str(before), str(after), "--format", "html")
    assert out == text, "--format html on stdout is not the -o file"
    rows = {r["function"]: r for r in diff(perfd_fast, str(before), str(after), "--top", "0")["functions"]
            if not r["kernel"]}

    report = perfdtest.open_in_chromium(page, "work_hot", tmp_path, "work_other")
    assert report["diff"] is True and report["scripts"] == 2, report
    assert report["title"].startswith("perfd differential flame graph"), report["title"]
    hot, other = report["nodes"]["work_hot"], report["nodes"]["work_other"]
    assert hot and other and hot["rect"] and other["rect"], report["nodes"]
    # the colours a person sees on the canvas
    assert blue(hot["pixel"]), f"work_hot got 4x cheaper but is not blue: {hot['pixel']}"
    assert red(other["pixel"]), f"work_other's share grew but it is not red: {other['pixel']}"
    # the widest frame of each (under main; a few samples reach them on
    # other paths, cut short) holds nearly all of the function: its change
    # is the table's, within a point
    for name, node in (("work_hot", hot["node"]), ("work_other", other["node"])):
        r = rows[name]
        assert node["after_total"] >= 0.95 * r["after"]["total"] and \
            node["before_total"] >= 0.95 * r["before"]["total"], (node, r)
        assert node["total_change"] == pytest.approx(r["total_delta"], abs=1.0), (node, r)
    assert abs(hot["node"]["total_change"] - (-30.0)) <= TOLERANCE, hot["node"]
    # the width is AFTER's share, the tooltip the frame's figures
    n, whole = hot["node"], diff(perfd_fast, str(before), str(after))
    assert 100.0 * hot["rect"]["width"] / report["canvas_width"] == \
        pytest.approx(100.0 * n["after_total"] / whole["after"]["total"], abs=0.1), hot["rect"]
    tip = report["tooltip"].split("\n")
    assert tip[0] == "work_hot" and tip[1] == "user", tip
    for line, side, key in ((tip[2], "after:  ", "after"), (tip[3], "before: ", "before")):
        t, sf, w = n[f"{key}_total"], n[f"{key}_self"], whole[key]["total"]
        assert line == f"{side}total {t:,} samples ({js_fixed(100 * t / w)}%), self {sf:,} samples " \
                       f"({js_fixed(100 * sf / w)}%)", tip

    def points(p):
        return "+0.00" if abs(p) < 0.005 else ("+" if p > 0 else "") + js_fixed(p)
    assert tip[4] == f"change: total {points(n['total_change'])} points, " \
                     f"self {points(n['self_change'])} points", tip
    # a few frames of real runs are on one side only (an interrupt's
    # kernel path, say): they are named, not dropped
    m = re.match(r"^(\d+) frames? (is|are) in BEFORE only \(together ([\d.]+)% of BEFORE\)", report["gone"])
    assert not report["gone"] or (m and float(m.group(3)) < 2.0), report["gone"]


def test_frames_only_in_before_stay_in_sight(perfd_fast, before_after, tmp_path):
    """A function BEFORE alone has: width 0 at AFTER's widths, so the page
    names it in its note, and draws it, blue, at BEFORE's."""
    before, after = before_after
    extra = 400
    plus = tmp_path / "before-plus.folded"
    text = before.with_name("before.folded").read_text()
    # called where work_hot is, from main: the heaviest path to it
    path = max((line for line in text.splitlines() if ";work_hot " in line),
               key=lambda line: int(line.rpartition(" ")[2])).rpartition(";work_hot ")[0]
    plus.write_text(text + f"{path};gone_before {extra}\n")
    whole = sum(int(line.rpartition(" ")[2]) for line in plus.read_text().splitlines())
    page = tmp_path / "gone.html"
    write_graph(perfd_fast, str(plus), str(after), "--format", "html", "-o", str(page))
    report = perfdtest.open_in_chromium(page, "work_hot", tmp_path, "gone_before")
    share = 100.0 * extra / whole
    # gone_before and the few frames of the real run on one side only
    m = re.match(r"^(\d+) frames? (is|are) in BEFORE only \(together ([\d.]+)% of BEFORE\)", report["gone"])
    assert m and int(m.group(1)) >= 1 and share - 0.01 <= float(m.group(3)) <= share + 2.0, \
        (report["gone"], share)
    gone = report["nodes"]["gone_before"]
    assert gone["node"]["after_total"] == 0 and gone["node"]["before_total"] == extra, gone
    assert gone["rect"] is None, "a frame of width 0 at AFTER's widths was drawn"
    seen = report["before_view"]["gone_before"]
    assert seen["rect"], f"not drawn at BEFORE's widths: {seen}"
    assert 100 * seen["rect"]["width"] / report["canvas_width"] == pytest.approx(share, abs=0.2), seen
    assert blue(seen["pixel"]), f"a frame that went away is not blue: {seen['pixel']}"
    print(f"  at BEFORE's widths: {report['before_screenshot']}")


def test_the_differential_svg(perfd_fast, before_after, tmp_path):
    before, after = before_after
    svg = tmp_path / "diff.svg"
    doc = perfd_fast.perfctl_json("diff", str(before), str(after), "-o", str(svg))
    assert doc == {"ok": True, "output": str(svg)}, doc
    rows = {r["function"]: r for r in diff(perfd_fast, str(before), str(after), "--top", "0")["functions"]
            if not r["kernel"]}
    report = perfdtest.open_in_chromium(svg, "work_hot", tmp_path, "work_other")
    perfdtest.check_svg_document(report, svg)
    frames = report["frames"]
    assert blue(perfdtest.rgb(frames["work_hot"]["fills"][0])), frames["work_hot"]
    assert red(perfdtest.rgb(frames["work_other"]["fills"][0])), frames["work_other"]
    for name in ("work_hot", "work_other"):
        assert perfdtest.svg_share(report, name) == \
            pytest.approx(rows[name]["after"]["total_percent"], abs=0.1), (frames[name], rows[name])
    title = frames["work_hot"]["titles"][0].split("\n")
    m = re.match(r"^change: total ([-+][\d.]+) points, self ([-+][\d.]+) points$", title[4])
    assert m and float(m.group(1)) == pytest.approx(rows["work_hot"]["total_delta"], abs=1.0), title


def test_graph_options_are_checked(perfd_fast, before_after, tmp_path):
    before, after = before_after
    for args, says in (
            (("-o", str(tmp_path / "x.txt")), "name the file .html or .svg"),
            (("--format", "text", "-o", str(tmp_path / "x.html")), "-o writes a flame graph"),
            (("--format", "png"), "--format takes text, html or svg")):
        rc, _, err = perfd_fast.perfctl("diff", str(before), str(after), *args)
        assert rc == 2 and says in err, f"{args}: exit {rc}: {err}"
    rc, out, _ = perfd_fast.perfctl("--json", "diff", str(before), str(after), "--format", "svg")
    error = json.loads(out)["error"]
    assert rc == 2 and error["code"] == "usage" and "needs -o FILE" in error["message"], out
    assert not (tmp_path / "x.html").exists()
    rc, _, err = perfd_fast.perfctl("diff", str(before), str(after), "-o", str(tmp_path / "no" / "d.svg"))
    assert rc == 1 and "cannot write" in err and "No such file or directory" in err, err
