"""When perfd samples: one tick at a random instant of each period, so that
a workload repeating at the sampling period is not seen at one phase
(bpf/perfd.bpf.c, "Which ticks sample"); --fixed-period for comparison.

The workload, periodic, runs rounds that start every 1/99 s on the clock
(the default period exactly: the worst case for a fixed-period sampler) and
burns 67.5% of each round in round_first() and 22.5% in round_second() by
its thread CPU clock: a 3:1 split by construction, each function at the same
phase of every round.
"""

import json
import math
import time

import pytest

import perfdtest
from perfdtest import BackgroundSnapshot, contains, count_where, parse_folded, show

PERIOD_NS = 1_000_000_000 // 99  # the default 99 Hz's period, to the ns
# A thread per CPU, real-time (SCHED_FIFO 1): each starts its rounds on
# time and keeps its phase whatever else runs, which is what makes a fixed
# period fail; their idle tenth leaves the machine to the others (perfd at
# 99 Hz needs far less), and two of them halve the seconds a snapshot needs.
THREADS = 2
SHARE = 0.75                     # round_first's share of the two functions
SNAPSHOTS = 5
TOLERANCE = 0.03                 # the issue's: 3 points in each snapshot
# Samples per snapshot so that 3 points hold in all five: the attribution
# error of random sampling is binomial, sd = sqrt(.75 x .25 / n); 2000
# samples make it 0.97 points, 3 points 3.1 sd, so one snapshot in 1000
# misses by chance (1 run in 200 of the five).  The threads give 178 a
# second at 99 Hz: 12 s a snapshot.  Fewer seconds cannot do: a "few
# seconds" snapshot holds ~300 samples, sd 2.5 points, and five of them all
# within 3 points happen in 1 run of 4 for any unbiased random sampler.
SAMPLES_WANTED = 2000
MIN_SECONDS, MAX_SECONDS = 10, 30
PROBE_SECONDS = 6


def split(stacks):
    """(first, second): samples in round_first and in round_second."""
    return (count_where(stacks, contains("round_first")),
            count_where(stacks, contains("round_second")))


def share_of(stacks):
    first, second = split(stacks)
    return first / (first + second) if first + second else None


