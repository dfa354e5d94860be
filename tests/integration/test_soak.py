"""Churn and soak (issue 27): perfd's memory stays bounded, every drop is
counted and no per-pid state is left behind, whatever the host does.

One daemon of the module's own, with small limits (--max-memory 8 MiB,
--max-processes 1000, --retention 20s, --symbol-cache-mib 16) at 1999 Hz,
goes through three phases, each run while a watcher reads perfd's VmRSS
every 0.1 s and asks root's `status` within perfdtest's deadline every
second:

- churn: 20,000 short-lived processes (`churn`, 8 at a time, each exec'd
  afresh, burning 3 ms);
- unique stacks: `unique_stacks` until perfd has received 1 M of its
  samples, nearly each a stack of its own;
- thread storm: one process of 10,000 threads (`thread_storm`), each
  burning 1 ms, all alive at once;
- a burst: a ring buffer full of unique stacks at once (perfd stopped
  while `unique_stacks` runs, then let go), which the loop ingests in
  slices while status answers within BURST_DEADLINE_S (not scaled); and,
  each on a daemon of its own with a ring that holds the whole stop, a
  burst in which a live snapshot ends and an export interval closes (their
  answers count the samples queued before their end), and one in which
  two reloads change the frequency.

Each phase asserts that perfd's RSS stayed under --max-memory plus the
fixed part README documents ("The profile store": FIXED_MIB here, plus the
symbol cache's own cap) -- in the plain build only: under ASan, shadow
memory and the quarantine are most of the RSS --, that the store kept to
its limits and counted what it dropped (samples taken by BPF, less the idle
ones, are those received plus those counted lost, to 1%), and that the
unwinder and the Python reader hold state for live processes only.  The
last test waits for the retention to pass and checks that nothing of the
phases' processes is left: no history of them, exited processes back to
what the rest of the host explains.  In the sanitized build perfd's clean
exit at the end is LeakSanitizer's check that nothing per pid leaked.

Scale: PERFD_SOAK_SCALE (default 0.05, 0.02 under ASan: make test's
share of time) multiplies the
counts above; `make soak` runs 1.0.  `-s` prints the figures.
"""

import json
import os
import re
import signal
import threading
import time

import pytest

import perfdtest
from perfdtest import status_within_deadline

HZ = 1999
MAX_MEMORY_MIB = 8
MAX_PROCESSES = 1000
RETENTION_S = 20
SYMBOL_CACHE_MIB = 16
# What perfd's RSS holds besides the store and the symbol cache (README,
# "The profile store", measured with smaps and status.heap): ~23 MiB not
# malloc's (libraries, the BPF ring buffer mapped twice, thread stacks),
# 16-26 MiB of heap in use beyond store and cache (kernel symbols, the
# processes' maps and per-process state, the drain's queue), and ~30 MiB
# for unwind and symbol tables being built (transient).
FIXED_MIB = 80
# How long after the retention an exited process may still be tracked.
GRACE_S = 10
# Exited processes not counted by an exit event (a pid found reused).
EXITED_SLACK = 20

CHURN_PROCESSES = 20000
CHURN_PARALLEL = 8
CHURN_BURN_MS = 3
UNIQUE_SAMPLES = 1000000
STORM_THREADS = 10000
STORM_BURN_MS = 1
STORM_HOLD_S = 5
# The burst: perfd stopped this long while unique_stacks fills the ring
# buffer, then let go; each status meanwhile answers within the deadline
# (the 100 ms, with room for a loaded host: one slice is 10 ms).
BURST_STOP_S = 3
BURST_WATCH_S = 3
BURST_DEADLINE_S = 0.25
COMMS = ("churn", "churn-child", "unique_stacks", "thread_storm")


@pytest.fixture(scope="module")
def scale(environment):
    default = "0.02" if perfdtest.sanitized() else "0.05"
    value = float(os.environ.get("PERFD_SOAK_SCALE") or default)
    assert 0 < value <= 1, f"PERFD_SOAK_SCALE={value}: want 0 < SCALE <= 1"
    return value


@pytest.fixture(scope="module")
def daemon(environment):
    # ASan's quarantine would hold what the phases free
    d = perfdtest.start_perfd_small_quarantine(16, frequency=HZ, extra_args=[
        "--max-memory", str(MAX_MEMORY_MIB), "--max-processes", str(MAX_PROCESSES),
        "--retention", f"{RETENTION_S}s", "--symbol-cache-mib", str(SYMBOL_CACHE_MIB)])
    yield d
    d.stop()


