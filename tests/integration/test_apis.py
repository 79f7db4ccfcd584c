"""Every allocation API beyond cudaMalloc, on the mocks: arrays sized from their descriptors,
registered host memory, VMM mappings and reservations shown apart, IPC imports."""
import json
import os
import shutil
import subprocess

import pytest
from conftest import (BUILD, GPUMEM, assert_nothing_lost, find_proc, run_snapshot_c,
                      run_trace_c, site_by_symbol)
from test_accounting import counts, only_proc
from test_serve import Agent, pins, wait_until  # noqa: F401 (pins: a fixture)

APIS = BUILD / "tests" / "apis"
MIB = 1 << 20
MEMORY = {"device": 0, "managed": 0, "host": 0, "async": 0, "vmm": 0}


def site_of(proc, caller, api):
    site = site_by_symbol(proc, caller)
    assert site["api"] == api, (caller, site["api"])
    return site


def sites_of(proc, caller, api):
    """What each site called from caller holds, sorted: one site per call path."""
    found = [s for s in proc["sites"] if s["frames"] and s["frames"][0]["symbol"] == caller]
    assert found and {s["api"] for s in found} == {api}, (caller, [s["api"] for s in found])
    return sorted(held(s) for s in found)


def held(site):
    return (site["kind"], site["current_bytes"], site["current_allocs"], site["alloc_count"],
            site["free_count"], site["failed_count"])


def test_runtime_arrays_are_sized_from_their_descriptors_and_counted_once():
    report, rc = run_snapshot_c([APIS, "arrays"])
    assert rc == 0
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 68480, "current_allocs": 3, "alloc_count": 5,
                            "free_count": 2, "alloc_bytes_total": 85888, "failed_count": 0}
    assert proc["by_kind"] == dict(MEMORY, device=68480)
    # float4 100x10; float 64x64 with 4 levels; 1000 B rows x 10 x 3, pitch 1024.
    assert held(site_of(proc, "rt_array", "cudaMallocArray")) == ("device", 16000, 1, 1, 0, 0)
    assert held(site_of(proc, "rt_mipmap", "cudaMallocMipmappedArray")) == \
        ("device", 21760, 1, 1, 0, 0)
    assert held(site_of(proc, "rt_malloc3d", "cudaMalloc3D")) == ("device", 30720, 1, 1, 0, 0)
    # uchar 32x16x4 freed by cudaFreeArray; uchar4 32x32, 3 layers kept at every level, 2 levels.
    three_d = site_of(proc, "rt_array3d", "cudaMalloc3DArray")
    assert held(three_d) == ("device", 0, 0, 1, 1, 0) and three_d["alloc_bytes_total"] == 2048
    layered = site_of(proc, "rt_layered_mipmap", "cudaMallocMipmappedArray")
    assert held(layered) == ("device", 0, 0, 1, 1, 0) and layered["alloc_bytes_total"] == 15360
    # Each runtime call ran one driver call (cuArrayCreate_v2...), not counted again.
    assert report["tracer"]["nested_calls"] == 7
    assert report["tracer"]["failed_frees"] == 0
    assert_nothing_lost(report)


