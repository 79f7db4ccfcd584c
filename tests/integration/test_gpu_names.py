"""Per-GPU numbers name the host's device: a process started with CUDA_VISIBLE_DEVICES=1,0 (its
ordinal 0 is host GPU 1) on the mock runtime's two devices, gpumem loading the mock NVML
(tests/mock/nvml.c) of two named devices, or no NVML at all.

The apis `devices` scenario puts 12,000 bytes on its ordinal 0 and 24,000 on its ordinal 1
(test_apis.py); the mock runtime ignores CUDA_VISIBLE_DEVICES, so only gpumem's mapping turns
ordinals into host devices here.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path
import sys

import pytest
from conftest import GPUMEM, MOCK_LIB_DIR, MOCK_NVML_DIR, run_snapshot_c
from test_accounting import only_proc
from test_apis import APIS, held_apis
from test_serve import Agent, pins, wait_until  # noqa: F401 (pins: a fixture)

UUID0 = "GPU-11111111-2222-3333-4444-000000000000"
UUID1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-111111111111"
TOTAL = 150_000_000_000
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
MOCK_NVML = {
    "LD_LIBRARY_PATH": str(MOCK_NVML_DIR),
    "GPUMEM_MOCK_NVML": (f"NVIDIA H200,{UUID0},{TOTAL},1000,0,00000000:17:00.0;"
                         f"NVIDIA H200,{UUID1},{TOTAL},2000,1,"),     # no PCI bus id
}
TWO_GPUS_SWAPPED = {"GPUMEM_MOCK_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "1,0"}
DEVICES = [
    {"vendor": "nvidia", "index": 0, "name": "NVIDIA H200", "uuid": UUID0, "pci_bus_id": "00000000:17:00.0",
     "minor": 0, "free_bytes": TOTAL - 1000, "total_bytes": TOTAL},
    {"vendor": "nvidia", "index": 1, "name": "NVIDIA H200", "uuid": UUID1, "pci_bus_id": None,
     "minor": 1, "free_bytes": TOTAL - 2000, "total_bytes": TOTAL},
]


@pytest.fixture(scope="module", autouse=True)
def mock_nvml_built():
    if not (MOCK_NVML_DIR / "libnvidia-ml.so.1").exists():
        pytest.skip(f"{MOCK_NVML_DIR}/libnvidia-ml.so.1 is missing: run `make test-progs`")


def by_gpu(*entries):
    return [{"gpu": gpu, "host_gpu": host, "name": "NVIDIA H200" if uuid else None,
             "uuid": uuid, "vendor": "nvidia", "bytes": size} for gpu, host, uuid, size in entries]


def test_snapshot_names_the_host_gpu_of_each_ordinal_through_cuda_visible_devices():
    run = run_snapshot_c([APIS, "devices"], env={**MOCK_NVML, **TWO_GPUS_SWAPPED})
    assert run.returncode == 0, run.stderr
    assert only_proc(run.report)["by_gpu"] == by_gpu((0, 1, UUID1, 12000),
                                                     (1, 0, UUID0, 24000))
    assert run.report["devices"] == DEVICES
    assert run.report["nvml"] == {"loaded": True, "error": None, "reason": None}


def test_uuid_prefixes_in_cuda_visible_devices_are_matched_through_nvml():
    env = {**MOCK_NVML, "GPUMEM_MOCK_DEVICES": "2",
           "CUDA_VISIBLE_DEVICES": f"{UUID1[:12]},{UUID0}"}
    run = run_snapshot_c([APIS, "devices"], env=env)
    assert run.returncode == 0, run.stderr
    assert only_proc(run.report)["by_gpu"] == by_gpu((0, 1, UUID1, 12000),
                                                     (1, 0, UUID0, 24000))


def test_an_ordinal_past_the_visible_list_is_unknown_not_a_guess():
    # The mock runtime still has a second device; CUDA would not: gpumem says it cannot tell.
    env = {**MOCK_NVML, "GPUMEM_MOCK_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "1"}
    run = run_snapshot_c([APIS, "devices"], env=env)
    assert run.returncode == 0, run.stderr
    assert only_proc(run.report)["by_gpu"] == by_gpu((0, 1, UUID1, 12000),
                                                     (1, None, None, 24000))


# A script that sets its own list before its first CUDA call, as many training scripts do.
SETS_ITS_OWN_LIST = """
import ctypes, os, sys
os.environ["CUDA_VISIBLE_DEVICES"] = sys.argv[2]
rt = ctypes.CDLL(sys.argv[1])
p = ctypes.c_void_p()
for device, size in ((0, 12000), (1, 24000)):
    assert rt.cudaSetDevice(device) == 0
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0
"""


def test_a_list_the_process_set_itself_is_the_one_mapped():
    """os.environ["CUDA_VISIBLE_DEVICES"] = "1,0" before the first CUDA call: CUDA takes that
    list, which /proc/PID/environ (the environment the process started with) does not have;
    gpumem reads it from the process's memory, through its __environ (which Debian's python3
    keeps a copy of in the program, where the C library then uses it)."""
    env = {**MOCK_NVML, "GPUMEM_MOCK_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "0,1"}
    run = run_snapshot_c(["/usr/bin/python3", "-c", SETS_ITS_OWN_LIST,
                          str(MOCK_LIB_DIR / "libcudart.so.13"), "1,0"], env=env)
    assert run.returncode == 0, run.stderr
    assert only_proc(run.report)["by_gpu"] == by_gpu((0, 1, UUID1, 12000),
                                                     (1, 0, UUID0, 24000))


def test_a_list_set_by_a_program_on_an_overlay_is_the_one_mapped(tmp_path):
    """The same script run by a python on an overlay, as in a container's image: the program
    that holds the environment's copy is found by its entry point, not by a device, which an
    overlay's stat gives differently from its mappings."""
    python = Path(os.path.realpath("/usr/bin/python3"))
    for d in ("lower", "upper", "work", "merged"):
        (tmp_path / d).mkdir()
    shutil.copy(python, tmp_path / "lower")
    setup = (f"mount -t overlay overlay -o lowerdir={tmp_path}/lower,upperdir={tmp_path}/upper,"
             f"workdir={tmp_path}/work {tmp_path}/merged")
    probe = subprocess.run(["/usr/bin/unshare", "-m", "/bin/sh", "-c", setup],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode:
        pytest.skip(f"cannot mount an overlay in a namespace here: {probe.stderr.strip()}")
    script = tmp_path / "sets_its_own_list.py"
    script.write_text(SETS_ITS_OWN_LIST)
    env = {**MOCK_NVML, "GPUMEM_MOCK_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "0,1"}
    command = (f"{setup} && exec {tmp_path}/merged/{python.name} {script} "
               f"{MOCK_LIB_DIR / 'libcudart.so.13'} 1,0")
    run = run_snapshot_c(["/usr/bin/unshare", "-m", "/bin/sh", "-c", command], env=env)
    assert run.returncode == 0, run.stderr
    procs = [p for p in run.report["processes"] if p["by_gpu"]]
    assert len(procs) == 1, [(p["pid"], p["comm"]) for p in run.report["processes"]]
    assert procs[0]["by_gpu"] == by_gpu((0, 1, UUID1, 12000), (1, 0, UUID0, 24000))


def test_without_nvml_integer_lists_still_map_and_names_are_null_with_the_reason():
    # LD_LIBRARY_PATH empty: neither the mock nor build/nvidia; the host has no NVML of its own
    # (test_nvidia_real.py skips where it has).
    probe = subprocess.run([sys.executable, "-c", "import ctypes\ntry:\n"
                            " ctypes.CDLL('libnvidia-ml.so.1')\nexcept OSError as e:\n"
                            " print(e)"], capture_output=True, text=True, timeout=60,
                           env={"LD_LIBRARY_PATH": ""})
    loader = probe.stdout.strip()
    if not loader:
        pytest.skip("this host's loader finds an NVML of its own (libnvidia-ml.so.1)")
    run = run_snapshot_c([APIS, "devices"], env={"LD_LIBRARY_PATH": "", **TWO_GPUS_SWAPPED})
    assert run.returncode == 0, run.stderr
    assert only_proc(run.report)["by_gpu"] == by_gpu((0, 1, None, 12000),
                                                     (1, 0, None, 24000))
    assert run.report["devices"] == []
    assert run.report["nvml"] == {"loaded": False, "error": None,
                                  "reason": f"not loaded: {loader}"}


def metric_samples(body, name, **match):
    """{labels: value} of the family's samples whose labels include match."""
    found = {}
    for line in body.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels_text, value = line[len(name) + 1:].rsplit("} ", 1)
        labels = dict(LABEL.findall(labels_text))
        if all(labels.get(k) == v for k, v in match.items()):
            found[tuple(sorted(labels.items()))] = int(float(value))
    return found


def test_metrics_carry_uuid_and_name_and_sum_each_host_gpu(pins):
    agent = Agent(pins, env=MOCK_NVML)
    try:
        devices = held_apis("devices", TWO_GPUS_SWAPPED)
        mine = {"pid": str(devices.pid)}

        def series():
            body = agent.metrics()
            got = metric_samples(body, "gpumem_process_gpu_memory_bytes", **mine)
            return (body, got) if len(got) == 2 else None

        body, got = wait_until(series, what="the process's two per-GPU series")
        per_gpu = {(dict(k)["gpu"], dict(k)["host_gpu"], dict(k)["uuid"], dict(k)["name"]): v
                   for k, v in got.items()}
        assert per_gpu == {("0", "1", UUID1, "NVIDIA H200"): 12000,
                           ("1", "0", UUID0, "NVIDIA H200"): 24000}
        # Each host GPU's sum is every live process's on it, this one's included: checked
        # against the same scrape's per-process series (other programs may hold some too).
        everyone = metric_samples(body, "gpumem_process_gpu_memory_bytes")
        for host, uuid in (("0", UUID0), ("1", UUID1)):
            want = sum(v for k, v in everyone.items()
                       if dict(k)["host_gpu"] == host and dict(k)["vendor"] == "nvidia")
            assert metric_samples(body, "gpumem_gpu_traced_bytes", gpu=host) == {
                (("gpu", host), ("name", "NVIDIA H200"), ("uuid", uuid), ("vendor", "nvidia")):
                    want}
        assert sorted(line for line in body.splitlines()
                      if line.startswith("gpumem_gpu_info{")) == [
            f'gpumem_gpu_info{{vendor="nvidia",gpu="0",uuid="{UUID0}",name="NVIDIA H200",'
            'pci_bus_id="00000000:17:00.0",minor="0"} 1',
            f'gpumem_gpu_info{{vendor="nvidia",gpu="1",uuid="{UUID1}",name="NVIDIA H200",'
            'pci_bus_id="",minor="1"} 1']
        assert 'gpumem_nvml_up{error="",reason=""} 1' in body.splitlines()
        devices.communicate("\n", timeout=30)
    finally:
        agent.kill()
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian package prometheus): the exposition "
                    "was not checked by it")
    check = subprocess.run([promtool, "check", "metrics"], input=body, text=True,
                           capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_top_puts_each_process_on_its_host_gpus_beside_nvmls_names(tmp_path):
    # Ordinal 0 (12,000 B) is host GPU 1, ordinal 1 (24,000 B) host GPU 0.
    out = tmp_path / "top"
    env = {**os.environ, **MOCK_NVML, **TWO_GPUS_SWAPPED, "GPUMEM_APIS_HOLD": "1"}
    proc = subprocess.Popen([str(GPUMEM), "top", "-b", "-n", "1", "-i", "0.5", "--bytes", "-o",
                             str(out), "-c", str(APIS), "devices"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    (table,) = [t for t in out.read_text().split("\n\n") if t.startswith("gpumem top")]
    lines = table.splitlines()
    assert lines[1] == ("GPUs:  0 NVIDIA H200 1000/150000000000 (traced 24000)"
                        "  1 NVIDIA H200 2000/150000000000 (traced 12000)"), table
    assert lines[3].split()[1] == "0,1", table
