"""Kernel addresses only for those the kernel shows them to (issue 27, KASLR).

perfd answers every local user, so a kernel frame's absolute address in an
answer would give away the kernel's KASLR slide to whoever asks.  perfd
follows the kernel's rule for /proc/kallsyms: kptr_restrict 0 shows them to
everyone when perf_event_paranoid <= 1 (else only to CAP_SYSLOG), 1 only to
CAP_SYSLOG (root), 2 to no one.  Whoever may not see them still gets kernel
frames by name (with the offset from the symbol in JSON).

The tests run tests/workloads/syscalls (reading /dev/zero: nearly all of
its time in the kernel, under ksys_read) as `nobody`, and take its profile
from perfd's history, as nobody and as root, in every format perfctl
writes, with kptr_restrict set for the test and restored afterwards.  The
oracle for "may nobody see them" is the kernel itself: /proc/kallsyms read
as nobody.  pprof files are read by go tool pprof -raw, the real consumer.
kptr_restrict 2 is held only for the few queries that need it (other
daemons on the host read /proc/kallsyms when they start).
"""

import gzip
import json
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

import perfdtest
from perfdtest import go_pprof
from test_auth import User, perfctl_as, reachable_path_fixes

KPTR_RESTRICT = Path("/proc/sys/kernel/kptr_restrict")
# The lowest kernel address on x86_64 and arm64 (canonical upper half).
KERNEL_MIN = 0xffff800000000000
# Kernel functions under a read of /dev/zero: at least one is sampled.
READ_PATH = {"read_zero", "ksys_read", "vfs_read", "__x64_sys_read", "iov_iter_zero",
             "clear_user", "rep_stos_alternative", "entry_SYSCALL_64",
             "do_syscall_64", "__arm64_sys_read"}
FORMATS = ["folded", "json", "pprof", "speedscope", "html", "svg"]
EXTENSIONS = {"folded": "folded", "json": "json", "pprof": "pb.gz",
              "speedscope": "speedscope.json", "html": "html", "svg": "svg"}
HEX_KERNEL = re.compile(r"(?i)(?<![0-9a-f])(?:0x)?(ffff[89a-f][0-9a-f]{11})(?![0-9a-f])")
DECIMAL = re.compile(r"(?<![0-9])[0-9]{17,20}(?![0-9])")


def kernel_addresses_in(text):
    """Every absolute kernel address in text, as hex or as decimal."""
    found = [int(h, 16) for h in HEX_KERNEL.findall(text)]
    found += [int(d) for d in DECIMAL.findall(text) if KERNEL_MIN <= int(d) < 2**64]
    return found


@pytest.fixture(scope="module")
def nobody():
    return User("nobody")


@pytest.fixture(scope="module")
def daemon(nobody):
    """A daemon nobody can reach, with a directory nobody can write its
    snapshots into."""
    tmpdir = perfdtest.make_tmpdir()
    os.chmod(tmpdir, 0o755)
    out = os.path.join(tmpdir, "out")
    os.mkdir(out)
    os.chmod(out, 0o1777)
    binaries = [perfdtest.perfctl_binary(), perfdtest.workload_binary("syscalls")]
    fixed = reachable_path_fixes([*binaries, tmpdir])
    try:
        d = perfdtest.start_perfd(tmpdir=tmpdir)
        d.out = Path(out)
        yield d
        d.stop()
        shutil.rmtree(tmpdir, ignore_errors=True)
    finally:
        for d_, mode in reversed(fixed):
            os.chmod(d_, mode)


@pytest.fixture(scope="module")
def reader(nobody, daemon):
    """syscalls run as nobody for the whole module, sampled for a few
    seconds already: its history holds kernel stacks."""
    w = perfdtest.Workload("syscalls", command=nobody.argv(
        perfdtest.workload_binary("syscalls"), 600))
    try:
        deadline = time.monotonic() + 20
        while True:
            assert w.proc.poll() is None, f"syscalls exited: {w.proc.stderr.read()!r}"
            st = os.stat(f"/proc/{w.pid}")
            comm = Path(f"/proc/{w.pid}/comm").read_text().strip()
            if st.st_uid == nobody.uid and comm == "syscalls":
                break
            assert time.monotonic() < deadline, f"syscalls did not start as nobody: {comm}"
            time.sleep(0.05)
        time.sleep(4)
        yield w
    finally:
        w.kill()


