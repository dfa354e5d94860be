"""The profile store: snapshots of the past (--since, --from/--to) answered
from retained data, process selections (--comm, --all, --cgroup, --unit,
several --pid), the json format, and the store's memory cap.

Workloads are known by construction: split burns CPU 3:1 in
hot_three_quarters and cold_one_quarter; unique_stacks makes a new stack at
nearly every sample.  Tolerances come from the sampling error (a share of
n samples has a standard deviation of sqrt(p(1-p)/n)) and from the
store's window, one second for the last two minutes.
"""

import datetime
import json
import math
import os
import time
from pathlib import Path

import pytest

import perfdtest
from perfdtest import contains, count_where, parse_folded, show, total


def snapshot_since(daemon, *selection, since="60s", extra=()):
    rc, out, err = daemon.perfctl("snapshot", *selection, "--since", since, *extra,
                                  timeout=60)
    assert rc == 0, f"snapshot {selection} --since {since} exited {rc}: {err}"
    return out, err


def split_shares(stacks):
    hot = count_where(stacks, contains("hot_three_quarters"))
    cold = count_where(stacks, contains("cold_one_quarter"))
    return hot, cold


def assert_split(stacks, what):
    hot, cold = split_shares(stacks)
    n = hot + cold
    assert n >= 1000, f"{what}: only {n} samples in the split's functions\n{show(stacks)}"
    share = hot / n
    tolerance = max(0.03, 4 * math.sqrt(0.75 * 0.25 / n))
    assert abs(share - 0.75) <= tolerance, \
        f"{what}: hot share {share:.3f} of {n}, expected 0.75 +- {tolerance:.3f}\n{show(stacks)}"


def test_history_answers_for_a_process_that_exited(perfd_fast, workloads):
    """A workload runs ~8 s and exits; 5 s later --since 60s answers at once
    with its split, and --from/--to around the middle half of its life holds
    about half of its samples."""
    started = time.time()
    w = workloads("split", 8)
    w.finish(timeout=120)
    ended = time.time()
    time.sleep(5)

    t0 = time.monotonic()
    out, err = snapshot_since(perfd_fast, "--pid", str(w.pid), since="60s")
    waited = time.monotonic() - t0
    # a live snapshot would take the 60 s asked for; the store answers now
    assert waited < 30, f"--since 60s took {waited:.1f} s: not answered from history"
    stacks = parse_folded(out)
    assert {s[0] for s in stacks} == {"split"}, f"comms {set(s[0] for s in stacks)}"
    assert_split(stacks, "--since 60s after exit")
    whole = total(stacks)

    life = ended - started
    lo, hi = started + life / 4, started + 3 * life / 4
    # one end as RFC 3339, the other as Unix seconds: both are accepted
    lo_text = datetime.datetime.fromtimestamp(lo, datetime.timezone.utc).isoformat()
    rc, out, err = perfd_fast.perfctl("snapshot", "--pid", str(w.pid), "--from", lo_text,
                                      "--to", f"{hi:.3f}")
    assert rc == 0, f"--from/--to exited {rc}: {err}"
    half = total(parse_folded(out))
    assert 0.30 <= half / whole <= 0.70, \
        f"--from/--to over half the life held {half} of {whole} samples"


def test_since_of_an_unknown_pid_is_no_such_process(perfd):
    rc, out, err = perfd.perfctl("snapshot", "--pid", "4194000", "--since", "1m")
    assert rc == 4, f"exit {rc}: {err}"
    assert "no process" in err


def cgroup2_root():
    for line in Path("/proc/self/mounts").read_text().splitlines():
        dev, mnt, fstype = line.split()[:3]
        if fstype == "cgroup2":
            return Path(mnt)
    pytest.fail("no cgroup2 hierarchy is mounted", pytrace=False)


@pytest.fixture
def own_cgroup():
    """A cgroup v2 of the test's own, CG/perfd-it-N.service (a unit's name, so
    --unit finds it too); removed at the end."""
    root = cgroup2_root()
    path = root / f"perfd-it-{os.getpid()}-{time.monotonic_ns()}.service"
    path.mkdir()
    yield path
    for _ in range(50):
        try:
            path.rmdir()
            break
        except OSError:
            time.sleep(0.1)


def in_cgroup(cgroup, argv):
    """A command that enters cgroup, then execs argv."""
    return ["/bin/sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh", *argv]


def test_selections_take_the_right_processes(perfd_fast, workloads, own_cgroup):
    split = workloads("split", 3)
    spin = workloads("spin", 3, 0, command=in_cgroup(
        own_cgroup, [perfdtest.workload_binary("spin"), "3", "0"]))
    split.finish(timeout=120)
    spin.finish(timeout=120)
    time.sleep(1)
    cgroup = "/" + own_cgroup.name

    def comms(*selection):
        out, err = snapshot_since(perfd_fast, *selection, since="2m")
        return parse_folded(out)

    by_comm = comms("--comm", "split")
    assert {s[0] for s in by_comm} == {"split"}, f"--comm split: {show(by_comm)}"
    every = comms("--all")
    assert {"split", "spin"} <= {s[0] for s in every}, f"--all: {show(every)}"
    by_cgroup = comms("--cgroup", cgroup)
    assert {s[0] for s in by_cgroup} == {"spin"}, f"--cgroup {cgroup}: {show(by_cgroup)}"
    assert count_where(by_cgroup, contains("spin_burn")) > 1000
    by_unit = comms("--unit", own_cgroup.name)
    assert {s[0] for s in by_unit} == {"spin"}, f"--unit {own_cgroup.name}: {show(by_unit)}"

    # two processes: folded roots each at its comm, json keeps them apart by pid
    both = comms("--pid", str(split.pid), "--pid", str(spin.pid))
    assert count_where(both, lambda s: s[0] == "split" and "spin_burn" in s) == 0
    assert count_where(both, lambda s: s[0] == "spin" and "hot_three_quarters" in s) == 0
    assert count_where(both, lambda s: s[0] == "spin") > 1000
    assert count_where(both, lambda s: s[0] == "split") > 1000
    out, err = snapshot_since(perfd_fast, "--pid", str(split.pid), "--pid", str(spin.pid),
                              since="2m", extra=("--format", "json"))
    doc = json.loads(out)
    pids = {p["pid"]: p for p in doc["processes"]}
    assert set(pids) == {split.pid, spin.pid}, f"json processes: {list(pids)}"
    assert pids[spin.pid]["cgroup"] == cgroup
    assert pids[spin.pid]["unit"] == own_cgroup.name


