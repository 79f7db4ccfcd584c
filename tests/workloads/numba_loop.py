"""numba (Debian's python3-numba, its ctypes binding of the driver API) allocating through the
mock libcuda.so.1 that NUMBA_CUDA_DRIVER names, for gpumem's bytes and Python call sites.

numba_loop.py OUT STEPS: STEPS steps, each allocating a scratch array (dropped: numba's deferred
deallocation frees it when more than CUDA_DEALLOCS_COUNT frees are pending) and uploading a host
array (every odd one dropped, the even ones kept); then DEFERRED arrays allocated and dropped
inside cuda.defer_cleanup(), freed only after it; then a flush of the pending frees. OUT gets
{site: {"bytes": N, "count": N, "stack": traceback.extract_stack() at the allocating line,
innermost first, as [file, line, name]}}. Exits with os._exit, so that no finalizer frees the
kept arrays at interpreter exit: they are live when the process ends.
"""
import json
import os
import sys
import traceback

import numpy as np
from numba import cuda

SCRATCH_ELEMS = 3000        # float32: 12000 bytes
UPLOAD_ELEMS = 5000         # float32: 20000 bytes
DEFERRED_ELEMS = 7000       # float64: 56000 bytes
DEFERRED = 12               # more than numba's CUDA_DEALLOCS_COUNT (10)
sites = {}


def mark(site, nbytes, stack):
    entry = sites.setdefault(site, {"bytes": nbytes, "count": 0, "stack": None})
    entry["count"] += 1
    entry["stack"] = [[f.filename, f.lineno, f.name] for f in reversed(stack)]


def scratch():
    buf = cuda.device_array(SCRATCH_ELEMS, dtype=np.float32); st = traceback.extract_stack()
    mark("scratch", buf.nbytes, st)
    return buf


def upload(step):
    host = np.full(UPLOAD_ELEMS, step, dtype=np.float32)
    dev = cuda.to_device(host); st = traceback.extract_stack()
    mark("upload", dev.nbytes, st)
    return dev


def train(steps):
    kept = []
    for step in range(steps):
        buf = scratch()
        dev = upload(step)
        if step % 2 == 0:
            kept.append((step, dev))
        del buf, dev
    return kept


def deferred():
    with cuda.defer_cleanup():
        for _ in range(DEFERRED):
            tmp = cuda.device_array(DEFERRED_ELEMS); st = traceback.extract_stack()
            mark("deferred", tmp.nbytes, st)
            del tmp


def main(out, steps):
    kept = train(steps)
    deferred()
    cuda.current_context().memory_manager.deallocations.clear()
    for step, dev in kept:          # the mock's copies round-trip the data
        assert (dev.copy_to_host() == step).all(), step
    with open(out, "w") as f:
        json.dump(sites, f)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
