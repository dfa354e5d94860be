"""Python frames (issue 6): perfd walks CPython 3.8-3.14 frames in BPF and
merges them with the native stack.

The format under test, for `perfctl snapshot`:

- each native _PyEval_EvalFrameDefault frame gives way to the Python
  frames it was executing, and the interpreter's own native frames between
  two Python frames are not shown, so a stack reads, root first: native
  entry (_start ... Py_BytesMain ...), Python frames (<module> first), leaf
  native frames (C called from the leaf Python frame), kernel frames (_[k]);
- a Python frame reads "QUALNAME (FILE:LINE)": co_qualname on 3.11+ and
  co_name before, co_filename as the interpreter has it (the workloads run
  by absolute path), the line executing (for callers: the line of the
  call); with --no-lines "QUALNAME (FILE)", stacks that then read alike
  merged;
- --threads puts "[thread TID COMM]" right after comm;
- `ps` shows each process's runtime: "CPython 3.X.Y", "CPython 3.X.Y
  (unsupported)" for an interpreter perfd cannot walk, nothing (absent or
  null in JSON) for a process that is not Python.

Every supported interpreter installed is tested: pyenv's 3.8-3.13,
Debian's /usr/bin/python3.11 (no frame pointers, only .eh_frame: its mixed
stacks are complete only if the DWARF unwinder and the frame walker agree)
and sid's 3.14 (stripped, its loop's body out of line with no symbol,
chrooted in a sid root: tests/pythons/sid.py); sid's 3.15 as unsupported.
The workloads (tests/workloads/python/) mark the lines the tests look for
with comments ("# HOT: slow", "# CALL: main"), so no line number is written
here.  Each runs for a fixed number of CPU seconds under the 999 Hz daemon
and is snapshotted from its "ready" line to its exit, so sample counts do
not depend on how busy the machine is; each share asserted below says next
to it how many standard deviations of sampling error its tolerance leaves.
"""

import json
import math
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import perfdtest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pythons"))
import sid  # noqa: E402  (sid's CPythons, in a root of their own)
from perfdtest import (BackgroundSnapshot, function, is_kernel, marker_line, parse_folded,
                       python_frame, python_workload, show, total, unwind_pending)

FAST_HZ = perfdtest.FAST_HZ
DEBIAN_PYTHON = "/usr/bin/python3.11"
SUPPORTED_MINORS = range(8, 14)
UNSUPPORTED_MINORS = (6, 7)


@dataclass(frozen=True)
class Interpreter:
    label: str   # test id: "pyenv-3.12", "debian-3.11"
    path: str    # the python3 to run
    pyenv: bool  # pyenv builds keep .symtab: static C functions have names


def _pyenv_param(minor):
    path = perfdtest.pyenv_python(minor)
    label = f"pyenv-3.{minor}"
    if path is None:
        return pytest.param(None, id=label, marks=pytest.mark.skip(
            reason=f"CPython 3.{minor} is not installed under {perfdtest.pyenv_root()}/versions "
                   f"(`pyenv install 3.{minor}`)"))
    return pytest.param(Interpreter(label, path, True), id=label)


def _sid_param(version):
    """sid's pythonVERSION, run in the sid root (tests/pythons/sid.py: made
    here when make has not made it), with the workloads copied into the
    root at the paths they have here."""
    return sid.pytest_param(version, lambda path: Interpreter(f"sid-{version}", path, False),
                            perfdtest.PYTHON_WORKLOADS, perfdtest.build_dir() / "workloads")


# Collected once: a version that is not installed shows up as a skipped
# test that says so, never as a test that is not there.
SUPPORTED = [_pyenv_param(m) for m in SUPPORTED_MINORS] + [
    pytest.param(Interpreter("debian-3.11", DEBIAN_PYTHON, False), id="debian-3.11"),
    _sid_param("3.14")]
UNSUPPORTED = [_pyenv_param(m) for m in UNSUPPORTED_MINORS] + [_sid_param("3.15")]


def test_pyenv_interpreters_are_installed():
    """The per-version tests skip a version pyenv does not have, so a
    missing one would pass unseen: every one of 3.6-3.13 is required, like
    every other part of the test machine, unless PERFD_ALLOW_MISSING_PYTHON
    says this machine is known to lack some."""
    minors = list(UNSUPPORTED_MINORS) + list(SUPPORTED_MINORS)
    missing = [f"3.{m}" for m in minors if not perfdtest.pyenv_python(m)]
    if missing and os.environ.get("PERFD_ALLOW_MISSING_PYTHON"):
        pytest.skip(f"not installed: {', '.join(missing)}")
    assert not missing, \
        f"CPython {', '.join(missing)} not under {perfdtest.pyenv_root()}/versions: install " \
        f"with `pyenv install {' '.join(missing)}` (PYENV_ROOT picks another root), or set " \
        f"PERFD_ALLOW_MISSING_PYTHON=1"


# --- reading mixed stacks ----------------------------------------------------------

# What --threads puts right after comm.
THREAD_FRAME = re.compile(r"^\[thread (\d+) (.*)\]$")


def qualname(version, name):
    """What perfd prints for a function whose co_qualname is name: the
    qualified name on 3.11+, where code objects have one, the last part
    (co_name) before."""
    return name if version >= (3, 11) else name.rsplit(".", 1)[-1]


def user_frames(stack):
    """A stack's frames without comm, a leading [thread ...] and the GIL
    state perfd roots a Python thread's stacks at."""
    frames = stack[1:]
    if frames and THREAD_FRAME.match(frames[0]):
        frames = frames[1:]
    if frames and frames[0] in perfdtest.GIL_FRAMES:
        frames = frames[1:]
    return frames


def python_frames(stack):
    """The stack's Python frames, root first, as (qualname, file, line)."""
    return [p for p in map(python_frame, user_frames(stack)) if p]


def python_run(stack):
    """The stack's Python frames as (qualname, file, line), root first, if
    they are adjacent (no native or kernel frame between two of them);
    None if they are not, [] if there are none."""
    kinds = shape(user_frames(stack))
    if "P" in kinds and "N" in kinds[kinds.find("P"):kinds.rfind("P")]:
        return None
    return python_frames(stack)


def script_frames(stack, script):
    """(qualname, line) of the stack's Python frames from script, root first."""
    return [(q, line) for q, f, line in python_frames(stack) if f == script]


def shape(frames):
    """One letter per frame: N native, P Python, K kernel."""
    return "".join("K" if is_kernel(f) else "P" if python_frame(f) else "N" for f in frames)


# Root first: native entry, Python frames, leaf native frames, kernel.
MIXED_SHAPE = re.compile(r"N*P+N*K*")


def leaf_native(stack):
    """The user-space native frames leafward of the stack's last Python frame."""
    frames = user_frames(stack)
    kinds = shape(frames)
    last = kinds.rfind("P")
    return [function(f) for f, k in zip(frames[last + 1:], kinds[last + 1:]) if k == "N"]


def root_native(stack):
    """The native frames rootward of the stack's first Python frame."""
    frames = user_frames(stack)
    first = shape(frames).find("P")
    return [function(f) for f in frames[:first]] if first >= 0 else []


def count(stacks, predicate):
    return sum(n for s, n in stacks.items() if predicate(s))


def in_function(script, name):
    """Predicate: the stack holds a Python frame of function name (as perfd
    prints it) from script."""
    return lambda s: any(q == name for q, _ in script_frames(s, script))


def ready_version(workload):
    """Reads the workload's "ready CPython 3.X.Y" line: (text, version tuple)."""
    line = workload.expect_line("ready ")
    impl, version = line.split()[1:3]
    assert impl == "CPython", f"{workload.name} runs on {impl}, not CPython"
    return f"{impl} {version}", tuple(int(x) for x in version.split("."))


def process_comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().rstrip("\n")


def start_python(workloads, interp, script, *args):
    """Runs interp on script (an absolute path) with args, as a workload."""
    return workloads(script.rsplit("/", 1)[-1], command=[interp.path, script, *map(str, args)])


def poll_runtime(daemon, workload, want=lambda e: e.get("runtime")):
    """pid's `ps --json` entries until one satisfies want or the process
    exits; returns the last entry seen (None if it never showed up)."""
    last = None
    while workload.proc.poll() is None:
        entry = perfdtest.ps_process(daemon, workload.pid)
        if entry is not None:
            last = entry
            if want(entry):
                break
        time.sleep(0.1)
    return last


