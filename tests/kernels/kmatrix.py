"""kmatrix.py - the kernel matrix's machinery (issue 26): Debian's cloud
kernels and a QEMU from Debian's archive, an initramfs holding perfd, and a
boot whose serial console is parsed into sections.

Everything comes from Debian's archive through apt with a private state
(lists, caches and sources under BUILD/kernels/apt/), so the machine's own
apt state is never touched, and from the mirror the machine's own sources
name.  Packages are downloaded, never installed: kernels and QEMU are
extracted with dpkg-deb -x.  What was picked is written to
BUILD/kernels/selection.json; a later run with it and the files in place
uses no network at all (KERNELS_REFRESH=1 picks the archive's current
versions again, downloading only packages not in BUILD/kernels/debs/).

The judging of a guest's output lives in test_kernels.py; this module only
fetches, builds, boots and parses.  Run it directly to boot one kernel by
hand:  python3 tests/kernels/kmatrix.py [SUITE]   (prints the console).
"""

import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PERFD_BUILD") or REPO / "build")
KDIR = BUILD / "kernels"
APT_DIR = KDIR / "apt"
DEBS = KDIR / "debs"
QEMU_DIR = KDIR / "qemu"

# The matrix: the suite whose linux-image-cloud-amd64 names the kernel.
# bookworm: Debian 12's 6.1; trixie: Debian 13's 6.12; sid: the newest.
SUITES = ("bookworm", "trixie", "sid")
# bookworm's own QEMU 7.2 double-faults in about half of its boots of 6.12
# under TCG; bookworm-backports' does not.
QEMU_SUITE = "bookworm-backports"
QEMU_PACKAGES = ("qemu-system-x86", "qemu-system-common", "qemu-system-data", "seabios")
APT_SUITES = ("bookworm", "bookworm-backports", "trixie", "sid")

# The guest's settings, written to its /etc/kmatrix.conf.  TCG runs the
# guest some 10-30 times slower than the host; 499 Hz for 4 s gives ~2000
# samples of a workload, enough for a 3:1 split to +-4 points (4 sd).
GUEST = {
    "FREQUENCY": 499,     # perfd --frequency
    "DURATION": 4,        # seconds of each snapshot
    "SETTLE": 1,          # seconds a workload runs before its snapshot
    "READY_TIMEOUT": 120,  # seconds perfd may take to answer status
    "CHECK_TIMEOUT": 120,  # seconds perfd --check may take
}
# The whole guest run, from QEMU's start to power-off: 5-10 s of boot, the
# BPF verifier twice (--check, then the daemon: each up to its timeout
# above), two snapshots.
# The verifier may hold much memory while it works on a large program.
GUEST_MIB = 2048
BOOT_TIMEOUT = int(os.environ.get("KERNELS_BOOT_TIMEOUT", "480"))
MARK = "@@perfd-kernels"
# The last run's summary, one line per kernel, for pytest's report.
SUMMARY = []

PYTHON = "/usr/bin/python3.11"
PY_WORKLOAD = REPO / "tests" / "workloads" / "python" / "split.py"


def log(msg):
    print(f"kmatrix: {msg}", file=sys.stderr, flush=True)


def run(argv, **kw):
    """Runs argv, raising with its output when it fails; returns stdout."""
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {p.returncode}:\n"
                           f"{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return p.stdout


# --- apt, privately -----------------------------------------------------------

def parse_deb822(text):
    """The stanzas of a deb822 file as dicts (continuation lines joined)."""
    stanzas, cur, key = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if cur:
                stanzas.append(cur)
            cur, key = {}, None
        elif line.startswith("#"):
            continue
        elif line[0] in " \t" and key:
            cur[key] += " " + line.strip()
        else:
            key, _, value = line.partition(":")
            cur[key.strip().lower()] = value.strip()
    if cur:
        stanzas.append(cur)
    return stanzas


