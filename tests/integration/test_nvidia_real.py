"""NVIDIA's real driver (libcuda.so.1 535.261.03), NVML and CUDA 11.8's runtime from Debian
non-free (scripts/nvidia.sh unpacks them into build/nvidia), and CUDA 13's runtime where the
Toolkit is installed, on a host with no GPU and no kernel module: what they return, and what
gpumem records of it, exactly."""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tempfile
from pathlib import Path

import pytest

from conftest import (GPUMEM, NVIDIA_LIB_DIR, REAL_CUDART11_LIB, REAL_CUDART_LIB, REAL_LIBCUDA,
                      REAL_NVIDIA_PROG, REAL_NVML, RUN_TIMEOUT, attached_probes, elf_exports,
                      find_proc, nvidia_unavailable_reason, probe_table, run_snapshot_c,
                      run_trace_c)

NVIDIA_REASON = nvidia_unavailable_reason()
pytestmark = pytest.mark.skipif(NVIDIA_REASON is not None, reason=str(NVIDIA_REASON))

ALLOC_BYTES = 1 << 20           # real_nvidia.c: call i asks ALLOC_BYTES + i * 4096
FREE_ADDR = "0x1000"
NOT_INITIALIZED = 3             # every allocation API of the driver before a successful cuInit
NO_DEVICE = 100                 # cuInit without the kernel module; runtime 11.8 over it
INSUFFICIENT_DRIVER = 35        # runtime 13 over the 12.2 driver
DRIVER_VERSION = 12020          # cuDriverGetVersion of 535.261.03
NVML_DRIVER_NOT_LOADED = 9      # nvmlInit_v2 without the kernel module

# real_nvidia.c's calls, in its order: (api, kind) of each allocation, then the frees.
DRIVER_ALLOCS = [("cuMemAlloc_v2", "device"), ("cuMemAllocPitch_v2", "device"),
                 ("cuMemAllocManaged", "managed"), ("cuMemAllocHost_v2", "host"),
                 ("cuMemHostAlloc", "host"), ("cuMemAllocAsync", "async"),
                 ("cuMemAllocAsync_ptsz", "async"), ("cuMemAllocFromPoolAsync", "async"),
                 ("cuMemAllocFromPoolAsync_ptsz", "async"), ("cuMemCreate", "vmm")]
DRIVER_FREES = ["cuMemFree_v2", "cuMemFreeHost", "cuMemFreeAsync", "cuMemFreeAsync_ptsz",
                "cuMemRelease"]
RUNTIME_ALLOCS = [("cudaMalloc", "device"), ("cudaMallocPitch", "device"),
                  ("cudaMallocManaged", "managed"), ("cudaMallocHost", "host"),
                  ("cudaHostAlloc", "host"), ("cudaMallocAsync", "async"),
                  ("cudaMallocAsync_ptsz", "async"), ("cudaMallocFromPoolAsync", "async"),
                  ("cudaMallocFromPoolAsync_ptsz", "async")]
RUNTIME_FREES = ["cudaFree", "cudaFreeHost"]

RUNTIMES = {
    # library, what its allocations return, its name, cudaRuntimeGetVersion's return and value
    # (Debian's 11.8 answers that too with 100 and leaves the version unset).
    "11.8": (REAL_CUDART11_LIB, NO_DEVICE, "cudaErrorNoDevice", NO_DEVICE, -1),
    "13": (REAL_CUDART_LIB, INSUFFICIENT_DRIVER, "cudaErrorInsufficientDriver", 0, 13000),
}

# The runtime's dlopen("libcuda.so.1") and gpumem's dlopen("libnvidia-ml.so.1") find the
# unpacked libraries there.
REAL_ENV = {"LD_LIBRARY_PATH": str(NVIDIA_LIB_DIR)}


def expected_calls(allocs, frees, rc):
    """The `call` lines real_nvidia prints: sizes as real_nvidia.c makes them (the pitched
    allocation is width * 2 rows)."""
    calls = []
    for i, (api, _) in enumerate(allocs):
        size = ALLOC_BYTES + i * 4096
        calls.append((api, 2 * size if "Pitch" in api else size, "0x0", rc))
    calls += [(api, 0, FREE_ADDR, rc) for api in frees]
    return calls


def call_tuples(run):
    return [(c["api"], c["size"], c["addr"], c["rc"]) for c in run.calls]


def printed(run, word):
    """real_nvidia's lines that begin with word, split."""
    return [line.split()[1:] for line in run.stdout.splitlines() if line.startswith(word + " ")]


