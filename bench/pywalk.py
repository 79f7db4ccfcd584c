"""The Python walk's workload (bench/pywalk.sh): cudaMalloc/cudaFree pairs through ctypes at a
given Python stack depth, through several copies of the mock runtime side by side, timed
in-process.

pywalk.py DEPTH PAIRS BATCH LIB [LIB...]: makes PAIRS pairs through each LIB, BATCH at a time,
the libraries in turn (the first of a turn rotating, as bench/loop.c --dirs does), from one
Python stack: the same frames and lines above every call, the warm-up's too. Prints "pywalk: pid P depth D pairs N" and then, for each LIB in order,
"LIB: C ns/pair cpu" (this thread's CPU time, where the uprobes run, of that library's
batches). Whatever the machine does meanwhile falls on every library alike."""
import ctypes
import os
import sys
import time

WARMUP_PAIRS = 1000
SIZE = 1 << 20


def pairs(rt, count, size):
    ptr = ctypes.c_void_p()
    ref = ctypes.byref(ptr)
    size = ctypes.c_size_t(size)
    malloc, free = rt.cudaMalloc, rt.cudaFree
    for _ in range(count):
        malloc(ref, size)
        free(ptr)


def turns(rts, count, batch):
    """CPU ns of each library's pairs, count through each, batch at a time in turn."""
    cpu = [0] * len(rts)
    done = turn = 0
    while done < count:
        n = min(batch, count - done)
        for k in range(len(rts)):
            i = (k + turn) % len(rts)
            start = time.thread_time_ns()
            pairs(rts[i], n, SIZE)
            cpu[i] += time.thread_time_ns() - start
        done += n
        turn += 1
    return cpu


def at_depth(depth, rts, count, batch):
    """Runs the pairs with `depth` Python frames above the call (this one included)."""
    if depth > 1:
        return at_depth(depth - 1, rts, count, batch)
    # The warm-up from the timed call's line: the stack timed is the one the warm-up made known.
    for n, b in ((WARMUP_PAIRS, WARMUP_PAIRS), (count, batch)):
        cpu = turns(rts, n, b)
    return cpu


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: pywalk.py DEPTH PAIRS BATCH LIB [LIB...]")
    depth, count, batch = (int(a) for a in sys.argv[1:4])
    libs = sys.argv[4:]
    rts = [ctypes.CDLL(lib) for lib in libs]
    # <module>, main, turns and pairs are frames too: at_depth makes up the rest.
    cpu = at_depth(depth - 4, rts, count, batch)
    print(f"pywalk: pid {os.getpid()} depth {depth} pairs {count}")
    for lib, ns in zip(libs, cpu):
        print(f"{lib}: {ns / count:.1f} ns/pair cpu")


if __name__ == "__main__":
    main()