def machine_mirror(sources_dir=Path("/etc/apt/sources.list.d"), sources_list=Path("/etc/apt/sources.list")):
    """(URI, keyring) of the Debian archive the machine's apt sources name:
    the first deb source whose suites hold no "-security" suite.  Read at
    run time, so that no mirror is written into this code."""
    candidates = []
    for path in sorted(sources_dir.glob("*.sources")) if sources_dir.is_dir() else []:
        for st in parse_deb822(path.read_text()):
            if "deb" not in st.get("types", "").split() or st.get("enabled", "yes") == "no":
                continue
            suites = st.get("suites", "").split()
            if any(s.endswith("-security") for s in suites):
                continue
            for uri in st.get("uris", "").split():
                candidates.append((uri, st.get("signed-by")))
    if sources_list.exists():
        for line in sources_list.read_text().splitlines():
            m = re.match(r"^deb\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)", line)
            if m and not m.group("suite").endswith("-security"):
                key = re.search(r"signed-by=(\S+)", m.group("opts") or "")
                candidates.append((m.group("uri"), key.group(1) if key else None))
    if not candidates:
        raise RuntimeError("no Debian archive in the machine's apt sources "
                           f"({sources_dir}/*.sources, {sources_list})")
    uri, key = candidates[0]
    return uri.rstrip("/"), key or "/usr/share/keyrings/debian-archive-keyring.gpg"