@pytest.fixture
def kptr_restrict():
    """A setter of kernel.kptr_restrict; the value it had is restored at the
    end of the test, whatever happens."""
    old = KPTR_RESTRICT.read_text().strip()

    def set_to(value):
        KPTR_RESTRICT.write_text(f"{value}\n")
        assert KPTR_RESTRICT.read_text().strip() == str(value)

    set_to.original = old
    try:
        yield set_to
    finally:
        KPTR_RESTRICT.write_text(f"{old}\n")


def kernel_shows(user):
    """Whether the kernel shows user (None: root) kernel addresses now:
    the first line of /proc/kallsyms read as that user."""
    argv = ["head", "-n1", "/proc/kallsyms"]
    p = subprocess.run(user.argv(*argv) if user else argv, capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[0], 16) != 0


def snapshot(daemon, user, pid, fmt):
    """The bytes of a snapshot of pid's last 30 s in format fmt, taken by
    user (None: root)."""
    path = daemon.out / f"{user.name if user else 'root'}-{fmt}-{time.monotonic_ns()}.{EXTENSIONS[fmt]}"
    args = ("snapshot", "--pid", str(pid), "--since", "30s", "--format", fmt, "-o", str(path))
    if user:
        rc, _, err = perfctl_as(user, daemon, *args)
    else:
        rc, _, err = daemon.perfctl(*args)
    assert rc == 0, f"snapshot as {user.name if user else 'root'} exited {rc}: {err}"
    data = path.read_bytes()
    path.unlink()
    return data


def pprof_raw(gohome, data, tmp_path):
    """go tool pprof -raw of a pprof file's bytes."""
    path = tmp_path / f"p{time.monotonic_ns()}.pb.gz"
    path.write_bytes(data)
    return go_pprof(gohome, path, "-raw")


RAW_LOCATION = re.compile(r"^\s*\d+: 0x([0-9a-f]+)(?: M=\d+)? (.*)$", re.M)
RAW_MAPPING = re.compile(r"^\d+: 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+)", re.M)


def pprof_kernel_facts(raw):
    """(addresses of the locations that name a kernel function of the read
    path, every address and mapping bound in the file)."""
    locations = raw[raw.index("Locations"):raw.index("Mappings")]
    mappings = raw[raw.index("Mappings"):]
    kernel, every = [], []
    for address, rest in RAW_LOCATION.findall(locations):
        every.append(int(address, 16))
        if rest.split() and rest.split()[0] in READ_PATH:
            kernel.append(int(address, 16))
    for m in RAW_MAPPING.findall(mappings):
        every += [int(x, 16) for x in m[:3]]
    return kernel, every


def json_kernel_frames(data):
    doc = json.loads(data)
    return [f for f in doc["frames"] if f["kind"] == "kernel"]


def assert_hidden(data, fmt, gohome, tmp_path, who):
    """No kernel address in the output, and kernel frames of the read path
    still named."""
    text = data.decode(errors="replace") if fmt != "pprof" else None
    if fmt == "pprof":
        raw = pprof_raw(gohome, data, tmp_path)
        kernel, every = pprof_kernel_facts(raw)
        leaked = [a for a in every if a >= KERNEL_MIN]
        assert not leaked, f"{who}'s pprof has kernel addresses {[hex(a) for a in leaked[:5]]}:\n{raw[:3000]}"
        assert kernel, f"{who}'s pprof names no kernel function of {sorted(READ_PATH)}:\n{raw[:3000]}"
        text = gzip.decompress(data).decode(errors="replace")
    leaked = kernel_addresses_in(text)
    assert not leaked, \
        f"{who}'s {fmt} snapshot carries kernel addresses {[hex(a) for a in leaked[:5]]}"
    assert any(name in text for name in READ_PATH), \
        f"{who}'s {fmt} snapshot names no kernel function of the read path:\n{text[:2000]}"
    if fmt == "json":
        frames = [f for f in json_kernel_frames(data) if f["function"] in READ_PATH]
        assert frames, f"no kernel frame of the read path in {who}'s json"
        for f in frames:
            assert "offset" not in f, f"{who}'s json kernel frame has an address: {f}"
            assert 0 <= f["symbol_offset"] < 1 << 20, f


