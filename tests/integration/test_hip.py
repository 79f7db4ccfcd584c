"""AMD GPUs through HIP: a program opens a HIP runtime with dlopen (discovered and attached
late, as a wheel's copy would be) and allocates every kind. Through the mock runtime
(tests/mock/hip.c) every call succeeds and each site and kind must hold its exact bytes; through
AMD's real runtime from Debian (scripts/amd.sh; no AMD GPU here) every allocation fails and must
be recorded with HIP's own error names. PyTorch's ROCm build gives tensors; the device's truth
comes from a sysfs tree of KFD's and amdgpu's files. A CUDA program beside it stays exact."""
import os
import subprocess

import pytest

import json

from conftest import (BUILD, GPUMEM, MOCK_NVML_DIR, RUN_TIMEOUT, WORKLOAD, LineReader,
                      SystemWide, run_snapshot_c, run_trace_c)

HIP = BUILD / "tests" / "hip"
MOCK_HIP = BUILD / "tests" / "lib-hip" / "libamdhip64.so.5"
MOCK_C10_HIP = BUILD / "tests" / "lib-hip" / "libc10_hip.so"
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


def test_pytorch_on_rocm_gives_tensors_from_libc10_hip():
    """PyTorch's ROCm build: the same USDT probes in libc10_hip.so, opened late with dlopen.
    Its tensors are AMD's, inside the segment its allocator took with hipMalloc."""
    run = run_snapshot_c([HIP, MOCK_C10_HIP, "tensors"])
    assert run.returncode == 0, run.stdout + run.stderr
    p = hip_proc(run.report)
    # one 2 MiB segment reserved; 2 x 256 KiB weights held, the 1 MiB activation freed
    assert sites(p) == {("hipMalloc", "device"): (2 * MIB, 1, 0)}, p["sites"]
    assert (p["tensor_bytes"], p["tensor_allocs"]) == (512 * KIB, 2)
    assert (p["tensor_alloc_count"], p["tensor_free_count"]) == (3, 1)

    def caller(site):       # the program's function under the allocator's and tensor()'s
        return next((f["symbol"] for f in site["frames"]
                     if f["symbol"] in ("load_weights", "activation")), site["frames"])

    tensors = sorted((s["current_bytes"], s["alloc_count"], s["free_count"], s["vendor"],
                      caller(s)) for s in p["tensor_sites"])
    # the two weights: one line of load_weights, one site
    assert tensors == [(0, 1, 1, "amd", "activation"),
                       (512 * KIB, 2, 0, "amd", "load_weights")], p["tensor_sites"]
    assert all(s["api"] == "pytorch:malloc" for s in p["tensor_sites"])
    assert all(s["vendor"] == "amd" for s in p["sites"])
    assert run.report["lost"]["unknown_tensor_frees"] == 0


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
    """A mixed host: NVML names one NVIDIA GPU, KFD one AMD GPU. Each program's bytes are its
    own, and the AMD program's ordinal 0 is KFD's GPU (named by ROCR_VISIBLE_DEVICES with its
    UUID), never NVML's GPU 0."""
    fake_sysfs(tmp_path / "sys")
    env = {"LD_LIBRARY_PATH": str(MOCK_NVML_DIR), "GPUMEM_SYSFS_ROOT": str(tmp_path / "sys"),
           "GPUMEM_MOCK_NVML": "NVIDIA H200,GPU-0001,150000000000,1000,0,00000000:17:00.0"}
    script = (f"{WORKLOAD} leak 3 4096 > {tmp_path}/cuda.out & "
              f"ROCR_VISIBLE_DEVICES={AMD_UUID} {HIP} {MOCK_HIP} kinds > {tmp_path}/hip.out; "
              "wait")
    run = run_snapshot_c(["/bin/sh", "-c", script], env=env)
    assert run.returncode == 0, run.stderr
    assert [(d["vendor"], d["index"]) for d in run.report["devices"]] == [("nvidia", 0),
                                                                          ("amd", 0)]
    procs = {p["comm"]: p for p in run.report["processes"] if p["comm"] in ("hip", "workload")}
    assert procs["hip"]["current_bytes"] == 8 * MIB + 10240
    assert procs["workload"]["current_bytes"] == 3 * 4096
    assert {s["vendor"] for s in procs["workload"]["sites"]} == {"nvidia"}
    assert {s["vendor"] for s in procs["hip"]["sites"]} == {"amd"}
    assert [(g["gpu"], g["host_gpu"], g["name"], g["vendor"])
            for g in procs["workload"]["by_gpu"]] == [(0, 0, "NVIDIA H200", "nvidia")]
    assert [(g["gpu"], g["host_gpu"], g["name"], g["vendor"])
            for g in procs["hip"]["by_gpu"]] == [(0, 0, "gfx90a", "amd")]
    assert procs["hip"]["by_gpu"][0]["uuid"] == AMD_UUID