@pytest.fixture(scope="module")
def baseline(daemon):
    """The daemon's state before any phase, once its first seconds (the
    host's processes found, their tables built) are over."""
    time.sleep(3)
    return daemon.status()


def vm_rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def rss_bound():
    return (MAX_MEMORY_MIB + SYMBOL_CACHE_MIB + FIXED_MIB) << 20


class Watch:
    """Reads perfd's VmRSS every 0.1 s and root's status (within the
    deadline) every second, in a thread, while a phase runs; checks the
    store's limits in every status.  stop() raises what went wrong."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.peak_rss = vm_rss(daemon.pid)
        self.took = []
        self.answers = 0
        self.max_tracked = 0
        self.max_stacks = 0
        self.max_store = 0
        self.max_heap_in_use = 0
        self.max_heap_free = 0
        self.heap_peak = None  # the status at the most heap in use
        self.errors = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.started = time.monotonic()
        self.thread.start()

    def run(self):
        next_status = 0.0
        try:
            while not self.done.is_set():
                self.peak_rss = max(self.peak_rss, vm_rss(self.daemon.pid))
                if time.monotonic() >= next_status:
                    next_status = time.monotonic() + 1.0
                    took, st = status_within_deadline(self.daemon)
                    self.took.append(took)
                    self.answers += 1
                    self.note(st)
                self.done.wait(0.1)
        except BaseException as e:  # handed to stop()
            self.errors.append(e)

    def note(self, st):
        self.max_tracked = max(self.max_tracked, st["processes"]["tracked"])
        self.max_stacks = max(self.max_stacks, st["stacks"]["interned"])
        self.max_store = max(self.max_store, st["store"]["memory_bytes"])
        if st["heap"]["in_use_bytes"] > self.max_heap_in_use:
            self.heap_peak = st
        self.max_heap_in_use = max(self.max_heap_in_use, st["heap"]["in_use_bytes"])
        self.max_heap_free = max(self.max_heap_free, st["heap"]["free_bytes"])
        check_live_only(st)

    def stop(self):
        self.done.set()
        self.thread.join(timeout=30)
        self.seconds = time.monotonic() - self.started
        if self.errors:
            raise self.errors[0]
        assert self.answers >= 1, "no status answer while the phase ran"

    def check(self, what):
        st = self.daemon.status()
        limits, loop = st["limits"], st["loop"]
        print(f"\n{what}: status answers {perfdtest.status_figures(self.took)}, p99 "
              f"{percentile(self.took, 0.99) * 1000:.1f} ms; the loop's longest turn "
              f"{loop['longest_turn_ms']:.1f} ms, {loop['slow_turns']} of {loop['turns']} turns over "
              f"{loop['slow_turn_ms']:.0f} ms; drain slices {st['drain']['slices']} "
              f"({st['drain']['slices_cut']} cut at their budget), its queue at most "
              f"{st['drain']['max_queued_bytes'] / 2**20:.1f} MiB (since perfd started)")
        print(f"\n{what}: {self.seconds:.0f} s, perfd's RSS peaked at {self.peak_rss / 2**20:.1f} MiB "
              f"(bound {rss_bound() >> 20} MiB: --max-memory {MAX_MEMORY_MIB} + symbol cache "
              f"{SYMBOL_CACHE_MIB} + fixed {FIXED_MIB}), store at most {self.max_store / 2**20:.1f} MiB, "
              f"{self.max_tracked} processes, {self.max_stacks} stacks; malloc's heap at most "
              f"{self.max_heap_in_use / 2**20:.1f} MiB in use and {self.max_heap_free / 2**20:.1f} MiB "
              f"free (status.heap)")
        if self.heap_peak:
            print(f"{what}: at the heap's peak, {heap_parts(self.heap_peak)}")
        assert self.max_store <= limits["max_memory_bytes"], \
            f"the store held {self.max_store} bytes, over its {limits['max_memory_bytes']}"
        assert self.max_tracked <= limits["max_processes"], \
            f"{self.max_tracked} processes tracked, over --max-processes {limits['max_processes']}"
        assert self.max_stacks <= limits["max_stacks"] + 1, \
            f"{self.max_stacks} stacks interned, over --max-stacks {limits['max_stacks']}"
        if not perfdtest.sanitized():
            assert self.peak_rss <= rss_bound(), \
                f"perfd's RSS peaked at {self.peak_rss >> 20} MiB, over {rss_bound() >> 20} MiB"


def heap_parts(st):
    """What status says holds perfd's heap: the parts it counts, in MiB."""
    mib = lambda v: f"{v / 2**20:.1f}"
    h = st["heap"]
    return (f"heap {mib(h['in_use_bytes'])} in use ({mib(h['mmapped_bytes'])} mmapped): store "
            f"{mib(st['store']['memory_bytes'])}, snapshots {mib(st['store']['snapshot_bytes'])}, "
            f"symbols {mib(st['symbols']['memory_bytes'])} + cache {mib(st['symbols']['cache_bytes'])}, "
            f"unwind tables {mib(st['unwind']['table_bytes'])}, python {mib(st['python']['memory_bytes'])}, "
            f"drain queue {mib(st['drain']['queued_bytes'])}; {st['processes']['tracked']} processes, "
            f"{st['stacks']['frames']} frames, {st['unwind']['tables_building']} tables building, "
            f"{st['symbols']['symtab_loads_pending'] + st['symbols']['line_loads_pending']} symbol loads")


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def check_live_only(st):
    """The unwinder and the Python reader describe live processes only:
    what they hold of a process goes when it exits (or is evicted)."""
    live = st["processes"]["tracked"] - st["processes"]["exited"]
    assert st["unwind"]["processes"] <= live, \
        f"the unwinder describes {st['unwind']['processes']} processes, {live} are live"
    assert st["python"]["processes"] <= live, \
        f"the Python reader holds {st['python']['processes']} processes, {live} are live"


