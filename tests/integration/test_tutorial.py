"""The README's tutorial, run: its commands on its real program
(docs/tutorial/service.py under load.py, then fix.patch), with 10 s where
it says a minute, and each output checked against the one the README shows:
the same headings and column lines, the same labelled lines, the same
first line but for its figures, and the functions it names.  So the
tutorial cannot drift from what perfctl prints without a test saying so."""

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

import perfdtest

README = Path(perfdtest.REPO) / "README.md"
TUTORIAL = Path(perfdtest.REPO) / "docs" / "tutorial"
PYTHON = "/usr/bin/python3.11"
WARM = 10  # seconds of load before the first look, and after the fix


def tutorial_outputs():
    """{command: output lines} of the README's tutorial: each "$ perfctl
    ..." line of its code blocks and the lines after it, up to the next
    command or the block's end ("..." lines, where the README cut, left
    out)."""
    text = README.read_text()
    section = text.split("## Tutorial", 1)[1].split("\n## ", 1)[0]
    outputs, current = {}, None
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", section, re.S | re.M):
        current = None
        for line in block.splitlines():
            if line.startswith("$ perfctl "):
                current = line[2:]
                outputs[current] = []
            elif line.startswith("$ "):
                current = None
            elif current and line.strip() != "...":
                outputs[current].append(line)
    return outputs


def words(line):
    return " ".join(line.split())


# A figure as the README shows it: 1832, 10.101, 30.8%, 364.4M, +5.4M!,
# 04:11:36; what replaces it in the first line's pattern.
FIGURE = re.compile(r"[+-]?\d[\d.:,]*[KMG%]?!?")


def first_line_pattern(line):
    """The README's first output line as a pattern: its figures (pids,
    times, counts, percentages, sizes) stand for any figure, its text
    stays."""
    parts, at = [], 0
    for m in FIGURE.finditer(line):
        parts.append(re.escape(line[at:m.start()]))
        parts.append(r"[+-]?\d[\d.:,]*[KMG%]?!?")
        at = m.end()
    parts.append(re.escape(line[at:]))
    return re.compile("".join(parts))


def label(line):
    """"RSS:", "Growth sites (", "CPU:": the words a line of the README's
    output starts with, before its first figure or colon; None for a line
    that starts with a figure or a name (a table row)."""
    m = re.match(r"([A-Za-z][A-Za-z /]*?)(:|\s\()", line)
    return m.group(0) if m and len(m.group(1)) <= 20 else None


def check_shape(command, doc, got):
    """got (our output's lines) has the shape of doc (the README's)."""
    ours = [words(l) for l in got]
    for line in doc:
        if not re.search(r"\d", line) and line.strip():
            assert words(line) in ours, \
                f"`{command}`: the README's line {line!r} is not in the output:\n" + "\n".join(got)
        lab = label(line)
        if lab:
            assert any(l.startswith(lab) for l in got), \
                f"`{command}`: no line starts with {lab!r} as in the README:\n" + "\n".join(got)
    if doc and re.search(r"\d", doc[0]):
        pattern = first_line_pattern(doc[0])
        assert pattern.fullmatch(got[0].rstrip()), \
            f"`{command}`: first line {got[0]!r} is not shaped as the README's {doc[0]!r}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """service.py on a free port with load.py sending it requests."""

    def __init__(self, directory):
        self.port = free_port()
        self.proc = subprocess.Popen([PYTHON, "service.py", str(self.port)], cwd=directory,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and self.proc.poll() is None, \
                    f"service.py did not listen: {self.proc.stderr.read()}"
                time.sleep(0.1)
        self.load = subprocess.Popen([PYTHON, "load.py", str(self.port)], cwd=directory,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        for p in (self.load, self.proc):
            p.kill()
            p.wait()


def run_as_in_readme(daemon, command, pid, tmp):
    """Runs the README's command line with this run's pid, 10 s for its
    minute, in the tutorial's directory; returns (stdout, stderr) lines."""
    argv = command.split()[1:]
    argv = [str(pid) if re.fullmatch(r"\d{3,}", a) else a for a in argv]
    argv = [f"{WARM}s" if a == "1m" else a for a in argv]
    p = subprocess.run([perfdtest.perfctl_binary(), "--socket", daemon.socket_path, *argv],
                       cwd=tmp, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"`{command}` exited {p.returncode}: {p.stderr}"
    return p.stdout.splitlines(), p.stderr.splitlines()


@pytest.mark.skipif(not Path(PYTHON).exists(), reason=f"{PYTHON} is the tutorial's interpreter")
def test_tutorial_outputs_have_the_readmes_shape(perfd, tmp_path):
    outputs = tutorial_outputs()
    commands = list(outputs)
    # the README's own pids: the service before the fix, then after it
    fixed = next((i for i, c in enumerate(commands) if "8231" in c), len(commands))
    before, after = commands[:fixed], commands[fixed:]
    assert any(c.startswith("perfctl ps") for c in before) and \
        any(c.startswith("perfctl diff before.pb.gz after.pb.gz --top") for c in after), \
        f"the tutorial's commands are not where this test looks for them: {list(outputs)}"
    work = tmp_path / "tutorial"
    shutil.copytree(TUTORIAL, work)

    service = Service(work)
    try:
        time.sleep(WARM)
        for command in before:
            out, err = run_as_in_readme(perfd, command, service.proc.pid, work)
            got = out or err  # a snapshot to a file says what it did on stderr
            check_shape(command, outputs[command], got)
            text = "\n".join(got)
            if command.startswith("perfctl ps"):
                row = [l for l in out if l.split()[:1] == [str(service.proc.pid)]]
                assert row and "CPython 3.11" in row[0], text
            if command.startswith("perfctl diagnose"):
                assert re.search(r"^CPU: rank_orders \(service\.py:\d+\) has the most self time",
                                 text, re.M), text
            if command.startswith("perfctl mem"):
                assert "render_report.<locals>.<listcomp> (service.py:47)" in text, text
    finally:
        service.stop()

    subprocess.run(["patch", "service.py"], stdin=open(TUTORIAL / "fix.patch"), cwd=work,
                   check=True, capture_output=True)
    service = Service(work)
    try:
        time.sleep(WARM)
        for command in after:
            if not command.startswith(("perfctl snapshot", "perfctl diff")):
                continue  # the fixed service's diagnose and mem: the README cuts them
            out, err = run_as_in_readme(perfd, command, service.proc.pid, work)
            got = out or err
            check_shape(command, outputs[command], got)
            if "--top" in command:
                rank = [l for l in out if l.split()[-1:] == ["rank_orders"]]
                assert rank and rank[0].split()[2:4] == ["0", "0.00%"], "\n".join(out)
    finally:
        service.stop()