def ps_table_row(daemon, pid):
    """(header, row) of `perfctl ps --interval 1` for pid; row None when absent."""
    rc, out, err = daemon.perfctl("ps", "--interval", "1")
    assert rc == 0, f"perfctl ps exited {rc}: {err}"
    lines = out.splitlines()
    assert lines, "perfctl ps printed nothing"
    row = next((line for line in lines[1:] if line.split()[:1] == [str(pid)]), None)
    return lines[0], row


# --- split: one run per interpreter, shared by the tests below ------------------------

SPLIT = python_workload("split")
SPLIT_CPU_SECONDS = 4  # ~4,000 samples at 999 Hz; >= 2,000 even when the snapshot starts late (ASan)


@dataclass
class SplitRun:
    interp: Interpreter
    runtime: str         # what the interpreter says it is: "CPython 3.11.7"
    version: tuple
    comm: str
    stacks: dict         # default snapshot
    nolines: tuple       # (rc, stdout, stderr) of --no-lines over the same samples
    ps_entry: dict       # last `ps --json` entry seen while it ran
    ps_header: str
    ps_row: str


@pytest.fixture(scope="module", params=SUPPORTED)
def split_run(request, perfd_fast):
    """split.py for SPLIT_CPU_SECONDS on one interpreter, snapshotted twice
    at once (default and --no-lines) from the moment perfd has its tables
    (await_tables: under ASan, in a daemon just started, a quarter of a
    4 s run at 3.8 waited for them on CI) to its exit, with `ps` asked
    meanwhile."""
    interp = request.param
    # (2 s more for the tables to come first: await_tables)
    w = perfdtest.Workload("split.py", command=[interp.path, SPLIT, str(SPLIT_CPU_SECONDS + 2)])
    snaps = []
    try:
        runtime, version = ready_version(w)
        comm = process_comm(w.pid)
        perfdtest.await_tables(perfd_fast, w)
        snaps = [BackgroundSnapshot(perfd_fast, w.pid),
                 BackgroundSnapshot(perfd_fast, w.pid, "--no-lines")]
        entry = poll_runtime(perfd_fast, w)
        header, row = ps_table_row(perfd_fast, w.pid)
        stacks, _, _ = snaps[0].result(comm)
        nolines = snaps[1].output()  # checked by its own test
        w.finish()
    finally:
        for s in snaps:
            s.kill()
        w.kill()
    return SplitRun(interp, runtime, version, comm, stacks, nolines, entry, header, row)


def test_split_shares_follow_the_work(split_run):
    """split.py gives slow_path 3 s of CPU for every 1 s of fast_path,
    measured with the thread's CPU clock as it runs: their samples must
    split 3:1.  Protects attributing samples to the right Python function."""
    r = split_run
    slow = count(r.stacks, in_function(SPLIT, "slow_path"))
    fast = count(r.stacks, in_function(SPLIT, "fast_path"))
    n = slow + fast
    # ~2900 samples from 2.95 CPU-s at 999 Hz (perf record with CPython
    # 3.12's perf trampolines measures the slow share at 0.744-0.748).  With
    # n >= 2000, sd = sqrt(.75 * .25 / n) <= 0.97 points: 3 points is >= 3 sd.
    assert n >= 2000, \
        f"only {n} samples in slow_path or fast_path of split.py ({total(r.stacks)} in all)" \
        f"\n{show(r.stacks)}"
    share = slow / n
    assert abs(share - 0.75) <= 0.03, \
        f"slow_path share {share:.3f} ({slow}:{fast}), expected 0.75 +- 0.03\n{show(r.stacks)}"


def test_split_frames_name_callers_and_lines(split_run):
    """The Python part of split.py's stacks is exactly <module> -> main ->
    slow_path (or fast_path): callers at the line of their call, slow_path
    mostly at its hot line (the list scan), nothing between two Python
    frames.  Protects frame order, the merge with native frames, and the
    line numbers (f_lasti before 3.11, prev_instr/instr_ptr after)."""
    r = split_run
    module_line = marker_line(SPLIT, "CALL: main")
    for path, call in (("slow_path", "CALL: slow"), ("fast_path", "CALL: fast")):
        mine = {s: c for s, c in r.stacks.items() if in_function(SPLIT, path)(s)}
        m = total(mine)
        assert m > 0, f"no sample in {path}\n{show(r.stacks)}"
        want = [("<module>", module_line), ("main", marker_line(SPLIT, call))]
        exact = count(mine, lambda s: python_run(s) and
                      [(q, line) for q, f, line in python_run(s) if f == SPLIT][:2] == want and
                      [q for q, _, _ in python_run(s)] == ["<module>", "main", path])
        # By construction every sample in path has this chain; 95% leaves
        # room for samples taken mid-call, not for a frame out of place.
        assert exact >= 0.95 * m, \
            f"only {exact} of {m} {path} samples read <module> (:{module_line}) -> main " \
            f"(:{want[1][1]}) -> {path}, Python frames adjacent\n{show(mine)}"

    slow = {s: c for s, c in r.stacks.items() if in_function(SPLIT, "slow_path")(s)}
    lines = {}
    for s, c in slow.items():
        line = script_frames(s, SPLIT)[-1][1]
        lines[line] = lines.get(line, 0) + c
    hot = marker_line(SPLIT, "HOT: slow")
    top = max(lines, key=lines.get)
    # The scan of a 1000-entry list per word is >99% of slow_path's time.
    assert top == hot and lines[hot] >= 0.9 * total(slow), \
        f"slow_path's lines {lines}: expected most samples on line {hot}\n{show(slow)}"


def test_split_stacks_are_complete_mixed_stacks(split_run):
    """Nearly every sample is one mixed stack: native entry down to
    Py_BytesMain from _start, then the Python frames from <module>, then
    native leaf frames, then kernel frames.  For Debian's 3.11 (no frame
    pointers) this is the whole DWARF-unwound native stack around the
    Python frames; the C scan under slow_path must show as leaf native
    frames (named list_contains where the binary names it)."""
    r = split_run
    n = total(r.stacks)
    bad = {s: c for s, c in r.stacks.items() if not MIXED_SHAPE.fullmatch(shape(user_frames(s)))}
    # Shape is structural: only samples taken mid-transition may lack
    # Python frames; 2% leaves room for those, not for a misplaced frame.
    assert total(bad) <= 0.02 * n, \
        f"{total(bad)} of {n} samples are not native, Python, native, kernel " \
        f"(root first)\n{show(bad)}"

    def complete(s):
        roots = root_native(s)
        py = python_frames(s)
        return (roots[:1] == ["_start"] and "Py_BytesMain" in roots and
                py and py[0][:2] == ("<module>", SPLIT))
    done = count(r.stacks, complete)
    # test_unwind's bar for Debian's 3.11: 95% of the samples taken with the
    # tables ready reach Py_BytesMain (those from before are flagged).
    tabled = n - unwind_pending(r.stacks)
    assert done >= 0.95 * tabled, \
        f"only {done} of {tabled} samples ({done / tabled:.1%}) run from _start through " \
        f"Py_BytesMain " \
        f"to <module> ({SPLIT})\n{show(r.stacks)}"

    slow = {s: c for s, c in r.stacks.items() if in_function(SPLIT, "slow_path")(s)}
    m = total(slow)
    with_leaf = count(slow, lambda s: leaf_native(s))
    assert with_leaf >= 0.9 * m, \
        f"only {with_leaf} of {m} slow_path samples have native frames leafward of it\n" \
        f"{show(slow)}"
    if r.interp.pyenv:
        scan = count(slow, lambda s: "list_contains" in leaf_native(s))
        assert scan >= 0.8 * m, \
            f"list_contains leafward of slow_path in only {scan} of {m} samples\n{show(slow)}"


