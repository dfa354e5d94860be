"""What one local user can make perfd hold is capped per user (issue 27).

Every local user may connect to perfd and make it store more: run live
snapshots, spawn processes, run code with ever new stacks.  Each test here
plays an unprivileged user, the system's `nobody` (and, where a second user
is needed, test_auth's throw-away account), against a daemon of the
module's own with a small store (--max-memory 4 MiB) sampling fast, so the
store is full within seconds:

- a user's live snapshots together cover at most a budget of
  process-seconds (the processes they select x their duration); past it the
  next is answered busy, with the numbers; root is not limited;
- one user's churn of processes and stacks cannot evict another user's
  history: the store takes from the user past its share;
- ps and mem tell a user only what was recorded while it could trace the
  process, as a profile query does (a process that ran as root, then as
  nobody).

Counts are asserted with tolerances, never times.
"""

import json
import os
import subprocess
import time

import pytest

import perfdtest
from test_auth import User, reachable_path_fixes, user  # noqa: F401
from test_trust import connect, one_answer, run_as_nobody

NOBODY = 65534
MAX_MEMORY_MIB = 4
FREQUENCY = 499


@pytest.fixture(scope="module")
def daemon(environment):
    """A daemon with a 4 MiB store sampling at 499 Hz, reachable by other
    users (socket directory, perfctl, workloads)."""
    tmpdir = perfdtest.make_tmpdir()
    os.chmod(tmpdir, 0o755)
    fixed = reachable_path_fixes([perfdtest.perfctl_binary(), perfdtest.workload_binary("spin"),
                                  tmpdir])
    try:
        d = perfdtest.start_perfd(tmpdir=tmpdir, frequency=FREQUENCY,
                                  extra_args=["--max-memory", str(MAX_MEMORY_MIB)])
        yield d
        d.stop()
    finally:
        for path, mode in reversed(fixed):
            os.chmod(path, mode)


def as_user(uid, gid, *argv):
    """argv run as uid:gid without supplementary groups."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--",
            *map(str, argv)]


def snapshot_then_wait(path, requests, wait):
    """Sends each request on a connection of its own, in order; returns the
    answer each got within wait seconds (None: still collecting, accepted)."""
    held, answers = [], []
    for req in requests:
        s = connect(path, timeout=wait)
        s.sendall((json.dumps(req) + "\n").encode())
        held.append(s)
        try:
            answers.append(one_answer(s, "snapshot"))
        except AssertionError:
            answers.append(None)
    for s in held:
        s.close()
    return answers


def live(pids, seconds):
    return {"version": 1, "command": "snapshot", "pid": pids, "duration": seconds}


def test_snapshots_scope_times_duration_is_capped_per_uid(daemon, workloads):
    """nobody starts a live snapshot of 5 of its processes for an hour
    (18000 process-seconds: accepted), then one of 6 more for an hour: past
    the 36000 of its budget, it is answered busy with the numbers.  Root's
    snapshot of all 11 for an hour is accepted.  Without the budget, both
    of nobody's are accepted."""
    budget = daemon.status()["limits"].get("max_snapshot_process_seconds_per_uid", 36000)
    sleepers = [workloads("sleep", command=as_user(NOBODY, NOBODY, "sleep", 120))
                for _ in range(11)]
    pids = [w.pid for w in sleepers]
    first, second = run_as_nobody(snapshot_then_wait, daemon.socket_path,
                                  [live(pids[:5], 3600), live(pids[5:], 3600)], 2)
    assert first is None, f"nobody's first snapshot (18000 process-seconds) was answered: {first}"
    assert second is not None, "nobody's snapshot past its budget was accepted"
    assert second.get("ok") is False and second["error"]["code"] == "busy", second
    message = second["error"]["message"]
    assert message == (f"39600 of {budget} process-seconds for uid {NOBODY}: this snapshot "
                       f"would add 6 processes x 3600 s to the 18000 its snapshots hold"), message
    # root is not limited
    (answer,) = snapshot_then_wait(daemon.socket_path, [live(pids, 3600)], 2)
    assert answer is None, f"root's snapshot of 11 processes for an hour was answered: {answer}"


def churn(path, binary, runs):
    """nobody's churn: runs unique_stacks (new stacks at every sample) one
    process after another."""
    for _ in range(runs):
        subprocess.run([binary, "2", "1.5"], check=True, timeout=60,
                       stdout=subprocess.DEVNULL)
    return runs