def check_accounting(before, after, what):
    """Samples taken by BPF (idle ones aside) are those received plus those
    counted lost on the way, to 1% (a status reads BPF's counters a moment
    before the store's)."""
    def d(*path):
        a, b = before, after
        for k in path:
            a, b = a[k], b[k]
        return b - a
    taken = d("samples", "taken") - d("samples", "idle")
    # those still queued for the loop are on their way, not lost
    received = d("samples", "received") + d("samples", "queued")
    lost = d("samples", "lost", "ringbuf_full") + d("samples", "lost", "queue_full")
    print(f"{what}: {taken} samples taken (idle aside), {received} received or queued, {lost} lost "
          f"on the way; "
          f"in the store {d('samples', 'lost', 'evicted')} evicted, "
          f"{d('store', 'samples_expired')} expired, {d('samples', 'truncated', 'stack_limit')} "
          f"past the stack limit; processes {d('processes', 'evicted')} evicted, "
          f"{d('processes', 'expired')} expired; exits {d('exit_events', 'received')} received, "
          f"{d('exit_events', 'lost')} lost")
    assert taken > 0, f"{what}: no samples taken"
    assert abs(taken - received - lost) <= 0.01 * taken + 100, \
        f"{what}: {taken} samples taken, {received} received and {lost} counted lost"
    return d


def ps_samples(daemon, pid):
    row = perfdtest.ps_process(daemon, pid, interval=60)
    return row["total_samples"] if row else 0


def test_churn_of_short_lived_processes(daemon, baseline, scale):
    n = max(100, round(CHURN_PROCESSES * scale))
    before = daemon.status()
    watch = Watch(daemon)
    w = perfdtest.Workload("churn", n, CHURN_PARALLEL, CHURN_BURN_MS)
    try:
        w.expect_line("started ")
        done = w.expect_line("done ", timeout=3600).split()
        w.finish()
    finally:
        w.kill()
        watch.stop()
    time.sleep(2)  # the last samples and exits reach the store
    after = daemon.status()
    print(f"\nchurn: {n} processes, {CHURN_PARALLEL} at a time, {CHURN_BURN_MS} ms each")
    watch.check("churn")
    assert done == ["done", str(n), "0"], f"churn: {done}"
    d = check_accounting(before, after, "churn")
    # perfd saw them (most were sampled and exited in sight), and the
    # store kept to --max-processes by evicting, counted
    assert d("exit_events", "received") >= 0.5 * n, \
        f"{d('exit_events', 'received')} exit events for {n} processes"
    if n > MAX_PROCESSES:
        assert d("processes", "evicted") + d("processes", "expired") >= n - MAX_PROCESSES, \
            "the store held more processes than its limit without counting the rest"
    check_live_only(after)