def test_split_no_lines_drops_lines_and_merges(split_run):
    """--no-lines, over the same samples: Python frames read "QUALNAME
    (FILE)", stacks that then read alike are one line, so there are no more
    of them than with lines, and they are the default stacks with ":LINE"
    dropped."""
    r = split_run
    rc, out, err = r.nolines
    assert rc == 0, f"perfctl snapshot --no-lines exited {rc}\nstderr: {err}"
    nolines = parse_folded(out)
    assert nolines and {s[0] for s in nolines} == {r.comm}, \
        f"--no-lines snapshot holds {total(nolines)} samples of {({s[0] for s in nolines})}"
    lined = [f for s in nolines for f in user_frames(s) if python_frame(f) and
             python_frame(f)[2] is not None]
    assert not lined, f"--no-lines output has frames with lines: {sorted(set(lined))[:10]}"
    assert count(nolines, lambda s: ("<module>", SPLIT, None) in python_frames(s)) \
        >= 0.95 * total(nolines), f"--no-lines lost the Python frames\n{show(nolines)}"
    texts = [line.rpartition(" ")[0] for line in out.splitlines()]
    dups = {t for t in texts if texts.count(t) > 1}
    assert not dups, f"--no-lines printed stacks that read alike on separate lines: {dups}"
    assert len(nolines) <= len(r.stacks), \
        f"{len(nolines)} distinct stacks with --no-lines, {len(r.stacks)} with lines"

    def strip(frame):
        p = python_frame(frame)
        return f"{p[0]} ({p[1]})" if p else frame
    stripped = {tuple(map(strip, s)) for s in r.stacks}
    # Both snapshots ran over the same seconds; only the first or last
    # samples may differ.
    same = count(nolines, lambda s: s in stripped)
    assert same >= 0.95 * total(nolines), \
        f"only {same} of {total(nolines)} --no-lines samples read as the default " \
        f"snapshot's stacks without lines\n{show(nolines)}"


def test_ps_reports_the_python_runtime(split_run):
    """`ps` names the interpreter's version exactly as sys.version_info
    does: "CPython 3.X.Y" in --json's runtime and in the RUNTIME column."""
    r = split_run
    assert r.ps_entry is not None, "split.py never appeared in ps --json while it ran"
    assert r.ps_entry.get("runtime") == r.runtime, \
        f"ps --json runtime {r.ps_entry.get('runtime')!r}, expected {r.runtime!r}: {r.ps_entry}"
    assert "RUNTIME" in r.ps_header.split(), f"ps has no RUNTIME column: {r.ps_header!r}"
    assert r.ps_row is not None and r.runtime in r.ps_row, \
        f"ps row for split.py lacks {r.runtime!r}: {r.ps_row!r}"


# --- one workload per test, per interpreter -------------------------------------

THREADS = python_workload("threads")
# Long enough for the GIL's shares within 5 points (check_gil).
THREADS_CPU_SECONDS = 4


@pytest.mark.parametrize("interp", SUPPORTED)
def test_threads_show_under_their_own_thread(interp, perfd_fast, workloads):
    """threads.py runs spin_alpha in thread py-alpha and spin_beta in
    py-beta, taking turns on the GIL.  With --threads each stack starts with
    "[thread TID COMM]"; each function shows under its own thread's TID and
    comm only, called from its thread's run closure under threading's
    bootstrap.  Protects finding the sampled thread's own Python state.

    Over the same time, its wall profile says each thread's GIL state
    (check_gil), and diagnose which thread waits for it and which holds it
    where (check_gil_diagnosis)."""
    w = start_python(workloads, interp, THREADS, THREADS_CPU_SECONDS)
    tids = {}
    for name in ("alpha", "beta"):
        _, tid = w.expect_line(name + " ").split()
        tids[name] = int(tid)
    _, version = ready_version(w)
    snap = BackgroundSnapshot(perfd_fast, w.pid, "--threads")
    wall = BackgroundSnapshot(perfd_fast, w.pid, "--threads", "--kind", "wall")
    stacks, _, _ = snap.result(process_comm(w.pid))
    wall_stacks, _, _ = wall.result(process_comm(w.pid))
    ran = {line.split()[0]: float(line.split()[2]) / float(line.split()[3])
           for line in w.finish().splitlines() if line.split()[1:2] == ["ran"]}
    check_gil(wall_stacks, tids, ran, w.pid)
    check_gil_diagnosis(perfd_fast, w.pid, tids)

    n = total(stacks)
    # 4 CPU-s at 999 Hz, less the start-up before "ready": ~3900 samples.
    assert n >= 3000, f"only {n} samples\n{show(stacks)}"
    unthreaded = [s for s in stacks if not THREAD_FRAME.match(s[1])]
    assert not unthreaded, \
        f"stacks without [thread TID COMM] after comm: {[';'.join(s) for s in unthreaded[:5]]}"
    target_line = marker_line(THREADS, "CALL: target")
    run = qualname(version, "start.<locals>.run")
    bootstrap = qualname(version, "Thread._bootstrap")
    for name in ("alpha", "beta"):
        func = "spin_" + name
        mine = {s: c for s, c in stacks.items() if in_function(THREADS, func)(s)}
        m = total(mine)
        # The GIL's 5 ms switch interval shares the CPU about evenly.
        assert m >= 0.3 * n, f"{func}: {m} of {n} samples\n{show(stacks)}"
        where = {}
        for s, c in mine.items():
            where[s[1]] = where.get(s[1], 0) + c
        expected = f"[thread {tids[name]} py-{name}]"
        assert set(where) == {expected}, \
            f"{func} runs in thread {tids[name]} (comm py-{name}) but shows under {where}"
        # The loop is two lines: the `for` (range's iterator) and the
        # marked body; the `while` above them runs once per 10,000.
        hot = marker_line(THREADS, "HOT: " + name)
        called = count(mine, lambda s: python_run(s) and
                       [(q, line) for q, _, line in python_run(s)[-2:-1]] == [(run, target_line)] and
                       python_run(s)[-1][0] == func and hot - 2 <= python_run(s)[-1][2] <= hot)
        at_hot = count(mine, lambda s: python_run(s) and python_run(s)[-1][2] == hot)
        assert at_hot >= 0.5 * m, f"{func}: only {at_hot} of {m} samples at line {hot}"
        rooted = count(mine, lambda s: python_run(s) and python_run(s)[0][0] == bootstrap and
                       python_run(s)[0][1].endswith("threading.py"))
        assert called >= 0.9 * m and rooted >= 0.9 * m, \
            f"{func}: {called} of {m} samples end {run} -> {func} in its loop, " \
            f"{rooted} start at {bootstrap} in threading.py\n{show(mine)}"


def check_gil(wall, tids, ran, main_tid):
    """threads.py's two spinners take turns on the GIL, 5 ms each: each
    holds it ([GIL: held] at its stacks' root) the share of its time it
    says it ran (ran: its CPU time's share of its life, 50% within a
    point or two), within 5 points, and waits for it (the leaf
    [wait: GIL]) the rest, within 8: its wait is an estimate from blocks
    sampled (bpf/offcpu.bpf.h), and a spinner blocks a few hundred times
    a second (its GIL waits, preemptions) of which about 100 are taken:
    ~400 in THREADS_CPU_SECONDS, a relative error of ~5% (2.5 points of
    50; its held share, of ~2,000 CPU samples, moves with the total by
    half that, ~1.6 points with its own; at 2 s, 1 check in 56 was off
    by 6).  Less than 15% of its time
    is neither.  The main thread sleeps in time.sleep()
    most of its time, every sleep under [GIL: released] (it holds the GIL
    to start the threads and, in the window too, to finalize)."""
    by_thread = {}
    for s, ns in wall.items():
        m = THREAD_FRAME.match(s[1])
        assert m, f"a wall stack without [thread TID COMM]: {';'.join(s)}"
        by_thread.setdefault(int(m.group(1)), {})[s] = ns

    def share(mine, predicate):
        return 100.0 * count(mine, predicate) / max(total(mine), 1)

    for name, tid in tids.items():
        mine = by_thread.get(tid, {})
        assert total(mine) >= 0.5e9, f"py-{name}: {total(mine)} ns of wall time\n{show(wall)}"
        held = share(mine, lambda s: s[2] == "[GIL: held]")
        waits = share(mine, lambda s: s[-1] == "[wait: GIL]")
        truth = 100 * ran[name]
        assert abs(held - truth) <= 5 and abs(waits - (100 - truth)) <= 8 and \
            held + waits >= 85, \
            f"py-{name} holds the GIL {held:.1f}% and waits for it {waits:.1f}% of its time; " \
            f"it ran {truth:.1f}% of it\n{show(mine)}"
        assert count(mine, lambda s: s[-1] == "[wait: GIL]" and
                     any(q == "spin_" + name for q, _ in script_frames(s, THREADS))) >= \
            0.9 * count(mine, lambda s: s[-1] == "[wait: GIL]"), \
            f"py-{name}'s GIL waits are not in spin_{name}\n{show(mine)}"
    main = by_thread.get(main_tid, {})
    line = marker_line(THREADS, "SLEEP: main")
    asleep = count(main, lambda s: s[-1] in ("[wait: sleep]", "[wait: poll]") and
                   ("main", line) in script_frames(s, THREADS))
    assert asleep >= 0.5 * total(main), \
        f"the main thread sleeps {asleep} of {total(main)} ns at line {line}\n{show(main)}"
    released = count(main, lambda s: s[2] == "[GIL: released]" and
                      s[-1] in ("[wait: sleep]", "[wait: poll]") and
                      ("main", line) in script_frames(s, THREADS))
    assert released == asleep, \
        f"of {asleep} ns asleep in time.sleep(), {asleep - released} are not under " \
        f"[GIL: released]\n{show(main)}"


