"""/metrics (--metrics-address): perfd's own health for Prometheus.

The text is checked by its real consumers: `promtool check metrics` (lint
and syntax) and a real Prometheus server that scrapes perfd and is then
asked, through its HTTP API, what it scraped.  The figures are compared with
`status`, which they must agree with (both come from the same answer):
counters read between two status answers lie between their two values.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import perfdtest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port, path="/metrics", method="GET", timeout=10):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def series(text):
    """{ 'name{labels}': value } of the exposition text (for comparing
    figures; promtool judges the syntax)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


@pytest.fixture(scope="module")
def metrics_perfd(environment):
    port = free_port()
    daemon = perfdtest.start_perfd(extra_args=["--metrics-address", f"127.0.0.1:{port}"])
    yield daemon, port
    daemon.stop()


def test_promtool_accepts_it_and_it_agrees_with_status(metrics_perfd, workloads):
    daemon, port = metrics_perfd
    w = workloads("spin", 2)
    w.finish(timeout=60)
    before = daemon.status()
    code, ctype, text = scrape(port)
    after = daemon.status()
    assert code == 200, text
    assert ctype.startswith("text/plain; version=0.0.4"), ctype

    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True,
                       timeout=60)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), \
        f"promtool check metrics: rc {p.returncode}\n{p.stdout.decode()}{p.stderr.decode()}"

    s = series(text)
    taken = s["perfd_samples_taken_total"]
    assert before["samples"]["taken"] <= taken <= after["samples"]["taken"], (before["samples"], taken)
    assert taken > 0
    for cause, n in after["samples"]["lost"].items():
        assert before["samples"]["lost"][cause] <= s[f'perfd_samples_lost_total{{cause="{cause}"}}'] <= n
    assert s["perfd_store_limit_bytes"] == after["limits"]["max_memory_bytes"]
    assert s[f'perfd_bpf_tier_info{{tier="{after["bpf"]["tier"]}"}}'] == 1
    for prog in after["bpf"]["programs"]:
        if prog["loaded"]:
            key = f'perfd_bpf_program_verified_instructions{{program="{prog["name"]}"}}'
            assert s[key] == prog["verified_insns"], key
    assert s[f'perfd_build_info{{version="{after["daemon_version"]}"}}'] == 1
    assert before["processes"]["tracked"] > 0 and s["perfd_processes"] > 0
    # the scrape itself is counted, in status and in the next scrape
    assert after["metrics"]["enabled"] is True
    assert after["metrics"]["scrapes"] >= before["metrics"]["scrapes"] + 1
    assert series(scrape(port)[2])["perfd_metrics_scrapes_total"] >= after["metrics"]["scrapes"]


def test_a_real_prometheus_scrapes_it(metrics_perfd):
    daemon, port = metrics_perfd
    tmp = tempfile.mkdtemp(prefix="perfd-prom-")
    web = free_port()
    conf = os.path.join(tmp, "prometheus.yml")
    with open(conf, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: perfd\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{port}']\n")
    log = open(os.path.join(tmp, "prometheus.log"), "wb")
    prom = subprocess.Popen(["prometheus", f"--config.file={conf}",
                             f"--storage.tsdb.path={os.path.join(tmp, 'data')}",
                             f"--web.listen-address=127.0.0.1:{web}"],
                            stdout=log, stderr=log, cwd=tmp)

    def query(expr):
        url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)["data"]["result"]

    try:
        deadline = time.monotonic() + 90
        up = taken = None
        while time.monotonic() < deadline:
            try:
                up = query('up{job="perfd"}')
                taken = query('perfd_samples_taken_total{job="perfd"}')
                if up and taken and float(up[0]["value"][1]) == 1 and float(taken[0]["value"][1]) > 0:
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass  # not listening yet
            time.sleep(1)
        assert up and float(up[0]["value"][1]) == 1, \
            f"Prometheus never saw perfd up: {up}\n{open(log.name).read()[-3000:]}"
        assert taken and float(taken[0]["value"][1]) > 0, taken
        lost = query('perfd_samples_lost_total{job="perfd"}')
        assert {r["metric"]["cause"] for r in lost} >= {"ringbuf_full", "queue_full", "evicted"}, lost
        # perfd counted Prometheus's scrapes
        assert daemon.status()["metrics"]["scrapes"] >= 1
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_bad_requests_get_errors_and_held_connections_cannot_keep_a_scraper_out(metrics_perfd):
    daemon, port = metrics_perfd
    assert scrape(port, "/")[0] == 404
    assert scrape(port, "/nothing?x=1")[0] == 404
    assert scrape(port, "/metrics", method="POST")[0] == 405
    code, _, text = scrape(port, "/metrics", method="HEAD")
    assert code == 200 and text == ""
    # a head longer than the cap is answered 431
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431"), "no 431 for a 20 KB head"
    # connections opened and left silent (more than perfd keeps at once)
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(30)]
    try:
        t = time.monotonic()
        code, _, text = scrape(port, timeout=5)
        assert code == 200 and "perfd_samples_taken_total" in text
        assert time.monotonic() - t < 5
        assert daemon.status()["metrics"]["closed_for_room"] >= 22
    finally:
        for s in held:
            s.close()
    assert daemon.alive()


def test_no_exporter_secret_leaves_through_a_scrape(environment):
    port = free_port()
    daemon = perfdtest.start_perfd(extra_args=[
        "--metrics-address", f"127.0.0.1:{port}",
        "--push-url", "http://127.0.0.1:9/ingest-path?token=hunter2secret",
        "--push-tenant", "tenant-sekrit", "--interval", "1s"])
    try:
        time.sleep(2.5)  # an interval or two: the exporter has tried
        code, _, text = scrape(port)
        assert code == 200
        for secret in ("hunter2secret", "ingest-path", "tenant-sekrit"):
            assert secret not in text, f"{secret} in /metrics"
        s = series(text)
        assert 'perfd_export_failed_total{sink="pyroscope"}' in s, [k for k in s if "export" in k]
    finally:
        daemon.stop()


def test_an_address_that_cannot_be_served_stops_the_start(environment):
    rc, err, ready = perfdtest.run_perfd_expect_exit(["--metrics-address", "no-port-here"])
    assert rc != 0 and not ready
    assert "Bad --metrics-address no-port-here" in err, err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        rc, err, ready = perfdtest.run_perfd_expect_exit(["--metrics-address", f"127.0.0.1:{port}"])
    assert rc != 0 and not ready
    assert f"Failed to listen for metrics on 127.0.0.1:{port}" in err, err
