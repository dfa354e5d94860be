"""perfctl as people who know perf, py-spy, git and journalctl expect it:
each command's own help, one-line usage errors, durations and times as they
write them, progress and Ctrl-C on a live snapshot, `record -- CMD`, and no
binary profile on a terminal.  Real perfd, real workloads, real signals and
a real pseudo-terminal."""

import json
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time

import perfdtest

COMMANDS = ["status", "ps", "snapshot", "mem", "report", "diff", "diagnose", "top", "record"]


def perfctl_argv(daemon, *args):
    return [perfdtest.perfctl_binary(), "--socket", daemon.socket_path, *args]


def run_on_pty(argv, which, timeout=60):
    """Runs argv with its stdout or stderr (which: 1 or 2) on a new
    pseudo-terminal and the other to a pipe; returns (rc, what the terminal
    got, what the pipe got)."""
    master, slave = pty.openpty()
    other = subprocess.PIPE
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=slave if which == 1 else other,
                         stderr=slave if which == 2 else other)
    os.close(slave)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = select.select([master], [], [], 0.5)[0]
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            got += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    rest = (p.stderr if which == 1 else p.stdout).read()
    rc = p.wait(timeout=timeout)
    return rc, got.decode(errors="replace"), rest.decode(errors="replace")


def test_command_help_is_that_commands_only(perfd):
    """`perfctl NAME --help` prints NAME's synopsis and help and nothing of
    the other commands; `perfctl --help` lists every command once.  Protects
    against help that is again one 90-line text for everything."""
    rc, overview, err = perfd.perfctl("--help")
    assert rc == 0, err
    for name in COMMANDS:
        assert f"\n  {name} " in overview, f"{name} missing from the overview:\n{overview}"
    for name in COMMANDS:
        rc, out, err = perfd.perfctl(name, "--help")
        assert rc == 0, f"{name} --help exited {rc}: {err}"
        assert out.startswith(f"Usage: perfctl {name}"), out
        others = [o for o in COMMANDS if o != name and f"Usage: perfctl {o}" in out]
        assert not others, f"{name} --help shows the usage of {others}:\n{out}"
        assert len(out.splitlines()) < 40, f"{name} --help is {len(out.splitlines())} lines"
    rc, out, _ = perfd.perfctl("snapshot", "--help")
    assert "--duration DURATION" in out and "Ctrl-C" in out, out
    assert "top [-b" not in out and "diagnose SELECTION" not in out, out


def test_usage_error_is_one_line_and_a_hint(perfd):
    """A bad option value costs one line naming the command and the option,
    then the hint; the exit code stays 2."""
    rc, out, err = perfd.perfctl("snapshot", "--pid", str(os.getpid()), "--duration", "12abc")
    assert rc == 2, f"exit {rc}: {err}"
    lines = err.splitlines()
    assert len(lines) == 2, f"expected one line and a hint, got:\n{err}"
    assert lines[0].startswith("perfctl: snapshot: --duration: expected"), lines[0]
    assert "'12abc'" in lines[0], lines[0]
    assert lines[1] == "Try 'perfctl snapshot --help'.", lines[1]
    rc, out, err = perfd.perfctl("frobnicate")
    assert rc == 2 and err.splitlines() == ["perfctl: unknown command 'frobnicate'",
                                            "Try 'perfctl --help'."], err
    rc, out, err = perfd.perfctl("snapshot", "--pid", "1", "--since", "1h30")
    assert rc == 2 and len(err.splitlines()) == 2 and "--since" in err, err


def test_durations_as_people_write_them(perfd, workloads):
    """--duration takes 2s and 0m3s (it took only seconds), and --since
    1m30s asks for the same span as --since 90 (the same "from", to the
    second): one parser for every duration."""
    w = workloads("spin", 60, 0)
    for text, seconds in (("2s", 2.0), ("0m3s", 3.0)):
        answer = perfd.perfctl_json("snapshot", "--pid", str(w.pid), "--duration", text,
                                    timeout=60)
        assert answer["ok"] is True and answer["samples"] > 0, answer.get("note")
        assert abs(answer["duration_seconds"] - seconds) < 0.5, \
            f"--duration {text}: covered {answer['duration_seconds']} s"
    a = perfd.perfctl_json("snapshot", "--pid", str(w.pid), "--since", "1m30s")
    b = perfd.perfctl_json("snapshot", "--pid", str(w.pid), "--since", "90")
    assert a["samples"] > 0 and b["samples"] > 0
    assert abs(a["from"] - b["from"]) <= 1.0, (a["from"], b["from"])
    rc, out, err = perfd.perfctl("snapshot", "--pid", str(w.pid), "--duration", "1h1s")
    assert rc == 2 and "at most 3600 s" in err, err