def test_driver_arrays_keyed_by_handle_unsized_format_counted_failure_named():
    run = run_snapshot_c([APIS, "drvarrays"], env={"GPUMEM_MOCK_FAIL_SIZE": str(8 * MIB)})
    report, rc = run
    assert rc == 0, run.stdout
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 9344, "current_allocs": 3, "alloc_count": 4,
                            "free_count": 1, "alloc_bytes_total": 10368, "failed_count": 1}
    assert proc["by_kind"] == dict(MEMORY, device=9344)
    # One site per call of drv_array: FLOAT x2 50x20 kept (8,000), NV12 64x64 kept as 0 bytes,
    # FLOAT x4 1024x1024 failed.
    assert sites_of(proc, "drv_array", "cuArrayCreate_v2") == [("device", 0, 0, 0, 0, 1),
                                                ("device", 0, 1, 1, 0, 0),
                                                ("device", 8000, 1, 1, 0, 0)]
    three_d = site_of(proc, "drv_array3d", "cuArray3DCreate_v2")
    assert held(three_d) == ("device", 0, 0, 1, 1, 0) and three_d["alloc_bytes_total"] == 1024
    assert held(site_of(proc, "drv_mipmap", "cuMipmappedArrayCreate")) == \
        ("device", 1344, 1, 1, 0, 0)
    assert report["lost"]["unsized_arrays"] == 1
    # cuArrayDestroy of a handle never made, cuMemFree_v2 of an array's handle: frees of what
    # gpumem never saw (frees are taken at their entry), and the array stays held: a handle
    # never meets an address.
    assert report["lost"]["unknown_frees"] == 2
    [failure] = report["failures"]
    assert (failure["api"], failure["layer"], failure["kind"]) == ("cuArrayCreate_v2", "driver",
                                                                    "device")
    assert (failure["size"], failure["error"], failure["error_name"]) == \
        (16 * MIB, 2, "CUDA_ERROR_OUT_OF_MEMORY")
    assert failure["process_bytes_at_failure"] == 9344
    assert failure["frames"][0]["symbol"] == "drv_array"


def test_registered_host_memory_is_host_kind_never_gpu_memory():
    run = run_snapshot_c([APIS, "register"])
    report, rc = run
    assert rc == 0, run.stdout
    proc = only_proc(report)
    assert counts(proc) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 2,
                            "free_count": 1, "alloc_bytes_total": 73728, "failed_count": 1}
    assert proc["by_kind"] == dict(MEMORY, host=65536)
    # Kept, and registered again (the failure): two call paths, two sites.
    assert sites_of(proc, "rt_register", "cudaHostRegister") == [("host", 0, 0, 0, 0, 1),
                                                                 ("host", 65536, 1, 1, 0, 0)]
    driver = site_of(proc, "drv_register", "cuMemHostRegister_v2")
    assert held(driver) == ("host", 0, 0, 1, 1, 0) and driver["alloc_bytes_total"] == 8192
    [failure] = report["failures"]
    assert (failure["api"], failure["size"], failure["error"], failure["error_name"]) == \
        ("cudaHostRegister", 65536, 712, "cudaErrorHostMemoryAlreadyRegistered")
    # cudaHostUnregister of a range never registered: a free of what gpumem never saw, nothing
    # taken away.
    assert {k: v for k, v in report["lost"].items() if v} == {"unknown_frees": 1}
    assert report["tracer"]["nested_calls"] == 3


def test_vmm_physical_bytes_once_mappings_and_reservations_apart():
    run = run_snapshot_c([APIS, "vmm"])
    report, rc = run
    assert rc == 0, run.stdout
    proc = only_proc(report)
    # GPU memory is the physical handles only: never the mapping of one, nor address space.
    assert (proc["current_bytes"], proc["current_allocs"], proc["peak_bytes"]) == \
        (2 * MIB, 1, 4 * MIB)
    assert proc["by_kind"] == dict(MEMORY, vmm=2 * MIB)
    assert (proc["vmm_mapped_bytes"], proc["vmm_reserved_bytes"]) == (2 * MIB, 8 * MIB)
    assert proc["ipc_imported_allocs"] == 0
    assert (proc["alloc_count"], proc["free_count"], proc["failed_count"]) == (5, 2, 1)
    assert sites_of(proc, "vmm_create", "cuMemCreate") == [("vmm", 0, 0, 1, 1, 0),
                                                           ("vmm", 2 * MIB, 1, 1, 0, 0)]
    assert held(site_of(proc, "vmm_reserve", "cuMemAddressReserve")) == \
        ("vmm_reserved", 8 * MIB, 1, 1, 0, 0)
    assert sites_of(proc, "vmm_map", "cuMemMap") == [("vmm_mapped", 0, 0, 0, 0, 1),
                                                     ("vmm_mapped", 0, 0, 1, 1, 0),
                                                     ("vmm_mapped", 2 * MIB, 1, 1, 0, 0)]
    [failure] = report["failures"]
    assert (failure["api"], failure["kind"], failure["size"], failure["error_name"]) == \
        ("cuMemMap", "vmm_mapped", 2 * MIB, "CUDA_ERROR_INVALID_VALUE")
    assert failure["process_bytes_at_failure"] == 2 * MIB
    assert_nothing_lost(report)


