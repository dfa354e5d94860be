#!/usr/bin/python3
"""bench.py - `make bench`: what perfd costs, measured side by side with
`perf record` and `bpftrace` on the same workloads in the same run.

Phases (run one after the other: on a 2-CPU machine, two at once would
measure each other):
  cost      kernel cost per sample of perfd (the run time of all its BPF
            programs that serve CPU sampling over the samples it took) and
            of bpftrace (its profile program's run time / run count), on a
            deep (65-frame) and a shallow (7-frame) native workload and a
            Python one (walker on) on every CPU; and, on the deep one, the
            CPU of the perfd, perf record and bpftrace processes, at 99 and
            999 Hz;
  daemon_cpu
            perfd's CPU at 99 Hz with 0, 1 and 20 new short-lived processes
            a second (build/bench/churn starting /bin/true);
  procs     perfd's RSS idle and after 500 sleeping-and-waking processes;
  stacks    perfd's RSS per unique stack, and how long status, ps and a
            snapshot of ~10k and ~100k unique stacks take to answer;
  fidelity  samples received vs expected and the error on a known 75/25
            split, perfd and perf record watching the same run;
  slowdown  wall time of a fixed amount of work with and without perfd at
            999 Hz, alternating;
  python_kernel_cost
            kernel cost per sample of CPython processes whose stacks are 30
            and 1 Python frames deep, with perfd's Python walker on and
            off (--no-python), for each interpreter of --pythons;
  python_symbolize_cost
            the daemon's user-space cost per new code object and per
            cached Python frame (build/bench/pybench);
  store_snapshot
            the profile store at 999 Hz with unique_stacks on every CPU:
            live snapshots of ~100k unique stacks each, then snapshots of
            the past (folded, JSON): time from the end of the window to the
            last byte, samples lost, the drain thread's longest consume;
  store_first_binary
            a process mapping a huge library (libLLVM) starts under perfd
            at 999 Hz: samples lost and the drain's longest consume while
            its unwind table is built;
  store_memory
            500 processes over an hour at 99 Hz, simulated with the
            daemon's aggregator (build/bench/storebench): the store's memory
            and a query of one process over the hour.
  export    perfd's CPU with 500 live processes, pprof files and Pyroscope
            pushes every 10 s against exporters off, and the bytes written
            and pushed per interval;
  top       one refresh of `perfctl top` with 500 live processes (the
            procs workload, every live process taken): time from connect
            to the answer's last byte, perfd's CPU for it, and the bytes
            sent, for a screen's 50 rows, for all of them (batch mode,
            sorted by growth), and for the functions of all processes.

Every figure is measured in at least --runs runs and printed as min /
median / max; ratios are taken within a run.  Results go to build/bench.json
(every value with its unit) and build/bench.md (Markdown tables);
`bench.py --compare OLD NEW` prints what changed between two bench.json.

usage: bench.py [--build DIR] [--runs N] [--phases LIST] [--out FILE] [--pythons LIST]
                [--big-library PATH] [--store-max-window S]
       bench.py --compare OLD.json NEW.json
"""

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (PERF_EVENT_PROG_TYPE, BenchError, BpfStats, Bpftrace, CpuWindow, Perfd,  # noqa: E402
                      PerfRecord, Procs, bpf_progs, bpf_prog_name, bpf_prog_names, cpu_ns, log, memory_kib,
                      online_cpus, request, wait_until)
import report  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PHASES = ("verifier", "cost", "daemon_cpu", "procs", "stacks", "fidelity", "slowdown", "python_kernel_cost", "python_symbolize_cost",
          "store_snapshot", "store_first_binary", "store_memory", "memory_cost", "top", "export", "offcpu")
STORE_PHASES = ("store_snapshot", "store_first_binary", "store_memory")
MIB = 1024 * 1024

# Stack depth of the deep-stack burner: deep enough that the frame-pointer
# walk dominates, well under the 127-frame limit of both profilers.
DEEP_DEPTH = 60
# The unique-stacks workload walks 2^PATHS_DEPTH distinct call paths.
PATHS_DEPTH = 20
# perfd runs the unique-stacks phase at this rate, so that ~100k distinct
# stacks are sampled within seconds, not minutes; what is measured there
# (memory per stack, encoding time) depends on the number of stacks, not
# on the rate they arrived at.
STACKS_HZ = 9999
# The Python phases: the interpreters they run by default, in order (one
# that is not installed is skipped with a message).  pyenv's 3.12 is a
# shared build with 3.12's frame layout (thread state in TLS, shim frames);
# Debian's 3.11 is a static build with 3.11's.
PYTHONS = "/root/.pyenv/versions/3.12.1/bin/python3,/usr/bin/python3.11"
# Python frames per sample of the workload: the issue's 30, and 1, whose
# difference gives the cost of one frame.
PY_DEPTHS = (30, 1)
PY_HZ = 999
# Code objects a pybench run reads for the first time.
PY_CODE_OBJECTS = 5000
PYDEEP = REPO / "tests" / "bench" / "workloads" / "pydeep.py"

GOALS = [
    ("kernel cost/sample <= 0.5x bpftrace, deep native stack (65 frames), 999 Hz", "kcost.deep.ratio.999", 0.5,
     "perfd with tables: all its sampling programs / samples taken"),
    ("kernel cost/sample <= 0.5x bpftrace, deep native stack (65 frames), 99 Hz", "kcost.deep.ratio.99", 0.5, ""),
    ("kernel cost/sample <= 0.5x bpftrace, shallow native stack (7 frames), 999 Hz", "kcost.shallow.ratio.999",
     0.5, ""),
    ("kernel cost/sample <= 0.5x bpftrace, Python stack (30 frames, walker on; bpftrace native), 999 Hz",
     "kcost.python.ratio.999", 0.5, ""),
    ("daemon <= 0.1% of one core at 99 Hz on all CPUs, 1 new process/s", "dcpu.pct.1", 0.1, ""),
    ("daemon <= 0.5% of one core at 99 Hz on all CPUs, 20 new processes/s", "dcpu.pct.20", 0.5, ""),
    ("daemon RSS <= 30 MiB with 500 processes", "mem.procs.rss", 30.0, ""),
    ("snapshot of 100k unique stacks <= 300 ms", "query.snapshot_100k.ms", 300.0, ""),
    ("store: live snapshot of 100k unique stacks, window end to last byte <= 300 ms", "store.snap.live.ms",
     300.0, "999 Hz, workload running"),
    ("store: samples lost during it = 0", "store.snap.live.lost", 0, ""),
    ("store: drain's longest consume during it <= 10 ms", "store.snap.live.stall_ms", 10.0, ""),
    ("store: snapshot of the whole run from history <= 300 ms", "store.snap.history.ms", 300.0, "folded"),
    ("store: samples lost during it = 0", "store.snap.history.lost", 0, ""),
    ("store: drain's longest consume during it <= 10 ms", "store.snap.history.stall_ms", 10.0, ""),
    ("store: JSON snapshot of the last window <= 300 ms", "store.snap.json.ms", 300.0, "from history"),
    ("store: samples lost during it = 0", "store.snap.json.lost", 0, ""),
    ("store: drain's longest consume during it <= 10 ms", "store.snap.json.stall_ms", 10.0, ""),
    ("store: samples lost at a huge binary's first sighting = 0", "store.first.lost", 0, ""),
    ("store: drain's longest consume then <= 10 ms", "store.first.stall_ms", 10.0, ""),
    ("store: daemon RSS <= 30 MiB, 500 processes over 1 h at 99 Hz (estimated)", "store.mem.skewed.daemon_rss",
     30.0, "idle RSS + storebench's growth"),
    ("store: one process over 1 h: query + model + folded <= 50 ms", "store.mem.skewed.query_ms", 50.0, ""),
    ("memory profiling: slowdown of a fault-heavy process <= 3%", "memcost.slowdown_pct", 3.0,
     "default --memory-sample-bytes, against --no-memory"),
    ("top: one refresh of a screen with 500 live processes <= 20 ms", "top.screen.ms", 20.0,
     "50 rows, each with its top function"),
]
# The memory-cost phase's fault-heavy process: rounds of 2 GiB each.
MEMCOST_ROUNDS = 3
TRACING_PROG_TYPE = 26  # BPF_PROG_TYPE_TRACING in fdinfo's prog_type


class Context:
    def __init__(self, args, procs, results, tmpdir):
        self.args = args
        self.build = Path(args.build).resolve()
        self.procs = procs
        self.results = results
        self.tmpdir = tmpdir
        self.cpus = online_cpus()
        self.runs = args.runs
        self.window = args.window
        self.perfd_bin = str(self.build / "perfd")
        self.phases = []
        self.pythons = None  # (path, version) of the --pythons that run; found when first needed

    def workload(self, name):
        return str(self.build / "bench" / name)

    def add(self, *a, **kw):
        self.results.add(*a, **kw)

    def perfd(self, hz, extra=()):
        return Perfd(self.procs, self.perfd_bin, self.tmpdir, hz, extra)


def ratio(a, b):
    return a / b if a is not None and b else None


# --- phase 1 and 2: kernel cost per sample, and the daemons' CPU ---------

# perfd's BPF programs that serve CPU sampling, by the names bpf/perfd.bpf.c
# gives them: the tick program (one of two variants: with unwind tables and
# the Python walker, or frame pointers only), and the two tracing programs
# that tell it when the perf hrtimer was due and which task the last
# context switch took off the CPU ("Whose tick it is").  bpftrace's profile
# probe needs neither of those two.  perfd's other programs (memory, exit,
# exec) do not run per sample; they are reported apart.
PERFD_TICK_PROGS = ("on_cpu_clock", "on_cpu_clock_fp")
PERFD_SAMPLING_AIDS = ("on_hrtimer_expire", "on_sched_switch")
PERFD_SAMPLING_PROGS = PERFD_TICK_PROGS + PERFD_SAMPLING_AIDS

# The workloads of the kernel-cost phase, one process per CPU each, all
# burning CPU at a stack of known depth.  Native frames per sample, with
# frame pointers (bpftrace's ustack): leaf_burn, DEPTH + 1 levels, worker,
# main, __libc_start_call_main: 65 for -d 60, 7 for -d 2.
SHALLOW_DEPTH = 2
COST_WORKLOADS = ("deep", "shallow", "python")
# Python frames of the Python workload (issue 6's 30).
COST_PY_DEPTH = 30


def cpu_window(ctx, pid, prog_type=PERF_EVENT_PROG_TYPE):
    """The CpuWindow of process pid over the next ctx.window seconds, over
    its BPF programs of prog_type (None: all).  The caller
    warms up first, and reads what must not count (perfd's status) before
    or after.  The stats sysctl is the whole machine's: a window in which
    another session turned it off is measured again, once, after turning
    it back on."""
    for attempt in (1, 2):
        w = CpuWindow(pid, prog_type)
        w.start()
        time.sleep(ctx.window)
        w.stop()
        if w.stats_were_on and w.stats_stayed_on:
            return w
        log("kernel.bpf_stats_enabled was turned off during a window (by another session?); "
            "turning it on and measuring again")
        BpfStats.turn_on()
    raise BenchError("kernel.bpf_stats_enabled keeps being turned off: BPF run times cannot be measured")


def delivered(st):
    """Samples perfd's tick program took (idle ones included), from a status
    answer: samples.taken less the idle ones of ticks the kernel never ran
    it for, which only the hrtimer program counted (bpftrace's run count
    has no such ticks either)."""
    return st["samples"]["taken"] - st["samples"].get("idle_undelivered", 0)


def processes_met(st):
    """Processes perfd has met so far, from a status answer: those in its
    table and those that left it (evicted for room, or expired after they
    exited and their data aged out)."""
    p = st["processes"]
    return p["tracked"] + p["evicted"] + p.get("expired", 0)


def sampling_cost(ctx, w, taken, names):
    """perfd's kernel cost per sample over window w (all its BPF programs),
    taken the samples it took meanwhile (status samples.taken: in mean
    periods, idle ones included, as bpftrace's run_cnt counts its idle
    ticks), names {prog_id: name}.  Returns a dict of figures; raises when
    the tick program is not the one with tables."""
    parts = {}
    for i, (ns, cnt) in w.by_program().items():
        name = names.get(i, f"id {i}")
        ns0, cnt0 = parts.get(name, (0, 0))
        parts[name] = (ns0 + ns, cnt0 + cnt)
    ticks = [n for n in parts if n in PERFD_TICK_PROGS]
    if ticks != ["on_cpu_clock"]:
        raise BenchError(f"perfd's tick programs are {ticks}, expected ['on_cpu_clock'] (unwind tables "
                         "on); its programs: " + ", ".join(sorted(parts)))
    if not getattr(ctx, "perfd_progs_noted", False):
        ctx.results.note("kernel cost: perfd's BPF programs " + ", ".join(sorted(parts)) + "; counted as CPU "
                         "sampling: " + ", ".join(n for n in PERFD_SAMPLING_PROGS if n in parts))
        ctx.perfd_progs_noted = True
    if not taken:
        raise BenchError("perfd took no sample in the window (status samples.taken did not move)")
    sampling_ns = sum(ns for n, (ns, _) in parts.items() if n in PERFD_SAMPLING_PROGS)
    tick_ns, tick_cnt = parts["on_cpu_clock"]
    return {
        "ns": sampling_ns / taken,
        "ticks_per_sample": tick_cnt / taken,
        "ns_per_tick": tick_ns / tick_cnt if tick_cnt else None,
        "share": {n: (parts.get(n, (0, 0))[0] / sampling_ns * 100 if sampling_ns else None)
                  for n in ("on_cpu_clock",) + PERFD_SAMPLING_AIDS},
        "other_ns": sum(ns for n, (ns, _) in parts.items() if n not in PERFD_SAMPLING_PROGS) / taken,
        "taken": taken,
    }


