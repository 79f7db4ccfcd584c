"""What gpumem counts for a workload it runs with -c: per site, per process, per kind."""
from conftest import (WORKLOAD, assert_nothing_lost, find_proc, run_snapshot_c,
                      site_by_symbol)

KIB = 1024


def only_proc(report):
    assert len(report["processes"]) == 1, [(p["pid"], p["comm"]) for p in report["processes"]]
    return report["processes"][0]


def counts(obj):
    return {k: obj[k] for k in ("current_bytes", "current_allocs", "alloc_count",
                                "free_count", "alloc_bytes_total", "failed_count")}


def test_leak_loop_shows_growing_site_and_freed_scratch_site_by_function_name():
    report, rc = run_snapshot_c([WORKLOAD, "leak", 5, KIB])
    assert rc == 0
    proc = only_proc(report)
    assert proc["comm"] == "workload"
    assert proc["alive"] is False and proc["exit_code"] == 0
    assert counts(proc) == {"current_bytes": 5 * KIB, "current_allocs": 5, "alloc_count": 10,
                            "free_count": 5, "alloc_bytes_total": 10 * KIB,
                            "failed_count": 0}
    assert proc["peak_bytes"] == 5 * KIB
    assert proc["by_kind"] == {"device": 5 * KIB, "managed": 0, "host": 0, "async": 0, "vmm": 0}
    assert len(proc["sites"]) == 2

    kept = site_by_symbol(proc, "keep_feature_map")
    assert (kept["api"], kept["kind"]) == ("cudaMalloc", "device")
    assert counts(kept) == {"current_bytes": 5 * KIB, "current_allocs": 5, "alloc_count": 5,
                            "free_count": 0, "alloc_bytes_total": 5 * KIB, "failed_count": 0}
    assert kept["oldest_age_ns"] > 0
    assert kept["frames"][1]["symbol"] == "run_leak"
    assert kept["frames"][0]["module"] == str(WORKLOAD)

    scratch = site_by_symbol(proc, "step_scratch")
    assert (scratch["api"], scratch["kind"]) == ("cudaMalloc", "device")
    assert counts(scratch) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 5,
                               "free_count": 5, "alloc_bytes_total": 5 * KIB,
                               "failed_count": 0}
    assert scratch["oldest_age_ns"] == 0
    assert report["failures"] == []
    assert_nothing_lost(report)


def frames_named(site):
    return [(f.get("symbol"), f.get("line")) for f in site["frames"]]


def test_calls_on_one_line_are_one_site_and_by_address_keeps_them_apart():
    # Three cudaMalloc calls on one line, 30 times; two calls of a wrapper on one line, 30
    # times: two sites, each the exact sum; with --by-address, a site per return address.
    report, rc = run_snapshot_c([WORKLOAD, "sameline", 30, KIB])
    assert rc == 0
    proc = only_proc(report)
    assert counts(proc)["current_allocs"] == 150
    direct = [s for s in proc["sites"] if s["frames"][0]["symbol"] == "sameline_calls"]
    wrapped = [s for s in proc["sites"] if s["frames"][0]["symbol"] == "sameline_wrap"]
    assert len(direct) == 1 and len(wrapped) == 1, [frames_named(s) for s in proc["sites"]]
    assert counts(direct[0]) == {"current_bytes": 90 * KIB, "current_allocs": 90,
                                 "alloc_count": 90, "free_count": 0,
                                 "alloc_bytes_total": 90 * KIB, "failed_count": 0}
    assert counts(wrapped[0])["alloc_count"] == 60
    assert counts(wrapped[0])["current_bytes"] == 120 * KIB
    assert len(proc["sites"]) == 2

    report, rc = run_snapshot_c([WORKLOAD, "sameline", 30, KIB], gpumem_args=["--by-address"])
    proc = only_proc(report)
    apart = sorted(s["alloc_count"] for s in proc["sites"])
    assert apart == [30, 30, 30, 30, 30], [frames_named(s) for s in proc["sites"]]
    # The same line for each, told apart only by its return address.
    assert len({tuple(frames_named(s)) for s in proc["sites"]}) == 2


