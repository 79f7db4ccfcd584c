"""`gpumem trace --json`: one event per line, matching what the workload says it did."""
from conftest import MOCK_LIB_ARGS, WORKLOAD, SystemWide, Workload, run_trace_c

EVENT_OF_CALL = {"cudaMalloc": "alloc", "cudaFree": "free"}


def events_of(events, pid):
    return [e for e in events if e["pid"] == pid]


def call_events(events):
    return [e for e in events if e["event"] != "process_exit"]


def assert_events_match_calls(events, calls):
    """Each call line has one event: same order, api, size and address."""
    got = [(e["event"], e["api"], e["size"], e["addr"]) for e in call_events(events)]
    want = [(EVENT_OF_CALL[c["api"]], c["api"], c["size"], c["addr"]) for c in calls]
    assert got == want


def test_trace_system_wide_has_every_alloc_and_free_with_workload_addresses_then_exit():
    with SystemWide(*MOCK_LIB_ARGS, mode="trace") as gpumem:
        with Workload("leak", 3, 1024) as workload:
            workload.wait_for("done")
            assert workload.finish() == 0
    events = events_of(gpumem.report, workload.pid)
    assert_events_match_calls(events, workload.calls)
    assert len(call_events(events)) == 9
    assert all(e["tid"] == workload.pid and e["comm"] == "workload" and e["layer"] == "runtime"
               and e["kind"] == "device" and e["error"] == 0 for e in call_events(events))
    # Live bytes after each call: scratch in, scratch out, one more feature map kept.
    assert [e["process_bytes"] for e in call_events(events)] == [
        1024, 0, 1024, 2048, 1024, 2048, 3072, 2048, 3072]
    assert events[-1]["event"] == "process_exit"
    assert events[-1]["exit_code"] == 0
    assert [e["time_ns"] for e in events] == sorted(e["time_ns"] for e in events)


def test_trace_with_pid_filter_shows_only_that_pid():
    with Workload("--wait", "leak", 2, 4096) as wanted, \
            Workload("--wait", "leak", 2, 8192) as other:
        wanted.wait_for("ready")
        other.wait_for("ready")
        with SystemWide("-p", wanted.pid, mode="trace") as gpumem:
            wanted.release()
            other.release()
            wanted.wait_for("done")
            other.wait_for("done")
            assert wanted.finish() == 0 and other.finish() == 0
    assert {e["pid"] for e in gpumem.report} == {wanted.pid}
    assert_events_match_calls(gpumem.report, wanted.calls)
    assert len(call_events(gpumem.report)) == 6
    assert gpumem.report[-1] == {**gpumem.report[-1], "event": "process_exit",
                                 "pid": wanted.pid, "exit_code": 0}


def test_trace_runtime_kinds_have_kind_process_bytes_and_no_event_for_free_of_null():
    run = run_trace_c([WORKLOAD, "kinds"])
    assert run.returncode == 0
    got = [(e["event"], e["api"], e["layer"], e["kind"], e["size"], e["process_bytes"])
           for e in call_events(run.report)]
    assert got == [
        ("alloc", "cudaMalloc", "runtime", "device", 1000, 1000),
        ("alloc", "cudaMallocPitch", "runtime", "device", 10240, 11240),
        ("alloc", "cudaMallocManaged", "runtime", "managed", 3000, 14240),
        ("alloc", "cudaMallocHost", "runtime", "host", 4000, 14240),
        ("alloc", "cudaHostAlloc", "runtime", "host", 5000, 14240),
        ("alloc", "cudaMallocAsync", "runtime", "async", 6000, 20240),
        ("alloc", "cudaMallocAsync_ptsz", "runtime", "async", 7000, 27240),
        ("alloc", "cudaMallocFromPoolAsync", "runtime", "async", 8000, 35240),
        ("alloc", "cudaMallocFromPoolAsync_ptsz", "runtime", "async", 9000, 44240),
        ("free", "cudaFree", "runtime", "device", 1000, 43240),
        ("free", "cudaFreeHost", "runtime", "host", 4000, 43240),
        ("free", "cudaFreeAsync", "runtime", "async", 6000, 37240),
        ("free", "cudaFreeAsync_ptsz", "runtime", "async", 7000, 30240),
    ]
    addrs = [c["addr"] for c in run.calls if c["size"]]
    assert [e["addr"] for e in call_events(run.report)] == addrs
    assert [e["event"] for e in run.report].count("process_exit") == 1


