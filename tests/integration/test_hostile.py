"""Hostile processes cannot hurt the daemon (issue 10).

perfd runs as root and reads files a process controls: its JIT map at
/tmp/perf-PID.map and everything under /proc/PID.  Each test here plays the
hostile process against a daemon (the timed ones against one of their own,
see calm_perfd):

- the JIT workload (build/workloads/jit) runs code in anonymous memory and
  prints where, so the daemon goes looking for its perf map; the test puts a
  FIFO there, a symlink, a 1 GiB sparse file or another user's file, each
  (where it can hold any) naming the code with a name used nowhere else.
  The daemon must answer status within a second throughout, never open the
  FIFO (a non-blocking writer gets ENXIO: no reader), never show the name,
  and count the refusal; a plain root-owned map must still be used, so the
  tests notice if everything were refused;
- a pid is handed to a new process (ns_last_pid) while the daemon is stopped
  with samples of the old one still queued, so the daemon meets the old
  process only once its pid is the new one's: neither may show the other's
  comm, cgroup or stacks.
"""

import errno
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import perfdtest
from perfdtest import (BackgroundSnapshot, contains, count_where, functions, show,
                       status_within_deadline, total)

JIT_SECONDS = 1.5      # CPU the JIT workload burns in its own code
JIT_SLEEP = 0.5        # before it starts: time to put the map in place


def symbols_counters(daemon):
    return status_within_deadline(daemon)[1]["symbols"]


def assert_no_reader(fifo):
    """A writer opening the FIFO without blocking finds no reader: nobody
    (the daemon least of all) has it open."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        assert e.errno == errno.ENXIO, f"opening {fifo} for writing: {e}"
        return
    os.close(fd)
    raise AssertionError(f"{fifo} has a reader: the daemon opened the FIFO")


class JitProcess:
    """The JIT workload, its code range, and a unique name for that code."""

    def __init__(self, workloads, tag):
        self.w = workloads("jit", JIT_SECONDS, JIT_SLEEP)
        start, size = self.w.expect_line("").split()
        self.start, self.size = int(start, 16), int(size, 16)
        self.map_path = f"/tmp/perf-{self.w.pid}.map"
        self.name = f"perfd_hostile_{tag}_{self.w.pid}"
        # A map at that path is a dead process's that had this pid (an
        # interpreter run with -X perf leaves one): the tests put their own.
        self.remove_map()

    def map_text(self):
        return f"{self.start:x} {self.size:x} {self.name}\n"

    def remove_map(self):
        try:
            os.unlink(self.map_path)
        except FileNotFoundError:
            pass


def profile_under_watch(daemon, jit, fifo=None):
    """Snapshots the JIT workload over its life while asking for status every
    0.1 s (and, with fifo, checking the FIFO has no reader), then asks a few
    times more.  Returns (stacks, snapshot text, slowest status in s)."""
    snap = BackgroundSnapshot(daemon, jit.w.pid, duration=30)
    slowest = 0.0
    try:
        deadline = time.monotonic() + 30
        while snap.proc.poll() is None:
            assert time.monotonic() < deadline, "the snapshot did not end with its process"
            slowest = max(slowest, status_within_deadline(daemon)[0])
            if fifo:
                assert_no_reader(fifo)
            time.sleep(0.1)
        stacks, text, _ = snap.result("jit")
    finally:
        snap.kill()
    jit.w.finish()
    for _ in range(5):
        slowest = max(slowest, status_within_deadline(daemon)[0])
        if fifo:
            assert_no_reader(fifo)
        time.sleep(0.05)
    return stacks, text, slowest


@pytest.fixture(scope="module")
def calm_perfd(environment):
    """A daemon of its own for the tests that time status, with unwind
    tables and Python off: the daemon builds a binary's unwind tables on its
    loop when any process on the machine first maps it (a compiler someone
    else starts, under ASan: seconds), which would be timed here as if the
    hostile file had done it.  The JIT path under test does not use them.
    It has seen the JIT workload once before the tests start, for the same
    reason (the first snapshot loads libc's symbols)."""
    daemon = perfdtest.start_perfd(extra_args=("--unwind-mib", "0", "--no-python"))
    try:
        w = perfdtest.Workload("jit", 0.3, 0.1)
        try:
            w.expect_line("")
            rc, out, err = daemon.perfctl("snapshot", "--pid", str(w.pid), "--duration", "30")
            assert rc == 0, err
            w.finish()
        finally:
            w.kill()
        yield daemon
    except BaseException:
        daemon.kill()
        raise
    daemon.stop()


def make_fifo(jit, tmp_path):
    os.mkfifo(jit.map_path, 0o644)


def make_symlink_to_map(jit, tmp_path):
    # the target itself would be accepted: only the symlink is wrong
    target = tmp_path / "target.map"
    target.write_text(jit.map_text())
    os.symlink(target, jit.map_path)


def make_symlink_to_shadow(jit, tmp_path):
    os.symlink("/etc/shadow", jit.map_path)


def make_sparse_1gib(jit, tmp_path):
    with open(jit.map_path, "w") as f:
        f.write(jit.map_text())
        f.truncate(1 << 30)


def make_other_users(jit, tmp_path):
    # the workload runs as root; the map belongs to nobody
    Path(jit.map_path).write_text(jit.map_text())
    os.chown(jit.map_path, 65534, 65534)


HOSTILE_MAPS = {
    "fifo": make_fifo,
    "symlink_to_map": make_symlink_to_map,
    "symlink_to_shadow": make_symlink_to_shadow,
    "sparse_1gib": make_sparse_1gib,
    "other_users": make_other_users,
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_MAPS))
def test_hostile_jit_map_is_refused_and_the_daemon_keeps_answering(calm_perfd, workloads,
                                                                   tmp_path, kind):
    perfd = calm_perfd
    jit = JitProcess(workloads, kind)
    try:
        # counted before the map exists: the daemon may look at it as soon
        # as the code runs, before this test reads its status
        before = symbols_counters(perfd)
        HOSTILE_MAPS[kind](jit, tmp_path)
        stacks, text, slowest = profile_under_watch(
            perfd, jit, fifo=jit.map_path if kind == "fifo" else None)
        after = symbols_counters(perfd)
    finally:
        jit.remove_map()
    assert perfd.alive(), f"perfd died\nstderr:\n{perfd.stderr()[-4000:]}"
    assert jit.name not in text, f"a name from the refused map was used:\n{show(stacks)}"
    assert after["jit_maps_refused"] > before["jit_maps_refused"], \
        f"the daemon never refused the {kind} map (did it look?): {before} -> {after}"
    print(f"{kind}: slowest status {slowest * 1000:.1f} ms, "
          f"refused {after['jit_maps_refused'] - before['jit_maps_refused']}")