def test_unique_stacks(daemon, baseline, scale):
    target = max(10000, round(UNIQUE_SAMPLES * scale))
    before = daemon.status()
    cpus = min(2, perfdtest.online_cpus())
    watch = Watch(daemon)
    w = perfdtest.Workload("unique_stacks", cpus, 3600)
    got = 0
    try:
        while got < target:
            assert w.proc.poll() is None, f"unique_stacks exited ({w.proc.returncode})"
            time.sleep(2)
            got = ps_samples(daemon, w.pid)
    finally:
        w.kill()
        watch.stop()
    time.sleep(2)
    after = daemon.status()
    print(f"\nunique stacks: {got} samples of unique_stacks received (target {target})")
    watch.check("unique stacks")
    d = check_accounting(before, after, "unique stacks")
    # more stacks than the store may keep: it let the oldest go, counted
    dropped = d("samples", "lost", "evicted") + d("samples", "truncated", "stack_limit") + \
        d("store", "samples_expired")
    assert dropped > 0, "the store kept every stack, over its limits"
    assert d("store", "windows_evicted") > 0 or d("samples", "truncated", "stack_limit") > 0, \
        "the store never reached its memory or stack limit"
    check_live_only(after)


def test_process_of_many_threads(daemon, baseline, scale):
    threads = max(200, round(STORM_THREADS * scale))
    before = daemon.status()
    watch = Watch(daemon)
    want = 0.5 * threads * STORM_BURN_MS * HZ / 1000
    w = perfdtest.Workload("thread_storm", threads, STORM_BURN_MS, STORM_HOLD_S)
    try:
        w.expect_line("started ", timeout=600)
        w.expect_line("burnt ", timeout=600)
        # its last samples reach the store a drain later (a second or
        # more under ASan): read while all its threads still live
        until = time.monotonic() + STORM_HOLD_S - 1
        while (samples := ps_samples(daemon, w.pid)) < want and time.monotonic() < until:
            time.sleep(0.5)
        w.expect_line("done ", timeout=120)
        w.finish()
    finally:
        w.kill()
        watch.stop()
    time.sleep(2)
    after = daemon.status()
    print(f"\nthread storm: {threads} threads, {samples} samples of the process")
    watch.check("thread storm")
    check_accounting(before, after, "thread storm")
    # each thread burns >= 1 ms: at 1999 Hz ~2 samples a thread
    assert samples >= want, \
        f"{samples} samples of {threads} threads burning {STORM_BURN_MS} ms each"
    check_live_only(after)


def watch_status(daemon, took):
    """Asks root's status every 10 ms for BURST_WATCH_S, each within
    perfdtest's deadline; appends how long each took to took."""
    until = time.monotonic() + BURST_WATCH_S
    while time.monotonic() < until:
        took.append(status_within_deadline(daemon)[0])
        time.sleep(0.01)


def test_status_answers_while_a_burst_is_ingested(daemon, baseline):
    """The loop ingests a ring buffer's worth of records in slices, and
    status answers between them: perfd is stopped while unique_stacks
    fills the ring, then let go, and asked for status every 10 ms until
    well after.  Without slices the whole burst is one turn of the loop."""
    cpus = min(2, perfdtest.online_cpus())
    w = perfdtest.Workload("unique_stacks", cpus, 3600)
    took = []
    try:
        time.sleep(1)  # it runs, its maps are read
        before = daemon.status()
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            time.sleep(BURST_STOP_S)
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        watch_status(daemon, took)
    finally:
        w.kill()
    time.sleep(2)
    after = daemon.status()
    d = check_accounting(before, after, "burst")
    print(f"burst: status answers {perfdtest.status_figures(took)}, p99 "
          f"{percentile(took, 0.99) * 1000:.1f} ms; {d('drain', 'slices')} slices, "
          f"{d('drain', 'slices_cut')} cut at their budget; the loop's longest turn "
          f"{after['loop']['longest_turn_ms']:.1f} ms (all run)")
    assert d("drain", "slices_cut") > 0, \
        "the burst went in one slice: the loop was not free between its records"
    assert max(took) < BURST_DEADLINE_S, \
        f"status took {max(took) * 1000:.0f} ms while the burst was ingested"