def test_vmm_text_and_metrics_keep_mappings_out_of_gpu_memory():
    done = subprocess.run([str(GPUMEM), "snapshot", "--bytes", "-c", str(APIS), "vmm"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    row = next(line for line in lines if line.split()[1:2] == ["apis"])
    assert row.split()[2:5] == ["2097152", "4194304", "0"], row   # CURRENT PEAK HOST
    assert ("        not memory of its own: 2097152 vmm mapped, 8388608 address space "
            "reserved, 0 IPC imports") in lines


def test_ipc_import_is_shown_in_the_importer_and_counted_only_in_the_exporter():
    run = run_snapshot_c([APIS, "ipc"])
    report, rc = run
    assert rc == 0, run.stdout
    child_pid = int(next(line.split()[1] for line in run.stdout.splitlines()
                         if line.startswith("child ")))
    parents = [p for p in report["processes"] if p["pid"] != child_pid]
    assert len(parents) == 1
    exporter, importer = parents[0], find_proc(report, child_pid)
    assert (exporter["current_bytes"], exporter["ipc_imported_allocs"]) == (MIB + (256 << 10), 0)
    assert exporter["by_kind"] == dict(MEMORY, device=MIB + (256 << 10))
    # The importer holds another process's memory: shown, never its GPU memory.
    assert counts(importer) == {"current_bytes": 0, "current_allocs": 0, "alloc_count": 2,
                                "free_count": 1, "alloc_bytes_total": 0, "failed_count": 1}
    assert importer["by_kind"] == MEMORY
    assert importer["ipc_imported_allocs"] == 1
    # The first two imports are on one line of ipc_child: one site.
    assert sites_of(importer, "ipc_import", "cudaIpcOpenMemHandle") == [
        ("ipc_imported", 0, 0, 0, 0, 1), ("ipc_imported", 0, 1, 2, 1, 0)]
    [failure] = [f for f in report["failures"] if f["pid"] == child_pid]
    assert (failure["api"], failure["kind"], failure["error"], failure["error_name"]) == \
        ("cudaIpcOpenMemHandle", "ipc_imported", 1, "cudaErrorInvalidValue")
    assert_nothing_lost(report)


def test_trace_shows_each_new_api_with_its_kind_and_size():
    run = run_trace_c([APIS, "vmm"])
    events, rc = run
    assert rc == 0
    got = [(e["event"], e["api"], e["kind"], e["size"]) for e in events
           if e["event"] in ("alloc", "free", "alloc_failed")]
    assert got == [
        ("alloc", "cuMemCreate", "vmm", 2 * MIB),
        ("alloc", "cuMemAddressReserve", "vmm_reserved", 8 * MIB),
        ("alloc", "cuMemMap", "vmm_mapped", 2 * MIB),
        ("alloc", "cuMemCreate", "vmm", 2 * MIB),
        ("alloc", "cuMemMap", "vmm_mapped", 2 * MIB),
        ("free", "cuMemUnmap", "vmm_mapped", 2 * MIB),
        ("free", "cuMemRelease", "vmm", 2 * MIB),
        ("alloc_failed", "cuMemMap", "vmm_mapped", 2 * MIB),
    ]
    # process_bytes after each call: the physical handles only.
    assert [e["process_bytes"] for e in events if e["event"] in ("alloc", "free")] == \
        [2 * MIB, 2 * MIB, 2 * MIB, 4 * MIB, 4 * MIB, 4 * MIB, 2 * MIB]


def test_context_teardown_releases_what_that_context_held_per_thread():
    run = run_snapshot_c([APIS, "contexts"])
    report, rc = run
    assert rc == 0, run.stdout
    proc = only_proc(report)
    # Held at the end: the async 2,000 (its pool outlives cudaDeviceReset), 12,000 on the
    # primary context, 10,000 in the cuCtxCreate_v4 context. Every release is a free.
    assert counts(proc) == {"current_bytes": 24000, "current_allocs": 3, "alloc_count": 12,
                            "free_count": 9, "alloc_bytes_total": 78000, "failed_count": 0}
    assert proc["by_kind"] == dict(MEMORY, device=22000, **{"async": 2000})
    # GPU bytes went 20,000 (before the first destroy), 17,000 (before cudaDeviceReset), then
    # 25,000: the async 2,000, the thread's 11,000 and the main thread's 12,000.
    assert proc["peak_bytes"] == 25000
    assert report["tracer"]["ctx_released_allocs"] == 9
    # Every release came off its device's total too.
    assert proc["by_gpu"] == [{"gpu": 0, "host_gpu": 0, "name": None, "uuid": None,
                               "vendor": "nvidia", "bytes": 24000}]
    # The thread's context held its own 11,000; the main thread's 12,000, made meanwhile on the
    # primary context, survived the destruction of the thread's.
    rt = sites_of(proc, "rt_alloc", "cudaMalloc")
    # 8,000 and 9,000 are made on one line: one site.
    assert sorted(s[1] for s in rt) == [0, 0, 0, 12000]
    drv = sites_of(proc, "drv_alloc", "cuMemAlloc_v2")
    assert sorted(s[1] for s in drv) == [0, 0, 0, 10000]
    # cudaDeviceReset ran cuDevicePrimaryCtxReset_v2 inside it: released once, by the outer call.
    assert report["tracer"]["nested_calls"] == 8
    assert report["failures"] == []
    assert_nothing_lost(report)


def test_context_teardown_is_the_same_when_the_runtime_reaches_the_driver_privately():
    # cudaSetDevice's retain and set-current, cudaDeviceReset's primary reset, unseen: the
    # runtime's own calls say which device and which context.
    report, rc = run_snapshot_c([APIS, "contexts"], env={"GPUMEM_MOCK_RUNTIME_PRIVATE": "1"})
    assert rc == 0
    proc = only_proc(report)
    assert (proc["current_bytes"], proc["current_allocs"], proc["free_count"]) == (24000, 3, 9)
    assert report["tracer"]["ctx_released_allocs"] == 9
    assert report["tracer"]["nested_calls"] == 0
    assert_nothing_lost(report)


def held_apis(scenario, env=None):
    """apis SCENARIO, kept alive after its calls until its stdin gets a line."""
    proc = subprocess.Popen([str(APIS), scenario], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, GPUMEM_APIS_HOLD="1", **(env or {})))
    for line in proc.stdout:
        if line.strip() == "done":
            return proc
    raise AssertionError(f"apis {scenario} ended with {proc.wait()}")


def pinned_contexts(pins, pid):
    done = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", str(pins / "ctx_infos")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [e for e in json.loads(done.stdout) if e["formatted"]["key"]["tgid"] == pid]


def test_agent_metrics_vmm_apart_per_gpu_and_an_ended_process_contexts_forgotten(pins):
    if not shutil.which("bpftool"):
        pytest.skip("bpftool is not installed: the pinned context map cannot be read")
    agent = Agent(pins)
    try:
        vmm = held_apis("vmm")
        labels = f'pid="{vmm.pid}"'
        want = {"gpumem_process_memory_bytes": ('kind="vmm"', 2 * MIB),
                "gpumem_process_vmm_mapped_bytes": ("", 2 * MIB),
                "gpumem_process_vmm_reserved_bytes": ("", 8 * MIB)}

        def vmm_series():
            got = {}
            for line in agent.metrics().splitlines():
                name = line.split("{")[0]
                if name in want and labels in line and want[name][0] in line:
                    got[name] = int(float(line.rsplit(" ", 1)[1]))
            return got if len(got) == len(want) else None

        got = wait_until(vmm_series, what="the vmm process's series")
        assert got == {name: value for name, (_, value) in want.items()}
        vmm.communicate("\n", timeout=30)

        devices = held_apis("devices", TWO_GPUS)
        per_gpu = {}

        def gpu_series():
            per_gpu.clear()
            for line in agent.metrics().splitlines():
                if line.startswith("gpumem_process_gpu_memory_bytes{") and \
                        f'pid="{devices.pid}"' in line:
                    gpu = line.split('gpu="')[1].split('"')[0]
                    per_gpu[gpu] = int(float(line.rsplit(" ", 1)[1]))
            return len(per_gpu) == 2

        wait_until(gpu_series, what="the two-GPU process's series")
        assert per_gpu == {"0": 12000, "1": 24000}
        devices.communicate("\n", timeout=30)

        contexts = held_apis("contexts")
        # The primary context (retained inside cudaSetDevice) and the cuCtxCreate_v4 one; the
        # two destroyed contexts are forgotten already.
        found = wait_until(lambda: pinned_contexts(pins, contexts.pid), what="its contexts")
        assert sorted(e["formatted"]["value"]["primary"] for e in found) == [0, 1]
        contexts.communicate("\n", timeout=30)
        wait_until(lambda: not pinned_contexts(pins, contexts.pid),
                   what="the ended process's contexts to be forgotten")
    finally:
        agent.kill()


TWO_GPUS = {"GPUMEM_MOCK_DEVICES": "2"}


def test_each_allocation_has_the_device_of_its_thread_two_gpus():
    report, rc = run_snapshot_c([APIS, "devices"], env=TWO_GPUS)
    assert rc == 0
    proc = only_proc(report)
    assert proc["current_bytes"] == 36000   # 1,000 + 2,000 + ... + 8,000, none freed
    # No NVML here: the host's devices are the ordinals (no CUDA_VISIBLE_DEVICES), unnamed.
    assert proc["by_gpu"] == [
        {"gpu": 0, "host_gpu": 0, "name": None, "uuid": None, "vendor": "nvidia", "bytes": 12000},
        {"gpu": 1, "host_gpu": 1, "name": None, "uuid": None, "vendor": "nvidia", "bytes": 24000}]
    assert report["failures"] == []     # a failed cudaSetDevice is no failed allocation
    assert_nothing_lost(report)


def test_one_call_site_on_two_gpus_is_a_site_on_each():
    report, rc = run_snapshot_c([APIS, "samesite"], env=TWO_GPUS)
    assert rc == 0
    proc = only_proc(report)
    assert proc["by_gpu"] == [
        {"gpu": 0, "host_gpu": 0, "name": None, "uuid": None, "vendor": "nvidia", "bytes": 2000},
        {"gpu": 1, "host_gpu": 1, "name": None, "uuid": None, "vendor": "nvidia", "bytes": 2000}]
    sites = [s for s in proc["sites"] if s["api"] == "cudaMalloc"]
    assert len({s["stack_id"] for s in sites}) == 1     # one line of code
    assert sorted((s["gpu"], s["current_bytes"], s["current_allocs"]) for s in sites) == \
        [(0, 2000, 2), (1, 2000, 1)]
    assert_nothing_lost(report)


def test_trace_and_failures_carry_the_gpu_of_each_call():
    events, rc = run_trace_c([APIS, "devices"], env=TWO_GPUS)
    assert rc == 0
    allocs = [(e["size"], e["gpu"]) for e in events if e["event"] == "alloc"]
    # main on 1; the thread on 0, then 1, then 0; main on 1; a context on 0; popped: 1; a
    # cudaSetDevice(7) that failed changed nothing.
    assert allocs == [(1000, 1), (2000, 0), (3000, 1), (4000, 0), (5000, 1), (6000, 0),
                      (7000, 1), (8000, 1)]
    failed, rc = run_trace_c([APIS, "drvarrays"], env={"GPUMEM_MOCK_FAIL_SIZE": str(8 * MIB)})
    assert rc == 0
    [failure] = [e for e in failed if e["event"] == "alloc_failed"]
    assert (failure["api"], failure["gpu"]) == ("cuArrayCreate_v2", 0)