def test_relative_and_local_times(perfd, workloads):
    """--from -1m is a minute ago, and --from HH:MM:SS (local time, today)
    the same instant: both answer with the spinner's samples, from the
    store, covering no more than the span asked for."""
    w = workloads("spin", 60, 0)
    time.sleep(4)
    now = time.time()
    a = perfd.perfctl_json("snapshot", "--pid", str(w.pid), "--from", "-1m", "--to", "-1s")
    assert a["samples"] > 0, a.get("note")
    assert a["from"] >= now - 62 and a["to"] <= time.time(), (a["from"], a["to"], now)
    local = time.strftime("%H:%M:%S", time.localtime(now - 3))
    b = perfd.perfctl_json("snapshot", "--pid", str(w.pid), "--from", local)
    assert b["samples"] > 0, b.get("note")
    assert b["from"] >= now - 5, (b["from"], now)
    day = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now - 3))
    c = perfd.perfctl_json("snapshot", "--pid", str(w.pid), "--from", day, "--to", "-0.5s")
    assert c["samples"] > 0 and abs(c["from"] - b["from"]) <= 1.0, (c["from"], b["from"])


def hot_function(folded):
    """The function with the most self samples in a folded profile."""
    stacks = perfdtest.parse_folded(folded)
    by_leaf = {}
    for stack, count in stacks.items():
        leaf = next((f for f in reversed(stack) if not perfdtest.is_kernel(f)), stack[-1])
        name = perfdtest.function(leaf)
        by_leaf[name] = by_leaf.get(name, 0) + count
    return max(by_leaf, key=by_leaf.get), by_leaf, perfdtest.total(stacks)


