"""Continuous export (issue 14): the configuration file and SIGHUP, pprof
files in output-dir, and pushes to Pyroscope's ingest API, against the real
daemon; every file and request body is read by go tool pprof.

Two daemons, each exporting every 2 s (the shortest interval that still
holds a few hundred samples of a burning workload at 99 Hz): one writes
files and is steered by rewriting its configuration file and sending
SIGHUP (limits, a read-only directory); one pushes to a small HTTP receiver
on 127.0.0.1 that this module runs in a thread, stopped for 10 s to show
retries and drops while sampling goes on.
"""

import gzip
import http.server
import os
import re
import signal
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

import perfdtest
from perfdtest import go_pprof, top_rows

INTERVAL = 2


def wait_for(what, predicate, timeout=30.0, step=0.2):
    """Polls predicate until it returns something true; returns that."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def exporter(status, name):
    for e in status["export"]["exporters"]:
        if e["name"] == name:
            return e
    return None


def reload(daemon, config_path, text):
    """Rewrites the configuration file and sends SIGHUP; returns once the
    daemon logged the outcome."""
    before = daemon.stderr().count("eload")
    Path(config_path).write_text(text)
    os.kill(daemon.pid, signal.SIGHUP)
    wait_for("the daemon to log the reload", lambda: daemon.stderr().count("eload") > before)


# --- the configuration file ----------------------------------------------


def test_a_bad_configuration_file_is_an_error_naming_its_line(tmp_path):
    conf = tmp_path / "perfd.conf"
    conf.write_text("# perfd\n[perfd]\nfrequency = 99\ninterval = soon\n")
    status, err, ready = perfdtest.run_perfd_expect_exit(["--config", str(conf)])
    assert status == 2 and not ready, f"perfd exited {status}, ready={ready}:\n{err}"
    assert f"{conf}:4: interval" in err, f"the error does not name {conf}:4:\n{err}"

    conf.write_text("frequency = 99\nsampling = fast\n")
    status, err, _ = perfdtest.run_perfd_expect_exit(["--config", str(conf)])
    assert status == 2 and f"{conf}:2: unknown option 'sampling'" in err, err

    status, err, _ = perfdtest.run_perfd_expect_exit(["--config", str(tmp_path / "missing.conf")])
    assert status == 2 and "missing.conf" in err, err


# --- files ---------------------------------------------------------------


@pytest.fixture(scope="module")
def files_daemon(environment, tmp_path_factory):
    base = tmp_path_factory.mktemp("export-files")
    out = base / "out"
    out.mkdir()
    conf = base / "perfd.conf"
    conf.write_text(f"[perfd]\noutput-dir = {out}\ninterval = {INTERVAL}s\nlabel = team=perf\n")
    daemon = perfdtest.start_perfd(extra_args=["--config", str(conf)])
    yield daemon, out, conf
    daemon.stop()


def profile_files(out):
    return sorted(p for p in out.iterdir() if p.name.endswith(".pb.gz"))


def test_files_appear_whole_and_load_in_pprof(files_daemon, workloads, gohome):
    """Every file seen under its final name is already a whole gzip stream
    (written under a temporary name, renamed when complete); the spinner's
    CPU file names host, time, pid and comm, and go tool pprof finds its hot
    function and the labels in it."""
    daemon, out, _ = files_daemon
    w = workloads("spin", 3, 0)
    pattern = re.compile(rf"^[A-Za-z0-9._-]+_\d{{8}}T\d{{6}}Z_{w.pid}_spin\.cpu\.pb\.gz$")
    seen = set()

    def spin_file():
        for p in profile_files(out):
            if p.name not in seen:
                try:
                    gzip.decompress(p.read_bytes())
                except FileNotFoundError:
                    continue  # pruned meanwhile
                except (OSError, EOFError) as e:
                    raise AssertionError(f"{p} is not a whole gzip file under its final name: {e}")
                seen.add(p.name)
        return [out / n for n in sorted(seen) if pattern.match(n)]

    files = wait_for("a CPU file of the spinner", spin_file, timeout=20, step=0.05)
    w.finish(timeout=60)
    text = go_pprof(gohome, files[0], "-top")
    rows = top_rows(text)
    assert rows and rows[0][2] == "spin_burn", f"go tool pprof -top of {files[0]}:\n{text}"
    tags = go_pprof(gohome, files[0], "-tags")
    for tag in ("comm", "pid", "hostname", "team"):
        assert re.search(rf"^\s*{tag}:", tags, re.M), f"no {tag} label in {files[0]}:\n{tags}"
    assert str(w.pid) in tags and "perf" in tags, tags
    status = daemon.status()
    files_state = exporter(status, "files")
    assert files_state["sent"] > 0 and files_state["state"] == "ok", status["export"]
    assert status["config"]["output-dir"] == str(out), status["config"]
    assert not [p for p in out.iterdir() if p.name.startswith(".perfd-tmp-")
                and time.time() - p.stat().st_mtime > 5], "temporary files left behind"


def test_age_and_size_limits_remove_the_oldest_files(files_daemon, workloads):
    """Files past output-max-age go; then, past output-max-bytes, the oldest
    first, so the newest profiles stay.  Files that are not profiles stay."""
    daemon, out, conf = files_daemon
    now = time.time()
    old = out / "host_20200101T000000Z_1_old.cpu.pb.gz"
    old.write_bytes(b"x" * 1000)
    os.utime(old, (now - 3 * 3600, now - 3 * 3600))
    fillers = []
    for i in range(8):  # 8 x 64 KiB, one minute apart, oldest first
        p = out / f"host_20200101T0000{i:02d}Z_1_filler.cpu.pb.gz"
        p.write_bytes(b"y" * 65536)
        os.utime(p, (now - 3000 + 60 * i, now - 3000 + 60 * i))
        fillers.append(p)
    notes = out / "notes.txt"
    notes.write_text("not a profile\n")
    os.utime(notes, (now - 86400 * 30, now - 86400 * 30))
    reload(daemon, conf, f"[perfd]\noutput-dir = {out}\ninterval = {INTERVAL}s\nlabel = team=perf\n"
                         "output-max-age = 1h\noutput-max-bytes = 300K\n")
    w = workloads("spin", 2, 0)
    wait_for("the old file to be removed", lambda: not old.exists(), timeout=20)
    wait_for("the fillers to fit the limit", lambda: sum(
        p.stat().st_size for p in fillers if p.exists()) <= 300 * 1024, timeout=20)
    w.finish(timeout=60)
    kept = [p.exists() for p in fillers]
    assert kept == sorted(kept), f"not the oldest went first: {kept}"
    assert kept[-1] is False or sum(kept) <= 4, kept
    assert notes.exists(), "a file that is not a profile was removed"
    assert any(p.name.endswith(".pb.gz") and "filler" not in p.name for p in profile_files(out)), \
        "the daemon's own newest files were removed"


def test_a_read_only_directory_is_reported_and_retried(files_daemon, workloads, tmp_path):
    """Writing into a read-only file system fails: status says so (state
    retrying, the error), sampling goes on, and once the file system is
    writable again the files arrive."""
    daemon, out, conf = files_daemon
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,ro", "perfd-test", str(ro)], check=True)
    try:
        reload(daemon, conf, f"[perfd]\noutput-dir = {ro}\ninterval = {INTERVAL}s\n")
        before = daemon.status()["samples"]["received"]
        w = workloads("spin", 4, 0)
        st = wait_for("the files exporter to report the error", lambda: (
            lambda s: s if (exporter(s, "files") or {}).get("state") == "retrying" else None)(
                daemon.status()), timeout=20)
        e = exporter(st, "files")
        assert "Read-only file system" in (e["last_error"] or ""), e
        assert e["retries"] > 0 and e["target"] == str(ro), e
        assert daemon.alive(), daemon.stderr()
        assert st["samples"]["received"] > before, "sampling stopped"
        subprocess.run(["mount", "-o", "remount,rw", str(ro)], check=True)
        wait_for("files once the directory is writable", lambda: profile_files(ro), timeout=20)
        w.finish(timeout=60)
        e = wait_for("the exporter to recover", lambda: (
            lambda x: x if x["state"] == "ok" else None)(exporter(daemon.status(), "files")))
        assert e["sent"] > 0, e
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)
        Path(conf).write_text(f"[perfd]\noutput-dir = {out}\ninterval = {INTERVAL}s\n")
        os.kill(daemon.pid, signal.SIGHUP)


# --- Pyroscope -------------------------------------------------------------


class Receiver:
    """Pyroscope's ingest endpoint as far as the test needs it: records
    every POST (path, query, headers, body) and answers 200; stop() closes
    the listening socket, start() opens it again on the same port."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        self.server = None
        self.port = 0

    def start(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                url = urllib.parse.urlsplit(self.path)
                with receiver.lock:
                    receiver.requests.append({
                        "path": url.path, "query": urllib.parse.parse_qs(url.query),
                        "headers": dict(self.headers), "body": body, "time": time.time()})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def snapshot(self):
        with self.lock:
            return list(self.requests)


NAME = re.compile(r"^([A-Za-z0-9._-]+)\{(.*)\}$")


def parse_name(name):
    """Pyroscope's name=SERVICE{k=v,...} as (service, {k: v})."""
    m = NAME.match(name)
    assert m, f"name {name!r} is not SERVICE{{k=v,...}}"
    labels = dict(kv.split("=", 1) for kv in m.group(2).split(",") if kv)
    return m.group(1), labels


@pytest.fixture(scope="module")
def push_daemon(environment, tmp_path_factory):
    base = tmp_path_factory.mktemp("export-push")
    receiver = Receiver()
    receiver.start()
    conf = base / "perfd.conf"
    text = (f"[perfd]\npush-url = http://127.0.0.1:{receiver.port}/\ninterval = {INTERVAL}s\n"
            "push-tenant = team-a\npush-bearer-token = s3cret\nexport-queue-bytes = 128K\n"
            "push-timeout = 2s\nlabel = team=perf\n")
    conf.write_text(text)
    daemon = perfdtest.start_perfd(extra_args=["--config", str(conf)])
    yield daemon, receiver, conf, text
    daemon.stop()
    receiver.stop()


def requests_of(receiver, pid, since=0.0):
    out = []
    for r in receiver.snapshot():
        if r["time"] < since or "name" not in r["query"]:
            continue
        service, labels = parse_name(r["query"]["name"][0])
        if labels.get("pid") == str(pid):
            out.append((service, labels, r))
    return out


def test_pushes_carry_labels_and_decode_in_pprof(push_daemon, workloads, tmp_path, gohome):
    daemon, receiver, _, _ = push_daemon
    w = workloads("spin", 3, 0)
    got = wait_for("a push of the spinner", lambda: requests_of(receiver, w.pid), timeout=20)
    w.finish(timeout=60)
    service, labels, r = got[0]
    q = r["query"]
    assert r["path"] == "/ingest" and q["format"] == ["pprof"], r["path"]
    assert int(q["until"][0]) - int(q["from"][0]) == INTERVAL, q
    assert q["sampleRate"] == ["99"], q
    assert labels["comm"] == "spin" and labels["team"] == "perf" and labels["hostname"], labels
    assert service == re.sub(r"[^A-Za-z0-9._-]", "_", labels.get("unit", "spin")), (service, labels)
    assert r["headers"].get("X-Scope-OrgID") == "team-a", r["headers"]
    assert r["headers"].get("Authorization") == "Bearer s3cret", r["headers"]
    body = tmp_path / "push.pb.gz"
    body.write_bytes(r["body"])
    text = go_pprof(gohome, body, "-top")
    assert top_rows(text)[0][2] == "spin_burn", text
    st = daemon.status()
    assert st["config"]["push-bearer-token"] == "(set)", st["config"]
    assert "s3cret" not in str(st), "status shows the token"
    assert exporter(st, "pyroscope")["sent"] > 0, st["export"]


def test_a_stopped_receiver_causes_retries_and_drops_not_a_stall(push_daemon, workloads):
    daemon, receiver, _, _ = push_daemon
    w = workloads("spin", 14, 0)
    wait_for("a push of the spinner", lambda: requests_of(receiver, w.pid), timeout=20)
    receiver.stop()
    stopped = time.time()
    before = daemon.status()
    received = [before["samples"]["received"]]
    while time.time() - stopped < 10:
        time.sleep(2)
        received.append(daemon.status()["samples"]["received"])
    during = daemon.status()
    e = exporter(during, "pyroscope")
    assert e["state"] == "retrying" and e["retries"] > 0, e
    assert e["dropped"] > exporter(before, "pyroscope")["dropped"], e
    assert e["queued_bytes"] <= e["max_queued_bytes"], e
    assert all(b > a for a, b in zip(received, received[1:])), \
        f"samples received stalled while the receiver was down: {received}"
    assert during["samples"]["lost"]["queue_full"] == before["samples"]["lost"]["queue_full"], \
        "the loop fell behind the drain thread"
    assert during["samples"]["lost"]["ringbuf_full"] == before["samples"]["lost"]["ringbuf_full"]
    receiver.start()
    restarted = time.time()
    wait_for("pushes after the receiver came back",
             lambda: requests_of(receiver, w.pid, since=restarted), timeout=20)
    w.kill()  # its CPU seconds may take long on a loaded machine: not needed
    e = wait_for("the exporter to recover", lambda: (
        lambda x: x if x["state"] == "ok" else None)(exporter(daemon.status(), "pyroscope")))
    assert e["last_error"], e


def test_sighup_applies_a_new_label_and_keeps_the_profiles(push_daemon, workloads):
    """A reload changes the label of the next pushes, keeps what the store
    retained, keeps a restart-only option (frequency) as it runs, and a bad
    file at SIGHUP keeps the running configuration."""
    daemon, receiver, conf, text = push_daemon
    started = time.time()
    w = workloads("spin", 8, 0)
    wait_for("a push of the spinner", lambda: requests_of(receiver, w.pid), timeout=20)
    time.sleep(1)
    held = ("snapshot", "--pid", str(w.pid), "--from", f"{started:.3f}", "--to", f"{time.time() - 1:.3f}")
    before = daemon.perfctl_json(*held)
    assert before["samples"] > 0, before
    reload(daemon, conf, text.replace("team=perf", "team=profiling") + "frequency = 199\n")
    st = daemon.status()
    assert st["config"]["label"] == {"team": "profiling"}, st["config"]
    assert st["config"]["frequency"] == 99 and st["frequency_hz"] == 99, st["config"]
    assert "frequency" in daemon.stderr() and "restart" in daemon.stderr()
    reloaded = time.time()
    got = wait_for("a push with the new label", lambda: [
        x for x in requests_of(receiver, w.pid, since=reloaded) if x[1].get("team") == "profiling"],
        timeout=20)
    assert got
    w.kill()
    after = daemon.perfctl_json(*held)
    assert after["samples"] == before["samples"], \
        f"the store lost what it held before the reload: {before['samples']} -> {after['samples']}"

    reload(daemon, conf, "[perfd]\ninterval = never\n")
    assert "Failed to reload" in daemon.stderr() and f"{conf}:2" in daemon.stderr()
    st = daemon.status()
    assert daemon.alive() and st["config"]["label"] == {"team": "profiling"}, st["config"]
    assert st["config"]["push-url"].startswith("http://127.0.0.1:"), st["config"]
    Path(conf).write_text(text)
    os.kill(daemon.pid, signal.SIGHUP)
