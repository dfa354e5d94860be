"""Table unwinding: user stacks of code built without frame pointers are
walked in BPF with the binaries' .eh_frame, to main and on to the process
or thread entry.

The workloads are built like distribution code (-O2 -fomit-frame-pointer),
and Debian's /usr/bin/python3.11 is the real thing.  Each runs for a fixed
number of CPU seconds under the 999 Hz daemon, so the shares asserted below
rest on thousands of samples; the tolerance next to each assert says how
many standard deviations it leaves.
"""

import os
import resource
import subprocess
import time

import perfdtest
from perfdtest import (contains, count_where, function, functions, is_kernel, parse_folded, show,
                       snapshot_workload, total, unwind_pending)

PYTHON311 = "/usr/bin/python3.11"


def user_root(stack):
    """The outermost frame of a stack: its first element after comm."""
    return functions(stack)[0]


def test_no_frame_pointer_code_unwinds_to_process_entry(perfd_fast, workloads):
    """nofp is -O2 -fomit-frame-pointer, and so is the library its hot
    function lives in: every sample must unwind through the library, back
    into the executable, to main and to _start; and the 3:1 split between
    lib_hot_three_quarters and exe_cold_one_quarter must hold."""
    w = workloads("nofp", 6)
    stacks, _ = snapshot_workload(perfd_fast, w)
    w.finish()

    n = total(stacks)
    # 6 CPU-s at 999 Hz: ~6000 samples.  Fewer than 4000 means lost samples.
    assert n >= 4000, f"only {n} samples\n{show(stacks)}"
    complete = count_where(stacks, lambda s: user_root(s) == "_start" and
                           "main" in functions(s) and "__libc_start_main" in functions(s))
    # The bar: 98% of the samples taken with the tables ready (those
    # from before are flagged, and few).  Only process start-up and exit (a
    # few samples in ld.so before main) may miss main.
    tabled = n - unwind_pending(stacks)
    assert complete >= 0.98 * tabled, \
        f"only {complete} of {tabled} samples ({complete / tabled:.1%}) unwind to _start via " \
        f"main\n{show(stacks)}"

    hot = count_where(stacks, contains("lib_hot_three_quarters"))
    cold = count_where(stacks, contains("exe_cold_one_quarter"))
    chains = (["stage_inner", "lib_stage", "lib_hot_three_quarters", "lib_work_units"],
              ["stage_inner", "lib_stage", "exe_cold_one_quarter", "lib_work_units"])
    through = count_where(stacks, lambda s: [function(f) for f in s[1:]
                                             if not is_kernel(f)][-4:] in chains)
    share = hot / (hot + cold)
    # Truth: 0.75 by construction (perf --call-graph dwarf measures 0.751).
    # 2 points is >= 3 sd for n >= 4200 (sd = sqrt(.1875 / n)).
    assert abs(share - 0.75) <= 0.02, \
        f"hot share {share:.3f} ({hot}:{cold}), expected 0.75 +- 0.02\n{show(stacks)}"
    assert through >= 0.95 * n, \
        f"only {through} of {n} samples end stage_inner -> lib_stage -> caller -> leaf\n" \
        f"{show(stacks)}"


def test_a_stack_many_pages_deep_unwinds_frame_by_frame(perfd_fast, workloads):
    """bigframes recurses 48 frames of ~640 bytes (no frame pointers), so
    its stack spans about 30 KiB: the unwinder reads it page after page,
    through frames that straddle page boundaries (unwind.bpf.h, "Reading
    the stack").  Every sample of its leaf must hold exactly 48 descend
    frames between main and burn_leaf, and reach _start: one misread word
    on any page ends or bends the walk there."""
    w = workloads("bigframes", 3)
    stacks, _ = snapshot_workload(perfd_fast, w)
    w.finish()

    leaf = {s: c for s, c in stacks.items() if "burn_leaf" in functions(s)}
    m = total(leaf)
    # 3 CPU-s at 999 Hz: ~3000 samples, nearly all in the leaf
    assert m >= 0.8 * total(stacks) and m >= 2000, f"only {m} samples in burn_leaf\n{show(stacks)}"

    def whole(s):
        fs = [f for f in functions(s) if not is_kernel(f)]
        return (fs[0] == "_start" and "main" in fs and fs.index("burn_leaf") > fs.index("main") and
                fs[fs.index("main") + 1:fs.index("burn_leaf")] == ["descend"] * 48)
    tabled = m - unwind_pending(leaf)
    complete = count_where(leaf, whole)
    # as for nofp: only samples from before the tables were ready may miss
    assert complete >= 0.98 * tabled, \
        f"only {complete} of {tabled} leaf samples hold _start, main and 48 descend frames\n{show(leaf)}"