# A new perfd reads every process of the machine and builds the unwind
# tables of their binaries; on the loaded 2-CPU machine that went on for
# well over 5 s, and its CPU then is not what a running perfd costs (the
# daemon_cpu phase saw 5 to 22% of a core in whichever window came first,
# the cost phase 16-18% after 1 s).  So a measurement of perfd's CPU waits
# until no table is being built and perfd's CPU over a second is under
# DAEMON_SETTLED_PCT, DAEMON_WARMUP_S at least, DAEMON_SETTLE_MAX_S at most.
DAEMON_WARMUP_S = 5.0
DAEMON_SETTLED_PCT = 2.0
DAEMON_SETTLE_MAX_S = 40.0


def settle(p):
    """Waits for the new perfd p to finish starting (see above); returns
    the seconds it waited."""
    t0 = time.monotonic()
    time.sleep(DAEMON_WARMUP_S)
    while time.monotonic() - t0 < DAEMON_SETTLE_MAX_S:
        building = p.status().get("unwind", {}).get("tables_building", 0)
        cpu0, t1 = cpu_ns(p.pid), time.monotonic()
        time.sleep(1.0)
        if not building and (cpu_ns(p.pid) - cpu0) / 1e9 / (time.monotonic() - t1) * 100 < DAEMON_SETTLED_PCT:
            break
    return time.monotonic() - t0


def measure_perfd(ctx, hz, extra=()):
    p = ctx.perfd(hz, extra)
    try:
        settled = settle(p)
        t_st0 = time.monotonic()
        st0 = p.status()
        t_st0 = (t_st0 + time.monotonic()) / 2
        w = cpu_window(ctx, p.pid, prog_type=None)
        t_st1 = time.monotonic()
        st1 = p.status()
        t_st1 = (t_st1 + time.monotonic()) / 2
        names = bpf_prog_names()  # while perfd holds them
    finally:
        p.stop()
    # The two status answers span a few ms more than the BPF window: the
    # count is scaled to the window.
    taken = (delivered(st1) - delivered(st0)) * w.seconds / (t_st1 - t_st0)
    lost = st1["samples"]["lost_total"] - st0["samples"]["lost_total"]
    m = {"w": w, "samples": taken, "lost": lost, "settled": settled, "new_processes": processes_met(st1) - processes_met(st0),
         "received": st1["samples"]["received"] - st0["samples"]["received"],
         "python_walks": st1["python"]["samples"] - st0["python"]["samples"]}
    m.update(sampling_cost(ctx, w, taken, names))
    return m


def measure_bpftrace(ctx, hz, body=Bpftrace.ANCHOR):
    b = Bpftrace(ctx.procs, ctx.tmpdir, hz, ctx.cpus, body)
    try:
        time.sleep(ctx.args.warmup)
        w = cpu_window(ctx, b.pid)
    finally:
        b.stop()
    return {"w": w, "samples": w.run_cnt, "ns": w.ns_per_run()}


def measure_perf(ctx, hz):
    p = PerfRecord(ctx.procs, ctx.tmpdir, hz, ctx.cpus)
    try:
        time.sleep(ctx.args.warmup)
        w = cpu_window(ctx, p.pid)
    finally:
        p.stop()
        try:
            os.unlink(p.data)
        except OSError:
            pass
    # perf's samples are not observable while it runs: count the nominal
    # number (it samples a timer, so nominal is what it takes).
    return {"w": w, "samples": hz * ctx.cpus * w.seconds}


def floors(ctx, hz, sec, k_perfd):
    """What any BPF sampler pays on this machine, from two minimal bpftrace
    programs in the same run: an empty-ish one (the price of running a
    program at all, with the stats on) and one that only reads the user
    stack.  They say how far below bpftrace a design that still walks the
    user stack in the kernel can go."""
    count = measure_bpftrace(ctx, hz, "@ = count();")["w"].ns_per_run()
    ustack = measure_bpftrace(ctx, hz, "@[ustack] = count();")["w"].ns_per_run()
    ctx.add(f"kcost.floor.count.{hz}", sec, f"floor: bpftrace '@ = count()', {hz} Hz", "ns/sample", count)
    ctx.add(f"kcost.floor.ustack.{hz}", sec, f"floor: bpftrace '@[ustack] = count()', {hz} Hz", "ns/sample",
            ustack)
    ctx.add(f"kcost.floor.ratio.{hz}", sec, f"perfd / user-stack-only floor, {hz} Hz", "x",
            ratio(k_perfd, ustack), "lower")


def start_cost_workload(ctx, name):
    """The processes of one cost workload, one per CPU, busy at their
    stack when this returns, and a line that says what they are."""
    if name in ("deep", "shallow"):
        depth = DEEP_DEPTH if name == "deep" else SHALLOW_DEPTH
        wl = [ctx.procs.start([ctx.workload("deep"), "-d", str(depth), "-w", str(ctx.cpus), "-t", "3600"])]
        time.sleep(0.3)
        return wl, f"{name} native stack (`deep -d {depth}`: {depth + 5} frames)"
    pythons = python_interpreters(ctx)
    if not pythons:
        raise BenchError("none of the --pythons interpreters is installed")
    python, version = pythons[0]
    return (start_pydeep(ctx, python, COST_PY_DEPTH),
            f"Python stack (pydeep.py {COST_PY_DEPTH} frames deep, CPython {version}), perfd's walker on")


def add_kernel_cost(ctx, sec, wl, hz, m):
    """The kernel-cost rows of one run of workload wl at hz: perfd's cost
    per sample against bpftrace's, then what it is made of."""
    kp, kb = m["perfd"]["ns"], m["bpftrace"]["ns"]
    pfx = f"kcost.{wl}"
    ctx.add(f"{pfx}.perfd.{hz}", sec, f"perfd: sampling programs' run time / samples taken, {hz} Hz", "ns/sample",
            kp, "lower")
    ctx.add(f"{pfx}.bpftrace.{hz}", sec, f"bpftrace profile: run time / run count, {hz} Hz", "ns/sample", kb,
            "lower")
    ctx.add(f"{pfx}.ratio.{hz}", sec, f"perfd / bpftrace, {hz} Hz", "x", ratio(kp, kb), "lower")
    ctx.add(f"{pfx}.ticks_per_sample.{hz}", sec, f"perfd: on_cpu_clock runs (ticks) per sample, {hz} Hz",
            "ticks/sample", m["perfd"]["ticks_per_sample"])
    ctx.add(f"{pfx}.ns_per_tick.{hz}", sec, f"perfd: on_cpu_clock run time per tick, {hz} Hz", "ns/tick",
            m["perfd"]["ns_per_tick"], "lower")
    for prog, share in m["perfd"]["share"].items():
        ctx.add(f"{pfx}.share.{prog}.{hz}", sec, f"perfd: {prog}'s share of the sampling run time, {hz} Hz",
                "%", share)
    ctx.add(f"{pfx}.other.{hz}", sec, f"perfd: other programs (memory, exit, exec), not counted above, {hz} Hz",
            "ns/sample", m["perfd"]["other_ns"], "lower")
    ctx.add(f"{pfx}.taken.{hz}", sec, f"perfd: samples taken in the window, {hz} Hz", "samples",
            m["perfd"]["taken"])


def cost_run(ctx, wl, hz, run, tools):
    """One run at hz on the running workload wl: each of tools measured
    once, in an order that rotates from run to run."""
    funcs = {"perfd": measure_perfd, "bpftrace": measure_bpftrace, "perf": measure_perf}
    order = tools[run % len(tools):] + tools[:run % len(tools)]
    log(f"cost: {wl}, {hz} Hz, run {run + 1}/{ctx.runs} ({', '.join(order)})")
    return {name: funcs[name](ctx, hz) for name in order}


def add_daemon_cpu(ctx, hz, m):
    """Section 2's rows of one run on the deep workload: the CPU of the
    perfd, bpftrace and perf record processes over the same windows."""
    sec2 = "2. Daemon CPU (process user+sys over the same window)"
    pct = {}
    for name in ("perfd", "bpftrace", "perf"):
        w = m[name]["w"]
        pct[name] = w.cpu_seconds / w.seconds * 100
        per_k = w.cpu_seconds * 1000 / (m[name]["samples"] / 1000) if m[name]["samples"] else None
        label = {"perfd": "perfd", "perf": "perf record -g -a", "bpftrace": "bpftrace"}[name]
        ctx.add(f"cpu.pct.{name}.{hz}", sec2, f"{label}, {hz} Hz", "% of one core", pct[name], "lower")
        ctx.add(f"cpu.per_1k.{name}.{hz}", sec2, f"{label} per 1k samples, {hz} Hz",
                "CPU-ms / 1k samples", per_k, "lower")
    ctx.add(f"cpu.ratio.perf.{hz}", sec2, f"perfd / perf record, {hz} Hz", "x",
            ratio(pct["perfd"], pct["perf"]), "lower")
    ctx.add(f"cpu.ratio.bpftrace.{hz}", sec2, f"perfd / bpftrace, {hz} Hz", "x",
            ratio(pct["perfd"], pct["bpftrace"]), "lower")
    ctx.add(f"cpu.lost.perfd.{hz}", sec2, f"perfd samples lost in the window, {hz} Hz", "samples",
            m["perfd"]["lost"], "lower")
    # Each process perfd has not seen before costs it work: the machine's
    # process churn shows in its CPU, so it is shown too (phase daemon_cpu
    # measures it at known rates).
    ctx.add(f"cpu.new_processes.perfd.{hz}", sec2, f"new processes perfd met in the window, {hz} Hz",
            "processes", m["perfd"]["new_processes"])
    ctx.add(f"cpu.settle_s.perfd.{hz}", sec2, f"perfd's start: until no table builds and its CPU < "
            f"{DAEMON_SETTLED_PCT:g}% (at most {DAEMON_SETTLE_MAX_S:.0f}), {hz} Hz", "s", m["perfd"]["settled"])


def phase_cost(ctx):
    """Kernel cost per sample on each of --cost-workloads: the deep one at
    every --frequencies (with perf record too, for section 2, and the
    floors at the highest), the others at the highest only: the tick
    program's cost per sample does not depend on the rate, and at 99 Hz a
    window holds a tenth of the samples, so it would add time and noise.
    (The two tracing programs' cost per sample does, since they run at the
    machine's rate of hrtimer expiries and switches: the deep workload's
    99 Hz rows show it.)"""
    top = max(ctx.args.frequencies)
    for wl in ctx.args.cost_workloads:
        procs, what = start_cost_workload(ctx, wl)
        sec1 = f"1. Kernel cost per sample: {what}, every CPU"
        try:
            with BpfStats():
                for hz in (ctx.args.frequencies if wl == "deep" else [top]):
                    for run in range(ctx.runs):
                        m = cost_run(ctx, wl, hz, run, ["perfd", "bpftrace", "perf"] if wl == "deep"
                                     else ["perfd", "bpftrace"])
                        if any(x.poll() is not None for x in procs):
                            raise BenchError(f"the {wl} workload exited early")
                        # The walker must have run; how many samples it
                        # walked depends on how much of the machine the
                        # workload got (other processes are sampled too).
                        if wl == "python" and not m["perfd"]["python_walks"]:
                            raise BenchError("perfd walked no Python stack (python.samples did not move)")
                        add_kernel_cost(ctx, sec1, wl, hz, m)
                        if wl == "python":
                            ctx.add(f"kcost.python.walks.{hz}", sec1,
                                    f"perfd: samples with a Python walk (of all taken, idle included), {hz} Hz",
                                    "%", m["perfd"]["python_walks"] / m["perfd"]["taken"] * 100)
                        if wl == "deep":
                            add_daemon_cpu(ctx, hz, m)
                            if hz == top:
                                floors(ctx, hz, sec1, m["perfd"]["ns"])
        finally:
            for x in procs:
                ctx.procs.stop(x, signal.SIGKILL, group=True)
                if x.stdout:
                    x.stdout.close()


# --- phase 0: the verifier's work, on this kernel and the matrix's ------

VERIFIER_LIMIT = 1_000_000
CHECK_PROGRAM = re.compile(r"^program (\S+): verified in (\d+) instructions")


def phase_verifier(ctx):
    """Each BPF program's verified instructions (bpf_prog_info's
    verified_insns, as `perfd --check` prints them) on this host's kernel,
    and on each kernel of the last `make test-kernels` run
    (BUILD/kernels/results.json), with the share of the verifier's limit:
    the same code has verified in 306k instructions on one 6.18 host and
    failed the 1M limit on another, so the figure to watch is the headroom
    on every kernel, not on one."""
    sec = "0. Verifier: instructions processed to load each program (limit 1,000,000)"
    out = subprocess.run([ctx.perfd_bin, "--check"], capture_output=True, text=True, timeout=300)
    counts = {m.group(1): int(m.group(2)) for m in map(CHECK_PROGRAM.match, out.stdout.splitlines()) if m}
    if not counts:
        raise BenchError(f"perfd --check printed no program counts (exit {out.returncode}): {out.stderr.strip()}")
    kernel = os.uname().release
    for prog, n in sorted(counts.items()):
        ctx.add(f"verifier.{kernel}.{prog}", sec, f"{prog} on this host ({kernel})", "insns", n, "lower",
                "perfd --check")
    results = ctx.build / "kernels" / "results.json"
    if not results.exists():
        ctx.results.note(f"No kernel matrix results at {results}: run `make test-kernels` for the other kernels.")
        return
    for k in json.loads(results.read_text()).get("kernels", {}).values():
        for prog, n in sorted((k.get("verified_insns") or {}).items()):
            ctx.add(f"verifier.{k['release']}.{prog}", sec, f"{prog} on {k['release']} (make test-kernels)",
                    "insns", n, "lower", "make test-kernels")


