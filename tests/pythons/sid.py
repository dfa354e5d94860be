"""sid.py - the CPythons of Debian's unstable suite (3.14, 3.15), built
for sid's libc, for the Python tests: a sid root made by debootstrap
(tests/debroot.py) in build/sid/root-KEY/, build/sid/root pointing at it,
and each interpreter run in it by chroot, in a mount namespace of its own
with its own /proc.  Such a process is what perfd meets in a container:
its files are read through its mappings and its root, and its maps name
them as perfd sees them (build/sid/root-KEY/usr/...).

The root holds pythonX.Y and pythonX.Y-dev (the headers test-pyruntime's
offsets are checked against).  A test runs build/sid/bin/pythonX.Y, a
script that does that and runs /usr/bin/pythonX.Y, with the same pid; the
files it names are copied into the root at the same absolute paths first
(mirror()), so that a script's path and a workload library's are the same
inside as outside, and so are the paths perfd reports.

`sid.py prepare` makes the root (make test runs it in the background while
it builds); `sid.py wait` returns once no prepare runs.
"""

import os
import shlex
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
import debroot  # noqa: E402

# The root is the plain build's also when the sanitized one asks: one copy.
SID_DIR = REPO / "build" / "sid"
SUITE = "sid"
VERSIONS = ("3.14", "3.15")
PACKAGES = [f"python{v}" for v in VERSIONS] + [f"python{v}-dev" for v in VERSIONS]


def log(msg):
    print(f"sid: {msg}", file=sys.stderr, flush=True)


def root():
    """build/sid/root: the sid root, made when it is not there (or waited
    for while a prepare makes it)."""
    path, _ = debroot.root(SID_DIR, SUITE, PACKAGES, log)
    link = SID_DIR / "root"
    if not link.is_symlink() or os.readlink(link) != path.name:
        tmp = SID_DIR / "root.new"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(path.name)
        os.replace(tmp, link)
    return link


def python(version):
    """build/sid/bin/pythonVERSION: runs sid's /usr/bin/pythonVERSION in the
    root with a /proc, as the same process: in a mount namespace of its own
    (unshare, without a fork), /proc mounted in the root, then chroot."""
    r = root()
    wrapper = SID_DIR / "bin" / f"python{version}"
    text = ("#!/bin/sh\n"
            "exec unshare --mount sh -c 'mount -t proc proc \"$0/proc\" && "
            f"exec chroot \"$0\" /usr/bin/python{version} \"$@\"' "
            f"{shlex.quote(str(r.resolve()))} \"$@\"\n")
    if not wrapper.exists() or wrapper.read_text() != text:
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        tmp = wrapper.with_suffix(".new")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, wrapper)
    return str(wrapper)


def mirror(*paths):
    """Copies each file or directory in paths into the root at the same
    absolute path (a directory whole), replacing what was there."""
    r = root().resolve()
    for p in map(Path, paths):
        p = p.resolve()
        dest = r / p.relative_to("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if p.is_dir():
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(p, dest, symlinks=True)
        else:
            shutil.copy2(p, dest)


def pytest_param(version, make, *mirrored):
    """pytest.param(make(path of the wrapper), id="sid-VERSION"), paths
    mirrored into the root first.  When the root cannot be made (no network,
    a sid without the package), a skip that says why if
    PERFD_ALLOW_MISSING_PYTHON is set, as for a missing pyenv version; else
    the error, which fails the test module's collection."""
    import pytest

    label = f"sid-{version}"
    try:
        mirror(*mirrored)
        return pytest.param(make(python(version)), id=label)
    except Exception as e:
        if not os.environ.get("PERFD_ALLOW_MISSING_PYTHON"):
            raise
        return pytest.param(None, id=label, marks=pytest.mark.skip(
            reason=f"sid's python{version} is not there ({e}): tests/pythons/sid.py prepare"))


if __name__ == "__main__":
    if sys.argv[1:] == ["prepare"]:
        path, took = debroot.root(SID_DIR, SUITE, PACKAGES, log)
        root()
        log(f"root {path} {'made in %.1f s' % took if took else 'cached'}")
    elif sys.argv[1:] == ["wait"]:
        debroot.wait(SID_DIR)
    else:
        sys.exit("usage: sid.py prepare|wait")