def test_failure_after_three_successes_records_size_error_holder_and_caller():
    run = run_snapshot_c([WORKLOAD, "fail", 4096, 10], env={"GPUMEM_MOCK_FAIL_AFTER": "3"})
    report, rc = run
    assert rc == 0
    assert "failure 3 2 cudaErrorMemoryAllocation" in run.stdout
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 12288, "current_allocs": 3, "alloc_count": 3,
                            "free_count": 0, "alloc_bytes_total": 12288, "failed_count": 1}
    site = site_by_symbol(proc, "oom_step")
    assert site["alloc_count"] == 3 and site["failed_count"] == 1

    assert len(report["failures"]) == 1
    failure = report["failures"][0]
    assert failure["pid"] == proc["pid"] and failure["tid"] == proc["pid"]
    assert failure["comm"] == "workload"
    assert (failure["api"], failure["layer"], failure["kind"]) == ("cudaMalloc", "runtime",
                                                                    "device")
    assert failure["size"] == 4096
    assert failure["error"] == 2
    assert failure["error_name"] == "cudaErrorMemoryAllocation"
    assert failure["process_bytes_at_failure"] == 12288
    assert failure["frames"][0]["symbol"] == "oom_step"
    assert failure["frames"][1]["symbol"] == "run_fail"


NESTED_COUNTS = {"current_bytes": 2048, "current_allocs": 1, "alloc_count": 10,
                 "free_count": 9, "alloc_bytes_total": 20480, "failed_count": 0}


def test_nested_runtime_driver_call_counts_once_as_runtime_api():
    report, rc = run_snapshot_c([WORKLOAD, "nested", 10, 2048])
    assert rc == 0
    proc = only_proc(report)
    assert counts(proc) == NESTED_COUNTS
    assert [s["api"] for s in proc["sites"]] == ["cudaMalloc"]
    assert counts(site_by_symbol(proc, "nested_alloc")) == NESTED_COUNTS
    # Each of the 10 cudaMalloc and 9 cudaFree ran cuMemAlloc_v2 / cuMemFree_v2 inside it.
    assert report["tracer"]["nested_calls"] == 19
    assert_nothing_lost(report)


def test_private_driver_path_gives_the_same_numbers_with_no_nested_calls():
    for args, env in (([WORKLOAD, "private", 10, 2048], None),
                      ([WORKLOAD, "nested", 10, 2048], {"GPUMEM_MOCK_RUNTIME_PRIVATE": "1"})):
        report, rc = run_snapshot_c(args, env=env)
        assert rc == 0
        proc = only_proc(report)
        assert counts(proc) == NESTED_COUNTS, args
        assert counts(site_by_symbol(proc, "nested_alloc")) == NESTED_COUNTS
        assert report["tracer"]["nested_calls"] == 0
        assert_nothing_lost(report)


def test_runtime_every_kind_host_kept_apart_and_free_of_null_counts_nothing():
    report, rc = run_snapshot_c([WORKLOAD, "kinds"])
    assert rc == 0
    proc = only_proc(report)
    # Five cudaFree-family calls ran; cudaFree(NULL) is not one that frees anything.
    assert counts(proc) == {"current_bytes": 30240, "current_allocs": 4, "alloc_count": 9,
                            "free_count": 4, "alloc_bytes_total": 53240, "failed_count": 0}
    assert proc["peak_bytes"] == 44240
    assert proc["by_kind"] == {"device": 10240, "managed": 3000, "host": 5000,
                               "async": 17000, "vmm": 0}
    expected = {  # caller: (api, kind, current_bytes, alloc_bytes_total, free_count)
        "kind_device": ("cudaMalloc", "device", 0, 1000, 1),
        "kind_pitch": ("cudaMallocPitch", "device", 10240, 10240, 0),
        "kind_managed": ("cudaMallocManaged", "managed", 3000, 3000, 0),
        "kind_host": ("cudaMallocHost", "host", 0, 4000, 1),
        "kind_host_alloc": ("cudaHostAlloc", "host", 5000, 5000, 0),
        "kind_async": ("cudaMallocAsync", "async", 0, 6000, 1),
        "kind_async_ptsz": ("cudaMallocAsync_ptsz", "async", 0, 7000, 1),
        "kind_pool": ("cudaMallocFromPoolAsync", "async", 8000, 8000, 0),
        "kind_pool_ptsz": ("cudaMallocFromPoolAsync_ptsz", "async", 9000, 9000, 0),
    }
    assert len(proc["sites"]) == len(expected)
    for caller, (api, kind, current, total, frees) in expected.items():
        site = site_by_symbol(proc, caller)
        got = (site["api"], site["kind"], site["current_bytes"], site["alloc_bytes_total"],
               site["free_count"], site["alloc_count"])
        assert got == (api, kind, current, total, frees, 1), caller
    assert report["tracer"]["failed_frees"] == 0
    assert_nothing_lost(report)


