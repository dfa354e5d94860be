"""perfd works inside systemd/perfd.service's sandbox, and the sandbox is no
wider than perfd needs.

The private /tmp and hidden /home (PrivateTmp=, ProtectHome=): perfd reads
other processes' files through /proc/PID/root, which the kernel resolves
in their mount namespace, so a perf map a JIT wrote to the host's /tmp
still names its frames when perfd's own /tmp and /home are empty tmpfs
mounts of its own namespace.

The system calls perfd makes are all in the unit's SystemCallFilter=
(strace), so none fails there with EPERM.  And a reload is announced to
systemd (RELOADING=1 ... READY=1), as ExecReload= needs.

The capabilities the unit keeps are the ones perfd needs.

perfd runs as root with its bounding set cut to the unit's
CapabilityBoundingSet= (setpriv), as systemd runs it: it starts, and names
what it samples (Python frames, a deleted binary, a binary only its owner
may read, the kernel).  Then each capability is dropped in turn, and what
the unit's comment says fails without it does: the BPF programs do not
load (CAP_BPF, CAP_PERFMON), Python processes cannot be read
(CAP_SYS_PTRACE), a deleted binary is not named (CAP_CHECKPOINT_RESTORE:
/proc/PID/map_files), another user's 0700 binary is not read
(CAP_DAC_READ_SEARCH), kernel symbols are unavailable (CAP_SYSLOG).
So a capability added to the unit without a use, or one removed that is
needed, fails here.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import perfdtest

UNIT = perfdtest.REPO / "systemd" / "perfd.service"
SNAPSHOT_SECONDS = 5
HOT = "hot_python_function"
SPIN = f"""
def {HOT}():
    x = 0
    while True:
        for i in range(100000):
            x += i
{HOT}()
"""


def unit_capabilities():
    text = UNIT.read_text()
    m = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M)
    assert m, "perfd.service sets no CapabilityBoundingSet="
    return [c.lower().removeprefix("cap_") for c in m.group(1).split()]


def bounded(caps):
    """setpriv's command line: exec with only caps in the bounding set (a
    root process then holds exactly those), none inheritable."""
    return ["setpriv", "--bounding-set=-all," + ",".join("+" + c for c in caps),
            "--inh-caps=-all", "--"]


class Targets:
    """Three spinning Python processes: python3 itself, a private copy of
    it deleted once running (named only through /proc/PID/map_files), and
    a copy owned by nobody with mode 0700 (root's uid alone cannot read
    it), run as nobody."""

    def __init__(self):
        self.dir = perfdtest.make_tmpdir()
        os.chmod(self.dir, 0o755)
        python = os.path.realpath("/usr/bin/python3")  # Debian's, not a shim
        deleted, private = os.path.join(self.dir, "pydel"), os.path.join(self.dir, "pypriv")
        shutil.copy(python, deleted)
        shutil.copy(python, private)
        os.chown(private, 65534, 65534)
        os.chmod(private, 0o700)
        self.plain = subprocess.Popen([python, "-c", SPIN])
        self.deleted = subprocess.Popen([deleted, "-c", SPIN])
        self.private = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                         private, "-c", SPIN])
        time.sleep(0.5)
        os.unlink(deleted)

    def close(self):
        for p in (self.plain, self.deleted, self.private):
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def targets(environment):
    t = Targets()
    yield t
    t.close()


def snapshot(daemon, proc):
    rc, out, err = daemon.perfctl("snapshot", "--pid", str(proc.pid), "--duration", str(SNAPSHOT_SECONDS),
                                  timeout=SNAPSHOT_SECONDS + 60)
    assert rc == 0, f"perfctl snapshot exited {rc}: {err}"
    assert out.strip(), f"no samples of pid {proc.pid}"
    return out


def named_from_deleted_binary(folded):
    """Whether a frame of the deleted copy has a name (Debian's python3
    executable holds the interpreter: _PyEval_EvalFrameDefault, Py_RunMain),
    rather than 'pydel (deleted)+0x…'."""
    return re.search(r"(^|;)_?Py[A-Z]\w*(;| )", folded, re.M) is not None


def run_bounded(caps, targets):
    """Starts perfd bounded to caps; returns (what each target's snapshot
    shows, perfd's stderr)."""
    daemon = perfdtest.start_perfd(wrapper=bounded(caps))
    try:
        # the three snapshots at once: one window, not three
        with ThreadPoolExecutor(3) as pool:
            plain, deleted, private = pool.map(lambda p: snapshot(daemon, p),
                                               (targets.plain, targets.deleted, targets.private))
        shown = {"python": HOT in plain, "deleted": named_from_deleted_binary(deleted),
                 "private": HOT in private}
        stderr = daemon.stderr()
    finally:
        daemon.stop()
    return shown, stderr


def test_unit_capabilities_are_enough(targets):
    caps = unit_capabilities()
    assert "sys_admin" not in caps
    shown, stderr = run_bounded(caps, targets)
    assert shown == {"python": True, "deleted": True, "private": True}, f"{shown}\n{stderr}"
    assert "Kernel symbols unavailable" not in stderr, stderr


@pytest.mark.parametrize("cap", ["bpf", "perfmon"])
def test_without_it_bpf_does_not_load(cap):
    caps = [c for c in unit_capabilities() if c != cap]
    status, stderr, ready = perfdtest.run_perfd_expect_exit([], wrapper=bounded(caps))
    assert status != 0 and not ready, stderr
    assert "Failed to load the BPF programs" in stderr, stderr


# What is lost without each of the others: (the targets a snapshot no
# longer names, what perfd's log says, if anything).  Without
# CAP_SYS_PTRACE no other process can be read at all: not its memory
# (Python), nor its /proc/PID/map_files or /proc/PID/root (the copies).
LOST = {
    "sys_ptrace": ({"python", "deleted", "private"}, "could not be read: Permission denied"),
    "checkpoint_restore": ({"deleted"}, None),
    "dac_read_search": ({"private"}, None),
    "syslog": (set(), "Kernel symbols unavailable"),
}


@pytest.mark.parametrize("cap", sorted(LOST))
def test_without_it_a_named_thing_is_lost(cap, targets):
    caps = unit_capabilities()
    assert cap in caps, f"the unit no longer keeps CAP_{cap.upper()}: update this test"
    shown, stderr = run_bounded([c for c in caps if c != cap], targets)
    lost, logged = LOST[cap]
    for what, seen in shown.items():
        if what in lost:
            assert not seen, f"without CAP_{cap.upper()} perfd still names the {what} target: {shown}"
        else:
            assert seen, f"without CAP_{cap.upper()} perfd lost the {what} target too: {shown}\n{stderr}"
    if logged:
        assert logged in stderr, stderr


def test_every_unit_capability_is_tested():
    assert sorted(unit_capabilities()) == sorted(["bpf", "perfmon", *LOST])


def test_private_tmp_and_home_still_read_other_processes_files(environment, workloads, tmp_path):
    """perfd in a mount namespace of its own with empty /tmp and /home (as
    PrivateTmp=yes and ProtectHome=yes make them) names node's JavaScript
    from the perf map node wrote to the host's /tmp."""
    own = tempfile.mkdtemp(prefix="perfd-it-", dir="/var/tmp")  # its socket: not under /tmp
    private = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
               'mount -t tmpfs perfd-tmp /tmp && mount -t tmpfs perfd-home /home && exec "$0" "$@"']
    daemon = perfdtest.start_perfd(tmpdir=own, wrapper=private)
    try:
        script = perfdtest.REPO / "tests" / "workloads" / "js" / "hot.js"
        node = shutil.which("node") or "/usr/bin/node"
        w = workloads("node", command=["sh", "-c", f'cd "{tmp_path}" && exec "{node}" '
                                       f'--perf-basic-prof "{script}" 4'])
        stacks, _ = perfdtest.snapshot_workload(daemon, w)
        w.finish()
        Path(f"/tmp/perf-{w.pid}.map").unlink(missing_ok=True)
    finally:
        daemon.stop()
        shutil.rmtree(own, ignore_errors=True)
    named = perfdtest.count_where(stacks, lambda s: any("hotJavaScriptFunction" in f for f in s))
    assert named >= 0.5 * perfdtest.total(stacks), perfdtest.show(stacks)