# A live snapshot and an export interval that end, or reloads, while perfd
# is stopped BURST_LONG_STOP_S: the snapshot BURST_SNAPSHOT_S long, started
# BURST_LEAD_S before the stop (so that most of it is still queued when it
# ends), the interval BURST_INTERVAL_S.  A ring of BURST_RING_MIB holds the
# whole stop at HZ on two CPUs (~1 KB a record), so nothing of it is lost
# on the way, and the backlog (~24,000 unique stacks) takes the loop
# ~0.2-0.4 s to ingest: in one turn, status would wait that long.  Without
# a state directory: its flush names the burst's new frames on the loop,
# another wait than the one these tests are about.
BURST_LONG_STOP_S = 6
BURST_SNAPSHOT_S = 1.5
BURST_LEAD_S = 0.5
BURST_INTERVAL_S = 2
BURST_RING_MIB = 32
# The most records one turn of the loop ingests (api/command.c's slice).
SLICE_RECORDS = 8192
# "  5   50000000: 1 2 3" in go tool pprof -raw's Samples: the sample's count
RAW_SAMPLE = re.compile(r"^\s*(\d+)\s+\d+:\s")


def check_sliced(st):
    """The backlog was more than a slice (a slice was cut at its budget),
    and no turn of the loop ingested more than a slice of it: it was not
    ingested at once."""
    dr = st["drain"]
    print(f"the queue held at most {dr['max_queued_bytes'] / 2**20:.1f} MiB; {dr['slices_cut']} "
          f"slices cut; the largest slice {dr['max_slice_records']} records")
    assert dr["slices_cut"] > 0, f"no backlog to speak of: {dr}"
    assert dr["max_slice_records"] <= SLICE_RECORDS, \
        f"one turn ingested {dr['max_slice_records']} records at once: {dr}"


def sleep_until(t):
    time.sleep(max(0.0, t - time.monotonic()))


def pprof_samples(gohome, path):
    """The samples (count) of a CPU pprof file, read by go tool pprof -raw."""
    raw = perfdtest.go_pprof(gohome, path, "-raw")
    body = raw.split("Samples:", 1)[1].split("Locations", 1)[0]
    return sum(int(m.group(1)) for m in map(RAW_SAMPLE.match, body.splitlines()) if m)


