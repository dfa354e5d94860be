"""Symbolization users can trust: demangled C++ and Rust names, JIT frames
from perf maps, binaries that were deleted or live in another mount
namespace.  Each workload spends its CPU in one function known by
construction; the test asserts that function is named in most samples."""

import json
import os
import shutil
import subprocess

import perfdtest
from perfdtest import count_where, functions, show, snapshot_workload, total

NODE = shutil.which("node") or "/usr/bin/node"


def share_named(stacks, name):
    n = total(stacks)
    return count_where(stacks, lambda s: name in functions(s)) / n if n else 0.0


def test_cpp_names_are_demangled(perfd, workloads):
    """A member of a class template in nested namespaces prints as C++
    source spells it, parameters included, as perf does."""
    w = workloads("templates", 3)
    stacks, _ = snapshot_workload(perfd, w)
    w.finish()
    name = "app::engine::Accumulator<unsigned long>::churn(unsigned long)"
    # ~300 samples, the function holds >95% of the CPU by construction
    assert share_named(stacks, name) >= 0.8, show(stacks)
    assert not any(f.startswith("_Z") for s in stacks for f in s), show(stacks)


def test_rust_names_are_demangled_in_both_manglings(perfd, workloads):
    """rustc's default (legacy) mangling and v0 both print as Rust paths,
    without the legacy hash."""
    for variant in ("rust-spin-legacy", "rust-spin-v0"):
        w = workloads(variant, 3)
        stacks, _ = snapshot_workload(perfd, w, comm=variant[:15])
        w.finish()
        assert share_named(stacks, "spin::engine::core::hot_rust_function") >= 0.8, \
            f"{variant}\n{show(stacks)}"
        assert "main" in {f for s in stacks for f in functions(s)}, f"{variant}\n{show(stacks)}"


def test_node_jit_frames_are_named_from_perf_map(perfd, workloads, tmp_path):
    """node --perf-basic-prof writes /tmp/perf-PID.map as it compiles; the
    JavaScript function that burns the CPU is named from it, even though the
    snapshot is symbolized after node has exited."""
    script = os.path.join(perfdtest.REPO, "tests", "workloads", "js", "hot.js")
    # V8 also writes an isolate log to its working directory: keep it in tmp
    w = workloads("node", command=["sh", "-c", f'cd "{tmp_path}" && exec "{NODE}" '
                                   f'--perf-basic-prof "{script}" 4'])
    stacks, _ = snapshot_workload(perfd, w)
    w.finish()
    try:
        os.unlink(f"/tmp/perf-{w.pid}.map")
    except FileNotFoundError:
        pass
    named = count_where(stacks, lambda s: any("hotJavaScriptFunction" in f for f in s))
    # node spends most of its 4 s in the function once it is compiled
    assert named >= 0.5 * total(stacks), show(stacks)


def test_deleted_binary_is_still_named(perfd, workloads, tmp_path):
    """A program whose file is deleted while it runs is named from the
    inode it runs from (/proc/PID/map_files)."""
    copy = tmp_path / "exiter-deleted"
    shutil.copy(perfdtest.workload_binary("exiter"), copy)
    w = workloads("exiter-deleted", command=[str(copy), "3"])
    os.unlink(copy)
    stacks, _ = snapshot_workload(perfd, w, comm="exiter-deleted")
    w.finish()
    assert share_named(stacks, "busy_until_exit") >= 0.8, show(stacks)


def test_binary_in_another_mount_namespace_is_named(perfd, workloads):
    """A program started inside `unshare -m` from a path that exists only in
    that namespace (a tmpfs mounted there) is symbolized from its own files."""
    src = perfdtest.workload_binary("exiter")
    inner = "/mnt/perfd-ns-only"
    assert not os.path.exists(inner)
    # a tmpfs over /mnt, private to the namespace, holds the directory too
    script = (f"mount -t tmpfs none /mnt && mkdir {inner} && "
              f"cp {src} {inner}/exiter-ns && exec {inner}/exiter-ns 3")
    w = workloads("exiter-ns", command=["unshare", "-m", "--propagation", "private",
                                        "sh", "-c", script])
    # the snapshot must name the exec'd program: wait for the exec
    for _ in range(200):
        try:
            with open(f"/proc/{w.pid}/comm") as f:
                if f.read().strip() == "exiter-ns":
                    break
        except FileNotFoundError:
            break
        subprocess.run(["sleep", "0.01"])
    assert not os.path.exists(f"{inner}/exiter-ns"), "the binary is visible on the host"
    stacks, _ = snapshot_workload(perfd, w, comm="exiter-ns")
    w.finish()
    assert share_named(stacks, "busy_until_exit") >= 0.8, show(stacks)


