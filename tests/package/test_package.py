"""The Debian package, built as a user would from a clean copy of the
tree: `make deb` in an export of the tracked files (no .git, no build
folder), then checked from the outside: lintian reports no error and no
warning it was not told about (packaging/debian/perfd.lintian-overrides
says why each one stays), the file list, the conffile, the group the
postinst creates, the binaries' version and hardening, and the rating
`systemd-analyze security` gives the unit the package installs.

Needs no root or BPF; takes the time of one build (about 2 minutes on 2
CPUs), which test_boot.py shares (conftest.py's package fixture).  The
package's own build runs test_docs.py (dh_auto_test).
"""

import os
import re
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*argv, **kw):
    kw.setdefault("timeout", 120)
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def changelog_version():
    first = (REPO / "packaging" / "debian" / "changelog").read_text().splitlines()[0]
    return re.match(r"perfd \(([^)]+)\)", first).group(1)


def test_package_name_is_perfd_version_amd64(package):
    deb, _ = package
    assert deb.name == f"perfd_{changelog_version()}_amd64.deb"
    print(f"{deb.name}: {deb.stat().st_size} bytes")


def test_lintian_reports_no_error_and_no_unexplained_warning(package):
    deb, _ = package
    r = run("lintian", "--no-cfg", "--display-info", str(deb), timeout=300)
    lines = r.stdout.splitlines()
    print(r.stdout)
    assert [l for l in lines if l.startswith("E:")] == [], r.stdout
    assert [l for l in lines if l.startswith("W:")] == [], r.stdout
    # the informational tags it gave are overridden, each with its reason
    assert [l for l in lines if l.startswith("I:")] == [], r.stdout


EXPECTED_FILES = [
    "./usr/sbin/perfd",
    "./usr/bin/perfctl",
    "./lib/systemd/system/perfd.service",
    "./lib/systemd/system/perfd.socket",
    "./usr/share/man/man8/perfd.8.gz",
    "./usr/share/man/man1/perfctl.1.gz",
    "./usr/share/man/man5/perfd.conf.5.gz",
    "./usr/share/bash-completion/completions/perfctl",
    "./usr/share/bash-completion/completions/perfd",
    "./usr/share/zsh/vendor-completions/_perfctl",
    "./etc/perfd/perfd.conf",
    "./usr/share/doc/perfd/README.md.gz",
    "./usr/share/doc/perfd/copyright",
    "./usr/share/doc/perfd/changelog.gz",
    "./usr/share/lintian/overrides/perfd",
]


def test_file_list(package):
    deb, _ = package
    listing = run("dpkg-deb", "-c", str(deb)).stdout
    files = {}
    for line in listing.splitlines():
        mode, owner, _size, _date, _time, path = line.split(None, 5)
        files[path.split(" -> ")[0]] = (mode, owner)
    missing = [f for f in EXPECTED_FILES if f not in files]
    assert missing == [], f"not in the package: {missing}\n{listing}"
    assert files["./usr/sbin/perfd"] == ("-rwxr-xr-x", "root/root")
    assert files["./usr/bin/perfctl"] == ("-rwxr-xr-x", "root/root")
    unexpected = [f for f, (mode, _) in files.items()
                  if not mode.startswith("d") and f not in EXPECTED_FILES]
    assert unexpected == [], f"files nothing expects: {unexpected}"


def test_conffile_group_and_units(package):
    deb, _ = package
    with tempfile.TemporaryDirectory() as control:
        assert run("dpkg-deb", "-e", str(deb), control).returncode == 0
        assert Path(control, "conffiles").read_text().split() == ["/etc/perfd/perfd.conf"]
        postinst = Path(control, "postinst").read_text()
        # the group comes before debhelper's lines start the units
        assert re.search(r"addgroup --system --quiet perfd", postinst), postinst
        assert postinst.index("addgroup") < postinst.index("deb-systemd-helper")
        assert "perfd.socket" in postinst and "perfd.service" in postinst
        assert "rm -rf /var/lib/perfd" in Path(control, "postrm").read_text()


def test_binaries_say_the_package_version_and_are_hardened(package):
    _, root = package
    for prog, path in (("perfd", "usr/sbin/perfd"), ("perfctl", "usr/bin/perfctl")):
        binary = str(root / path)
        r = run(binary, "--version")
        assert r.stdout == f"{prog} {changelog_version()}\n", r.stdout + r.stderr
        dynamic = run("readelf", "-d", "-W", binary).stdout
        assert re.search(r"FLAGS.*\bNOW\b", dynamic), f"{prog} is not linked with -z now"
        assert "Type: DYN" in run("readelf", "-h", "-W", binary).stdout.replace("  ", " ") \
            or "DYN (" in run("readelf", "-h", binary).stdout, f"{prog} is not PIE"
        symbols = run("readelf", "--dyn-syms", "-W", binary).stdout
        assert "__stack_chk_fail" in symbols, f"{prog} has no stack protector"
        assert re.search(r"__\w+_chk\b", symbols), f"{prog} has no FORTIFY_SOURCE functions"


def test_installed_unit_rates_ok(package):
    _, root = package
    unit = root / "lib/systemd/system/perfd.service"
    assert "ExecStart=/usr/sbin/perfd\n" in unit.read_text()
    r = run("systemd-analyze", "security", "--offline=yes", str(unit))
    m = re.search(r"Overall exposure level for perfd.service: (\d+\.\d+) (\w+)", r.stdout)
    assert m, r.stdout + r.stderr
    print(f"systemd-analyze security: {m.group(1)} {m.group(2)}")
    assert m.group(2) in ("OK", "SAFE", "PERFECT"), m.group(0)
    socket = (root / "lib/systemd/system/perfd.socket").read_text()
    assert re.search(r"^SocketMode=0660$", socket, re.M)
    assert re.search(r"^SocketGroup=perfd$", socket, re.M)


def test_make_install_and_uninstall(tmp_path):
    """`make install` stages every file under DESTDIR with the unit pointing
    at PREFIX's perfd, keeps an existing configuration, and `make
    uninstall` removes all it wrote but that configuration."""
    build = os.environ.get("PERFD_BUILD") or str(REPO / "build")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    common = ["make", "-C", str(REPO), f"BUILD={build}", f"DESTDIR={tmp_path}", "PREFIX=/opt/perfd"]
    r = run(*common, "install", env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == sorted([
        "etc/perfd/perfd.conf",
        "opt/perfd/bin/perfctl",
        "opt/perfd/sbin/perfd",
        "opt/perfd/lib/systemd/system/perfd.service",
        "opt/perfd/lib/systemd/system/perfd.socket",
        "opt/perfd/share/bash-completion/completions/perfctl",
        "opt/perfd/share/bash-completion/completions/perfd",
        "opt/perfd/share/zsh/site-functions/_perfctl",
        "opt/perfd/share/doc/perfd/README.md",
        "opt/perfd/share/man/man1/perfctl.1",
        "opt/perfd/share/man/man5/perfd.conf.5",
        "opt/perfd/share/man/man8/perfd.8",
    ]), files
    unit = (tmp_path / "opt/perfd/lib/systemd/system/perfd.service").read_text()
    assert "ExecStart=/opt/perfd/sbin/perfd\n" in unit
    conf = tmp_path / "etc/perfd/perfd.conf"
    conf.write_text("frequency = 49\n")
    assert run(*common, "install", env=env, timeout=600).returncode == 0
    assert conf.read_text() == "frequency = 49\n", "make install replaced the configuration"
    r = run(*common, "uninstall", env=env)
    assert r.returncode == 0, r.stderr
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["etc/perfd/perfd.conf"], left
