"""The kernel matrix (issue 26, requirement 5): perfd on Debian's own cloud
kernels, each booted under QEMU's TCG with an initramfs that holds perfd,
perfctl and workloads of known shape (kmatrix.py builds and boots; the
guest's /init, init.sh, only collects).

For each kernel (bookworm's 6.1, trixie's 6.12, sid's newest), judged here
from what the guest printed:
- it boots under TCG within the timeout (a kernel that does not is a
  failure that says so, never a skip);
- `perfd --check` exits 0 (the full tier loads) and every program it
  lists verified in at most a quarter of the verifier's 1M-instruction
  limit (docs/CONVENTIONS: keep each under a quarter);
- perfd starts, answers status, and stops cleanly on SIGTERM;
- `perfctl status --json`'s "bpf" says the full tier, and no loaded
  program above that quarter;
- the kernel's own count (bpftool's verified_insns) of every program
  perfd loaded is under that quarter too;
- nofp (no frame pointers, half of it in a library) unwinds to _start
  through main and keeps its 3:1 split, to a tolerance from the sampling
  error;
- Debian's python3.11 running split.py shows its Python frames: <module>
  -> main -> slow_path/fast_path at their marked lines, split 3:1.
A perfd without --check (its --help does not name it) or whose status
has no "bpf" fails.

Every kernel's figures go to BUILD/kernels/results.json.  Run with
`make test-kernels`; KERNELS_REFRESH=1 picks the archive's current kernels
again.
"""

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "integration"))

import kmatrix  # noqa: E402
from perfdtest import (UNWIND_PENDING, functions, is_kernel, is_pending, without_gil,  # noqa: E402
                       marker_line, parse_folded, python_frame, show, total)

# The verifier's limit is 1M instructions; a program is kept under a
# quarter of it on every kernel of the matrix, so that a kernel whose
# verifier explores more states still has room (CONVENTIONS.md).
MAX_VERIFIED_INSNS = 250_000
# The tier with every feature on, the top of perfd's ladder (README,
# "What this kernel allows"; daemon/collect/tiers.h).
FULL_TIER = "tables+python+memory"
# Why a program may be left unloaded in the full tier: the frame-pointer
# tick is the fallback of the table-walking one.
NOT_NEEDED = "not needed in this tier"
# Where the guest keeps split.py: its Python frames name this file.
GUEST_SPLIT = "/workloads/split.py"
HOST_SPLIT = str(kmatrix.PY_WORKLOAD)

# perfd --check's lines, with or without perfd's "perfd: " log prefix.
_PROGRAM = re.compile(r"^(?:perfd: )?program (\S+): verified in (\d+) instructions(?: \(limit (\d+)\))?")
_PROGRAM_ANY = re.compile(r"^(?:perfd: )?program (\S+):\s*(.*)$")
_TIER = re.compile(r"^(?:perfd: )?tier\b[:=]?\s*(\S+)", re.IGNORECASE)


def perfd_has_check():
    """Whether the perfd under test has --check: its --help names it."""
    p = subprocess.run([str(kmatrix.BUILD / "perfd"), "--help"], capture_output=True, text=True,
                       timeout=30)
    return "--check" in p.stdout + p.stderr


class Report:
    """One kernel's checks and figures, as results.json holds them."""

    def __init__(self, suite, kernel):
        self.data = {"suite": suite, "release": kernel["release"], "packages": kernel["packages"],
                     "version": kernel["version"], "checks": {}}

    def check(self, name, passed, detail=""):
        """passed: True, False, or None for a check this build cannot make."""
        self.data["checks"][name] = {"passed": passed, "detail": detail}

    def failures(self):
        return [f"{n}: {c['detail']}" for n, c in self.data["checks"].items() if c["passed"] is False]


def tail(text, lines):
    """The last lines of text, saying how many were left out."""
    if text is None:
        return None
    all_lines = text.splitlines()
    if len(all_lines) <= lines:
        return text
    return f"[{len(all_lines) - lines} lines before]\n" + "\n".join(all_lines[-lines:]) + "\n"


