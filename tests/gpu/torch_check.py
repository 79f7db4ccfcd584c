#!/usr/bin/env python3
"""The PyTorch part of gpumem's real-GPU check (tests/gpu/run.sh): each scenario prints what
PyTorch says, one JSON line at a time, and tests/gpu/compare.py sets gpumem's numbers beside it.

  torch_check.py loop [--steps N]    a training loop; at each checkpoint (after the weights,
                                     after small and large batches, after empty_cache, at the
                                     end): memory_reserved(), memory_allocated(), NVML's used
                                     memory, and gpumem's numbers for this process, read from
                                     the agent by running $GPUMEM_QUERY (a `gpumem snapshot
                                     --json` command line) while the loop waits
  torch_check.py seed [--seconds S]  the first seed scenario: a frozen encoder whose forward
                                     keeps each step's feature map in a list that outlives the
                                     step (run under `gpumem leaks -c`); prints the line that
                                     makes the feature map and its size
  torch_check.py cost [--seconds S]  a small training loop at full speed: steps per second

  --mock LIB   no PyTorch and no GPU: the same scenarios on the mock runtime LIB, each tensor a
               cudaMalloc of its own (reserved = allocated); the dry run's stand-in, labelled so
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

MiB = 1 << 20


def emit(obj):
    print(json.dumps(obj), flush=True)


# ---- gpumem's numbers and NVML's, read while the loop waits ----------------------------------

def query_gpumem():
    """This process as the agent accounts it now, or {"error": why}."""
    cmd = os.environ.get("GPUMEM_QUERY")
    if not cmd:
        return {"error": "GPUMEM_QUERY not set"}
    try:
        out = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=60)
        snap = json.loads(out.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"error": f"{cmd}: {e!r}"}
    me = os.getpid()
    for p in snap.get("processes") or []:
        if me in (p.get("pid"), p.get("ns_pid")):
            return {k: p.get(k) for k in ("pid", "current_bytes", "current_allocs", "peak_bytes",
                                           "alloc_count", "free_count", "by_kind",
                                           "tensor_bytes", "tensor_allocs")}
    # Not there: the agent has seen no allocation of this process (it holds nothing for it).
    return {"absent": f"pid {me} not among the agent's {len(snap.get('processes') or [])} "
                      f"processes", "current_bytes": 0, "tensor_bytes": 0, "tensor_allocs": 0}


def nvml_reader():
    """fn() -> {"self": bytes NVML says this process uses (None: not listed, e.g. another pid
    namespace), "all": every compute process's, "source": pynvml|nvidia-smi}."""
    me = os.getpid()
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
                    if p.pid == me:
                        mine = (mine or 0) + (p.usedGpuMemory or 0)
            return {"self": mine, "all": every, "source": "pynvml"}
        return read
    except Exception:  # not installed, or no NVML: nvidia-smi, in MiB
        pass

    def read_smi():
        try:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                  "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"self": None, "all": None, "source": f"nvidia-smi: {e!r}"}
        mine, every = None, 0
        for line in out.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 2 and parts[1].isdigit():
                every += int(parts[1]) * MiB
                if parts[0] == str(me):
                    mine = (mine or 0) + int(parts[1]) * MiB
        return {"self": mine, "all": every, "source": "nvidia-smi (MiB)"}
    return read_smi


# ---- the two backends: PyTorch on the GPU, and the mock runtime for the dry run --------------

class Torch:
    label = "torch"

    def __init__(self):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        self.dev = torch.device("cuda", 0)

    def describe(self):
        t = self.torch
        return {"torch_version": t.__version__, "torch_cuda": t.version.cuda,
                "device_name": t.cuda.get_device_name(self.dev),
                "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
                "allocator_backend": t.cuda.get_allocator_backend()}

    def sync(self):
        self.torch.cuda.synchronize(self.dev)

    def reserved(self):
        return self.torch.cuda.memory_reserved(self.dev)

    def allocated(self):
        return self.torch.cuda.memory_allocated(self.dev)

    def requested(self):
        """The sizes the tensors asked for (what pytorch:malloc passes): None where the
        allocator keeps no such count (cudaMallocAsync)."""
        return self.torch.cuda.memory_stats(self.dev).get("requested_bytes.all.current")

    def empty_cache(self):
        self.torch.cuda.empty_cache()

    def device_used(self):
        free, total = self.torch.cuda.mem_get_info(self.dev)
        return total - free

    def trainer(self, width, depth=3):
        """A step function: one SGD step of an MLP on a random batch of the given size."""
        nn = self.torch.nn
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        model = nn.Sequential(*layers, nn.Linear(width, 10)).to(self.dev)
        opt = self.torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step(batch):
            x = self.torch.randn(batch, width, device=self.dev)
            y = self.torch.randint(0, 10, (batch,), device=self.dev)
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    def seed_model(self, batch, width_in, width_feat):
        torch, nn = self.torch, self.torch.nn

        class FrozenEncoderHead(nn.Module):
            """Fine-tunes a head on a frozen encoder, and keeps every feature map "for later":
            the list outlives the step, so each step holds one more feature map."""

            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(width_in, width_feat), nn.ReLU())
                self.head = nn.Linear(width_feat, 10)
                self.seen = []
                self.encoder.requires_grad_(False)

            def forward(self, x):
                with torch.no_grad():
                    feat = self.encoder(x)  # seed-line:torch
                self.seen.append(feat)
                return self.head(feat)

        model = FrozenEncoderHead().to(self.dev)
        opt = torch.optim.SGD(model.head.parameters(), lr=1e-3)

        def step():
            x = torch.randn(batch, width_in, device=self.dev)
            y = torch.randint(0, 10, (batch,), device=self.dev)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            self.sync()
        return step, batch * width_feat * 4, "seed-line:torch"


