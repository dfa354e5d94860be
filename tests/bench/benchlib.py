"""benchlib.py - what the benchmark phases are built from: starting and
stopping the profilers and the workloads, and reading what the kernel says
they cost.

Every process the benchmark starts goes through Procs, in a session of its
own (so a Ctrl-C meant for `make` does not hit it half-way through a
measurement, and so a workload's forked workers can be ended with it), and
Procs.cleanup() ends exactly those, by process group, whatever happened.

What is measured, and how:
  - CPU time: the sum of sum_exec_runtime over /proc/PID/task/*/schedstat,
    in nanoseconds.  That is user + system time at scheduler precision;
    /proc/PID/stat rounds to clock ticks (10 ms), too coarse for a daemon
    that should use under a millisecond a second.
  - Memory: VmRSS and VmHWM from /proc/PID/status.
  - BPF cost: run_time_ns and run_cnt from /proc/PID/fdinfo/FD of each
    program descriptor the process holds; they only move while
    kernel.bpf_stats_enabled is 1 (BpfStats), which a CpuWindow checks at
    both ends: the sysctl is the whole machine's, and another session may
    turn it off.
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

PERF_EVENT_PROG_TYPE = 7  # BPF_PROG_TYPE_PERF_EVENT in fdinfo's prog_type


class BenchError(Exception):
    """A measurement could not be made; the message says why."""


def log(msg):
    print(f"bench: {msg}", flush=True)


def online_cpus():
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    n = 0
    for part in text.split(","):
        first, _, last = part.partition("-")
        n += int(last or first) - int(first) + 1
    return n


# --- processes ----------------------------------------------------------

class Procs:
    """The processes this run started, so that they all end with it."""

    def __init__(self):
        self.live = []

    def start(self, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=None):
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                start_new_session=True, env=env)
        self.live.append(proc)
        return proc

    def forget(self, proc):
        if proc in self.live:
            self.live.remove(proc)

    def stop(self, proc, sig=signal.SIGTERM, timeout=15.0, group=False):
        """Sends sig to proc (to its whole process group when group is
        true) and waits for it; kills it when it does not go in time.
        Returns its exit status (negative: the signal that ended it)."""
        if proc.poll() is None:
            try:
                if group:
                    os.killpg(proc.pid, sig)
                else:
                    proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log(f"{proc.args[0]} (pid {proc.pid}) ignored {sig.name} for {timeout:.0f} s; killing it")
                self._kill_group(proc)
                proc.wait()
        elif group:
            # The leader is gone, its workers may not be.
            self._kill_group(proc)
        self.forget(proc)
        return proc.returncode

    @staticmethod
    def _kill_group(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def cleanup(self):
        for proc in list(self.live):
            self._kill_group(proc)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self.forget(proc)


def wait_until(predicate, timeout, what, proc=None, interval=0.02):
    """Polls predicate() until it returns something true, and returns that;
    raises BenchError after timeout or when proc exits meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"{proc.args[0]} exited with status {proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# --- what the kernel says a process costs -------------------------------

