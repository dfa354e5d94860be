"""The package, built once for the session: test_package.py checks it from
the outside, test_boot.py installs it in a booted Debian 12."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 900


@pytest.fixture(scope="session")
def package():
    """Builds the .deb as a user would from a clean copy of the tree: `make
    deb` in an export of the tracked files (no .git, no build folder);
    yields (path to the .deb, folder it is unpacked in).  PERFD_DEB=PATH
    checks that .deb instead (one `make deb` built, say)."""
    tmp = Path(tempfile.mkdtemp(prefix="perfd-deb-"))
    if os.environ.get("PERFD_DEB"):
        debs = [Path(os.environ["PERFD_DEB"]).resolve()]
    else:
        debs = build(tmp / "src")
    root = tmp / "root"
    assert subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(root)]).returncode == 0
    yield debs[0], root
    shutil.rmtree(tmp, ignore_errors=True)


def build(src):
    """`make deb` in an export of the tracked files into src; returns the
    .debs it made (one)."""
    src.mkdir(parents=True)
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                           check=True).stdout
    tar = subprocess.Popen(["tar", "--null", "-T", "-", "-cf", "-"], cwd=REPO,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    untar = subprocess.Popen(["tar", "-xf", "-", "-C", str(src)], stdin=tar.stdout)
    tar.stdin.write(files)
    tar.stdin.close()
    assert untar.wait() == 0 and tar.wait() == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "PERFD_"))}
    r = subprocess.run(["make", "-C", str(src), "deb"], capture_output=True, text=True, env=env,
                       timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, f"make deb failed:\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    debs = list((src / "build" / "deb").glob("perfd_*_amd64.deb"))
    assert len(debs) == 1, debs
    return debs