def test_frame_pointer_shortcut_stops_where_frame_pointers_do(perfd_fast, workloads):
    """fpmix keeps frame pointers; perfd walks its callers by them without
    a row search (bpf/unwind.bpf.h, "Frames in code that keeps frame
    pointers"), which the status counts.  Its library keeps none, and while
    it calls back into the executable its rbp points at a decoy frame: a
    walk that took the shortcut through it would end at fpmix_decoy.  Every
    sample of the leaf must hold, from _start, main, 20 outer, fpmix_hop,
    inner_start, 19 inner and leaf, and none may hold the decoy.  Counted
    once the tables are ready (a short snapshot has a whole stack): before,
    every frame is walked by frame pointer, into the decoy, on purpose."""

    def whole(s):
        fs = [f for f in functions(s) if not is_kernel(f)]
        if fs[0] != "_start" or "main" not in fs or "leaf" not in fs:
            return False
        return fs[fs.index("main"):fs.index("leaf") + 1] == \
            ["main"] + ["outer"] * 20 + ["fpmix_hop", "inner_start"] + ["inner"] * 19 + ["leaf"]

    w = workloads("fpmix", 5)
    seen = {}
    for _ in range(25):
        rc, out, err = perfd_fast.perfctl("snapshot", "--pid", str(w.pid), "--duration", "0.2")
        stacks = parse_folded(out) if rc == 0 else {}
        for s, c in stacks.items():
            seen[s] = seen.get(s, 0) + c
        if count_where(stacks, whole):
            break
    else:
        raise AssertionError(f"no whole stack of fpmix in 25 snapshots of 0.2 s\n{show(seen)}")
    before = perfd_fast.status()["unwind"]["frames_by_frame_pointer"]
    stacks, _ = snapshot_workload(perfd_fast, w, duration=3)
    by_fp = perfd_fast.status()["unwind"]["frames_by_frame_pointer"] - before
    w.finish()

    leaf = {s: c for s, c in stacks.items() if "leaf" in functions(s)}
    m = total(leaf)
    # 3 s of one busy thread at 999 Hz: ~3000 samples (a loaded machine
    # gives it less), nearly all under leaf
    assert m >= 0.8 * total(stacks) and m >= 1500, f"only {m} samples under leaf\n{show(stacks)}"
    decoyed = count_where(stacks, contains("fpmix_decoy"))
    assert decoyed == 0, f"{decoyed} samples walked into the decoy frame\n{show(stacks)}"
    complete = count_where(leaf, whole)
    # a sample cut by a read of the stack that failed may miss
    assert complete >= 0.99 * m, \
        f"only {complete} of {m} leaf samples hold the whole chain\n{show(leaf)}"
    # 38 of each sample's frames have their caller in fpmix's
    # frame-pointer code (20 inner: 19 of them and inner_start; 18 of the
    # 20 outer, main's caller in libc, fpmix_hop's in the library); most
    # samples are in the vDSO's clock_gettime or leaf, which take rows.
    assert by_fp >= 30 * complete, \
        f"{by_fp} frames by frame pointer for {complete} whole samples: the shortcut is not taken"


