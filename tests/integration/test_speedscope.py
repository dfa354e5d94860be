"""The speedscope snapshot format, checked against speedscope's own file
format schema: the file-format-schema.json that the speedscope npm package
ships (pinned in packaging/install-deps.sh, installed by `make deps-test`
into BUILD/npm, or $PERFD_NPM_DIR), validated with Debian's
python3-jsonschema as the draft-07 schema it declares.  Both are test
dependencies: missing, they fail the test rather than skip it.

One split run (3:1 between hot_three_quarters and cold_one_quarter) is
profiled once for the module and snapshotted over its finished range with
--from/--to, so speedscope's weights and perfd's own json and folded output
are of the very same samples: the weights add up to the json total x the
period exactly, and the hot function's self share is folded's within 2
points.  A live (--duration) snapshot, --comm with --threads and --all take
the other paths; a Python one has files and lines, a memory snapshot of
grow 256 16 (--since) weighs bytes.
perfctl picks the format by the .speedscope.json extension alone, which
also proves that it wins over .json.
"""

import copy
import importlib.metadata
import json
import os
from pathlib import Path

import pytest

import perfdtest
from perfdtest import function, parse_folded

SPEEDSCOPE_VERSION = "1.25.0"  # as packaging/install-deps.sh pins it
PYTHON = "/usr/bin/python3.11"  # Debian's, as test_python.py runs it


def npm_dir():
    return Path(os.environ.get("PERFD_NPM_DIR") or perfdtest.build_dir() / "npm")


@pytest.fixture(scope="module")
def validator():
    """A draft-07 validator of speedscope's schema, from its npm package."""
    package = npm_dir() / "node_modules" / "speedscope"
    schema_path = package / "dist" / "release" / "file-format-schema.json"
    assert schema_path.is_file(), \
        f"{schema_path} is missing: `make deps-test` installs speedscope from the npm registry"
    version = json.loads((package / "package.json").read_text())["version"]
    assert version == SPEEDSCOPE_VERSION, f"speedscope {version} installed, not {SPEEDSCOPE_VERSION}"
    try:
        import jsonschema
    except ImportError:
        pytest.fail("python3-jsonschema is missing (Debian's package; `make deps-test`)",
                    pytrace=False)
    schema = json.loads(schema_path.read_text())
    assert schema.get("$schema") == "http://json-schema.org/draft-07/schema#", schema.get("$schema")
    jsonschema.Draft7Validator.check_schema(schema)
    v = jsonschema.Draft7Validator(schema)
    v.perfd_version = importlib.metadata.version("jsonschema")
    return v


def check_valid(validator, doc, what):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"{what} is not a valid speedscope file (jsonschema " \
        f"{validator.perfd_version}):\n" + "\n".join(
            f"  at {'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:10])


def snapshot_speedscope(daemon, tmp_path, name, *args):
    """perfctl snapshot ARGS -o tmp_path/NAME.speedscope.json; returns the
    parsed file."""
    out = tmp_path / f"{name}.speedscope.json"
    rc, _, err = daemon.perfctl("snapshot", *args, "-o", str(out), timeout=120)
    assert rc == 0, f"perfctl snapshot {' '.join(args)} -o {out} exited {rc}: {err}"
    try:
        return json.loads(out.read_text())
    except ValueError as e:
        raise AssertionError(f"{out} is not JSON ({e}): {out.read_text()[:300]!r}")


def snapshot_json(daemon, *args):
    """The --format json profile of the same snapshot."""
    rc, out, err = daemon.perfctl("snapshot", *args, "--format", "json", timeout=120)
    assert rc == 0, f"perfctl snapshot {' '.join(args)} --format json exited {rc}: {err}"
    return json.loads(out)


def profile_named(doc, prefix):
    found = [p for p in doc["profiles"] if p["name"].startswith(prefix)]
    assert len(found) == 1, \
        f"{len(found)} profiles named {prefix!r}...: {[p['name'] for p in doc['profiles']][:20]}"
    return found[0]


def self_weights(doc, profile):
    """{function: self weight} of one profile, by its stacks' leaf frames."""
    frames = doc["shared"]["frames"]
    out = {}
    for stack, w in zip(profile["samples"], profile["weights"]):
        assert stack, "an empty stack"
        leaf = function(frames[stack[-1]]["name"])
        out[leaf] = out.get(leaf, 0) + w
    return out


def check_profile(doc, profile):
    """Speedscope's invariants beyond the schema's types: one weight per
    sample, frame indexes in the table, endValue the weights' sum."""
    n = len(doc["shared"]["frames"])
    assert profile["type"] == "sampled", profile["type"]
    assert len(profile["samples"]) == len(profile["weights"]), profile["name"]
    assert all(0 <= i < n and isinstance(i, int) for s in profile["samples"] for i in s), \
        f"{profile['name']}: a frame index outside the {n} frames"
    assert all(isinstance(w, int) and w > 0 for w in profile["weights"]), profile["name"]
    assert profile["startValue"] == 0 and profile["endValue"] == sum(profile["weights"]), \
        f"{profile['name']}: {profile['startValue']}..{profile['endValue']}, " \
        f"weights add up to {sum(profile['weights'])}"


def test_validator_rejects_what_speedscope_would(validator):
    """The check has teeth: files speedscope cannot read fail the schema."""
    good = {"$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": [{"name": "main"}]},
            "profiles": [{"type": "sampled", "name": "p", "unit": "nanoseconds",
                          "startValue": 0, "endValue": 1, "samples": [[0]], "weights": [1]}]}
    check_valid(validator, good, "the minimal file")
    for break_it in (lambda d: d["profiles"][0].update(unit="samples"),
                     lambda d: d["profiles"][0].pop("weights"),
                     lambda d: d["profiles"][0]["samples"].append(["0"]),
                     lambda d: d["shared"]["frames"][0].pop("name"),
                     lambda d: d.update({"$schema": "speedscope"})):
        bad = copy.deepcopy(good)
        break_it(bad)
        assert not validator.is_valid(bad), f"the schema takes {bad}"


