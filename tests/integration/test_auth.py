"""Who sees what (issue 10): every local user may connect to perfd, and sees
only its own processes unless it is root or in group `perfd`.

The tests make a throw-away user (removed afterwards, also when a test
fails), run a workload as that user and one as root, and ask perfd through
perfctl run as that user: its own process is listed and profiled, root's is
absent, and asking for root's by pid answers exactly as a pid without a
process does.  Adding the user to group `perfd` makes it privileged on its
next connection, without restarting perfd.

The module runs its own daemon, with its socket in a directory it creates
under umask 077, so the test also sees that the socket is 0666 and the
directory 0755 whatever the umask.  The user must reach perfctl, the
workloads and the socket: directories on the way that others cannot
traverse get o+x for the module's duration (restored afterwards); nothing
about the daemon is loosened for it.
"""

import grp
import json
import math
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

import perfdtest
from perfdtest import contains, parse_folded, show

GROUP = "perfd"
# Long enough to outlive every test that uses them; killed at each test's end.
SPIN_SECONDS = 120


def run_root(*argv):
    """Runs an administration command as root; fails the test with its
    output when it fails."""
    p = subprocess.run(argv, capture_output=True, timeout=60)
    assert p.returncode == 0, \
        f"{' '.join(argv)} exited {p.returncode}: {p.stderr.decode(errors='replace')}"


class User:
    """A local account the tests act as."""

    def __init__(self, name):
        pw = pwd.getpwnam(name)
        self.name, self.uid, self.gid = name, pw.pw_uid, pw.pw_gid

    def argv(self, *argv):
        """argv run as this user, with the groups /etc/group gives it now
        (setpriv execs, so the pid is the program's own)."""
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups",
                "--", *map(str, argv)]


@pytest.fixture(scope="module")
def user():
    name = "perfdt" + secrets.token_hex(4)
    run_root("useradd", "--no-create-home", "--home-dir", "/nonexistent",
             "--shell", "/usr/sbin/nologin", "--user-group", name)
    try:
        yield User(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)
        try:
            grp.getgrnam(name)
        except KeyError:
            pass
        else:
            subprocess.run(["groupdel", name], capture_output=True, timeout=60)


def reachable_path_fixes(paths):
    """The (directory, mode) pairs of the ancestors of paths that others
    cannot traverse, after giving each o+x."""
    fixed = {}
    for path in paths:
        for d in reversed(Path(path).resolve().parents):
            mode = stat.S_IMODE(os.stat(d).st_mode)
            if not mode & stat.S_IXOTH and d not in fixed:
                os.chmod(d, mode | stat.S_IXOTH)
                fixed[d] = mode
    return list(fixed.items())


@pytest.fixture(scope="module")
def daemon(user):
    """A daemon whose socket is in a directory it made itself under umask
    077, in a temporary directory the user can traverse."""
    tmpdir = perfdtest.make_tmpdir()
    os.chmod(tmpdir, 0o755)  # mkdtemp makes it 0700
    binaries = [perfdtest.perfctl_binary(), perfdtest.workload_binary("spin")]
    fixed = reachable_path_fixes([*binaries, tmpdir])
    try:
        for binary in binaries:
            mode = os.stat(binary).st_mode
            assert mode & stat.S_IROTH and mode & stat.S_IXOTH, \
                f"{binary} is not readable and executable by others (mode {mode:o})"
        p = subprocess.run(user.argv("test", "-x", perfdtest.perfctl_binary()),
                           capture_output=True, timeout=30)
        assert p.returncode == 0, f"user {user.name} cannot execute {binaries[0]}"
        old_umask = os.umask(0o077)
        try:
            d = perfdtest.start_perfd(tmpdir=tmpdir,
                                      socket_path=os.path.join(tmpdir, "run", "perfd.sock"))
        finally:
            os.umask(old_umask)
        yield d
        d.stop()  # fails the module's teardown loudly if perfd did not stop cleanly
        shutil.rmtree(tmpdir, ignore_errors=True)
    finally:
        for d_, mode in reversed(fixed):
            os.chmod(d_, mode)


