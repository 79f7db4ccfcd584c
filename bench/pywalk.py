"""The Python walk's workload (bench/pywalk.sh): cudaMalloc/cudaFree pairs through ctypes at a
given Python stack depth, timed in-process.

pywalk.py LIB DEPTH PAIRS: prints "pywalk: pid P depth D pairs N: W ns/pair wall, C ns/pair cpu"
(cpu: this thread's CPU time, where the uprobes run)."""
import ctypes
import os
import sys
import time

WARMUP_PAIRS = 1000


def pairs(rt, count, size):
    ptr = ctypes.c_void_p()
    ref = ctypes.byref(ptr)
    size = ctypes.c_size_t(size)
    malloc, free = rt.cudaMalloc, rt.cudaFree
    for _ in range(count):
        malloc(ref, size)
        free(ptr)


def at_depth(depth, rt, count):
    """Runs the pairs with `depth` Python frames above the call (this one included)."""
    if depth > 1:
        return at_depth(depth - 1, rt, count)
    pairs(rt, WARMUP_PAIRS, 1 << 20)
    wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
    pairs(rt, count, 1 << 20)
    return time.perf_counter_ns() - wall, time.thread_time_ns() - cpu


def main():
    rt = ctypes.CDLL(sys.argv[1])
    depth, count = int(sys.argv[2]), int(sys.argv[3])
    # <module>, main and pairs are frames too: at_depth makes up the rest.
    wall, cpu = at_depth(depth - 3, rt, count)
    print(f"pywalk: pid {os.getpid()} depth {depth} pairs {count}: {wall / count:.1f} ns/pair "
          f"wall, {cpu / count:.1f} ns/pair cpu")


if __name__ == "__main__":
    main()