def assert_shown(data, fmt, gohome, tmp_path, who):
    """Kernel frames carry their absolute addresses (json, pprof)."""
    if fmt == "json":
        frames = [f for f in json_kernel_frames(data) if f["function"] in READ_PATH]
        assert frames and all(f.get("offset", 0) >= KERNEL_MIN for f in frames), \
            f"{who}'s json kernel frames lack their addresses: {frames[:5]}"
        assert all(0 <= f["symbol_offset"] < 1 << 20 for f in frames), frames[:5]
    else:
        kernel, _ = pprof_kernel_facts(pprof_raw(gohome, data, tmp_path))
        assert kernel and all(a >= KERNEL_MIN for a in kernel), \
            f"{who}'s pprof kernel locations lack their addresses: {[hex(a) for a in kernel]}"


@pytest.mark.parametrize("restrict", [0, 1])
@pytest.mark.parametrize("fmt", FORMATS)
def test_nobody_gets_kernel_frames_without_addresses(daemon, nobody, reader, kptr_restrict,
                                                     restrict, fmt, gohome, tmp_path):
    """nobody's snapshot of its own process names its kernel frames and
    carries no kernel address, in every format, as /proc/kallsyms shows
    nobody none (kptr_restrict 1; 0 with perf_event_paranoid >= 2).
    Protects KASLR from every local user."""
    kptr_restrict(restrict)
    if kernel_shows(nobody):
        pytest.skip("perf_event_paranoid <= 1 with kptr_restrict 0: the kernel itself "
                    "shows nobody kernel addresses")
    assert_hidden(snapshot(daemon, nobody, reader.pid, fmt), fmt, gohome, tmp_path, "nobody")


@pytest.mark.parametrize("restrict", [0, 1])
@pytest.mark.parametrize("fmt", ["json", "pprof"])
def test_root_keeps_kernel_addresses(daemon, reader, kptr_restrict, restrict, fmt, gohome,
                                     tmp_path):
    """Root (CAP_SYSLOG) gets the kernel's addresses while kptr_restrict is
    0 or 1, as in /proc/kallsyms.  Protects what root's tools (pprof
    re-symbolizing by address) rely on."""
    kptr_restrict(restrict)
    assert kernel_shows(None)
    assert_shown(snapshot(daemon, None, reader.pid, fmt), fmt, gohome, tmp_path, "root")


def test_kptr_restrict_2_hides_them_from_root_too(daemon, nobody, reader, kptr_restrict,
                                                  gohome, tmp_path):
    """With kptr_restrict 2 the kernel shows no one its addresses, not even
    root, and perfd neither: checked at each query, without a restart."""
    taken = {}
    kptr_restrict(2)
    try:
        assert not kernel_shows(None)
        for fmt in FORMATS:
            taken[("root", fmt)] = snapshot(daemon, None, reader.pid, fmt)
        taken[("nobody", "json")] = snapshot(daemon, nobody, reader.pid, "json")
    finally:
        kptr_restrict(kptr_restrict.original)  # at once: other daemons read kallsyms
    for (who, fmt), data in taken.items():
        assert_hidden(data, fmt, gohome, tmp_path, who)
    # and back: the same daemon shows root its addresses again
    assert_shown(snapshot(daemon, None, reader.pid, "json"), "json", gohome, tmp_path, "root")