@pytest.fixture
def perfd_group(user):
    """A function that puts the user into group perfd (created when it does
    not exist).  Afterwards the user leaves it, and a group made here is
    removed."""
    try:
        grp.getgrnam(GROUP)
        made = False
    except KeyError:
        run_root("groupadd", GROUP)
        made = True
    joined = []

    def join():
        run_root("usermod", "-aG", GROUP, user.name)
        joined.append(True)

    try:
        yield join
    finally:
        if joined:
            subprocess.run(["gpasswd", "-d", user.name, GROUP], capture_output=True, timeout=60)
        if made:
            subprocess.run(["groupdel", GROUP], capture_output=True, timeout=60)


def perfctl_as(user, daemon, *args, timeout=60):
    """perfctl --socket SOCKET ARGS run as user: (rc, stdout, stderr)."""
    env = dict(os.environ)
    env.pop("PERFD_SOCKET", None)
    p = subprocess.run(user.argv(perfdtest.perfctl_binary(), "--socket", daemon.socket_path,
                                 *args),
                       capture_output=True, env=env, timeout=timeout, cwd="/")
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def ps_pids(user, daemon):
    """The pids in `perfctl --json ps --interval 2`, as user (None: as root)."""
    if user is None:
        rc, out, err = daemon.perfctl("--json", "ps", "--interval", "2")
    else:
        rc, out, err = perfctl_as(user, daemon, "--json", "ps", "--interval", "2")
    assert rc == 0, f"ps as {user.name if user else 'root'} exited {rc}: {err}"
    doc = json.loads(out)
    return {p["pid"] for p in doc["processes"]}


def wait_sampled(daemon, *pids, timeout=20):
    """Waits until root's ps lists every pid: they have been sampled."""
    deadline = time.monotonic() + timeout
    while True:
        seen = ps_pids(None, daemon)
        if set(pids) <= seen:
            return
        assert time.monotonic() < deadline, \
            f"pids {set(pids) - seen} never showed up in root's ps\n{daemon.stderr()}"
        time.sleep(0.5)


@pytest.fixture
def spinners(user, daemon, workloads):
    """(own, roots): a spin workload run as the user and one run as root,
    both sampled already."""
    own = workloads("spin", command=user.argv(perfdtest.workload_binary("spin"),
                                              SPIN_SECONDS, 0))
    roots = workloads("spin", SPIN_SECONDS, 0)
    expected = {own.pid: user.uid, roots.pid: 0}
    deadline = time.monotonic() + 10
    while True:  # until setpriv has changed uid and exec'ed spin
        for w in (own, roots):
            assert w.proc.poll() is None, f"spin exited early: {w.proc.stderr.read()!r}"
        owners = {w.pid: (os.stat(f"/proc/{w.pid}").st_uid,
                          Path(f"/proc/{w.pid}/comm").read_text().strip()) for w in (own, roots)}
        if owners == {pid: (uid, "spin") for pid, uid in expected.items()}:
            break
        assert time.monotonic() < deadline, f"workloads (uid, comm): {owners}"
        time.sleep(0.05)
    wait_sampled(daemon, own.pid, roots.pid)
    # Its first second ran partly as root (setpriv, before its exec): that
    # window is root's alone (test_owner.py); the user's history of it
    # starts with the next one.
    deadline = time.monotonic() + 10
    while True:
        rc, out, _ = perfctl_as(user, daemon, "snapshot", "--pid", own.pid, "--since", "10s")
        if rc == 0 and any(contains("spin_burn")(s) for s in parse_folded(out)):
            break
        assert time.monotonic() < deadline, f"no history of pid {own.pid} for its user: {rc}"
        time.sleep(0.3)
    # ps counts whole seconds only (the current one is not over): the
    # second that history was in must end before ps's window holds it.
    # time.monotonic() is perfd's clock (CLOCK_MONOTONIC).
    time.sleep(math.floor(time.monotonic()) + 1.05 - time.monotonic())
    return own, roots


def dead_pid():
    """A pid whose process is gone (and reaped)."""
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    assert not os.path.exists(f"/proc/{p.pid}"), f"pid {p.pid} was reused at once"
    return p.pid