def check_gil_diagnosis(daemon, pid, tids):
    """diagnose names a spinner that waits for the GIL about half of its
    time, the other as its holder about half of its time, most of that in
    its own spin function (`diagnose --json`, and the same in its text)."""
    doc = daemon.perfctl_json("diagnose", "--pid", str(pid), "--since", "1m")
    gil = doc.get("gil")
    names = {tid: name for name, tid in tids.items()}
    assert gil and gil["waiter"]["tid"] in names and gil.get("holder"), \
        f"diagnose names no spinner waiting for the GIL: {json.dumps(doc.get('gil'))}"
    holder = gil["holder"]
    other = names[holder["tid"]]
    assert holder["tid"] != gil["waiter"]["tid"] and holder["comm"] == "py-" + other and \
        abs(gil["waiter"]["percent"] - 50) <= 10 and abs(holder["percent"] - 50) <= 10 and \
        holder.get("code", {}).get("function") == "spin_" + other and \
        holder["code"]["file"] == THREADS, f"diagnose's GIL: {json.dumps(gil)}"
    rc, out, err = daemon.perfctl("diagnose", "--pid", str(pid), "--since", "1m")
    said = f"The GIL: thread {gil['waiter']['tid']} {gil['waiter']['comm']} waits for it"
    assert rc == 0 and said in out and f"in spin_{other} (threads.py:" in out, \
        f"diagnose exited {rc} without {said!r} ... spin_{other}:\n{out}{err}"


NATIVE_THREAD = python_workload("native_thread")


@pytest.mark.parametrize("interp", SUPPORTED)
def test_native_thread_has_no_python_frames(interp, perfd_fast, workloads):
    """native_thread.py starts, through ctypes, a raw pthread that spins in
    C and never meets the interpreter, while its main thread spins in
    Python.  The native thread's stacks must hold no Python frame (it has
    no thread state: borrowing another thread's would show py_spin there),
    the main thread's must, and status must count the native thread's
    samples as walks without a thread state."""
    lib = perfdtest.workload_binary("libnativethread.so")
    before = perfd_fast.status()["python"]["samples_without_thread_state"]
    w = start_python(workloads, interp, NATIVE_THREAD, lib, 1.5)
    native_tid = int(w.expect_line("native ").split()[1])
    _, version = ready_version(w)
    snap = BackgroundSnapshot(perfd_fast, w.pid, "--threads")
    stacks, _, _ = snap.result(process_comm(w.pid))
    w.finish()
    after = perfd_fast.status()["python"]["samples_without_thread_state"]

    native = {s: c for s, c in stacks.items()
              if THREAD_FRAME.match(s[1]) and THREAD_FRAME.match(s[1]).group(1) == str(native_tid)}
    main = {s: c for s, c in stacks.items()
            if THREAD_FRAME.match(s[1]) and THREAD_FRAME.match(s[1]).group(1) == str(w.pid)}
    n_native, n_main = total(native), total(main)
    # Each thread spins ~1.5 s at 999 Hz, ~1500 samples with a CPU of its
    # own; under load the native one (it spins while main does) gets less:
    # 500 is enough to tell whose frames are whose.
    assert n_native >= 500 and n_main >= 500, \
        f"native thread {n_native}, main thread {n_main} samples\n{show(stacks)}"
    with_python = count(native, lambda s: python_frames(s))
    assert with_python == 0, \
        f"{with_python} samples of the native thread show Python frames\n{show(native)}"
    spinning = count(native, lambda s: "native_spin_work" in s)
    assert spinning >= 0.9 * n_native, \
        f"only {spinning} of {n_native} native-thread samples in native_spin_work\n{show(native)}"
    in_py = count(main, in_function(NATIVE_THREAD, "py_spin"))
    assert in_py >= 0.9 * n_main, \
        f"only {in_py} of {n_main} main-thread samples in py_spin\n{show(main)}"
    # The counter is the whole machine's, but the tests run one at a time:
    # the main thread's walks (which found its state) must not be in it.
    assert 0.9 * n_native <= after - before <= n_native + 0.1 * n_main, \
        f"status counted {after - before} samples without a thread state; " \
        f"the native thread had {n_native}, the main thread {n_main}"


CEXT = python_workload("cext")
# The SHA-256 code's frames: _hashlib's functions, libcrypto's (named, or
# "libcrypto.so.3+0x..." where its symbols are stripped), or CPython's own
# _sha256/_sha2 module when it was built without OpenSSL.
HASHING = re.compile(r"sha256|sha2|libcrypto|_hashlib|EVP", re.IGNORECASE)


@pytest.mark.parametrize("interp", SUPPORTED)
def test_native_frames_sit_leafward_of_the_calling_python_frame(interp, perfd_fast,
                                                                workloads):
    """cext.py's call_native spends its time in hashlib.sha256 over 16 MiB,
    C code with the GIL released: its samples must end with call_native at
    its hot line, then the hashing code's native frames.  Protects the
    merge order of Python and native frames for C extensions."""
    w = start_python(workloads, interp, CEXT, 2)
    ready_version(w)
    stacks, _, _ = BackgroundSnapshot(perfd_fast, w.pid).result(process_comm(w.pid))
    w.finish()

    n = total(stacks)
    assert n >= 1500, f"only {n} samples\n{show(stacks)}"
    hot = ("call_native", marker_line(CEXT, "HOT: native"))
    chain = [("<module>", marker_line(CEXT, "CALL: main")),
             ("main", marker_line(CEXT, "CALL: native")), hot]
    mine = {s: c for s, c in stacks.items() if python_run(s) and
            [(q, line) for q, f, line in python_run(s) if f == CEXT] == chain and
            len(python_run(s)) == len(chain)}
    m = total(mine)
    # Each 16 MiB hash is tens of ms of C; the loop around it is noise.
    assert m >= 0.9 * n, \
        f"only {m} of {n} samples read <module> -> main -> call_native at the marked " \
        f"lines\n{show(stacks)}"
    native = count(mine, lambda s: leaf_native(s))
    hashing = count(mine, lambda s: any(HASHING.search(f) for f in leaf_native(s)))
    assert native >= 0.95 * m, \
        f"only {native} of {m} call_native samples have native frames leafward of it\n" \
        f"{show(mine)}"
    assert hashing >= 0.8 * m, \
        f"only {hashing} of {m} call_native samples have SHA-256 frames leafward of it\n" \
        f"{show(mine)}"


def in_loop(run, want):
    """Whether the Python frames run (root first, (qualname, file, line))
    are want's (qualname, line) pairs, the leaf at its marked line or at
    the `for` line just above it: a hot loop of two lines, whose `for`
    (the range iterator) takes its share of samples."""
    if not run or len(run) != len(want):
        return False
    if [(q, line) for q, _, line in run[:-1]] != want[:-1]:
        return False
    leaf_name, leaf_line = want[-1]
    return run[-1][0] == leaf_name and run[-1][2] in (leaf_line - 1, leaf_line)


DEEP = python_workload("deep")
DEPTH = 30


