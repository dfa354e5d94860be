"""perfctl's exit codes and messages, which scripts depend on:
0 ok, 1 failure, 2 usage, 3 cannot connect, 4 no such process."""

import os
import subprocess

import pytest

import perfdtest


def test_missing_socket_exits_3_with_hint(tmp_path):
    """perfctl against a socket nobody listens on exits 3 and says where it
    tried and what to check.  Protects the first thing a new user sees."""
    path = str(tmp_path / "nobody-here.sock")
    rc, out, err = perfdtest.run_perfctl("--socket", path, "status", timeout=30)
    assert rc == 3, f"exit {rc}, expected 3\nstderr: {err}"
    assert f"perfctl: cannot connect to perfd at {path}: " in err, f"stderr: {err!r}"
    assert "is perfd running?" in err, f"stderr: {err!r}"


def dead_pid():
    """A pid that belonged to a process which is gone (and reaped)."""
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    assert not os.path.exists(f"/proc/{p.pid}"), f"pid {p.pid} was reused at once"
    return p.pid


def test_snapshot_of_missing_process_exits_4(perfd):
    """Snapshotting a pid with no process exits 4 (no such process), at once,
    not after the duration.  Protects scripts that tell "gone" from "broken"."""
    pid = dead_pid()
    rc, out, err = perfd.perfctl("snapshot", "--pid", str(pid), "--duration", "30",
                                 timeout=20)
    assert rc == 4, f"exit {rc}, expected 4\nstdout: {out}\nstderr: {err}"
    assert err.strip(), "no message on stderr"


USAGE_ERRORS = [
    ("duration with trailing junk", ["snapshot", "--pid", "{pid}", "--duration", "12abc"]),
    ("pid with trailing junk", ["snapshot", "--pid", "12abc", "--duration", "1"]),
    ("missing --pid", ["snapshot", "--duration", "1"]),
    ("missing --duration", ["snapshot", "--pid", "{pid}"]),
    ("unknown command", ["frobnicate"]),
    ("no command", []),
    ("unknown option", ["status", "--frobnicate"]),
]


@pytest.mark.parametrize("what,args", USAGE_ERRORS, ids=[u[0] for u in USAGE_ERRORS])
def test_bad_arguments_exit_2(perfd, what, args):
    """Malformed command lines exit 2 with a message, even with a live
    daemon to talk to (so the 2 is not a connection failure in disguise).
    Protects strict number parsing and the usage contract."""
    args = [a.replace("{pid}", str(os.getpid())) for a in args]
    rc, out, err = perfd.perfctl(*args, timeout=20)
    assert rc == 2, f"perfctl {' '.join(args)}: exit {rc}, expected 2\nstderr: {err}"
    assert err.strip(), f"perfctl {' '.join(args)}: exit 2 without a message"