def test_trace_driver_calls_are_on_driver_layer_with_vmm_handles():
    run = run_trace_c([WORKLOAD, "driver"])
    assert run.returncode == 0
    got = [(e["event"], e["api"], e["kind"], e["size"]) for e in call_events(run.report)]
    assert got == [
        ("alloc", "cuMemAlloc_v2", "device", 1100),
        ("alloc", "cuMemAllocPitch_v2", "device", 20480),
        ("alloc", "cuMemAllocManaged", "managed", 3100),
        ("alloc", "cuMemAllocHost_v2", "host", 4100),
        ("alloc", "cuMemHostAlloc", "host", 5100),
        ("alloc", "cuMemAllocAsync", "async", 6100),
        ("alloc", "cuMemAllocAsync_ptsz", "async", 6200),
        ("alloc", "cuMemAllocFromPoolAsync", "async", 6300),
        ("alloc", "cuMemAllocFromPoolAsync_ptsz", "async", 6400),
        ("alloc", "cuMemCreate", "vmm", 2097152),
        ("alloc", "cuMemCreate", "vmm", 4194304),
        ("free", "cuMemRelease", "vmm", 4194304),
        ("free", "cuMemFree_v2", "device", 1100),
        ("free", "cuMemFreeHost", "host", 4100),
        ("free", "cuMemFreeAsync", "async", 6100),
        ("free", "cuMemFreeAsync_ptsz", "async", 6200),
    ]
    assert {e["layer"] for e in call_events(run.report)} == {"driver"}
    addrs = [c["addr"] for c in run.calls if c["api"] != "cuInit"]
    assert [e["addr"] for e in call_events(run.report)] == addrs
    assert call_events(run.report)[-1]["process_bytes"] == 2133432


def test_trace_failed_allocation_event_has_size_and_error():
    run = run_trace_c([WORKLOAD, "fail", 4096, 10], env={"GPUMEM_MOCK_FAIL_AFTER": "2"})
    assert run.returncode == 0
    got = [(e["event"], e["size"], e["error"], e["process_bytes"])
           for e in call_events(run.report)]
    assert got == [("alloc", 4096, 0, 4096), ("alloc", 4096, 0, 8192),
                   ("alloc_failed", 4096, 2, 8192)]
    assert call_events(run.report)[-1]["frames"][0]["symbol"] == "oom_step"


def test_trace_under_command_names_the_calling_function_of_each_event():
    run = run_trace_c([WORKLOAD, "leak", 2, 512])
    assert run.returncode == 0
    assert [e["frames"][0]["symbol"] for e in call_events(run.report)] == \
        ["step_scratch", "step_scratch", "keep_feature_map"] * 2
    assert {e["frames"][1]["symbol"] for e in call_events(run.report)} == {"run_leak"}


def test_trace_frees_of_allocations_made_before_start_are_unknown_free_events():
    with Workload("prefree", 3, 4096) as workload:
        workload.wait_for("allocated")
        with SystemWide(mode="trace") as gpumem:
            workload.release()
            workload.wait_for("done")
            assert workload.finish() == 0
    events = call_events(events_of(gpumem.report, workload.pid))
    assert [e["event"] for e in events] == ["unknown_free"] * 3
    freed = [c["addr"] for c in workload.calls if c["api"] == "cudaFree"]
    assert [e["addr"] for e in events] == freed


def test_trace_process_exit_event_carries_exit_status():
    run = run_trace_c([WORKLOAD, "exitcode", 7])
    assert run.returncode == 7
    exits = [e for e in run.report if e["event"] == "process_exit"]
    assert len(exits) == 1
    assert exits[0]["exit_code"] == 7
