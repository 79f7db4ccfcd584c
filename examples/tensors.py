"""Which of my tensors are kept, which freed? A training loop on a PyTorch-style caching
allocator: it takes 2 MiB segments from cudaMalloc (reserved) and carves tensors out of them
(allocated), so cudaMalloc alone says which line needed a segment, not which tensors stay;
PyTorch's USDT probes say that.

    gpumem snapshot -c python3 examples/tensors.py

gpumem shows reserved beside allocated, and the line of each tensor kept."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import fakegpu  # noqa: E402  (a framework, installed as a package would be)

KiB = 1 << 10
allocator = fakegpu.caching()
kept = []


def load_weights():
    return [allocator.empty(256 * KiB), allocator.empty(256 * KiB)]


def train_step():
    activation = allocator.empty(64 * KiB)
    loss = allocator.empty(4 * KiB)
    kept.append(loss)           # the leak: every step's loss, kept with its tensor
    del activation


if __name__ == "__main__":
    weights = load_weights()
    for _ in range(100):
        train_step()
        time.sleep(0.005)
    reserved, allocated = allocator.memory_stats()
    print(f"the allocator says: reserved {reserved // KiB} KiB, allocated {allocated // KiB} KiB",
          file=sys.stderr)