def test_thread_stacks_reach_thread_entry(perfd_fast, workloads):
    """Each thread of a -fomit-frame-pointer program unwinds to its own
    function and on through libc's thread entry (start_thread, then clone3:
    two libc frames at the root, the outermost one the same in 98% of the
    samples: only those before perfd has read the maps may differ)."""
    w = workloads("threads", 3)
    stacks, _ = snapshot_workload(perfd_fast, w)
    w.finish()

    n = total(stacks)
    assert n >= 4000, f"only {n} samples\n{show(stacks)}"
    for name in ("thread_alpha", "thread_beta"):
        mine = {s: c for s, c in stacks.items() if name in functions(s)}
        m = total(mine)
        # each thread burns 3 CPU-s: ~3000 samples; 40% leaves room for a
        # loaded machine, not for a missing thread
        assert m >= 0.4 * n, f"{name}: {m} of {n} samples\n{show(stacks)}"
        rooted = count_where(mine, lambda s: functions(s)[2] == name and
                             all("libc.so" in f or f in ("start_thread", "clone3", "__clone3")
                                 for f in functions(s)[:2]))
        assert rooted >= 0.98 * m, \
            f"{name}: only {rooted} of {m} samples sit on two libc entry frames\n{show(mine)}"
        # The outermost frame is clone3's, the same in every sample but the
        # few taken before perfd has read the process's maps (frame pointers).
        roots = {}
        for s, c in mine.items():
            roots[user_root(s)] = roots.get(user_root(s), 0) + c
        top = max(roots, key=roots.get)
        assert roots[top] >= 0.98 * m, f"{name}: outermost frames {roots}\n{show(mine)}"


def test_debian_python_unwinds_to_main(perfd_fast, workloads):
    """Debian's python3.11 has no frame pointers: with its .eh_frame, 95% of
    the samples reach Py_BytesMain (and main, _start above it), through the
    interpreter loop: the script's Python frames, which stand where the
    native _PyEval_EvalFrameDefault frames were."""
    script = os.path.join(perfdtest.REPO, "tests", "workloads", "cpu_bound.py")
    w = workloads("python3.11", command=[PYTHON311, script, "5"])
    stacks, _ = snapshot_workload(perfd_fast, w)
    w.finish()

    n = total(stacks)
    assert n >= 3500, f"only {n} samples from 5 CPU-s\n{show(stacks)}"
    in_script = f" ({script}:"
    reach = count_where(stacks, lambda s: "Py_BytesMain" in functions(s) and
                        any(in_script in f for f in functions(s)))
    tabled = n - unwind_pending(stacks)
    assert reach >= 0.95 * tabled, \
        f"only {reach} of {tabled} samples ({reach / tabled:.1%}) reach Py_BytesMain through " \
        f"the Python frames of {script}\n{show(stacks)}"



LOADER = "/lib64/ld-linux-x86-64.so.2"
TRUNCATED = "[truncated]"