def test_ctrl_c_keeps_the_profile(perfd, workloads, tmp_path):
    """SIGINT to perfctl 3 s into a 60 s snapshot ends it at once, and the
    profile of those 3 s is written, topped by the spinner's spin_burn, with
    a note that it was stopped early."""
    w = workloads("spin", 60, 0)
    out = tmp_path / "cut.folded"
    p = subprocess.Popen(perfctl_argv(perfd, "snapshot", "--pid", str(w.pid), "--duration", "60",
                                      "-o", str(out)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=20)
    err = stderr.decode(errors="replace")
    assert p.returncode == 0, f"exit {p.returncode}: {err}"
    assert "stopped" in err and "the profile holds what was sampled" in err, err
    top, by_leaf, total = hot_function(out.read_text())
    assert top == "spin_burn", f"top function {top}: {by_leaf}"
    assert by_leaf["spin_burn"] >= 0.8 * total, by_leaf
    summary = [l for l in err.splitlines() if " samples " in l]
    assert summary and " over " in summary[-1], err
    covered = float(summary[-1].split(" over ")[1].split(" s")[0])
    assert 2.0 <= covered <= 8.0, f"covered {covered} s of a snapshot stopped at 3 s"


def test_progress_on_a_terminal(perfd, workloads, tmp_path):
    """With stderr on a terminal a live snapshot redraws 'sampling, Ns of
    3s' there; with stderr a pipe it prints no progress at all."""
    w = workloads("spin", 60, 0)
    argv = perfctl_argv(perfd, "snapshot", "--pid", str(w.pid), "--duration", "3s",
                        "-o", str(tmp_path / "p.folded"))
    rc, tty, _ = run_on_pty(argv, 2)
    assert rc == 0, tty
    assert "sampling, 1s of 3s" in tty and "sampling, 2s of 3s" in tty, repr(tty)
    rc, out, err = perfd.perfctl("snapshot", "--pid", str(w.pid), "--duration", "1s",
                                 "-o", str(tmp_path / "q.folded"))
    assert rc == 0 and "sampling" not in err, err
    # record's terminal is its command's: no line of perfctl's redrawn there
    argv = perfctl_argv(perfd, "record", "-o", str(tmp_path / "r.folded"), "--",
                        "sh", "-c", "sleep 2.5; echo command-done")
    rc, tty, out = run_on_pty(argv, 2)
    assert rc == 0 and "command-done" in out, (tty, out)
    assert "sampling" not in tty and "\x1b[K" not in tty, repr(tty)


SCRIPT = textwrap.dedent("""\
    import subprocess, sys, time

    def parent_hot_loop(seconds):
        end = time.process_time() + seconds
        x = 0
        while time.process_time() < end:
            x += 1
        return x

    CHILD = '''
    import time
    def child_hot_loop(seconds):
        end = time.process_time() + seconds
        x = 0
        while time.process_time() < end:
            x += 1
    child_hot_loop(1.5)
    '''

    child = subprocess.Popen([sys.executable, "-c", CHILD])
    parent_hot_loop(1.5)
    child.wait()
    sys.exit(7)
    """)


def python_frame(name):
    """Predicate: the stack holds a Python frame of function name
    ("name (file:line)")."""
    return lambda stack: any(f.startswith(name + " (") for f in stack[1:])


def test_record_a_python_command_and_its_child(perfd, tmp_path):
    """`perfctl record -- python3 script.py` profiles the script from start
    to end, its child process included, and exits with the script's code."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    out = tmp_path / "record.folded"
    p = subprocess.run(perfctl_argv(perfd, "record", "-o", str(out), "--",
                                    "/usr/bin/python3", str(script)),
                       capture_output=True, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 7, f"exit {p.returncode}, expected the script's 7: {err}"
    assert "Try 'perfctl" not in err, err
    stacks = perfdtest.parse_folded(out.read_text())
    total = perfdtest.total(stacks)
    parent = perfdtest.count_where(stacks, python_frame("parent_hot_loop"))
    child = perfdtest.count_where(stacks, python_frame("child_hot_loop"))
    assert total > 0, err
    assert parent >= 0.25 * total, f"parent_hot_loop {parent} of {total}\n{err}"
    assert child >= 0.25 * total, f"child_hot_loop {child} of {total}\n{err}"
    assert "2 processes" in err, err


def test_record_reports_what_it_cannot_run(perfd, tmp_path):
    """A command that does not exist: 127, as a shell says, and a message."""
    p = subprocess.run(perfctl_argv(perfd, "record", "-o", str(tmp_path / "x.folded"), "--",
                                    str(tmp_path / "no-such-command")),
                       capture_output=True, timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 127 and "cannot run" in err, (p.returncode, err)
    assert not (tmp_path / "x.folded").exists()


def test_pprof_is_not_written_to_a_terminal(perfd, workloads, tmp_path):
    """--format pprof with stdout on a terminal is refused before asking
    perfd (exit 2, one line saying what to do), and nothing reaches the
    terminal; with stdout a pipe the same command writes the gzip bytes."""
    w = workloads("spin", 60, 0)
    time.sleep(2)
    argv = perfctl_argv(perfd, "snapshot", "--pid", str(w.pid), "--since", "10s",
                        "--format", "pprof")
    rc, tty, err = run_on_pty(argv, 1)
    assert rc == 2, (rc, err)
    assert "binary" in err and "-o FILE" in err, err
    assert tty == "", repr(tty[:80])
    p = subprocess.run(argv, capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout[:2] == b"\x1f\x8b", p.stderr


def test_refused_record_does_not_run_the_command(perfd, tmp_path):
    """When perfd refuses the snapshot (here an unknown --kind), perfctl
    says why, exits 1 and never runs CMD: a record that cannot profile is
    not a silent plain run."""
    marker = tmp_path / "ran"
    p = subprocess.run(perfctl_argv(perfd, "record", "--kind", "bogus", "-o",
                                    str(tmp_path / "x.folded"), "--", "/usr/bin/touch", str(marker)),
                       capture_output=True, timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 1 and "kind" in err, (p.returncode, err)
    assert not marker.exists(), "CMD ran although perfd refused to profile it"


GROW_SCRIPT = textwrap.dedent("""\
    import time
    time.sleep(1)  # past the first look at the process: its Python frames are known

    def grow_here(mib):
        keep = []
        for _ in range(mib):
            keep.append(bytearray(1 << 20))
        return keep

    kept = grow_here(64)
    """)


def test_record_memory_names_the_growing_function(perfd_mem, tmp_path):
    """`record --kind memory` profiles what grew the command's memory: the
    64 MiB the script's grow_here() allocates are most of the bytes."""
    script = tmp_path / "grow.py"
    script.write_text(GROW_SCRIPT)
    out = tmp_path / "mem.folded"
    p = subprocess.run(perfctl_argv(perfd_mem, "record", "--kind", "memory", "-o", str(out), "--",
                                    "/usr/bin/python3", str(script)),
                       capture_output=True, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, err
    stacks = perfdtest.parse_folded(out.read_text())
    total = perfdtest.total(stacks)
    grew = perfdtest.count_where(stacks, python_frame("grow_here"))
    assert total >= 48 << 20, f"{total} bytes recorded\n{err}"
    assert grew >= 0.6 * total, f"grow_here {grew} of {total} bytes\n{perfdtest.show(stacks)}"