def test_reload_is_announced_to_systemd(environment, tmp_path):
    """`systemctl reload perfd` (ExecReload= sends SIGHUP) returns when
    perfd says READY=1 after RELOADING=1: perfd sends both around a
    reload, the first with the time it began, and the new frequency is in
    force when READY=1 comes."""
    tmpdir = perfdtest.make_tmpdir()
    conf = tmp_path / "perfd.conf"
    conf.write_text("frequency = 99\n")
    proc, socket_path, notify, stderr_path = perfdtest.spawn_perfd(["--config", str(conf)], tmpdir)
    try:
        assert notify.wait_ready(proc, perfdtest.READY_TIMEOUT), perfdtest._read_text(stderr_path)
        notify.messages.clear()
        conf.write_text("frequency = 49\n")
        os.kill(proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not notify.drain(wait=0.2):
            pass
        messages = [m.split("\n") for m in notify.messages]
        assert len(messages) >= 2, f"{notify.messages}\n{perfdtest._read_text(stderr_path)}"
        assert "RELOADING=1" in messages[0], notify.messages
        assert any(line.startswith("MONOTONIC_USEC=") for line in messages[0]), notify.messages
        assert "READY=1" in messages[1], notify.messages
        rc, out, err = perfdtest.run_perfctl("--socket", socket_path, "--json", "status")
        assert rc == 0, err
        assert json.loads(out)["frequency_hz"] == 49, out[:2000]
    finally:
        notify.close()
        proc.terminate()
        assert proc.wait(timeout=perfdtest.STOP_TIMEOUT) == 0
        shutil.rmtree(tmpdir, ignore_errors=True)


def unit_syscall_filter():
    """The system calls the unit's SystemCallFilter= allows, its groups
    expanded as `systemd-analyze syscall-filter` lists them."""
    m = re.search(r"^SystemCallFilter=(.*)$", UNIT.read_text(), re.M)
    assert m, "perfd.service sets no SystemCallFilter="
    listing = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                             text=True, timeout=30).stdout
    groups, group = {}, None
    for line in listing.splitlines():
        if line.startswith("@"):
            group = groups.setdefault(line.strip(), [])
        elif group is not None and line.strip() and not line.strip().startswith("#"):
            group.append(line.strip())

    def expand(names):
        calls = set()
        for name in names:
            calls |= expand(groups[name]) if name.startswith("@") else {name}
        return calls
    return expand(m.group(1).split())