def error_names(run):
    """The library's own name of each code it returned (cuGetErrorName, cudaGetErrorName)."""
    return {int(code): name for code, name in printed(run, "errname")}


@pytest.fixture(scope="module")
def driver_run():
    return run_snapshot_c([REAL_NVIDIA_PROG, "driver", REAL_LIBCUDA], env=REAL_ENV)


def test_real_driver_returns_100_from_cuinit_and_3_from_every_allocation_api(driver_run):
    assert driver_run.returncode == 0, driver_run.stderr
    assert printed(driver_run, "init") == [[str(NO_DEVICE)]]
    calls = call_tuples(driver_run)
    assert calls[0] == ("cuInit", 0, "0x0", NO_DEVICE)
    assert calls[1:] == expected_calls(DRIVER_ALLOCS, DRIVER_FREES, NOT_INITIALIZED)
    assert error_names(driver_run) == {NO_DEVICE: "CUDA_ERROR_NO_DEVICE",
                                       NOT_INITIALIZED: "CUDA_ERROR_NOT_INITIALIZED"}


def test_gpumem_attaches_every_probe_table_symbol_the_real_driver_exports(driver_run):
    exported = elf_exports(REAL_LIBCUDA)
    wanted = [s for s in probe_table("driver") if s in exported]
    # What the probe table (docs/numbers.md) names, the real 535 driver exports, every one.
    assert set(DRIVER_FREES) | {api for api, _ in DRIVER_ALLOCS} <= set(wanted)
    assert attached_probes(driver_run.report, REAL_LIBCUDA) == wanted


def test_real_driver_failures_are_recorded_with_error_name_api_and_size(driver_run):
    report = driver_run.report
    proc = find_proc(report, report["processes"][0]["pid"])
    assert len(report["processes"]) == 1
    assert (proc["current_bytes"], proc["alloc_count"], proc["free_count"],
            proc["failed_count"]) == (0, 0, 0, len(DRIVER_ALLOCS))
    names = error_names(driver_run)
    expected = [(api, "driver", kind, size, NOT_INITIALIZED, names[NOT_INITIALIZED])
                for (api, kind), (_, size, _, _) in
                zip(DRIVER_ALLOCS, expected_calls(DRIVER_ALLOCS, [], NOT_INITIALIZED))]
    got = [(f["api"], f["layer"], f["kind"], f["size"], f["error"], f["error_name"])
           for f in report["failures"]]
    assert got == expected
    assert all(f["pid"] == proc["pid"] and f["process_bytes_at_failure"] == 0 and
               f["frames"][0]["symbol"] == "driver_calls" for f in report["failures"])
    # A free is accounted at its entry (it has no return probe): one of an address gpumem never
    # saw allocated is an unknown free, whether the driver refuses it or not; never a failure.
    assert report["lost"]["unknown_frees"] == len(DRIVER_FREES)
    assert report["tracer"]["failed_frees"] == 0
    assert report["tracer"]["nested_calls"] == 0