def marker_line(path, marker):
    """The 1-based number of the line of path holding marker."""
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if marker in text:
                return number
    raise AssertionError(f"{marker!r} not in {path}")


def test_lines_name_the_hot_line_and_the_inlined_helper(perfd, workloads):
    """With --lines, user frames carry file:line, and mix_step, inlined
    into hot_function, is a frame of its own, at its hot line."""
    source = os.path.join(perfdtest.REPO, "tests", "workloads", "lines.c")
    hot, call = marker_line(source, "HOT LINE"), marker_line(source, "CALL LINE")
    w = workloads("lines", 3)
    rc, out, err = perfd.perfctl("snapshot", "--pid", str(w.pid), "--duration", "60",
                                 "--lines", timeout=120)
    w.finish()
    assert rc == 0, err
    stacks = perfdtest.parse_folded(out)
    n = total(stacks)
    at_hot = count_where(stacks, lambda s: s[-2:] == (f"hot_function (lines.c:{call})",
                                                    f"mix_step (lines.c:{hot})"))
    in_helper = count_where(stacks, lambda s: any(f.startswith("mix_step (lines.c:")
                                                  for f in s))
    # ~300 samples; the loop is two lines (the for and the hot line), and the
    # hot line does nearly all the work
    assert in_helper >= 0.9 * n, show(stacks)
    assert at_hot >= 0.5 * n, show(stacks)


def test_stripped_binary_named_from_build_id_debug_dir(workloads, tmp_path):
    """A stripped binary whose debug file sits in a .build-id tree given with
    --debug-dir has its static functions named (they are in no .dynsym)."""
    binary = tmp_path / "exiter-stripped"
    shutil.copy(perfdtest.workload_binary("exiter"), binary)
    build_id = subprocess.run(["readelf", "-n", str(binary)], capture_output=True, text=True,
                              check=True).stdout.split("Build ID:")[1].split()[0]
    debug = tmp_path / "debug" / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    debug.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(binary), str(debug)], check=True)
    subprocess.run(["strip", "--strip-all", str(binary)], check=True)
    assert "busy_until_exit" not in subprocess.run(["nm", "-D", str(binary)],
                                                   capture_output=True, text=True).stdout

    daemon = perfdtest.start_perfd(extra_args=["--debug-dir", str(tmp_path / "debug")])
    try:
        w = workloads("exiter-stripped", command=[str(binary), "3"])
        stacks, _ = snapshot_workload(daemon, w, comm="exiter-stripped")
        w.finish()
    finally:
        daemon.stop()
    assert share_named(stacks, "busy_until_exit") >= 0.8, show(stacks)


def test_no_demangle_keeps_mangled_names(workloads):
    """--no-demangle prints C++ symbols as the linker sees them."""
    daemon = perfdtest.start_perfd(extra_args=["--no-demangle"])
    try:
        w = workloads("templates", 2)
        stacks, _ = snapshot_workload(daemon, w)
        w.finish()
    finally:
        daemon.stop()
    assert share_named(stacks, "_ZN3app6engine11AccumulatorImE5churnEm") >= 0.8, show(stacks)


def test_ps_reports_namespace_pid_and_cgroup(perfd, workloads):
    """A process in its own pid namespace is shown with the pid it sees
    (1) beside the host's, and every process with its cgroup path."""
    w = workloads("exiter-pidns", command=["unshare", "-p", "-f", "--mount-proc",
                                           perfdtest.workload_binary("exiter"), "3"])
    row = None
    for _ in range(30):
        subprocess.run(["sleep", "0.5"])
        rc, out, err = perfd.perfctl("--json", "ps", "--interval", "2")
        assert rc == 0, err
        rows = [p for p in json.loads(out)["processes"] if p["comm"] == "exiter"]
        if rows:
            row = rows[0]
            break
    w.finish()
    assert row, "the namespaced exiter never showed in ps"
    assert row["ns_pid"] == 1 and row["pid"] != 1, row
    # it inherited this test's cgroup
    with open("/proc/self/cgroup") as f:
        mine = [line.strip()[3:] for line in f if line.startswith("0::")][0]
    assert row.get("cgroup") == mine, row