def test_status_and_snapshots_report_the_mean_period(perfd, perfd_fixed, workloads):
    """status says how perfd samples and the mean period a sample stands
    for, counts the ticks that sampled nothing apart from the samples, and
    every snapshot format carries that period: json's period_ns, pprof's
    period (read by go tool pprof in test_pprof), the folded summary on
    stderr.  Protects samples x period as the CPU time estimate."""
    st = perfd.status()
    assert st["sampling"] == "jittered", st
    assert st["sample_period_ns"] == PERIOD_NS, st
    # a timer a few times faster, not dividing the period
    ticks = st["sample_period_ns"] / st["timer_period_ns"]
    assert 2 < ticks < 10 and abs(ticks - round(ticks)) > 0.1, st
    assert st["samples"]["ticks_thinned"] > st["samples"]["taken"], st["samples"]
    # reported; how few they are is test-sampler's (each CPU's first alone)
    assert isinstance(st["samples"]["ticks_clocked"], int), st["samples"]
    fixed = perfd_fixed.status()
    assert fixed["sampling"] == "fixed", fixed
    assert fixed["sample_period_ns"] == fixed["timer_period_ns"] == PERIOD_NS, fixed
    assert fixed["samples"]["ticks_thinned"] == 0, fixed["samples"]

    w = workloads("spin", 1)
    rc, out, err = perfd.perfctl("snapshot", "--pid", str(w.pid), "--duration", "60")
    assert rc == 0, err
    assert f"(mean period {PERIOD_NS / 1e6:.3f} ms, jittered)" in err, err
    rc, out, err = perfd.perfctl("--json", "snapshot", "--pid", str(w.pid), "--since", "30s",
                                 "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["period_ns"] == PERIOD_NS and doc["sampling"] == "jittered", \
        {k: doc.get(k) for k in ("period_ns", "sampling")}
    assert doc["profile"]["period_ns"] == PERIOD_NS, doc["profile"].get("period_ns")


def test_periodic_workload_split_is_right_in_every_snapshot(perfd, perfd_fixed, workloads):
    """periodic's rounds last exactly the default period.  perfd, at the
    default 99 Hz, must read its 3:1 split within 3 points in each of five
    consecutive snapshots; a fixed-period perfd on the same run, for the
    same time as the first of them, is off by far more (it sees one phase
    of every round: one function, the other, or the idle tenth).  Protects
    the profile of any workload that repeats with the sampling period."""
    # at most MAX_SECONDS x 6 of work; killed at the end of the test
    w = workloads("periodic", MAX_SECONDS * (SNAPSHOTS + 1), THREADS, PERIOD_NS,
                  command=["chrt", "-f", "1", perfdtest.workload_binary("periodic"),
                           str(MAX_SECONDS * (SNAPSHOTS + 1)), str(THREADS), str(PERIOD_NS)])
    w.expect_line("ready")

    # The probe: fixed and jittered over the same seconds.  The jittered
    # count sizes the snapshots that follow.
    fixed = BackgroundSnapshot(perfd_fixed, w.pid, duration=PROBE_SECONDS)
    probe = BackgroundSnapshot(perfd, w.pid, duration=PROBE_SECONDS)
    try:
        rc, out, err = fixed.output()
        assert rc == 0, f"fixed-period snapshot failed: {err}"
        fixed_stacks = parse_folded(out)
        probe_stacks, _, _ = probe.result("periodic")
    finally:
        fixed.kill()
        probe.kill()
    probe_first, probe_second = split(probe_stacks)
    rate = (probe_first + probe_second) / PROBE_SECONDS
    seconds = min(MAX_SECONDS, max(MIN_SECONDS, math.ceil(SAMPLES_WANTED / max(rate, 1))))

    # What a fixed period sees: the phase of its tick in the round, the
    # same every round, decides everything.  Off by much more than 3
    # points in share, or (the tick in the idle tenth) in CPU time: the
    # jittered count of the same seconds is the reference for the latter.
    fixed_first, fixed_second = split(fixed_stacks)
    fixed_share = share_of(fixed_stacks)
    share_off = fixed_share is None or abs(fixed_share - SHARE) > 0.10
    time_off = abs((fixed_first + fixed_second) - (probe_first + probe_second)) > \
        0.5 * (probe_first + probe_second)
    assert share_off or time_off, \
        f"a fixed-period sampler read periodic right: {fixed_first}:{fixed_second} " \
        f"(jittered, same {PROBE_SECONDS} s: {probe_first}:{probe_second}); the workload " \
        f"did not keep its phase\n{show(fixed_stacks)}"

    results = []
    for i in range(SNAPSHOTS):
        stacks, _ = perfdtest.snapshot_workload(perfd, w, duration=seconds)
        results.append((split(stacks), show(stacks)))
    w.kill()
    shares = [f"{first}:{second}" for (first, second), _ in results]
    for i, ((first, second), shown) in enumerate(results):
        n = first + second
        # SCHED_FIFO threads get their CPU whatever the load: the probe's
        # rate holds, and with 90% of the samples wanted 3 points are still
        # 2.9 sd (a chance miss in 1 run of 60 of the five)
        assert n >= 0.9 * SAMPLES_WANTED, \
            f"snapshot {i + 1}: {n} samples in the two functions over {seconds} s " \
            f"(probe rate {rate:.0f}/s): the workload did not get its CPU\n{shown}"
        assert abs(first / n - SHARE) <= TOLERANCE, \
            f"snapshot {i + 1} of {SNAPSHOTS} ({seconds} s): round_first:round_second " \
            f"{first}:{second}, share {first / n:.3f}, expected {SHARE} +- {TOLERANCE} " \
            f"(all five: {shares}; fixed period: {fixed_first}:{fixed_second})\n{shown}"


@pytest.mark.parametrize("daemon", ["perfd", "perfd_fixed"])
def test_every_cpu_period_is_counted_idle_included(request, daemon):
    """Every CPU gives one sample per period whether it runs a task or
    idles: over a few mostly idle seconds, the samples taken (idle ones
    included) and those the kernel did not deliver to a busy CPU add up to
    the CPUs' time over the period.  Jittered, the count has no sampling
    noise; fixed, a tick is a sample.  On this machine one vCPU's timer
    expires in idle without running the cpu-clock program (nor perf
    record's), and those ticks are counted only because the hrtimer
    program settles them (bpf/perfd.bpf.c, "Ticks the kernel did not
    deliver"); without that the count here is half the time, and idle
    targets fall to the next task that runs.  3 %: the ends, a tick or two
    per CPU, and a CPU's blocks restarting after a stopped timer."""
    d = request.getfixturevalue(daemon)
    st0, t0 = d.status(), time.monotonic()
    time.sleep(5)
    st1, t1 = d.status(), time.monotonic()
    s0, s1 = st0["samples"], st1["samples"]
    n = s1["taken"] - s0["taken"] + s1["lost"]["undelivered"] - s0["lost"]["undelivered"]
    expected = st1["cpus"] * (t1 - t0) * 1e9 / st1["sample_period_ns"]
    assert abs(n - expected) <= 0.03 * expected, \
        f"{n} samples over {t1 - t0:.2f} s on {st1['cpus']} CPUs, {expected:.0f} periods: " \
        f"{s0} -> {s1}"
