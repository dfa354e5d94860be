"""The kernel matrix's judging, fed guest consoles written here: the checks
of `perfd --check` and of status's "bpf" can be exercised only by a perfd
that has them, so these prove, on any build, that each of them fails when
it should (a check that cannot fail is a defect) and that the console is
cut into sections as the guest's init.sh prints them.  No QEMU here."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "integration"))

import kmatrix  # noqa: E402
import test_kernels as tk  # noqa: E402

M = kmatrix.MARK
KERNEL = {"release": "6.1.0-test", "packages": ["linux-image-test"], "version": "1"}


def console(sections, markers=()):
    """A guest console: kernel noise, the boot marker, sections and
    markers, CRLF line ends as a serial console has them."""
    lines = ["[    0.000000] Linux version 6.1.0-test", f"{M} boot 3.2 6.1.0-test"]
    for name, (text, rc) in sections.items():
        lines += [f"{M} begin {name}", *text.splitlines(), f"{M} end {name} rc={rc}"]
    lines += [f"{M} {m}" for m in markers]
    return "\r\n".join(lines) + "\r\n"


def parsed(text):
    b = kmatrix.Boot("test", boot_seconds=3.0)
    kmatrix.parse_console(text, b)
    return b


def test_sections_and_markers_are_cut_out_of_the_console():
    b = parsed(console({"check": ("line one\n[ 1.0] kernel says\n", 3)}, ["perfd-start up=1 from=1 at=2"]))
    assert b.sections["check"] == ("line one\n[ 1.0] kernel says\n", 3)
    assert b.markers["perfd-start"] == "up=1 from=1 at=2"
    assert b.markers["boot"] == "3.2 6.1.0-test"


def check_of(text, rc):
    r = tk.Report("test", KERNEL)
    tk.judge_check(parsed(console({"check": (text, rc)})), r, has_check=True)
    return r.data["checks"]["check"]


# As perfd --check prints it (README, "What this kernel allows").
GOOD = """tier: tables+python+memory
feature tables: available
feature python: available
feature memory: available
program on_hrtimer_expire: verified in 230 instructions (limit 1000000)
program on_cpu_clock: verified in 180000 instructions (limit 1000000)
program on_cpu_clock_fp: not loaded: not needed in this tier
program on_rss_stat: verified in 90000 instructions (limit 1000000)
"""


def test_check_passes_with_the_full_tier_and_small_programs():
    assert check_of(GOOD, 0)["passed"] is True
    r = tk.Report("test", KERNEL)
    tk.judge_check(parsed(console({"check": (GOOD, 0)})), r, has_check=True)
    assert r.data["check"]["tier"] == "tables+python+memory"
    assert r.data["check"]["verified_insns"] == {"on_hrtimer_expire": 230, "on_cpu_clock": 180000,
                                                 "on_rss_stat": 90000}


def test_check_fails_on_a_nonzero_exit():
    assert check_of(GOOD, 1)["passed"] is False


def test_check_fails_on_a_program_over_a_quarter_of_the_limit():
    c = check_of(GOOD.replace("180000", "250001"), 0)
    assert c["passed"] is False and "on_cpu_clock" in c["detail"]


def test_check_fails_on_a_program_not_verified():
    c = check_of(GOOD + "program on_process_exec: not loaded: not supported by this kernel\n", 0)
    assert c["passed"] is False and "on_process_exec" in c["detail"]


def test_check_fails_when_it_lists_no_program():
    assert check_of("feature BTF: yes\n", 0)["passed"] is False


def test_check_fails_without_the_option():
    r = tk.Report("test", KERNEL)
    tk.judge_check(parsed(console({"check": ("perfd: unknown option '--check'\n", 2)})), r, has_check=False)
    assert r.data["checks"]["check"]["passed"] is False


def status_of(bpf):
    status = {"ok": True, "unwind": {"method": "tables"}}
    if bpf is not None:
        status["bpf"] = bpf
    r = tk.Report("test", KERNEL)
    tk.judge_status(parsed(console({"status": (json.dumps(status), 0)})), r)
    return r.data["checks"]["status"]


def programs(**insns):
    return [{"name": n, "loaded": True, "verified_insns": v, "error": None} for n, v in insns.items()]


FULL = "tables+python+memory"
NOT_NEEDED = {"name": "on_cpu_clock_fp", "loaded": False, "error": "not needed in this tier"}


def test_status_passes_with_the_full_tier():
    bpf = {"tier": FULL, "lost": [], "programs": programs(on_cpu_clock=200000) + [NOT_NEEDED]}
    assert status_of(bpf)["passed"] is True


def test_status_fails_on_a_lost_feature():
    bpf = {"tier": FULL, "lost": [{"feature": "memory", "reason": "no rss_stat tracepoint"}],
           "programs": programs(on_cpu_clock=200000)}
    assert status_of(bpf)["passed"] is False


def test_status_fails_below_the_full_tier():
    c = status_of({"tier": "frame-pointers+python+memory", "programs": programs(on_cpu_clock=2000)})
    assert c["passed"] is False and "frame-pointers+python+memory" in c["detail"]


def test_status_fails_on_a_program_over_a_quarter_of_the_limit():
    c = status_of({"tier": FULL, "programs": programs(on_cpu_clock=400000, on_rss_stat=10)})
    assert c["passed"] is False and "on_cpu_clock" in c["detail"]


def test_status_fails_on_a_program_error():
    p = programs(on_cpu_clock=1000) + [{"name": "on_rss_stat", "loaded": False, "verified_insns": None,
                                        "error": "Argument list too long"}]
    assert status_of({"tier": FULL, "programs": p})["passed"] is False


def test_status_without_bpf_fails():
    assert status_of(None)["passed"] is False


def test_verified_insns_of_the_kernel_are_judged():
    progs = json.dumps([{"id": 10, "name": "on_cpu_clock"}, {"id": 11, "name": "on_rss_stat"}])
    fdinfo = "prog_id=10 verified_insns=564169\nprog_id=11 verified_insns=1000\nprog_id=10 verified_insns=\n"
    r = tk.Report("test", KERNEL)
    tk.judge_progs(parsed(console({"progs": (progs, 0), "fdinfo": (fdinfo, 0)})), r)
    assert r.data["verified_insns"] == {"on_cpu_clock": 564169, "on_rss_stat": 1000}
    assert r.data["checks"]["verifier"]["passed"] is False


def test_a_kernel_that_does_not_boot_fails_and_says_so():
    b = kmatrix.Boot("test", console="SeaBIOS\r\nBooting from ROM...\r\n", timed_out=True)
    kmatrix.parse_console(b.console, b)
    r = tk.Report("test", KERNEL)
    tk.judge(b, r, has_check=True)
    assert r.data["checks"]["boot"]["passed"] is False
    assert "did not boot under TCG" in r.data["checks"]["boot"]["detail"]


def nofp_of(folded):
    r = tk.Report("test", KERNEL)
    tk.judge_nofp(parsed(console({"nofp": (folded, 0), "nofp-stderr": ("", 0)})), r)
    return r.data["checks"]["nofp"]


ENTRY = "nofp;_start;__libc_start_main;main;drive;stage_outer;stage_inner;lib_stage;"


def test_nofp_passes_whole_and_split_3_to_1():
    folded = f"{ENTRY}lib_hot_three_quarters;lib_work_units 1500\n{ENTRY}exe_cold_one_quarter;lib_work_units 500\n"
    assert nofp_of(folded)["passed"] is True


def test_nofp_fails_cut_at_its_leaf():
    assert nofp_of("nofp;[unknown];lib_work_units 2000\n")["passed"] is False


def test_nofp_fails_off_its_split():
    folded = f"{ENTRY}lib_hot_three_quarters;lib_work_units 1000\n{ENTRY}exe_cold_one_quarter;lib_work_units 1000\n"
    c = nofp_of(folded)
    assert c["passed"] is False and "hot share 0.500" in c["detail"]
