"""Binaries a user controls cannot exhaust or poison the daemon's table of
modules (issue 27).

perfd keeps one module per binary file a sampled process maps, with a
descriptor to read its symbols and unwind tables from.  Each test plays a
local user (`nobody`) against a daemon of its own:

- many small executables: nobody maps 20,000 distinct small ELF files
  (copies of a tiny shared object, each with other contents) and runs code
  in them while sampled.  perfd's descriptors stay under the documented
  caps (--max-module-fds, plus the unwind builds queued), `status` from root
  answers within STATUS_DEADLINE every time and within STATUS_BUDGET (100
  ms) nine times in ten while the files are mapped and read (the maps of
  20,000 lines are read on a lane, perfd's loop reads only their start),
  and, with --max-modules below the files' count, the ids are given back
  once the process is gone: a new process started afterwards is named
  from its own symbols;
- one user's share: while nobody maps more files than --max-modules and
  keeps them mapped, root starts a binary: it gets a module and is named
  (nobody holds at most three quarters of the table);
- a poisoned build-id: nobody runs a modified copy of a binary (the same
  .note.gnu.build-id, other function names) first; the real binary, run by
  root afterwards, is named from its own file, never the copy's.
"""

import os
import select
import shutil
import time

import pytest

import perfdtest
from perfdtest import status_within_deadline
from test_auth import User, reachable_path_fixes

FILES = 20000
BATCH = 500
MAX_MODULES = 1024
MAX_MODULE_FDS = 128
# descriptors perfd may hold beyond those of modules and unwind builds:
# clients, the notify socket, a few being read at any moment
FD_SLACK = 32


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def named_while_running(daemon, w, ready=True):
    """Snapshots workload w for 2 s (once it says "ready", if it does) and
    lets it finish; returns the function names of its stacks, and the
    stacks to show when an assertion fails."""
    try:
        if ready:
            w.expect_line("ready")
        stacks, _ = perfdtest.snapshot_workload(daemon, w, duration=2)
        w.finish()
    finally:
        w.kill()
    return {f for s in stacks for f in perfdtest.functions(s)}, stacks


@pytest.fixture
def nobody_manymaps(tmp_path):
    """argv(files, batch, burn_ms): the command line of `manymaps` run as
    nobody, mapping that many copies of a tiny shared object into a
    directory of its own; removed, and the paths made reachable put back,
    after the test."""
    nobody = User("nobody")
    maps_dir = tmp_path / "maps"
    maps_dir.mkdir()
    os.chown(maps_dir, nobody.uid, nobody.gid)
    template = perfdtest.workload_binary("libtiny.so")
    fixed = reachable_path_fixes([str(maps_dir), perfdtest.workload_binary("manymaps"), template])
    yield lambda files, batch, burn_ms: nobody.argv(
        perfdtest.workload_binary("manymaps"), template, maps_dir, files, batch, burn_ms)
    for d, mode in fixed:
        os.chmod(d, mode)
    shutil.rmtree(maps_dir, ignore_errors=True)


def test_many_small_executables(nobody_manymaps):
    daemon = perfdtest.start_perfd(extra_args=("--max-modules", str(MAX_MODULES),
                                               "--max-module-fds", str(MAX_MODULE_FDS)))
    w = None
    try:
        limits = status_within_deadline(daemon)[1]["limits"]
        assert limits["max_module_fds"] == MAX_MODULE_FDS
        assert limits["max_modules"] == MAX_MODULES
        cap = fd_count(daemon.pid) + MAX_MODULE_FDS + limits["max_unwind_builds_queued"] + FD_SLACK
        w = perfdtest.Workload("manymaps", command=nobody_manymaps(FILES, BATCH, 20))
        took, most_fds, mapped = [], 0, False
        deadline = time.monotonic() + 600
        while not mapped:
            assert time.monotonic() < deadline, "manymaps did not map its files in 10 minutes"
            assert w.proc.poll() is None, f"manymaps ended: {w.proc.communicate()[1]!r}"
            assert daemon.alive(), daemon.stderr()[-4000:]
            took.append(status_within_deadline(daemon)[0])
            most_fds = max(most_fds, fd_count(daemon.pid))
            if select.select([w.proc.stdout], [], [], 0.2)[0]:
                w.expect_line("mapped")
                mapped = True
        # a few more samples with all of them mapped
        for _ in range(10):
            took.append(status_within_deadline(daemon)[0])
            most_fds = max(most_fds, fd_count(daemon.pid))
            time.sleep(0.2)
        answer = status_within_deadline(daemon)[1]
        syms, maps = answer["symbols"], answer["processes"]["maps"]
        print(f"\n{FILES} files: status {perfdtest.status_figures(took)}, most fds {most_fds} "
              f"(cap {cap}), modules {syms['modules']}, refused {syms['modules_refused']}, "
              f"fds evicted {syms['module_fds_evicted']}, reopened {syms['module_fds_reopened']}; "
              f"maps read on the lane {maps['reads_offloaded']}, samples that waited for them "
              f"{maps['samples_waited']}")
        perfdtest.assert_status_budget(took)
        assert maps["reads_offloaded"] > 0, "20,000 lines of maps were read on the loop"
        assert most_fds <= cap, f"perfd held {most_fds} descriptors, more than {cap}"
        assert syms["module_fds_open"] <= MAX_MODULE_FDS
        assert syms["modules"] <= MAX_MODULES
        assert syms["modules_refused"] > 0, "the table should have been full while it ran"
        w.kill()
        w = None

        # once it is gone its ids are given back: a new process is named
        deadline = time.monotonic() + 30
        while status_within_deadline(daemon)[1]["symbols"]["modules"] > MAX_MODULES // 2:
            assert time.monotonic() < deadline, "the module ids were not given back"
            time.sleep(0.5)
        syms = status_within_deadline(daemon)[1]["symbols"]
        print(f"after it: modules {syms['modules']}, released {syms['modules_released']}")
        names, stacks = named_while_running(daemon, perfdtest.Workload("spin", "2", "0.5"),
                                            ready=False)
        assert "spin_burn" in names, f"spin was not named: {perfdtest.show(stacks)}"
        took.append(status_within_deadline(daemon)[0])
        print(f"status overall: {perfdtest.status_figures(took)}")
        assert daemon.alive(), daemon.stderr()[-4000:]
    finally:
        if w:
            w.kill()
        daemon.stop()


