"""The real-GPU check's judge (tests/gpu/compare.py) on outputs shaped like PyTorch's, for the
paths the dry run on the mock runtime cannot reach: the cudaMallocAsync backend, tensors within
PyTorch's 512-byte rounding, NVML's context overhead, a process the agent never saw."""
import json
import subprocess
import sys
from pathlib import Path

COMPARE = Path(__file__).resolve().parents[1] / "gpu" / "compare.py"
MIB = 1 << 20


def judge(tmp_path, mode, head, checkpoints):
    out, results = tmp_path / "loop.out", tmp_path / "results.jsonl"
    out.write_text("\n".join(json.dumps(x) for x in [head, *checkpoints]) + "\n")
    subprocess.run([sys.executable, str(COMPARE), "loop", mode, str(out), str(results)],
                   check=True, capture_output=True)
    return {r["name"].split(": ", 1)[1] if ": " in r["name"] else r["name"]: r
            for r in map(json.loads, results.read_text().splitlines())}


def cp(label, reserved, allocated, gpu, tensors=None, ntensors=0, nvml=None):
    return {"checkpoint": label, "step": 0, "reserved": reserved, "allocated": allocated,
            "device_used": None,
            "gpumem": {"current_bytes": gpu, "tensor_bytes": tensors, "tensor_allocs": ntensors,
                       "by_kind": {}},
            "nvml": {"self": nvml, "all": nvml, "source": "test"} if nvml is not None else None}


TORCH = {"backend": "torch", "pid": 1, "allocator_backend": "native"}


def test_reserved_equal_and_tensors_within_the_rounding(tmp_path):
    # Three live tensors of 4 bytes each: allocated counts three 512-byte blocks.
    r = judge(tmp_path, "default", TORCH, [
        cp("weights", 2 * MIB, 1536, 2 * MIB, tensors=12, ntensors=3, nvml=2 * MIB + 500 * MIB),
        cp("steps", 4 * MIB, 2 * MIB, 4 * MIB, tensors=2 * MIB, ntensors=1,
           nvml=4 * MIB + 520 * MIB),
        cp("end", 4 * MIB, 2 * MIB, 4 * MIB, tensors=2 * MIB, ntensors=1,
           nvml=4 * MIB + 522 * MIB)])
    assert r["GPU bytes = memory_reserved()"]["verdict"] == "PASS"
    assert r["tensor bytes = memory_allocated()"]["verdict"] == "PASS"
    # Kernels load during the first step; after it the context stays within 4 MiB.
    ov = r["context overhead (NVML used - gpumem)"]
    assert ov["verdict"] == "PASS" and ov["series"] == [500 * MIB, 520 * MIB, 522 * MIB]


def test_differences_are_diffs_with_both_numbers(tmp_path):
    r = judge(tmp_path, "default", TORCH, [
        cp("weights", 2 * MIB, 1 * MIB, 2 * MIB, tensors=1 * MIB - 512, ntensors=1,
           nvml=100 * MIB),
        cp("steps", 4 * MIB, 1 * MIB, 2 * MIB, tensors=1 * MIB, ntensors=1, nvml=200 * MIB),
        cp("end", 4 * MIB, 1 * MIB, 2 * MIB, tensors=1 * MIB, ntensors=1, nvml=300 * MIB)])
    gpu = r["GPU bytes = memory_reserved()"]
    assert gpu["verdict"] == "DIFF" and "4194304" in gpu["detail"] and "2097152" in gpu["detail"]
    assert r["tensor bytes = memory_allocated()"]["verdict"] == "DIFF"  # off by a whole block
    assert r["context overhead (NVML used - gpumem)"]["verdict"] == "DIFF"


def test_cuda_malloc_async_is_held_to_allocated(tmp_path):
    head = dict(TORCH, allocator_backend="cudaMallocAsync")
    r = judge(tmp_path, "cudaMallocAsync", head,
              [cp("weights", 32 * MIB, 3 * MIB, 3 * MIB), cp("end", 64 * MIB, 5 * MIB, 5 * MIB)])
    assert r["GPU bytes = memory_allocated()"]["verdict"] == "PASS"
    assert r["tensor bytes = memory_allocated()"]["verdict"] == "SKIP"


def test_a_process_the_agent_never_saw_is_a_diff(tmp_path):
    absent = cp("weights", 2 * MIB, 2 * MIB, 0)
    absent["gpumem"]["absent"] = "pid 1 not among the agent's 0 processes"
    r = judge(tmp_path, "first_contact", TORCH, [absent])
    gpu = r["GPU bytes = memory_reserved()"]
    assert gpu["verdict"] == "DIFF" and "not among the agent's" in gpu["detail"]
