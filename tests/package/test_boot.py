"""The boot test: the package installed in a fresh Debian 12 whose PID 1 is
systemd (guest.py: a debootstrap root booted under systemd-nspawn), then
operated as an administrator would: `systemctl enable --now perfd`,
`perfctl status` as a member of group perfd and refused to a user who is
not, `systemctl reload perfd` after a change of frequency in
/etc/perfd/perfd.conf, perfd's lines in the journal with their
priorities, a clean `systemctl stop perfd`, and `apt-get purge perfd`
leaving only what Debian's policy keeps.

The tests run in file order on one guest and each step builds on the one
before (the install, then the service, ...), as the administrator's
session would.  Needs root (nspawn) and BPF; about 15 s with the root
cached, plus debootstrap's 2-3 minutes the first time (guest.py).
"""

import json
import re
import shutil
import time
from pathlib import Path

import pytest

import guest as guestlib

MEMBER, OUTSIDER = "alice", "bob"
CONF = "/etc/perfd/perfd.conf"
SOCKET = "/run/perfd/perfd.sock"
# The reload's frequency: above 99 Hz by enough that the ring buffer perfd
# sized at start (1 KiB per sample per CPU, at least 1 MiB) is small for it
# on any number of CPUs, so that perfd warns about it.
NEW_HZ = 1999
STATUS_TIMEOUT = 20
# linux/capability.h's numbers of the capabilities the unit may keep
CAPS = {"CAP_DAC_READ_SEARCH": 2, "CAP_SYS_PTRACE": 19, "CAP_SYSLOG": 34, "CAP_PERFMON": 38,
        "CAP_BPF": 39, "CAP_CHECKPOINT_RESTORE": 40}


@pytest.fixture(scope="module")
def guest(package):
    deb, _ = package
    start = time.monotonic()
    root, debootstrap_s = guestlib.root()
    missing = guestlib.missing_packages(deb, root)
    assert not missing, f"the .deb depends on {missing}: add them to guest.ROOT_PACKAGES"
    g = guestlib.Guest(root)
    shutil.copy2(deb, g.path("/root") / deb.name)
    g.deb = f"/root/{deb.name}"
    try:
        g.start()
    except BaseException:
        g.stop()
        raise
    print(f"boot test: root {'made in %.1f s' % debootstrap_s if debootstrap_s else 'cached'}, "
          f"booted {time.monotonic() - start:.1f} s after the test's start")
    yield g
    g.stop()
    print(f"boot test: {time.monotonic() - start:.1f} s in all")


def ok(r, what):
    assert r.returncode == 0, f"{what} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def journal(g, unit="perfd.service"):
    """The journal's entries of unit, as dicts (journalctl -o json)."""
    out = ok(g.run("journalctl", "--unit", unit, "--output", "json", "--no-pager"), "journalctl")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def perfd_entries(g):
    return [e for e in journal(g) if e.get("SYSLOG_IDENTIFIER") == "perfd"]


def main_pid(g):
    return int(ok(g.run("systemctl", "show", "--property", "MainPID", "--value", "perfd.service"),
                  "systemctl show"))


def running(g, comm):
    """The guest's pids whose comm is comm."""
    out = g.run("sh", "-c", "grep -H . /proc/[0-9]*/comm").stdout
    return [line.split("/")[2] for line in out.splitlines() if line.split(":", 1)[1] == comm]


def wait_status(g, pattern, user=MEMBER):
    """perfctl status as user until its output matches pattern (perfd
    applies a reload after `systemctl reload` returns); returns it."""
    deadline = time.monotonic() + STATUS_TIMEOUT
    while True:
        r = g.run("perfctl", "status", user=user)
        if r.returncode == 0 and re.search(pattern, r.stdout, re.M):
            return r.stdout
        if time.monotonic() > deadline:
            pytest.fail(f"perfctl status as {user} never matched {pattern!r} (exit {r.returncode}):\n"
                        f"{r.stdout}{r.stderr}")
        time.sleep(0.5)