@pytest.mark.parametrize("what", ["snapshot", "export"])
def test_a_snapshot_or_an_export_ending_in_a_burst_waits_for_its_samples(
        environment, tmp_path, gohome, what):
    """A live snapshot whose end, or an export interval whose close, falls
    while perfd is stopped (unique_stacks filling the ring meanwhile) is
    answered once the samples queued until then are ingested: the
    snapshot of a spinner holds the samples of its CPU time, most of them
    still queued when it ended; the spinner's exported files hold every
    sample of its life.  Not waiting answers without the queued samples.
    A second snapshot of the spinner whose client goes away as perfd is
    let go (while its records come in, or just before) is dropped: no
    snapshot is left, and in the sanitized build perfd's exit finds no
    leak.
    With the snapshot, root's status answers within BURST_DEADLINE_S
    throughout: ingesting the backlog in one turn at its end (the old way)
    holds it.  With the export status is not watched: encoding the flood's
    interval (thousands of unique stacks) holds the loop by itself, past
    a second under ASan (exporter.h: the encode is on the loop)."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "d").mkdir()
    export = ["--output-dir", str(out), "--interval", f"{BURST_INTERVAL_S}s"]
    daemon = perfdtest.start_perfd(frequency=HZ, tmpdir=str(tmp_path / "d"), extra_args=[
        "--no-state", "--ringbuf-mib", str(BURST_RING_MIB),
        *(export if what == "export" else [])])
    # the flood and the spinner take a CPU each: perfd is not starved of one
    flood = perfdtest.Workload("unique_stacks", max(1, min(2, perfdtest.online_cpus()) - 1), 3600)
    spin = perfdtest.Workload("spin", 3600)
    snap = gone = None
    took = []
    try:
        time.sleep(2)  # both run, their maps are read
        before = daemon.status()
        if what == "snapshot":
            snap = perfdtest.BackgroundSnapshot(daemon, spin.pid, duration=BURST_SNAPSHOT_S)
            gone = perfdtest.BackgroundSnapshot(daemon, spin.pid, duration=BURST_SNAPSHOT_S)
        t0, cpu0 = time.monotonic(), perfdtest.cpu_ticks(spin.pid)
        sleep_until(t0 + BURST_LEAD_S)
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            sleep_until(t0 + BURST_SNAPSHOT_S)
            cpu1 = perfdtest.cpu_ticks(spin.pid)  # the snapshot's end
            sleep_until(t0 + BURST_LEAD_S + BURST_LONG_STOP_S)
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        if gone:
            gone.kill()
        if what == "snapshot":
            watch_status(daemon, took)
        else:
            time.sleep(BURST_WATCH_S)
        stacks = snap.result("spin")[0] if snap else {}
        spin_ticks = perfdtest.cpu_ticks(spin.pid)
        spin.kill()
        flood.kill()
        time.sleep(1)
        after = daemon.status()
    finally:
        for s in (snap, gone):
            if s:
                s.kill()
        spin.kill()
        flood.kill()
        daemon.stop()
    tick = os.sysconf("SC_CLK_TCK")
    lost = (after["samples"]["lost"]["ringbuf_full"] - before["samples"]["lost"]["ringbuf_full"] +
            after["samples"]["lost"]["queue_full"] - before["samples"]["lost"]["queue_full"])
    print(f"\nburst with {what}: {lost} samples lost on the way; the loop's longest turn "
          f"{after['loop']['longest_turn_ms']:.1f} ms")
    assert lost < 0.02 * (after["samples"]["taken"] - before["samples"]["taken"]), \
        f"{lost} samples lost: the ring was too small for the test's stop"
    check_sliced(after)
    assert after["snapshots"] == 0, f"{after['snapshots']} snapshots left"
    if what == "snapshot":
        got, want = perfdtest.total(stacks), (cpu1 - cpu0) / tick * HZ
        print(f"status answers {perfdtest.status_figures(took)}; the snapshot holds {got} samples, "
              f"{want:.0f} for the spinner's CPU time")
        assert max(took) < BURST_DEADLINE_S, \
            f"status took {max(took) * 1000:.0f} ms while the burst was ingested"
        # the spinner's CPU time read by the test a few ms off the
        # snapshot's ends (a tick is 10 ms): 20%
        assert 0.8 * want <= got <= 1.2 * want, \
            f"the snapshot holds {got} samples, the spinner ran {want:.0f} samples' worth meanwhile"
    else:
        files = [p for p in out.iterdir() if p.name.endswith(f"_{spin.pid}_spin.cpu.pb.gz")]
        exported = sum(pprof_samples(gohome, p) for p in files)
        lived = spin_ticks / tick * HZ
        print(f"{len(files)} files hold {exported} samples, {lived:.0f} for its whole CPU time")
        assert len(files) >= 3, f"{len(files)} export files of the spinner"
        assert 0.85 * lived <= exported <= 1.1 * lived, \
            f"the spinner's files hold {exported} samples, it ran {lived:.0f} samples' worth"


def test_a_reload_in_a_burst_waits_for_its_samples_not_the_loop(environment, tmp_path):
    """A SIGHUP that changes the frequency while perfd is stopped (the ring
    filling with unique stacks) applies once the samples queued before it
    are ingested, without ingesting the backlog in one turn: root's status
    answers within BURST_DEADLINE_S throughout.  A second SIGHUP right
    after (to yet another frequency) is not lost, whether it comes while
    the first waits or after: the last file read is the one running."""
    conf = tmp_path / "perfd.conf"
    conf.write_text(f"[perfd]\nfrequency = {HZ}\nringbuf-mib = {BURST_RING_MIB}\n")
    (tmp_path / "d").mkdir()
    daemon = perfdtest.start_perfd(tmpdir=str(tmp_path / "d"),
                                   extra_args=["--no-state", "--config", str(conf)])
    cpus = min(2, perfdtest.online_cpus())
    flood = perfdtest.Workload("unique_stacks", cpus, 3600)
    took = []
    try:
        time.sleep(2)  # it runs, its maps are read
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            time.sleep(BURST_LONG_STOP_S / 2)
            conf.write_text(f"[perfd]\nfrequency = 999\nringbuf-mib = {BURST_RING_MIB}\n")
            os.kill(daemon.pid, signal.SIGHUP)
            time.sleep(BURST_LONG_STOP_S / 2)
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        took.append(status_within_deadline(daemon)[0])
        conf.write_text(f"[perfd]\nfrequency = 499\nringbuf-mib = {BURST_RING_MIB}\n")
        os.kill(daemon.pid, signal.SIGHUP)
        watch_status(daemon, took)
        flood.kill()
        st = daemon.status()
        err = daemon.stderr()
    finally:
        flood.kill()
        daemon.stop()
    print(f"\nburst with two reloads: status answers {perfdtest.status_figures(took)}; the loop's "
          f"longest turn {st['loop']['longest_turn_ms']:.1f} ms")
    assert max(took) < BURST_DEADLINE_S, \
        f"status took {max(took) * 1000:.0f} ms while the burst was ingested"
    check_sliced(st)
    assert st["frequency_hz"] == 499 and st["config"]["frequency"] == 499, \
        f"after reloads to 999 and 499 Hz perfd samples at {st['frequency_hz']} Hz\n{err[-3000:]}"
    assert "Reloaded the configuration" in err and "Failed to reload" not in err \
        and "Failed to sample" not in err, err[-3000:]


def leftovers(daemon, since):
    """The phases' processes whose history perfd still holds: (comm, pid)."""
    found = []
    for comm in COMMS:
        rc, out, err = daemon.perfctl("--json", "snapshot", "--comm", comm, "--from",
                                      f"{since:.3f}", "--format", "json")
        assert rc in (0, 4), f"snapshot --comm {comm} exited {rc}: {err}"
        if rc == 0 and out.strip():
            doc = json.loads(out)
            for p in doc.get("processes", []):
                found.append((comm, p.get("pid")))
    return found


