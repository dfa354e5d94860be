"""Helpers for perfd's integration tests: start the real daemon, talk to it
through perfctl and through the raw socket, run workloads, read folded stacks.

The daemon is started the way systemd starts it: NOTIFY_SOCKET points at a
datagram socket we bind, and the daemon counts as up only once it has sent
READY=1 (BPF attached, socket listening).  Everything that can hang has a
timeout, and every failure message carries the daemon's stderr, because a
test that fails without saying why costs more than it saves.
"""

import contextlib
import functools
import json
import os
import re
import select
import shutil
import signal
import sys
import socket
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
STATUS_DEADLINE = 1.0  # seconds the daemon may take to answer status under attack
STATUS_BUDGET = 0.1  # what issue 27 asks of root's status under every attack


# The frequency of the perfd_fast fixture's daemon.
FAST_HZ = 999


def build_dir():
    """The build folder under test: $PERFD_BUILD (absolute, as `make
    integration` passes it), else the repository's build/."""
    return Path(os.environ.get("PERFD_BUILD") or REPO / "build")


def perfd_binary():
    return str(build_dir() / "perfd")


@functools.lru_cache(maxsize=None)
def sanitized():
    """Whether the perfd under test is an ASan build (make test's second
    half): it does the same work several times slower."""
    with open(perfd_binary(), "rb") as f:
        return b"__asan_init" in f.read()


def perfctl_binary():
    return str(build_dir() / "perfctl")


def workload_binary(name):
    return str(build_dir() / "workloads" / name)


def online_cpus():
    """The number of online CPUs, from the kernel's own list ("0-1,4")."""
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    count = 0
    for part in text.split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


def max_sample_rate():
    return int(Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text())


def environment_problems():
    """Why this machine cannot run the suite, as a list of sentences (empty
    when it can).  The suite fails on these rather than skipping: a CI job
    that silently skips every test looks exactly like one that passes."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the integration tests need root (BPF and perf events)")
    if not Path("/sys/kernel/btf/vmlinux").exists():
        problems.append("no kernel BTF at /sys/kernel/btf/vmlinux: CO-RE BPF cannot load")
    if not Path("/proc/sys/kernel/unprivileged_bpf_disabled").exists():
        problems.append("the kernel has no bpf() syscall (CONFIG_BPF_SYSCALL)")
    for binary in (perfd_binary(), perfctl_binary()):
        if not os.access(binary, os.X_OK):
            problems.append(f"{binary} is missing: run `make all workloads`")
    for name in ("split", "syscalls", "rss", "exiter", "spin"):
        if not os.access(workload_binary(name), os.X_OK):
            problems.append(f"workload {workload_binary(name)} is missing: run `make workloads`")
    return problems


def _read_text(path):
    try:
        return Path(path).read_text(errors="replace")
    except OSError as e:
        return f"<cannot read {path}: {e}>"


def _recv(sock):
    """The next bytes on sock, b"" at EOF."""
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        # The daemon closed with bytes of ours unread (it answered and
        # hung up on an over-long line): same as EOF once the queued
        # answer has been read, which recv() returns first.
        return b""


def read_lines(sock, count):
    """Reads up to count answer lines from a connected socket, each with its
    '\n'.  Stops early at EOF; what came before EOF without a newline is
    returned as a last, unterminated line.  Raises socket.timeout when the
    socket's timeout passes without data.  For answers that may carry a
    binary profile's frame, read_answers()."""
    buf, lines = b"", []
    while len(lines) < count:
        if b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            lines.append(line + b"\n")
            continue
        chunk = _recv(sock)
        if not chunk:
            if buf:
                lines.append(buf)
            break
        buf += chunk
    return lines


def read_answers(sock, count, what="a request", until=None):
    """Reads up to count answers from a connected socket (fewer at EOF, or
    up to the first for which until(answer) is true), each decoded: a line
    of JSON and, when it says "encoding": "frame" (a binary profile,
    include/perfd/protocol.h), exactly its "profile_bytes" bytes after the
    line, put into the answer as "profile" (bytes).  A frame cut short by
    EOF fails the test.  What came after the last answer read is dropped:
    one call per connection."""
    buf, answers = b"", []
    while len(answers) < count and not (until and answers and until(answers[-1])):
        if b"\n" not in buf:
            chunk = _recv(sock)
            if not chunk:
                if buf:
                    answers.append(decode_answer(buf, what))
                break
            buf += chunk
            continue
        line, _, buf = buf.partition(b"\n")
        answer = decode_answer(line + b"\n", what)
        if answer.get("encoding") == "frame":
            n = answer["profile_bytes"]
            while len(buf) < n:
                chunk = _recv(sock)
                assert chunk, f"perfd closed the connection {len(buf)} bytes into a {n}-byte frame"
                buf += chunk
            answer["profile"], buf = buf[:n], buf[n:]
        answers.append(answer)
    return answers


