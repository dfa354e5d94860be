"""perfctl top against the real daemon: batch frames checked against what the
workloads really did, and the live screen driven through tmux, a real
terminal, the way a person uses it.

- spin (100 % of a CPU in spin_burn) and duty 50 (50 % in duty_burn):
  `top -b -n 2 -d 2 --json` lists both, each with its CPU % within 10 points
  of the truth (its own CPU time from /proc/PID/stat over the very window
  the frame counts), the busier first whenever the truth tells them apart
  (on a loaded machine it may not), and its own function on top;
- flat 300 --touch holds 300 MiB (and keeps using them, so it is active):
  its RSS and peak say so; leak 8 grows by 8 MiB a second: a positive
  growth rate of that order;
- the screen (tmux, 160x50): the process list, `a` lists every live
  process, and scrolled to its end and back to the active ones (`a`) the
  list starts at the top again, `m` sorts by RSS, `/` with
  the unique name of a copy of spin leaves that process, Enter shows its
  functions with spin_burn on top (self and total %), Enter on it shows its
  caller main, `W` switches to the wait view and back, `q` gives the shell its prompt back with the terminal modes
  as they were: the tty's (stty -g) and the pane's as tmux keeps them (the
  alternate screen, on while top ran, off again; cursor, keypad, mouse);
- perfd killed (SIGKILL) under a running top: top exits 1 saying perfd
  closed the connection, terminal restored;
- the terminal resized: top redraws at the new size; Ctrl-C: exit 0,
  terminal restored.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid

import pytest

import perfdtest

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


class CpuTruth:
    """Polls the CPU time of some pids every 50 ms with CLOCK_MONOTONIC
    timestamps, so the CPU share of each over any window can be read back."""

    def __init__(self, pids):
        self.pids = pids
        self.points = []  # (monotonic, {pid: ticks})
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.is_set():
            self.points.append((time.monotonic(), {p: perfdtest.cpu_ticks(p) for p in self.pids}))
            time.sleep(0.05)

    def stop(self):
        self.done.set()
        self.thread.join()

    def ticks_at(self, pid, t):
        """The pid's ticks at time t, interpolated between polls."""
        pts = self.points
        for (t0, a), (t1, b) in zip(pts, pts[1:]):
            if t0 <= t <= t1:
                return a[pid] + (b[pid] - a[pid]) * (t - t0) / (t1 - t0)
        raise AssertionError(f"no CPU time polled around {t:.3f} "
                             f"(polled {pts[0][0]:.3f}..{pts[-1][0]:.3f})")

    def percent(self, pid, start, end):
        return 100.0 * (self.ticks_at(pid, end) - self.ticks_at(pid, start)) / CLK_TCK / (end - start)


def batch_frames(perfd, *args, count=2, delay=2):
    """Runs `top -b --json -n COUNT -d DELAY ARGS`; returns its frames, each
    with the CLOCK_MONOTONIC window it counts (perfd's window_start and
    window_end: whole seconds, the last ones before its "time")."""
    offset = time.time() - time.monotonic()
    rc, out, err = perfd.perfctl("--json", "top", "-b", "-n", str(count), "-d", str(delay), *args,
                                 timeout=60)
    assert rc == 0, f"top -b exited {rc}: {err}"
    frames = [json.loads(line) for line in out.splitlines()]
    assert len(frames) == count, f"{count} frames expected, one JSON object a line: {out[:500]}"
    for f in frames:
        assert f["ok"] is True and f["view"] == "processes", f
        start, end = f["window_start"] - offset, f["window_end"] - offset
        assert abs(end - start - f["interval_seconds"]) < 1e-3, f
        assert 0 <= f["time"] - f["window_end"] < 1, f
        f["window"] = (start, end)
    return frames


def row(frame, pid):
    rows = [p for p in frame["processes"] if p["pid"] == pid]
    assert rows, f"pid {pid} is not in the frame: {[(p['pid'], p['comm']) for p in frame['processes']]}"
    return rows[0]


