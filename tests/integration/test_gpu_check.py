"""The real-GPU check's judge (tests/gpu/compare.py) on outputs shaped like PyTorch's, for the
paths the dry run on the mock runtime cannot reach: the cudaMallocAsync backend, tensors against
PyTorch's requested bytes, expandable segments, NVML's context overhead, a process the agent
never saw, a run with no cost figure."""
import json
import subprocess
import sys
from pathlib import Path

COMPARE = Path(__file__).resolve().parents[1] / "gpu" / "compare.py"
MIB = 1 << 20


def results_of(results):
    return {r["name"].split(": ", 1)[1] if ": " in r["name"] else r["name"]: r
            for r in map(json.loads, results.read_text().splitlines())}


def judge(tmp_path, mode, head, checkpoints):
    out, results = tmp_path / "loop.out", tmp_path / "results.jsonl"
    out.write_text("\n".join(json.dumps(x) for x in [head, *checkpoints]) + "\n")
    subprocess.run([sys.executable, str(COMPARE), "loop", mode, str(out), str(results)],
                   check=True, capture_output=True)
    return results_of(results)


def cp(label, reserved, allocated, gpu, tensors=None, ntensors=0, nvml=None, requested=None,
       allocs=0, by_kind=None):
    return {"checkpoint": label, "step": 0, "reserved": reserved, "allocated": allocated,
            "requested": requested, "device_used": None,
            "gpumem": {"current_bytes": gpu, "current_allocs": allocs, "tensor_bytes": tensors,
                       "tensor_allocs": ntensors, "by_kind": by_kind or {}},
            "nvml": {"self": nvml, "all": nvml, "source": "test"} if nvml is not None else None}


TORCH = {"backend": "torch", "pid": 1, "allocator_backend": "native"}


def test_reserved_and_requested_equal_pass_and_the_context_is_measured(tmp_path):
    r = judge(tmp_path, "default", TORCH, [
        cp("weights", 2 * MIB, 1536, 2 * MIB, tensors=12, ntensors=3, requested=12,
           nvml=2 * MIB + 500 * MIB),
        cp("steps", 4 * MIB, 2 * MIB, 4 * MIB, tensors=2 * MIB - 8, ntensors=1,
           requested=2 * MIB - 8, nvml=4 * MIB + 520 * MIB),
        cp("end", 4 * MIB, 2 * MIB, 4 * MIB, tensors=2 * MIB - 8, ntensors=1,
           requested=2 * MIB - 8, nvml=4 * MIB + 522 * MIB)])
    assert r["GPU bytes = memory_reserved()"]["verdict"] == "PASS"
    assert r["tensor bytes = requested_bytes"]["verdict"] == "PASS"
    # Kernels load during the first step; after it the context stays within 4 MiB.
    ov = r["context overhead (NVML used - gpumem)"]
    assert ov["verdict"] == "INFO" and ov["flat"]
    assert ov["series"] == [500 * MIB, 520 * MIB, 522 * MIB]


def test_differences_are_diffs_with_both_numbers(tmp_path):
    r = judge(tmp_path, "default", TORCH, [
        cp("weights", 2 * MIB, 1 * MIB, 2 * MIB, tensors=1 * MIB - 512, ntensors=1,
           requested=1 * MIB, nvml=100 * MIB),
        cp("steps", 4 * MIB, 1 * MIB, 2 * MIB, tensors=1 * MIB, ntensors=1, requested=1 * MIB,
           nvml=200 * MIB),
        cp("end", 4 * MIB, 1 * MIB, 2 * MIB, tensors=1 * MIB, ntensors=1, requested=1 * MIB,
           nvml=300 * MIB)])
    gpu = r["GPU bytes = memory_reserved()"]
    assert gpu["verdict"] == "DIFF" and "4194304" in gpu["detail"] and "2097152" in gpu["detail"]
    tensors = r["tensor bytes = requested_bytes"]
    assert tensors["verdict"] == "DIFF" and "1048064" in tensors["detail"]
    assert not r["context overhead (NVML used - gpumem)"]["flat"]


def test_cuda_malloc_async_is_held_to_allocated_within_the_pool_rounding(tmp_path):
    head = dict(TORCH, allocator_backend="cudaMallocAsync")
    # Three 40-byte tensors: the pool uses a 512-byte block for each.
    ok = judge(tmp_path, "cudaMallocAsync", head,
               [cp("weights", 32 * MIB, 3 * MIB, 3 * MIB - 3 * 472, allocs=3),
                cp("end", 64 * MIB, 5 * MIB, 5 * MIB, allocs=2)])
    assert ok["GPU bytes = memory_allocated()"]["verdict"] == "PASS"
    assert "no pytorch:malloc probe" in ok["tensor bytes"]["detail"]
    (tmp_path / "results.jsonl").unlink()
    off = judge(tmp_path, "cudaMallocAsync", head,
                [cp("end", 64 * MIB, 5 * MIB, 4 * MIB, allocs=2)])
    assert off["GPU bytes = memory_allocated()"]["verdict"] == "DIFF"


def test_expandable_segments_must_be_cumemcreate_bytes(tmp_path):
    vmm = {"device": 0, "vmm": 20 * MIB}
    r = judge(tmp_path, "expandable_segments", TORCH,
              [cp("end", 20 * MIB, 1 * MIB, 20 * MIB, by_kind=vmm)])
    assert r["reserved is cuMemCreate's"]["verdict"] == "PASS"
    (tmp_path / "results.jsonl").unlink()
    r = judge(tmp_path, "expandable_segments", TORCH,
              [cp("end", 20 * MIB, 1 * MIB, 20 * MIB, by_kind={"device": 20 * MIB, "vmm": 0})])
    assert "not in effect" in r["reserved is cuMemCreate's"]["detail"]


def test_the_first_process_the_agent_sees_is_measured_not_judged(tmp_path):
    absent = cp("weights", 2 * MIB, 2 * MIB, 0)
    absent["gpumem"]["absent"] = "pid 1 not among the agent's 0 processes"
    r = judge(tmp_path, "first_contact", TORCH, [absent])
    gpu = r["GPU bytes = memory_reserved()"]
    assert gpu["verdict"] == "INFO" and "not among the agent's" in gpu["detail"]


def test_a_run_with_no_cost_figure_is_a_failure_not_silence(tmp_path):
    results = tmp_path / "results.jsonl"
    subprocess.run([sys.executable, str(COMPARE), "cost", str(results)], check=True,
                   capture_output=True)
    assert results_of(results)["cost"]["verdict"] == "FAIL"
