"""The socket protocol (include/perfd/protocol.h) as a hostile or careless
client sees it: malformed input is answered with the documented error and
does not hurt the daemon; idle clients do not block others; `status` reports
what the daemon is doing."""

import json
import random
import socket
import time

import pytest

import perfdtest
from perfdtest import decode_answer, read_answers, read_lines


def assert_error(answer, code, what):
    """answer is a well-formed protocol error with the given code."""
    assert answer.get("version") == 1, f"{what}: answer without version 1: {answer}"
    assert answer.get("ok") is False, f"{what}: expected ok=false, got {answer}"
    error = answer.get("error")
    assert isinstance(error, dict), f"{what}: error is not an object: {answer}"
    assert error.get("code") == code, f"{what}: expected error code {code!r}, got {answer}"
    assert isinstance(error.get("message"), str) and error["message"], \
        f"{what}: error without a message: {answer}"


def random_line(seed, size):
    """size random bytes (no '\\n' among them) and a final '\\n'; seeded, so a
    failure can be replayed."""
    data = random.Random(seed).randbytes(size)
    return data.replace(b"\n", b"") + b"\n"


MALFORMED = [
    ("random binary", random_line(1, 4096), "bad_request"),
    ("JSON cut short", b'{"version": 1, "command": "status"\n', "bad_request"),
    ("JSON, not an object", b'[1, 2, 3]\n', "bad_request"),
    ("NUL byte in the line", b'{"version": 1, "command": "status"}\x00\n', "bad_request"),
    ("unknown command", b'{"version": 1, "command": "frobnicate"}\n', "unknown_command"),
    ("wrong version", b'{"version": 2, "command": "status"}\n', "unsupported_version"),
    ("wrong argument type", b'{"version": 1, "command": "snapshot", "pid": "1", "duration": 1}\n',
     "bad_request"),
]