def test_poisoned_build_id_copy_lends_nothing(tmp_path):
    nobody = User("nobody")
    poison = tmp_path / "twin"
    shutil.copy(perfdtest.workload_binary("twin-poison"), poison)
    os.chmod(tmp_path, 0o755)
    fixed = reachable_path_fixes([str(poison)])
    daemon = perfdtest.start_perfd()
    try:
        # the copy first, as nobody: its module and symbols come first
        names, stacks = named_while_running(
            daemon, perfdtest.Workload("twin", command=nobody.argv(poison, "1.5", "0.3")))
        assert "poisond_hot_loop" in names, perfdtest.show(stacks)

        names, stacks = named_while_running(daemon,
                                            perfdtest.Workload("twin-genuine", "1.5", "0.3"))
        assert "poisond_hot_loop" not in names, \
            f"the real binary was named from the copy: {perfdtest.show(stacks)}"
        assert "genuine_hot_loop" in names, perfdtest.show(stacks)
    finally:
        daemon.stop()
        for d, mode in fixed:
            os.chmod(d, mode)


SHARE_FILES = 3000
SHARE_BATCH = 150
# nobody's share (three quarters) is well under SHARE_FILES, and the
# quarter left has room for what the host's other processes map meanwhile
SHARE_MAX_MODULES = 2048


def test_another_users_binary_gets_a_module_while_one_user_fills_the_table(nobody_manymaps):
    """nobody maps more small executables than --max-modules and keeps them
    mapped; meanwhile root starts a binary of its own: it gets a module and
    is named, as nobody holds at most its share of the table (three
    quarters) and its further files are refused and counted."""
    daemon = perfdtest.start_perfd(extra_args=("--max-modules", str(SHARE_MAX_MODULES)))
    w = None
    try:
        w = perfdtest.Workload("manymaps",
                               command=nobody_manymaps(SHARE_FILES, SHARE_BATCH, 50))
        w.expect_line("mapped", timeout=600)
        # nobody's new files were refused: it holds what it may
        deadline = time.monotonic() + 30
        while (syms := status_within_deadline(daemon)[1]["symbols"])["modules_refused"] == 0:
            assert time.monotonic() < deadline, f"nobody's files were never refused: {syms}"
            time.sleep(0.5)
        names, stacks = named_while_running(daemon, perfdtest.Workload("spin", "2", "0.5"),
                                            ready=False)
        syms = status_within_deadline(daemon)[1]["symbols"]
        print(f"\n{SHARE_FILES} files of nobody, --max-modules {SHARE_MAX_MODULES}: modules "
              f"{syms['modules']}, refused {syms['modules_refused']} (past nobody's share "
              f"{syms.get('modules_refused_share')})")
        assert w.proc.poll() is None, "manymaps ended before root's binary ran"
        assert "spin_burn" in names, \
            f"root's binary was not named while nobody held the table: {perfdtest.show(stacks)}"
        assert syms["modules_refused_share"] > 0, syms
    finally:
        if w:
            w.kill()
        daemon.stop()