def test_socket_is_world_connectable_and_its_directory_reachable(daemon):
    """The socket is 0666 and the directory perfd made for it 0755, though
    perfd ran under umask 077: access is decided by peer credentials, so
    every user must be able to connect.  Protects the packaging of issue 10."""
    sock_mode = stat.S_IMODE(os.stat(daemon.socket_path).st_mode)
    dir_mode = stat.S_IMODE(os.stat(os.path.dirname(daemon.socket_path)).st_mode)
    assert sock_mode == 0o666, f"socket mode {sock_mode:o}, expected 666"
    assert dir_mode == 0o755, f"socket directory mode {dir_mode:o}, expected 755"


def test_user_sees_only_its_own_processes_in_ps(daemon, user, spinners):
    """ps as a user lists its own workload and not root's; root's ps lists
    both.  Protects the filter in ps."""
    own, roots = spinners
    seen = ps_pids(user, daemon)
    assert own.pid in seen, f"ps as {user.name} does not list its own pid {own.pid}: {seen}"
    assert roots.pid not in seen, f"ps as {user.name} lists root's pid {roots.pid}"
    owners = {pid: os.stat(f"/proc/{pid}").st_uid for pid in seen if os.path.exists(f"/proc/{pid}")}
    others = {pid: uid for pid, uid in owners.items() if uid != user.uid}
    assert not others, f"ps as {user.name} lists processes of other uids: {others}"
    seen_by_root = ps_pids(None, daemon)
    assert {own.pid, roots.pid} <= seen_by_root, f"root's ps: {seen_by_root}"


def test_user_snapshots_its_own_process(daemon, user, spinners):
    """A user's snapshot of its own process works and holds the workload's
    hot function.  Protects the user's right to profile what it runs."""
    own, _ = spinners
    rc, out, err = perfctl_as(user, daemon, "snapshot", "--pid", own.pid, "--duration", "2")
    assert rc == 0, f"snapshot of own pid {own.pid} exited {rc}\nstderr: {err}"
    stacks = parse_folded(out)
    assert {s[0] for s in stacks} == {"spin"}, f"comms: {set(s[0] for s in stacks)}"
    hot = sum(n for s, n in stacks.items() if contains("spin_burn")(s))
    assert hot > 0, f"no spin_burn in the user's snapshot:\n{show(stacks)}"


def error_answer(user, daemon, pid):
    """snapshot --json of pid as user: (rc, the answer with the pid in its
    message masked)."""
    rc, out, err = perfctl_as(user, daemon, "--json", "snapshot", "--pid", pid,
                              "--duration", "2", timeout=30)
    try:
        answer = json.loads(out)
        error = answer["error"]
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"snapshot --json of pid {pid} printed no error: {out!r} {err!r}")
    error["message"] = error["message"].replace(f" {pid}", " PID")
    return rc, answer


def test_another_users_process_answers_as_a_missing_one(daemon, user, spinners):
    """A snapshot of root's process, asked by a user, exits 4 with exactly
    the answer a pid without a process gets (pid aside), at once, in JSON
    and in text.  Protects against answers that reveal another user's
    processes."""
    _, roots = spinners
    gone = dead_pid()
    t0 = time.monotonic()
    rc_roots, answer_roots = error_answer(user, daemon, roots.pid)
    took = time.monotonic() - t0
    rc_gone, answer_gone = error_answer(user, daemon, gone)
    assert rc_roots == 4, f"snapshot of root's pid exited {rc_roots}: {answer_roots}"
    assert rc_gone == 4, f"snapshot of a dead pid exited {rc_gone}: {answer_gone}"
    assert answer_roots["error"]["code"] == "no_such_process", answer_roots
    assert answer_roots == answer_gone, \
        f"root's pid answers {answer_roots!r}, a missing one {answer_gone!r}"
    assert took < 1.5, f"the refusal took {took:.1f} s, as if a snapshot had run"

    rc, out, err_roots = perfctl_as(user, daemon, "snapshot", "--pid", roots.pid,
                                    "--duration", "2", timeout=30)
    assert rc == 4 and not out, f"text snapshot of root's pid: exit {rc}, stdout {out!r}"
    rc, _, err_gone = perfctl_as(user, daemon, "snapshot", "--pid", gone, "--duration", "2",
                                 timeout=30)
    assert err_roots.replace(str(roots.pid), "PID") == err_gone.replace(str(gone), "PID"), \
        f"stderr differs: {err_roots!r} vs {err_gone!r}"

    # Root and kernel threads, which every system has, likewise.
    for pid in (1, 2):
        rc, answer = error_answer(user, daemon, pid)
        assert rc == 4 and answer == answer_gone, f"pid {pid}: exit {rc}, {answer!r}"


