"""Finding CUDA processes without -c: system-wide, by pid, libraries loaded late, processes that
started before gpumem or ended while it ran.

Other CUDA programs may run on the host meanwhile: a system-wide report's processes, failures,
loss counters and map sizes are everybody's, so tests look at their own pids, and a test that
needs counters of its own restricts the run to its pids with -p."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (GPUMEM, MOCK_LIB_ARGS, MOCK_LIB_DIR, REWRITTEN_V1, REWRITTEN_V2,
                      RUN_TIMEOUT, WORKLOAD, WORKLOAD_DL, SystemWide, Workload,
                      another_gpumem, assert_nothing_lost, find_proc, has_proc, rewritten_library,
                      lines_about, run_snapshot_c, site_by_symbol, skip_if_end_map_refused)

MIB = 1 << 20


def test_two_processes_at_once_are_both_found_with_exact_bytes():
    # Both have mapped the runtime before gpumem starts: found by its scan of the processes.
    with Workload("--wait", "hold", 1 * MIB) as small, \
            Workload("--wait", "hold", 3 * MIB) as large:
        small.wait_for("ready")
        large.wait_for("ready")
        with SystemWide() as gpumem:
            start_held_after_ready(small)
            start_held_after_ready(large)
            gpumem.stop()
        assert small.finish() == 0 and large.finish() == 0
    # Exact numbers for each: nothing of theirs was lost. (The run's loss counters are the
    # whole host's.)
    for workload, size in ((small, MIB), (large, 3 * MIB)):
        proc = find_proc(gpumem.report, workload.pid)
        assert proc["alive"] is True
        assert proc["comm"] == "workload"
        assert (proc["current_bytes"], proc["current_allocs"], proc["alloc_count"],
                proc["free_count"], proc["peak_bytes"]) == (size, 1, 1, 0, size)
        assert site_by_symbol(proc, "hold_alloc")["current_bytes"] == size


def test_pid_filter_traces_only_that_pid():
    with Workload("--wait", "hold", 2 * MIB) as wanted, \
            Workload("--wait", "hold", 5 * MIB) as other:
        wanted.wait_for("ready")
        other.wait_for("ready")
        with SystemWide("-p", wanted.pid) as gpumem:
            start_held_after_ready(wanted)
            start_held_after_ready(other)
            gpumem.stop()
        assert wanted.finish() == 0 and other.finish() == 0
    assert [p["pid"] for p in gpumem.report["processes"]] == [wanted.pid]
    assert not has_proc(gpumem.report, other.pid)
    proc = find_proc(gpumem.report, wanted.pid)
    assert (proc["current_bytes"], proc["current_allocs"], proc["alloc_count"]) == (2 * MIB, 1, 1)
    assert gpumem.report["failures"] == []


def start_held_after_ready(workload):
    workload.release()
    workload.wait_for("holding")


def test_library_dlopened_after_start_is_attached_before_its_first_call(tmp_path):
    # Fresh copies: new inodes gpumem cannot have attached to already.
    for name in ("libcudart.so.13", "libcuda.so.1"):
        shutil.copy2(MOCK_LIB_DIR / name, tmp_path / name)
    runtime = tmp_path / "libcudart.so.13"
    # Holding the process while the probes go on is what makes its first call seen; gpumem
    # holds only its own targets (-p).
    with Workload("--wait", "dlopen", runtime, 65536, program=WORKLOAD_DL) as workload:
        workload.wait_for("ready")
        with SystemWide("-v", "-p", workload.pid, hold=True) as gpumem:
            workload.release()
            workload.wait_for("waiting")
            workload.release()
            call = workload.wait_for("call ")
            assert workload.finish() == 0
    assert call.split()[1:3] == ["cudaMalloc", "65536"] and call.endswith(" 0")
    proc = find_proc(gpumem.report, workload.pid)
    assert proc["alive"] is False and proc["exit_code"] == 0
    assert (proc["current_bytes"], proc["current_allocs"], proc["alloc_count"],
            proc["alloc_bytes_total"]) == (65536, 1, 1, 65536)
    assert [(s["api"], s["current_bytes"], s["alloc_count"]) for s in proc["sites"]] == [
        ("cudaMalloc", 65536, 1)]
    # Its own copies were attached late, when it mapped them: new inodes, no other process's
    # files. (-v's line for an attach names the event being handled then: beside a busy
    # neighbour it named another pid's in 3 of 130 runs, with the copy attached all the same.)
    attached = {(f["dev"], f["ino"]) for f in gpumem.report["tracer"]["files"]}
    for name in ("libcudart.so.13", "libcuda.so.1"):
        st = os.stat(tmp_path / name)
        assert (f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", st.st_ino) in attached, \
            (name, lines_about(gpumem, workload.pid))


def test_another_gpumem_attaching_a_file_is_no_process_loading_it(tmp_path):
    """A gpumem that attaches a file glances at it through a mapping of its own (its identity
    as the maps show it): no other gpumem takes that for a process loading a CUDA library, so
    none looks for the file in that gpumem's maps or counts a process run on unheld."""
    shutil.copy2(MOCK_LIB_DIR / "libcuda.so.1", tmp_path / "libcuda.so.1")
    with SystemWide("-v") as watcher:
        other = subprocess.Popen([GPUMEM, "snapshot", "-d", "0.3", "-o", os.devnull,
                                  "--lib", tmp_path / "libcuda.so.1"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, stderr = other.communicate(timeout=RUN_TIMEOUT)
        assert other.returncode == 0, stderr
        time.sleep(0.5)     # its events, if any, reach the watcher
    assert lines_about(watcher, other.pid) == []


def test_frees_of_allocations_made_before_start_are_unknown_and_not_subtracted():
    with Workload("prefree", 5, 4096) as workload:
        workload.wait_for("allocated")
        # -p: unknown_frees counts every traced process's; this run's are this workload's.
        with SystemWide("-p", workload.pid) as gpumem:
            workload.release()
            workload.wait_for("done")
            assert workload.finish() == 0
    assert [c["api"] for c in workload.calls] == ["cudaMalloc"] * 5 + ["cudaFree"] * 5
    assert gpumem.report["lost"]["unknown_frees"] == 5
    # A process whose only calls were unknown frees may be left out; if shown, it holds
    # nothing and has freed nothing: no negative or subtracted bytes.
    for proc in gpumem.report["processes"]:
        if proc["pid"] == workload.pid:
            assert (proc["current_bytes"], proc["current_allocs"], proc["free_count"],
                    proc["alloc_count"], proc["by_kind"]["device"]) == (0, 0, 0, 0, 0)


def test_process_that_exits_holding_memory_keeps_final_numbers_and_leaves_maps_empty():
    # -p: the map sizes count every traced process's entries; traced alone, this workload's
    # are all there is, and its exit must leave none.
    with Workload("--wait", "leak", 4, 2048) as workload:
        workload.wait_for("ready")
        with SystemWide("-p", workload.pid) as gpumem:
            workload.release()
            workload.wait_for("done")
            assert workload.finish() == 0
    proc = find_proc(gpumem.report, workload.pid)
    assert proc["alive"] is False and proc["exit_code"] == 0
    assert (proc["current_bytes"], proc["current_allocs"], proc["alloc_count"],
            proc["free_count"], proc["peak_bytes"]) == (8192, 4, 8, 4, 8192)
    assert sorted((s["current_bytes"], s["alloc_count"], s["free_count"])
                  for s in proc["sites"]) == [(0, 4, 4), (8192, 4, 0)]
    tracer = gpumem.report["tracer"]
    assert (tracer["map_allocs"], tracer["map_sites"], tracer["map_procs"]) == (0, 0, 0)
    assert_nothing_lost(gpumem.report)


def test_process_ended_while_tracing_reports_its_exit_status():
    with SystemWide(*MOCK_LIB_ARGS) as gpumem:
        with Workload("exitcode", 5) as workload:
            workload.wait_for("done")
            assert workload.finish() == 5
    proc = find_proc(gpumem.report, workload.pid)
    assert proc["alive"] is False
    assert proc["exit_code"] == 5
    assert (proc["current_bytes"], proc["alloc_count"]) == (4096, 1)


def private_workload(tmp_path):
    """A copy of the workload binary (an executable no other process on the host runs, so no
    gpumem has seen its path) beside a lib/ that is the mock libraries' directory."""
    copy = tmp_path / "workload"
    shutil.copy2(WORKLOAD, copy)
    (tmp_path / "lib").symlink_to(MOCK_LIB_DIR)
    return copy


def run_while_gpumem_is_stopped(program, *args):
    """Runs program to its end while a system-wide gpumem, the mock runtime attached at start,
    is stopped (SIGSTOP): the process has exec'd, allocated, exited and been reaped before
    gpumem's userspace handles a single event or reads a file of /proc about it. That is what
    a busy host does to a short process at random; here it happens every time.
    Returns (report, workload)."""
    with SystemWide(*MOCK_LIB_ARGS) as gpumem:
        gpumem.proc.send_signal(signal.SIGSTOP)
        try:
            with Workload(*args, program=program) as workload:
                workload.wait_for("done")
                assert workload.finish() == 0
            assert not Path(f"/proc/{workload.pid}").exists()
        finally:
            gpumem.proc.send_signal(signal.SIGCONT)
    return gpumem.report, workload


def test_process_that_ended_before_gpumem_looked_keeps_exact_numbers_and_exit_status(tmp_path):
    program = private_workload(tmp_path)
    report, workload = run_while_gpumem_is_stopped(program, "leak", 3, 1024)
    proc = find_proc(report, workload.pid)
    assert proc["alive"] is False and proc["exit_code"] == 0
    assert proc["comm"] == "workload"
    assert (proc["current_bytes"], proc["current_allocs"], proc["alloc_count"],
            proc["free_count"], proc["peak_bytes"]) == (3072, 3, 6, 3, 3072)
    assert sorted((s["current_bytes"], s["alloc_count"], s["free_count"])
                  for s in proc["sites"]) == [(0, 3, 3), (3072, 3, 0)]


def test_process_that_ended_before_gpumem_looked_still_gets_named_frames(tmp_path):
    # Its exec's event names the executable (and its device and inode); the exit-time mappings
    # carry only the file's own name, so the frames are named from the exec'd path, checked
    # to be that very file.
    program = private_workload(tmp_path)
    report, workload = run_while_gpumem_is_stopped(program, "leak", 3, 1024)
    skip_if_end_map_refused(report)
    proc = find_proc(report, workload.pid)
    kept = site_by_symbol(proc, "keep_feature_map")
    assert kept["current_bytes"] == 3072
    assert kept["frames"][0]["module"] == str(program)
    assert kept["frames"][1]["symbol"] == "run_leak"
    assert site_by_symbol(proc, "step_scratch")["free_count"] == 3


def own_cgroup():
    """This process's cgroup v2 path, as /proc/PID/cgroup's `0::` line gives it."""
    for line in Path("/proc/self/cgroup").read_bytes().decode(errors="replace").splitlines():
        if line.startswith("0::"):
            return line[3:]
    pytest.skip("no cgroup v2 line in /proc/self/cgroup")


def test_process_that_ended_before_gpumem_looked_keeps_its_cgroup_and_says_its_cmdline_is_unknown(
        tmp_path):
    # The cgroup comes from the id the BPF side recorded at its first call; the command line
    # was never read, and the report says so with null, never "".
    program = private_workload(tmp_path)
    report, workload = run_while_gpumem_is_stopped(program, "leak", 3, 1024)
    proc = find_proc(report, workload.pid)
    assert proc["cmdline"] is None
    assert proc["cgroup"] == own_cgroup()


def test_process_that_exits_right_after_allocating_still_gets_named_frames(tmp_path):
    # Fresh copies of the mock libraries, which no gpumem has seen: this gpumem's own target
    # (-c) is held when the loader maps them and at its first call, then allocates and exits at
    # once; its frames are named from the mappings the kernel sends at its exit.
    for name in ("libcudart.so.13", "libcuda.so.1"):
        shutil.copy2(MOCK_LIB_DIR / name, tmp_path / name)
    run = run_snapshot_c([WORKLOAD, "leak", 3, 1024], env={"LD_LIBRARY_PATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    [proc] = run.report["processes"]
    assert proc["alive"] is False and proc["exit_code"] == 0
    assert (proc["current_bytes"], proc["alloc_count"], proc["free_count"]) == (3072, 6, 3)
    kept = site_by_symbol(proc, "keep_feature_map")
    assert kept["current_bytes"] == 3072
    assert kept["frames"][0]["module"] == str(WORKLOAD)
    assert kept["frames"][1]["symbol"] == "run_leak"
    assert site_by_symbol(proc, "step_scratch")["free_count"] == 3


def test_a_library_written_in_place_while_attached_is_attached_anew(tmp_path):
    """cp over a CUDA library keeps its inode: the probes placed by its old code's offsets
    would fire in its new code (a bogus allocation, frees of nothing, a crash). The file's
    ctime tells gpumem at the next mapping, which holds the process until the old probes are
    gone and the new ones on: each process's one allocation is counted once, nothing else."""
    lib, v2, caller = rewritten_library(tmp_path)
    script = f'"$1" "{lib}" && cp "$2" "{lib}" && "$1" "{lib}"'
    run = run_snapshot_c(["/bin/sh", "-c", script, "sh", caller, v2], gpumem_args=("-v",))
    assert run.returncode == 0, run.stderr
    assert "was written since it was examined: examined again" in run.stderr, run.stderr
    callers = [p for p in run.report["processes"] if p["comm"] == "caller"]
    assert [(p["alloc_count"], p["alloc_bytes_total"]) for p in callers] == [(1, 4096)] * 2
    assert run.report["lost"]["unknown_frees"] == 0, run.report["lost"]


def build_rewritten_program(d):
    """A program with the runtime inside, version 1 at d/bin/prog and version 2 at d/v2, each
    of whose runs allocates once; "wait": a second before, so that gpumem sees the run at its
    exec (an exec'd runtime is attached without holding the process)."""
    main = ('#include <stdio.h>\n#include <unistd.h>\nint main(int argc, char **argv)\n{\n'
            '\tvoid *p = NULL;\n\n\tif (argc > 1)\n\t\tsleep(1);\n'
            '\tif (cudaMalloc(&p, 4096))\n\t\treturn 1;\n'
            '\tprintf("mix %ld\\n", mix ? mix(1000, 7) : 0);\n\treturn 0;\n}\n')
    for name, src in (("v1", REWRITTEN_V1 + "long (*mix)(long, long);\n"),
                      ("v2", REWRITTEN_V2.replace("long mix(", "long mix_(") +
                       "long (*mix)(long, long) = mix_;\n")):
        (d / f"{name}.c").write_text(src + main)
        subprocess.run(["cc", "-O2", "-fno-inline", "-o", str(d / name),
                        str(d / f"{name}.c")], check=True)
    prog = d / "bin" / "prog"
    prog.parent.mkdir()
    shutil.copy(d / "v1", prog)
    return prog


def test_a_program_with_the_runtime_inside_written_in_place_is_attached_anew(tmp_path):
    """A static runtime's executable (nvcc's default) copied over the one gpumem attached. The
    kernel maps an executable, and places the registered probes in it, before any tracer hears
    of the exec: the first run after the write has the old code's probes (known-gaps.md). gpumem
    examines the file anew at that exec, so that the runs after it have none of them (whether
    a run's first calls are seen is the race of any exec'd runtime, known-gaps.md too)."""
    prog = build_rewritten_program(tmp_path)
    # The run after the write is seen at its exec, and the old probes go within a few hundred
    # ms (the kernel's grace periods): the next run waits that out, a neighbour's included.
    run = run_snapshot_c(["/bin/sh", "-c",
                          f'"{prog}" wait; cp "$1" "{prog}"; "{prog}" wait; sleep 1; "{prog}"',
                          "sh", tmp_path / "v2"], gpumem_args=("-v",))
    assert run.returncode == 0, run.stderr     # the last run's: no probe of the old code
    assert "was written since it was examined: examined again" in run.stderr, run.stderr


def test_a_program_written_in_place_while_attached_loses_its_probes_at_the_write(tmp_path):
    """gpumem watches each attached file for writes: cp over a program with the runtime inside
    takes its probes out as it writes, so a run that comes after (here half a second later)
    has none of the old code's, where without the watch it would crash (its probes are placed
    as the kernel maps it, before any tracer hears of the exec). The run is attached anew at
    its exec and counted."""
    neighbour = another_gpumem()
    if neighbour:
        pytest.skip(f"gpumem {neighbour} runs beside: it keeps its own probes on the file, "
                    "written or not, until its next look at it")
    prog = build_rewritten_program(tmp_path)
    run = run_snapshot_c(["/bin/sh", "-c",
                          f'set -e; "{prog}" wait; cp "$1" "{prog}"; sleep 0.5; "{prog}" wait',
                          "sh", tmp_path / "v2"], gpumem_args=("-v",))
    assert run.returncode == 0, run.stderr     # both runs: no probe of the old code
    assert "was written while attached: its probes are taken out" in run.stderr, run.stderr
    progs = [p for p in run.report["processes"] if p["comm"] == "prog"]
    assert [(p["alloc_count"], p["exit_code"]) for p in progs] == [(1, 0)] * 2, progs
