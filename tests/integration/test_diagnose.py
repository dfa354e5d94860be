"""perfctl diagnose (issue 12): a bottleneck statement from the profile,
checked on workloads whose bottleneck is known by construction.

- coordinator (coordinator() calls leaf_a() for 3 work units and leaf_b()
  for 1, next to nothing itself), a finished run on the 999 Hz daemon,
  about 5000 samples, its range given with --from/--to: leaf_a is dominant
  by self at 75 % +- 3 and coordinator a coordinator whose time is its
  callees', leaf_a carrying it.
- grow 256 16 (grow_big faults in 256 MiB, grow_small 16), finished, on a
  daemon sampling memory every 256 KiB (about 1000 samples, as
  test_memory.py does): grow_big is the top growth site with 256 MiB
  within 15 %, and the peak RSS is at least 256 MiB.
- materialize.py under one supported CPython: the growth site is
  materialize() at its "# GROW: materialize" line.
- sleep 30: mostly waiting, not computing, and too few samples to say more.
"""

import re
import time

import pytest

import perfdtest

MIB = 1 << 20
CPU_SECONDS = 5
MIN_SAMPLES = 4000
TOLERANCE = 3.0  # percentage points


def diagnose(daemon, *args):
    """(text, json document) of perfctl diagnose ARGS, both asserted ok."""
    rc, out, err = daemon.perfctl("diagnose", *args)
    assert rc == 0, f"perfctl diagnose {' '.join(args)} exited {rc}: {err}"
    doc = daemon.perfctl_json("diagnose", *args)
    assert doc.get("ok") is True, doc
    print(out)
    return out, doc


def test_coordinator_is_named_as_such_and_leaf_a_as_the_hot_leaf(perfd_fast):
    pid, selection = perfdtest.finished_range("coordinator", CPU_SECONDS)
    text, doc = diagnose(perfd_fast, *selection)
    assert doc["workload"]["pid"] == pid and doc["workload"]["comm"] == "coordinator", doc
    assert doc["workload"]["exited"] is True
    cpu = doc["cpu"]
    assert cpu["samples"] >= MIN_SAMPLES and cpu["enough_samples"], cpu
    # The window is the run's life: CPU_SECONDS of CPU over it is the share,
    # however loaded the machine made the wall time.
    assert doc["seconds"] >= CPU_SECONDS * 0.95, doc["seconds"]
    expected = 100.0 * CPU_SECONDS / doc["seconds"]
    assert cpu["cpu_percent"] == pytest.approx(expected, rel=0.1), (cpu, doc["seconds"])
    assert cpu["waiting"] == (cpu["cpu_percent"] < cpu["waiting_below_percent"]), cpu
    assert round(doc["frequency_hz"]) == perfdtest.FAST_HZ, doc
    top = cpu["dominant_self"]
    assert top["function"] == "leaf_a", cpu
    assert abs(top["self_percent"] - 75.0) <= TOLERANCE, top
    assert top["file"].endswith("tests/workloads/coordinator.c") and top["line"] > 0, top
    coord = cpu["dominant_total"]
    assert coord["function"] == "coordinator" and coord["role"] == "coordinator", coord
    assert coord["total_percent"] > 95 and coord["self_share_percent"] < 1.0, coord
    assert coord["callees"][0]["function"] == "leaf_a", coord
    assert abs(coord["callees"][0]["percent"] - 75.0) <= TOLERANCE, coord
    assert "main" in coord["path"], coord

    assert re.search(rf"^coordinator \(pid {pid}\) from .*: {cpu['samples']} CPU samples at "
                     rf"{perfdtest.FAST_HZ} Hz", text, re.M), text
    assert re.search(r"^CPU: leaf_a \(coordinator\.c:\d+\) has the most self time, 7\d\.\d%", text,
                     re.M), text
    assert re.search(r"coordinator \(coordinator\.c:\d+\) has the most total time, .* it "
                     r"coordinates its callees, and leaf_a \(coordinator\.c:\d+\) carries 7\d\.\d%",
                     text), text
    assert ("mostly waiting" in text) == cpu["waiting"] and "Too few" not in text, text
    # A CPU burner grows by a few MiB at start, a sample or two at the
    # default 4 MiB: too little to name a growth site from.
    mem = doc["memory"]
    assert mem["sample_bytes"] == 4 << 20 and mem["min_memory_samples"] == 10, mem
    assert mem["sampled_bytes"] < 10 * mem["sample_bytes"], mem
    assert not mem["enough_growth"] and "top_site" not in mem, mem
    assert "The top growth site" not in text, text
    if mem["growth_sampled"]:
        assert "Too little memory growth was sampled" in text and "fewer than 10" in text, text