def test_root_sees_and_snapshots_both(daemon, spinners):
    """Root profiles any user's process.  Protects the privileged path."""
    for w in spinners:
        rc, out, err = daemon.perfctl("snapshot", "--pid", str(w.pid), "--duration", "1")
        assert rc == 0, f"root's snapshot of pid {w.pid} exited {rc}: {err}"
        assert parse_folded(out), f"root's snapshot of pid {w.pid} is empty"


def processes_in(doc):
    """Every JSON object inside doc that carries a "pid": a process listing."""
    found = []
    if isinstance(doc, dict):
        if "pid" in doc:
            found.append(doc)
        for v in doc.values():
            found += processes_in(v)
    elif isinstance(doc, list):
        for v in doc:
            found += processes_in(v)
    return found


def test_status_is_for_everyone_and_lists_no_process(daemon, user, spinners):
    """status answers a user (counters only) and names no process: the
    only "pid" in it is the daemon's own, at the top.  Protects status from
    growing a per-process list that bypasses the filter."""
    rc, out, err = perfctl_as(user, daemon, "--json", "status")
    assert rc == 0, f"status as {user.name} exited {rc}: {err}"
    doc = json.loads(out)
    assert doc.get("pid") == daemon.pid, f"status pid {doc.get('pid')}, daemon {daemon.pid}"
    nested = [p for v in doc.values() for p in processes_in(v)]
    assert not nested, f"status lists processes: {nested[:3]}"


def test_group_perfd_is_privileged_from_the_next_connection(daemon, user, spinners, perfd_group):
    """Joining group perfd makes the user privileged on its next connection,
    with no restart of perfd; leaving it takes that back.  Protects the group
    lookup at each accept."""
    own, roots = spinners
    assert roots.pid not in ps_pids(user, daemon), "root's process visible before joining"
    perfd_group()
    seen = ps_pids(user, daemon)
    assert {own.pid, roots.pid} <= seen, f"a member of {GROUP} sees only {seen}"
    rc, out, err = perfctl_as(user, daemon, "snapshot", "--pid", roots.pid, "--duration", "1")
    assert rc == 0, f"a member of {GROUP} cannot snapshot root's pid: exit {rc}, {err}"
    assert parse_folded(out), "the member's snapshot of root's pid is empty"

    run_root("gpasswd", "-d", user.name, GROUP)
    assert roots.pid not in ps_pids(user, daemon), f"root's process visible after leaving {GROUP}"
    rc, _, _ = perfctl_as(user, daemon, "snapshot", "--pid", roots.pid, "--duration", "1")
    assert rc == 4, f"after leaving {GROUP}, snapshot of root's pid exited {rc}"


def test_history_holds_only_the_users_own_processes(daemon, user, spinners):
    """From history (--since), a user gets its own process's past and, for
    root's pid, the answer of a pid perfd never saw.  Protects the store's
    queries, which read processes that may have exited since."""
    own, roots = spinners
    rc, out, err = perfctl_as(user, daemon, "snapshot", "--pid", own.pid, "--since", "10s")
    assert rc == 0, f"history of own pid {own.pid} exited {rc}\nstderr: {err}"
    stacks = parse_folded(out)
    assert any(contains("spin_burn")(s) for s in stacks), \
        f"no spin_burn in the user's history:\n{show(stacks)}"

    def history_error(pid):
        rc, out, err = perfctl_as(user, daemon, "--json", "snapshot", "--pid", pid,
                                  "--since", "10s", timeout=30)
        answer = json.loads(out)
        assert "error" in answer, f"history of pid {pid} answered (exit {rc}): {out[:300]}"
        answer["error"]["message"] = answer["error"]["message"].replace(f" {pid}", " PID")
        return rc, answer

    rc_roots, answer_roots = history_error(roots.pid)
    rc_gone, answer_gone = history_error(dead_pid())
    assert rc_roots == 4 and answer_roots["error"]["code"] == "no_such_process", answer_roots
    assert (rc_roots, answer_roots) == (rc_gone, answer_gone), \
        f"root's pid answers {answer_roots}, a missing one {answer_gone}"


