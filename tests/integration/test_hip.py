"""AMD GPUs through HIP: a program opens a HIP runtime with dlopen (discovered and attached
late, as a wheel's copy would be) and allocates every kind. Through the mock runtime
(tests/mock/hip.c) every call succeeds and each site and kind must hold its exact bytes; through
AMD's real runtime from Debian (scripts/amd.sh; no AMD GPU here) every allocation fails and must
be recorded with HIP's own error names. A CUDA program beside it stays exact."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, GPUMEM, RUN_TIMEOUT, WORKLOAD, run_snapshot_c, run_trace_c

HIP = BUILD / "tests" / "hip"
MOCK_HIP = BUILD / "tests" / "lib-hip" / "libamdhip64.so.5"
AMD_DIR = BUILD / "amd"
AMD_LIB_DIR = AMD_DIR / "usr" / "lib" / "x86_64-linux-gnu"
REAL_HIP = AMD_LIB_DIR / "libamdhip64.so.5"
KIB, MIB = 1 << 10, 1 << 20


def amd_unavailable_reason():
    if REAL_HIP.exists():
        return None
    why = AMD_DIR / "unavailable"
    return (f"AMD's HIP runtime is not unpacked in {AMD_DIR} (make amd): "
            f"{why.read_text().strip() if why.exists() else 'never fetched'}")


def hip_proc(report):
    procs = [p for p in report["processes"] if p["comm"] == "hip"]
    assert len(procs) == 1, report["processes"]
    return procs[0]


def sites(proc):
    """{(api, kind): (current_bytes, alloc_count, free_count)}, summed over a pair's sites."""
    out = {}
    for s in proc["sites"]:
        key = (s["api"], s["kind"])
        cur, allocs, frees = out.get(key, (0, 0, 0))
        out[key] = (cur + s["current_bytes"], allocs + s["alloc_count"], frees + s["free_count"])
    return out


def test_every_hip_kind_is_held_exactly_where_it_was_allocated():
    run = run_snapshot_c([HIP, MOCK_HIP, "kinds"])
    assert run.returncode == 0, run.stderr
    p = hip_proc(run.report)
    assert sites(p) == {
        ("hipMalloc", "device"): (1 * MIB, 2, 1),
        ("hipExtMallocWithFlags", "device"): (2 * MIB, 1, 0),
        ("hipMallocPitch", "device"): (10240, 1, 0),       # 1000 wide, pitch 1024, 10 rows
        ("hipMallocManaged", "managed"): (3 * MIB, 1, 0),
        ("hipMallocAsync", "async"): (0, 1, 1),
        ("hipHostMalloc", "host"): (64 * KIB, 1, 0),
        ("hipMallocHost", "host"): (0, 1, 1),
        ("hipHostRegister", "host"): (16 * KIB, 1, 0),
        ("hipMemCreate", "vmm"): (2 * MIB, 1, 0),
        ("hipMemAddressReserve", "vmm_reserved"): (8 * MIB, 1, 0),
        ("hipMemMap", "vmm_mapped"): (2 * MIB, 1, 0),
    }, p["sites"]
    assert p["by_kind"] == {"device": 3 * MIB + 10240, "managed": 3 * MIB, "host": 80 * KIB,
                            "async": 0, "vmm": 2 * MIB}
    assert p["current_bytes"] == 8 * MIB + 10240            # host memory apart, every byte once
    assert (p["vmm_mapped_bytes"], p["vmm_reserved_bytes"]) == (2 * MIB, 8 * MIB)
    assert all(s["vendor"] == "amd" for s in p["sites"])
    # the call sites are the program's own functions, past the runtime's frames
    by_api = {s["api"]: s["frames"][0]["symbol"] for s in p["sites"]}
    assert by_api["hipMallocPitch"] == "hip_pitch" and by_api["hipMemCreate"] == "hip_vmm"
    assert run.report["lost"]["unknown_frees"] == 0


def test_hip_events_name_their_layer_and_vendor():
    run = run_trace_c([HIP, MOCK_HIP, "kinds"])
    assert run.returncode == 0, run.stderr
    mine = [e for e in run.report if e.get("comm") == "hip" and e["event"] in ("alloc", "free")]
    assert len(mine) == 15, mine        # 12 allocations (11 sites, hipMalloc twice), 3 frees
    assert {(e["layer"], e["vendor"]) for e in mine} == {("hip", "amd")}


@pytest.mark.skipif(amd_unavailable_reason() is not None, reason=str(amd_unavailable_reason()))
def test_amds_real_runtime_fails_with_hips_own_error_names():
    env = {"LD_LIBRARY_PATH": str(AMD_LIB_DIR)}
    run = run_snapshot_c([HIP, REAL_HIP, "fail"], env=env)
    assert run.returncode == 0, run.stdout + run.stderr    # each call failed with 101, as said
    p = hip_proc(run.report)
    assert p["failed_count"] == 3 and p["current_bytes"] == 0
    failures = sorted((f["api"], f["size"], f["error"], f["error_name"], f["vendor"])
                      for f in run.report["failures"] if f["pid"] == p["pid"])
    assert failures == [("hipHostMalloc", 4 * KIB, 101, "hipErrorInvalidDevice", "amd"),
                        ("hipMalloc", 1 * MIB, 101, "hipErrorInvalidDevice", "amd"),
                        ("hipMallocManaged", 4 * KIB, 101, "hipErrorInvalidDevice", "amd")]
    # the probes went on AMD's own file: its exports, as Debian ships them
    assert run.report["tracer"]["files_attached"] >= 1


def test_an_nvidia_and_an_amd_program_at_once_are_both_exact(tmp_path):
    script = (f"{WORKLOAD} leak 3 4096 > {tmp_path}/cuda.out & "
              f"{HIP} {MOCK_HIP} kinds > {tmp_path}/hip.out; wait")
    run = run_snapshot_c(["/bin/sh", "-c", script])
    assert run.returncode == 0, run.stderr
    procs = {p["comm"]: p for p in run.report["processes"] if p["comm"] in ("hip", "workload")}
    assert procs["hip"]["current_bytes"] == 8 * MIB + 10240
    assert procs["workload"]["current_bytes"] == 3 * 4096
    assert {s["vendor"] for s in procs["workload"]["sites"]} == {"nvidia"}
    assert {s["vendor"] for s in procs["hip"]["sites"]} == {"amd"}
