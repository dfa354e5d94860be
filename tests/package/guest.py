"""guest.py - a fresh Debian 12 system booted with systemd as its PID 1,
for the boot test (test_boot.py): a bookworm root made by debootstrap,
booted under systemd-nspawn, and commands run in it.

Why a container and not a QEMU guest: on this host's kernel nspawn gives a
real systemd 252 as PID 1 running the packaged units, perfd loading its
BPF into the host kernel, in seconds; QEMU here is TCG only, where a
systemd boot and the verifier take minutes (the kernel matrix,
tests/kernels/, is where perfd meets other kernels).  nspawn is given every
capability and bpf()/perf_event_open() in its seccomp filter, since perfd
needs them and the container's root is the host's (no user namespace);
the unit's own sandbox then applies inside, as on a machine.

The root: `debootstrap --variant=minbase` of bookworm with systemd, dbus and
the package's dependencies (from its Depends), made and cached by
tests/debroot.py in BUILD/boot/root-KEY/.  Each boot gets a fresh copy of
it.

The root's packages are known before the .deb is built (ROOT_PACKAGES:
its Depends as dpkg-shlibdeps writes them here), so that `make test` can
make the root in the background while it builds and tests the rest
(`guest.py prepare`; a lock keeps the test from using a half-made root);
the test checks that the .deb asks for nothing the root lacks.

The host needs no systemd of its own: nspawn runs with --register=no and
--keep-unit (no machined, no scope unit) and creates its cgroups itself.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "kernels"))
sys.path.insert(0, str(REPO / "tests"))
import debroot  # noqa: E402  (the root, made by debootstrap)
import kmatrix  # noqa: E402  (its run())

BUILD = Path(os.environ.get("PERFD_BUILD") or REPO / "build")
BOOT_DIR = BUILD / "boot"
SUITE = "bookworm"
# A booted Debian with a D-Bus (systemctl's and journalctl's peers), no
# more: the package brings the rest through its Depends.
BASE_PACKAGES = ("systemd", "systemd-sysv", "dbus")
# packaging/debian/control's Depends, shlibs expanded (checked by the test:
# missing_packages)
ROOT_PACKAGES = BASE_PACKAGES + (
    "adduser", "procps", "libbpf1", "libc6", "libcurl4", "libdw1", "libelf1", "libjson-c5",
    "liblzma5", "libncursesw6", "libprotobuf-c1", "libsystemd0", "libtinfo6", "zlib1g")
BOOT_TIMEOUT = 120


def log(msg):
    print(f"guest: {msg}", file=sys.stderr, flush=True)


def deb_depends(deb):
    """The package names of deb's Depends (first of each alternative,
    versions dropped)."""
    field = kmatrix.run(["dpkg-deb", "-f", deb, "Depends"])
    return sorted({d.split("|")[0].split("(")[0].strip() for d in field.split(",") if d.strip()})


def missing_packages(deb, root):
    """The packages deb depends on that root does not have installed."""
    have = kmatrix.run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W",
                        "-f", "${Package} ${db:Status-Status}\n"])
    installed = {line.split()[0] for line in have.splitlines() if line.endswith(" installed")}
    return sorted(set(deb_depends(deb)) - installed)


def root():
    """BUILD/boot/root-KEY/ (debroot.root of bookworm with ROOT_PACKAGES),
    waiting for a `guest.py prepare` making it meanwhile; returns (path,
    seconds debootstrap took, 0 when cached)."""
    return debroot.root(BOOT_DIR, SUITE, set(BASE_PACKAGES) | set(ROOT_PACKAGES), log)


class Guest:
    """A copy of root booted under systemd-nspawn until stop()."""

    def __init__(self, root, name="perfd-boot"):
        self.name = name
        self.dir = BOOT_DIR / name
        self.console_path = BOOT_DIR / f"{name}.console"
        shutil.rmtree(self.dir, ignore_errors=True)
        kmatrix.run(["cp", "-a", "--one-file-system", root, self.dir])
        (self.dir / ".complete").unlink()
        self.proc = None
        self.leader = None

    def start(self):
        """Boots the copy; returns once PID 1 says the system is up
        (running, or degraded: a unit of the base system that cannot work
        in a container is not perfd's concern; the test names perfd's)."""
        argv = ["systemd-nspawn", "--boot", "--directory", str(self.dir), "--machine", self.name,
                "--register=no", "--keep-unit", "--private-network", "--console=passive",
                "--capability=all", "--system-call-filter=bpf perf_event_open"]
        self.console = open(self.console_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.console,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + BOOT_TIMEOUT
        while self.leader is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"systemd-nspawn did not start the guest:\n{self.tail()}")
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            if children and Path(f"/proc/{children[0]}/comm").read_text().strip() == "systemd":
                self.leader = int(children[0])
            else:
                time.sleep(0.1)
        while True:
            left = deadline - time.monotonic()
            r = self.run("systemctl", "is-system-running", "--wait", timeout=max(left, 1))
            if r.stdout.strip() in ("running", "degraded"):
                return
            if left <= 0 or self.proc.poll() is not None:
                raise RuntimeError(f"the guest did not boot ({r.stdout.strip()}):\n{self.tail()}")
            time.sleep(0.5)

    def run(self, *argv, timeout=60, user=None, input=None):
        """Runs argv in the guest (all its namespaces, as root, or as user
        through runuser with that user's groups); returns the
        CompletedProcess."""
        if user:
            argv = ("runuser", "-u", user, "--", *argv)
        return subprocess.run(["nsenter", "--target", str(self.leader), "--all", "--", *argv],
                              capture_output=True, text=True, timeout=timeout, input=input)

    def path(self, p):
        """The host's path of the guest's p."""
        return self.dir / p.lstrip("/")

    def tail(self, lines=40):
        try:
            text = self.console_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self):
        """Powers the guest off (nspawn's SIGTERM asks PID 1 to halt), kills
        it if that takes over 30 s, and removes its copy of the root."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc:
            self.console.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for_prepare():
    """Returns once no `guest.py prepare` holds the lock."""
    debroot.wait(BOOT_DIR)


if __name__ == "__main__":
    # `guest.py prepare`: makes the root (make test runs it in the
    # background; a failure here is the boot test's to report, again).
    # `guest.py wait`: until a prepare is done (make test: before the
    # tests that measure shares of the CPUs).
    if sys.argv[1:] == ["prepare"]:
        path, took = root()
        log(f"root {path} {'made in %.1f s' % took if took else 'cached'}")
    elif sys.argv[1:] == ["wait"]:
        wait_for_prepare()
    else:
        sys.exit("usage: guest.py prepare|wait")
