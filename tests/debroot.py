"""debroot.py - Debian roots made by debootstrap for the tests that need a
whole system of another kind: bookworm with systemd for the boot test
(tests/package/guest.py), sid with its CPythons for the Python tests
(tests/pythons/sid.py).

A root is `debootstrap --variant=minbase SUITE` with packages included,
from the mirror the machine's apt sources name (kmatrix.machine_mirror,
read at run time), so the machine's own apt is never touched.  It is cached
in DIR/root-KEY/, KEY a hash of the suite and the package list: a second run
downloads nothing, and a change of the packages makes a new root (the old
ones go).  It is made under DIR/lock, so that `make test` can make it in
the background while it builds (a `prepare` run), and the tests wait for
it (wait(), or root() itself) instead of using a half-made root.
"""

import fcntl
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "kernels"))
import kmatrix  # noqa: E402  (the mirror, as the kernel matrix finds it)

DEBOOTSTRAP_TIMEOUT = 900


def root(base, suite, packages, log):
    """base/root-KEY/, a minbase of suite with packages installed, made when
    it is not there yet, waiting for another run making it; returns (path,
    seconds debootstrap took, 0 when cached)."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _make(base, suite, sorted(set(packages)), log)


def wait(base):
    """Returns once no run holds base's lock (a root made meanwhile is
    complete)."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)


def _make(base, suite, packages, log):
    key = hashlib.sha256(f"{suite} minbase {' '.join(packages)}".encode()).hexdigest()[:12]
    path = base / f"root-{key}"
    if (path / ".complete").exists():
        return path, 0.0
    uri, keyring = kmatrix.machine_mirror()
    tmp = base / f"root-{key}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"debootstrap {suite} minbase + {', '.join(packages)} into {tmp}")
    start = time.monotonic()
    kmatrix.run(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}",
                 f"--keyring={keyring}", suite, tmp, uri], timeout=DEBOOTSTRAP_TIMEOUT)
    seconds = round(time.monotonic() - start, 1)
    # debootstrap unmounts the /proc and /sys it mounted there unless one
    # is busy then (a `grep -r` of the tree reading /proc/PID/pagemap): a
    # copy of the root would then copy the host's /proc, 75 GB of it once
    for mnt in ("proc", "sys"):
        if os.path.ismount(tmp / mnt):
            kmatrix.run(["umount", "--lazy", tmp / mnt])
    # The downloaded .debs are not needed again; apt lists stay (for
    # apt-get purge in a boot).
    for deb in (tmp / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    (tmp / ".complete").write_text(f"{suite}: {' '.join(packages)}\n")
    for old in base.glob("root-*"):
        if old.is_dir() and old != tmp:
            shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, path)
    return path, seconds