@pytest.mark.parametrize("interp", SUPPORTED)
def test_deep_stacks_keep_every_frame(interp, perfd_fast, workloads):
    """deep.py spins DEPTH recursive calls down, in a method: every frame
    must be there, in order, each at its line, and the method named
    Spinner.spin on 3.11+ (co_qualname), spin before, and the code tags of
    its 4 code objects must come from the walker's cache but about once
    in 20 samples.  Protects the frame walk's depth, the qualified names
    and the tag cache."""
    # (2 s more for the tables to come first: await_tables; under ASan, in
    # a daemon just started, 128 of 1,427 samples waited for libpython's)
    w = start_python(workloads, interp, DEEP, 1.5 + 2, DEPTH)
    _, version = ready_version(w)
    perfdtest.await_tables(perfd_fast, w)
    before = code_tags(perfd_fast)
    stacks, _, _ = BackgroundSnapshot(perfd_fast, w.pid).result(process_comm(w.pid))
    after = code_tags(perfd_fast)
    w.finish()

    n = total(stacks)
    # ~1450 samples from 1.5 CPU-s; below 1000 the daemon lost samples.
    assert n >= 1000, f"only {n} samples\n{show(stacks)}"
    recurse = ("recurse", marker_line(DEEP, "CALL: recurse"))
    want = ([("<module>", marker_line(DEEP, "CALL: main")),
             ("main", marker_line(DEEP, "CALL: deep"))] + [recurse] * (DEPTH - 1) +
            [("recurse", marker_line(DEEP, "CALL: spin")),
             (qualname(version, "Spinner.spin"), marker_line(DEEP, "HOT: deep"))])
    exact = count(stacks, lambda s: in_loop(python_run(s), want))
    # All but the samples of the (tiny) start-up and of the loop's
    # process_time() call are in the hot loop.
    assert exact >= 0.9 * n, \
        f"only {exact} of {n} samples hold the {len(want)} Python frames of deep.py in " \
        f"order at their lines\nexpected: {want}\n{show(stacks, limit=5)}"
    # The same 4 code objects in every sample: at 999 Hz a CPU reads each
    # one's tag about once per 20 ms (its TTL in bpf/python.bpf.h), ~20
    # samples: 0.20 reads a sample here (tests/bench/tag-rate.sh).
    cached, read = (a - b for a, b in zip(after, before))
    assert cached + read >= DEPTH * 0.9 * n, f"{cached} + {read} tags for {n} samples"
    # (recurse's 30 frames share a tag in each walk: a cache that forgot
    # every tag between samples would still take 29 of 33 from it)
    assert read <= n, f"{read} code tags read for {n} samples: the cache keeps none"


def code_tags(daemon):
    """status' (python.code_tags_cached, python.code_tags_read)."""
    py = daemon.status()["python"]
    return py["code_tags_cached"], py["code_tags_read"]


REGEN = python_workload("regen")
REGEN_GENERATIONS = 3
# The store keeps a past range in windows of one second of perfd's clock
# (CLOCK_MONOTONIC); regen.py starts each generation 0.05-0.07 s before
# such a second (less when its compile is slow), and each holds at least
# one whole second.
REGEN_SECONDS = 2.0
# A generation's samples this long after it started may not be named for the
# one before: the walker's tag TTL (20 ms, bpf/python.bpf.h) and 10 ms more.
REGEN_STALE_SECONDS = 0.03


@pytest.mark.parametrize("interp", SUPPORTED)
def test_code_reused_at_an_address_is_named_for_what_runs(interp, perfd_fast, workloads):
    """regen.py gives one function the code of gen_0, gen_1, ... in turn,
    as hot-reloaders do, each hot for REGEN_SECONDS of CPU, each code object
    at the freed one's address (printed, and checked: else this would not
    test it).  The key of the walker's tag cache (code address, function)
    cannot tell them apart: only the tag's age limit keeps a generation from
    being named for the one before.  So in the whole seconds of perfd's
    clock from REGEN_STALE_SECONDS into each generation to its end (the
    first starts 50-70 ms in, by construction), every sample must name that
    generation and no other, and nearly all of them must name one (the
    daemon reads a code object at its first delivered sample: a generation
    must outlive the 1 s drain, and does, by twice).  With a TTL of 200 ms,
    6 of the 7 interpreters failed it."""
    w = start_python(workloads, interp, REGEN, REGEN_GENERATIONS, REGEN_SECONDS)
    ready_version(w)
    # spinning in warm_up until told: the daemon has described it first
    perfdtest.await_tables(perfd_fast, w)
    os.kill(w.pid, signal.SIGUSR1)
    gens = [w.expect_line("gen ").split()[2:5] for _ in range(REGEN_GENERATIONS)]
    ended = float(w.expect_line("end ").split()[1])
    w.finish()

    # (the first generation's code may land elsewhere: a fresh allocation)
    assert any(a[:2] == b[:2] for a, b in zip(gens, gens[1:])), \
        f"code and function objects were not reused at one address: {gens}"
    starts = [float(g[2]) for g in gens] + [ended]  # time.monotonic()
    unix = time.time() - time.monotonic()
    for g in range(REGEN_GENERATIONS):
        first, last = math.ceil(starts[g] + REGEN_STALE_SECONDS), math.floor(starts[g + 1])
        assert last > first, f"generation {g} holds no whole second: {starts}"
        # the store's windows [first, last) exactly (a window is taken when
        # the range covers half of it)
        rc, out, err = perfd_fast.perfctl("snapshot", "--pid", str(w.pid),
                                          "--from", f"{first + unix:.6f}",
                                          "--to", f"{last + unix:.6f}")
        assert rc == 0, f"snapshot of generation {g} exited {rc}: {err}"
        stacks = parse_folded(out)
        leaf = {}
        for s, n in stacks.items():
            frames = [q for q, f, _ in python_frames(s) if f == "<regen>"]
            name = frames[-1] if frames else None
            leaf[name] = leaf.get(name, 0) + n
        n = total(stacks)
        # ~1,000 samples a second; the next generation's compile and exec
        # come after the window
        assert n >= 500 * (last - first), \
            f"generation {g}: only {n} samples in {last - first} s\n{show(stacks, limit=8)}"
        others = {k: v for k, v in leaf.items() if k not in (f"gen_{g}", None)}
        assert not others, \
            f"generation {g}: samples named for another generation: {others} (of {n})"
        assert leaf.get(f"gen_{g}", 0) >= 0.9 * n, \
            f"generation {g}: only {leaf.get(f'gen_{g}', 0)} of {n} samples name gen_{g}\n" \
            f"{show(stacks, limit=8)}"


DEEP_NATIVE = python_workload("deep_native")
TRUNCATED = "[truncated]"
# One interpreter with frame pointers and symbols, one without either: the
# merge is the same code for all, the native walk through ctypes is not.
CUT_INTERPS = [p for p in SUPPORTED if p.id in ("pyenv-3.13", "debian-3.11")]


def frame_order(stack):
    """(index of main, first and last deep_recurse, index of spin) in the
    stack's user frames, None where absent."""
    frames = user_frames(stack)
    names = [python_frame(f)[0] if python_frame(f) else function(f) for f in frames]
    rec = [i for i, f in enumerate(names) if f == "deep_recurse"]
    find = lambda name: names.index(name) if name in names else None  # noqa: E731
    return find("main"), rec[0] if rec else None, rec[-1] if rec else None, find("spin"), \
        len(rec)