def section(boot, name):
    """(text, rc) of a section the guest printed, or (None, None)."""
    return boot.sections.get(name, (None, None))


def sd_tolerance(n, p=0.75, floor=0.02):
    """A share's tolerance: 4 standard deviations of the sampling error of
    n samples around p, and no less than floor."""
    return max(floor, 4 * math.sqrt(p * (1 - p) / max(n, 1)))


def expected_samples():
    return kmatrix.GUEST["FREQUENCY"] * kmatrix.GUEST["DURATION"]


def judge_check(boot, report, has_check):
    text, rc = section(boot, "check")
    report.data["check"] = {"supported": has_check, "rc": rc, "output": tail(text, 100)}
    if not has_check:
        report.check("check", False, "this perfd has no --check: its --help does not name it")
        return
    if text is None:
        report.check("check", False, "the guest printed no perfd --check output")
        return
    programs, problems = {}, []
    for line in text.splitlines():
        m = _PROGRAM.match(line)
        if m:
            programs[m.group(1)] = int(m.group(2))
        elif _PROGRAM_ANY.match(line) and _PROGRAM_ANY.match(line).group(2) != f"not loaded: {NOT_NEEDED}":
            problems.append(line)
        t = _TIER.match(line)
        if t:
            report.data["check"]["tier"] = t.group(1)
    report.data["check"]["verified_insns"] = programs
    over = {p: n for p, n in programs.items() if n > MAX_VERIFIED_INSNS}
    why = []
    if rc in (124, 143):  # busybox timeout's TERM
        why.append(f"perfd --check did not finish within {kmatrix.GUEST['CHECK_TIMEOUT']} s")
    elif rc != 0:
        why.append(f"perfd --check exited {rc} (not the full tier)")
    if not programs:
        why.append("it listed no verified program")
    if over:
        why.append(f"programs over {MAX_VERIFIED_INSNS} verified instructions: {over}")
    if problems:
        why.append(f"programs not verified: {problems}")
    if why:
        report.check("check", False, "; ".join(why) + f"\n{tail(text, 40)}")
    else:
        report.check("check", True, f"{len(programs)} programs, at most {max(programs.values())} "
                                    f"instructions")


def judge_status(boot, report):
    text, rc = section(boot, "status")
    if text is None:
        report.check("status", False, "no status: perfd never answered")
        return
    try:
        status = json.loads(text)
    except ValueError as e:
        report.check("status", False,
                     f"perfctl --json status exited {rc}, printed no JSON ({e}): {text[:500]}")
        return
    if rc != 0 or status.get("ok") is not True:
        report.check("status", False, f"perfctl --json status exited {rc}: {text[:500]}")
        return
    report.data["unwind_method"] = status.get("unwind", {}).get("method")
    bpf = status.get("bpf")
    if bpf is None:
        report.check("status", False, "status has no \"bpf\" block")
        return
    tier = bpf.get("tier")
    programs = bpf.get("programs") or []
    report.data["tier"] = tier
    report.data["programs"] = programs
    why = []
    if tier != FULL_TIER:
        why.append(f"tier {tier!r}, not {FULL_TIER!r}")
    loaded = [p for p in programs if p.get("loaded")]
    if not loaded:
        why.append("no program loaded")
    for lost in bpf.get("lost") or []:
        why.append(f"lost {lost.get('feature')}: {lost.get('reason')}")
    for p in programs:
        insns = p.get("verified_insns")
        if p.get("error") and not (not p.get("loaded") and p["error"] == NOT_NEEDED):
            why.append(f"{p.get('name')}: {p['error']}")
        elif p.get("loaded") and not isinstance(insns, int):
            why.append(f"{p.get('name')}: loaded, verified_insns {insns!r}")
        elif p.get("loaded") and insns > MAX_VERIFIED_INSNS:
            why.append(f"{p.get('name')}: {insns} verified instructions, over {MAX_VERIFIED_INSNS}")
    report.check("status", not why, "; ".join(why) or
                 f"tier {tier}, {len(loaded)} programs, at most "
                 f"{max(p['verified_insns'] for p in loaded)} instructions")