def cpu_ns(pid):
    """User + system CPU time of every live thread of pid, in ns."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise BenchError(f"process {pid} is gone")
    for tid in tids:
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended between listdir and read
    return total


def memory_kib(pid):
    """(VmRSS, VmHWM) of pid in KiB."""
    rss = hwm = None
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    if rss is None or hwm is None:
        raise BenchError(f"no VmRSS/VmHWM for process {pid}")
    return rss, hwm


def _fd_targets(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append((fd, os.readlink(f"/proc/{pid}/fd/{fd}")))
        except FileNotFoundError:
            pass
    return out


def perf_event_fds(pid):
    """How many perf events pid holds open."""
    try:
        return sum(1 for _, target in _fd_targets(pid) if target == "anon_inode:[perf_event]")
    except FileNotFoundError:
        return 0


def bpf_progs(pid, prog_type=PERF_EVENT_PROG_TYPE):
    """{prog_id: {"run_time_ns", "run_cnt", ...}} for the BPF programs of the
    given type (None: of every type) that pid holds a descriptor of."""
    progs = {}
    try:
        fds = _fd_targets(pid)
    except FileNotFoundError:
        return progs
    for fd, target in fds:
        if target != "anon_inode:bpf-prog":
            continue
        info = {}
        try:
            for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
        except FileNotFoundError:
            continue
        if prog_type is not None and int(info.get("prog_type", -1)) != prog_type:
            continue
        progs[int(info["prog_id"])] = {
            "run_time_ns": int(info.get("run_time_ns", 0)),
            "run_cnt": int(info.get("run_cnt", 0)),
            "tag": info.get("prog_tag", ""),
        }
    return progs


def bpf_prog_name(prog_id):
    """The program's name as the kernel knows it, through bpftool."""
    try:
        out = subprocess.run(["bpftool", "prog", "show", "id", str(prog_id), "-j"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return json.loads(out).get("name", "?")
    except (subprocess.SubprocessError, ValueError, OSError):
        return "?"


def bpf_prog_names():
    """{prog_id: name} of every loaded BPF program, from one bpftool call
    (bpftool gives the whole name from BTF where the kernel keeps only 15
    characters: on_hrtimer_expire, not on_hrtimer_expi)."""
    try:
        out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
        return {p["id"]: p.get("name", "?") for p in json.loads(out)}
    except (subprocess.SubprocessError, ValueError, OSError, KeyError, TypeError) as e:
        raise BenchError(f"bpftool prog show failed: {e}")


class BpfStats:
    """Turns kernel.bpf_stats_enabled on for a with-block and puts the old
    value back when it ends, however it ends (the caller turns SIGTERM and
    SIGHUP into exceptions, and Ctrl-C is one already)."""

    PATH = Path("/proc/sys/kernel/bpf_stats_enabled")

    def __enter__(self):
        self.old = self.PATH.read_text().strip()
        self.PATH.write_text("1\n")
        return self

    @classmethod
    def on(cls):
        """Whether the stats are on now: another session on the machine may
        have put its own old value back in the middle of a window, and
        then run_time_ns and run_cnt stopped moving while the time, and
        perfd's sample count, did not."""
        return cls.PATH.read_text().strip() == "1"

    @classmethod
    def turn_on(cls):
        cls.PATH.write_text("1\n")

    def __exit__(self, *exc):
        try:
            self.PATH.write_text(self.old + "\n")
        except OSError as e:
            log(f"could not restore kernel.bpf_stats_enabled to {self.old}: {e}; "
                f"restore it with: sysctl kernel.bpf_stats_enabled={self.old}")
        return False


class CpuWindow:
    """CPU time, BPF run time and run count of one process between start()
    and stop(), over its programs of prog_type (None: all of them)."""

    def __init__(self, pid, prog_type=PERF_EVENT_PROG_TYPE):
        self.pid = pid
        self.prog_type = prog_type

    def start(self):
        self.stats_were_on = BpfStats.on()
        self.t0 = time.monotonic()
        self.cpu0 = cpu_ns(self.pid)
        self.progs0 = bpf_progs(self.pid, self.prog_type)

    def stop(self):
        self.cpu1 = cpu_ns(self.pid)
        self.t1 = time.monotonic()
        self.progs1 = bpf_progs(self.pid, self.prog_type)
        self.stats_stayed_on = BpfStats.on()
        self.seconds = self.t1 - self.t0
        self.cpu_seconds = (self.cpu1 - self.cpu0) / 1e9
        moved = self.by_program().values()
        self.run_time_ns = sum(ns for ns, _ in moved)
        self.run_cnt = sum(cnt for _, cnt in moved)

    def ns_per_run(self):
        return self.run_time_ns / self.run_cnt if self.run_cnt else None

    def by_program(self):
        """{prog_id: (Δrun_time_ns, Δrun_cnt)} of each program in the window."""
        zero = {"run_time_ns": 0, "run_cnt": 0}
        return {i: (p["run_time_ns"] - self.progs0.get(i, zero)["run_time_ns"],
                    p["run_cnt"] - self.progs0.get(i, zero)["run_cnt"])
                for i, p in self.progs1.items()}


# --- perfd --------------------------------------------------------------

def request(socket_path, req, timeout=10.0):
    """Sends one request line on a new connection and reads the answer: its
    line and, when it says "encoding": "frame" (a binary profile), the
    frame's profile_bytes after it, as "profile" (bytes).  Returns (answer,
    seconds from connect to the last byte, bytes on the socket)."""
    line = (json.dumps(req) + "\n").encode()
    buf = bytearray()
    want = None
    t0 = time.perf_counter()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(socket_path)
        s.sendall(line)
        while want is None or len(buf) < want:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
            if want is None and b"\n" in buf:
                head = buf.index(b"\n") + 1
                answer = json.loads(buf[:head])
                want = head + (answer["profile_bytes"] if answer.get("encoding") == "frame" else 0)
    elapsed = time.perf_counter() - t0
    if want is None or len(buf) < want:
        raise BenchError(f"perfd closed the connection without a whole answer to {req['command']}")
    if want > head:
        answer["profile"] = bytes(buf[head:want])
    if not answer.get("ok"):
        raise BenchError(f"perfd answered {req['command']} with an error: {answer.get('error')}")
    return answer, elapsed, len(buf)


class Perfd:
    """One perfd started for one measurement, on a socket of its own."""

    def __init__(self, procs, binary, tmpdir, frequency, extra=()):
        self.procs = procs
        self.socket = str(Path(tmpdir) / f"perfd-{frequency}-{time.monotonic_ns()}.sock")
        self.stderr_path = Path(tmpdir) / (Path(self.socket).stem + ".err")
        self.frequency = frequency
        argv = [binary, "--socket", self.socket, "--frequency", str(frequency), *extra]
        with open(self.stderr_path, "wb") as err:
            self.proc = procs.start(argv, stderr=err)
        try:
            # Generous: on a 2-CPU machine loaded by other builds (load
            # average 20 and more), loading the BPF programs and reading
            # every process at start took over 30 s.
            wait_until(self._ready, 90, "perfd to answer status", self.proc)
        except BenchError as e:
            self.stop()
            raise BenchError(f"{e}\nperfd stderr:\n{self.stderr()}")

    @property
    def pid(self):
        return self.proc.pid

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def _ready(self):
        try:
            return self.status()
        except (OSError, BenchError, ValueError):
            return None

    def call(self, req, timeout=10.0):
        return request(self.socket, dict({"version": 1}, **req), timeout)

    def status(self):
        return self.call({"command": "status"})[0]

    def stop(self):
        rc = self.procs.stop(self.proc, signal.SIGTERM)
        if rc != 0:
            log(f"perfd exited with status {rc}; its stderr:\n{self.stderr()}")
        return rc


# --- the anchors --------------------------------------------------------

class Bpftrace:
    """`bpftrace -e 'profile:hz:F { BODY }'`, by default the anchor
    `@[kstack, ustack, pid] = count();`.  An END probe clears the map: on
    SIGINT bpftrace would otherwise symbolize and print every stack it
    counted, which nobody reads here and which took ~19 s a stop on a
    loaded 2-CPU machine.  END is a uprobe on bpftrace itself, not a
    perf_event program, so it is not in what is measured."""

    ANCHOR = "@[kstack, ustack, pid] = count();"

    # Off-CPU time by stack as bcc's offcputime and `perf record
    # --off-cpu` take it: at every switch out, the time and both stacks of
    # the task leaving (the tracepoint runs in it); at its switch in, its
    # time away summed under them.  Every block, no sampling.
    OFFCPU = ("tracepoint:sched:sched_switch { "
              "if (args->prev_pid != 0) { @start[args->prev_pid] = nsecs; "
              "@ks[args->prev_pid] = kstack; @us[args->prev_pid] = ustack; } "
              "$s = @start[args->next_pid]; "
              "if ($s != 0) { @t[@ks[args->next_pid], @us[args->next_pid]] = sum(nsecs - $s); "
              "delete(@start[args->next_pid]); } } "
              "END { clear(@start); clear(@ks); clear(@us); clear(@t); }")

    def __init__(self, procs, tmpdir, frequency, cpus, body=ANCHOR, program=None):
        """program: a whole bpftrace program instead of the profile probe
        (its END clears its maps itself); attached when bpftrace holds a
        BPF program."""
        self.procs = procs
        if program is None:
            program = f"profile:hz:{frequency} {{ {body} }} END {{ clear(@); }}"
            attached = lambda: bpf_progs(self.proc.pid) and perf_event_fds(self.proc.pid) >= cpus  # noqa: E731
        else:
            attached = lambda: bpf_progs(self.proc.pid, None)  # noqa: E731
        self.out_path = Path(tmpdir) / f"bpftrace-{frequency}-{time.monotonic_ns()}.out"
        with open(self.out_path, "wb") as out:
            self.proc = procs.start(["bpftrace", "-e", program], stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(attached, 60, "bpftrace to attach its probes", self.proc)
        except BenchError as e:
            self.stop()
            raise BenchError(f"{e}\nbpftrace output:\n{self.out_path.read_text(errors='replace')[-2000:]}")

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        # Its maps are printed on SIGINT; nobody reads them here, but it is
        # the ordinary way out and it detaches its probes itself.
        return self.procs.stop(self.proc, signal.SIGINT, timeout=20)


class PerfRecord:
    """`perf record -F F -g -a -e cpu-clock`: system-wide, frame-pointer
    call graphs, the same software event perfd uses.  -B skips the build-id
    pass at the end (it happens after every measurement window anyway, and
    costs seconds)."""

    def __init__(self, procs, tmpdir, frequency, cpus, name="perf", extra=()):
        """extra: more options (--off-cpu)."""
        self.procs = procs
        self.data = str(Path(tmpdir) / f"{name}-{frequency}-{time.monotonic_ns()}.data")
        self.err_path = Path(self.data + ".err")
        argv = ["perf", "record", "-F", str(frequency), "-g", "-a", "-e", "cpu-clock",
                "-B", *extra, "-o", self.data]
        with open(self.err_path, "wb") as err:
            self.proc = procs.start(argv, stderr=err)
        try:
            wait_until(lambda: perf_event_fds(self.proc.pid) >= cpus, 60,
                       "perf record to open its events", self.proc)
        except BenchError as e:
            self.stop()
            raise BenchError(f"{e}\nperf stderr:\n{self.err_path.read_text(errors='replace')[-2000:]}")

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        rc = self.procs.stop(self.proc, signal.SIGINT, timeout=60)
        if rc not in (0, -signal.SIGINT, 130):
            log(f"perf record exited with status {rc}: {self.err_path.read_text(errors='replace')[-500:]}")
        return rc

    def report(self, *args):
        """Runs `perf report -i DATA --stdio ARGS` and returns its output."""
        r = subprocess.run(["perf", "report", "-i", self.data, "--stdio", *args],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise BenchError(f"perf report {' '.join(args)} failed: {r.stderr[-500:]}")
        return r.stdout