def samples_of(daemon, pid):
    """Root's count of pid's CPU samples in the last 10 minutes."""
    rc, out, err = daemon.perfctl("--json", "snapshot", "--pid", str(pid), "--since", "600s",
                                  "--format", "folded")
    answer = json.loads(out)
    if rc == 4 and answer["error"]["code"] == "no_such_process":
        return 0  # nothing of it left
    assert rc == 0, f"root's history of pid {pid}: exit {rc}, {err}"
    return answer.get("samples", 0)


def test_one_users_churn_cannot_evict_another_users_history(daemon, user, workloads):
    """User B runs a process for 2 CPU seconds and exits; then nobody runs
    unique_stacks (a new stack at nearly every sample) process after process
    until the 4 MiB store has evicted several times its size.  B's history
    still answers whole (at least 90% of what it held before): the store
    took nobody's own, nobody being past its share.  A store that evicts
    the oldest windows of all loses B's first."""
    b = workloads("spin", command=user.argv(perfdtest.workload_binary("spin"), 2, 0))
    assert b.proc.wait(timeout=60) == 0, b.proc.stderr.read()
    time.sleep(1.5)  # its last samples drained
    before = samples_of(daemon, b.pid)
    assert before >= FREQUENCY, f"B's process has only {before} samples"
    evicted0 = daemon.status()["store"]["values_evicted"]["cpu"]

    run_as_nobody(churn, daemon.socket_path, perfdtest.workload_binary("unique_stacks"), 8,
                  timeout=180)
    time.sleep(1.5)
    status = daemon.status()
    store = status["store"]
    # in samples, not windows: a window of unique stacks is big, and how
    # many windows a full store drops depends on what else runs
    evicted = store["values_evicted"]["cpu"] - evicted0
    print(f"B: {before} samples; nobody's churn evicted {evicted} samples, store "
          f"{store['memory_bytes']} bytes, evictions {store.get('evictions')}")
    assert evicted >= 2 * before, \
        f"the churn evicted only {evicted} samples, B holds {before}: the store never filled"
    after = samples_of(daemon, b.pid)
    assert after >= before * 0.9, \
        f"B's history lost {before - after} of its {before} samples to nobody's churn " \
        f"(evictions {store.get('evictions')})"


def request(path, req):
    s = connect(path)
    s.sendall((json.dumps(req) + "\n").encode())
    answer = one_answer(s, req["command"])
    s.close()
    return answer


def ps_samples(answer, pid):
    rows = [p for p in answer.get("processes", []) if p["pid"] == pid]
    return (rows[0]["samples"], rows[0]["total_samples"]) if rows else (0, 0)


def test_ps_and_mem_count_only_what_the_user_could_trace(daemon, workloads):
    """A process burns 2 CPU seconds as root, then drops to nobody and burns
    2 more.  nobody's ps counts about half the samples root's does (its own
    phase), and its mem timeline starts after root's: the root phase is not
    shown, as its stacks are not.  Before, both counted every sample and
    every RSS reading."""
    w = workloads("owner", "drop", 2, 2)
    assert w.proc.wait(timeout=60) == 0, w.proc.stderr.read()
    time.sleep(1.5)
    ps = {"version": 1, "command": "ps", "interval": 30}
    mem = {"version": 1, "command": "mem", "pid": w.pid, "since": 120}
    roots_ps, roots_mem = request(daemon.socket_path, ps), request(daemon.socket_path, mem)
    nobodys_ps, nobodys_mem = run_as_nobody(
        lambda path: (request(path, ps), request(path, mem)), daemon.socket_path)
    root_n, root_total = ps_samples(roots_ps, w.pid)
    nobody_n, nobody_total = ps_samples(nobodys_ps, w.pid)
    print(f"ps samples: root {root_n} (total {root_total}), nobody {nobody_n} "
          f"(total {nobody_total}); mem points: root {len(roots_mem['timeline'])}, "
          f"nobody {len(nobodys_mem['timeline'])}")
    assert root_n >= FREQUENCY, f"root's ps counts {root_n} samples of pid {w.pid}"
    assert 0 < nobody_n <= root_n * 0.75, \
        f"nobody's ps counts {nobody_n} of root's {root_n} samples of pid {w.pid}"
    assert 0 < nobody_total <= root_total * 0.75, (nobody_total, root_total)
    root_points, nobody_points = roots_mem["timeline"], nobodys_mem["timeline"]
    assert nobodys_mem["ok"] and nobody_points, nobodys_mem
    assert len(nobody_points) < len(root_points), (len(nobody_points), len(root_points))
    assert nobody_points[0]["time"] >= root_points[0]["time"] + 1, \
        f"nobody's RSS timeline starts in the root phase: {nobody_points[0]} vs {root_points[0]}"
