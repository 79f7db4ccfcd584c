#!/usr/bin/env python3
"""A training-style loop on CUDA with a planted leak: every step keeps its first activation
(with its autograd graph, so the input it saved stays too) in a list that outlives the step.

Prints one JSON line per step: {"step", "t_ns" (CLOCK_REALTIME, as gpumem's time_ns),
"allocated" (torch.cuda.memory_allocated), "reserved" (torch.cuda.memory_reserved),
"nvml_used": {"self": this process's used GPU memory per NVML (pynvml, else nvidia-smi; null
when its pid is not listed, e.g. in another pid namespace), "all": every compute process's}},
then a final {"torch_expect": ...} line that tests/gpu/compare.py reads.
Usage: torch_leak.py [STEPS] [BATCH]"""
import json
import os
import subprocess
import sys
import time

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
BATCH = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
WIDTH = 4096


def nvml_reader():
    """Returns (source, fn) where fn() gives this process's used bytes on the GPU, or None."""
    pid = os.getpid()
    try:
        import pynvml

        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in range(pynvml.nvmlDeviceGetCount())]

        def read():
            mine, every = None, 0
            for h in handles:
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                    every += p.usedGpuMemory or 0
                    if p.pid == pid:
                        mine = (mine or 0) + (p.usedGpuMemory or 0)
            return {"self": mine, "all": every}

        return "pynvml", read
    except Exception as e:  # not installed, or no NVML: fall back to nvidia-smi
        sys.stderr.write(f"pynvml unavailable ({e!r}); using nvidia-smi\n")

    def read_smi():
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10).stdout
        except Exception:
            return None
        mine, every = None, 0
        for line in out.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 2 and parts[1].isdigit():
                every += int(parts[1]) << 20  # MiB
                if parts[0] == str(pid):
                    mine = (mine or 0) + (int(parts[1]) << 20)
        return {"self": mine, "all": every}

    return "nvidia-smi", read_smi


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    if not torch.cuda.is_available():
        emit({"torch_expect": "torch_leak", "error": "torch.cuda.is_available() is False",
              "torch_version": torch.__version__, "torch_cuda": torch.version.cuda})
        return 0
    dev = torch.device("cuda", 0)
    source, nvml_used = nvml_reader()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    kept = []  # the planted leak: outlives every step

    for step in range(STEPS):
        x = torch.randn(BATCH, WIDTH, device=dev)
        y = torch.randint(0, 10, (BATCH,), device=dev)
        h = model[1](model[0](x))
        kept.append(h)  # activation with its graph: h and what it saved stay allocated
        out = model[4](model[3](model[2](h)))
        loss = loss_fn(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward(retain_graph=True)  # keep the graph kept[] refers to
        opt.step()
        torch.cuda.synchronize()
        emit({"step": step, "t_ns": time.time_ns(), "loss": round(float(loss), 4),
              "allocated": torch.cuda.memory_allocated(dev),
              "reserved": torch.cuda.memory_reserved(dev),
              "nvml_used": nvml_used(), "nvml_source": source})

    torch.cuda.synchronize()
    per_tensor = BATCH * WIDTH * 4
    emit({"torch_expect": "torch_leak", "pid": os.getpid(), "t_ns": time.time_ns(),
          "steps": STEPS, "kept_tensors": len(kept), "leak_bytes_per_step_min": per_tensor,
          "allocated": torch.cuda.memory_allocated(dev),
          "reserved": torch.cuda.memory_reserved(dev),
          "max_allocated": torch.cuda.max_memory_allocated(dev),
          "max_reserved": torch.cuda.max_memory_reserved(dev),
          "nvml_used": nvml_used(), "nvml_source": source,
          "torch_version": torch.__version__, "torch_cuda": torch.version.cuda,
          "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
          "device_name": torch.cuda.get_device_name(dev)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