GPU_ID = 43690                      # KFD's id of the first GPU node
AMD_UUID = "GPU-4a1b2c3d4e5f6071"   # its unique_id, as ROCr and rocminfo write it
VRAM_TOTAL, VRAM_USED = 64 << 30, 5 << 30
UNTRACED = 3 * MIB                  # what the program holds that no probe saw (KFD counts it)


def fake_sysfs(root):
    """A host with one CPU node and two AMD GPUs, as KFD's topology and amdgpu's DRM files
    show them; the second GPU gives no memory (listed by the kernel, not by gpumem)."""
    nodes = root / "class/kfd/kfd/topology/nodes"
    for node, gpu_id, name, props in (
            (0, 0, "", "cpu_cores_count 64\n"),
            (1, GPU_ID, "gfx90a", "simd_count 440\nlocation_id 49408\ndomain 0\n"
                                  f"unique_id {int(AMD_UUID[4:], 16)}\n"
                                  "drm_render_minor 128\n"),
            (2, 55555, "gfx942", "location_id 50176\ndrm_render_minor 129\n")):
        (nodes / str(node)).mkdir(parents=True)
        (nodes / str(node) / "gpu_id").write_text(f"{gpu_id}\n")
        (nodes / str(node) / "name").write_text(f"{name}\n")
        (nodes / str(node) / "properties").write_text(props)
    dev = root / "class/drm/renderD128/device"
    dev.mkdir(parents=True)
    (dev / "mem_info_vram_total").write_text(f"{VRAM_TOTAL}\n")
    (dev / "mem_info_vram_used").write_text(f"{VRAM_USED}\n")
    (root / "class/kfd/kfd/proc").mkdir(parents=True)


