"""Finding CUDA processes without -c: system-wide, by pid, libraries loaded late, processes that
started before gpumem or ended while it ran."""
import shutil

from conftest import (MOCK_LIB_DIR, WORKLOAD, WORKLOAD_DL, SystemWide, Workload,
                      assert_nothing_lost, find_proc, has_proc, site_by_symbol)

MIB = 1 << 20


def start_held(workload):
    """Lets a `--wait hold` workload allocate; returns once it holds its memory."""
    workload.wait_for("ready")
    workload.release()
    workload.wait_for("holding")


def test_two_processes_at_once_are_both_found_with_exact_bytes():
    with SystemWide() as gpumem:
        with Workload("--wait", "hold", 1 * MIB) as small, \
                Workload("--wait", "hold", 3 * MIB) as large:
            start_held(small)
            start_held(large)
            gpumem.stop()
            assert small.finish() == 0 and large.finish() == 0
    for workload, size in ((small, MIB), (large, 3 * MIB)):
        proc = find_proc(gpumem.report, workload.pid)
        assert proc["alive"] is True
        assert proc["comm"] == "workload"
        assert (proc["current_bytes"], proc["current_allocs"], proc["alloc_count"],
                proc["free_count"], proc["peak_bytes"]) == (size, 1, 1, 0, size)
        assert site_by_symbol(proc, "hold_alloc")["current_bytes"] == size
    assert_nothing_lost(gpumem.report)


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
    with SystemWide() as gpumem:
        with Workload("--wait", "dlopen", runtime, 65536, program=WORKLOAD_DL) as workload:
            workload.wait_for("ready")
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
    assert gpumem.report["tracer"]["late_attaches"] >= 1
    assert_nothing_lost(gpumem.report)


def test_frees_of_allocations_made_before_start_are_unknown_and_not_subtracted():
    with Workload("prefree", 5, 4096) as workload:
        workload.wait_for("allocated")
        with SystemWide() as gpumem:
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
    with SystemWide() as gpumem:
        with Workload("leak", 4, 2048) as workload:
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
    with SystemWide() as gpumem:
        with Workload("exitcode", 5) as workload:
            workload.wait_for("done")
            assert workload.finish() == 5
    proc = find_proc(gpumem.report, workload.pid)
    assert proc["alive"] is False
    assert proc["exit_code"] == 5
    assert (proc["current_bytes"], proc["alloc_count"]) == (4096, 1)


def test_process_that_exits_right_after_allocating_still_gets_named_frames():
    with SystemWide() as gpumem:
        with Workload("leak", 3, 1024) as workload:
            workload.wait_for("done")
            assert workload.finish() == 0
    proc = find_proc(gpumem.report, workload.pid)
    assert proc["cmdline"] == f"{WORKLOAD} leak 3 1024"
    kept = site_by_symbol(proc, "keep_feature_map")
    assert kept["current_bytes"] == 3072
    assert kept["frames"][0]["module"] == str(WORKLOAD)
    assert kept["frames"][1]["symbol"] == "run_leak"
    assert site_by_symbol(proc, "step_scratch")["free_count"] == 3