@pytest.mark.parametrize("when", [("--since", "10s"), ("--duration", "1")],
                         ids=["history", "live"])
@pytest.mark.parametrize("which", [("--all",), ("--comm", "spin")], ids=["all", "comm"])
def test_selections_hold_only_the_users_own_processes(daemon, user, spinners, which, when):
    """A snapshot of every process, or of every "spin", asked by a user
    holds only that user's processes, live and from history; root's gets
    both workloads.  Protects the selections that name no pid."""
    own, roots = spinners

    def selected(as_user):
        args = ("--json", "snapshot", *which, *when)
        if as_user:
            rc, out, err = perfctl_as(user, daemon, *args)
        else:
            rc, out, err = daemon.perfctl(*args)
        assert rc == 0, f"snapshot {' '.join(args)} exited {rc}: {err}"
        return {p["pid"] for p in json.loads(out)["processes"]}

    mine = selected(True)
    assert own.pid in mine, f"the user's selection misses its own pid {own.pid}: {mine}"
    foreign = {pid: os.stat(f"/proc/{pid}").st_uid for pid in mine
               if pid != own.pid and os.path.exists(f"/proc/{pid}")}
    assert roots.pid not in mine, f"the user's selection holds root's pid {roots.pid}"
    assert all(uid == user.uid for uid in foreign.values()), \
        f"the user's selection holds other users' processes: {foreign}"
    assert {own.pid, roots.pid} <= selected(False), "root's selection misses a workload"


def test_top_holds_only_the_users_own_processes(daemon, user, spinners):
    """perfctl top as a user: its own spinner is in the process view with
    its top function, root's is not, and no row is another uid's; the
    function view of root's pid answers as a missing pid (exit 4), and that
    of every process takes the user's alone.  Protects top's use of the
    store's authorization."""
    own, roots = spinners
    deadline = time.monotonic() + 10
    while True:  # until its window holds samples of the spinner (a loaded machine)
        rc, out, err = perfctl_as(user, daemon, "--json", "top", "-b", "-n", "1", "-a")
        assert rc == 0, f"top as {user.name} exited {rc}: {err}"
        rows = {p["pid"]: p for p in json.loads(out)["processes"]}
        assert own.pid in rows and roots.pid not in rows, sorted(rows)
        if "top_function" in rows[own.pid] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert rows[own.pid]["top_function"] == "spin_burn" and rows[own.pid]["user"] == user.name, \
        rows[own.pid]
    assert {p.get("uid") for p in rows.values()} == {user.uid}, rows

    rc, out, err = perfctl_as(user, daemon, "top", "-b", "-n", "1", "--pid", roots.pid)
    rc_gone, _, err_gone = perfctl_as(user, daemon, "top", "-b", "-n", "1", "--pid", dead_pid())
    assert rc == 4 and rc_gone == 4 and not out, (rc, rc_gone, out, err)
    assert re.sub(r"\d+", "N", err) == re.sub(r"\d+", "N", err_gone), (err, err_gone)

    # Both spinners are named spin: the function view of every "spin" the
    # user may see counts the processes its process view lists (its own,
    # those of earlier tests that exited in the window too), not root's.
    # Asked one after the other, the two may straddle a second: a few tries.
    def spin_counts():
        counts = []
        for args in (("-f",), ()):
            rc, out, err = perfctl_as(user, daemon, "--json", "top", "-b", "-n", "1",
                                      "--filter", "spin", *args)
            assert rc == 0, f"top {args} as {user.name} exited {rc}: {err}"
            doc = json.loads(out)
            counts.append(doc["processes_sampled"] if args else len(doc["processes"]))
            if args:
                assert doc["functions"][0]["function"] == "spin_burn", doc["functions"][:5]
        return counts

    for _ in range(3):
        functions_of, listed = spin_counts()
        if functions_of == listed:
            break
    assert 1 <= functions_of == listed, (functions_of, listed)