def test_the_package_installs(guest):
    ok(guest.run("dpkg", "--install", guest.deb, timeout=120), "dpkg --install")
    guest.path(guest.deb).unlink()
    listing = ok(guest.run("dpkg", "--listfiles", "perfd"), "dpkg --listfiles")
    listed = [f for f in listing.splitlines() if f.startswith("/")]
    # what purge must remove: the files, and the folders named after perfd
    # (/usr/share/doc/perfd, not /usr/sbin; /lib is merged /usr's link)
    guest.files = [f for f in listed if not guest.path(f).is_dir()]
    guest.own_dirs = [f for f in listed if guest.path(f).is_dir() and "perfd" in Path(f).name]
    assert "/usr/sbin/perfd" in guest.files and "/lib/systemd/system/perfd.service" in guest.files
    assert "/etc/perfd" in guest.own_dirs, guest.own_dirs
    group = ok(guest.run("getent", "group", "perfd"), "getent group perfd").split(":")
    assert int(group[2]) < 1000, f"perfd is not a system group: {group}"


def test_enable_now_starts_socket_and_service(guest):
    ok(guest.run("systemctl", "enable", "--now", "perfd", timeout=120), "systemctl enable --now perfd")
    for unit in ("perfd.socket", "perfd.service"):
        assert guest.run("systemctl", "is-enabled", unit).stdout.strip() == "enabled", unit
        assert guest.run("systemctl", "is-active", unit).stdout.strip() == "active", unit
    # the socket as the package's perfd.socket makes it
    assert ok(guest.run("stat", "-c", "%F %a %U %G", SOCKET), "stat").strip() == "socket 660 root perfd"
    # the unit's sandbox, applied by systemd inside the container
    status = dict(line.split(":\t", 1) for line in
                  guest.run("cat", f"/proc/{main_pid(guest)}/status").stdout.splitlines() if ":\t" in line)
    unit = guest.path("/lib/systemd/system/perfd.service").read_text()
    names = re.search(r"^CapabilityBoundingSet=(.*)$", unit, re.M).group(1).split()
    assert int(status["CapBnd"], 16) == sum(1 << CAPS[n] for n in names), (status["CapBnd"], names)
    assert (status["NoNewPrivs"].strip(), status["Seccomp"].strip()) == ("1", "2"), status
    # Nice=: the loop above the workloads, its pools at their nice 0
    # (daemon/base/priority.h), though perfd has no CAP_SYS_NICE
    nices = {}
    for tid in guest.run("ls", f"/proc/{main_pid(guest)}/task").stdout.split():
        stat = guest.run("cat", f"/proc/{main_pid(guest)}/task/{tid}/stat").stdout
        if stat:
            nices[tid] = int(stat.rsplit(")", 1)[1].split()[16])
    assert nices[str(main_pid(guest))] == -5 and sorted(set(nices.values())) == [-5, 0], nices
    started = [e["MESSAGE"] for e in perfd_entries(guest) if e["MESSAGE"].startswith("Sampling ")]
    assert started, "perfd logged no start line"
    # The unit grants CAP_SYSLOG for /proc/kallsyms: kernel frames named.
    unavailable = [e["MESSAGE"] for e in perfd_entries(guest) if "Kernel symbols unavailable" in e["MESSAGE"]]
    assert unavailable == []


def test_status_answers_a_member_of_perfd_and_refuses_others(guest):
    ok(guest.run("useradd", "--groups", "perfd", MEMBER), "useradd")
    ok(guest.run("useradd", OUTSIDER), "useradd")
    out = wait_status(guest, r"^Sampling: +99 Hz on \d+ CPUs")
    assert f"pid {main_pid(guest)}," in out.splitlines()[0], out
    r = guest.run("perfctl", "status", user=OUTSIDER)
    assert r.returncode == 3, f"perfctl status as a non-member exited {r.returncode}:\n{r.stdout}{r.stderr}"
    assert "Permission denied" in r.stderr, r.stderr


def test_reload_applies_a_new_frequency(guest):
    pid = main_pid(guest)
    conf = guest.path(CONF)
    text = conf.read_text()
    assert "\n#frequency = 99\n" in text
    conf.write_text(text.replace("\n#frequency = 99\n", f"\nfrequency = {NEW_HZ}\n"))
    ok(guest.run("systemctl", "reload", "perfd"), "systemctl reload perfd")
    wait_status(guest, rf"^Sampling: +{NEW_HZ} Hz on \d+ CPUs")
    assert main_pid(guest) == pid, "the reload restarted perfd"
    assert guest.run("systemctl", "is-active", "perfd").stdout.strip() == "active"
    messages = [e["MESSAGE"] for e in perfd_entries(guest)]
    assert any(m.startswith(f"Reloaded the configuration from {CONF}:") and "frequency" in m
               for m in messages), messages[-10:]