@pytest.mark.parametrize("interp", CUT_INTERPS)
def test_stack_cut_at_the_depth_limit_reads_as_cut(interp, perfd_fast, workloads):
    """deep_native.py calls back into Python (spin) from the bottom of a C
    recursion 20 or 400 frames deep, half its time each.  The 400-deep
    stacks are cut at the 127-frame limit in the middle of the recursion:
    they must be rooted at "[truncated]" and keep their order, <module>
    and main rootward of the C recursion and spin leafward of it (the cut
    stack used to put its leftover C frames at the root, above every Python
    frame).  The 20-deep ones are whole: rooted at _start, not cut."""
    w = start_python(workloads, interp, DEEP_NATIVE,
                     perfdtest.workload_binary("libdeeprec.so"), 2)
    ready_version(w)
    stacks, _, _ = BackgroundSnapshot(perfd_fast, w.pid).result(process_comm(w.pid))
    w.finish()

    n = total(stacks)
    assert n >= 1000, f"only {n} samples from ~2 CPU-s\n{show(stacks, limit=3)}"
    in_spin = {s: c for s, c in stacks.items() if frame_order(s)[3] is not None}
    deep = {s: c for s, c in in_spin.items() if frame_order(s)[4] >= 100}
    shallow = {s: c for s, c in in_spin.items() if 0 < frame_order(s)[4] <= 30}
    # Half each by construction; 0.35 leaves > 10 standard deviations of
    # sampling error for the ~1000 samples of spin.
    for what, part in (("400-deep", deep), ("20-deep", shallow)):
        assert total(part) >= 0.35 * n, \
            f"only {total(part)} of {n} samples in spin under the {what} recursion\n" \
            f"{show(stacks, limit=3)}"

    def ordered(stack):
        main, first, last, spin, _ = frame_order(stack)
        return main is not None and main < first and last < spin

    cut = count(deep, lambda s: user_frames(s)[0] == TRUNCATED and ordered(s))
    assert cut >= 0.95 * total(deep), \
        f"only {cut} of {total(deep)} samples of the cut recursion are rooted at " \
        f"{TRUNCATED} with <module>/main above the C frames and spin below them\n" \
        f"{show(deep, limit=3)}"
    whole = count(shallow, lambda s: function(user_frames(s)[0]) == "_start" and ordered(s))
    assert whole >= 0.95 * total(shallow), \
        f"only {whole} of {total(shallow)} samples of the whole recursion run from _start " \
        f"in order\n{show(shallow, limit=3)}"


FORKS = python_workload("forks")


@pytest.mark.parametrize("interp", SUPPORTED)
def test_forked_and_spawned_children_show_python_frames(interp, perfd_fast, workloads):
    """forks.py forks a child that keeps running the parent's interpreter
    (no exec) in forked_work, and starts a new interpreter with subprocess
    that runs subprocess_work: both children's Python frames must show.
    Protects detecting Python in processes perfd sees only as new pids."""
    w = start_python(workloads, interp, FORKS, 1.5)
    forked = int(w.expect_line("forked ").split()[1])
    spawned = int(w.expect_line("subprocess ").split()[1])
    ready_version(w)
    comm = process_comm(w.pid)
    snaps = [BackgroundSnapshot(perfd_fast, pid) for pid in (forked, spawned)]
    try:
        forked_stacks, _, _ = snaps[0].result(comm)
        spawned_stacks, _, _ = snaps[1].result(comm)
    finally:
        for s in snaps:
            s.kill()
    w.finish()

    step = ("spin_until_orphaned", marker_line(FORKS, "CALL: step"))
    cases = (
        ("forked child", forked_stacks,
         [("<module>", marker_line(FORKS, "CALL: main")),
          ("main", marker_line(FORKS, "CALL: forked")), step,
          ("forked_work", marker_line(FORKS, "HOT: forked"))]),
        ("subprocess", spawned_stacks,
         [("<module>", marker_line(FORKS, "CALL: subprocess")), step,
          ("subprocess_work", marker_line(FORKS, "HOT: subprocess"))]),
    )
    for what, stacks, want in cases:
        n = total(stacks)
        # 1.5 CPU-s each: ~1450 samples (the subprocess less its start-up).
        assert n >= 1000, f"{what}: only {n} samples\n{show(stacks)}"
        exact = count(stacks, lambda s: in_loop(python_run(s), want))
        # The loop's getppid()/process_time() and the subprocess's start-up
        # (~3%) are the rest.
        assert exact >= 0.85 * n, \
            f"{what}: only {exact} of {n} samples hold {want}\n{show(stacks)}"


# --- CPython's perf trampolines: -X perf, -X perf_jit ----------------------------

PERF_MODES = [pytest.param(m, o, id=f"pyenv-3.{m}-{o}") for m, o in
              ((12, "perf"), (13, "perf"), (13, "perf_jit"))]
PERF_SECONDS = 2  # measured, once the tables are ready: ~2,000 samples at 999 Hz


def jit_file(option, pid):
    """What CPython writes under -X OPTION for perf: the perf map of
    -X perf (lines "ADDR SIZE py::QUALNAME:FILE"), the jitdump of
    -X perf_jit (starting with the magic "JiTD")."""
    return Path(f"/tmp/perf-{pid}.map" if option == "perf" else f"/tmp/jit-{pid}.dump")


def split_under_perf(daemon, workloads, minor, option):
    """split.py under CPython 3.MINOR -X OPTION, run until interrupted:
    (stacks, the bytes of the perf map or jitdump it wrote), the file
    removed.  The stacks are PERF_SECONDS of snapshot from the moment perfd
    unwinds it with its tables (await_tables): what perfd makes of a whole
    stack, on any machine.  Every sample from its "ready" line on, the ones
    taken while the tables were built included, is snapshotted too and
    must be rooted (assert_rooted)."""
    path = perfdtest.pyenv_python(minor)
    if path is None:
        pytest.skip(f"CPython 3.{minor} is not installed")
    w = workloads("split.py", command=[path, "-X", option, SPLIT])
    whole = None
    try:
        ready_version(w)
        comm = process_comm(w.pid)
        whole = BackgroundSnapshot(daemon, w.pid,
                                   duration=perfdtest.TABLES_TIMEOUT + PERF_SECONDS + 60)
        perfdtest.await_tables(daemon, w)
        stacks, _, _ = BackgroundSnapshot(daemon, w.pid, duration=PERF_SECONDS).result(comm)
        # SIGINT: KeyboardInterrupt, and an exit that flushes the jitdump,
        # which -X perf_jit writes through stdio (the perf map is flushed
        # line by line)
        w.proc.send_signal(signal.SIGINT)
        w.proc.wait(timeout=60)
        written = jit_file(option, w.pid).read_bytes()
        everything, _, _ = whole.result(comm)
    finally:
        if whole:
            whole.kill()
        w.kill()
        jit_file(option, w.pid).unlink(missing_ok=True)
    n = total(stacks)
    assert n >= 1000, f"only {n} samples in {PERF_SECONDS} s\n{show(stacks, limit=3)}"
    assert_rooted(everything)
    return stacks, written


def assert_rooted(stacks):
    """Asserts that every sample's user stack reaches _start or says where
    it was cut (rooted at a marker): a walk that stopped early is never
    passed off as whole.  Under ASan, libpython's table is built for about
    the first second of split.py; frame pointers, all there is meanwhile,
    met a zero rbp in it and were taken to end the stack: with f885afd's
    BPF, 8 to 72 samples a run read "python3;list_contains" and the like
    (4 sanitized runs of the two tests below; 14 in 1 of 3 plain ones)."""
    def unrooted(s):
        frames = user_frames(s)
        return bool(frames) and not is_kernel(frames[0]) and \
            frames[0] not in (perfdtest.UNWIND_PENDING, TRUNCATED, "[context switch]") and \
            function(frames[0]) != "_start"
    bare = {s: c for s, c in stacks.items() if unrooted(s)}
    assert not bare, f"{total(bare)} samples neither reach _start nor say they were cut\n" \
        f"{show(bare, limit=5)}"


def assert_nearly_all(stacks, shape_ok, what):
    """Asserts that 95% of the samples taken with their tables ready (not
    rooted at [unwind table pending]) satisfy shape_ok: by construction all
    of split.py's do, but those taken mid-call or where a C extension's
    table was not built yet.  Returns the number of those samples."""
    tabled = total(stacks) - unwind_pending(stacks)
    good = count(stacks, shape_ok)
    bad = {s: c for s, c in stacks.items()
           if not shape_ok(s) and not perfdtest.is_pending(s)}
    assert good >= 0.95 * tabled, \
        f"only {good} of {tabled} samples ({good / tabled:.1%}) {what}\n{show(bad, limit=10)}"
    return tabled