def run_short(daemon, argv, comm, runs):
    """Runs argv to its end runs times, one after the other, then snapshots
    comm over that time: (stacks, CPU-seconds the runs used).  Asserts at
    least 3/4 of the samples that CPU time is worth at the daemon's rate
    (jittered sampling makes the count exact but for the runs' fork and exec,
    charged to their parent's name: 0.99-1.01 measured; a snapshot that left
    out the second in progress got 0.46-1.00)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    for _ in range(runs):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    since = int(time.monotonic() - start) + 2
    rc, out, err = daemon.perfctl("snapshot", "--comm", comm, "--since", f"{since}s")
    assert rc == 0, f"perfctl snapshot exited {rc}\nstderr: {err}"
    stacks = parse_folded(out)
    n = total(stacks)
    assert n >= 0.75 * cpu * perfdtest.FAST_HZ, \
        f"only {n} samples of {runs} runs of {comm} ({cpu:.2f} CPU-s)\n{show(stacks)}"
    return stacks, cpu


def test_short_processes_stacks_are_whole_or_say_they_were_cut(perfd_fast):
    """Debian's python3.11 (no frame pointers, nor in its libc) run 60
    times for ~25 ms of CPU: the first milliseconds of each run are over
    before perfd has its tables, and those samples are walked by the
    kernel's frame-pointer walk, which stops or wanders off in such code
    without saying so ("python3.11;setlocale;..." was 8-10% of the
    samples).  Every sample must reach a process's root (_start, or the
    loader's entry while ld.so runs) or be rooted at a marker."""
    with open(LOADER, "rb") as f:
        loader_entry = int.from_bytes(f.read(32)[24:32], "little")  # e_entry

    def rooted(s):
        frames = s[1:]
        user = [f for f in frames if not is_kernel(f)]
        # (all "[unknown]": the process was gone before perfd read its maps)
        if not frames or is_kernel(frames[0]) or set(user) == {"[unknown]"}:
            return True
        root = frames[0]
        if root in (perfdtest.UNWIND_PENDING, TRUNCATED, "[context switch]") or \
                function(root) == "_start":
            return True
        # the loader has no symbol for its entry: "ld-linux-x86-64.so.2+0x1ab77"
        module, _, offset = root.partition("+0x")
        return module == os.path.basename(os.path.realpath(LOADER)) and offset != "" and \
            0 <= int(offset, 16) - loader_entry < 64

    before = perfd_fast.status()["unwind"]["stacks_unrooted_before_tables"]
    stacks, _ = run_short(perfd_fast, [PYTHON311, "-c", "sum(range(300000))"], "python3.11", 60)
    # (below the GIL's state, where Python's runtime was found)
    stacks = {perfdtest.without_gil(s): c for s, c in stacks.items()}
    bare = {s: c for s, c in stacks.items() if not rooted(s)}
    assert not bare, f"{total(bare)} of {total(stacks)} samples neither reach a root nor say " \
        f"they were cut\n{show(bare)}"
    cut = count_where(stacks, lambda s: s[1:2] == (TRUNCATED,))
    assert cut > 0, f"no sample was cut: the test tests nothing\n{show(stacks)}"
    assert perfd_fast.status()["unwind"]["stacks_unrooted_before_tables"] > before


def test_a_walk_to_the_entry_before_tables_is_whole(perfd_fast):
    """entry (its own _start, frame pointers throughout, no libc) run 40
    times for ~30 ms: the samples walked before perfd has its tables reach
    _start by frame pointers, and must not be marked cut.  A walk that
    stopped short of _start must be, and must be rare: from entry_main's
    first two instructions, where rbp is still _start's zero, a
    frame-pointer walk finds no caller (CI once had 2 of 959 samples read
    [truncated];entry_main: rightly marked, whatever stopped them).  (Where its table is still
    being built, frame pointers are a guess: those samples may be rooted
    at [unwind table pending].)"""
    stacks, _ = run_short(perfd_fast, [perfdtest.workload_binary("entry")], "entry", 40)
    chain = ["_start", "entry_main", "spin"]

    def user_frames(s):
        return [function(f) for f in s[1:] if not is_kernel(f) and f != TRUNCATED]

    def whole(s):
        user = user_frames(s)
        # not entry's code: the process was gone before perfd read its
        # maps ("[unknown]"), or was caught before its exec was done, in
        # the Python that forked it
        if not set(user) & set(chain):
            return True
        # (just _start, or _start;entry_main: a tick between the calls)
        if s[1] in (perfdtest.UNWIND_PENDING, "[context switch]"):
            return True
        # marked cut: only a walk that did not reach _start, of entry's
        # own frames, callee below caller
        if s[1] == TRUNCATED:
            return user[0] != "_start" and \
                any(chain[i:i + len(user)] == user for i in range(len(chain)))
        return user == chain[:len(user)]
    wrong = {s: c for s, c in stacks.items() if not whole(s)}
    assert not wrong, f"{total(wrong)} of {total(stacks)} samples do not read " \
        f"{';'.join(chain)}\n{show(wrong)}"
    # a walk that stopped short of _start is a prologue's: ~0.2% of the
    # samples (10 of ~1000 is 5 standard deviations above)
    short = count_where(stacks, lambda s: s[1] == TRUNCATED and set(user_frames(s)) & set(chain))
    assert short <= 0.01 * total(stacks), \
        f"{short} of {total(stacks)} walks stopped short of _start\n{show(stacks)}"
