"""The html snapshot format: one self-contained interactive flame graph page,
opened in its real consumer, headless Chromium (Debian's /usr/bin/chromium,
driven by playwright-core from the npm registry through
flamegraph_browser.js), never parsed by a reader of ours.

One split run (3:1 between hot_three_quarters and cold_one_quarter) is
profiled once for the module and snapshotted over its finished range with
--from/--to, so the page and perfd's own folded output hold the very same
samples: the share the page's search shows for hot_three_quarters must be
the folded share of stacks through it, within the 2 points the issue
allows.  The page must load with no console error and no request beyond
its own file, show the function's figures on hover, zoom to it on a click
(it then fills the canvas) and back out, and paint it magenta once searched
for.  A memory snapshot of grow 256 16 does the same in bytes under
grow_big; a live snapshot of two processes roots each at its comm and pid,
and a C++ template's name (with '<' and '>') reaches the page whole.
The same range as an SVG (--format svg, or -o FILE.svg) must be
well-formed XML, load in Chromium as a document and as an image, and draw
hot_three_quarters as wide as its share of the folded samples, in the
colour of native frames.  Every page's and picture's screenshot is saved
under the test's tmp dir, its path printed (pytest -s shows it).
"""

import re
import time

import pytest

import perfdtest
from perfdtest import contains, count_where, parse_folded, show

MAGENTA = [224, 64, 251]  # #e040fb, the page's colour of a matched frame
TEMPLATE_NAME = "app::engine::Accumulator<unsigned long>::churn(unsigned long)"


def open_in_chromium(page, function, tmp_path):
    """perfdtest.open_in_chromium() on a page for function, and the checks
    every page must pass."""
    report = perfdtest.open_in_chromium(page, function, tmp_path)
    assert report["scripts"] == 2, f"{page}: {report['scripts']} script elements, not 2"
    assert report["hot"], f"{page}: no node named {function!r}; roots {report['roots']}"
    print(f"  ({report['node_count']} nodes)")
    return report


def check_interaction(report, function, folded_share, unit_pattern):
    """Hover, zoom, reset and search of function as a person sees them."""
    hot = report["hot"]
    tip = report["tooltip"].split("\n")
    assert tip[0] == function, f"tooltip names {tip[0]!r}, not {function!r}"
    assert re.search(rf"^total: {unit_pattern}, [\d.]+% of all$", tip[2]), report["tooltip"]
    assert re.search(rf"^self:  {unit_pattern}, [\d.]+% of all$", tip[3]), report["tooltip"]

    before, after = report["hot_rect"]["width"], report["zoomed_rect"]["width"]
    assert report["zoom_root"] == hot["index"], f"the click zoomed to {report['zoom_root']}: {report}"
    assert after >= 0.99 * report["canvas_width"] > before, \
        f"zoomed, {function} is {after:.0f} px of {report['canvas_width']} (was {before:.0f})"
    assert function in report["zoomed_text"] and report["reset_enabled"], report["zoomed_text"]
    assert report["zoom_after_reset"] == 0, "Reset did not zoom back out"

    m = re.match(r"Matched: ([\d.]+)% of all \(", report["match_text"])
    assert m, f"the page shows no matched share: {report['match_text']!r}"
    shown = float(m.group(1))
    assert abs(shown - folded_share) <= 2.0, \
        f"the page says {function} is {shown:.2f}% of all, perfd's folded output {folded_share:.2f}%"
    assert abs(report["matched_share"] - shown) <= 0.01, report
    assert report["hot_pixel"] == MAGENTA, \
        f"{function} is not highlighted: its pixel is {report['hot_pixel']}"


def snapshot(daemon, *args):
    rc, out, err = daemon.perfctl("snapshot", *args, timeout=90)
    assert rc == 0, f"perfctl snapshot {' '.join(args)} exited {rc}: {err}"
    return out


def snapshot_html(daemon, tmp_path, name, *args):
    """perfctl snapshot ARGS -o tmp_path/NAME.html, the format picked by the
    extension alone; returns the path."""
    path = tmp_path / f"{name}.html"
    snapshot(daemon, *args, "-o", str(path))
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>"), text[:200]
    return path


def folded_share(daemon, selection, function, *extra):
    """The share (percent) of function's stacks in perfd's folded output."""
    stacks = parse_folded(snapshot(daemon, *selection, *extra))
    whole = sum(stacks.values())
    assert whole > 0, "an empty folded snapshot"
    return 100.0 * count_where(stacks, contains(function)) / whole, stacks


def finished_range(w, started):
    w.finish(timeout=120)
    time.sleep(1.5)  # the last samples reach the store
    return ("--pid", str(w.pid), "--from", f"{started:.3f}", "--to", f"{time.time():.3f}")


@pytest.fixture(scope="module")
def split_run(perfd_fast):
    started = time.time() - 1
    w = perfdtest.Workload("split", 3)
    try:
        return w.pid, finished_range(w, started)
    finally:
        w.kill()