def judge_progs(boot, report):
    """The kernel's verified_insns of every program perfd holds (from the
    fdinfo of its fds), named by bpftool (nothing else in the guest loads
    BPF)."""
    text, rc = section(boot, "progs")
    try:
        progs = json.loads(text) if rc == 0 else None
    except ValueError:
        progs = None
    if not isinstance(progs, list):
        report.check("verifier", False, f"bpftool -j prog show exited {rc}: {text}")
        return
    names = {p.get("id"): p.get("name", f"id{p.get('id')}") for p in progs}
    fdinfo, _ = section(boot, "fdinfo")
    counts = {}
    for line in (fdinfo or "").splitlines():
        kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
        # A link's fdinfo names its program too, without verified_insns.
        if kv.get("prog_id", "").isdigit() and kv.get("verified_insns", "").isdigit():
            counts[names.get(int(kv["prog_id"]), "id" + kv["prog_id"])] = int(kv["verified_insns"])
    report.data["verified_insns"] = counts
    why = []
    if not counts:
        why.append("perfd runs, but the kernel lists no BPF program")
    unheld = sorted(set(names.values()) - set(counts))
    if unheld:
        why.append(f"perfd holds no fd of {unheld}: no verified_insns for them")
    over = {n: c for n, c in counts.items() if c > MAX_VERIFIED_INSNS}
    if over:
        why.append(f"over {MAX_VERIFIED_INSNS} verified instructions: {over}")
    report.check("verifier", not why, "; ".join(why) or
                 f"{len(counts)} programs, at most {max(counts.values())} verified instructions")


def snapshot(boot, name):
    """The stacks of a snapshot section, or (None, why)."""
    text, rc = section(boot, name)
    err, _ = section(boot, name + "-stderr")
    if text is None:
        return None, f"no {name} snapshot (the guest stopped before it)"
    if rc != 0:
        return None, f"perfctl snapshot of {name} exited {rc}: {err}"
    try:
        stacks = parse_folded(text)
    except AssertionError as e:
        return None, f"{name}: {e}"
    if not stacks:
        return None, f"the snapshot of {name} holds no samples: {err}"
    return stacks, None


def judge_nofp(boot, report):
    stacks, why = snapshot(boot, "nofp")
    if stacks is None:
        report.check("nofp", False, why)
        return
    n = total(stacks)
    pending = sum(c for s, c in stacks.items() if is_pending(s))
    tabled = n - pending

    def complete(s):
        fs = [f for f in functions(s) if not is_kernel(f)]
        return fs[:1] == ["_start"] and "main" in fs and not any(f.startswith("[") for f in fs)
    whole = sum(c for s, c in stacks.items() if complete(s))
    hot = sum(c for s, c in stacks.items() if "lib_hot_three_quarters" in functions(s))
    cold = sum(c for s, c in stacks.items() if "exe_cold_one_quarter" in functions(s))
    share = hot / (hot + cold) if hot + cold else 0.0
    tol = sd_tolerance(hot + cold)
    comms = sorted({s[0] for s in stacks})
    report.data["nofp"] = {"samples": n, "pending": pending, "complete": whole, "hot": hot, "cold": cold,
                           "hot_share": round(share, 4), "tolerance": round(tol, 4)}
    why = []
    if comms != ["nofp"]:
        why.append(f"comms {comms}, expected only nofp")
    # Under emulation the guest may take fewer samples than asked; half
    # still leaves the split's tolerance near 4 points.
    if n < 0.5 * expected_samples():
        why.append(f"only {n} samples, expected ~{expected_samples()}")
    if pending > 0.10 * n:
        why.append(f"{pending} of {n} samples waited for an unwind table ({UNWIND_PENDING})")
    # As test_unwind's bar: 98% of the samples taken with tables reach
    # _start through main, none cut short ([truncated] and the like).
    if whole < 0.98 * tabled:
        why.append(f"only {whole} of {tabled} samples unwind to _start through main")
    if hot + cold < 0.9 * n:
        why.append(f"only {hot + cold} of {n} samples under lib_hot_three_quarters or exe_cold_one_quarter")
    if abs(share - 0.75) > tol:
        why.append(f"hot share {share:.3f} ({hot}:{cold}), expected 0.75 +- {tol:.3f}")
    detail = "; ".join(why) + f"\n{show(stacks)}" if why else \
        f"{whole}/{tabled} complete, hot share {share:.3f} ({hot}:{cold}) +- {tol:.3f}"
    report.check("nofp", not why, detail)