def test_journal_has_perfds_lines_with_their_priorities(guest):
    entries = perfd_entries(guest)
    assert entries, "no journal entry of perfd"
    for e in entries:
        print(f"boot test: journal <{e.get('PRIORITY')}> {e['MESSAGE']}")
    assert all("PRIORITY" in e for e in entries)
    # sd-daemon's "<N>" prefixes became priorities, not text
    assert [e["MESSAGE"] for e in entries if re.match(r"<\d>", e["MESSAGE"])] == []
    by_text = {e["MESSAGE"]: int(e["PRIORITY"]) for e in entries}
    start = [p for m, p in by_text.items() if m.startswith("Sampling ")]
    assert start and set(start) == {6}, f"start line priorities {start} (6 is info)"
    reloaded = [p for m, p in by_text.items() if m.startswith("Reloaded the configuration")]
    assert reloaded and set(reloaded) == {6}, reloaded
    ring = [p for m, p in by_text.items() if m.startswith("The ring buffer keeps the size")]
    assert ring and set(ring) == {4}, f"ring buffer warning priorities {ring} (4 is warning)"


def test_unit_rates_ok_in_systemd_analyze_security(guest):
    out = ok(guest.run("systemd-analyze", "security", "--no-pager", "perfd.service"),
             "systemd-analyze security")
    m = re.search(r"Overall exposure level for perfd.service: (\d+\.\d+) (\w+)", out)
    assert m, out
    print(f"systemd-analyze security perfd.service (in the guest): {m.group(1)} {m.group(2)}")
    assert m.group(2) in ("OK", "SAFE", "PERFECT"), m.group(0)


def test_stop_is_clean(guest):
    before = len(journal(guest))
    ok(guest.run("systemctl", "stop", "perfd"), "systemctl stop perfd")
    show = dict(line.split("=", 1) for line in ok(guest.run(
        "systemctl", "show", "perfd.service", "--property",
        "ActiveState,Result,ExecMainCode,ExecMainStatus"), "systemctl show").splitlines())
    # ExecMainCode 1 is CLD_EXITED: no signal, no core
    assert show == {"ActiveState": "inactive", "Result": "success", "ExecMainCode": "1",
                    "ExecMainStatus": "0"}, show
    after = [e["MESSAGE"] for e in journal(guest)[before:]]
    assert "perfd.service: Deactivated successfully." in after, after
    assert not [m for m in after if re.search(r"dumped core|core-dump|[Ff]ailed", m)], after
    assert running(guest, "perfd") == [], "a perfd still runs"


def test_purge_removes_all_but_what_policy_keeps(guest):
    ok(guest.run("apt-get", "purge", "--yes", "perfd", timeout=120), "apt-get purge perfd")
    assert guest.run("dpkg", "--status", "perfd").returncode != 0, "perfd is still known to dpkg"
    left = [f for f in guest.files + guest.own_dirs if guest.path(f).exists() or guest.path(f).is_symlink()]
    assert left == [], f"the package's files and folders left after purge: {left}"
    for path in ("/etc/perfd", "/var/lib/perfd"):
        assert not guest.path(path).exists(), f"{path} is left after purge"
    links = [str(p) for p in guest.path("/etc/systemd/system").rglob("perfd*")]
    assert links == [], f"unit links left: {links}"
    assert guest.run("systemctl", "is-active", "perfd.socket").stdout.strip() != "active"
    assert running(guest, "perfd") == []
    # Nothing named after perfd anywhere that outlives a reboot (dpkg's own
    # records of it included); /run is a tmpfs.
    found = guest.run("find", "/etc", "/var", "/usr", "/opt", "/srv", "/root", "/home", "-xdev",
                      "-name", "*perfd*").stdout.split()
    assert found == [], f"left after purge: {found}"
    print(f"boot test: after purge, /run holds {guest.run('find', '/run', '-name', '*perfd*').stdout.split()}")
    # Debian's policy: a system group stays (files may still carry its gid),
    # and the postrm leaves it.
    assert guest.run("getent", "group", "perfd").returncode == 0