def test_grow_big_is_the_top_growth_site(perfd_mem, workloads):
    w = perfdtest.grow_finished(workloads, 256, 16)
    text, doc = diagnose(perfd_mem, "--pid", str(w.pid), "--since", "1m")
    mem = doc["memory"]
    assert mem["enough_growth"], mem
    site = mem["top_site"]
    assert site["function"] == "grow_big", mem
    assert abs(site["bytes"] - 256 * MIB) <= 0.15 * 256 * MIB, mem
    assert site["file"].endswith("tests/workloads/grow.c") and site["line"] > 0, site
    assert mem["peak_rss_bytes"] >= 256 * MIB, mem
    assert mem["growth_sampled"] is True
    assert re.search(r"^Memory: peak RSS 2\d\d\.\dM at \d\d:\d\d:\d\d; RSS is ", text, re.M), text
    assert re.search(r"The top growth site is grow_big \(grow\.c:\d+\), 2\d\d\.\dM of the", text), text


def test_python_growth_site_is_the_materializing_line(perfd_mem, workloads):
    python = perfdtest.pyenv_python(12) or "/usr/bin/python3.11"
    script = perfdtest.python_workload("materialize")
    grow_line = perfdtest.marker_line(script, "GROW: materialize")
    w = workloads("materialize", command=[python, script])
    w.expect_line("ready CPython 3.")
    w.expect_line("streamed ", timeout=120)
    w.expect_line("materialized ", timeout=120)
    w.expect_line("done", timeout=60)
    w.finish()
    time.sleep(1.5)
    text, doc = diagnose(perfd_mem, "--pid", str(w.pid), "--since", "2m")
    site = doc["memory"]["top_site"]
    assert site["function"] == "materialize" and site["line"] == grow_line, doc["memory"]
    assert site["file"] == script, site
    assert site["percent"] >= 80, site
    assert f"The top growth site is materialize (materialize.py:{grow_line})" in text, text


def test_a_sleeping_process_is_waiting_not_computing(perfd, workloads):
    w = workloads("sleep", command=["sleep", "30"])
    time.sleep(4)
    text, doc = diagnose(perfd, "--pid", str(w.pid), "--since", "3s")
    assert doc["workload"]["pid"] == w.pid and doc["workload"]["comm"] == "sleep", doc
    assert doc["workload"]["cmdline"] == "sleep 30", doc
    cpu = doc["cpu"]
    assert cpu["waiting"] is True and cpu["cpu_percent"] < 5, cpu
    assert cpu["enough_samples"] is False and cpu["min_samples"] == 100, cpu
    assert "dominant_self" not in cpu and "dominant_total" not in cpu, cpu
    assert cpu["possible_samples"] >= 250, cpu  # 3 s at 99 Hz
    assert "It is mostly waiting, not computing" in text, text
    assert "Too few CPU samples" in text and "fewer than 100" in text, text
    assert "most self time" not in text, text


def test_usage_and_unknown_pid(perfd):
    rc, _, err = perfd.perfctl("diagnose", "--pid", "1")
    assert rc == 2 and "say when" in err, err
    rc, _, err = perfd.perfctl("diagnose", "--pid", "12abc", "--since", "1m")
    assert rc == 2, err
    rc, _, err = perfd.perfctl("diagnose", "--pid", "999999", "--since", "1m")
    assert rc == 4 and "no process with pid 999999" in err, err