def python_frames(stack):
    return [pf for pf in (python_frame(f) for f in stack[1:]) if pf]


def judge_python(boot, report):
    stacks, why = snapshot(boot, "python")
    if stacks is None:
        report.check("python", False, why)
        return
    n = total(stacks)
    module_line = marker_line(HOST_SPLIT, "CALL: main")
    counts, exact, at_hot = {}, 0, 0
    for path, call in (("slow_path", "CALL: slow"), ("fast_path", "CALL: fast")):
        want = [("<module>", GUEST_SPLIT, module_line), ("main", GUEST_SPLIT, marker_line(HOST_SPLIT, call))]
        mine = {s: c for s, c in stacks.items()
                if python_frames(s) and python_frames(s)[-1][:2] == (path, GUEST_SPLIT)}
        counts[path] = total(mine)
        # The chain <module> -> main -> path, callers at their call lines.
        exact += sum(c for s, c in mine.items() if python_frames(s)[:-1] == want)
        if path == "slow_path":
            hot = marker_line(HOST_SPLIT, "HOT: slow")
            at_hot = sum(c for s, c in mine.items() if python_frames(s)[-1][2] == hot)
    slow, fast = counts["slow_path"], counts["fast_path"]
    m = slow + fast
    share = slow / m if m else 0.0
    tol = sd_tolerance(m, floor=0.03)
    complete = sum(c for s, c in stacks.items()
                   if functions(without_gil(s))[:1] == ["_start"] and "Py_BytesMain" in functions(s)
                   and python_frames(s)[:1] and python_frames(s)[0][:2] == ("<module>", GUEST_SPLIT))
    pending = sum(c for s, c in stacks.items() if is_pending(s))
    report.data["python"] = {"samples": n, "slow_path": slow, "fast_path": fast, "exact_chain": exact,
                             "slow_at_hot_line": at_hot,
                             "complete": complete, "pending": pending, "slow_share": round(share, 4),
                             "tolerance": round(tol, 4)}
    why = []
    if n < 0.5 * expected_samples():
        why.append(f"only {n} samples, expected ~{expected_samples()}")
    if m < 0.9 * n:
        why.append(f"only {m} of {n} samples in slow_path or fast_path of {GUEST_SPLIT}")
    if exact < 0.95 * m:
        why.append(f"only {exact} of {m} samples read <module> -> main -> slow_path/fast_path "
                   f"at the marked lines")
    # The scan of a 1000-entry list per word is >99% of slow_path's time.
    if at_hot < 0.9 * slow:
        why.append(f"only {at_hot} of {slow} slow_path samples at its hot line")
    if abs(share - 0.75) > tol:
        why.append(f"slow_path share {share:.3f} ({slow}:{fast}), expected 0.75 +- {tol:.3f}")
    if complete < 0.95 * (n - pending):
        why.append(f"only {complete} of {n - pending} samples run from _start through Py_BytesMain "
                   f"to <module>")
    detail = "; ".join(why) + f"\n{show(stacks)}" if why else \
        f"slow share {share:.3f} ({slow}:{fast}) +- {tol:.3f}, {exact}/{m} exact chains"
    report.check("python", not why, detail)


