"""Fixtures for perfd's integration tests (see perfdtest.py for the helpers).

One daemon at the default frequency serves the whole session: starting one
loads and attaches BPF, which is the slow part.  Tests share it but not its
state: each profiles only processes it started itself and asserts only on
those, or on counters it reads before and after.  Tests that need another
configuration (test_profile's 999 Hz daemon, test_daemon's start/stop cases)
start their own.  Every daemon is stopped with SIGTERM at the end and must
exit 0 within 10 s and remove its socket.
"""

import shutil
import tempfile
import time

import pytest

import perfdtest


@pytest.fixture(scope="session", autouse=True)
def environment():
    """Fails every test, loudly, on a machine that cannot run them."""
    problems = perfdtest.environment_problems()
    if problems:
        pytest.fail("cannot run perfd's integration tests:\n  " + "\n  ".join(problems),
                    pytrace=False)


@pytest.fixture(scope="session")
def perfd(environment):
    """The shared daemon, default options (99 Hz)."""
    daemon = perfdtest.start_perfd()
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def perfd_mem(environment):
    """A daemon sampling memory every 256 KiB (16x the default rate), so that
    a few MiB of growth make enough samples to say which function grew: 16
    MiB are 64 samples, where the default 4 MiB would leave it none in 1 run
    of 55 (e^-4).  One per module."""
    daemon = perfdtest.start_perfd(extra_args=["--memory-sample-bytes", "256K"])
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def perfd_fixed(environment):
    """A daemon at the default frequency with --fixed-period: every tick of
    a 1/99 s timer samples, as perf's cpu-clock does; what jittered sampling
    is compared with."""
    daemon = perfdtest.start_perfd(extra_args=["--fixed-period"])
    yield daemon
    daemon.stop()


@pytest.fixture(scope="session")
def perfd_fast(environment):
    """A second daemon sampling at perfdtest.FAST_HZ, for tests that need many
    samples from a few CPU seconds."""
    daemon = perfdtest.start_perfd(frequency=perfdtest.FAST_HZ)
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def split_c_run(perfd_fast):
    """A finished run of the C split 3 on perfd_fast and the range
    (--from, --to) that holds it: a module's snapshots of that range in
    different formats are of the very same samples, so their figures must
    agree."""
    started = time.time() - 1
    w = perfdtest.Workload("split", 3)
    try:
        w.finish(timeout=120)
    finally:
        w.kill()
    time.sleep(1.5)  # the last samples reach the store
    return w.pid, ("--pid", str(w.pid), "--from", f"{started:.3f}", "--to",
                   f"{time.time():.3f}")


@pytest.fixture
def workloads():
    """A spawner: workloads("split", 7) starts build/workloads/split 7 and
    returns a perfdtest.Workload.  Whatever is still running at the end of
    the test is killed, so a failed test leaves no CPU burner behind."""
    started = []

    def spawn(name, *args, command=None):
        w = perfdtest.Workload(name, *args, command=command)
        started.append(w)
        return w

    yield spawn
    for w in started:
        w.kill()


@pytest.fixture(scope="module")
def gohome():
    """go writes its cache under HOME/GOCACHE: a throwaway one
    (perfdtest.go_pprof)."""
    d = tempfile.mkdtemp(prefix="perfd-go-")
    yield d
    shutil.rmtree(d, ignore_errors=True)