def test_plain_jit_map_owned_by_root_is_used(calm_perfd, workloads):
    """The control: the same workload and a map it may have is named from it,
    so the refusals above are the rules at work, not a JIT path gone dead."""
    perfd = calm_perfd
    jit = JitProcess(workloads, "plain")
    try:
        before = symbols_counters(perfd)  # before the map exists, as above
        Path(jit.map_path).write_text(jit.map_text())
        os.chown(jit.map_path, 0, 0)
        stacks, text, slowest = profile_under_watch(perfd, jit)
        after = symbols_counters(perfd)
    finally:
        jit.remove_map()
    named = count_where(stacks, contains(jit.name))
    # nearly all of its CPU is in that code once it started
    assert named >= 0.5 * total(stacks), show(stacks)
    assert after["jit_maps_read"] > before["jit_maps_read"], (before, after)


# --- pid reuse --------------------------------------------------------------

def cgroup2_mount():
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] == "cgroup2":
            return Path(fields[4])
    raise AssertionError("no cgroup2 hierarchy is mounted: cannot give a process a cgroup")


def own_cgroup():
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    raise AssertionError("this process has no cgroup v2 path")


def spawn_with_pid(argv, pid, tries=20):
    """Starts argv as process pid (the next pid the kernel hands out is
    ns_last_pid + 1); retries when another process took it first.  Returns
    the Popen or None."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        if p.pid == pid:
            return p
        p.kill()
        p.communicate()
    return None


def ps_rows(daemon, pid):
    doc = daemon.perfctl_json("ps", "--interval", "10")
    return [p for p in doc["processes"] if p.get("pid") == pid]


def test_reused_pid_never_shows_the_other_process(perfd, tmp_path):
    """The old process ("oldproc", its own cgroup, burning in
    hot_three_quarters) runs and exits while the daemon is stopped; its pid
    goes to "newproc" (the test's cgroup; it sleeps, then burns in spin_burn)
    before the daemon has read a single sample of the old one.  When the
    daemon resumes, /proc/PID is the new process's: the old one must get
    none of it, and the new one none of the old's."""
    root = cgroup2_mount()
    mine = own_cgroup()
    old_cgroup = root / f"perfd-hostile-{os.getpid()}"
    old_path = "/" + str(old_cgroup.relative_to(root))
    old_exe, new_exe = tmp_path / "oldproc", tmp_path / "newproc"
    shutil.copy(perfdtest.workload_binary("split"), old_exe)
    shutil.copy(perfdtest.workload_binary("spin"), new_exe)
    old_cgroup.mkdir()
    new = snap = None
    stopped = False
    try:
        perfd.proc.send_signal(signal.SIGSTOP)
        stopped = True
        # the shell joins the cgroup and becomes oldproc: same pid
        old = subprocess.Popen(
            ["sh", "-c", f'echo $$ > "{old_cgroup}/cgroup.procs" && exec "{old_exe}" 0.5'],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = old.communicate(timeout=30)
        assert old.returncode == 0, err
        # it sleeps while the daemon catches up and the snapshot starts
        new = spawn_with_pid([str(new_exe), "1.0", "2.5"], old.pid)
        assert new, f"could not hand pid {old.pid} to a new process"
        perfd.proc.send_signal(signal.SIGCONT)
        stopped = False

        snap = BackgroundSnapshot(perfd, new.pid, duration=30)
        stacks, text, _ = snap.result("newproc")
        new_out, new_err = new.communicate(timeout=30)
        assert new.returncode == 0, new_err
        rows = ps_rows(perfd, old.pid)
    finally:
        if stopped:
            perfd.proc.send_signal(signal.SIGCONT)
        if snap:
            snap.kill()
        if new and new.poll() is None:
            new.kill()
            new.communicate()
        old_cgroup.rmdir()

    # the new process: its own comm, cgroup and code only
    assert count_where(stacks, contains("spin_burn")) > 0, show(stacks)
    assert count_where(stacks, lambda st: "hot_three_quarters" in functions(st) or
                       "cold_one_quarter" in functions(st)) == 0, show(stacks)
    news = [r for r in rows if r["comm"] == "newproc"]
    olds = [r for r in rows if r["comm"] != "newproc"]
    assert len(news) == 1, rows
    assert news[0].get("cgroup") == mine, rows
    # the old one was seen (its samples were queued), and got nothing of
    # the new one's: not its cgroup (its own was gone by then: none)
    assert olds, f"the daemon never saw the old process: {rows}"
    for r in olds:
        assert r["comm"] in ("oldproc", "sh"), rows
        assert r.get("cgroup") in (None, old_path), \
            f"the old process shows the cgroup of the one that took its pid: {rows}"
        assert r["start_time_ns"] != news[0]["start_time_ns"], rows