@pytest.mark.parametrize("minor,option", PERF_MODES)
def test_perf_trampolines_keep_stacks_whole(minor, option, perfd_fast, workloads):
    """split.py under -X perf / -X perf_jit, which people turn on so that
    perf sees Python: every Python function then runs through a trampoline
    of its own, copies of a template without frame pointer or CFI in
    anonymous memory, named "py::FUNC:FILE" by the perf map.  perfd must
    walk through them (they used to end the native walk at a bogus
    [jit]+0xffffffffffff frame, with the trampoline's py:: name next to
    perfd's Python frames): the stacks read _start ... Py_RunMain, then
    the script's frames once each and in order, with no [jit] frame and no
    trampoline name."""
    stacks, written = split_under_perf(perfd_fast, workloads, minor, option)
    # The interpreter did run its trampolines.
    if option == "perf":
        assert b" py::slow_path:" + SPLIT.encode() in written, \
            f"no trampoline of slow_path in the perf map: {written[:300]!r}"
    else:
        assert written[:4] == b"DTiJ" and b"py::slow_path:" in written, \
            f"no trampoline of slow_path in the jitdump: {written[:64]!r}"

    bogus = lambda f: f.startswith(("[jit]", "py::", "[unknown]"))  # noqa: E731

    def whole(s):
        roots = root_native(s)
        run = python_run(s)
        mine = [q for q, f, _ in run or [] if f == SPLIT]
        return (roots[:1] == ["_start"] and "Py_RunMain" in roots and
                mine[:2] == ["<module>", "main"] and len(mine) <= 3 and
                mine[2:] in ([], ["slow_path"], ["fast_path"]) and
                not any(bogus(f) for f in user_frames(s)))
    tabled = assert_nearly_all(stacks, whole, "run from _start through Py_RunMain to "
                               "<module> -> main [-> slow_path|fast_path], with no [jit] or "
                               "py:: frame")
    # A trampoline's name is shown only where perfd has no Python frame.
    named = count(stacks, lambda s: python_frames(s) and any(f.startswith("py::") for f in s))
    assert named == 0, f"{named} samples show a trampoline's py:: name next to the " \
        f"Python frames\n{show(stacks, limit=5)}"
    # Frame pointers are all there is while a table is built (those samples
    # say so at their root), and they meet garbage here.
    with_jit = {s: c for s, c in stacks.items() if not perfdtest.is_pending(s) and
                any(f.startswith("[jit]") for f in s)}
    assert total(with_jit) <= 0.01 * tabled, \
        f"{total(with_jit)} of {tabled} samples hold a [jit] frame\n{show(with_jit, limit=5)}"
    # (The table itself may be gone by now: idle, it makes room for others.)
    unwind = perfd_fast.status()["unwind"]
    assert unwind["copy_templates_refused"] == 0, f"the template did not decode: {unwind}"


@pytest.fixture(scope="module")
def perfd_no_python(environment):
    """A daemon that does not walk Python frames (--no-python), as perf
    does not: what names a Python function is then the trampoline's entry
    in the perf map or jitdump, as perf shows it."""
    daemon = perfdtest.start_perfd(frequency=FAST_HZ, extra_args=["--no-python"])
    yield daemon
    daemon.stop()


@pytest.mark.parametrize("minor,option", [m for m in PERF_MODES if m.id != "pyenv-3.13-perf"])
def test_perf_trampolines_are_named_as_perf_names_them(minor, option, perfd_no_python,
                                                       workloads):
    """Without Python frames, split.py's stacks under -X perf (3.12: the
    perf map) and -X perf_jit (3.13: the jitdump, which perfd reads as perf
    does) read as perf's: _start ... Py_RunMain, then the trampolines of
    <module>, main and slow_path or fast_path by their "py::QUALNAME:FILE"
    names, in order, each with the interpreter loop it called below it."""
    stacks, _ = split_under_perf(perfd_no_python, workloads, minor, option)
    assert not any(python_frames(s) for s in stacks), "Python frames with --no-python"

    def as_perf(s):
        frames = user_frames(s)
        named = [f for f in frames if f.startswith("py::")]
        mine = [f[len("py::"):-len(":" + SPLIT)] for f in named if f.endswith(":" + SPLIT)]
        # (a trampoline is the leaf when the tick fell in its own code)
        below = [frames[i + 1] for i, f in enumerate(frames[:-1]) if f.startswith("py::")]
        return ([function(f) for f in frames[:1]] == ["_start"] and
                "Py_RunMain" in map(function, frames) and
                len(mine) == len(named) and mine[:2] == ["<module>", "main"] and
                mine[2:] in ([], ["slow_path"], ["fast_path"]) and
                all(function(f) == "_PyEval_EvalFrameDefault" for f in below) and
                not any(f.startswith("[jit]") for f in frames))
    assert_nearly_all(stacks, as_perf, "read _start ... Py_RunMain ... py::<module> ... "
                      "py::main [... py::slow_path|fast_path], each over the interpreter loop")


NAMELESS = python_workload("nameless")


def test_a_function_named_empty_reads_unnamed_in_every_report(perfd_fast, workloads):
    """nameless.py spins in a function whose code object's co_name (and
    co_qualname) is "", which CPython runs as any other.  Its frames read
    "[unnamed] (FILE:LINE)" at the hot line, and the reports that take
    perfd's call tree (report, diagnose) read it: perfd used to write the
    function as "", and perfctl refused the whole tree, so one process
    with such a function made `report --all` fail for the whole host."""
    w = start_python(workloads, Interpreter("debian-3.11", DEBIAN_PYTHON, False), NAMELESS, 2)
    ready_version(w)
    snap = BackgroundSnapshot(perfd_fast, w.pid)
    try:
        stacks, _, _ = snap.result(process_comm(w.pid))
    finally:
        snap.kill()
    w.expect_line("done")
    hot = marker_line(NAMELESS, "HOT: nameless")
    n = total(stacks)
    assert n >= 1000, f"only {n} samples from ~2 CPU-s\n{show(stacks)}"
    leaf = lambda s: script_frames(s, NAMELESS)[-1:]  # noqa: E731
    unnamed = count(stacks, lambda s: leaf(s)[:1] and leaf(s)[0][0] == "[unnamed]")
    at_hot = count(stacks, lambda s: leaf(s) == [("[unnamed]", hot)])
    # all of the CPU is in spin(), most on the loop's body (the rest on
    # its for line): 0.9 and 0.5 leave > 10 sigma at n = 1000
    assert unnamed >= 0.9 * n and at_hot >= 0.5 * n, \
        f"of {n} samples {unnamed} end in [unnamed], {at_hot} at line {hot}\n{show(stacks)}"
    # every function: the daemon is the session's, its history the host's
    for args in (["--all", "--since", "1m"], ["--pid", str(w.pid), "--since", "1m"]):
        rc, out, err = perfd_fast.perfctl("report", *args, "--top", "0")
        assert rc == 0, f"report {' '.join(args)} exited {rc}: {err}"
        assert "[unnamed]" in out, f"report {' '.join(args)} has no [unnamed]:\n{out[:2000]}"
    rc, out, err = perfd_fast.perfctl("diagnose", "--pid", str(w.pid), "--since", "1m")
    assert rc == 0, f"diagnose exited {rc}: {err}"
    w.finish()


# --- runtimes perfd does not walk, and processes that are not Python ------------