def test_cpu_file_is_valid_and_adds_up(perfd_fast, split_c_run, validator, tmp_path):
    pid, selection = split_c_run
    doc = snapshot_speedscope(perfd_fast, tmp_path, "split", *selection)
    check_valid(validator, doc, "the split snapshot")
    assert doc["exporter"] == "perfd" and doc["name"] == "perfd cpu snapshot", doc["name"]
    assert len(doc["profiles"]) == 1, [p["name"] for p in doc["profiles"]]
    profile = doc["profiles"][0]
    assert profile["name"] == f"split (pid {pid})", profile["name"]
    assert profile["unit"] == "nanoseconds", profile["unit"]
    check_profile(doc, profile)
    assert doc["activeProfileIndex"] == 0

    tree = snapshot_json(perfd_fast, *selection)
    assert tree["kind"] == "cpu" and tree["unit"] == "samples", tree["unit"]
    assert tree["total"] >= 1000, f"only {tree['total']} samples of split"
    assert sum(profile["weights"]) == tree["total"] * tree["period_ns"], \
        f"weights add up to {sum(profile['weights'])} ns, json says {tree['total']} samples " \
        f"x {tree['period_ns']} ns"

    # Python-free native code without --lines: names only, no file
    frames = doc["shared"]["frames"]
    names = {function(f["name"]) for f in frames}
    assert {"main", "hot_three_quarters", "cold_one_quarter"} <= names, sorted(names)[:40]
    assert len({(f["name"], f.get("file"), f.get("line")) for f in frames}) == len(frames), \
        "a frame twice in the shared table"


def test_hot_share_matches_perfds_folded_output(perfd_fast, split_c_run, tmp_path):
    _, selection = split_c_run
    rc, out, err = perfd_fast.perfctl("snapshot", *selection)
    assert rc == 0, err
    stacks = parse_folded(out)
    whole = sum(stacks.values())
    folded = {}
    for s, n in stacks.items():
        folded[function(s[-1])] = folded.get(function(s[-1]), 0) + n

    doc = snapshot_speedscope(perfd_fast, tmp_path, "share", *selection)
    profile = doc["profiles"][0]
    mine = self_weights(doc, profile)
    total = sum(profile["weights"])
    for fn in ("hot_three_quarters", "cold_one_quarter"):
        ss = 100.0 * mine.get(fn, 0) / total
        fo = 100.0 * folded.get(fn, 0) / whole
        assert abs(ss - fo) <= 2.0, f"{fn}: speedscope {ss:.2f}%, folded {fo:.2f}%"
    hot, cold = mine["hot_three_quarters"], mine["cold_one_quarter"]
    assert 0.70 <= hot / (hot + cold) <= 0.80, f"hot {hot} ns, cold {cold} ns"
    # stacks are root first: main calls hot
    frames = doc["shared"]["frames"]
    hot_stacks = [[function(frames[i]["name"]) for i in s] for s in profile["samples"]
                  if function(frames[s[-1]]["name"]) == "hot_three_quarters"]
    assert hot_stacks and all(s[-2:] == ["main", "hot_three_quarters"] for s in hot_stacks), \
        hot_stacks[:3]


def test_lines_give_file_and_line(perfd_fast, split_c_run, validator, tmp_path):
    _, selection = split_c_run
    doc = snapshot_speedscope(perfd_fast, tmp_path, "lines", *selection, "--lines")
    check_valid(validator, doc, "the --lines snapshot")
    hot = [f for f in doc["shared"]["frames"] if f["name"] == "hot_three_quarters"]
    assert hot and all(f.get("file", "").endswith("split.c") and f.get("line", 0) > 0
                       for f in hot), hot