def test_cpu_page_zooms_searches_and_agrees_with_folded(perfd_fast, split_run, tmp_path):
    pid, selection = split_run
    share, stacks = folded_share(perfd_fast, selection, "hot_three_quarters")
    assert sum(stacks.values()) >= 1000 and share > 50, show(stacks)
    page = snapshot_html(perfd_fast, tmp_path, "split", *selection)
    # --format html says the same on stdout (but for the start time's last
    # digits: it goes through a double, converted anew by each query)
    def timeless(text):
        return re.sub(r'"time_unix_ns":\d+', '"time_unix_ns":T', text)
    assert timeless(snapshot(perfd_fast, *selection, "--format", "html")) == \
        timeless(page.read_text())

    report = open_in_chromium(page, "hot_three_quarters", tmp_path)
    assert report["roots"] == [f"split (pid {pid})"], report["roots"]
    assert report["hot"]["kind"] == "native", report["hot"]
    assert report["summary"].startswith("CPU: "), report["summary"]
    check_interaction(report, "hot_three_quarters", share,
                      r"[\d,]+ samples? \([\d.]+ [mu]?s\)")


def test_memory_page_is_in_bytes(perfd_fast, workloads, tmp_path):
    """grow 192 64 faults in 192 MiB from grow_big: the page counts bytes
    and its share of grow_big is folded's.  grow_small's 64 MiB are 16
    samples at perfd's mean of 4 MiB, so grow_big is all of the page (and
    cannot widen when zoomed) about once in e^16 runs; with the 16 MiB of
    grow 256 16 it was once in e^4, and some runs failed so."""
    started = time.time() - 1
    w = workloads("grow", 192, 64)
    w.expect_line("ready")
    w.expect_line("touched ", timeout=30)
    w.expect_line("done", timeout=30)
    selection = finished_range(w, started)
    share, stacks = folded_share(perfd_fast, selection, "grow_big", "--kind", "memory")
    assert share > 50, show(stacks)
    page = snapshot_html(perfd_fast, tmp_path, "memory", *selection, "--kind", "memory")
    report = open_in_chromium(page, "grow_big", tmp_path)
    assert report["summary"].startswith("Memory growth: "), report["summary"]
    check_interaction(report, "grow_big", share, r"[\d.,]+ (B|KiB|MiB|GiB)")


def test_live_page_roots_each_process_and_keeps_template_names(perfd_fast, workloads, tmp_path):
    """A live snapshot of two processes: one root each, "comm (pid N)",
    and the C++ name with '<' and '>' arrives as C++ spells it."""
    split, templates = workloads("split", 4), workloads("templates", 4)
    page = snapshot_html(perfd_fast, tmp_path, "live", "--pid", str(split.pid),
                         "--pid", str(templates.pid), "--duration", "3")
    report = open_in_chromium(page, TEMPLATE_NAME, tmp_path)
    assert sorted(report["roots"]) == sorted([f"split (pid {split.pid})",
                                              f"templates (pid {templates.pid})"]), report["roots"]
    assert report["hot_names"] == 1, report
    assert report["tooltip"].split("\n")[0] == TEMPLATE_NAME, report["tooltip"]
    assert "2 processes" in report["title"], report["title"]


def test_svg_frames_are_as_wide_as_their_samples(perfd_fast, split_run, tmp_path):
    """The same range as an SVG: well-formed, loads in Chromium as a
    document and as an image, and hot_three_quarters is as wide as its
    share of the folded samples."""
    pid, selection = split_run
    share, stacks = folded_share(perfd_fast, selection, "hot_three_quarters")
    path = tmp_path / "split.svg"
    snapshot(perfd_fast, *selection, "-o", str(path))
    text = path.read_text()
    assert text.startswith("<?xml ") and text.rstrip().endswith("</svg>"), text[:200]
    # --format svg says the same on stdout, but for the start time's digits
    def timeless(t):
        return re.sub(r"from \d{4}-\d\d-\d\dT[\d:]+Z", "from T", t)
    assert timeless(snapshot(perfd_fast, *selection, "--format", "svg")) == timeless(text)

    report = perfdtest.open_in_chromium(path, "hot_three_quarters", tmp_path, f"split (pid {pid})")
    perfdtest.check_svg_document(report, path)
    drawn = perfdtest.svg_share(report, "hot_three_quarters")
    assert abs(drawn - share) <= 2.0, \
        f"hot_three_quarters is {drawn:.2f}% of the SVG's width, {share:.2f}% of the samples"
    assert abs(perfdtest.svg_share(report, f"split (pid {pid})") - 100.0) < 0.1, report["frames"]
    title = report["frames"]["hot_three_quarters"]["titles"][0].split("\n")
    assert title[1].startswith("native"), title
    assert re.match(r"^total: [\d,]+ samples \([\d.]+ [mu]?s\), [\d.]+% of all$", title[2]), title
    # coloured by kind: a native frame's family is red (hue 0 to 18)
    r, g, b = perfdtest.rgb(report["frames"]["hot_three_quarters"]["fills"][0])
    assert r > g and r > b, report["frames"]["hot_three_quarters"]