# --- phase 2b: the daemon's CPU with new short-lived processes ------------

DAEMON_HZ = 99
CHURN_RATES = (0, 1, 20)


def stop_churner(ctx, churner):
    """Stops the churn workload; returns the rate it says it kept."""
    ctx.procs.stop(churner, signal.SIGTERM)
    line = churner.stdout.read().decode(errors="replace")
    churner.stdout.close()
    m = re.search(r"\(([0-9.]+)/s\)", line)
    return float(m.group(1)) if m else None


def phase_daemon_cpu(ctx):
    """perfd at 99 Hz on every CPU, the deep workload on each, and a
    churner that starts /bin/true at 0, 1 and 20 a second: perfd's CPU over
    a window of each, in an order that rotates from run to run, one perfd a
    run.  The processes perfd met show the machine's own churn on top of
    the churner's."""
    sec = (f"2. Daemon CPU with new short-lived processes ({DAEMON_HZ} Hz, `deep -d {DEEP_DEPTH}` on every CPU, "
           f"/bin/true started at a steady rate, {ctx.args.daemon_window:.0f} s windows)")
    burner = ctx.procs.start([ctx.workload("deep"), "-d", str(DEEP_DEPTH), "-w", str(ctx.cpus), "-t", "3600"])
    try:
        for run in range(ctx.runs):
            rates = list(CHURN_RATES[run % 3:] + CHURN_RATES[:run % 3])
            log(f"daemon_cpu: run {run + 1}/{ctx.runs}, {DAEMON_HZ} Hz, new processes/s: "
                f"{', '.join(map(str, rates))}")
            p = ctx.perfd(DAEMON_HZ)
            pct, met = {}, {}
            try:
                ctx.add("dcpu.settle_s", sec, f"perfd's start: until no table builds and its CPU < "
                        f"{DAEMON_SETTLED_PCT:g}% (at most {DAEMON_SETTLE_MAX_S:.0f})", "s", settle(p))
                for rate in rates:
                    churner = None
                    if rate:
                        # Niced up, so that it keeps its rate next to the
                        # burners and the machine's other load.
                        churner = ctx.procs.start(["nice", "-n", "-10", ctx.workload("churn"), "-r", str(rate)],
                                                  stdout=subprocess.PIPE)
                    kept = None
                    try:
                        time.sleep(1.0)  # the churner's first processes are met before the window
                        st0 = p.status()
                        cpu0, t0 = cpu_ns(p.pid), time.monotonic()
                        time.sleep(ctx.args.daemon_window)
                        cpu1, t1 = cpu_ns(p.pid), time.monotonic()
                        st1 = p.status()
                    finally:
                        if churner is not None:
                            kept = stop_churner(ctx, churner)
                    if burner.poll() is not None:
                        raise BenchError("the deep-stack burner exited early")
                    pct[rate] = (cpu1 - cpu0) / 1e9 / (t1 - t0) * 100
                    met[rate] = (processes_met(st1) - processes_met(st0)) / (t1 - t0)
                    ctx.add(f"dcpu.pct.{rate}", sec, f"perfd, {rate} new processes/s", "% of one core", pct[rate],
                            "lower")
                    ctx.add(f"dcpu.met.{rate}", sec, f"new processes perfd met, churner at {rate}/s",
                            "processes/s", met[rate])
                    if rate:
                        ctx.add(f"dcpu.kept.{rate}", sec, f"rate the churner kept, at {rate}/s", "processes/s",
                                kept)
                    ctx.add(f"dcpu.lost.{rate}", sec, f"perfd samples lost in the window, {rate}/s", "samples",
                            st1["samples"]["lost_total"] - st0["samples"]["lost_total"], "lower")
            finally:
                p.stop()
            # What one more new process costs, within the run: by the
            # processes perfd met, not the churner's rate, since the
            # machine's own churn can move more than the churner's 20/s;
            # not measurable when the two windows met nearly as many.
            hi = max(CHURN_RATES)
            more = met[hi] - met[0]
            ctx.add("dcpu.per_process", sec, f"perfd CPU per new process met: (CPU at {hi}/s - at 0/s) / (met at "
                    f"{hi}/s - at 0/s)", "ms", (pct[hi] - pct[0]) / more * 10 if more >= hi / 4 else None, "lower")
    finally:
        ctx.procs.stop(burner, signal.SIGKILL, group=True)


# --- phase 3a: memory with many processes --------------------------------

def phase_procs(ctx):
    sec = "3. Daemon memory (RSS)"
    n = ctx.args.processes
    for run in range(ctx.runs):
        log(f"procs: run {run + 1}/{ctx.runs}, {n} processes at 999 Hz")
        p = ctx.perfd(999)
        try:
            time.sleep(1.0)
            idle_kib, _ = memory_kib(p.pid)
            st0 = p.status()
            w = ctx.procs.start([ctx.workload("procs"), "-n", str(n), "-s", "5"])
            rc = w.wait(timeout=90)
            ctx.procs.forget(w)
            if rc != 0:
                raise BenchError(f"the procs workload exited with status {rc}")
            time.sleep(0.5)  # two drains: every sample is in
            rss_kib, hwm_kib = memory_kib(p.pid)
            st1 = p.status()
            ps, ps_s, _ = p.call({"command": "ps", "interval": 10}, timeout=30)
            seen = sum(1 for e in ps["processes"] if e["comm"] == "procs")
        finally:
            p.stop()
        ctx.add("mem.idle.rss", sec, "perfd RSS at idle (just started)", "MiB", idle_kib / 1024, "lower")
        ctx.add("mem.procs.rss", sec, f"perfd RSS after {n} sleeping/waking processes", "MiB", rss_kib / 1024, "lower")
        ctx.add("mem.procs.hwm", sec, f"perfd peak RSS (VmHWM), {n} processes", "MiB", hwm_kib / 1024, "lower")
        ctx.add("mem.procs.seen", sec, f"workload processes perfd saw (of {n + 1})", "processes", seen, "higher")
        ctx.add("mem.procs.tracked", sec, "processes perfd tracked (all of the machine's)", "processes",
                st1["processes"]["tracked"])
        grown = st1["processes"]["tracked"] - st0["processes"]["tracked"]
        ctx.add("mem.procs.per_process", sec, "RSS growth per process tracked", "bytes",
                (rss_kib - idle_kib) * 1024 / grown if grown > 0 else None, "lower")
        ctx.add("query.ps.procs.ms", "5. Query latency (connect to last byte)",
                f"ps with {seen}+ processes in the window", "ms", ps_s * 1000, "lower")


# --- phase 12: perfctl top with 500 live processes --------------------------

# At 999 Hz each of the procs workload's children (~0.1 % of a CPU) is
# sampled about once a second on an idle machine, so all of them are known
# within seconds; the views take every live process ("all"), so that each
# refresh chooses from all 500 however busy the machine is.
TOP_HZ = 999
TOP_REFRESHES = 9


def phase_top(ctx):
    sec = "12. perfctl top: one refresh"
    n = ctx.args.processes
    views = (
        ("screen", "a screen: 50 rows of every live process, by CPU",
         {"rows": 50, "all": True}),
        ("batch", "every live process (batch), by growth",
         {"rows": 1000, "all": True, "sort": "growth"}),
        ("functions", "the functions of all processes, 50 rows",
         {"view": "functions", "rows": 50}),
    )
    for run in range(ctx.runs):
        log(f"top: run {run + 1}/{ctx.runs}, {n} processes at {TOP_HZ} Hz")
        p = ctx.perfd(TOP_HZ)
        w = None
        try:
            w = ctx.procs.start([ctx.workload("procs"), "-n", str(n), "-s", "60"])

            def all_seen():
                ps = p.call({"command": "ps", "all": True}, timeout=30)[0]
                return sum(1 for e in ps["processes"] if e["comm"] == "procs") >= n

            wait_until(all_seen, 50, f"perfd to know the {n} processes")
            for key, title, args in views:
                times, cpus, sizes, rows = [], [], [], 0
                for _ in range(TOP_REFRESHES):
                    cpu0 = cpu_ns(p.pid)
                    answer, elapsed, size = p.call(dict({"command": "top", "interval": 2}, **args),
                                                   timeout=30)
                    cpus.append((cpu_ns(p.pid) - cpu0) / 1e6)
                    times.append(elapsed * 1000)
                    sizes.append(size)
                    rows = answer["matched"]
                mid = TOP_REFRESHES // 2
                ctx.add(f"top.{key}.ms", sec, f"{title}: connect to last byte (median of {TOP_REFRESHES})",
                        "ms", sorted(times)[mid], "lower")
                ctx.add(f"top.{key}.cpu_ms", sec, f"{title}: perfd CPU per refresh (median)", "ms",
                        sorted(cpus)[mid], "lower")
                ctx.add(f"top.{key}.bytes", sec, f"{title}: bytes per refresh", "bytes", sorted(sizes)[mid],
                        "lower")
                ctx.add(f"top.{key}.matched", sec, f"{title}: rows perfd had to choose from", "rows", rows)
        finally:
            if w is not None:
                ctx.procs.stop(w, signal.SIGKILL, group=True)
            p.stop()


# --- phase 13: the exporters with 500 live processes -----------------------

# As in the top phase, 999 Hz so that every child of procs has samples in
# every interval, and so is exported each time.  Three intervals measured
# after one of warm-up (the first export of a binary reads its symbols).
EXPORT_HZ = 999
EXPORT_INTERVAL = 10
EXPORT_INTERVALS = 3