def test_batch_cpu_shares_order_and_top_functions(perfd, workloads):
    spin = workloads("spin", 60, 0)
    duty = workloads("duty", 50, 60)
    duty.expect_line("ready")
    truth = CpuTruth([spin.pid, duty.pid])
    try:
        time.sleep(3.2)  # the first frame's window (whole seconds) is polled whole
        frames = batch_frames(perfd)
        time.sleep(0.1)
    finally:
        truth.stop()
    for f in frames:
        shares = {}
        for w, function in ((spin, "spin_burn"), (duty, "duty_burn")):
            r = row(f, w.pid)
            real = truth.percent(w.pid, *f["window"])
            shares[w.pid] = real
            assert abs(r["cpu_percent"] - real) <= 10, \
                f"{w.name}: top says {r['cpu_percent']:.1f} %, it used {real:.1f} % in {f['window']}"
            assert r["top_function"] == function, r
            assert r["top_function_percent"] > 50, r
            for key in ("pid", "comm", "cpu_percent", "rss_bytes", "peak_rss_bytes", "user",
                        "rss_growth_bytes_per_second", "top_function"):
                assert key in r, (key, r)
            assert r["user"] == "root" and r["comm"] == w.name, r
        order = [p["pid"] for p in f["processes"]]
        if shares[spin.pid] - shares[duty.pid] >= 15:
            assert order.index(spin.pid) < order.index(duty.pid), (shares, order)
    assert frames[1]["host"]["samples_per_second"] > 0 and frames[1]["host"]["daemon_rss_bytes"] > 0


def test_batch_memory_held_and_growing(perfd, workloads):
    flat = workloads("flat", 300, 60, "--touch", "--pause", "0")
    leak = workloads("leak", 8, 60, "--pause", "0")
    flat.expect_line("ready")
    flat.expect_line("allocated")
    leak.expect_line("ready")
    time.sleep(3)  # a few RSS readings of the leak to take a slope from
    frames = batch_frames(perfd, "--sort", "rss")
    last = frames[-1]
    held = row(last, flat.pid)
    assert 300 * MIB <= held["rss_bytes"] <= 340 * MIB, held
    assert 300 * MIB <= held["peak_rss_bytes"] <= 400 * MIB, held
    assert "memset" in held["top_function"], held  # use_memory()'s memset: the leaf
    growing = row(last, leak.pid)
    assert 2 * MIB <= growing["rss_growth_bytes_per_second"] <= 32 * MIB, growing
    rss = [p["rss_bytes"] for p in last["processes"]]
    assert rss == sorted(rss, reverse=True), "--sort rss: largest RSS first"


def test_the_function_table_is_written_on_a_lane(perfd, workloads):
    """A process's function view: its table (callers, callees) is computed
    from the model on a lane (api/encode_lane.h), not on the loop, where
    it took 55 ms for a 10 s window of ~40k unique stacks; the answer names
    the function the workload spins in, and the lanes count it."""
    spin = workloads("spin", 30, 0)
    time.sleep(2)
    before = perfdtest.status_within_deadline(perfd)[1]["loop"]
    rc, out, err = perfd.perfctl("--json", "top", "-b", "-n", "1", "-d", "1", "--pid",
                                 str(spin.pid), timeout=60)
    after = perfdtest.status_within_deadline(perfd)[1]["loop"]
    assert rc == 0, err
    frame = json.loads(out.splitlines()[0])
    assert frame["view"] == "functions" and frame["pid"] == spin.pid, str(frame)[:500]
    assert frame["functions"][0]["function"] == "spin_burn", str(frame)[:1000]
    assert after["answers_written_on_lanes"] - before["answers_written_on_lanes"] == 1, \
        (before, after)
    assert after["answers_writing"] == 0, after


# --- the screen, through tmux ------------------------------------------------

