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
  root afterwards, is named from its own file, never the copy's;
- a FUSE server that stops answering: a process runs code from a shared
  object on a FUSE mount (hangfs.py) whose server hangs every request just
  before that code first runs, so perfd meets the new mapping while any
  stat() or read of the file blocks.  `status` from root answers within
  STATUS_BUDGET throughout (the file is identified off the loop, the
  samples in it wait at most a second for that), and once the server
  answers again the code is named from the file's own symbols; and the
  same when the file is opened again (the LRU closed its descriptor) to
  be named while the server hangs: a symbol lane asks, not the loop; and
  when Python's detection reads the files of a new CPython process (its
  executable on the server) while it hangs: the Python lane asks; and when
  perfd looks for the perf map of a JIT whose /tmp is on the server: a maps
  lane asks; and when the LRU closes the file's descriptor while it hangs
  (FUSE has a close wait for the server): a symbol lane closes it.
"""

import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

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


def test_module_descriptors_keep_to_half_the_descriptor_limit(environment):
    """Under a descriptor limit of 256, --max-module-fds 4096 would let
    binaries hold every descriptor perfd has (and then accept() and every
    read on a process's behalf fail with EMFILE): perfd keeps them to half
    the limit, says so, and status shows the cap it runs with."""
    d = perfdtest.start_perfd(extra_args=["--max-module-fds", "4096"],
                              wrapper=["prlimit", "--nofile=256:256"])
    try:
        limit = d.status()["limits"]["max_module_fds"]
        assert limit == 128, f"max_module_fds {limit} under RLIMIT_NOFILE 256"
        assert "--max-module-fds 4096 is more than half of the 256 descriptors" in d.stderr(), \
            d.stderr()[-3000:]
    finally:
        d.stop()


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


# --- a FUSE server that stops answering -------------------------------------

HANGFS = Path(__file__).with_name("hangfs.py")
# Debian's, whose python3-fusepy hangfs.py imports (make deps-test); the
# workload runs on it too, for its ctypes
DEBIAN_PYTHON = "/usr/bin/python3"
FUSE_NAME = "libtiny-fuse.so"
# How long the server hangs while the workload runs in its file: several
# times the second perfd waits for a probe before it gives up on it
HANG_SECONDS = 4.0
# The workload runs its file's code until killed; after the hang perfd
# identifies the file at its next read of the maps, at most
# MAPS_REREAD_MAX_NS (8 s) after it gave up on the hung one
NAMED_WITHIN = 15.0

# Imports ctypes and waits (perfd reads its maps at exec, and again after
# any sample in a library it had not seen), maps the file, brings every page
# of it into memory and its page tables (running its code later asks nothing
# of the server), says "ready", waits for SIGUSR1 and runs tiny_burn until
# killed.
# Maps the file at path, brings every page of it into memory and its page
# tables (running its code later asks nothing of the server): burn is its
# tiny_burn.
MAP_FUSE_FILE = r"""
lib = ctypes.CDLL(path)
size = os.path.getsize(path)
for line in open("/proc/self/maps"):
    f = line.split()
    if len(f) >= 6 and f[5] == path:
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        for off in range(0, hi - lo, 4096):
            if int(f[2], 16) + off < size:
                ctypes.string_at(lo + off, 1)
burn = lib.tiny_burn
burn.argtypes = [ctypes.c_ulong]
"""

FUSE_WORKLOAD = r"""
import ctypes, os, signal, sys, time
path = sys.argv[1]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
time.sleep(0.5)
""" + MAP_FUSE_FILE + r"""
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
while True:
    burn(10000000)
"""


class HangFS:
    """hangfs.py serving a copy of source (libtiny.so by default; live: as
    it is at each request) as name on a mount point of its own, and its hang
    switch: a file beside the mount."""

    def __init__(self, tmp_path, name=FUSE_NAME, source=None, live=False):
        assert os.path.exists("/dev/fuse"), "no /dev/fuse: the kernel has no FUSE"
        self.mountpoint = tmp_path / "mnt"
        self.mountpoint.mkdir()
        self.path = str(self.mountpoint / name)
        self.hang_file = tmp_path / "hang"
        self.log_file = tmp_path / "hangfs.log"
        self.log_file.touch()
        self.proc = subprocess.Popen(
            [DEBIAN_PYTHON, str(HANGFS), str(self.mountpoint),
             source or perfdtest.workload_binary("libtiny.so"), name, str(self.hang_file),
             str(self.log_file)] + (["live"] if live else []),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if not select.select([self.proc.stdout], [], [], 10)[0] or \
                self.proc.stdout.readline() != b"mounted\n":
            self.close()
            raise AssertionError(f"hangfs.py did not mount (python3-fusepy and fuse3: make "
                                 f"deps-test): {self.proc.stderr.read().decode(errors='replace')}")

    def hang(self):
        self.hang_file.touch()

    def release(self):
        self.hang_file.unlink(missing_ok=True)

    def askers(self):
        """The threads that asked while the server hung."""
        return {int(line.split()[1]) for line in self.log_file.read_text().splitlines()}

    def close(self):
        """Releases whoever waits, detaches the mount and ends the server
        (which fails what it had not answered yet)."""
        self.release()
        subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def hangfs(tmp_path):
    fs = HangFS(tmp_path)
    yield fs
    fs.close()


def threads_of(pid):
    return {int(t): Path(f"/proc/{pid}/task/{t}/comm").read_text().strip()
            for t in os.listdir(f"/proc/{pid}/task")}


@contextlib.contextmanager
def hung_server(hangfs, daemon):
    """Runs a test's body against daemon and hangfs: the body calls the
    yielded hang() to hang the server, which a timer releases HANG_SECONDS
    later whatever the body is doing then (a daemon whose loop waits for
    the server, and eu-stack, which status_within_deadline runs to say
    where, waiting for that daemon to stop, hold the test no longer);
    hang() returns when it hung and the timer.  The workloads the body
    appends to the yielded list are killed at the end; the daemon is
    stopped cleanly, or killed when the body failed."""
    workloads, timers = [], []

    def hang():
        timers.append(threading.Timer(HANG_SECONDS, hangfs.release))
        hangfs.hang()
        timers[-1].start()
        return time.monotonic(), timers[-1]
    try:
        yield hang, workloads
    except BaseException:
        hangfs.release()
        daemon.kill()
        raise
    finally:
        for timer in timers:
            timer.cancel()
        hangfs.release()
        for w in workloads:
            w.kill()
    daemon.stop()


# What a thread waiting on the hung server shows in its kernel stack: its
# own request, or the lookup or page read another process (the session's
# other perfds profile the same workloads) sent first, which the kernel
# has it wait for rather than ask again.
WAITS_ON_SERVER = ("fuse_", "d_alloc_parallel", "folio_wait")


def waiting_on_server(pid):
    """pid's threads whose kernel stack waits on the server: {tid: name}."""
    waiting = {}
    for tid, name in threads_of(pid).items():
        try:
            stack = Path(f"/proc/{pid}/task/{tid}/stack").read_text()
        except OSError:
            continue
        if any(w in stack for w in WAITS_ON_SERVER):
            waiting[tid] = name
    return waiting


def watch_while_hung(daemon, fs, hang, start=lambda: None, describe=lambda status: ""):
    """Root's status once, then the server hung and start() called (what
    makes perfd ask it), then root's status every 50 ms until the hang
    ends.  Prints how long they took and describe(the last status), and
    asserts that perfd is alive and that each took at most STATUS_BUDGET;
    returns, once the hang is over, the last status and perfd's threads
    that asked the server or were seen waiting on it ({tid: name})."""
    took = [status_within_deadline(daemon)[0]]
    hung_at, timer = hang()
    start()
    waiting = {}
    while time.monotonic() < hung_at + HANG_SECONDS - 0.1:
        took.append(status_within_deadline(daemon)[0])
        waiting.update(waiting_on_server(daemon.pid))
        time.sleep(0.05)
    status = status_within_deadline(daemon)[1]
    perfd_threads = threads_of(daemon.pid)
    askers = {**waiting, **{t: perfd_threads[t] for t in fs.askers() if t in perfd_threads}}
    timer.join()
    print(f"\nstatus while the server hung: {perfdtest.status_figures(took)}; perfd's threads "
          f"that asked it: {askers} (its loop's: {daemon.pid}); {describe(status)}")
    assert daemon.alive(), daemon.stderr()[-4000:]
    perfdtest.assert_status_budget(took)
    return status, askers


def wait_named(daemon, w, *args):
    """Snapshots of w (snapshot --pid PID ARGS) until nine in ten of ten
    samples or more are in tiny_burn, which must be within NAMED_WITHIN of
    the server's answering again (just before the call)."""
    answered = time.monotonic()
    deadline = answered + NAMED_WITHIN
    seen = {}
    while True:
        assert w.proc.poll() is None, f"the workload ended: {w.proc.communicate()[1]!r}"
        rc, out, err = daemon.perfctl("snapshot", "--pid", str(w.pid), *args)
        assert rc == 0, err
        stacks = perfdtest.parse_folded(out)
        for s, c in stacks.items():
            seen[s] = seen.get(s, 0) + c
        named = perfdtest.count_where(stacks, perfdtest.contains("tiny_burn"))
        if perfdtest.total(stacks) >= 10 and named >= 0.9 * perfdtest.total(stacks):
            break
        assert time.monotonic() < deadline, \
            f"tiny_burn was not named {NAMED_WITHIN:.0f} s after the server answered " \
            f"again:\n{perfdtest.show(seen)}"
        time.sleep(0.3)
    print(f"named {time.monotonic() - answered:.1f} s after the server "
          f"answered again")


def test_a_fuse_server_that_stops_answering_does_not_stop_the_loop(hangfs):
    """The workload maps a shared object from hangfs, the server hangs, and
    only then does the workload run code in it: perfd meets the mapping
    while stat() and reads of the file block.  Root's status answers within
    STATUS_BUDGET (assert_status_budget) all along, asked every 50 ms for
    HANG_SECONDS; a thread of perfd did ask the server (else the test proved
    nothing); once the server answers again the code is named tiny_burn,
    and the history from SIGUSR1 on holds a sample for every period the
    workload ran (those that waited for the probe went in when perfd gave
    up on it) and none in another module's code.  Off-CPU time is off:
    its stack of the workload waiting for SIGUSR1 would have perfd meet
    the mapping before the server hangs."""
    daemon = perfdtest.start_perfd(extra_args=["--no-offcpu"])
    with hung_server(hangfs, daemon) as (hang, workloads):
        w = perfdtest.Workload("python3", command=[DEBIAN_PYTHON, "-c", FUSE_WORKLOAD,
                                                   hangfs.path])
        workloads.append(w)
        w.expect_line("ready")
        go = {}

        def start():
            go.update(ticks=perfdtest.cpu_ticks(w.pid), at=time.time())
            w.proc.send_signal(signal.SIGUSR1)
        status, askers = watch_while_hung(daemon, hangfs, hang, start)
        ticks_at_go, go_at, probes = go["ticks"], go["at"], status["processes"]["maps"]
        assert askers, "perfd never asked the hung server anything: the test proved nothing"
        # the samples that waited for the hung probe went in after its wait
        assert probes["file_probes_late"] >= 1, probes

        # named from its own file once the server answers
        wait_named(daemon, w, "--duration", "0.5")

        # from SIGUSR1 on: a sample for every period it ran (those that
        # waited for the probe went in when perfd gave up on it), each in
        # tiny_burn or, while the file was not identified, in code of no
        # known module: none in another module's code
        cpu_seconds = (perfdtest.cpu_ticks(w.pid) - ticks_at_go) / os.sysconf("SC_CLK_TCK")
        end_at = time.time()
        w.kill()
        time.sleep(1.5)  # the last samples reach the store
        rc, out, err = daemon.perfctl("snapshot", "--pid", str(w.pid), "--from",
                                      f"{go_at:.3f}", "--to", f"{end_at:.3f}")
        assert rc == 0, err
        stacks = perfdtest.parse_folded(out)
        n = perfdtest.total(stacks)
        expected = cpu_seconds * 1e9 / status_within_deadline(daemon)[1]["sample_period_ns"]
        # (a tick in the kernel's exit path, after the process lost its
        # memory, has no user frames: the window's last second can hold
        # one from the kill)
        unnamed = perfdtest.count_where(stacks, lambda st: perfdtest.functions(
            [f for f in st if not perfdtest.is_kernel(f)])[-1:] == ["[unknown]"])
        named = perfdtest.count_where(stacks, perfdtest.contains("tiny_burn"))
        print(f"{n} samples over {cpu_seconds:.2f} CPU s ({expected:.0f} periods): tiny_burn "
              f"{named}, unnamed {unnamed}\n{perfdtest.show(stacks)}")
        assert 0.8 * expected <= n <= 1.2 * expected, \
            f"{n} samples for {cpu_seconds:.2f} CPU s, {expected:.0f} periods: " \
            f"{perfdtest.show(stacks)}"
        assert named + unnamed >= 0.9 * n, perfdtest.show(stacks)
        assert daemon.alive(), daemon.stderr()[-4000:]


# The LRU closed the descriptor of the file on the hung server; naming its
# code opens it again.  A small --max-module-fds, and more copies of
# libtiny.so than that, each a module of its own.  Not the least (16): perfd
# profiles the whole host, and there the workload's own modules (~15) left
# room for one or two of other processes', whose starting pushed the file
# out before the test hung the server (3 runs in 5 with a pyenv python
# started every 0.5 s beside them).
REOPEN_MAX_FDS = 64
REOPEN_COPIES = 80

# Maps the file on the server and runs its code a little (perfd meets it
# and keeps a descriptor), then maps REOPEN_COPIES copies from elsewhere
# and runs each (their descriptors push the first out), says "ready",
# waits for SIGUSR1 and runs the first file's tiny_burn until killed.
REOPEN_WORKLOAD = r"""
import ctypes, os, signal, sys, time
path, copies = sys.argv[1], sys.argv[2:]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
""" + MAP_FUSE_FILE + r"""
end = time.monotonic() + 0.5
while time.monotonic() < end:
    burn(1000000)
time.sleep(0.5)
for c in copies:
    other = ctypes.CDLL(c)
    other.tiny_burn.argtypes = [ctypes.c_ulong]
    end = time.monotonic() + 0.05
    while time.monotonic() < end:
        other.tiny_burn(100000)
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
while True:
    burn(10000000)
"""


def daemon_and_copies(tmp_path):
    """A perfd with --max-module-fds REOPEN_MAX_FDS, and REOPEN_COPIES
    copies of libtiny.so under tmp_path (each a module of its own)."""
    copies = []
    (tmp_path / "copies").mkdir()
    for i in range(REOPEN_COPIES):
        copies.append(str(tmp_path / "copies" / f"libtiny-{i}.so"))
        shutil.copy(perfdtest.workload_binary("libtiny.so"), copies[-1])
    daemon = perfdtest.start_perfd(extra_args=["--no-state", "--max-module-fds",
                                               str(REOPEN_MAX_FDS)])
    return daemon, copies


def start_ready(workloads, script, path, copies):
    """Debian's python3 running script on path and copies, appended to
    workloads, once it said "ready"."""
    w = perfdtest.Workload("python3", command=[DEBIAN_PYTHON, "-c", script, path, *copies])
    workloads.append(w)
    w.expect_line("ready", timeout=30)
    return w


def holds_file(pid, path):
    """Whether process pid has a descriptor of path open."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                return True
        except OSError:
            pass
    return False


def test_a_file_opened_again_on_a_hung_server_does_not_stop_the_loop(hangfs, tmp_path):
    """The LRU closed the descriptor of a shared object on hangfs (more
    files mapped since than --max-module-fds), its symbols were never
    loaded, and the server hangs: naming its code needs the file opened
    again.  That open is a symbol lane's (perfd-sym-N asks the server),
    root's status answers within STATUS_BUDGET all along, and once the
    server answers the code is named tiny_burn.  On the loop, that open
    held status for as long as the server hung (4487 ms)."""
    daemon, copies = daemon_and_copies(tmp_path)
    with hung_server(hangfs, daemon) as (hang, workloads):
        w = start_ready(workloads, REOPEN_WORKLOAD, hangfs.path, copies)
        deadline = time.monotonic() + 15
        while holds_file(daemon.pid, hangfs.path) or \
                status_within_deadline(daemon)[1]["symbols"]["module_fds_evicted"] == 0:
            assert time.monotonic() < deadline, \
                f"perfd still holds {hangfs.path} after {REOPEN_COPIES} more files"
            time.sleep(0.2)
        names = {}
        query = threading.Thread(target=lambda: names.update(
            result=daemon.perfctl("snapshot", "--pid", str(w.pid), "--since", "2s",
                                  timeout=60)))

        def start():
            w.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.3)  # samples of its code
            query.start()
        _, askers = watch_while_hung(
            daemon, hangfs, hang, start,
            lambda st: f"reopened {st['symbols']['module_fds_reopened']}, "
                       f"reopening {st['symbols'].get('module_fds_reopening')}")
        query.join(60)
        assert any(name.startswith("perfd-sym-") for name in askers.values()), \
            f"no symbol lane asked the hung server to open the file again: the test " \
            f"proved nothing (perfd's threads that asked: {askers})"
        assert names["result"][0] == 0, names["result"][2]
        wait_named(daemon, w, "--since", "1s")
        assert daemon.alive(), daemon.stderr()[-4000:]


# Maps the file on the server and runs its code a little (perfd meets it
# and keeps a descriptor), says "ready", waits for SIGUSR1, then maps
# REOPEN_COPIES copies from elsewhere and runs each until killed (their
# descriptors push the first out: perfd closes it, which the server answers).
EVICT_WORKLOAD = r"""
import ctypes, os, signal, sys, time
path, copies = sys.argv[1], sys.argv[2:]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
""" + MAP_FUSE_FILE + r"""
end = time.monotonic() + 0.5
while time.monotonic() < end:
    burn(1000000)
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
others = [ctypes.CDLL(c) for c in copies]
while True:
    for other in others:
        other.tiny_burn.argtypes = [ctypes.c_ulong]
        end = time.monotonic() + 0.02  # ~50 copies in 1 s: well inside the hang
        while time.monotonic() < end:
            other.tiny_burn(100000)
"""


def test_a_descriptor_closed_while_the_server_hangs_does_not_stop_the_loop(hangfs, tmp_path):
    """perfd holds a descriptor of a shared object on hangfs, the server
    hangs, and the process maps more files than --max-module-fds: the LRU
    closes that descriptor, and FUSE has the close wait for the server (a
    FLUSH).  A symbol lane closes it (perfd-sym-N asks the server), root's
    status answers within STATUS_BUDGET all along and counts it closing,
    and once the server answers it is closed."""
    daemon, copies = daemon_and_copies(tmp_path)
    with hung_server(hangfs, daemon) as (hang, workloads):
        w = start_ready(workloads, EVICT_WORKLOAD, hangfs.path, copies)
        deadline = time.monotonic() + 15
        while not holds_file(daemon.pid, hangfs.path):
            assert time.monotonic() < deadline, \
                f"perfd never opened {hangfs.path}, or closed it: " \
                f"{status_within_deadline(daemon)[1]['symbols']}"
            time.sleep(0.1)
        status, askers = watch_while_hung(
            daemon, hangfs, hang, lambda: w.proc.send_signal(signal.SIGUSR1),
            lambda st: f"evicted {st['symbols']['module_fds_evicted']}, "
                       f"closing {st['symbols']['module_fds_closing']}")
        syms = status["symbols"]
        assert syms["module_fds_evicted"] > 0, f"nothing was evicted: {syms}"
        assert any(name.startswith("perfd-sym-") for name in askers.values()), \
            f"no symbol lane asked the hung server to close the file: the test proved " \
            f"nothing (perfd's threads that asked: {askers})"
        assert syms["module_fds_closing"] >= 1, "status counted no close waiting for the server"
        deadline = time.monotonic() + NAMED_WITHIN
        while holds_file(daemon.pid, hangfs.path) or \
                status_within_deadline(daemon)[1]["symbols"]["module_fds_closing"]:
            assert time.monotonic() < deadline, \
                f"{hangfs.path} still open {NAMED_WITHIN:.0f} s after the server answered"
            time.sleep(0.2)


# A CPython whose executable is on the server (a copy of pyenv's 3.12
# python3.12, which finds its libpython by an absolute run path) runs Python
# code a little (perfd meets it, and Python's detection reads it, while the
# server answers), says "ready" and waits for SIGUSR1; then forks a child
# that runs Python code for CHILD_SECONDS, and says "child PID".  The child
# is a new process to perfd: detection opens its first file first, the
# executable on the server.
CHILD_SECONDS = 30
PYTHON_FUSE_WORKLOAD = r"""
import os, signal, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
end = time.monotonic() + 0.5
while time.monotonic() < end:
    sum(range(1000))
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
child = os.fork()
if child == 0:
    null = os.open(os.devnull, os.O_WRONLY)  # the test reads the parent's pipes to their end
    os.dup2(null, 1)
    os.dup2(null, 2)
    end = time.monotonic() + %d
    while time.monotonic() < end:
        sum(range(1000))
    os._exit(0)
print("child", child, flush=True)
os.waitpid(child, 0)
""" % CHILD_SECONDS


def runtime_of(daemon, pid):
    return (perfdtest.ps_process(daemon, pid) or {}).get("runtime") or ""


def test_python_detection_on_a_hung_server_does_not_stop_the_loop(tmp_path):
    """A CPython whose executable is on hangfs runs, the server hangs, and
    the process forks: detection looks at the child, and opens its
    executable on the server.  A lane of Python's asks the server
    (perfd-py-0), root's status answers within STATUS_BUDGET all along and
    counts the detection pending, and once the server answers the child's
    runtime is named."""
    python = perfdtest.pyenv_python(12)
    if python is None:
        pytest.skip("no pyenv CPython 3.12: a shared CPython is needed")
    home = str(Path(python).resolve().parent.parent)
    fs = HangFS(tmp_path, "python3.12", str(Path(python).resolve()))
    child = None
    try:
        daemon = perfdtest.start_perfd(extra_args=["--no-state"])
        with hung_server(fs, daemon) as (hang, workloads):
            w = perfdtest.Workload("python3", command=[
                "env", f"PYTHONHOME={home}", fs.path, "-c", PYTHON_FUSE_WORKLOAD])
            workloads.append(w)
            w.expect_line("ready", timeout=30)
            deadline = time.monotonic() + 15
            while not runtime_of(daemon, w.pid).startswith("CPython 3.12"):
                assert time.monotonic() < deadline, \
                    f"perfd never named the runtime: {perfdtest.ps_process(daemon, w.pid)}"
                time.sleep(0.2)
            forked = []

            def start():
                w.proc.send_signal(signal.SIGUSR1)
                forked.append(int(w.expect_line("child").split()[1]))
            status, askers = watch_while_hung(
                daemon, fs, hang, start,
                lambda st: f"Python detections pending: {st['python']['detections_pending']}")
            child, pending = forked[0], status["python"]["detections_pending"]
            assert any(name.startswith("perfd-py") for name in askers.values()), \
                f"Python's lane never asked the hung server: the test proved nothing " \
                f"(perfd's threads that asked: {askers})"
            assert pending >= 1, "status counted no detection waiting for the hung server"
            deadline = time.monotonic() + NAMED_WITHIN
            while not runtime_of(daemon, child).startswith("CPython 3.12"):
                assert time.monotonic() < deadline, \
                    f"the child's runtime was not named {NAMED_WITHIN:.0f} s after the " \
                    f"server answered: {perfdtest.ps_process(daemon, child)}"
                time.sleep(0.2)
            # back to none (the count does not leak), though another of the
            # host's processes may be looked at right then
            while status_within_deadline(daemon)[1]["python"]["detections_pending"]:
                assert time.monotonic() < deadline, "a detection stayed pending"
                time.sleep(0.2)
    finally:
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        fs.close()


# The JIT workload in a mount namespace of its own whose /tmp is the hangfs
# mount ($0): it prints its pid, waits for a line, binds the mount over
# /tmp, says "bound", waits for a line and becomes the JIT workload ($1,
# opened before the mount hides it if it is under /tmp), which burns $2 s
# of CPU in anonymous code after a 1 s sleep.
JIT_IN_FUSE_TMP = ('exec 3<"$1"; echo $$; read x; mount --bind "$0" /tmp && echo bound && '
                   'read y && exec /proc/self/fd/3 "$2" 1')
JIT_BURN = "30"


def test_a_jit_map_on_a_hung_server_does_not_stop_the_loop(tmp_path):
    """The JIT workload's /tmp is on hangfs, which serves its perf map
    (/tmp/perf-PID.map in its root).  The server hangs in the second before
    the workload's code first runs: perfd meets the anonymous code and looks
    for the map while every lookup on the server blocks.  A maps lane asks
    the server, not perfd's loop; root's status answers within
    STATUS_BUDGET all along; and once the server answers, the map names the
    code."""
    mapfile = tmp_path / "map.txt"
    mapfile.write_text("")
    # mounted before the namespace is made, which copies the mounts then
    fs = HangFS(tmp_path, "perf-*.map", str(mapfile), live=True)
    w = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", JIT_IN_FUSE_TMP,
         str(tmp_path / "mnt"), perfdtest.workload_binary("jit"), JIT_BURN],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = int(w.stdout.readline())
        daemon = perfdtest.start_perfd(extra_args=["--no-state"])
        with hung_server(fs, daemon) as (hang, _):
            w.stdin.write("\n")
            w.stdin.flush()
            assert w.stdout.readline() == "bound\n", w.stderr.read()
            w.stdin.write("\n")
            w.stdin.flush()
            start, size = w.stdout.readline().split()
            name = f"perfd_jit_on_fuse_{pid}"
            mapfile.write_text(f"{start} {size} {name}\n")
            # Looked up once while the server answers: each later lookup
            # asks the server for itself (a first one, of a name not in
            # the dentry cache, would make other daemons' lookups wait for
            # it in the kernel, not ask: the session's other perfds profile
            # this process too).
            os.stat(f"/proc/{pid}/root/tmp/perf-{pid}.map")
            _, askers = watch_while_hung(daemon, fs, hang)
            assert askers, "no thread of perfd asked the hung server: the test proved nothing"
            assert daemon.pid not in askers, f"perfd's loop asked the hung server: {askers}"
            deadline = time.monotonic() + NAMED_WITHIN
            while True:
                assert w.poll() is None, f"the workload ended: {w.stderr.read()!r}"
                rc, out, err = daemon.perfctl("snapshot", "--pid", str(pid), "--since", "2s")
                assert rc == 0, err
                stacks = perfdtest.parse_folded(out)
                if perfdtest.count_where(stacks, perfdtest.contains(name)) >= 5:
                    break
                assert time.monotonic() < deadline, \
                    f"the map did not name the code {NAMED_WITHIN:.0f} s after the server " \
                    f"answered:\n{perfdtest.show(stacks)}"
                time.sleep(0.3)
    finally:
        w.kill()
        w.wait()
        fs.close()


# A Python function whose code object's qualified name is a str object of
# the workload's making: its header on an anonymous page, its characters at
# the start of the next page, the first page of the hangfs file (which
# holds them), mapped shared and read-only.  The workload checks the name
# (reading the page while the server answers), puts the page out of its
# page tables and out of the page cache, says "ready" with whether the page
# is still in memory (mincore: 0, or the test proves nothing), and on
# SIGUSR1 runs the function for CHILD_SECONDS.  CPython never reads a code
# object's name to run it; perfd reads it to name the frame, and that read
# asks the server.
QUALNAME_ON_FUSE = "perfd_qualname_on_a_hung_server"
QUALNAME_WORKLOAD = r"""
import ctypes, os, signal, sys, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
PAGE = os.sysconf("SC_PAGE_SIZE")
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
PROT_READ, PROT_WRITE, MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = 1, 2, 1, 2, 0x10, 0x20
MADV_DONTNEED = 4
base = libc.mmap(None, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
fd = os.open(sys.argv[1], os.O_RDONLY)
assert libc.mmap(base + PAGE, PAGE, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == base + PAGE
name = sys.argv[2]
hash(name)
header = sys.getsizeof(name) - len(name) - 1  # a compact ASCII str's
ctypes.memmove(base + PAGE - header, id(name), header)
ctypes.c_ssize_t.from_address(base + PAGE - header).value = 1 << 40  # never freed
fake = ctypes.cast(base + PAGE - header, ctypes.py_object).value
assert fake == name and id(fake) != id(name)

def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))

spin.__code__ = spin.__code__.replace(co_qualname=fake)
libc.madvise(base + PAGE, PAGE, MADV_DONTNEED)
os.posix_fadvise(fd, 0, PAGE, os.POSIX_FADV_DONTNEED)
vec = (ctypes.c_ubyte * 1)()
libc.mincore(base + PAGE, PAGE, vec)
print("ready", vec[0] & 1, flush=True)
signal.sigwait({signal.SIGUSR1})
spin(%d)
""" % CHILD_SECONDS


def python_frames_of(daemon, pid, since):
    """The functions in pid's samples of the last since (without their
    file and line), with their samples."""
    rc, out, err = daemon.perfctl("snapshot", "--pid", str(pid), "--since", since)
    assert rc == 0, err
    seen = {}
    for stack, count in perfdtest.parse_folded(out).items():
        for f in {f.split(" (")[0] for f in perfdtest.functions(stack)}:
            seen[f] = seen.get(f, 0) + count
    return seen


def test_a_code_object_named_on_a_hung_server_does_not_stop_the_loop(tmp_path):
    """Debian's CPython runs a function whose code object's name lies in a
    page of a hangfs file that is not in memory; the server hangs, and only
    then does the function run.  perfd reads the name out of the process's
    memory to name the frame, which asks the server: a lane of Python's
    (perfd-pymem) asks it, root's status answers within STATUS_BUDGET all
    along, the samples that waited go in as "[python: code object not read
    yet]" and are counted, and once the server answers the function is
    named with the name the process gave it."""
    source = tmp_path / "qualname.bin"
    source.write_bytes(QUALNAME_ON_FUSE.encode() + bytes(4096 - len(QUALNAME_ON_FUSE)))
    fs = HangFS(tmp_path, "qualname.bin", str(source))
    try:
        daemon = perfdtest.start_perfd(extra_args=["--no-state"])
        with hung_server(fs, daemon) as (hang, workloads):
            w = perfdtest.Workload("python3", command=[
                DEBIAN_PYTHON, "-c", QUALNAME_WORKLOAD, fs.path, QUALNAME_ON_FUSE])
            workloads.append(w)
            resident = w.expect_line("ready", timeout=30).split()[1]
            assert resident == "0", "the name's page stayed in memory: the test proves nothing"
            deadline = time.monotonic() + 15
            while not runtime_of(daemon, w.pid).startswith("CPython 3.11"):
                assert time.monotonic() < deadline, \
                    f"perfd never named the runtime: {perfdtest.ps_process(daemon, w.pid)}"
                time.sleep(0.2)
            status, askers = watch_while_hung(
                daemon, fs, hang, lambda: w.proc.send_signal(signal.SIGUSR1),
                lambda st: f"Python reads: {st['python']}")
            python = status["python"]
            assert any(name.startswith("perfd-pymem") for name in askers.values()), \
                f"Python's reader never asked the hung server: the test proved nothing " \
                f"(perfd's threads that asked: {askers})"
            assert python["waits_late"] >= 1 and python["frames_not_read"] >= 1, \
                f"no sample went in unread while the server hung: {python}"
            deadline = time.monotonic() + NAMED_WITHIN
            while True:
                seen = python_frames_of(daemon, w.pid, "1s")
                if seen.get(QUALNAME_ON_FUSE, 0) >= 10:
                    break
                assert time.monotonic() < deadline, \
                    f"{QUALNAME_ON_FUSE} was not named {NAMED_WITHIN:.0f} s after the server " \
                    f"answered: {seen}"
                time.sleep(0.3)
            seen = python_frames_of(daemon, w.pid, "1m")
            assert seen.get("[python: code object not read yet]", 0) >= 1, seen
    finally:
        fs.close()