def test_real_driver_failures_in_trace_and_oom_json():
    run = run_trace_c([REAL_NVIDIA_PROG, "driver", REAL_LIBCUDA])
    assert run.returncode == 0, run.stderr
    failed = [(e["api"], e["layer"], e["kind"], e["error"], e["error_name"]) for e in run.report
              if e["event"] == "alloc_failed"]
    assert failed == [(api, "driver", kind, NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED")
                      for api, kind in DRIVER_ALLOCS]
    # The frees of an address never handed out: unknown frees, each once (frees are accounted
    # at their entry, refused or not), in the order the program made them.
    unknown = [(e["api"], e["addr"]) for e in run.report if e["event"] == "unknown_free"]
    assert unknown == [(api, FREE_ADDR) for api in DRIVER_FREES]
    assert [e["event"] for e in run.report
            if e["event"] not in ("alloc_failed", "unknown_free")] == ["process_exit"]

    with tempfile.TemporaryDirectory(prefix="gpumem-it-") as tmp:
        out = Path(tmp) / "oom.json"
        done = subprocess.run([str(GPUMEM), "oom", "--json", "-o", str(out), "-c",
                               str(REAL_NVIDIA_PROG), "driver", str(REAL_LIBCUDA)],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              env={**os.environ, **REAL_ENV})
        lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert done.returncode == 0, done.stderr
    records = [r for r in lines if "api" in r]
    assert [(r["api"], r["error"], r["error_name"], r["size"]) for r in records] == [
        (api, NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", size)
        for (api, _), (_, size, _, _) in
        zip(DRIVER_ALLOCS, expected_calls(DRIVER_ALLOCS, [], NOT_INITIALIZED))]
    for r in records:
        assert r["devices"] == []
        assert r["nvml"] == {"loaded": True, "error": NVML_DRIVER_NOT_LOADED,
                             "reason": "nvmlInit_v2 returned 9 (Driver Not Loaded)"}


@pytest.mark.parametrize("version", sorted(RUNTIMES))
def test_nvidia_runtime_over_the_real_driver_records_its_failures_once(version):
    lib, rc, name, version_rc, runtime_version = RUNTIMES[version]
    if not lib.exists():
        pytest.skip(f"needs {lib} (CUDA Toolkit {version})")
    run = run_snapshot_c([REAL_NVIDIA_PROG, "runtime", lib], env=REAL_ENV)
    assert run.returncode == 0, run.stderr
    # The real driver answered the runtime (12.2), whatever the runtime made of it.
    assert printed(run, "versions") == [["driver", "0", str(DRIVER_VERSION), "runtime",
                                         str(version_rc), str(runtime_version)]]
    assert call_tuples(run) == expected_calls(RUNTIME_ALLOCS, RUNTIME_FREES, rc)
    assert error_names(run) == {rc: name}
    report = run.report
    assert len(report["processes"]) == 1
    proc = report["processes"][0]
    # Each runtime call once, none of the driver's: the runtime never reached its exports.
    assert (proc["current_bytes"], proc["alloc_count"], proc["failed_count"]) == (
        0, 0, len(RUNTIME_ALLOCS))
    got = [(f["api"], f["layer"], f["kind"], f["size"], f["error"], f["error_name"])
           for f in report["failures"]]
    assert got == [(api, "runtime", kind, size, rc, name) for (api, kind), (_, size, _, _) in
                   zip(RUNTIME_ALLOCS, expected_calls(RUNTIME_ALLOCS, [], rc))]
    assert report["lost"]["unknown_frees"] == len(RUNTIME_FREES)
    assert report["tracer"]["failed_frees"] == 0
    assert report["tracer"]["nested_calls"] == 0
    exported = elf_exports(lib)
    assert attached_probes(report, lib) == [s for s in probe_table("runtime") if s in exported]
    driver_exports = elf_exports(REAL_LIBCUDA)
    assert attached_probes(report, REAL_LIBCUDA) == [s for s in probe_table("driver")
                                                      if s in driver_exports]


def proc_address_request(symbol):
    """What a runtime asks cuGetProcAddress for to reach symbol: the name without _ptsz and
    _vN, per-thread default stream (2) for _ptsz, else the legacy stream (1)."""
    flags = 1
    base = symbol
    if base.endswith("_ptsz"):
        base, flags = base[:-len("_ptsz")], 2
    return re.sub(r"_v[0-9]+$", "", base), flags


def test_cugetprocaddress_hands_out_the_exports_gpumem_probes(driver_run):
    """Whatever version of an API cuGetProcAddress hands out for a name (cuCtxCreate gives
    _v3 from 11.4, the _v2 allocation APIs their _v2), it is an export gpumem probes."""
    attached = attached_probes(driver_run.report, REAL_LIBCUDA)
    requests = []
    for symbol in attached:
        base, flags = proc_address_request(symbol)
        for version in (11080, 12000, DRIVER_VERSION):   # runtimes 11.8, 12.0, the driver's
            requests.append(f"{base}:{version}:{flags}:{symbol}")
    # A caller that asks for CUDA 3.0's ABI gets the old entry point, which gpumem does not
    # probe (docs/known-gaps.md).
    requests.append("cuMemAlloc:3000:1:cuMemAlloc")
    done = subprocess.run([str(REAL_NVIDIA_PROG), "procaddr", str(REAL_LIBCUDA), *requests],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    rows = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("proc ")]
    assert len(rows) == len(requests)
    probed = {}     # the address of each attached export, by the name asked for
    for name, version, flags, rc, status, got, export, dlsym in rows[:-1]:
        probed.setdefault((name, flags), set()).add(dlsym)
    for name, version, flags, rc, status, got, export, dlsym in rows[:-1]:
        assert (rc, status) == ("0", "0"), f"cuGetProcAddress({name}, {version}, {flags})"
        assert got != "(nil)" and got in probed[(name, flags)], \
            f"{name}@{version} gave {got}, not one of {sorted(probed[(name, flags)])}"
    old = rows[-1]
    v2 = next(r for r in rows if r[6] == "cuMemAlloc_v2")
    assert old[5] != v2[5] and "cuMemAlloc" not in attached
    # The context a 11.4+ caller makes through cuGetProcAddress is _v3's: probed.
    ctx = [r for r in rows if r[0] == "cuCtxCreate"]
    v3 = next(r[7] for r in ctx if r[6] == "cuCtxCreate_v3")
    assert {r[5] for r in ctx} == {v3}


def nvml_init_of_the_real_library():
    """nvmlInit_v2 and nvmlErrorString of the unpacked NVML, called here."""
    nvml = ctypes.CDLL(str(REAL_NVML))
    nvml.nvmlErrorString.restype = ctypes.c_char_p
    rc = nvml.nvmlInit_v2()
    return rc, nvml.nvmlErrorString(rc).decode()


def test_nvml_loads_and_its_failure_is_shown_as_a_reason_not_a_zero():
    rc, text = nvml_init_of_the_real_library()
    assert (rc, text) == (NVML_DRIVER_NOT_LOADED, "Driver Not Loaded")
    reason = f"nvmlInit_v2 returned {rc} ({text})"
    run = run_snapshot_c(["true"], env=REAL_ENV)
    assert run.returncode == 0, run.stderr
    assert run.report["devices"] == []
    assert run.report["nvml"] == {"loaded": True, "error": rc, "reason": reason}

    env = {**os.environ, **REAL_ENV}
    text_run = subprocess.run([str(GPUMEM), "snapshot", "-c", "true"], capture_output=True,
                              text=True, timeout=RUN_TIMEOUT, env=env)
    assert text_run.returncode == 0, text_run.stderr
    assert f"device free - of - (NVML: {reason})" in text_run.stdout.splitlines()


def test_top_screen_shows_why_nvml_gave_no_numbers():
    tmux = shutil.which("tmux")
    if not tmux:
        pytest.skip("tmux is not installed (scripts/deps.sh installs it)")
    session = f"gpumem-test-nvml-{os.getpid()}"
    cmd = (f"env LD_LIBRARY_PATH={NVIDIA_LIB_DIR} {GPUMEM} top -i 0.5 --no-hold "
           f"-c sleep 300")
    assert subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "30",
                           cmd], timeout=10).returncode == 0
    try:
        deadline = time.time() + 15
        lines = []
        while time.time() < deadline:
            lines = subprocess.run([tmux, "capture-pane", "-p", "-t", session],
                                   capture_output=True, text=True, timeout=10).stdout.splitlines()
            if len(lines) > 1 and lines[1].startswith("GPUs:"):
                break
            time.sleep(0.2)
        assert lines[1].rstrip() == ("GPUs: - (NVML: nvmlInit_v2 returned 9 "
                                     "(Driver Not Loaded))"), lines
    finally:
        subprocess.run([tmux, "send-keys", "-t", session, "q"], timeout=10)
        time.sleep(0.5)
        subprocess.run([tmux, "kill-session", "-t", session], capture_output=True, timeout=10)