class Mock:
    """The mock runtime (tests/mock/cudart.c): a tensor is a cudaMalloc of its own, freed when
    the last reference goes, so reserved and allocated are the same number."""
    label = "mock"

    def __init__(self, lib):
        import ctypes
        self.ct = ctypes
        self.rt = ctypes.CDLL(lib)
        self.live = 0

    def describe(self):
        return {"torch_version": None, "mock_runtime": True}

    def sync(self):
        pass

    def reserved(self):
        return self.live

    allocated = reserved

    def requested(self):
        return None

    def empty_cache(self):
        pass

    def device_used(self):
        return None

    def tensor(self, nbytes):
        mock = self

        class Tensor:
            def __init__(self):
                self.ptr = mock.ct.c_void_p()
                rc = mock.rt.cudaMalloc(mock.ct.byref(self.ptr), mock.ct.c_size_t(nbytes))
                if rc:
                    raise MemoryError(f"cudaMalloc({nbytes}) = {rc}")
                mock.live += nbytes

            def __del__(self):
                mock.rt.cudaFree(self.ptr)
                mock.live -= nbytes
        return Tensor()

    def trainer(self, width, depth=3):
        weights = [self.tensor(width * width * 4) for _ in range(depth)]

        def step(batch):
            acts = [self.tensor(batch * width * 4) for _ in weights]
            grads = [self.tensor(batch * width * 4) for _ in weights]
            del acts, grads
        return step

    def seed_model(self, batch, width_in, width_feat):
        mock = self

        class FrozenEncoderHead:
            def __init__(self):
                self.seen = []

            def forward(self, x):
                feat = mock.tensor(batch * width_feat * 4)  # seed-line:mock
                self.seen.append(feat)
                return mock.tensor(batch * 10 * 4)

        model = FrozenEncoderHead()

        def step():
            model.forward(mock.tensor(batch * width_in * 4))
        return step, batch * width_feat * 4, "seed-line:mock"


def line_of(marker):
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n
    return None


# ---- the scenarios -----------------------------------------------------------------------------

def loop(B, args):
    nvml = nvml_reader() if B.label == "torch" else None
    n = 0

    def checkpoint(label):
        B.sync()
        rec = {"checkpoint": label, "step": n, "reserved": B.reserved(),
               "allocated": B.allocated(), "requested": B.requested(),
               "device_used": B.device_used()}
        rec["gpumem"] = query_gpumem()
        rec["nvml"] = nvml() if nvml else None
        emit(rec)

    width = 1024 if B.label == "torch" else 64
    step = B.trainer(width)
    checkpoint("weights")
    for batch, label in ((256, "small batches"), (4096, "large batches"), (512, "after")):
        for _ in range(args.steps):
            step(batch)
            n += 1
        checkpoint(label)
        if label == "large batches":
            B.empty_cache()
            checkpoint("empty_cache")
    return 0


def seed(B, args):
    if B.label == "torch":
        step, feat_bytes, marker = B.seed_model(batch=2048, width_in=1024, width_feat=8192)
    else:
        step, feat_bytes, marker = B.seed_model(batch=16, width_in=64, width_feat=1024)
    emit({"seed": {"pid": os.getpid(), "file": os.path.abspath(__file__),
                   "line": line_of(marker), "feature_bytes": feat_bytes,
                   "period_ms": args.period_ms}})
    n, end = 0, time.monotonic() + args.seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        step()
        n += 1
        time.sleep(max(0.0, args.period_ms / 1000 - (time.monotonic() - t0)))
    B.sync()
    emit({"seed_done": {"steps": n, "reserved": B.reserved(), "allocated": B.allocated()}})
    os._exit(0)  # holding the list, as a job that dies of it would: nothing frees it first


def cost(B, args):
    step = B.trainer(512 if B.label == "torch" else 64, depth=4)
    for _ in range(20):  # warm: kernels loaded, the allocator's segments cached
        step(64)
    B.sync()
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < args.seconds:
        step(64)
        B.sync()
        n += 1
    dt = time.monotonic() - t0
    emit({"cost": {"steps": n, "seconds": round(dt, 3), "steps_per_s": round(n / dt, 1)}})
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario", choices=("loop", "seed", "cost"))
    ap.add_argument("--mock", metavar="LIB")
    ap.add_argument("--steps", type=int, default=5, help="loop: steps between checkpoints")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--period-ms", type=float, default=50, help="seed: one step every MS")
    args = ap.parse_args()
    try:
        B = Mock(args.mock) if args.mock else Torch()
    except Exception as e:  # no torch, no GPU: one line that says so
        emit({"error": f"{type(e).__name__}: {e}"})
        return 3
    emit({"backend": B.label, "pid": os.getpid(), "python": sys.version.split()[0],
          **B.describe()})
    return {"loop": loop, "seed": seed, "cost": cost}[args.scenario](B, args)


if __name__ == "__main__":
    sys.exit(main())