def decode_answer(line, what):
    """Checks that line is one JSON object ending in a newline; returns it."""
    assert line, f"perfd closed the connection without answering {what}"
    assert line.endswith(b"\n"), f"answer to {what} not terminated by a newline: {line[:200]!r}"
    try:
        answer = json.loads(line)
    except ValueError as e:
        raise AssertionError(f"answer to {what} is not JSON ({e}): {line[:200]!r}")
    assert isinstance(answer, dict), f"answer to {what} is not a JSON object: {line[:200]!r}"
    return answer


class Perfd:
    """One running daemon: its process, its socket, how to talk to it."""

    def __init__(self, proc, socket_path, tmpdir, frequency, stderr_path, own_tmpdir):
        self.proc = proc
        self.own_tmpdir = own_tmpdir  # remove tmpdir after a clean stop
        self.socket_path = socket_path
        self.tmpdir = tmpdir
        self.frequency = frequency  # as asked on the command line; None: default
        self.stderr_path = stderr_path

    @property
    def pid(self):
        return self.proc.pid

    def stderr(self):
        return _read_text(self.stderr_path)

    def alive(self):
        return self.proc.poll() is None

    def perfctl(self, *args, timeout=60):
        """Runs `perfctl --socket SOCKET ARGS...`; returns (rc, stdout, stderr)."""
        return run_perfctl("--socket", self.socket_path, *args, timeout=timeout)

    def perfctl_json(self, *args, timeout=60):
        """Runs perfctl with --json before ARGS, asserts exit 0, returns the
        parsed JSON document."""
        rc, out, err = self.perfctl("--json", *args, timeout=timeout)
        assert rc == 0, f"perfctl --json {' '.join(args)} exited {rc}: {err}"
        try:
            return json.loads(out)
        except ValueError as e:
            raise AssertionError(f"perfctl --json {' '.join(args)} printed no JSON ({e}): {out!r}")

    def connect(self, timeout=10.0):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.socket_path)
        return s

    def request(self, req, timeout=10.0):
        """Sends one request on a new connection and returns the decoded
        answer.  req is a JSON-able object (sent as one line) or raw bytes
        (sent as they are).  A daemon that stops reading and closes is fine
        as long as its answer arrives; one that closes without answering or
        answers with something other than one JSON object fails the test."""
        data = req if isinstance(req, bytes) else (json.dumps(req) + "\n").encode()
        with self.connect(timeout) as s:
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon gave up reading; its answer may be queued
            answers = read_answers(s, 1, repr(data[:80]))
        return answers[0] if answers else decode_answer(b"", repr(data[:80]))

    def status(self):
        answer = self.request({"version": 1, "command": "status"})
        assert answer.get("ok") is True, f"status failed: {answer}"
        return answer

    def stop(self, sig=signal.SIGTERM):
        """Asks the daemon to stop with sig and checks it did so cleanly:
        exit status 0 within STOP_TIMEOUT seconds and its socket removed."""
        if self.proc.poll() is not None:
            raise AssertionError(
                f"perfd died before it was asked to stop (status {self.proc.returncode})\n"
                f"stderr:\n{self.stderr()}")
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"perfd did not exit within {STOP_TIMEOUT:.0f} s of {sig.name}\n"
                f"stderr:\n{self.stderr()}")
        assert rc == 0, f"perfd exited with status {rc} on {sig.name}\nstderr:\n{self.stderr()}"
        assert not os.path.exists(self.socket_path), \
            f"perfd left its socket {self.socket_path} behind after {sig.name}"
        if self.own_tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def kill(self):
        """Last-resort cleanup when a test already failed: no checks."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_perfctl(*args, timeout=60):
    """Runs perfctl with exactly ARGS (no --socket added, $PERFD_SOCKET
    removed); returns (rc, stdout, stderr) as text."""
    env = dict(os.environ)
    env.pop("PERFD_SOCKET", None)
    p = subprocess.run([perfctl_binary(), *args], capture_output=True, env=env,
                       timeout=timeout)
    return (p.returncode, p.stdout.decode(errors="replace"),
            p.stderr.decode(errors="replace"))


class NotifySocket:
    """The datagram socket a service manager listens on for sd_notify()."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []

    def wait_ready(self, proc, timeout):
        """Collects notifications until one says READY=1 (True), proc exits
        or timeout seconds pass (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.drain(wait=0.1):
                return True
            if proc.poll() is not None:
                return self.drain(wait=0)
        return False

    def drain(self, wait):
        """Reads what has arrived (waiting up to wait seconds for the first
        datagram); True once any message so far holds READY=1."""
        while select.select([self.sock], [], [], wait)[0]:
            self.messages.append(self.sock.recv(65536).decode(errors="replace"))
            wait = 0
        return any("READY=1" in m.split("\n") for m in self.messages)

    def close(self):
        self.sock.close()


def make_tmpdir():
    # Short, so that socket paths stay far below sun_path's 108 bytes.
    return tempfile.mkdtemp(prefix="perfd-it-")


def spawn_perfd(args, tmpdir, socket_path=None, wrapper=()):
    """Starts build/perfd with ARGS (plus --socket) under a notify socket,
    without waiting, through the command wrapper (a list, e.g. setpriv
    and its options, which must exec perfd) if given.  Returns (proc,
    socket_path, notify, stderr_path)."""
    socket_path = socket_path or os.path.join(tmpdir, "perfd.sock")
    notify = NotifySocket(os.path.join(tmpdir, f"notify-{time.monotonic_ns()}"))
    stderr_path = os.path.join(tmpdir, f"perfd-{time.monotonic_ns()}.stderr")
    env = dict(os.environ)
    env.pop("PERFD_SOCKET", None)
    env["NOTIFY_SOCKET"] = notify.path
    if not any(a == "--no-state" or str(a).startswith("--state-dir") for a in args):
        # each daemon its own state directory, not the machine's
        args = [*args, "--state-dir", os.path.join(tmpdir, "state")]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen([*wrapper, perfd_binary(), "--socket", socket_path, *args],
                                stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                env=env)
    return proc, socket_path, notify, stderr_path


def start_perfd(frequency=None, extra_args=(), tmpdir=None, socket_path=None, wrapper=()):
    """Starts a daemon and waits for its READY=1.  Fails loudly, with the
    daemon's stderr, when it exits first or is not ready in READY_TIMEOUT.
    A tmpdir made here is removed when the daemon stops cleanly, and kept
    (with the daemon's stderr in it) when anything failed."""
    own_tmpdir = tmpdir is None
    tmpdir = tmpdir or make_tmpdir()
    args = list(extra_args)
    if frequency is not None:
        args += ["--frequency", str(frequency)]
    proc, socket_path, notify, stderr_path = spawn_perfd(args, tmpdir, socket_path, wrapper)
    try:
        ready = notify.wait_ready(proc, READY_TIMEOUT)
    finally:
        notify.close()
    if not ready:
        status = proc.poll()
        if status is None:
            proc.kill()
            proc.wait()
            why = f"did not send READY=1 within {READY_TIMEOUT:.0f} s"
        else:
            why = f"exited with status {status} before sending READY=1"
        raise AssertionError(
            f"perfd {' '.join(args)} {why}\nnotifications: {notify.messages}\n"
            f"stderr:\n{_read_text(stderr_path)}")
    assert os.path.exists(socket_path), \
        f"perfd sent READY=1 but {socket_path} does not exist"
    return Perfd(proc, socket_path, tmpdir, frequency, stderr_path, own_tmpdir)


def start_perfd_small_quarantine(quarantine_mb, **kwargs):
    """start_perfd (same arguments) with ASan's quarantine of freed memory
    at quarantine_mb instead of 256 MiB, for tests that bound a sanitized
    daemon's RSS: what the default quarantine holds would be ASan's growth,
    not perfd's.  No effect on a plain build."""
    saved = os.environ.get("ASAN_OPTIONS")
    os.environ["ASAN_OPTIONS"] = ":".join(filter(None, [saved, f"quarantine_size_mb={quarantine_mb}"]))
    try:
        return start_perfd(**kwargs)
    finally:
        if saved is None:
            del os.environ["ASAN_OPTIONS"]
        else:
            os.environ["ASAN_OPTIONS"] = saved


def run_perfd_expect_exit(args, timeout=30, tmpdir=None, socket_path=None, wrapper=()):
    """Runs a perfd that is expected to refuse to start (through wrapper,
    as spawn_perfd).  Returns (status, stderr, ready) where ready says
    whether it (wrongly) sent READY=1."""
    own_tmpdir = tmpdir is None
    tmpdir = tmpdir or make_tmpdir()
    proc, socket_path, notify, stderr_path = spawn_perfd(args, tmpdir, socket_path, wrapper)
    try:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"perfd {' '.join(args)} was expected to exit but still ran after "
                f"{timeout} s\nstderr:\n{_read_text(stderr_path)}")
        ready = notify.drain(wait=0)
    finally:
        notify.close()
    stderr = _read_text(stderr_path)
    if own_tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return proc.returncode, stderr, ready