class Apt:
    """apt-get and apt-cache over a private state: their own sources file,
    lists, caches; the machine's dpkg status is not read either."""

    def __init__(self, root=APT_DIR):
        self.root = root
        self.sources = root / "sources.list"
        self.opts = []
        for k, v in (("Dir::State::Lists", root / "lists"),
                     ("Dir::Etc::sourcelist", self.sources),
                     ("Dir::Etc::sourceparts", "/nonexistent"),
                     ("Dir::Cache", root / "cache"),
                     ("Dir::State::status", "/dev/null"),
                     # files land in our own folders: no _apt user sandbox
                     ("APT::Sandbox::User", "root"),
                     ("Debug::NoLocking", "1")):
            self.opts += ["-o", f"{k}={v}"]

    def update(self):
        uri, key = machine_mirror()
        (self.root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (self.root / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        self.sources.write_text("".join(f"deb [signed-by={key}] {uri} {s} main\n" for s in APT_SUITES))
        log(f"apt-get update ({', '.join(APT_SUITES)}) into {self.root}")
        run(["apt-get", *self.opts, "-q", "update"])

    def version_in(self, package, suite):
        """The version of package that suite holds (apt-cache madison)."""
        out = run(["apt-cache", *self.opts, "madison", package])
        for line in out.splitlines():
            cols = [c.strip() for c in line.split("|")]
            if len(cols) >= 3 and cols[0] == package and re.search(rf"\s{re.escape(suite)}/", cols[2] + " "):
                return cols[1]
        raise RuntimeError(f"no {package} in {suite}:\n{out}")

    def depends(self, package, version):
        """The package names package=version depends on (first of each
        alternative)."""
        out = run(["apt-cache", *self.opts, "show", f"{package}={version}"])
        stanza = parse_deb822(out)[0]
        return [d.split("|")[0].split("(")[0].strip() for d in stanza.get("depends", "").split(",")
                if d.strip()]

    def download(self, package, version):
        """BUILD/kernels/debs/'s .deb of package=version, downloaded when
        not there yet."""
        DEBS.mkdir(parents=True, exist_ok=True)
        have = cached_deb(package, version)
        if have:
            return have
        log(f"apt-get download {package}={version}")
        run(["apt-get", *self.opts, "-q", "download", f"{package}={version}"], cwd=DEBS)
        have = cached_deb(package, version)
        if not have:
            raise RuntimeError(f"apt-get download {package}={version} left no .deb in {DEBS}")
        return have


def cached_deb(package, version):
    for deb in DEBS.glob(f"{package}_*.deb"):
        if run(["dpkg-deb", "-f", deb, "Version"]).strip() == version:
            return deb
    return None


# --- kernels and QEMU ---------------------------------------------------------

def resolve_kernel(apt, suite):
    """The packages of suite's current cloud kernel: the versioned image
    that linux-image-cloud-amd64 depends on, and what holds the vmlinuz
    when the image is split (sid's linux-binary-*)."""
    meta = "linux-image-cloud-amd64"
    version = apt.version_in(meta, suite)
    images = [d for d in apt.depends(meta, version) if d.startswith("linux-image-")]
    if len(images) != 1:
        raise RuntimeError(f"{meta}={version} ({suite}) depends on {images}, not one image")
    image = images[0]
    packages = [image] + [d for d in apt.depends(image, version) if d.startswith("linux-binary-")]
    return {"suite": suite, "meta_version": version, "packages": packages, "version": version}


def extract_kernel(sel, debs):
    """Extracts the kernel packages into BUILD/kernels/kernel-SUITE/;
    returns (vmlinuz path, kernel release)."""
    dest = KDIR / f"kernel-{sel['suite']}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for deb in debs:
        run(["dpkg-deb", "-x", deb, dest])
    found = sorted(dest.glob("boot/vmlinuz-*")) + sorted(dest.glob("usr/lib/modules/*/vmlinuz"))
    if not found:
        raise RuntimeError(f"no vmlinuz in {[str(d) for d in debs]}")
    vmlinuz = found[0]
    release = vmlinuz.name[len("vmlinuz-"):] if vmlinuz.name.startswith("vmlinuz-") else vmlinuz.parent.name
    return vmlinuz, release


def qemu_binary():
    return QEMU_DIR / "usr" / "bin" / "qemu-system-x86_64"


def prepare(refresh=None):
    """Makes sure the kernels and QEMU are downloaded and extracted; returns
    the selection {"kernels": {suite: {...}}, "qemu": {...}}.  Without
    refresh, an earlier selection whose files are all there is used as it
    is, with no network."""
    refresh = os.environ.get("KERNELS_REFRESH") == "1" if refresh is None else refresh
    path = KDIR / "selection.json"
    if not refresh and path.exists():
        sel = json.loads(path.read_text())
        if all(Path(k["vmlinuz"]).exists() for k in sel["kernels"].values()) and qemu_binary().exists() \
                and set(sel["kernels"]) == set(SUITES):
            return sel
    KDIR.mkdir(parents=True, exist_ok=True)
    apt = Apt()
    apt.update()
    sel = {"kernels": {}, "qemu": {}}
    for suite in SUITES:
        k = resolve_kernel(apt, suite)
        debs = [apt.download(p, k["version"]) for p in k["packages"]]
        vmlinuz, release = extract_kernel(k, debs)
        k.update(vmlinuz=str(vmlinuz), release=release)
        sel["kernels"][suite] = k
        log(f"{suite}: {release} ({', '.join(k['packages'])} {k['version']})")
    shutil.rmtree(QEMU_DIR, ignore_errors=True)
    QEMU_DIR.mkdir(parents=True)
    for p in QEMU_PACKAGES:
        v = apt.version_in(p, QEMU_SUITE)
        run(["dpkg-deb", "-x", apt.download(p, v), QEMU_DIR])
        sel["qemu"][p] = v
    missing = [line.strip() for line in run(["ldd", qemu_binary()]).splitlines() if "not found" in line]
    if missing:
        raise RuntimeError(f"{qemu_binary()} lacks shared libraries {missing}: install Debian's "
                           "qemu-system-x86 for them (make deps-test)")
    log(f"QEMU {sel['qemu']['qemu-system-x86']} ({QEMU_SUITE}) in {QEMU_DIR}")
    path.write_text(json.dumps(sel, indent=2) + "\n")
    return sel


# --- the initramfs ------------------------------------------------------------

def shared_libraries(binary):
    """The absolute paths of the shared libraries binary loads, the dynamic
    loader included (ldd), those found beside it through $ORIGIN left out."""
    libs = []
    for line in run(["ldd", binary]).splitlines():
        if "not found" in line:
            raise RuntimeError(f"{binary}: {line.strip()}")
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m and not Path(m.group(1)).resolve().is_relative_to(BUILD.resolve()):
            libs.append(m.group(1))
    return libs


def python_modules():
    """The files of the standard library that split.py imports, run as the
    guest runs it (-S -I, empty environment): the names from -X importtime,
    the files from a find_spec of each.  os.py is always there: it is how
    the interpreter finds its prefix."""
    p = subprocess.run([PYTHON, "-S", "-I", "-X", "importtime", str(PY_WORKLOAD), "0.2"],
                       capture_output=True, text=True, env={}, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"{PYTHON} {PY_WORKLOAD} exited {p.returncode}: {p.stderr[-2000:]}")
    names = sorted({line.split("|")[-1].strip() for line in p.stderr.splitlines()
                    if line.startswith("import time:") and not line.rstrip().endswith("package")})
    where = subprocess.run(
        [PYTHON, "-S", "-I", "-c",
         "import importlib.util, sys\n"
         "for n in sys.argv[1:]:\n"
         "    s = importlib.util.find_spec(n)\n"
         "    if s and s.origin and s.origin.startswith('/'): print(s.origin)\n"
         "import os; print(os.__file__)\n", *names],
        capture_output=True, text=True, env={}, timeout=60, check=True).stdout.split()
    return sorted(set(where))


def copy_into(root, path):
    """Copies the file at path (symlinks followed) to the same path below
    root."""
    dest = root / path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(path), dest)


def build_initramfs(out=KDIR / "initramfs.cpio.gz"):
    """Builds the guest's initramfs (newc cpio, gzip) from BUILD's perfd,
    perfctl and workloads, busybox, bpftool, Debian's python3.11 and what
    it imports for split.py; returns its path and size in bytes."""
    root = KDIR / "root"
    shutil.rmtree(root, ignore_errors=True)
    # Debian's merged /usr: /lib and /lib64 are links into /usr, as ldd's
    # paths expect.
    for d in ("bin", "usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc", "workloads", "proc", "sys", "dev",
              "tmp", "run", "usr/lib/python3.11/lib-dynload"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for link in ("lib", "lib64"):
        os.symlink(f"usr/{link}", root / link)

    busybox = shutil.which("busybox") or "/bin/busybox"
    ldd = subprocess.run(["ldd", busybox], capture_output=True, text=True)
    if "not a dynamic executable" not in ldd.stdout + ldd.stderr:
        raise RuntimeError(f"{busybox} is not static: install busybox-static (make deps-test)")
    shutil.copy2(busybox, root / "bin" / "busybox")

    bpftool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    executables = {BUILD / "perfd": "usr/bin/perfd", BUILD / "perfctl": "usr/bin/perfctl",
                   Path(bpftool): "usr/sbin/bpftool",
                   BUILD / "workloads" / "nofp": "workloads/nofp",
                   BUILD / "workloads" / "libnofplib.so": "workloads/libnofplib.so"}
    libs = set()
    for src, dest in executables.items():
        if not src.exists():
            raise RuntimeError(f"{src} is missing: run `make all workloads`")
        shutil.copy2(src, root / dest)
        libs.update(shared_libraries(src))
    copy_into(root, PYTHON)
    libs.update(shared_libraries(PYTHON))
    for module in python_modules():
        copy_into(root, module)
        if module.endswith(".so"):
            libs.update(shared_libraries(module))
    for lib in libs:
        copy_into(root, lib)
    shutil.copy2(PY_WORKLOAD, root / "workloads" / "split.py")
    shutil.copy2(Path(__file__).with_name("init.sh"), root / "init")
    os.chmod(root / "init", 0o755)
    (root / "etc" / "kmatrix.conf").write_text("".join(f"{k}={v}\n" for k, v in GUEST.items()))

    files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        cpio = subprocess.Popen(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"], cwd=root,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-6"], stdin=cpio.stdout, stdout=f)
        cpio.stdout.close()
        cpio.stdin.write("".join(f"{n}\n" for n in files).encode())
        cpio.stdin.close()
        if cpio.wait() != 0 or gz.wait() != 0:
            raise RuntimeError("cpio | gzip failed")
    os.replace(tmp, out)
    return out, out.stat().st_size


# --- booting ------------------------------------------------------------------

@dataclass
class Boot:
    """What one guest printed, cut into sections."""
    suite: str
    console: str = ""
    seconds: float = 0.0            # QEMU's start to power-off (or the timeout)
    boot_seconds: float = None      # QEMU's start to /init's first marker
    timed_out: bool = False
    exit_status: int = None
    sections: dict = field(default_factory=dict)   # name -> (text, rc)
    markers: dict = field(default_factory=dict)    # name -> rest of the line

    def tail(self, lines=40):
        return "\n".join(self.console.splitlines()[-lines:])


_BEGIN = re.compile(rf"^{MARK} begin (\S+)$")
_END = re.compile(rf"^{MARK} end (\S+) rc=(-?\d+)$")


def parse_console(text, boot):
    """Cuts the console text into boot.sections and boot.markers."""
    current, lines = None, []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if current is not None:
            m = _END.match(line)
            if m and m.group(1) == current:
                boot.sections[current] = ("\n".join(lines) + ("\n" if lines else ""), int(m.group(2)))
                current, lines = None, []
            else:
                lines.append(line)
            continue
        m = _BEGIN.match(line)
        if m:
            current, lines = m.group(1), []
        elif line.startswith(MARK + " "):
            name, _, rest = line[len(MARK) + 1:].partition(" ")
            boot.markers[name] = rest


def boot(suite, vmlinuz, initramfs, timeout=BOOT_TIMEOUT):
    """Boots vmlinuz with initramfs under QEMU's TCG until the guest powers
    off or timeout seconds pass; returns a parsed Boot."""
    b = Boot(suite)
    log_path = KDIR / f"console-{suite}.log"
    argv = [qemu_binary(), "-L", QEMU_DIR / "usr/share/qemu", "-L", QEMU_DIR / "usr/share/seabios",
            "-machine", "q35", "-accel", "tcg,thread=multi", "-cpu", "max", "-smp", "2", "-m", str(GUEST_MIB),
            "-nographic", "-vga", "none", "-nic", "none", "-no-reboot",
            "-kernel", vmlinuz, "-initrd", initramfs,
            "-append", "console=ttyS0 panic=-1 rdinit=/init"]
    start = time.monotonic()
    with open(log_path, "wb") as out:
        # Its own modules, not those of the machine's QEMU (another build).
        env = dict(os.environ, QEMU_MODULE_DIR=str(QEMU_DIR / "usr/lib/x86_64-linux-gnu/qemu"))
        proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env)
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        data = b""
        while True:
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                b.timed_out = True
                proc.kill()
                break
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
                out.write(chunk)
                out.flush()
                if b.boot_seconds is None and f"{MARK} boot ".encode() in data:
                    b.boot_seconds = round(time.monotonic() - start, 1)
        b.exit_status = proc.wait()
    b.seconds = round(time.monotonic() - start, 1)
    b.console = data.decode(errors="replace")
    parse_console(b.console, b)
    return b


if __name__ == "__main__":
    sel = prepare()
    image, size = build_initramfs()
    log(f"initramfs {image}: {size / 1e6:.1f} MB")
    for s in sys.argv[1:] or SUITES:
        k = sel["kernels"][s]
        r = boot(s, k["vmlinuz"], image)
        print(r.console)
        log(f"{s} {k['release']}: boot {r.boot_seconds} s, all {r.seconds} s, timed out {r.timed_out}, "
            f"sections {sorted(r.sections)}")