def test_threads_and_comm_and_all(perfd_fast, split_c_run, validator, tmp_path):
    """--comm with --threads: one profile per thread; --all: one per
    process, split's among them with the same weight as alone."""
    pid, selection = split_c_run
    when = selection[2:]
    doc = snapshot_speedscope(perfd_fast, tmp_path, "threads", "--comm", "split", *when,
                              "--threads")
    check_valid(validator, doc, "the --comm --threads snapshot")
    profile = profile_named(doc, f"split (pid {pid}) thread {pid}")
    assert profile["name"] == f"split (pid {pid}) thread {pid} split", profile["name"]
    check_profile(doc, profile)
    alone = snapshot_speedscope(perfd_fast, tmp_path, "alone", *selection)["profiles"][0]
    assert sum(profile["weights"]) == sum(alone["weights"])

    doc = snapshot_speedscope(perfd_fast, tmp_path, "all", "--all", *when)
    check_valid(validator, doc, "the --all snapshot")
    names = [p["name"] for p in doc["profiles"]]
    assert len(set(names)) == len(names), "two profiles of one name"
    for p in doc["profiles"]:
        check_profile(doc, p)
    assert sum(profile_named(doc, f"split (pid {pid})")["weights"]) == sum(alone["weights"])
    heaviest = max(range(len(doc["profiles"])), key=lambda i: doc["profiles"][i]["endValue"])
    assert doc["profiles"][doc["activeProfileIndex"]]["endValue"] == \
        doc["profiles"][heaviest]["endValue"]


def test_live_snapshot(perfd_fast, validator, workloads, tmp_path):
    """--duration: the snapshot ends when its one process exits."""
    w = workloads("split", 1)
    doc = snapshot_speedscope(perfd_fast, tmp_path, "live", "--pid", str(w.pid),
                              "--duration", "60")
    w.finish()
    check_valid(validator, doc, "the live snapshot")
    profile = profile_named(doc, f"split (pid {w.pid})")
    check_profile(doc, profile)
    assert "hot_three_quarters" in self_weights(doc, profile)


def test_python_frames_have_file_and_line(perfd_fast, validator, workloads, tmp_path):
    """Debian's CPython 3.11 running split.py: slow_path's frame carries
    split.py and the line of its hot loop, and <module> calls main."""
    split = perfdtest.python_workload("split")
    w = workloads("split.py", command=[PYTHON, split, "2"])
    w.expect_line("ready", timeout=60)
    doc = snapshot_speedscope(perfd_fast, tmp_path, "python", "--pid", str(w.pid),
                              "--duration", "60")
    w.finish()
    check_valid(validator, doc, "the Python snapshot")
    profile = doc["profiles"][0]
    check_profile(doc, profile)
    frames = doc["shared"]["frames"]
    hot = perfdtest.marker_line(split, "HOT: slow")
    slow = [i for i, f in enumerate(frames) if f["name"] == "slow_path"]
    assert any(frames[i].get("file") == split and frames[i].get("line") == hot for i in slow), \
        [frames[i] for i in slow]
    at_hot = sum(wt for s, wt in zip(profile["samples"], profile["weights"])
                 if any(frames[i]["name"] == "slow_path" and frames[i].get("line") == hot
                        for i in s))
    assert at_hot >= 0.5 * sum(profile["weights"]), \
        f"{at_hot} of {sum(profile['weights'])} ns on split.py:{hot}"
    module = [f for f in frames if f["name"] == "<module>"]
    assert module and all(f.get("file") == split and f.get("line", 0) > 0 for f in module), module


def test_memory_file_weighs_bytes(perfd_fast, validator, workloads, tmp_path):
    """grow 256 16 faults in 256 MiB from grow_big and 16 from grow_small:
    the profile is in bytes, adds up to the json's total, grow_big above
    grow_small.  (~64 samples at 4 MiB a sample: 60 % is three standard
    errors below.)"""
    w = perfdtest.grow_finished(workloads, 256, 16)
    selection = ("--pid", str(w.pid), "--since", "1m", "--kind", "memory")
    doc = snapshot_speedscope(perfd_fast, tmp_path, "memory", *selection)
    check_valid(validator, doc, "the memory snapshot")
    assert doc["name"] == "perfd memory snapshot", doc["name"]
    profile = profile_named(doc, f"grow (pid {w.pid})")
    assert profile["unit"] == "bytes", profile["unit"]
    check_profile(doc, profile)
    tree = snapshot_json(perfd_fast, *selection)
    assert tree["unit"] == "bytes" and sum(profile["weights"]) == tree["total"], \
        f"weights add up to {sum(profile['weights'])} B, json says {tree['total']} B"

    frames = doc["shared"]["frames"]
    cum = {}
    for stack, wt in zip(profile["samples"], profile["weights"]):
        for fn in {function(frames[i]["name"]) for i in stack}:
            cum[fn] = cum.get(fn, 0) + wt
    assert cum.get("grow_big", 0) >= 0.6 * 256 * 2**20, f"grow_big holds {cum.get('grow_big')} B"
    assert cum["grow_big"] > cum.get("grow_small", 0), cum