def test_amd_devices_and_each_programs_vram_come_from_kfd_and_amdgpu(tmp_path):
    """The device's truth on AMD: KFD's topology and amdgpu's DRM files give each GPU and its
    memory, KFD's per-process file the VRAM a program holds (traced or not), read from the
    tree GPUMEM_SYSFS_ROOT names (gpumem's environment: no traced process sets it)."""
    fake_sysfs(tmp_path)
    env = {"GPUMEM_SYSFS_ROOT": str(tmp_path)}
    with SystemWide("--lib", MOCK_HIP, env=env) as gpumem:     # attached before it runs
        hip = subprocess.Popen([HIP, MOCK_HIP, "hold"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
        try:
            LineReader(hip.stdout).wait_for("holding")
            kfd = tmp_path / f"class/kfd/kfd/proc/{hip.pid}"
            kfd.mkdir()
            (kfd / f"vram_{GPU_ID}").write_text(f"{8 * MIB + 10240 + UNTRACED}\n")
            gpumem.stop()
        finally:
            hip.stdin.write(b"\n")
            hip.stdin.close()
            hip.wait(timeout=RUN_TIMEOUT)
    assert hip.returncode == 0
    report = gpumem.report
    assert report["devices"] == [
        {"vendor": "amd", "index": 0, "name": "gfx90a", "uuid": AMD_UUID,
         "pci_bus_id": "0000:c1:00.0", "minor": 128, "free_bytes": VRAM_TOTAL - VRAM_USED,
         "total_bytes": VRAM_TOTAL}]
    assert report["amdgpu"] == {"present": True, "reason": None}
    p = hip_proc(report)
    assert p["current_bytes"] == 8 * MIB + 10240
    assert p["kfd_vram_bytes"] == 8 * MIB + 10240 + UNTRACED       # the kernel's own count
    assert all(q["kfd_vram_bytes"] is None for q in report["processes"] if q is not p)


def test_without_kfd_the_report_says_why_there_are_no_amd_devices():
    run = run_snapshot_c([HIP, MOCK_HIP, "kinds"], env={"GPUMEM_SYSFS_ROOT": "/nonexistent"})
    assert run.returncode == 0, run.stderr
    assert [d for d in run.report["devices"] if d["vendor"] == "amd"] == []
    assert run.report["amdgpu"] == {
        "present": False, "reason": "no /nonexistent/class/kfd: amdgpu's KFD is not loaded"}
    assert hip_proc(run.report)["kfd_vram_bytes"] is None


def test_snapshot_text_names_the_amd_devices_after_nvmls_reason(tmp_path):
    fake_sysfs(tmp_path)
    done = subprocess.run([GPUMEM, "snapshot", "-c", HIP, MOCK_HIP, "kinds"], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT,
                          env=dict(os.environ, GPUMEM_SYSFS_ROOT=str(tmp_path),
                                   LD_LIBRARY_PATH=""))
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("device free - of - (NVML: ") and \
        last.endswith("; AMD GPU 0 gfx90a 0000:c1:00.0 free 59.0 GiB of 64.0 GiB"), last


def test_an_amd_program_that_grows_gets_a_forecast_from_amdgpus_free_memory(tmp_path):
    """A HIP loop keeping 1 MiB a step: leaks forecasts when AMD's GPU 0 runs out, from the free
    memory amdgpu's files give (64 GiB - 5 GiB), the growth a step its own."""
    fake_sysfs(tmp_path / "sys")
    out = tmp_path / "leaks.json"
    done = subprocess.run([GPUMEM, "leaks", "--json", "-i", "1", "-o", out, "-c", HIP, MOCK_HIP,
                           "leak"], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          env=dict(os.environ, GPUMEM_SYSFS_ROOT=str(tmp_path / "sys")))
    assert done.returncode == 0, done.stderr
    reports = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    made = [p["oom_forecast"] for r in reports for p in r["processes"]
            if p["comm"] == "hip" and p["oom_forecast"]]
    assert made, reports
    free = VRAM_TOTAL - VRAM_USED
    for f in made:
        assert (f["gpu"], f["vendor"], f["device_free_bytes"]) == (0, "amd", free), f
        assert abs(f["growth_bytes_per_step"] - MIB) <= 0.05 * MIB, f
        assert abs(f["steps"] * f["growth_bytes_per_step"] - free) \
            <= 0.01 * free + f["growth_bytes_per_step"] / 2, f


def test_top_names_amds_gpu_in_its_gpu_column_and_devices_line(tmp_path):
    """top is the host's view: an AMD program's memory is on AMD's GPU 0 (`A0`), and the GPUs
    line gives amdgpu's memory of that device with what the traced processes hold on it."""
    fake_sysfs(tmp_path / "sys")
    out = tmp_path / "top.txt"
    subprocess.run([GPUMEM, "top", "-b", "-n", "2", "-i", "1", "-o", out, "-c", HIP, MOCK_HIP,
                    "leak"], capture_output=True, timeout=RUN_TIMEOUT,
                   env=dict(os.environ, COLUMNS="120", GPUMEM_SYSFS_ROOT=str(tmp_path / "sys"),
                            LD_LIBRARY_PATH=""))
    tables = [t.splitlines() for t in out.read_text().split("\n\n") if t.startswith("gpumem top")]
    shown = [t for t in tables if any("# hip " in l for l in t)]
    assert shown, tables
    table = shown[-1]
    assert table[1].startswith("GPUs:  A0 gfx90a 5.0 GiB/64.0 GiB (traced "), table
    header = table[2].split()
    row = next(l for l in table if "# hip " in l).split()
    assert row[header.index("GPU")] == "A0", table