def frames_named(doc, name):
    return {i for i, f in enumerate(doc["frames"]) if f["function"] == name}


def walk(node, depth=0):
    yield node
    for c in node.get("children", []):
        yield from walk(c, depth + 1)


def test_json_format_has_records_and_matches_folded(perfd_fast, split_c_run):
    # split_c_run's range ends after the window of the last sample: one
    # ending in the window in progress would take it while less than half
    # of it had passed and leave it out later (history.h), so the second
    # snapshot here had 41 samples fewer than the first on a loaded host
    _, selection = split_c_run
    args = (*selection, "--lines")
    rc, folded_out, err = perfd_fast.perfctl("snapshot", *args)
    assert rc == 0, err
    rc, json_out, err = perfd_fast.perfctl("snapshot", *args, "--format", "json")
    assert rc == 0, err
    doc = json.loads(json_out)
    assert doc["kind"] == "cpu" and doc["unit"] == "samples" and doc["period_ns"] > 0

    hot = frames_named(doc, "hot_three_quarters")
    assert hot, f"no hot_three_quarters frame in {doc['frames'][:20]}"
    split_c = perfdtest.REPO / "tests" / "workloads" / "split.c"
    defined = [n for n, line in enumerate(split_c.read_text().splitlines(), 1)
               if "static void hot_three_quarters(" in line]
    assert len(defined) == 1, defined
    for i in hot:
        f = doc["frames"][i]
        assert f["kind"] == "native"
        assert f["module"].endswith("/workloads/split"), f
        assert len(f["build_id"]) == 40, f
        assert f["file"].endswith("split.c") and f["line"] > 0, f
        assert f["start_line"] == defined[0], f
    kernel = [f for f in doc["frames"] if f["kind"] == "kernel"]
    assert all(f["module"] == "[kernel.kallsyms]" and "start_line" not in f for f in kernel), \
        kernel[:5]

    (proc,) = doc["processes"]
    nodes = list(walk(proc["tree"]))
    self_json = sum(n["self"] for n in nodes if n.get("frame") in hot)
    total_json = sum(n["total"] for n in nodes if n.get("frame") in hot)
    stacks = parse_folded(folded_out)
    self_folded = count_where(stacks, lambda s: s[-1].startswith("hot_three_quarters"))
    total_folded = count_where(stacks, lambda s: any(f.startswith("hot_three_quarters")
                                                     for f in s[1:]))
    assert self_json == self_folded and total_json == total_folded, \
        f"json self/total {self_json}/{total_json}, folded {self_folded}/{total_folded}"
    assert proc["tree"]["total"] == total(stacks) == doc["total"]


def test_store_stays_under_its_memory_cap(workloads):
    """Unique stacks without end under --max-memory 16: the store stays
    under 16 MiB, the oldest windows go first and are counted, and the
    last seconds stay whole."""
    cap = 16 << 20
    daemon = perfdtest.start_perfd(frequency=perfdtest.FAST_HZ,
                                   extra_args=["--max-memory", "16"])
    try:
        started = time.time()
        w = workloads("unique_stacks", 2, 12)
        deadline = time.monotonic() + 120
        evicted = 0
        while time.monotonic() < deadline and w.proc.poll() is None:
            st = daemon.status()
            assert st["store"]["memory_bytes"] <= cap, f"store over its cap: {st['store']}"
            evicted = st["store"]["windows_evicted"]
            time.sleep(0.5)
        w.finish(timeout=60)
        st = daemon.status()
        assert st["store"]["memory_bytes"] <= cap, st["store"]
        assert st["store"]["windows_evicted"] > 0 and st["store"]["values_evicted"]["cpu"] > 0, \
            f"nothing was evicted: {st['store']}"
        assert st["samples"]["lost"]["evicted"] >= st["store"]["values_evicted"]["cpu"]

        # the oldest data went: what is left starts well after the workload did
        rc, out, err = daemon.perfctl("--json", "snapshot", "--pid", str(w.pid),
                                      "--since", "5m")
        assert rc == 0, err
        answer = json.loads(out)
        assert answer["from"] > started + 1, \
            f"the oldest window kept starts at {answer['from'] - started:.1f} s into the run"
        # ... and the newest is whole: the last 3 s of the run, all there
        ended = time.time()
        rc, out, err = daemon.perfctl("snapshot", "--pid", str(w.pid),
                                      "--from", f"{ended - 4:.3f}", "--to", f"{ended:.3f}")
        assert rc == 0, err
        recent = parse_folded(out)
        assert count_where(recent, contains("bottom")) > 0.5 * total(recent)
    finally:
        daemon.stop()