class IngestReceiver:
    """An HTTP server on 127.0.0.1 that answers 200 to every POST and
    counts requests and body bytes: the Pyroscope ingest endpoint as far as
    the pusher can tell."""

    def __init__(self):
        import http.server
        receiver = self
        self.requests = self.bytes = 0
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n)
                with receiver.lock:
                    receiver.requests += 1
                    receiver.bytes += len(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def counts(self):
        with self.lock:
            return self.requests, self.bytes

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def dir_bytes(path):
    return sum(f.stat().st_size for f in Path(path).iterdir() if f.is_file())


# --- off-CPU time (issue 30) ------------------------------------------------

OFFCPU_SECONDS = 6


def throughput(ctx, argv, key, seconds):
    """Runs a workload that prints "KEY N" at its end; returns N / seconds."""
    p = ctx.procs.start(argv, stdout=subprocess.PIPE)
    try:
        out, _ = p.communicate(timeout=seconds + 60)
    finally:
        ctx.procs.forget(p)
    for line in out.decode().splitlines():
        if line.startswith(key + " "):
            return int(line.split()[1]) / seconds
    raise BenchError(f"{argv[0]} printed no {key!r} line: {out[:300]!r}")


def other_offcpu(ctx, kind):
    """Starts the other off-CPU profiler of kind (perf_offcpu: `perf record
    --off-cpu` at 99 Hz; bpftrace_offcpu: Bpftrace.OFFCPU); returns its
    stop()."""
    if kind == "perf_offcpu":
        rec = PerfRecord(ctx.procs, ctx.tmpdir, 99, ctx.cpus, name="offcpu", extra=("--off-cpu",))

        def stop():
            rec.stop()
            try:
                os.unlink(rec.data)
            except OSError:
                pass
        return stop
    b = Bpftrace(ctx.procs, ctx.tmpdir, 99, ctx.cpus, program=Bpftrace.OFFCPU)
    return b.stop


def phase_offcpu(ctx):
    """Throughput of a context-switch-heavy pair and of a request/response
    server under perfd with off-CPU time on (its default), off
    (--no-offcpu), `perf record --off-cpu` and a bpftrace offcputime (every
    block's stacks, as bcc's), and no profiler, rotating; and the kernel's
    cost per switch: perfd's BPF time (run_time_ns of its sched_switch
    programs, kernel.bpf_stats_enabled) over the times it ran: every
    switch."""
    sec = ("13. Off-CPU time: throughput with perfd's off-CPU time on (default) against "
           "--no-offcpu, perf record --off-cpu, bpftrace's offcputime and no profiler "
           "(99 Hz, rotating), kernel cost per switch")
    loads = {"pingpong": ([str(ctx.build / "workloads" / "pingpong"), str(OFFCPU_SECONDS)], "rounds",
                          "round trips/s"),
             "server": ([ctx.workload("server"), str(OFFCPU_SECONDS), "8", "200"], "requests",
                        "requests/s")}
    kinds = ["none", "offcpu", "no_offcpu", "perf_offcpu", "bpftrace_offcpu"]
    for name, (argv, key, unit) in loads.items():
        for i in range(ctx.runs):
            order = kinds[i % len(kinds):] + kinds[:i % len(kinds)]
            log(f"offcpu: {name} run {i + 1}/{ctx.runs} ({', '.join(order)})")
            rate, per_switch = {}, None
            for kind in order:
                if kind == "none":
                    rate[kind] = throughput(ctx, argv, key, OFFCPU_SECONDS)
                    continue
                if kind in ("perf_offcpu", "bpftrace_offcpu"):
                    stop = other_offcpu(ctx, kind)
                    try:
                        time.sleep(0.5)
                        rate[kind] = throughput(ctx, argv, key, OFFCPU_SECONDS)
                    finally:
                        stop()
                    continue
                p = ctx.perfd(99, () if kind == "offcpu" else ("--no-offcpu",))
                try:
                    time.sleep(0.5)
                    with BpfStats():
                        names = bpf_prog_names()
                        st0, progs0 = p.status(), bpf_progs(p.pid, None)
                        rate[kind] = throughput(ctx, argv, key, OFFCPU_SECONDS)
                        st1, progs1 = p.status(), bpf_progs(p.pid, None)
                finally:
                    p.stop()
                if kind == "offcpu":
                    blocks = st1["offcpu"]["blocks"] - st0["offcpu"]["blocks"]
                    sampled = st1["offcpu"]["blocks_sampled"] - st0["offcpu"]["blocks_sampled"]
                    ctx.add(f"offcpu.{name}.blocks_per_s", sec, f"{name}: user-task switches perfd saw",
                            "/s", blocks / OFFCPU_SECONDS)
                    ctx.add(f"offcpu.{name}.sampled_pct", sec, f"{name}: ... whose stack was taken",
                            "%", sampled / blocks * 100 if blocks else None)
                    runs = {i: (progs1[i]["run_time_ns"] - progs0.get(i, {}).get("run_time_ns", 0),
                                progs1[i]["run_cnt"] - progs0.get(i, {}).get("run_cnt", 0))
                            for i in progs1 if names.get(i) == "on_switch_offcpu"}
                    ns, cnt = (sum(r[k] for r in runs.values()) for k in (0, 1))
                    ctx.add(f"offcpu.{name}.ns_per_switch", sec,
                            f"{name}: on_switch_offcpu's kernel time per context switch", "ns",
                            ns / cnt if cnt else None, "lower")
            ctx.add(f"offcpu.{name}.none", sec, f"{name}: {unit} without a profiler", unit, rate["none"],
                    "higher")
            ctx.add(f"offcpu.{name}.slow_pct", sec, f"{name}: slowdown with perfd (off-CPU on), run by run",
                    "%", (rate["none"] / rate["offcpu"] - 1) * 100, "lower")
            ctx.add(f"offcpu.{name}.slow_no_offcpu_pct", sec,
                    f"{name}: slowdown with perfd --no-offcpu, run by run", "%",
                    (rate["none"] / rate["no_offcpu"] - 1) * 100, "lower")
            ctx.add(f"offcpu.{name}.cost_pct", sec,
                    f"{name}: off-CPU time's own cost (on against --no-offcpu), run by run", "%",
                    (rate["no_offcpu"] / rate["offcpu"] - 1) * 100, "lower")
            for other, label in (("perf_offcpu", "perf record --off-cpu (99 Hz)"),
                                 ("bpftrace_offcpu", "bpftrace offcputime (every block)")):
                ctx.add(f"offcpu.{name}.slow_{other}_pct", sec,
                        f"{name}: slowdown with {label}, run by run", "%",
                        (rate["none"] / rate[other] - 1) * 100, "lower")


def phase_export(ctx):
    sec = "13. Exporters: daemon CPU and bytes per interval"
    n = ctx.args.processes
    for run in range(ctx.runs):
        cpu = {}
        for mode in ("off", "on"):
            log(f"export: run {run + 1}/{ctx.runs}, exporters {mode}, {n} processes at {EXPORT_HZ} Hz")
            recv = outdir = None
            extra = []
            if mode == "on":
                recv = IngestReceiver()
                outdir = tempfile.mkdtemp(prefix="export-", dir=ctx.tmpdir)
                extra = ["--interval", f"{EXPORT_INTERVAL}s", "--output-dir", outdir,
                         "--push-url", recv.url]
            p = ctx.perfd(EXPORT_HZ, extra)
            w = None
            try:
                seconds = EXPORT_INTERVAL * (EXPORT_INTERVALS + 2) + 30
                w = ctx.procs.start([ctx.workload("procs"), "-n", str(n), "-s", str(seconds)])

                def all_seen():
                    ps = p.call({"command": "ps", "all": True}, timeout=30)[0]
                    return sum(1 for e in ps["processes"] if e["comm"] == "procs") >= n

                wait_until(all_seen, 50, f"perfd to know the {n} processes")
                time.sleep(EXPORT_INTERVAL)  # warm-up: one interval
                req0, sent0 = recv.counts() if recv else (0, 0)
                disk0 = dir_bytes(outdir) if outdir else 0
                cpu0 = cpu_ns(p.pid)
                time.sleep(EXPORT_INTERVAL * EXPORT_INTERVALS)
                cpu[mode] = (cpu_ns(p.pid) - cpu0) / 1e9 / (EXPORT_INTERVAL * EXPORT_INTERVALS)
                if recv:
                    req1, sent1 = recv.counts()
                    ctx.add("export.push.bytes", sec, "bytes pushed to Pyroscope per interval", "bytes",
                            (sent1 - sent0) / EXPORT_INTERVALS, "lower")
                    ctx.add("export.push.requests", sec, "ingest requests per interval (one per process "
                            "and kind)", "requests", (req1 - req0) / EXPORT_INTERVALS)
                    # files are removed by age and size only: none go within the window
                    ctx.add("export.files.bytes", sec, "pprof bytes written per interval", "bytes",
                            (dir_bytes(outdir) - disk0) / EXPORT_INTERVALS, "lower")
            finally:
                if w is not None:
                    ctx.procs.stop(w, signal.SIGKILL, group=True)
                p.stop()
                if recv:
                    recv.close()
        ctx.add("export.cpu.off", sec, f"perfd CPU, exporters off ({n} live processes, {EXPORT_HZ} Hz)",
                "% of a CPU", cpu["off"] * 100, "lower")
        ctx.add("export.cpu.on", sec, f"perfd CPU, files and push every {EXPORT_INTERVAL} s",
                "% of a CPU", cpu["on"] * 100, "lower")
        ctx.add("export.cpu.ratio", sec, "perfd CPU, exporters on / off", "x", ratio(cpu["on"], cpu["off"]),
                "lower")


# --- phase 3b and 5: memory per unique stack, query latency ---------------

def timed_snapshot(p, pid, duration, on_close=None):
    """Takes a snapshot of pid for duration seconds.  on_close, when given,
    is called just before the window closes (with the snapshot still
    running).  Returns (answer, seconds from the end of the window to the
    answer's last byte, answer bytes, what on_close returned)."""
    box = {}

    def run():
        try:
            box["t0"] = time.perf_counter()
            box["answer"] = request(p.socket, {"version": 1, "command": "snapshot", "pid": pid,
                                               "duration": duration}, timeout=duration + 300)
        except Exception as e:  # handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    closing = None
    if on_close:
        wait_until(lambda: "t0" in box, 5, "the snapshot thread")
        time.sleep(max(0.0, box["t0"] + duration - 0.1 - time.perf_counter()))
        closing = on_close()
    t.join(duration + 330)
    if "error" in box:
        raise box["error"]
    if "answer" not in box:
        raise BenchError("the snapshot never answered")
    answer, elapsed, size = box["answer"]
    return answer, elapsed - duration, size, closing


def profile_lines(answer):
    return [line for line in answer.get("profile", "").split("\n") if line]


def phase_stacks(ctx):
    secm = "3. Daemon memory (RSS)"
    secq = "5. Query latency (connect to last byte)"
    extra = ["--max-stacks", "2000000", "--max-frames", "100000000"]
    for run in range(ctx.runs):
        log(f"stacks: run {run + 1}/{ctx.runs}, perfd at {STACKS_HZ} Hz")
        p = ctx.perfd(STACKS_HZ, extra)
        wl = None
        try:
            time.sleep(1.0)
            idle_kib, _ = memory_kib(p.pid)
            st_idle = p.status()
            status_idle = [p.call({"command": "status"})[1] for _ in range(5)]
            ps_idle = [p.call({"command": "ps"})[1] for _ in range(5)]

            wl = ctx.procs.start([ctx.workload("paths"), "-d", str(PATHS_DEPTH), "-T", str(ctx.cpus),
                                  "-s", "600"])
            time.sleep(0.3)

            # The workload is stopped (SIGSTOP) just before each window
            # closes, so the encoding does not compete with it for the CPUs
            # (it still competes with whatever else runs on the machine).
            def pause():
                os.kill(wl.pid, signal.SIGSTOP)

            def resume():
                os.kill(wl.pid, signal.SIGCONT)

            # How fast unique stacks arrive depends on the CPU the workload
            # gets, which other users of the machine change: learn it from a
            # first window, and again from the '10k' one, to size the next.
            cal, _, _, _ = timed_snapshot(p, wl.pid, 1.5, pause)
            resume()
            lines, seconds = len(profile_lines(cal)), cal["duration_seconds"]
            d10 = min(max(10500 / max(lines / seconds, 100.0), 0.2), 20.0)

            def close_window():
                pause()
                return cpu_ns(p.pid)

            ans10, lat10, _, cpu10 = timed_snapshot(p, wl.pid, d10, close_window)
            cpu10 = (cpu_ns(p.pid) - cpu10) / 1e9
            resume()
            lines += len(profile_lines(ans10))
            seconds += ans10["duration_seconds"]

            def close_100k():
                pause()
                kib, _ = memory_kib(p.pid)
                st = p.status()
                return kib, st, cpu_ns(p.pid)

            d100 = min(max(105000 / max(lines / seconds, 100.0), 1.0), ctx.args.max_window)
            ans100, lat100, size100, (rss_kib, st_full, cpu100) = timed_snapshot(p, wl.pid, d100, close_100k)
            cpu100 = (cpu_ns(p.pid) - cpu100) / 1e9
            _, hwm_kib = memory_kib(p.pid)
            ctx.procs.stop(wl, signal.SIGKILL)
            wl = None
            time.sleep(0.3)

            status_full = [p.call({"command": "status"})[1] for _ in range(7)]
            ps_full = [p.call({"command": "ps"})[1] for _ in range(7)]
            st_end = p.status()
        finally:
            if wl is not None:
                ctx.procs.stop(wl, signal.SIGKILL)
            p.stop()

        n10, n100 = len(profile_lines(ans10)), len(profile_lines(ans100))
        interned = st_full["stacks"]["interned"] - st_idle["stacks"]["interned"]
        ctx.add("mem.stacks.idle", secm, f"perfd RSS at idle ({STACKS_HZ} Hz, large limits)", "MiB",
                idle_kib / 1024, "lower")
        ctx.add("mem.stacks.interned", secm, "unique stacks interned by the end", "stacks",
                st_full["stacks"]["interned"])
        ctx.add("mem.stacks.rss", secm, "perfd RSS with those stacks", "MiB", rss_kib / 1024, "lower")
        ctx.add("mem.stacks.per_stack", secm, "RSS growth per unique stack", "bytes",
                (rss_kib - idle_kib) * 1024 / interned if interned > 0 else None, "lower")
        ctx.add("mem.stacks.agg_per_stack", secm, "perfd's own count (aggregation_bytes) per stack", "bytes",
                st_full["stacks"]["aggregation_bytes"] / max(st_full["stacks"]["interned"], 1), "lower")
        ctx.add("mem.stacks.hwm", secm, "perfd peak RSS (VmHWM) after encoding the big snapshot", "MiB",
                hwm_kib / 1024, "lower")
        ctx.add("mem.stacks.lost", secm, f"samples lost during the phase ({STACKS_HZ} Hz)", "samples",
                st_end["samples"]["lost_total"], "lower")

        ctx.add("query.status.idle.ms", secq, "status, idle daemon (median of 5)", "ms",
                sorted(status_idle)[2] * 1000, "lower")
        ctx.add("query.ps.idle.ms", secq, "ps, idle daemon (median of 5)", "ms", sorted(ps_idle)[2] * 1000, "lower")
        ctx.add("query.status.full.ms", secq, "status, daemon holding the stacks (median of 7)", "ms",
                sorted(status_full)[3] * 1000, "lower")
        ctx.add("query.ps.full.ms", secq, "ps, daemon holding the stacks (median of 7)", "ms",
                sorted(ps_full)[3] * 1000, "lower")
        ctx.add("query.snapshot_10k.lines", secq, "snapshot '10k': unique stacks (folded lines) reached",
                "stacks", n10)
        ctx.add("query.snapshot_10k.ms", secq, "snapshot '10k': end of window to last byte", "ms",
                lat10 * 1000, "lower")
        ctx.add("query.snapshot_10k.cpu_ms", secq, "snapshot '10k': perfd CPU from window end to answer", "ms",
                cpu10 * 1000, "lower")
        ctx.add("query.snapshot_100k.lines", secq, "snapshot '100k': unique stacks (folded lines) reached",
                "stacks", n100)
        ctx.add("query.snapshot_100k.ms", secq, "snapshot '100k': end of window to last byte", "ms",
                lat100 * 1000, "lower")
        ctx.add("query.snapshot_100k.cpu_ms", secq, "snapshot '100k': perfd CPU from window end to answer",
                "ms", cpu100 * 1000, "lower")
        ctx.add("query.snapshot_100k.per_100k", secq, "snapshot '100k': time scaled to 100k stacks", "ms",
                lat100 * 1000 * 100000 / n100 if n100 else None, "lower")
        ctx.add("query.snapshot_100k.mib", secq, "snapshot '100k': answer size", "MiB", size100 / MIB)
        ctx.add("query.snapshot_100k.window", secq, "snapshot '100k': window", "s", d100)


# --- phase 4: fidelity ----------------------------------------------------

def perf_pid_samples(perf, pid):
    out = perf.report("--no-children", "--pid", str(pid), "--sort", "pid", "-g", "none", "--show-nr-samples")
    total = 0
    for line in out.splitlines():
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(\d+):", line)
        if m and int(m.group(2)) == pid:
            total += int(m.group(1))
    return total


def perf_split(perf, pid):
    """(hot %, cold %) of pid's samples under hot_75 / cold_25, children
    included, as `perf report` prints them."""
    out = perf.report("--children", "--pid", str(pid), "--sort", "sym", "-g", "none")
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+[\d.]+%\s+\[\.\]\s+(hot_75|cold_25)\s*$", line)
        if m:
            found[m.group(2)] = float(m.group(1))
    return found.get("hot_75", 0.0), found.get("cold_25", 0.0)


def perf_lost(perf):
    m = re.search(r"Total Lost Samples:\s*(\d+)", perf.report("--sort", "pid", "-g", "none"))
    return int(m.group(1)) if m else None


def phase_fidelity(ctx):
    sec = "4. Fidelity at 999 Hz (perfd and perf record on the same run of a 75/25 workload)"
    hz = 999
    cpu_s = ctx.args.fidelity_seconds
    p = ctx.perfd(hz)
    try:
        for run in range(ctx.runs):
            log(f"fidelity: run {run + 1}/{ctx.runs}")
            perf = PerfRecord(ctx.procs, ctx.tmpdir, hz, ctx.cpus, name="fidelity")
            try:
                st0 = p.status()
                wl = ctx.procs.start([ctx.workload("ratio"), str(cpu_s), "1.0"])
                box = {}
                t = threading.Thread(target=lambda: box.update(a=request(
                    p.socket, {"version": 1, "command": "snapshot", "pid": wl.pid, "duration": 60},
                    timeout=120)), daemon=True)
                t.start()
                _, status, ru = os.wait4(wl.pid, 0)
                wl.returncode = os.waitstatus_to_exitcode(status)
                ctx.procs.forget(wl)
                t.join(120)
                if "a" not in box:
                    raise BenchError("the fidelity snapshot did not answer")
                time.sleep(0.3)
                st1 = p.status()
            finally:
                perf.stop()
            try:
                ans = box["a"][0]
                cpu = ru.ru_utime + ru.ru_stime
                expected = hz * cpu
                hot = cold = 0
                for line in profile_lines(ans):
                    frames, _, count = line.rpartition(" ")
                    names = frames.split(";")
                    if "hot_75" in names:
                        hot += int(count)
                    elif "cold_25" in names:
                        cold += int(count)
                perfd_hot = hot / (hot + cold) * 100 if hot + cold else None
                perf_n = perf_pid_samples(perf, wl.pid)
                ph, pc = perf_split(perf, wl.pid)
                perf_hot = ph / (ph + pc) * 100 if ph + pc else None
                plost = perf_lost(perf)
            finally:
                os.unlink(perf.data)
            ctx.add("fid.expected", sec, "expected samples (999 Hz x workload CPU-seconds)", "samples", expected)
            ctx.add("fid.perfd.received", sec, "perfd: samples received / expected", "%",
                    ans["samples"] / expected * 100)
            ctx.add("fid.perf.received", sec, "perf: samples recorded / expected", "%", perf_n / expected * 100)
            ctx.add("fid.perfd.lost", sec, "perfd: samples lost (whole machine, during the run)", "samples",
                    st1["samples"]["lost_total"] - st0["samples"]["lost_total"], "lower")
            ctx.add("fid.perf.lost", sec, "perf: samples lost (whole recording)", "samples", plost, "lower")
            ctx.add("fid.perfd.hot", sec, "perfd: share under hot_75 (truth 75)", "%", perfd_hot)
            ctx.add("fid.perf.hot", sec, "perf report: share under hot_75 (truth 75)", "%", perf_hot)
            ctx.add("fid.perfd.error", sec, "perfd: attribution error |measured - 75|", "pp",
                    abs(perfd_hot - 75) if perfd_hot is not None else None, "lower")
            ctx.add("fid.perf.error", sec, "perf report: attribution error |measured - 75|", "pp",
                    abs(perf_hot - 75) if perf_hot is not None else None, "lower")
    finally:
        p.stop()


# --- phase 6: slowdown ----------------------------------------------------

def run_fixed_work(ctx, rounds):
    """Wall time of `deep -n rounds` on every CPU, start to exit.  The wait
    blocks in waitpid(): Popen.wait(timeout) polls every 50 ms, which would
    round every run to a multiple of 50 ms.  A timer guards against a hang."""
    t0 = time.perf_counter()
    w = ctx.procs.start([ctx.workload("deep"), "-d", str(DEEP_DEPTH), "-w", str(ctx.cpus), "-n", str(rounds)])
    guard = threading.Timer(120, lambda: ctx.procs.stop(w, signal.SIGKILL, group=True))
    guard.start()
    try:
        rc = w.wait()
    finally:
        guard.cancel()
    elapsed = time.perf_counter() - t0
    ctx.procs.forget(w)
    if rc != 0:
        raise BenchError(f"deep -n {rounds} exited with status {rc}")
    return elapsed


def phase_slowdown(ctx):
    sec = "6. Workload slowdown at 999 Hz (fixed work on every CPU; none / perfd / perf record, rotating)"
    probe = 500
    t = run_fixed_work(ctx, probe)
    rounds = max(100, int(probe * ctx.args.slowdown_seconds / t))
    runs = max(ctx.runs, ctx.args.slowdown_runs)
    kinds = ["none", "perfd", "perf"]
    without = []
    for i in range(runs):
        order = kinds[i % 3:] + kinds[:i % 3]
        log(f"slowdown: run {i + 1}/{runs} ({rounds} rounds x {ctx.cpus} workers; {', '.join(order)})")
        wall, perfd_cpu = {}, None
        for kind in order:
            if kind == "perfd":
                p = ctx.perfd(999)
                try:
                    time.sleep(0.3)
                    c0 = cpu_ns(p.pid)
                    wall[kind] = run_fixed_work(ctx, rounds)
                    perfd_cpu = (cpu_ns(p.pid) - c0) / 1e9
                finally:
                    p.stop()
            elif kind == "perf":
                rec = PerfRecord(ctx.procs, ctx.tmpdir, 999, ctx.cpus, name="slowdown")
                try:
                    time.sleep(0.3)
                    wall[kind] = run_fixed_work(ctx, rounds)
                finally:
                    rec.stop()
                    os.unlink(rec.data)
            else:
                wall[kind] = run_fixed_work(ctx, rounds)
        without.append(wall["none"])
        ctx.add("slow.without", sec, "wall time without a profiler", "s", wall["none"], "lower")
        ctx.add("slow.perfd", sec, "wall time with perfd", "s", wall["perfd"], "lower")
        ctx.add("slow.perf", sec, "wall time with perf record -g -a", "s", wall["perf"], "lower")
        ctx.add("slow.pct", sec, "perfd slowdown, run by run", "%", (wall["perfd"] / wall["none"] - 1) * 100, "lower")
        ctx.add("slow.perf_pct", sec, "perf record slowdown, run by run", "%",
                (wall["perf"] / wall["none"] - 1) * 100, "lower")
        ctx.add("slow.perfd_cpu", sec, "perfd's own CPU during the run", "% of the work's CPU",
                perfd_cpu / (wall["perfd"] * ctx.cpus) * 100, "lower")
    med = sorted(without)[len(without) // 2]
    noise = (max(without) - min(without)) / med * 100
    ctx.add("slow.noise", sec, "noise: spread (max-min)/median of the runs without", "%", noise)
    # Three verdicts: runs that disagree on the sign are noise; runs that
    # are all slower show a real slowdown (7 of 7 by chance: p < 0.01) whose
    # size is only known when the median is above the spread of the runs
    # without a profiler.
    for key, who in (("slow.pct", "perfd"), ("slow.perf_pct", "perf record")):
        s = ctx.results.summary(key)
        slower = sum(1 for v in ctx.results.figures[key]["values"] if v is not None and v > 0)
        if s["min"] <= 0:
            verdict = "within noise"
        elif s["median"] <= noise:
            verdict = "consistently slower, by an amount within the noise"
        else:
            verdict = "BEYOND noise"
        ctx.results.note(f"slowdown with {who} at 999 Hz: median {s['median']:+.1f}% (runs {s['min']:+.1f}% "
                         f"to {s['max']:+.1f}%, {slower} of {s['n']} slower) against a {noise:.1f}% spread "
                         f"without any profiler: {verdict}")


# --- phase 7 and 8: Python frames -----------------------------------------

def python_interpreters(ctx):
    """(path, "3.X.Y") of each --pythons interpreter that runs, once per
    benchmark run; the others are skipped, with a note in the results."""
    if ctx.pythons is None:
        ctx.pythons = []
        for path in ctx.args.pythons:
            try:
                r = subprocess.run([path, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                   capture_output=True, text=True, timeout=30)
                version = r.stdout.strip() if r.returncode == 0 else ""
            except OSError:
                version = ""
            if not version:
                msg = f"Python phases: skipped {path}: not installed, or it does not run"
                log(msg)
                ctx.results.note(msg)
                continue
            ctx.pythons.append((path, version))
    return ctx.pythons


def read_line(proc, timeout):
    """The next line proc writes on its stdout pipe, within timeout s."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise BenchError(f"{' '.join(proc.args)} printed nothing in {timeout:.0f} s")
    return proc.stdout.readline().decode(errors="replace")


def start_pydeep(ctx, python, depth):
    """One pydeep.py per CPU, each spinning DEPTH Python frames deep when
    this returns."""
    procs = [ctx.procs.start([python, str(PYDEEP), str(depth)], stdout=subprocess.PIPE)
             for _ in range(ctx.cpus)]
    for p in procs:
        line = read_line(p, 30)
        if line.split() != ["ready", str(depth)]:
            raise BenchError(f"pydeep.py under {python} printed {line.strip()!r}, expected 'ready {depth}'")
    return procs


def python_frames_per_sample(answer, script):
    """Python frames of script per sample in a snapshot: perfd names them
    'qualname (file:line)', or 'qualname (file)' when the line is unknown."""
    frames = samples = 0
    for line in profile_lines(answer):
        stack, _, count = line.rpartition(" ")
        samples += int(count)
        frames += int(count) * sum(1 for name in stack.split(";")
                                   if f"({script}:" in name or name.endswith(f"({script})"))
    return frames / samples if samples else None


def measure_python(ctx, p, python, depth):
    """Starts one pydeep.py per CPU at depth, and measures the running perfd
    p over one window after a warm-up (in which p finds the new processes
    and, walker on, describes them to BPF): BPF cost per sample, how much
    the python.* counters of status moved, and the Python frames per sample
    of one of the workloads (a snapshot over the same window)."""
    wl = start_pydeep(ctx, python, depth)
    box = {}

    def snapshot():
        try:
            box["answer"] = request(p.socket, {"version": 1, "command": "snapshot", "pid": wl[0].pid,
                                               "duration": ctx.window}, timeout=ctx.window + 60)[0]
        except Exception as e:  # handed to the caller's thread
            box["error"] = e

    try:
        time.sleep(ctx.args.warmup)
        st0 = p.status()
        t = threading.Thread(target=snapshot, daemon=True)
        t.start()
        w = cpu_window(ctx, p.pid, prog_type=None)
        taken = delivered(p.status()) - delivered(st0)
        names = bpf_prog_names()
        t.join(ctx.window + 60)
        if any(x.poll() is not None for x in wl):
            raise BenchError("a pydeep.py workload exited early")
        time.sleep(0.25)  # one more drain: the window's frames are merged
        st1 = p.status()
    finally:
        for x in wl:
            ctx.procs.stop(x, signal.SIGKILL, group=True)
            x.stdout.close()
    if "error" in box:
        raise box["error"]
    if "answer" not in box:
        raise BenchError("the Python snapshot never answered")

    def moved(key):
        return st1["python"][key] - st0["python"][key]

    return {"ns": sampling_cost(ctx, w, taken, names)["ns"], "walks": moved("samples"), "truncated": moved("samples_truncated"),
            "frames": moved("frames"), "snap_frames": python_frames_per_sample(box["answer"], PYDEEP)}


def python_kernel_cost(ctx, python, version):
    """Each run starts two perfds one after the other, walker on and walker
    off (--no-python), in an order that alternates; each measures one
    window of the deep workload and one of the shallow one (fresh
    processes each time), in an order that alternates too.  Ratios are
    taken within a run."""
    sec = f"7. Python frames: kernel cost per sample, CPython {version} ({PY_HZ} Hz, one pydeep.py per CPU)"
    hi, lo = max(PY_DEPTHS), min(PY_DEPTHS)
    for run in range(ctx.runs):
        modes = ["on", "off"] if run % 2 == 0 else ["off", "on"]
        depths = [hi, lo] if run % 2 == 0 else [lo, hi]
        log(f"python_kernel_cost: CPython {version}, run {run + 1}/{ctx.runs} (walker {' then '.join(modes)}; "
            f"{' then '.join(map(str, depths))} frames deep)")
        m = {}
        for mode in modes:
            p = ctx.perfd(PY_HZ, () if mode == "on" else ("--no-python",))
            try:
                for depth in depths:
                    m[mode, depth] = measure_python(ctx, p, python, depth)
            finally:
                p.stop()
        walker_ns = {}
        for depth in PY_DEPTHS:
            on, off = m["on", depth], m["off", depth]
            # The walker must have run, and only when on, or the figures
            # measure something else.
            if not on["walks"]:
                raise BenchError(f"perfd walked no Python stack of CPython {version} (python.samples did "
                                 "not move)")
            if off["walks"]:
                raise BenchError(f"perfd --no-python walked {off['walks']} Python stacks")
            if on["truncated"] > 0.01 * on["walks"]:
                ctx.results.note(f"CPython {version}, {depth} deep, run {run + 1}: {on['truncated']} of "
                                 f"{on['walks']} Python walks truncated")
            pfx = f"py.kernel.{version}.{depth}"
            ctx.add(f"{pfx}.on", sec, f"{depth}-deep: perfd's sampling programs, Python walker on", "ns/sample",
                    on["ns"], "lower")
            ctx.add(f"{pfx}.off", sec, f"{depth}-deep: walker off (--no-python), native only", "ns/sample",
                    off["ns"], "lower")
            ctx.add(f"{pfx}.ratio", sec, f"{depth}-deep: walker on / off", "x", ratio(on["ns"], off["ns"]), "lower")
            ctx.add(f"{pfx}.frames", sec, f"{depth}-deep: Python frames per sample of a workload (snapshot)",
                    "frames", on["snap_frames"])
            ctx.add(f"{pfx}.status_frames", sec,
                    f"{depth}-deep: python.frames / python.samples (status, whole machine)", "frames",
                    ratio(on["frames"], on["walks"]))
            ctx.add(f"{pfx}.walks", sec, f"{depth}-deep: python.samples in the window (whole machine)", "samples",
                    on["walks"])
            ctx.add(f"{pfx}.truncated", sec, f"{depth}-deep: python.samples_truncated in the window", "samples",
                    on["truncated"], "lower")
            walker_ns[depth] = on["ns"] - off["ns"] if on["ns"] and off["ns"] else None
        # One frame: what the walker adds at the deep stack minus what it
        # adds at the shallow one, over the frames in between.
        ctx.add(f"py.kernel.{version}.per_frame", sec,
                f"walker cost per Python frame: ((on - off) at {hi} - (on - off) at {lo}) / {hi - lo}",
                "ns/frame", (walker_ns[hi] - walker_ns[lo]) / (hi - lo)
                if walker_ns[hi] is not None and walker_ns[lo] is not None else None, "lower")


def phase_python_kernel_cost(ctx):
    pythons = python_interpreters(ctx)
    if not pythons:
        raise BenchError("none of the --pythons interpreters is installed")
    failed = []
    with BpfStats():
        for python, version in pythons:
            try:
                python_kernel_cost(ctx, python, version)
            except BenchError as e:  # one interpreter must not cost the others
                failed.append(f"CPython {version} ({python}): {e}")
                log(f"python_kernel_cost: {failed[-1]}")
            finally:
                ctx.procs.cleanup()
    if failed:
        raise BenchError("; ".join(failed))


def phase_python_symbolize_cost(ctx):
    pythons = python_interpreters(ctx)
    if not pythons:
        raise BenchError("none of the --pythons interpreters is installed")
    sec = (f"8. Python frames: user-space cost (pybench: {PY_CODE_OBJECTS:,} new code objects per run, "
           "a fresh CPython each run)")
    failed = []
    for python, version in pythons:
        log(f"python_symbolize_cost: CPython {version}, {PY_CODE_OBJECTS} code objects, {ctx.runs} runs")
        proc = ctx.procs.start([str(ctx.build / "bench" / "pybench"), python, str(PY_CODE_OBJECTS), str(ctx.runs)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            ctx.procs.stop(proc, signal.SIGKILL)
            failed.append(f"CPython {version}: pybench did not finish in 300 s")
            continue
        ctx.procs.forget(proc)
        if proc.returncode != 0:
            failed.append(f"CPython {version}: pybench exited with status {proc.returncode}: "
                          f"{err.decode(errors='replace').strip()[-500:]}")
            log(f"python_symbolize_cost: {failed[-1]}")
            continue
        doc = json.loads(out)
        name = f"CPython {version}"
        for v in doc["detect_ms"]:
            ctx.add(f"py.sym.{version}.detect", sec, f"{name}: find the runtime in a new process "
                    "(read maps + pyruntime_detect)", "ms/process", v, "lower")
        for v in doc["new_code_us"]:
            ctx.add(f"py.sym.{version}.new_code", sec, f"{name}: read a new code object (pycode_read)",
                    "us/code object", v, "lower")
        for v in doc["read_us"]:
            ctx.add(f"py.sym.{version}.read", sec, f"{name}: one 8-byte read of its memory (pymem_read: "
                    "process_vm_readv)", "us/read", v, "lower")
        for v in doc["cached_line_ns"]:
            ctx.add(f"py.sym.{version}.cached_line", sec, f"{name}: a frame of a cached code object "
                    "(u64map_get + pylinetable_line)", "ns/frame", v, "lower")
        ctx.results.note(f"pybench, {name}: line tables of {doc['linetable_bytes_mean']:.0f} bytes on average; "
                         f"{doc['cached_lookups_without_line'] * 100:.2f}% of cached lookups found no line")
    if failed:
        raise BenchError("; ".join(failed))


# --- phases 9 to 11: the profile store (issue 10) --------------------------

# The store phases' own figures.  STORE_HZ is the issue's rate; at it, the
# unique-stacks workload on every CPU brings at most CPUs x 999 new stacks
# a second, so a window of STORE_STACKS stacks lasts about a minute.
STORE_HZ = 999
STORE_STACKS = 100000
# Limits large enough that nothing of the phase is evicted: ~150k stacks of
# ~100 frames, and the live snapshots' own copies.
STORE_EXTRA = ("--max-memory", "2048", "--max-stacks", "4000000", "--max-frames", "400000000")
# Seconds between the ends of the live windows: more than one answer takes,
# so that no window's answer waits for the one before.
STORE_LIVE_GAP = 6.0


def snapshot_raw(socket_path, req, timeout):
    """Sends one snapshot request and reads the answer as perfctl would,
    without parsing the profile (a JSON call tree of 100k deep stacks is
    hundreds of MiB; json.loads of it would take minutes and gigabytes).
    Returns (answer without "profile", seconds from connect to the last
    byte, answer bytes, stacks): stacks is the number of folded lines, or
    of leaves of a JSON tree."""
    line = (json.dumps(dict({"version": 1, "command": "snapshot"}, **req)) + "\n").encode()
    chunks = []
    t0 = time.perf_counter()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(socket_path)
        s.sendall(line)
        while True:
            chunk = s.recv(1 << 22)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    elapsed = time.perf_counter() - t0
    buf = b"".join(chunks)
    if not buf.endswith(b"\n"):
        raise BenchError("perfd closed the connection without a whole snapshot answer")
    cut = buf.find(b'"profile":')
    if cut < 0:
        head = json.loads(buf)
        raise BenchError(f"perfd answered the snapshot with an error: {head.get('error')}")
    head = json.loads(buf[:cut] + b'"profile":null}')
    if req.get("format", "folded") == "json":
        stacks = buf.count(b'"children":[]')
    else:
        stacks = buf.count(b"\\n", cut)
    return head, elapsed, len(buf), stacks


def store_counters(st):
    lost = st["samples"]["lost"]
    return {"ringbuf_full": lost.get("ringbuf_full", 0), "queue_full": lost.get("queue_full", 0),
            "evicted": lost.get("evicted", 0), "lost": st["samples"]["lost_total"],
            "stall_ms": st["drain"]["longest_consume_ms"]}


def process_samples(p, pid, interval):
    ps = p.call({"command": "ps", "interval": interval})[0]
    return sum(e["samples"] for e in ps["processes"] if e["pid"] == pid)


def add_store_snapshot(ctx, kind, label, command, m):
    sec = ("9. Profile store: a snapshot of 100k unique stacks while they are made "
           f"({STORE_HZ} Hz, unique_stacks on every CPU)")
    pfx = f"store.snap.{kind}"
    # A snapshot from history is asked for when its window ends.
    ends = "end of window" if kind == "live" else "request (the window's end)"
    ctx.add(f"{pfx}.ms", sec, f"{label}: {ends} to last byte", "ms", m["latency"] * 1000, "lower", command)
    ctx.add(f"{pfx}.stacks", sec, f"{label}: unique stacks in the answer", "stacks", m["stacks"], None, command)
    ctx.add(f"{pfx}.mib", sec, f"{label}: answer size", "MiB", m["bytes"] / MIB, None, command)
    ctx.add(f"{pfx}.cpu_ms", sec, f"{label}: perfd CPU from {ends} to the answer", "ms", m["cpu"] * 1000,
            "lower", command)
    ctx.add(f"{pfx}.lost", sec, f"{label}: samples lost, window and answer (ringbuf_full + queue_full + "
            "evicted)", "samples", m["lost"], "lower", command)
    ctx.add(f"{pfx}.queue_full", sec, f"{label}: ... of which queue_full (the loop fell 32 MiB behind)",
            "samples", m["queue_full"], "lower", command)
    ctx.add(f"{pfx}.stall_ms", sec, f"{label}: drain.longest_consume_ms after the answer (daemon's max so far)",
            "ms", m["stall_after"], "lower", command)
    ctx.add(f"{pfx}.stall_grew_ms", sec, f"{label}: ... how much it grew during the snapshot", "ms",
            m["stall_after"] - m["stall_before"], "lower", command)
    ctx.add(f"{pfx}.hwm", sec, f"{label}: perfd peak RSS (VmHWM) after the answer", "MiB", m["hwm_kib"] / 1024,
            "lower", command)


def phase_store_snapshot(ctx):
    """One perfd at 999 Hz and the unique-stacks workload on every CPU, for
    the whole phase.  The rate of new stacks is learnt first; then --runs
    live snapshots (folded) whose windows hold ~100k stacks each, started
    STORE_LIVE_GAP apart so that their ends are too and no answer waits
    for another; then, from the store, --runs snapshots of the whole run
    (folded, the history path) and --runs of the last window's length in
    JSON.  Every window ends while the workload runs."""
    sec = ("9. Profile store: a snapshot of 100k unique stacks while they are made "
           f"({STORE_HZ} Hz, unique_stacks on every CPU)")
    p = ctx.perfd(STORE_HZ, STORE_EXTRA)
    wl = None
    try:
        wl = ctx.procs.start([str(ctx.build / "workloads" / "unique_stacks"), str(ctx.cpus), "3600"])
        t_start = time.monotonic()
        time.sleep(3.5)
        rate = process_samples(p, wl.pid, 2) / 2.0
        if rate <= 0:
            raise BenchError("perfd saw no sample of the unique_stacks workload")
        # ~7% of samples repeat a stack (they differ only in the leaf's
        # address within one function): aim a little above the target.
        d = min(max(STORE_STACKS * 1.12 / rate, 5.0), ctx.args.store_max_window)
        log(f"store_snapshot: {rate:.0f} samples/s of the workload: live windows of {d:.1f} s, "
            f"{ctx.runs} folded, then {ctx.runs} from history (folded) and {ctx.runs} (JSON)")
        ctx.add("store.snap.rate", sec, "samples/s of the workload (its share of the CPUs)", "samples/s", rate)
        ctx.add("store.snap.window", sec, "live window", "s", d)
        pid = wl.pid

        # Live, folded: windows started STORE_LIVE_GAP apart.
        boxes = []

        def live(box, req):
            try:
                box["st0"] = p.status()
                box["t0"] = time.perf_counter()
                box["answer"] = snapshot_raw(p.socket, req, d + 300)
                box["t1"] = time.perf_counter()
                box["cpu1"] = cpu_ns(p.pid)
                box["st1"] = p.status()
                box["hwm"] = memory_kib(p.pid)[1]
            except Exception as e:  # handed to the caller's thread
                box["error"] = e

        threads = []
        for k in range(ctx.runs):
            box = {}
            t = threading.Thread(target=live, args=(box, {"pid": pid, "duration": d}), daemon=True)
            t.start()
            threads.append(t)
            boxes.append(box)
            if k + 1 < ctx.runs:
                time.sleep(STORE_LIVE_GAP)
        # The daemon's CPU from each window's end: read at the end.
        for k, box in enumerate(boxes):
            wait_until(lambda: "t0" in box or "error" in box, 30, "a live snapshot to start")
            if "error" in box:
                raise box["error"]
            time.sleep(max(0.0, box["t0"] + d - time.perf_counter()))
            box["cpu0"] = cpu_ns(p.pid)
            threads[k].join(d + 330)
        for k, box in enumerate(boxes):
            if "error" in box:
                raise box["error"]
            head, elapsed, size, stacks = box["answer"]
            c0, c1 = store_counters(box["st0"]), store_counters(box["st1"])
            if k + 1 < ctx.runs and box["t1"] > boxes[k + 1]["t0"] + d:
                ctx.results.note(f"store_snapshot: live answer {k + 1} ended after window {k + 2} did; "
                                 "that window's time includes waiting for it")
            add_store_snapshot(ctx, "live", "live, folded", "perfctl snapshot --pid P --duration D",
                               {"latency": elapsed - d, "stacks": stacks, "bytes": size,
                                "cpu": (box["cpu1"] - box["cpu0"]) / 1e9,
                                "lost": c1["lost"] - c0["lost"], "queue_full": c1["queue_full"] - c0["queue_full"],
                                "stall_before": c0["stall_ms"], "stall_after": c1["stall_ms"],
                                "hwm_kib": box["hwm"]})

        def from_store(req, kind, label, command):
            st0 = p.status()
            c0 = cpu_ns(p.pid)
            head, elapsed, size, stacks = snapshot_raw(p.socket, req, 600)
            c1 = cpu_ns(p.pid)
            st1 = p.status()
            a, b = store_counters(st0), store_counters(st1)
            add_store_snapshot(ctx, kind, label, command,
                               {"latency": elapsed, "stacks": stacks, "bytes": size, "cpu": (c1 - c0) / 1e9,
                                "lost": b["lost"] - a["lost"], "queue_full": b["queue_full"] - a["queue_full"],
                                "stall_before": a["stall_ms"], "stall_after": b["stall_ms"],
                                "hwm_kib": memory_kib(p.pid)[1]})
            time.sleep(1.0)

        # From the store: the whole run so far, folded; then the last d
        # seconds (a live window's worth) as JSON.
        for k in range(ctx.runs):
            log(f"store_snapshot: history, folded, {k + 1}/{ctx.runs}")
            from_store({"pid": pid, "since": time.monotonic() - t_start + 1}, "history",
                       "history, folded, the whole run", "perfctl snapshot --pid P --since RUN")
        for k in range(ctx.runs):
            log(f"store_snapshot: history, JSON, {k + 1}/{ctx.runs}")
            from_store({"pid": pid, "since": d, "format": "json"}, "json",
                       "history, JSON, the last D seconds", "perfctl snapshot --pid P --since D --format json")
        if wl.poll() is not None:
            raise BenchError("the unique_stacks workload exited before the end")
        st = p.status()
        ctx.add("store.snap.interned", sec, "unique stacks interned by the end (whole machine)", "stacks",
                st["stacks"]["interned"], None, "perfctl status")
        ctx.add("store.snap.store_mib", sec, "store.memory_bytes by the end", "MiB",
                st["store"]["memory_bytes"] / MIB, None, "perfctl status")
    finally:
        if wl is not None:
            ctx.procs.stop(wl, signal.SIGKILL)
        p.stop()


def eh_frame_bytes(path):
    """The size of path's .eh_frame section (readelf -S), 0 when unknown."""
    try:
        out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return 0
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[1] == ".eh_frame":
            return int(f[5], 16)
    return 0


def phase_store_first_binary(ctx):
    """A process that maps a huge library (--big-library, libLLVM when
    installed) starts while perfd samples the deep-stack burner on every
    CPU at 999 Hz: samples lost and the drain's longest consume while the
    library's unwind table is built (on the builder thread), and how long
    the loop was busy (the longest wait for a status answer, asked every
    20 ms meanwhile)."""
    lib = ctx.args.big_library
    name = Path(lib).name
    sec = (f"10. Profile store: first sighting of a huge binary ({name}, "
           f"{Path(lib).stat().st_size / MIB:.0f} MiB) at {STORE_HZ} Hz, deep-stack burner on every CPU")
    command = f"build/bench/bigmap {lib} 8 (under perfd --frequency {STORE_HZ}); perfctl status"
    # The table is built when perfd has read (nearly) all of the library's
    # call frame information.
    cfi = 0.9 * eh_frame_bytes(lib) or MIB
    for run in range(ctx.runs):
        log(f"store_first_binary: run {run + 1}/{ctx.runs} ({name})")
        burner = ctx.procs.start([ctx.workload("deep"), "-d", str(DEEP_DEPTH), "-w", str(ctx.cpus),
                                  "-t", "3600"])
        p = ctx.perfd(STORE_HZ)
        big = None
        try:
            time.sleep(2.0)
            st0 = p.status()
            cpu0 = cpu_ns(p.pid)
            waits = []
            stop = threading.Event()

            def probe():
                while not stop.is_set():
                    waits.append(p.call({"command": "status"})[1])
                    time.sleep(0.02)

            t = threading.Thread(target=probe, daemon=True)
            t.start()
            t0 = time.monotonic()
            big = ctx.procs.start([ctx.workload("bigmap"), lib, "8"], stdout=subprocess.PIPE)
            if read_line(big, 30).strip() != "ready":
                raise BenchError(f"bigmap could not load {lib}")

            def built():
                st = p.status()
                return st if st["unwind"]["cfi_bytes_read"] - st0["unwind"]["cfi_bytes_read"] >= cfi else None

            st_built = wait_until(built, 60, f"perfd to build the unwind table of {name}", p.proc)
            ready_s = time.monotonic() - t0
            time.sleep(1.0)  # two more drains
            stop.set()
            t.join(10)
            st1 = p.status()
            cpu1 = cpu_ns(p.pid)
        finally:
            if big is not None:
                ctx.procs.stop(big, signal.SIGKILL)
                big.stdout.close()
            ctx.procs.stop(burner, signal.SIGKILL, group=True)
            p.stop()
        a, b = store_counters(st0), store_counters(st1)
        u0, u1 = st0["unwind"], st_built["unwind"]
        ctx.add("store.first.lost", sec, "samples lost (ringbuf_full + queue_full + evicted)", "samples",
                b["lost"] - a["lost"], "lower", command)
        # The counter is the daemon's maximum since it started: "after"
        # bounds the longest consume during the build from above, and it
        # grew only if one then was the longest yet.
        ctx.add("store.first.stall_ms", sec, "drain.longest_consume_ms after the table was built (max since start)",
                "ms", b["stall_ms"], "lower", command)
        ctx.add("store.first.stall_grew_ms", sec, "... how much it grew while the table was built", "ms",
                b["stall_ms"] - a["stall_ms"], "lower", command)
        ctx.add("store.first.loop_ms", sec, "longest wait for a status answer meanwhile (the loop busy)", "ms",
                max(waits) * 1000 if waits else None, "lower", command)
        ctx.add("store.first.ready_s", sec, "from the process's start to its table in perfd", "s", ready_s, "lower",
                command)
        ctx.add("store.first.build_ms", sec, "unwind.build_seconds added", "ms",
                (u1["build_seconds"] - u0["build_seconds"]) * 1000, "lower", command)
        ctx.add("store.first.upload_ms", sec, "unwind.upload_seconds added (the builder thread's uploads)", "ms",
                (u1.get("upload_seconds", 0) - u0.get("upload_seconds", 0)) * 1000, "lower", command)
        ctx.add("store.first.cfi_mib", sec, "unwind.cfi_bytes_read added", "MiB",
                (u1["cfi_bytes_read"] - u0["cfi_bytes_read"]) / MIB, None, command)
        ctx.add("store.first.rows", sec, "unwind.rows_used added", "rows", u1["rows_used"] - u0["rows_used"], None,
                command)
        # Other processes' tables share the unwind memory (--unwind-mib):
        # when it is full, a new table waits for room.
        for k in ("tables_refused", "tables_evicted", "tables_failed"):
            ctx.add(f"store.first.{k}", sec, f"unwind.{k} added", "tables", u1.get(k, 0) - u0.get(k, 0), None,
                    command)
        ctx.add("store.first.rows_capacity", sec, "unwind.rows_capacity", "rows", u1.get("rows_capacity"), None,
                command)
        ctx.add("store.first.cpu_ms", sec, "perfd CPU from the process's start to the end", "ms",
                (cpu1 - cpu0) / 1e6, "lower", command)


# The simulated machines of phase store_memory: (key, what it is,
# storebench's arguments).
STORE_MEMORY_SCENARIOS = (
    ("skewed", "CPU shared by a Zipf law over the processes", ("--skew", "1")),
    ("uniform", "every process equally busy (the most windows)", ("--skew", "0")),
    ("rss", "skewed, and every process's RSS changing every second", ("--skew", "1", "--rss-share", "1")),
)


def phase_store_memory(ctx):
    """perfd's RSS just after it starts (default options, 99 Hz), and the
    store's cost over an hour of 500 simulated processes at 99 Hz on this
    machine's CPUs (build/bench/storebench, one fresh process per run):
    what it holds, the RSS it adds, and a query of one process over the
    whole hour with its model and its folded text.  The daemon's RSS with
    that store is estimated as the idle RSS plus the RSS storebench grew
    by, run by run."""
    n = ctx.args.processes
    sec = f"11. Profile store memory: {n} processes over 1 h at 99 Hz on {ctx.cpus} CPUs, simulated (storebench)"
    idle = []
    for run in range(ctx.runs):
        p = ctx.perfd(99)
        try:
            time.sleep(2.0)
            idle.append(memory_kib(p.pid)[0] / 1024)
        finally:
            p.stop()
        ctx.add("store.mem.idle_rss", sec, "perfd RSS just after it starts (99 Hz, defaults)", "MiB", idle[-1],
                "lower", "perfd --frequency 99; VmRSS after 2 s")
    for run in range(ctx.runs):
        for key, what, args in STORE_MEMORY_SCENARIOS:
            argv = [str(ctx.build / "bench" / "storebench"), "--procs", str(n), "--hz", "99",
                    "--cpus", str(ctx.cpus), "--seconds", "3600", "--seed", str(run + 1), *args]
            command = " ".join(["build/bench/storebench"] + argv[1:-2 - len(args)] + ["--seed", "RUN"] + list(args))
            log(f"store_memory: run {run + 1}/{ctx.runs}, {key}: {what}")
            r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise BenchError(f"storebench {' '.join(args)} failed: {r.stderr.strip()[-500:]}")
            f = json.loads(r.stdout)
            label = f"{key} ({what})"
            pfx = f"store.mem.{key}"

            def add(k, title, unit, value, better=None):
                ctx.add(f"{pfx}.{k}", sec, f"{label}: {title}", unit, value, better, command)

            add("rss_growth", "RSS storebench grew by", "MiB", f["rss_growth_mib"], "lower")
            add("daemon_rss", "estimated perfd RSS: idle + that growth", "MiB", idle[run] + f["rss_growth_mib"],
                "lower")
            add("store_mib", "store.memory_bytes", "MiB", f["store_memory_mib"], "lower")
            add("history_mib", "... of which windows (history_bytes)", "MiB", f["history_mib"], "lower")
            add("log_mib", "... of which sealed windows (the logs' buffers)", "MiB", f["log_mib"], "lower")
            add("open_mib", "... of which open windows (structs and maps)", "MiB", f["open_window_mib"], "lower")
            add("windows_open", "open windows", "windows", f["windows_open"])
            add("windows", "windows (1 s / 10 s / 60 s in the notes)", "windows", f["windows"])
            add("entries_per_window", "entries per window", "entries", f["window_entries"] / max(f["windows"], 1))
            add("bytes_per_entry", "history bytes per entry", "bytes",
                f["history_mib"] * MIB / max(f["window_entries"], 1), "lower")
            add("stacks", "unique stacks", "stacks", f["stacks"])
            add("lost", "samples lost (evicted or over a limit)", "samples", f["samples_lost"], "lower")
            add("maintain_ms", "aggregator_maintain, mean per call over the last minute", "ms",
                f["maintain_ms"], "lower")
            add("ingest_us", "ingest per sample (with failed /proc lookups, see storebench.c)", "us",
                f["ingest_ns_per_sample"] / 1000, "lower")
            add("query_ms", "one process, whole hour: aggregator_query + model_build + folded_encode", "ms",
                f["one_query_ms"] + f["one_model_ms"] + f["one_folded_ms"], "lower")
            add("query_stacks", "... its stacks", "stacks", f["one_stacks"])
            add("query_json_ms", "... aggregator_query + model_build + json_encode", "ms",
                f["one_query_ms"] + f["one_model_ms"] + f["one_json_ms"], "lower")
            add("all_ms", "every process, whole hour: query + model + folded", "ms",
                f["all_query_ms"] + f["all_model_ms"] + f["all_folded_ms"], "lower")
            if run == 0:
                ctx.results.note(f"storebench {key}, seed 1: windows 1 s / 10 s / 60 s = {f['windows_1s']:.0f} / "
                                 f"{f['windows_10s']:.0f} / {f['windows_60s']:.0f}; {f['frames']:.0f} frames in "
                                 f"{f['stacks']:.0f} stacks; the busiest process had {f['busiest_samples']:.0f} "
                                 "samples")


# --- driver ---------------------------------------------------------------

def faultheavy_round(line):
    """The wall and CPU seconds per round and faults per round of a
    faultheavy worker's line."""
    words = line.split()
    f = dict(zip(words[::2], words[1::2]))
    return float(f["median_per_round"]), float(f["cpu_per_round"]), int(f["faults_per_round"])


def phase_memory_cost(ctx):
    """The slowdown of faultheavy (2 GiB touched in 4 KiB pages and dropped,
    MEMCOST_ROUNDS rounds: every page a resident-memory growth, the worst
    case for memory profiling) under a perfd with memory profiling at the
    default sample size, against one with --no-memory, alternating, --runs
    pairs; the kernel's cost per rss_stat event and per memory sample
    (bpf_stats of on_rss_stat: the events that only count, and the ones
    that sample); and the bytes perfd attributed against those faulted."""
    sec = ("11. Memory profiling: faultheavy, 2 GiB in 4 KiB pages per round "
           f"({MEMCOST_ROUNDS} rounds), perfd at 99 Hz with memory profiling on vs --no-memory")
    command = (f"build/bench/faultheavy -m 2048 -n {MEMCOST_ROUNDS} under perfd (default) and "
               "perfd --no-memory, alternating; bpf_stats of on_rss_stat; perfctl status; "
               "perfctl snapshot --kind memory --since 1m")
    off, on = [], []
    # --runs pairs for the slowdown, bpf_stats off (they cost each run of a
    # program two clock reads); then one more run with them, for the cost
    # per event and per sample.
    for run in range(ctx.runs + 1):
        for mode in (("off", "on") if run < ctx.runs else ("on",)):
            stats = run == ctx.runs
            log(f"memory_cost: run {run + 1}/{ctx.runs + 1}, memory profiling {mode}"
                f"{', bpf_stats on' if stats else ''}")
            p = ctx.perfd(99, ["--no-memory"] if mode == "off" else [])
            try:
                with (BpfStats() if stats else contextlib.nullcontext()):
                    progs0 = bpf_progs(p.pid, TRACING_PROG_TYPE)
                    st0 = p.status()
                    wl = ctx.procs.start([ctx.workload("faultheavy"), "-m", "2048", "-n",
                                          str(MEMCOST_ROUNDS)], stdout=subprocess.PIPE)
                    out, _ = wl.communicate(timeout=600)
                    progs1 = bpf_progs(p.pid, TRACING_PROG_TYPE)
                    st1 = p.status()
                wall, cpu, faults = faultheavy_round(out.decode().strip().splitlines()[-1])
                if not stats:
                    (on if mode == "on" else off).append(wall)
                    ctx.add(f"memcost.{mode}.wall", sec, f"wall time per round, memory profiling {mode}",
                            "s", wall, "lower", command)
                    ctx.add(f"memcost.{mode}.cpu", sec, f"CPU time per round, memory profiling {mode}",
                            "s", cpu, "lower", command)
                if mode == "on" and stats:
                    names = {i: bpf_prog_name(i) for i in progs1}
                    rss = [i for i, n in names.items() if n == "on_rss_stat"]
                    if not rss:
                        raise BenchError("the perfd with memory profiling on has no on_rss_stat program")
                    i = rss[0]
                    t = progs1[i]["run_time_ns"] - progs0.get(i, {"run_time_ns": 0})["run_time_ns"]
                    n = progs1[i]["run_cnt"] - progs0.get(i, {"run_cnt": 0})["run_cnt"]
                    samples = st1["memory"]["samples"] - st0["memory"]["samples"]
                    sample_bytes = st1["memory"]["sample_bytes"]
                    ctx.add("memcost.events", sec, "rss_stat events per round", "events",
                            n / MEMCOST_ROUNDS, None, command)
                    ctx.add("memcost.ns_per_event", sec, "kernel cost per rss_stat event (all of them)",
                            "ns", t / max(n, 1), "lower", command)
                    ctx.add("memcost.samples", sec, "memory samples per round", "samples",
                            samples / MEMCOST_ROUNDS, None, command)
                    ctx.add("memcost.bpf_share", sec, "on_rss_stat's time as a share of the workload's CPU",
                            "%", 100.0 * t / 1e9 / (cpu * MEMCOST_ROUNDS), "lower", command)
                    rc, text = p.call({"command": "snapshot", "pid": wl.pid, "since": 120,
                                       "kind": "memory"}, timeout=60)[0], None
                    attributed = rc.get("value", 0) if isinstance(rc, dict) else 0
                    faulted = faults * 4096 * MEMCOST_ROUNDS
                    ctx.add("memcost.attributed_ratio", sec, "bytes attributed / bytes faulted", "",
                            attributed / faulted if faulted else None, None, command)
                    ctx.add("memcost.sample_bytes", sec, "mean bytes per memory sample (default)",
                            "bytes", sample_bytes, None, command)
            finally:
                p.stop()
    if off and on:
        off.sort()
        on.sort()
        ctx.add("memcost.slowdown_pct", sec, "slowdown: median on / median off - 1", "%",
                100.0 * (on[len(on) // 2] / off[len(off) // 2] - 1), "lower", command)


def default_big_library():
    """The library store_first_binary maps: the Makefile's SYMBENCH_LIBRARY
    choice, libLLVM when installed, else libc."""
    found = sorted(Path("/usr/lib/x86_64-linux-gnu").glob("libLLVM-*.so.1"))
    return str(found[0]) if found else "/usr/lib/x86_64-linux-gnu/libc.so.6"


def read_first(path, pattern):
    try:
        for line in Path(path).read_text().splitlines():
            if re.match(pattern, line):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def os_name():
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return "?"


def tool_version(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return "missing"


def metadata(ctx):
    def git(*a):
        try:
            return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except OSError:
            return ""
    # "+dirty": perfd's own sources differ from the commit (the benchmark
    # measures the tree as it is).
    dirty = git("status", "--porcelain", "--", "daemon", "bpf", "include", "cli")
    commit = git("rev-parse", "--short", "HEAD") or "unknown (not a git checkout)"
    mem_kib = int(read_first("/proc/meminfo", r"MemTotal:").split()[0] or 0)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": ("make bench: " if os.environ.get("MAKELEVEL") else "") +
                   " ".join(["tests/bench/bench.py"] + sys.argv[1:]),
        "perfd_commit": commit + ("+dirty" if dirty else ""),
        "machine": {
            "cpu": read_first("/proc/cpuinfo", r"model name"),
            "cpus": ctx.cpus,
            "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "kernel": platform.release(),
            "os": os_name(),
        },
        "tools": {"perf": tool_version(["perf", "--version"]), "bpftrace": tool_version(["bpftrace", "--version"])},
        "settings": {"runs": ctx.runs, "window_s": ctx.window, "warmup_s": ctx.args.warmup,
                     "frequencies": ctx.args.frequencies, "cost_workloads": ctx.args.cost_workloads,
                     "shallow_depth": SHALLOW_DEPTH, "cost_python_depth": COST_PY_DEPTH,
                     "daemon_hz": DAEMON_HZ, "churn_rates": list(CHURN_RATES),
                     "daemon_window_s": ctx.args.daemon_window, "daemon_warmup_s": DAEMON_WARMUP_S,
                     "daemon_settled_pct": DAEMON_SETTLED_PCT, "daemon_settle_max_s": DAEMON_SETTLE_MAX_S, "stacks_hz": STACKS_HZ, "deep_depth": DEEP_DEPTH,
                     "paths_depth": PATHS_DEPTH, "processes": ctx.args.processes,
                     "pythons": ctx.args.pythons, "python_depths": list(PY_DEPTHS), "python_hz": PY_HZ,
                     "python_code_objects": PY_CODE_OBJECTS, "store_hz": STORE_HZ,
                     "store_stacks": STORE_STACKS, "store_max_window_s": ctx.args.store_max_window,
                     "big_library": ctx.args.big_library},
        "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
    }


def preflight(ctx):
    problems = []
    if os.geteuid() != 0:
        problems.append("the benchmark needs root (BPF, perf events, sysctl)")
    for tool in ("perf", "bpftrace", "bpftool"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            problems.append(f"{tool} is missing: run packaging/install-deps.sh bench")
    for path in [ctx.perfd_bin] + [ctx.workload(w) for w in ("deep", "paths", "procs", "ratio")]:
        if not os.access(path, os.X_OK):
            problems.append(f"{path} is missing: run `make bench` (it builds them)")
    if "python_symbolize_cost" in ctx.phases and not os.access(ctx.workload("pybench"), os.X_OK):
        problems.append(f"{ctx.workload('pybench')} is missing: run `make bench` (it builds it)")
    if "daemon_cpu" in ctx.phases and not os.access(ctx.workload("churn"), os.X_OK):
        problems.append(f"{ctx.workload('churn')} is missing: run `make bench` (it builds it)")
    if "python_kernel_cost" in ctx.phases and not PYDEEP.is_file():
        problems.append(f"{PYDEEP} is missing")
    store_needs = {"store_snapshot": ctx.build / "workloads" / "unique_stacks",
                   "store_first_binary": ctx.build / "bench" / "bigmap",
                   "store_memory": ctx.build / "bench" / "storebench"}
    for phase, path in store_needs.items():
        if phase in ctx.phases and not os.access(path, os.X_OK):
            problems.append(f"{path} is missing: run `make bench-store` (it builds it)")
    if "store_first_binary" in ctx.phases and not Path(ctx.args.big_library).is_file():
        problems.append(f"{ctx.args.big_library} (--big-library) is missing")
    max_rate = int(Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text())
    if max_rate < STACKS_HZ:
        problems.append(f"kernel.perf_event_max_sample_rate is {max_rate}, below the {STACKS_HZ} Hz "
                        "the stacks phase needs")
    if problems:
        raise BenchError("cannot run the benchmark:\n  " + "\n  ".join(problems))


def raise_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(REPO / "build"), help="build folder holding perfd and bench/")
    ap.add_argument("--out", help="JSON results (default BUILD/bench.json)")
    ap.add_argument("--markdown", help="Markdown tables (default BUILD/bench.md)")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (at least 3)")
    ap.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}")
    ap.add_argument("--window", type=float, default=4.0, help="seconds measured per tool in the cost phase")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds between start and measurement")
    ap.add_argument("--frequencies", default="99,999",
                    help="frequencies of the cost phase (its deep workload; the others run at the highest)")
    ap.add_argument("--cost-workloads", default=",".join(COST_WORKLOADS),
                    help=f"comma-separated subset of {','.join(COST_WORKLOADS)} for the cost phase")
    ap.add_argument("--daemon-window", type=float, default=12.0,
                    help="seconds of each window of the daemon_cpu phase (at least 10: 1 new process/s)")
    ap.add_argument("--processes", type=int, default=500, help="processes in the procs phase")
    ap.add_argument("--max-window", type=float, default=25.0, help="longest '100k stacks' snapshot window, s")
    ap.add_argument("--fidelity-seconds", type=float, default=3.0, help="CPU-seconds of each 75/25 run")
    ap.add_argument("--slowdown-seconds", type=float, default=1.5, help="wall time of one fixed-work run")
    ap.add_argument("--slowdown-runs", type=int, default=7, help="runs of the slowdown phase (at least --runs)")
    ap.add_argument("--pythons", default=PYTHONS,
                    help="comma-separated interpreters of the Python phases; missing ones are skipped")
    ap.add_argument("--store-max-window", type=float, default=100.0,
                    help="longest live window of the store_snapshot phase, s")
    ap.add_argument("--big-library", default=default_big_library(),
                    help="the library the store_first_binary phase maps (default: libLLVM, else libc)")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="compare two bench.json and exit")
    args = ap.parse_args()

    if args.compare:
        return report.compare(args.compare[0], args.compare[1], sys.stdout)
    if args.runs < 3:
        ap.error("--runs must be at least 3: every figure is a min/median/max")
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        ap.error(f"unknown phases: {', '.join(sorted(unknown))}")
    args.frequencies = [int(f) for f in args.frequencies.split(",")]
    args.cost_workloads = [w for w in args.cost_workloads.split(",") if w]
    if set(args.cost_workloads) - set(COST_WORKLOADS):
        ap.error(f"unknown cost workloads: {', '.join(sorted(set(args.cost_workloads) - set(COST_WORKLOADS)))}")
    args.pythons = [p for p in args.pythons.split(",") if p]
    out = Path(args.out or Path(args.build) / "bench.json")
    md = Path(args.markdown or Path(args.build) / "bench.md")

    # Ctrl-C must reach us even when started with SIGINT ignored (as a
    # background job): the finally blocks put kernel settings back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, raise_on_signal)
    signal.signal(signal.SIGHUP, raise_on_signal)
    procs, results = Procs(), report.Results()
    status = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="perfd-bench-") as tmpdir:
        ctx = Context(args, procs, results, tmpdir)
        ctx.phases = phases
        try:
            preflight(ctx)
            meta = metadata(ctx)
            log(f"{ctx.cpus} CPUs, load average {' '.join(meta['loadavg_start'])}; phases: {', '.join(phases)}")
            for name in phases:
                t0 = time.monotonic()
                try:
                    globals()[f"phase_{name}"](ctx)
                except Exception as e:  # one broken phase must not cost the others
                    what = str(e) if isinstance(e, BenchError) else f"{type(e).__name__}: {e}"
                    results.errors.append(f"phase {name}: {what}")
                    log(f"phase {name} failed: {what}")
                    if not isinstance(e, BenchError):
                        traceback.print_exc()
                    status = 1
                finally:
                    procs.cleanup()
                log(f"phase {name}: {time.monotonic() - t0:.0f} s")
        except BenchError as e:
            log(str(e))
            return 1
        except (KeyboardInterrupt, SystemExit) as e:
            log("interrupted; stopping what the benchmark started")
            return e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 130
        finally:
            procs.cleanup()

    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    meta["duration_s"] = round(time.monotonic() - started, 1)
    # Goals of phases that were not asked for are left out (a failed
    # phase's goals stay, as n/a).
    ran_store, ran_other = bool(set(phases) & set(STORE_PHASES)), bool(set(phases) - set(STORE_PHASES))
    goals = [g for g in GOALS if g[1] in results.figures or
             (ran_store if g[1].startswith("store.") else ran_other)]
    doc = results.to_json(meta, report.judge_goals(results, goals))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    md.write_text(report.markdown(doc))
    report.print_table(doc, sys.stdout)
    log(f"done in {meta['duration_s']:.0f} s; results in {out} and {md}")
    return status


if __name__ == "__main__":
    sys.exit(main())
