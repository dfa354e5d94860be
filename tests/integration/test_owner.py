"""Ownership follows ptrace's rule (issue 27): a user sees the history of a
process only for the time it could have ptraced it then.

perfd files every sample under the owner the process had when it was
taken: its uid when its real, effective and saved uids agree and it is
dumpable, else nobody but root.  So a process that ran as root and then
became uid 65534 (by setresuid(), or by an exec through setpriv) shows
65534 only the stacks of its second phase, and a process of uid 65534 that
made itself non-dumpable is, while it is, another user's process to 65534.

The daemon and the helpers are test_auth's, acting as the system's nobody
rather than a throw-away account: the workload changes to uid 65534 itself.
"""

import json
import time

import pytest

import perfdtest
from perfdtest import contains, parse_folded, show
from test_auth import User, daemon, dead_pid, error_answer, perfctl_as, wait_sampled  # noqa: F401

NOBODY = 65534


@pytest.fixture(scope="module")
def user():
    """The system's nobody: the uid the workloads drop to."""
    u = User("nobody")
    assert u.uid == NOBODY, f"nobody is uid {u.uid}"
    return u


def history(daemon, user, pid):
    """The folded stacks of pid's last minute, as user (None: root)."""
    args = ("snapshot", "--pid", pid, "--since", "60s")
    rc, out, err = perfctl_as(user, daemon, *args) if user else daemon.perfctl(*map(str, args))
    assert rc == 0, f"history of pid {pid} as {user.name if user else 'root'} exited {rc}: {err}"
    return parse_folded(out)


def run_to_end(w, timeout=60):
    """Waits for workload w to exit, successfully."""
    rc = w.proc.wait(timeout=timeout)
    assert rc == 0, f"{w.name} exited {rc}: {w.proc.stderr.read()!r}"


@pytest.mark.parametrize("how", ["setresuid", "exec"])
def test_root_phase_is_hidden_after_a_drop_to_nobody(daemon, user, workloads, how):
    """A process that burns CPU as root in owner_root(), then becomes uid
    65534 and burns in owner_user(): nobody's history of it holds
    owner_user() and no owner_root(); root's holds both.  Protects the
    per-window owner of the history against reading the owner once per
    process (the root phase was shown to the user it dropped to)."""
    binary = perfdtest.workload_binary("owner")
    if how == "setresuid":
        w = workloads("owner", "drop", 2, 2)
    else:
        w = workloads("owner", command=[binary, "exec", "2", "setpriv", f"--reuid={NOBODY}",
                                        f"--regid={NOBODY}", "--clear-groups", "--",
                                        binary, "user", "2"])
    run_to_end(w)
    time.sleep(1.5)  # its last samples drained
    roots = history(daemon, None, w.pid)
    in_root = sum(n for s, n in roots.items() if contains("owner_root")(s))
    in_user = sum(n for s, n in roots.items() if contains("owner_user")(s))
    assert in_root > 0 and in_user > 0, f"root's history of pid {w.pid}:\n{show(roots)}"

    nobodys = history(daemon, user, w.pid)
    leaked = {s: n for s, n in nobodys.items() if contains("owner_root")(s)}
    assert not leaked, f"nobody sees the root phase of pid {w.pid}:\n{show(leaked)}"
    mine = sum(n for s, n in nobodys.items() if contains("owner_user")(s))
    assert mine >= in_user // 2, \
        f"nobody sees {mine} of the {in_user} samples of its own phase:\n{show(nobodys)}"


def test_non_dumpable_process_is_another_users(daemon, user, workloads):
    """A process of uid 65534 that called prctl(PR_SET_DUMPABLE, 0) answers
    nobody, live and from history, exactly as a pid without a process does;
    root profiles it.  Protects ptrace's dumpable rule (the process was
    shown to its uid)."""
    w = workloads("owner", command=user.argv(perfdtest.workload_binary("owner"),
                                             "undumpable", 60))
    wait_sampled(daemon, w.pid)
    time.sleep(1.5)
    rc, answer = error_answer(user, daemon, w.pid)
    rc_gone, answer_gone = error_answer(user, daemon, dead_pid())
    assert (rc, answer) == (rc_gone, answer_gone), \
        f"nobody's snapshot of its non-dumpable pid {w.pid}: exit {rc}, {answer}"
    rc, out, err = perfctl_as(user, daemon, "--json", "snapshot", "--pid", w.pid,
                              "--since", "30s")
    assert rc == 4 and json.loads(out)["error"]["code"] == "no_such_process", (rc, out, err)

    roots = history(daemon, None, w.pid)
    assert any(contains("owner_undumpable")(s) for s in roots), \
        f"root's history of pid {w.pid}:\n{show(roots)}"