def test_driver_only_every_kind_pitch_and_vmm_on_driver_layer():
    report, rc = run_snapshot_c([WORKLOAD, "driver"])
    assert rc == 0
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 2133432, "current_allocs": 5, "alloc_count": 11,
                            "free_count": 5, "alloc_bytes_total": 6350336,
                            "failed_count": 0}
    # Everything but pinned host memory, before cuMemRelease of the 4 MiB handle.
    assert proc["peak_bytes"] == 6341136
    assert proc["by_kind"] == {"device": 20480, "managed": 3100, "host": 5100,
                               "async": 12700, "vmm": 2097152}
    expected = {  # caller: (api, kind, current_bytes, alloc_bytes_total, free_count)
        "driver_device": ("cuMemAlloc_v2", "device", 0, 1100, 1),
        "driver_pitch": ("cuMemAllocPitch_v2", "device", 20480, 20480, 0),
        "driver_managed": ("cuMemAllocManaged", "managed", 3100, 3100, 0),
        "driver_host": ("cuMemAllocHost_v2", "host", 0, 4100, 1),
        "driver_host_alloc": ("cuMemHostAlloc", "host", 5100, 5100, 0),
        "driver_async": ("cuMemAllocAsync", "async", 0, 6100, 1),
        "driver_async_ptsz": ("cuMemAllocAsync_ptsz", "async", 0, 6200, 1),
        "driver_pool": ("cuMemAllocFromPoolAsync", "async", 6300, 6300, 0),
        "driver_pool_ptsz": ("cuMemAllocFromPoolAsync_ptsz", "async", 6400, 6400, 0),
    }
    for caller, (api, kind, current, total, frees) in expected.items():
        site = site_by_symbol(proc, caller)
        got = (site["api"], site["kind"], site["current_bytes"], site["alloc_bytes_total"],
               site["free_count"], site["alloc_count"])
        assert got == (api, kind, current, total, frees, 1), caller
    # Both cuMemCreate calls come from driver_create, at two call addresses: two sites.
    vmm = sorted((s["current_bytes"], s["alloc_bytes_total"], s["free_count"])
                 for s in proc["sites"] if s["api"] == "cuMemCreate")
    assert vmm == [(0, 4194304, 1), (2097152, 2097152, 0)]
    assert all(s["kind"] == "vmm" and s["frames"][0]["symbol"] == "driver_create"
               for s in proc["sites"] if s["api"] == "cuMemCreate")
    assert len(proc["sites"]) == len(expected) + 2
    assert report["tracer"]["nested_calls"] == 0
    assert_nothing_lost(report)


def test_address_reuse_is_two_allocations_one_live():
    run = run_snapshot_c([WORKLOAD, "reuse", 4096])
    report, rc = run
    assert rc == 0, "the mock did not hand the freed address out again"
    addrs = [c["addr"] for c in run.calls]
    assert addrs[0] == addrs[1] == addrs[2]
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 4096, "current_allocs": 1, "alloc_count": 2,
                            "free_count": 1, "alloc_bytes_total": 8192, "failed_count": 0}
    first = site_by_symbol(proc, "reuse_first")
    assert (first["current_bytes"], first["alloc_count"], first["free_count"]) == (0, 1, 1)
    again = site_by_symbol(proc, "reuse_again")
    assert (again["current_bytes"], again["alloc_count"], again["free_count"]) == (4096, 1, 0)
    assert_nothing_lost(report)
    assert report["tracer"]["replaced_allocs"] == 0