class Tmux:
    """A detached tmux session of 160x50 running a plain bash, on a server of
    its own (-L), so the test owns everything it starts."""

    PROMPT = "top-test$"  # PS1 adds a space, which capture-pane trims

    def __init__(self, tmp_path):
        self.server = f"perfd-top-{uuid.uuid4().hex[:8]}"
        env = dict(os.environ, PS1=self.PROMPT + " ", TERM="xterm-256color")
        env.pop("PERFD_SOCKET", None)
        subprocess.run(["tmux", "-L", self.server, "-f", "/dev/null", "new-session", "-d",
                        "-x", "160", "-y", "50", "bash", "--norc", "--noprofile"],
                       check=True, env=env, cwd=tmp_path)
        self.wait_for(lambda s: self.PROMPT in s, "the first prompt")

    def run(self, *args):
        return subprocess.run(["tmux", "-L", self.server, *args], check=True,
                              capture_output=True, text=True).stdout

    def keys(self, *keys):
        self.run("send-keys", "-t", "0", *keys)

    def type(self, text):
        self.run("send-keys", "-t", "0", "-l", text)

    def screen(self):
        return self.run("capture-pane", "-t", "0", "-p")

    # the modes a program can switch the pane into, as tmux keeps them:
    # the alternate screen, the cursor shown, application keypad and
    # cursor keys, mouse reporting, insert, origin and wrap modes
    MODES = ("alternate_on", "cursor_flag", "keypad_flag", "keypad_cursor_flag", "mouse_any_flag",
             "insert_flag", "origin_flag", "wrap_flag")

    def modes(self):
        """The pane's MODES, by name, from tmux itself."""
        values = self.run("display-message", "-t", "0", "-p",
                          " ".join(f"#{{{m}}}" for m in self.MODES)).split()
        assert len(values) == len(self.MODES), f"tmux has not all of {self.MODES}: {values}"
        return dict(zip(self.MODES, values))

    def wait_for(self, test, what, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            if test(s):
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never showed {what}:\n{s}")
            time.sleep(0.2)

    def kill(self):
        subprocess.run(["tmux", "-L", self.server, "kill-server"], capture_output=True)


@pytest.fixture
def tmux(tmp_path):
    t = Tmux(tmp_path)
    yield t
    t.kill()


def start_top(tmux, socket_path, tmp_path):
    """Notes the terminal's modes (stty's and the pane's), then runs perfctl
    top; returns its first screen, once top has the alternate screen."""
    tmux.modes_before = tmux.modes()
    assert tmux.modes_before["alternate_on"] == "0", tmux.modes_before
    tmux.type(f"stty -g > {tmp_path}/stty.before; {perfdtest.perfctl_binary()} "
              f"--socket {socket_path} top; echo EXIT=$?")
    tmux.keys("Enter")
    screen = tmux.wait_for(lambda s: "perfd top - " in s and "TOP FUNCTION" in s, "top's process list")
    assert tmux.modes()["alternate_on"] == "1", "top does not draw on the alternate screen"
    return screen


def exit_status(screen):
    """What `echo EXIT=$?` printed after top, on a line of its own (the
    command line typed holds "EXIT=$?"), or None."""
    m = re.search(r"^EXIT=(\d+)$", screen, re.M)
    return int(m.group(1)) if m else None


def exited(screen):
    return exit_status(screen) is not None


def check_restored(tmux, tmp_path, screen):
    """The shell has its prompt back, top's screen is gone, and the pane's
    modes (off the alternate screen, cursor shown, keypad and mouse modes
    reset, as tmux has them) and the tty's (stty -g) are the ones before
    top."""
    assert tmux.modes() == tmux.modes_before, \
        f"top left the pane's modes changed: {tmux.modes_before} -> {tmux.modes()}"
    assert "perfd top - " not in screen, f"top's screen was left behind:\n{screen}"
    tmux.type(f"stty -g > {tmp_path}/stty.after")
    tmux.keys("Enter")
    tmux.wait_for(lambda s: os.path.exists(f"{tmp_path}/stty.after") and
                  s.rstrip().endswith(Tmux.PROMPT), "the prompt after stty")
    time.sleep(0.2)
    before = (tmp_path / "stty.before").read_text()
    after = (tmp_path / "stty.after").read_text()
    assert before == after, f"terminal modes changed: {before!r} -> {after!r}"


def rows_of(screen):
    """The process rows of a screen: (pid, rss column) below the titles."""
    lines = screen.splitlines()
    start = next(i for i, l in enumerate(lines) if "TOP FUNCTION" in l) + 1
    out = []
    for l in lines[start:]:
        m = re.match(r"\s*(\d+) \S+\s+.{15} .{22} +[\d.]+ +[\d.]+ +(\S+) ", l)
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


def size_bytes(text):
    units = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return float(text[:-1]) * units[text[-1]]


SLEEPERS = 60


def test_screen_sort_filter_functions_callers_and_quit(perfd, workloads, tmux, tmp_path):
    # a copy of spin under a name no other process has, to filter on
    name = f"tsp{os.getpid() % 100000}"
    binary = tmp_path / name
    shutil.copy(perfdtest.workload_binary("spin"), binary)
    spin = workloads(name, command=[str(binary), "60", "0"])
    flat = workloads("flat", 64, 60, "--touch", "--pause", "0")
    flat.expect_line("ready")
    # more live processes than a 50-row pane shows, however few the machine
    # runs (a fresh one may have fewer than a page): perfd knows each by
    # the RSS its start faulted in
    for i in range(SLEEPERS):
        workloads(f"sleeper {i}", command=["sleep", "120"])
    time.sleep(2)

    screen = start_top(tmux, perfd.socket_path, tmp_path)
    assert "PID USER" in screen and "%CPU" in screen and "%WAIT" in screen and "by CPU" in screen, \
        screen
    assert rows_of(screen), f"no process rows:\n{screen}"

    # every live process, scrolled to the last page; back to the active
    # ones, which are fewer than the rows scrolled past: the list starts
    # at the top again rather than past its end
    tmux.keys("a")
    screen = tmux.wait_for(lambda s: re.search(r"Processes: \d+ live", s) and rows_of(s),
                           "every live process")
    page = len(rows_of(screen))
    for _ in range(6):
        tmux.keys("NPage")
    tmux.wait_for(lambda s: 0 < len(rows_of(s)) < page, "the last page of live processes")
    tmux.keys("a")
    screen = tmux.wait_for(lambda s: re.search(r"Processes: \d+ active", s) and
                           spin.pid in [p for p, _ in rows_of(s)], "the active processes from the top")

    tmux.keys("m")
    screen = tmux.wait_for(lambda s: "by RSS" in s, "the list sorted by RSS")
    screen = tmux.wait_for(lambda s: len(rows_of(s)) >= 2, "rows sorted by RSS")
    rss = [size_bytes(r) for _, r in rows_of(screen)]
    assert rss == sorted(rss, reverse=True), f"not sorted by RSS:\n{screen}"
    pids = [p for p, _ in rows_of(screen)]
    if flat.pid in pids and spin.pid in pids:
        assert pids.index(flat.pid) < pids.index(spin.pid), screen

    tmux.keys("/")
    tmux.type(name)
    tmux.keys("Enter")
    screen = tmux.wait_for(lambda s: f"filter: {name}" in s and rows_of(s)
                           and all(p == spin.pid for p, _ in rows_of(s)), f"only {name}")

    tmux.keys("Enter")
    screen = tmux.wait_for(lambda s: f"Functions of pid {spin.pid} ({name})" in s and
                           re.search(r"spin_burn", s), "the functions of the workload")
    lines = screen.splitlines()
    hot = next(l for l in lines if re.match(r"\s*[\d.]+% +[\d.]+% .* spin_burn ", l))
    self_pct, total_pct = (float(x) for x in re.findall(r"([\d.]+)%", hot)[:2])
    assert self_pct > 80 and total_pct >= self_pct and "spin.c:" in hot, hot
    first_row = lines[next(i for i, l in enumerate(lines) if "FUNCTION" in l and "SELF%" in l) + 1]
    assert "spin_burn" in first_row, f"spin_burn is not on top by self:\n{screen}"

    tmux.keys("Enter")  # the selection starts on the first row: spin_burn
    screen = tmux.wait_for(lambda s: "Callers (who calls spin_burn" in s, "spin_burn's callers")
    callers = screen.split("Callers (who calls spin_burn", 1)[1].split("Callees", 1)[0]
    assert re.search(r"\d+\.\d+%\s+main\s+spin\.c:\d+", callers), screen
    assert re.search(r"spin_burn \(spin\.c:\d+\) in pid \d+ .*: self [\d.]+%, total [\d.]+%", screen), screen

    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Functions of pid" in s, "the function list again (Esc)")
    # the wait view and back: W switches the values to off-CPU time
    tmux.keys("W")
    tmux.wait_for(lambda s: f"Functions of pid {spin.pid} ({name}): off-CPU time" in s and
                  "W: CPU" in s and "SELF/s" in s, "the wait view (W)")
    tmux.keys("W")
    tmux.wait_for(lambda s: f"Functions of pid {spin.pid} ({name}): CPU samples" in s,
                  "CPU samples again (W)")
    tmux.keys("q")
    screen = tmux.wait_for(exited, "top's exit")
    assert exit_status(screen) == 0, screen
    check_restored(tmux, tmp_path, tmux.wait_for(lambda s: s.rstrip().endswith(Tmux.PROMPT),
                                                 "the prompt"))


def test_screen_perfd_killed(environment, tmux, tmp_path):
    daemon = perfdtest.start_perfd()
    try:
        start_top(tmux, daemon.socket_path, tmp_path)
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait(timeout=10)
        screen = tmux.wait_for(exited, "top's exit after perfd was killed")
        assert exit_status(screen) == 1, screen
        assert "perfd closed the connection" in screen, screen
        check_restored(tmux, tmp_path, screen)
    finally:
        daemon.kill()
        shutil.rmtree(daemon.tmpdir, ignore_errors=True)


def test_top_refuses_uncapped_requests_and_unknown_pids(perfd):
    """Every size a client can ask of a refresh is capped, and a pid perfd
    does not know answers no_such_process (perfctl: exit 4)."""
    for extra in ({"rows": 1001}, {"depth": 9}, {"offset": 100001}, {"interval": 61},
                  {"view": "functions", "function": "x" * 1024}, {"sort": "self"}):
        answer = perfd.request(dict({"version": 1, "command": "top"}, **extra))
        assert answer["ok"] is False and answer["error"]["code"] == "bad_request", (extra, answer)
    answer = perfd.request({"version": 1, "command": "top", "view": "functions", "pid": 2 ** 31 - 1})
    assert answer["error"]["code"] == "no_such_process", answer
    rc, out, err = perfd.perfctl("top", "-b", "-n", "1", "--pid", str(2 ** 31 - 1))
    assert rc == 4 and "no process with pid" in err, (rc, out, err)
    rc, out, err = perfd.perfctl("top")  # no terminal here
    assert rc == 2 and "needs a terminal" in err, (rc, err)


def test_screen_ctrl_c_and_resize(perfd, tmux, tmp_path):
    """A resize redraws to the new size, and Ctrl-C ends top as q does: exit
    0, the terminal as it was."""
    start_top(tmux, perfd.socket_path, tmp_path)
    tmux.run("resize-window", "-t", "0", "-x", "120", "-y", "30")
    tmux.wait_for(lambda s: len(s.splitlines()) == 30 and "TOP FUNCTION" in s and
                  s.splitlines()[-1].startswith(("selected:", "q: quit")), "top redrawn at 120x30")
    tmux.keys("C-c")
    screen = tmux.wait_for(exited, "top's exit on Ctrl-C")
    assert exit_status(screen) == 0, screen
    check_restored(tmux, tmp_path, screen)