@pytest.mark.parametrize("what,line,code", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_request_gets_its_error_and_daemon_keeps_serving(perfd, what, line, code):
    """Each kind of malformed request gets the error code protocol.h gives
    for it; afterwards the daemon is alive and `perfctl status` works.
    Protects the request parser and the daemon's survival of bad input."""
    assert_error(perfd.request(line), code, what)
    assert perfd.alive(), f"perfd died after {what}\nstderr:\n{perfd.stderr()}"
    rc, out, err = perfd.perfctl("status", timeout=10)
    assert rc == 0, f"perfctl status exited {rc} after {what}: {err}"


def test_over_long_line_is_refused_without_waiting_for_its_end(perfd):
    """1 MiB without a newline, 16 times the request limit: the daemon must
    answer request_too_large (or close the connection) instead of buffering
    on until a newline that never comes, and keep serving others.  Protects
    the daemon's memory bound per client."""
    with perfd.connect(timeout=10) as s:
        try:
            s.sendall(b"x" * (1024 * 1024))
        except (BrokenPipeError, ConnectionResetError):
            pass  # it stopped reading, as it should; look for its answer
        except socket.timeout:
            pass  # it stopped reading but kept the connection; same
        try:
            lines = read_lines(s, 1)
        except socket.timeout:
            pytest.fail("perfd neither answered nor closed a connection sending a 1 MiB "
                        "line: it waits for the newline, buffering or discarding")
    if lines:  # an answer; closing without one is acceptable too
        assert_error(decode_answer(lines[0], "a 1 MiB line"), "request_too_large", "1 MiB line")
    assert perfd.alive(), f"perfd died on a 1 MiB line\nstderr:\n{perfd.stderr()}"
    rc, out, err = perfd.perfctl("status", timeout=10)
    assert rc == 0, f"perfctl status exited {rc} after a 1 MiB line: {err}"


def test_idle_clients_do_not_block_others(perfd):
    """Eight clients connect and stay silent or send half a line; `perfctl
    status` must still answer at once.  Protects the event loop from a
    client that blocks it (a blocking read, a per-client thread cap)."""
    idle = []
    try:
        for i in range(8):
            s = perfd.connect(timeout=10)
            if i % 2:
                s.sendall(b'{"version": 1, "comm')
            idle.append(s)
        rc, out, err = perfd.perfctl("status", timeout=10)
        assert rc == 0, f"perfctl status exited {rc} with 8 idle clients: {err}"
        assert perfd.status()["ok"] is True
    finally:
        for s in idle:
            s.close()
    assert perfd.alive(), f"perfd died with idle clients\nstderr:\n{perfd.stderr()}"


def test_pipelined_requests_are_answered_in_order(perfd):
    """Several requests written at once on one connection get one answer
    each, in order, including after an error.  Protects per-connection line
    framing."""
    reqs = [b'{"version": 1, "command": "status"}\n',
            b'{"version": 1, "command": "frobnicate"}\n',
            b'{"version": 1, "command": "ps", "interval": 1}\n']
    with perfd.connect(timeout=10) as s:
        s.sendall(b"".join(reqs))
        lines = read_lines(s, len(reqs))
    assert len(lines) == 3, f"expected 3 answers, got {lines!r}"
    first, second, third = (decode_answer(line, "pipelined request") for line in lines)
    assert first.get("ok") is True and "frequency_hz" in first, f"status answer: {first}"
    assert_error(second, "unknown_command", "pipelined unknown command")
    assert third.get("ok") is True and "processes" in third, f"ps answer: {third}"


def test_stop_ends_a_live_snapshot_and_lets_other_lines_wait(perfd, workloads):
    """A "stop" sent while a 30 s live snapshot waits ends it at once with
    what it sampled ("stopped": true, a span of about the 2 s it ran); a
    request pipelined ahead of the stop still waits its turn and is answered
    after the snapshot; a stop with nothing waiting answers stopped: false.
    Protects Ctrl-C on `perfctl snapshot` and the end of `perfctl record`."""
    w = workloads("spin", 60, 0)
    snap = {"version": 1, "command": "snapshot", "pid": w.pid, "duration": 30}
    with perfd.connect(timeout=20) as s:
        s.sendall((json.dumps(snap) + "\n").encode() + b'{"version": 1, "command": "status"}\n')
        time.sleep(2)
        s.sendall(b'{"version": 1, "command": "stop"}\n')
        lines = read_lines(s, 2)
        assert len(lines) == 2, f"expected 2 answers, got {lines!r}"
        first, second = (decode_answer(line, "after stop") for line in lines)
        assert first.get("ok") is True and first.get("stopped") is True, first
        assert 1.0 <= first["duration_seconds"] <= 6.0 and first["samples"] > 0, \
            (first["duration_seconds"], first["samples"])
        assert second.get("ok") is True and "frequency_hz" in second, second
        s.sendall(b'{"version": 1, "command": "stop"}\n')
        late = decode_answer(read_lines(s, 1)[0], "stop with nothing waiting")
    assert late.get("ok") is True and late.get("stopped") is False, late


def test_stop_sent_with_its_snapshot_in_one_write_stops_it(perfd, workloads):
    """A snapshot and its stop in the same write (perfd reads both at once:
    `perfctl record -- true` on a busy daemon) end at once, not after the
    snapshot's 30 s: the stop is offered as soon as the snapshot waits,
    with no further read to bring it."""
    w = workloads("spin", 60, 0)
    snap = {"version": 1, "command": "snapshot", "pid": w.pid, "duration": 30}
    with perfd.connect(timeout=10) as s:
        s.sendall((json.dumps(snap) + "\n").encode() + b'{"version": 1, "command": "stop"}\n')
        lines = read_lines(s, 1)
    assert lines, "no answer within 10 s of a snapshot sent with its stop"
    answer = decode_answer(lines[0], "snapshot stopped at once")
    assert answer.get("ok") is True and answer.get("stopped") is True, answer
    assert answer["duration_seconds"] < 5, answer["duration_seconds"]


def test_stop_sent_with_a_snapshot_of_the_past_changes_nothing(perfd, workloads):
    """A snapshot of the past and a stop in the same write: the stop finds
    the answer waiting for its records or its model being built in slices
    (api/model_slices.h), is taken, and changes nothing; or it finds it
    being encoded off the loop (api/encode_lane.h) or sent, and is answered
    on its own, "stopped": false: the snapshot had ended.  The first answer
    is the profile, and a status pipelined after it is answered."""
    w = workloads("spin", 60, 0)
    time.sleep(2)
    snap = {"version": 1, "command": "snapshot", "pid": w.pid, "since": 10, "format": "pprof",
            "frame": True}
    with perfd.connect(timeout=20) as s:
        s.sendall((json.dumps(snap) + "\n").encode() + b'{"version": 1, "command": "stop"}\n' +
                  b'{"version": 1, "command": "status"}\n')
        answers = read_answers(s, 3, "snapshot, stop, status", until=lambda a: "frequency_hz" in a)
    if len(answers) == 3 and answers[1] == {"ok": True, "stopped": False, "version": 1}:
        del answers[1]
    assert len(answers) == 2, f"expected the profile and status, got {answers!r}"[:3000]
    first, second = answers
    assert first.get("ok") is True and first.get("format") == "pprof" and first["samples"] > 0, \
        {k: v for k, v in first.items() if k != "profile"}
    assert first["profile"][:2] == b"\x1f\x8b", first["profile"][:40]
    assert "stopped" not in first, first.get("stopped")
    assert second.get("ok") is True and "frequency_hz" in second, second


def test_status_reports_configuration_and_counters(perfd, workloads):
    """status (raw and through `perfctl --json status`) gives the sampling
    frequency, the online CPU count, sample counters that grow as CPUs work,
    and the loss counters.  Protects what operators read to trust the data."""
    before = perfd.status()
    w = workloads("exiter", 0.5)
    w.finish()
    after = perfd.status()

    assert after["version"] == 1 and after["protocol_version"] == 1, after
    assert after["frequency_hz"] == 99, f"default frequency is not 99 Hz: {after}"
    assert abs(after["sample_period_ns"] * 99 - 1e9) < 1e7, \
        f"sample_period_ns does not match 99 Hz: {after}"
    assert after["cpus"] == perfdtest.online_cpus(), \
        f"cpus {after['cpus']} but {perfdtest.online_cpus()} online"
    assert after["pid"] == perfd.pid, f"status pid {after['pid']}, daemon pid {perfd.pid}"

    samples = after["samples"]
    assert samples["received"] > 0, f"no sample received after 0.5 CPU-s of work: {samples}"
    # 0.5 CPU-s at 99 Hz is ~50 samples of exiter alone.
    assert samples["received"] > before["samples"]["received"], \
        f"samples.received did not grow over 0.5 CPU-s of work: {before['samples']} -> {samples}"
    for key in ("ringbuf_full", "evicted"):
        assert isinstance(samples["lost"].get(key), int) and samples["lost"][key] >= 0, \
            f"samples.lost.{key} missing: {samples}"
    assert isinstance(samples.get("lost_total"), int), f"samples.lost_total missing: {samples}"
    assert isinstance(after["exit_events"].get("lost"), int), \
        f"exit_events.lost missing: {after['exit_events']}"

    doc = perfd.perfctl_json("status", timeout=10)
    assert doc.get("frequency_hz") == 99 and doc.get("cpus") == perfdtest.online_cpus(), \
        f"perfctl --json status disagrees with the daemon: {json.dumps(doc)[:500]}"
    rc, out, err = perfd.perfctl("status", timeout=10)
    assert rc == 0 and out.strip(), f"perfctl status exited {rc}: {err}"


def test_sigterm_does_not_wait_for_an_answer_being_encoded(workloads):
    """SIGTERM while a big JSON answer is being encoded on its lane (a call
    tree of ~16k unique 100-frame stacks): the encoder gives up at its next
    write (encode_cancel_sink, api/encode_lane.h) and perfd stops in a
    small part of the time the same answer took to write in full, asked
    first (status's longest_answer_write_ms).  It waited for the whole
    tree before: 0.63 s after a SIGTERM 0.2 s into a 0.9 s encoding, where
    it now stops in 0.17 s."""
    daemon = perfdtest.start_perfd(frequency=perfdtest.FAST_HZ)
    try:
        ws = [workloads("unique_stacks", 1, 8) for _ in range(2)]
        for w in ws:
            w.finish(timeout=90)
        ask = (json.dumps({"version": 1, "command": "snapshot", "comm": "unique_stacks",
                           "since": 60, "format": "json"}) + "\n").encode()
        with daemon.connect(timeout=120) as s:
            s.sendall(ask)
            answer = b""  # tens of MB: read raw, not decoded
            while not answer.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                assert chunk, f"the answer ended early: {answer[:300]!r}"
                answer += chunk
        assert b'"ok":true' in answer[:200].replace(b" ", b""), answer[:300]
        whole = daemon.status()["loop"]["longest_answer_write_ms"] / 1000
        assert whole > 0, "the answer was not written on a lane"

        s = daemon.connect(timeout=30)
        s.sendall(ask)
        deadline = time.monotonic() + 20
        while daemon.status()["loop"]["answers_writing"] == 0:
            assert time.monotonic() < deadline, "the answer was never being encoded"
            time.sleep(0.01)
        t0 = time.monotonic()
        daemon.stop()
        took = time.monotonic() - t0
        s.close()
    finally:
        daemon.kill()
    print(f"the answer took {whole:.2f} s to write; perfd stopped {took:.2f} s after SIGTERM")
    assert took < whole / 2, \
        f"perfd took {took:.2f} s to stop while an answer of {whole:.2f} s was being encoded"