def judge(boot, report, has_check):
    """Fills report from one guest's output."""
    report.data.update(boot_seconds=boot.boot_seconds, run_seconds=boot.seconds, timed_out=boot.timed_out)
    if boot.boot_seconds is None:
        report.check("boot", False,
                     f"{report.data['release']} did not boot under TCG within {kmatrix.BOOT_TIMEOUT} s "
                     f"(QEMU exit status {boot.exit_status}); console's last lines:\n{boot.tail()}")
        return
    report.check("boot", True, f"/init ran {boot.boot_seconds} s after QEMU started")
    if "done" not in boot.markers:
        report.check("finished", False,
                     f"the guest did not finish its checks within {kmatrix.BOOT_TIMEOUT} s "
                     f"(timed out: {boot.timed_out}); console's last lines:\n{boot.tail()}")
    judge_check(boot, report, has_check)

    start = dict(kv.split("=", 1) for kv in boot.markers.get("perfd-start", "").split() if "=" in kv)
    log, log_rc = section(boot, "perfd-log")
    dmesg, _ = section(boot, "dmesg")
    # The verifier's log of a refused program runs to thousands of lines;
    # its end says why.
    log = tail(log, 40)
    report.data["perfd_log"] = log
    if start.get("up") != "1":
        if start.get("alive") == "1":
            stack, _ = section(boot, "perfd-stack")
            why = (f"perfd was still starting after {kmatrix.GUEST['READY_TIMEOUT']} s (killed then); "
                   f"where it was:\n{stack}")
        else:
            why = f"perfd exited {log_rc} before it answered status"
        report.check("start", False, f"{why}\nits log:\n{log}\nkernel log:\n{dmesg}")
        return
    report.data["perfd_start_seconds"] = round(float(start["at"]) - float(start["from"]), 1)
    report.check("start", True, f"answered status {report.data['perfd_start_seconds']} s after its start")
    report.check("stop", log_rc == 0, f"perfd exited {log_rc} on SIGTERM; its log:\n{log}\n"
                                      f"kernel log:\n{dmesg}" if log_rc != 0 else "exited 0 on SIGTERM")
    judge_status(boot, report)
    report.data.setdefault("tier", report.data["check"].get("tier"))
    judge_progs(boot, report)
    judge_nofp(boot, report)
    judge_python(boot, report)


class Matrix:
    def __init__(self):
        t0 = time.monotonic()
        self.selection = kmatrix.prepare()
        self.initramfs, size = kmatrix.build_initramfs()
        self.has_check = perfd_has_check()
        self.results = {"qemu": self.selection["qemu"], "initramfs_bytes": size,
                        "prepare_seconds": round(time.monotonic() - t0, 1), "guest": kmatrix.GUEST,
                        "kernels": {}}
        self.t0 = t0

    def write(self):
        self.results["total_seconds"] = round(time.monotonic() - self.t0, 1)
        path = kmatrix.KDIR / "results.json"
        path.write_text(json.dumps(self.results, indent=2) + "\n")
        lines = [f"{path} ({self.results['total_seconds']} s in all)"]
        for suite, r in self.results["kernels"].items():
            checks = " ".join(f"{n}={'ok' if c['passed'] else '-' if c['passed'] is None else 'FAIL'}"
                              for n, c in r["checks"].items())
            lines.append(f"{suite} {r['release']}: boot {r.get('boot_seconds')} s, run {r['run_seconds']} s, "
                         f"tier {r.get('tier')}, verified_insns {r.get('verified_insns')}; {checks}")
        kmatrix.SUMMARY[:] = lines


@pytest.fixture(scope="session")
def matrix():
    m = Matrix()
    yield m
    m.write()


@pytest.mark.parametrize("suite", kmatrix.SUITES)
def test_kernel(matrix, suite):
    kernel = matrix.selection["kernels"][suite]
    report = Report(suite, kernel)
    matrix.results["kernels"][suite] = report.data
    boot = kmatrix.boot(suite, kernel["vmlinuz"], matrix.initramfs)
    judge(boot, report, matrix.has_check)
    report.data["passed"] = not report.failures()
    failures = report.failures()
    assert not failures, f"{suite} ({kernel['release']}):\n" + "\n".join(failures)