def test_eight_threads_fifty_thousand_pairs_exact_totals_nothing_lost():
    run = run_snapshot_c([WORKLOAD, "threads", 8, 50000, 4096], timeout=120)
    report, rc = run
    assert rc == 0
    assert "threads 8 allocs 400008 frees 400000 bytes 32768 failures 0" in run.stdout
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 32768, "current_allocs": 8,
                            "alloc_count": 400008, "free_count": 400000,
                            "alloc_bytes_total": 400008 * 4096, "failed_count": 0}
    # No thread ever holds more than one allocation.
    assert proc["peak_bytes"] == 32768
    churn = site_by_symbol(proc, "thread_churn")
    assert counts(churn) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 400000,
                             "free_count": 400000, "alloc_bytes_total": 400000 * 4096,
                             "failed_count": 0}
    keep = site_by_symbol(proc, "thread_keep")
    assert counts(keep) == {"current_bytes": 32768, "current_allocs": 8, "alloc_count": 8,
                            "free_count": 0, "alloc_bytes_total": 32768, "failed_count": 0}
    assert_nothing_lost(report)
    assert report["tracer"]["stale_inflight"] == 0
    assert report["tracer"]["failed_frees"] == 0


def test_exit_status_of_command_is_passed_through():
    report, rc = run_snapshot_c([WORKLOAD, "exitcode", 7])
    assert rc == 7
    proc = only_proc(report)
    assert proc["alive"] is False and proc["exit_code"] == 7
    assert counts(proc) == {"current_bytes": 4096, "current_allocs": 1, "alloc_count": 1,
                            "free_count": 0, "alloc_bytes_total": 4096, "failed_count": 0}
    assert site_by_symbol(proc, "alloc_before_exit")["current_bytes"] == 4096


def test_command_children_are_followed_each_with_final_numbers():
    run = run_snapshot_c([WORKLOAD, "children", 3, 8192])
    report, rc = run
    assert rc == 0
    child_pids = sorted(int(line.split()[1]) for line in run.stdout.splitlines()
                        if line.startswith("child "))
    assert len(child_pids) == 3
    assert len(report["processes"]) == 4
    for pid in child_pids:
        child = find_proc(report, pid)
        assert child["alive"] is False and child["exit_code"] == 0
        assert counts(child) == {"current_bytes": 8192, "current_allocs": 1, "alloc_count": 1,
                                 "free_count": 0, "alloc_bytes_total": 8192,
                                 "failed_count": 0}
        assert site_by_symbol(child, "child_alloc")["current_bytes"] == 8192
    parent = [p for p in report["processes"] if p["pid"] not in child_pids][0]
    assert parent["exit_code"] == 0
    assert counts(parent) == {"current_bytes": 8192, "current_allocs": 1, "alloc_count": 1,
                              "free_count": 0, "alloc_bytes_total": 8192, "failed_count": 0}
    assert len(parent["sites"]) == 1
    assert site_by_symbol(parent, "parent_alloc")["current_bytes"] == 8192
    assert_nothing_lost(report)


def test_one_address_freed_again_and_again_from_one_frame_is_each_time_a_free():
    """A consumer thread frees what the main thread hands it, from one frame, with no other
    CUDA call between its frees; the driver hands the address out again each time. A free has
    no return probe, so its record outlives it: each free must still be a free of its own,
    never taken as inside the one before (that one returned)."""
    run = run_snapshot_c([WORKLOAD, "handoff", 20, 4096])
    report, rc = run
    assert rc == 0, run.stderr
    assert "handoff 20 frees, 20 of one address" in run.stdout
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 20,
                            "free_count": 20, "alloc_bytes_total": 20 * 4096, "failed_count": 0}
    # Each runtime call's driver call, the frees' too: inside the free while it runs.
    assert report["tracer"]["nested_calls"] == 40
    assert_nothing_lost(report)


def test_a_free_of_the_other_kind_is_refused_and_the_memory_stays():
    """cudaFree of pinned host memory and cudaFreeHost of device memory are refused by the
    driver: gpumem keeps the allocation (counted in failed_frees) until the right free."""
    run = run_snapshot_c([WORKLOAD, "wrongfree", 8192])
    report, rc = run
    assert rc == 0, run.stderr
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 2,
                            "free_count": 2, "alloc_bytes_total": 2 * 8192, "failed_count": 0}
    assert report["tracer"]["failed_frees"] == 2
    assert_nothing_lost(report)
