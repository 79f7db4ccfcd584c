"""An inference loop that dies of out-of-memory after about 150 requests while the device
still has memory free: each request borrows a 1.5 GiB workspace and gives it back, but a cache
keeps every request's 44 MiB of outputs. When what is free no longer holds a workspace, the
allocation fails, with 1.5 GiB of the device still free.

    gpumem oom -c python3 examples/infer_oom.py

gpumem shows the failed call, what the process held and which line holds it."""
import os
import sys

os.environ.setdefault("GPUMEM_MOCK_DEVICE_BYTES", str(8 << 30))    # an 8 GiB device
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import fakegpu  # noqa: E402  (a framework, installed as a package would be)

MiB = fakegpu.MiB
cache = {}


def run_request(i):
    outputs = fakegpu.empty(44 * MiB)
    cache[i] = outputs          # kept "for reuse", never evicted
    workspace = fakegpu.empty(1536 * MiB)
    del workspace


def serve(requests=1000):
    for i in range(requests):
        try:
            run_request(i)
        except fakegpu.OutOfMemory as e:
            free, total = fakegpu.mem_get_info()
            print(f"request {i}: {e}; the device has {free >> 20} MiB free of "
                  f"{total >> 20} MiB", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(serve())