def test_system_calls_are_in_the_units_filter(environment, workloads, tmp_path):
    """Every system call perfd makes (strace -f) while it starts, samples a
    Python process, answers status, snapshot (now and from history), mem
    and report, serves /metrics, reloads, tries to export to Pyroscope, and
    stops, is one
    the unit's SystemCallFilter= allows: under systemd none of them would
    fail with EPERM."""
    allowed = unit_syscall_filter()
    trace = tmp_path / "trace"
    conf = tmp_path / "perfd.conf"
    # an exporter that fails at once (nothing listens on port 9): its
    # sockets, connect and retries are in the trace; and /metrics, scraped
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf.write_text(f"push-url = http://127.0.0.1:9\ninterval = 1s\nmetrics-address = 127.0.0.1:{port}\n")
    w = workloads("python", command=["/usr/bin/python3", "-c", SPIN])
    daemon = perfdtest.start_perfd(extra_args=["--config", str(conf)],
                                   wrapper=["strace", "-f", "-qq", "-o", str(trace), "--"])
    perfd = []
    try:
        perfd = subprocess.run(["pgrep", "-P", str(daemon.pid)], capture_output=True,
                               text=True).stdout.split()
        assert len(perfd) == 1, f"strace {daemon.pid} has children {perfd}"
        for args in (["status"], ["snapshot", "--pid", str(w.pid), "--duration", "2", "--format", "pprof",
                                  "-o", str(tmp_path / "p.pb.gz")],
                     ["snapshot", "--pid", str(w.pid), "--since", "10s", "-o", str(tmp_path / "p.html")],
                     ["mem", "--pid", str(w.pid)], ["report", "--pid", str(w.pid), "--since", "10s"]):
            rc, _, err = daemon.perfctl(*args)
            assert rc == 0, f"perfctl {' '.join(args)}: {err}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            assert b"perfd_" in answer.read()
        os.kill(int(perfd[0]), signal.SIGHUP)
        time.sleep(2)
    finally:
        # perfd, not strace, is the one to stop: strace exits after it
        for pid in perfd:
            os.kill(int(pid), signal.SIGTERM)
        if not perfd:
            daemon.proc.kill()
        assert daemon.proc.wait(timeout=perfdtest.STOP_TIMEOUT) == 0, daemon.stderr()
        shutil.rmtree(daemon.tmpdir, ignore_errors=True)
    used = set()
    for line in trace.read_text().splitlines():
        m = re.match(r"\d+\s+([a-z_0-9]+)\(", line)
        if m:
            used.add(m.group(1))
    assert {"bpf", "perf_event_open", "process_vm_readv", "connect", "listen"} <= used, sorted(used)
    assert sorted(used - allowed) == [], "perfd calls what the unit's filter refuses"