@pytest.mark.parametrize("interp", UNSUPPORTED)
def test_unsupported_python_is_named_and_still_profiled(interp, perfd_fast, workloads):
    """CPython 3.6/3.7, and sid's 3.15 (whose layout perfd does not know),
    are detected but not walked: ps says "CPython 3.X.Y (unsupported)", and
    snapshots still hold the native stacks (the eval loop under _start),
    with no Python frames made up."""
    w = start_python(workloads, interp, SPLIT, 3)
    runtime, _ = ready_version(w)
    comm = process_comm(w.pid)
    # (sid's 8 MB stripped python3.15 takes a while to get its unwind
    # table under ASan: until then its stacks are rooted at "[unwind
    # table pending]"; 1 s more of work for that)
    perfdtest.await_tables(perfd_fast, w)
    snap = BackgroundSnapshot(perfd_fast, w.pid)
    try:
        entry = poll_runtime(perfd_fast, w)
        stacks, _, _ = snap.result(comm)
    finally:
        snap.kill()
    w.finish()

    assert entry is not None, f"{interp.label} never appeared in ps --json while it ran"
    assert entry.get("runtime") == f"{runtime} (unsupported)", \
        f"ps --json runtime {entry.get('runtime')!r}, expected {runtime + ' (unsupported)'!r}"
    n = total(stacks)
    assert n >= 1000, f"only {n} samples from ~2 CPU-s\n{show(stacks)}"
    # sid's stripped build names no frame of the loop itself: the call
    # into it, then
    loop = {"PyEval_EvalCode"} if interp.label.startswith("sid-") else \
        {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"}
    native = count(stacks, lambda s: function(s[1]) == "_start" and loop & set(map(function, s)))
    # perf record -g and today's perfd: >99% of split.py's samples.
    assert native >= 0.9 * n, \
        f"only {native} of {n} samples run from _start into the eval loop\n{show(stacks)}"
    invented = count(stacks, lambda s: python_frames(s))
    assert invented == 0, f"{invented} samples with Python frames for {runtime}\n{show(stacks)}"


def test_ps_runtime_is_absent_for_a_native_process(perfd_fast, workloads):
    """A process that is not Python has no runtime: absent or null in
    `ps --json`, no CPython in its row."""
    w = workloads("spin", 30, 0)
    entry = None
    deadline = time.monotonic() + 10
    while entry is None and time.monotonic() < deadline:
        entry = perfdtest.ps_process(perfd_fast, w.pid)
        time.sleep(0.1)
    assert entry is not None, "spin never appeared in ps --json"
    assert entry.get("runtime") is None, f"spin has runtime {entry['runtime']!r}"
    _, row = ps_table_row(perfd_fast, w.pid)
    assert row is not None and "CPython" not in row, f"ps row for spin: {row!r}"


@pytest.fixture(scope="module")
def perfd_verbose(environment):
    """A daemon that logs its debug messages too: the line naming each
    Python process it walks.  Without memory sampling, whose RSS records
    would announce a new process before its first CPU sample does."""
    daemon = perfdtest.start_perfd(frequency=FAST_HZ, extra_args=["--verbose", "--no-memory"])
    yield daemon
    daemon.stop()


def log_lines(daemon, pid, since):
    """The daemon's log lines about pid ("pid PID (COMM): ...") written after
    offset since of its log (len(daemon.stderr()) before the process
    started): the module's daemon logs for its whole life, and pid_max is
    32768, so an earlier process may have had the pid."""
    return [line for line in daemon.stderr()[since:].splitlines() if f"pid {pid} (" in line]


def test_ps_runtime_is_absent_for_a_program_that_only_links_libpython(perfd_verbose,
                                                                     workloads):
    """pylinked links Debian's libpython3.11, as `perf` does, and never
    starts Python: no runtime in `ps --json` and no log line of one, while
    Debian's python3.11 running beside it, the same libpython's code in its
    executable, is named "CPython 3.11.x"."""
    since = len(perfd_verbose.stderr())
    w = workloads("pylinked", 30)  # killed at the end, by the fixture
    version = w.expect_line("ready ").split()[1]
    py = start_python(workloads, Interpreter("debian-3.11", DEBIAN_PYTHON, False), SPLIT, 30)
    runtime, _ = ready_version(py)
    control = poll_runtime(perfd_verbose, py)
    entries = []
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline or not entries and time.monotonic() < deadline + 5:
        entry = perfdtest.ps_process(perfd_verbose, w.pid)
        if entry is not None:
            entries.append(entry)
        time.sleep(0.1)

    assert entries, "pylinked never appeared in ps --json while it burned CPU"
    named = [e["runtime"] for e in entries if e.get("runtime")]
    assert not named, f"pylinked (libpython {version}, no interpreter) has runtime {named[0]!r}"
    # (a line naming the pid as python3 is of pytest's child before its
    # exec of pylinked: that was CPython, and perfd was right to say so)
    said = [line for line in log_lines(perfd_verbose, w.pid, since)
            if "CPython" in line and f"pid {w.pid} (pylinked)" in line]
    assert not said, f"the daemon logged a runtime for pylinked: {said}"
    assert control is not None and control.get("runtime") == runtime, \
        f"python3.11 beside it: ps --json says {control}, expected runtime {runtime!r}"


def test_python_caught_at_exec_is_logged_under_its_new_name(perfd_verbose, workloads):
    """A sh that burns CPU and execs a bash that burns CPU and execs
    CPython 3.13, all while the daemon is stopped, so that it reads the
    process's first samples and both exec records only after the last exec:
    the daemon's lines about the process name it by its comm after the last
    exec, never "bash", and say that its Python frames are walked; `ps`
    names its runtime.  Two execs, each after samples, because the record
    of the first (the process known from sh's samples, its maps read) names
    "bash" while /proc already shows CPython's maps."""
    interp = perfdtest.pyenv_python(13)
    assert interp, "CPython 3.13 is not installed under pyenv"
    burn = 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'
    prelude = f'{burn}; exec "$0" "$@"'
    # BPF keeps sampling into the ring buffer (8 MiB: seconds of samples)
    # while the daemon is stopped.
    since = len(perfd_verbose.stderr())
    perfd_verbose.proc.send_signal(signal.SIGSTOP)
    try:
        w = workloads("bash", command=["/bin/sh", "-c", f'{burn}; exec /bin/bash -c "$0" "$@"',
                                       prelude, interp, SPLIT, "1"])
        runtime, _ = ready_version(w)
    finally:
        perfd_verbose.proc.send_signal(signal.SIGCONT)
    comm = process_comm(w.pid)
    entry = poll_runtime(perfd_verbose, w)
    w.finish()

    lines = log_lines(perfd_verbose, w.pid, since)
    assert lines, f"the daemon logged nothing about pid {w.pid}"
    stale = [line for line in lines if f"pid {w.pid} (bash)" in line]
    assert not stale, f"logged under its name before the exec: {stale}"
    walked = [line for line in lines if f"pid {w.pid} ({comm}): CPython 3.13" in line and
              "Python frames on" in line]
    assert walked, f"no line says pid {w.pid} ({comm}) has its Python frames walked: {lines}"
    assert entry is not None and entry.get("runtime") == runtime, \
        f"ps --json says {entry}, expected runtime {runtime!r}"


# --- processes older than the daemon --------------------------------------------

def test_python_started_before_perfd_is_walked(workloads):
    """Interpreters that were running before perfd started (no exec for
    perfd to see) are detected on their first samples: once ps names their
    runtime, their stacks hold their Python frames.  Three interpreters
    (the oldest and newest pyenv has, Debian's) keep the CPUs from being
    crowded while the new daemon starts."""
    installed = [p.values[0] for p in SUPPORTED if p.values[0] is not None]
    interps = [i for i in installed if i.pyenv][:1] + [i for i in installed if i.pyenv][-1:]
    interps = list(dict.fromkeys(interps)) + [i for i in installed if not i.pyenv]
    running = []
    for interp in interps:
        # 30 CPU-s is more than the test's life at a share of the CPUs; the
        # workloads fixture kills them, and the limit bounds a stray one.
        w = start_python(workloads, interp, SPLIT, 30)
        running.append((interp, w, ready_version(w)[0], process_comm(w.pid)))
    daemon = perfdtest.start_perfd(frequency=FAST_HZ)
    snaps = []
    try:
        deadline = time.monotonic() + 20
        for interp, w, runtime, _ in running:
            entry = None
            while time.monotonic() < deadline:
                entry = perfdtest.ps_process(daemon, w.pid)
                if entry is not None and entry.get("runtime"):
                    break
                time.sleep(0.1)
            assert entry is not None and entry.get("runtime") == runtime, \
                f"{interp.label}: ps --json says {entry}, expected runtime {runtime!r}"
        # All at once: each gets 2/3 of a CPU (on two) for 2 s.
        snaps = [BackgroundSnapshot(daemon, w.pid, duration=2) for _, w, _, _ in running]
        for (interp, w, _, comm), snap in zip(running, snaps):
            stacks, _, _ = snap.result(comm)
            n = total(stacks)
            walked = count(stacks, lambda s: [q for q, _ in script_frames(s, SPLIT)][:2] ==
                           ["<module>", "main"])
            # n is ~1300 on two idle CPUs; the work is all under <module> -> main.
            assert n >= 100 and walked >= 0.9 * n, \
                f"{interp.label}: {walked} of {n} samples hold split.py's <module> -> main" \
                f"\n{show(stacks)}"
    except BaseException:
        for snap in snaps:
            snap.kill()
        daemon.kill()
        raise
    daemon.stop()