class Workload:
    """A workload process from build/workloads, with line-wise access to its
    stdout.  Always kill() it at the end (the `workloads` fixture does)."""

    def __init__(self, name, *args, command=None):
        """Runs build/workloads/NAME ARGS, or the given command (a list)
        under that name."""
        self.name = name
        argv = command or [workload_binary(name), *map(str, args)]
        self.proc = subprocess.Popen(argv,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._buf = b""

    @property
    def pid(self):
        return self.proc.pid

    def expect_line(self, prefix, timeout=60):
        """Waits for the next stdout line and checks it starts with prefix;
        returns the line without its newline."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"{self.name} printed no line within {timeout} s "
                                     f"(waiting for {prefix!r})")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"{self.name} ended its output before {prefix!r} "
                                     f"(status {self.proc.wait()})")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        text = line.decode()
        assert text.startswith(prefix), f"{self.name} printed {text!r}, expected {prefix!r}"
        return text

    def finish(self, timeout=120):
        """Waits for the process to end; asserts it exited 0; returns the rest
        of its stdout as text."""
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, \
            f"{self.name} exited with {self.proc.returncode}: {err.decode(errors='replace')}"
        return (self._buf + out).decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def fill_with_unique_stacks(seconds):
    """Runs unique_stacks (a new stack at nearly every sample) on two CPUs
    for seconds, then stops it (running on, it would make the store evict
    its oldest windows, its stack limit, between answers that must be of
    the same samples) and waits for its last samples to reach the store.
    Returns (workload, begin, end): the span, in seconds since the epoch."""
    w = Workload("unique_stacks", 2, 3600)
    try:
        begin = time.time() + 1
        time.sleep(seconds)
        end = time.time()
    finally:
        w.kill()
    time.sleep(1.5)
    return w, begin, end


# --- go tool pprof, the real reader of pprof files ---------------------------

GO = shutil.which("go") or "/usr/bin/go"

# "  1529.53ms 76.59% 76.59%  1535.54ms 76.89%  hot_three_quarters [file:line]"
TOP_ROW = re.compile(r"^\s*(\S+)\s+([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+([\d.]+)%\s+(\S+)(.*)$")


def go_pprof(gohome, path, *args):
    """Runs `go tool pprof ARGS PATH` offline (HOME and caches in gohome,
    the gohome fixture); returns its stdout."""
    assert os.access(GO, os.X_OK), "go is not installed (Debian's golang-go, make deps-test)"
    env = dict(os.environ, HOME=gohome, GOCACHE=os.path.join(gohome, "cache"),
               GOPATH=os.path.join(gohome, "gopath"), GOPROXY="off", GOFLAGS="",
               PPROF_TMPDIR=gohome)
    p = subprocess.run([GO, "tool", "pprof", *args, str(path)], capture_output=True,
                       env=env, timeout=60)
    assert p.returncode == 0, \
        f"go tool pprof {' '.join(args)} exited {p.returncode}: {p.stderr.decode(errors='replace')}"
    return p.stdout.decode(errors="replace")


def top_rows(text):
    """-top's table as [(flat_percent, cum_text, function, rest)]."""
    rows = []
    for line in text.splitlines():
        m = TOP_ROW.match(line)
        if m and m.group(1) != "flat":
            rows.append((float(m.group(2)), m.group(4), m.group(6), m.group(7).strip()))
    return rows


# --- folded stacks -----------------------------------------------------------

_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")


def parse_folded(text):
    """Parses folded output ("comm;root;...;leaf COUNT" per line) into
    {(comm, root, ..., leaf): count}.  Any line that is not of that form
    fails the test: the format is a contract with other tools."""
    stacks = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stack, sep, count = line.rpartition(" ")
        assert sep and stack and count.isdigit() and int(count) > 0, \
            f"folded line {lineno} is not 'comm;frames COUNT': {line!r}"
        frames = tuple(stack.split(";"))
        stacks[frames] = stacks.get(frames, 0) + int(count)
    return stacks


def is_kernel(frame):
    return frame.endswith("_[k]")


def function(frame):
    """A frame's bare function name: without the kernel suffix or a
    "+0x1f" offset, should the encoder add one."""
    if is_kernel(frame):
        frame = frame[: -len("_[k]")]
    return _OFFSET.sub("", frame)


def functions(stack):
    """The bare function names of a stack, comm (its first element) left out."""
    return [function(f) for f in stack[1:]]


def total(stacks):
    return sum(stacks.values())


def count_where(stacks, predicate):
    """Samples whose stack satisfies predicate(stack)."""
    return sum(n for s, n in stacks.items() if predicate(s))


# The root perfd gives a stack cut short in code whose unwind table was
# still being built (walked with frame pointers it may not keep).
UNWIND_PENDING = "[unwind table pending]"
# The root of a Python thread's stacks: its GIL state at the sample.
GIL_FRAMES = ("[GIL: held]", "[GIL: waiting]", "[GIL: released]")


def without_gil(stack):
    """The folded stack (a tuple, comm first) without the GIL state perfd
    roots a Python thread's stacks at, for the tests of what is below it."""
    return tuple(f for f in stack if f not in GIL_FRAMES)


def is_pending(stack):
    """The stack was cut short while a table was being built: its root
    (after comm, a [thread ...] frame and a GIL state) is UNWIND_PENDING."""
    return UNWIND_PENDING in stack[1:4]


def unwind_pending(stacks):
    """Samples flagged as cut short while a table was being built.  Asserts
    they are few: a process's tables come within its first moments.  Under
    ASan, in a daemon that shares two CPUs with the workload, libpython
    3.13's table (77k rows) took 340-400 ms to build here against 45 ms in
    a plain build on an idle CPU, and CI's machine was 1.8 times slower
    than this one: split.py under a daemon started for the test had 352 of
    1,983 samples (18%) waiting here, 622 of 1,962 (32%) on CI.  So a test
    whose run is not much longer than that waits for the tables first
    (await_tables); where the share is checked, at most a tenth of a run
    of seconds may wait for tables, a quarter under ASan (split.py's 4 s
    under 3.13 had 4.7% here)."""
    pending = count_where(stacks, is_pending)
    share = 0.25 if sanitized() else 0.10
    assert pending <= share * total(stacks), \
        f"{pending} of {total(stacks)} samples waited for an unwind table\n{show(stacks)}"
    return pending


# How long await_tables waits: far longer than any table here takes.
TABLES_TIMEOUT = 60


def await_tables(daemon, workload, timeout=TABLES_TIMEOUT, probe_seconds=0.25):
    """Waits until perfd unwinds workload with its tables: snapshots of
    probe_seconds until one holds 10 samples or more and none of them was
    cut short while a table was built.  (A walk through a pending table
    that frame pointers happened to complete is not flagged; what the
    caller measures next is checked for pending samples all the same.)  A
    condition, not a delay: how long the tables take depends on the
    machine (unwind_pending), and a test of what perfd makes of a whole
    stack measures from there.  Returns the stacks seen meanwhile; fails
    with them when the tables are not ready within timeout, or when the
    workload exits first."""
    seen = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert workload.proc.poll() is None, \
            f"{workload.name} exited ({workload.proc.returncode}) before its tables were ready"
        rc, out, err = daemon.perfctl("snapshot", "--pid", str(workload.pid),
                                      "--duration", str(probe_seconds))
        assert rc == 0, f"perfctl snapshot --pid {workload.pid} exited {rc}\nstderr: {err}"
        stacks = parse_folded(out)
        for s, c in stacks.items():
            seen[s] = seen.get(s, 0) + c
        if total(stacks) >= 10 and not count_where(stacks, is_pending):
            return seen
    raise AssertionError(f"{workload.name}'s samples still waited for unwind tables after "
                         f"{timeout} s\n{show(seen)}")


def contains(name):
    """Predicate: the stack holds a frame of function name."""
    return lambda stack: name in functions(stack)


def show(stacks, limit=15):
    """The heaviest stacks, one per line, for failure messages."""
    top = sorted(stacks.items(), key=lambda kv: -kv[1])[:limit]
    return "\n".join(f"  {n:6d} {';'.join(s)}" for s, n in top)


# --- flame graphs in a browser ---------------------------------------------------

CHROMIUM = os.environ.get("PERFD_CHROMIUM") or "/usr/bin/chromium"
BROWSER_DRIVER = Path(__file__).with_name("flamegraph_browser.js")


def open_in_chromium(path, function, shot_dir, *others):
    """Runs flamegraph_browser.js (see that file) on the flame graph at path
    (a page, or an SVG document) for function and others in Debian's
    headless Chromium, its real consumer; returns the driver's report once
    the checks every file must pass hold: no console error or uncaught
    exception, no request beyond the file itself, a screenshot (whose path
    is printed: pytest -s shows it)."""
    node = shutil.which("node") or "/usr/bin/node"
    npm = Path(os.environ.get("PERFD_NPM_DIR") or build_dir() / "npm")
    assert os.access(CHROMIUM, os.X_OK), f"no {CHROMIUM} (Debian's chromium: make deps-test)"
    assert (npm / "node_modules" / "playwright-core").is_dir(), \
        f"no playwright-core under {npm} (make deps-test installs it)"
    shot = Path(shot_dir) / f"{Path(path).name.replace('.', '-')}.png"
    env = dict(os.environ, NODE_PATH=str(npm / "node_modules"), PERFD_CHROMIUM=CHROMIUM,
               PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
    p = subprocess.run([node, str(BROWSER_DRIVER), str(path), function, str(shot), *others],
                       capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, \
        f"{BROWSER_DRIVER.name} exited {p.returncode}: {p.stderr.decode(errors='replace')}"
    report = json.loads(p.stdout)
    assert report["console_errors"] == [] and report["page_errors"] == [], \
        f"{path}: errors in the page: {report['console_errors']} {report['page_errors']}"
    assert report["requests"] == [], f"{path} is not self-contained: it asked for {report['requests']}"
    assert report.get("screenshot") and Path(report["screenshot"]).read_bytes()[:8] == \
        b"\x89PNG\r\n\x1a\n", f"no screenshot of {path}: {report}"
    print(f"\nscreenshot of {Path(path).name} ({report['browser_version']}, loaded in "
          f"{report['load_ms']} ms): {report['screenshot']}")
    return report


def svg_share(report, function):
    """The share (percent) of all that function's outermost frames take in
    the SVG as Chromium rendered it: getBBox widths, each box drawn half a
    pixel short of its frame to leave a gap."""
    frames = report["frames"][function]
    assert frames["count"] > 0, f"no frame of {function} in the SVG"
    return 100.0 * (frames["width"] + 0.5 * len(frames["fills"])) / (report["all_width"] + 0.5)


def check_svg_document(report, path):
    """An SVG Chromium parsed and rendered, as a document and as an image,
    and that python's XML parser takes too."""
    ET.parse(path)  # well-formed XML, or this raises
    assert report["root"] == "svg" and report["root_ns"] == "http://www.w3.org/2000/svg", report
    assert report["parsererror"] == 0, f"{path}: Chromium could not parse it"
    assert report["as_image"]["ok"] and report["as_image"]["width"] == 1200, report["as_image"]


def rgb(colour):
    """(r, g, b) of "#rrggbb"."""
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


# --- snapshots ------------------------------------------------------------------

# Long enough for any workload here to finish even on a loaded machine; a
# snapshot ends early when its process exits, so this is an upper bound.
SNAPSHOT_SECONDS = 60


def snapshot_workload(daemon, workload, duration=SNAPSHOT_SECONDS, comm=None):
    """Snapshots workload through perfctl; asserts success; returns
    (stacks, stderr).  Only the workload's own stacks are expected (comm
    defaults to the workload's name)."""
    rc, out, err = daemon.perfctl("snapshot", "--pid", str(workload.pid),
                                  "--duration", str(duration), timeout=duration + 60)
    assert rc == 0, f"perfctl snapshot exited {rc}\nstderr: {err}\nstdout: {out[:2000]}"
    stacks = parse_folded(out)
    assert stacks, f"snapshot of {workload.name} holds no samples\nstderr: {err}"
    comms = {s[0] for s in stacks}
    expected = comm or workload.name
    assert comms == {expected}, f"snapshot of pid {workload.pid} holds comms {comms}"
    return stacks, err


def finished_range(name, *args):
    """Runs build/workloads/NAME ARGS to its end (asserting exit 0) and waits
    for its last samples to reach the store; returns (pid, selection), the
    selection the --pid/--from/--to arguments of the range that holds the
    whole run, so every query of it is of the very same samples."""
    started = time.time() - 1
    w = Workload(name, *args)
    try:
        w.finish(timeout=120)
    finally:
        w.kill()
    time.sleep(1.5)  # the last samples reach the store
    return w.pid, ("--pid", str(w.pid), "--from", f"{started:.3f}", "--to", f"{time.time():.3f}")


def grow_finished(spawn, big_mib, small_mib):
    """Runs grow BIG_MIB SMALL_MIB (spawn: the `workloads` fixture) to its
    end, grow_big() then grow_small() faulting their memory in, and waits
    for its last memory samples to reach the store; returns the Workload,
    for a --since snapshot of its pid."""
    w = spawn("grow", big_mib, small_mib)
    w.expect_line("ready")
    w.expect_line("touched ", timeout=30)
    w.expect_line("done", timeout=30)
    w.finish()
    time.sleep(1.5)
    return w


# --- Python workloads and frames ---------------------------------------------

PYTHON_WORKLOADS = REPO / "tests" / "workloads" / "python"


def python_workload(name):
    """The absolute path of tests/workloads/python/NAME.py.  Run scripts by
    this path: the interpreter's co_filename, and with it the FILE of every
    Python frame perfd prints, is then absolute and known."""
    return str(PYTHON_WORKLOADS / f"{name}.py")


def marker_line(path, marker):
    """The 1-based number of the one line of the file at path that ends in
    the comment "# MARKER" (say "HOT: slow").  Workloads mark their hot and
    call lines so, and tests never hard-code a line number.  A mention of a
    marker inside a docstring does not end its line, so it does not count."""
    suffix = "# " + marker
    found = [n for n, line in enumerate(Path(path).read_text().splitlines(), 1)
             if line.rstrip().endswith(suffix) and line.split("#")[0].strip()]
    assert len(found) == 1, f"{path}: {len(found)} lines end in {suffix!r}: {found}"
    return found[0]


def pyenv_root():
    """Where pyenv keeps its interpreters: $PYENV_ROOT, else /root/.pyenv."""
    return Path(os.environ.get("PYENV_ROOT") or "/root/.pyenv")


def pyenv_python(minor):
    """The python3 of the newest pyenv-installed CPython 3.MINOR.PATCH (plain
    release builds only: no "t" free-threaded or "-dev" builds), or None."""
    best = None
    versions = pyenv_root() / "versions"
    if not versions.is_dir():
        return None
    for d in versions.iterdir():
        m = re.fullmatch(rf"3\.{minor}\.(\d+)", d.name)
        exe = d / "bin" / "python3"
        if m and os.access(exe, os.X_OK) and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), str(exe))
    return best[1] if best else None


# "QUALNAME (FILE:LINE)", or "QUALNAME (FILE)" under --no-lines.  FILE is
# co_filename: a path ending in .py, or a pseudo-file like "<string>".
_PYTHON_FRAME = re.compile(r"^(?P<name>\S.*?) \((?P<file>[^()]+?)(?::(?P<line>\d+))?\)$")


def python_frame(frame):
    """(qualname, file, line) of a Python frame, line None when the frame
    has no line; None for any other frame (native, kernel, [thread ...])."""
    m = _PYTHON_FRAME.match(frame)
    if not m or not (m.group("file").endswith(".py") or m.group("file").startswith("<")):
        return None
    line = m.group("line")
    return m.group("name"), m.group("file"), int(line) if line is not None else None


class BackgroundSnapshot:
    """`perfctl snapshot --pid PID --duration D EXTRA...` running in the
    background, so that several snapshots (of one process with different
    options, or of several processes) cover the same samples.  Call
    result() once."""

    def __init__(self, daemon, pid, *extra, duration=SNAPSHOT_SECONDS):
        self.pid = pid
        self.duration = duration
        self.args = ["snapshot", "--pid", str(pid), "--duration", str(duration), *extra]
        env = dict(os.environ)
        env.pop("PERFD_SOCKET", None)
        self.proc = subprocess.Popen([perfctl_binary(), "--socket", daemon.socket_path,
                                      *self.args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)

    def output(self):
        """Waits for the snapshot; returns (rc, stdout, stderr) as text."""
        try:
            out, err = self.proc.communicate(timeout=self.duration + 60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"perfctl {' '.join(self.args)} did not end within "
                                 f"{self.duration + 60} s")
        return (self.proc.returncode, out.decode(errors="replace"),
                err.decode(errors="replace"))

    def result(self, comm):
        """Waits for the snapshot; asserts exit 0, some samples and only comm
        in them; returns (stacks, text, stderr) with text the raw output."""
        rc, out, err = self.output()
        assert rc == 0, \
            f"perfctl {' '.join(self.args)} exited {rc}\nstderr: {err}\nstdout: {out[:2000]}"
        return self.check(out, err, comm)

    def check(self, out, err, comm):
        """Parses a successful snapshot's output: (stacks, out, err)."""
        stacks = parse_folded(out)
        assert stacks, f"snapshot of pid {self.pid} holds no samples\nstderr: {err}"
        comms = {s[0] for s in stacks}
        assert comms == {comm}, f"snapshot of pid {self.pid} holds comms {comms}, not {comm!r}"
        return stacks, out, err

    def kill(self):
        """Cleanup: stops the snapshot unless output() has read it."""
        if self.proc.stdout.closed:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def ps_process(daemon, pid, interval=1):
    """pid's entry in `perfctl --json ps --interval INTERVAL` while it lives
    (an exited process's entry does not count), or None."""
    doc = daemon.perfctl_json("ps", "--interval", str(interval))
    assert isinstance(doc.get("processes"), list), f"ps --json has no processes list: {doc}"
    live = [p for p in doc["processes"] if p.get("pid") == pid and not p.get("exited")]
    return live[0] if live else None


def cpu_ticks(pid):
    """utime + stime of pid from /proc/PID/stat (fields 14 and 15), in clock
    ticks: what the kernel says a process ran."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def status_within_deadline(daemon):
    """One status request on a socket with a 1 s timeout; returns (seconds
    it took, answer) and fails the test when there is no answer in time."""
    t0 = time.monotonic()
    try:
        with daemon.connect(timeout=STATUS_DEADLINE) as s:
            s.sendall(b'{"version": 1, "command": "status"}\n')
            lines = read_lines(s, 1)
    except socket.timeout:
        raise AssertionError(f"perfd did not answer status within {STATUS_DEADLINE} s\n"
                             f"where it was: {daemon_stack(daemon)}\n"
                             f"stderr:\n{daemon.stderr()[-4000:]}")
    took = time.monotonic() - t0
    answer = decode_answer(lines[0] if lines else b"", "status")
    assert answer.get("ok") is True, f"status failed: {answer}"
    assert took < STATUS_DEADLINE, f"status took {took:.2f} s"
    return took, answer


_STATUS_POLLER = r"""
import select, socket, sys, time
path, interval = sys.argv[1], float(sys.argv[2])
while True:
    t0 = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(STATUS_DEADLINE)
        s.connect(path)
        s.sendall(b'{"version": 1, "command": "status"}\n')
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    if b'"ok":true' not in buf.replace(b" ", b""):
        sys.exit(f"status failed: {buf[:300]!r}")
    print(f"{time.monotonic() - t0:.6f}", flush=True)
    if select.select([sys.stdin], [], [], interval)[0]:
        break
""".replace("STATUS_DEADLINE", repr(STATUS_DEADLINE))


class StatusPoller:
    """Root's status asked every interval seconds, each on a new connection,
    from a process of its own until stop(): a test thread would share
    Python's lock with the test's own work (reading a big answer), and
    measure that too.  A status not answered within STATUS_DEADLINE fails
    the test at stop()."""

    def __init__(self, daemon, interval=0.02):
        self.proc = subprocess.Popen([sys.executable, "-c", _STATUS_POLLER, daemon.socket_path,
                                      str(interval)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop(self):
        """The latencies (seconds) of every status asked."""
        self.proc.stdin.close()  # its select() sees the end
        out, err = self.proc.stdout.read(), self.proc.stderr.read()
        self.proc.wait(timeout=30)
        assert self.proc.returncode == 0, f"status poller failed: {err[-2000:]}"
        return [float(x) for x in out.split()]


def status_figures(took):
    """'median M, p90 P, max X ms' of status latencies (seconds)."""
    t = sorted(took)
    return (f"median {t[len(t) // 2] * 1000:.1f}, p90 {t[(len(t) * 9) // 10] * 1000:.1f}, "
            f"max {t[-1] * 1000:.1f} ms over {len(t)} answers")


def assert_status_budget(took):
    """The issue's 100 ms for (nearly) every status answer: took are the
    seconds each took (status_within_deadline already failed any past
    STATUS_DEADLINE).  A few answers on this shared two-CPU machine wait
    for a time slice behind other users' work whatever the daemon does:
    up to a tenth may be late (p90 <= 100 ms)."""
    late = [t for t in took if t > STATUS_BUDGET]
    assert len(late) <= len(took) // 10, \
        f"{len(late)} of {len(took)} status answers took over 100 ms " \
        f"({status_figures(took)}): slowest {[round(t * 1000) for t in sorted(late)[-5:]]} ms"


@contextlib.contextmanager
def status_budget(daemon, what):
    """Root's status asked every 20 ms (StatusPoller) while the block runs
    an attack: the issue's 100 ms is asserted of the answers when it ends
    (assert_status_budget), their figures printed under what.  A block that
    fails is not masked by the poller's verdict."""
    poller = StatusPoller(daemon)
    done = False
    try:
        yield
        done = True
    finally:
        try:
            took = poller.stop()
        except AssertionError:
            if done:
                raise
    print(f"{what}: status {status_figures(took)}")
    assert_status_budget(took)


def daemon_stack(daemon):
    """The daemon's threads' stacks (eu-stack), for a failure message."""
    tool = shutil.which("eu-stack")
    if not tool:
        return "(no eu-stack to tell)"
    p = subprocess.run([tool, "-p", str(daemon.pid)], capture_output=True, text=True,
                       timeout=30)
    return p.stdout or p.stderr