def test_without_nvml_the_reason_is_the_loaders():
    # Asked in a process of its own: this one may have loaded the unpacked NVML already.
    probe = subprocess.run([sys.executable, "-c", "import ctypes\ntry:\n"
                            " ctypes.CDLL('libnvidia-ml.so.1')\nexcept OSError as e:\n"
                            " print(e)"], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    loader = probe.stdout.strip()
    if not loader:
        pytest.skip("this host's loader finds an NVML of its own (libnvidia-ml.so.1)")
    run = run_snapshot_c(["true"])
    assert run.returncode == 0, run.stderr
    assert run.report["devices"] == []
    assert run.report["nvml"] == {"loaded": False, "error": None,
                                  "reason": f"not loaded: {loader}"}


def test_metrics_say_why_nvml_gave_no_numbers(monkeypatch):
    from test_serve import Agent, pin_dir, reset   # the agent on pins of the test's own

    monkeypatch.setenv("LD_LIBRARY_PATH", str(NVIDIA_LIB_DIR))   # the agent's environment
    pins = pin_dir()
    agent = Agent(pins)
    try:
        body = agent.metrics()
    finally:
        agent.kill()
        reset(pins)
        shutil.rmtree(pins, ignore_errors=True)
    up = [line for line in body.splitlines() if line.startswith("gpumem_nvml_up")]
    assert up == ['gpumem_nvml_up{error="9",reason="nvmlInit_v2 returned 9 '
                  '(Driver Not Loaded)"} 0']
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=body, text=True,
                               capture_output=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