def test_nothing_is_left_after_the_retention(daemon, baseline, scale):
    """Once the retention has passed, the store holds nothing of the
    phases' processes, and its exited processes are back to what the rest
    of the host explains; the unwinder and the Python reader hold live
    processes only.  (LSan checks the rest at perfd's exit, sanitized.)"""
    since = time.time() - 3600
    # A process is freed at most GRACE_S after the retention from its exit
    # (its last window seals 5 s after it ends; maintenance runs each
    # second), so what is tracked as exited at the end must have exited
    # within the last RETENTION_S + GRACE_S: the exit events perfd
    # received in that span bound it.
    span = RETENTION_S + GRACE_S
    started = time.monotonic()
    deadline = started + span + 60
    exits = []  # (when, exit events received so far)
    while True:
        st = daemon.status()
        exits.append((time.monotonic(), st["exit_events"]["received"]))
        left = leftovers(daemon, since)
        # The span is measured between the recorded answers, not the clock
        # after them: the bound below needs an answer at least span old.
        if (not left and exits[-1][0] - exits[0][0] >= span) or time.monotonic() > deadline:
            break
        time.sleep(2)
    check_live_only(st)
    took, st = status_within_deadline(daemon)
    b, p = baseline["processes"], st["processes"]
    print(f"\nafter the retention: processes tracked {b['tracked']} -> {p['tracked']} "
          f"(exited {b['exited']} -> {p['exited']}), unwinder {baseline['unwind']['processes']} -> "
          f"{st['unwind']['processes']} processes, {baseline['unwind']['mappings_used']} -> "
          f"{st['unwind']['mappings_used']} mappings, python {baseline['python']['processes']} -> "
          f"{st['python']['processes']}, store {baseline['store']['memory_bytes'] >> 10} -> "
          f"{st['store']['memory_bytes'] >> 10} KiB, stacks {baseline['stacks']['interned']} -> "
          f"{st['stacks']['interned']}, RSS {vm_rss(daemon.pid) / 2**20:.1f} MiB, status in "
          f"{took * 1000:.0f} ms")
    assert not left, f"after the retention perfd still holds the history of {left[:20]}"
    recent = exits[-1][1] - max(n for t, n in exits if t <= exits[-1][0] - span)
    print(f"exit events in the last {span} s: {recent}")
    assert p["exited"] <= recent + EXITED_SLACK, \
        f"{p['exited']} exited processes still tracked, {recent} exited in the last {span} s"
