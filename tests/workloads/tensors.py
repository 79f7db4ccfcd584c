"""CPython allocating PyTorch-style tensors through the mock caching allocator
(libc10_cuda.so, with PyTorch's USDT probes), for gpumem's tensor accounting.

tensors.py LIBDIR: loads the mock runtime and allocator, prints `ready PID`, then answers
commands on stdin, one a line:
  sem      `sem MALLOC FREE ADDR`: the probes' semaphores as the process reads them, and the
           malloc semaphore's address (to read it through /proc/PID/mem too)
  run      the known sequence below; prints `done`
  fired    `fired MALLOCS FREES`: how many probes the allocator reached
  warm     a cudaMalloc and its cudaFree of 4 KiB, no tensor (a traced process's first call
           makes it known to gpumem, its interpreter found); prints `warm`
The sequence (SIZES): two 256 KiB weights and a 512 KiB and a 1 MiB activation share the
first 2 MiB segment; a 3 MiB activation gets a 4 MiB segment of its own; the 1 MiB and the
3 MiB ones are freed, the segments kept (cached).

tensors.py LIBDIR leak STEPS MS [HOLD_S]: a training loop whose reserved memory stays flat
while its tensors leak: each step keeps a 4 KiB activation (keep_activation) and allocates
and frees an 8 KiB scratch tensor (scratch), all inside the one 2 MiB segment of the first
step; MS milliseconds between steps; then sleeps HOLD_S seconds (default 0) and exits.
tensors.py LIBDIR hold SECONDS: the known sequence, then sleeps SECONDS and exits.
tensors.py LIBDIR grow STEPS MS KEEP EVERY: a loop whose step is known beside a site that grows
on its own clock: each step keeps a KEEP-byte tensor (keep_small) and allocates and frees an
8 KiB scratch tensor (scratch); every EVERY steps it also keeps a 3 MiB tensor (keep_big), for
which the allocator takes a 4 MiB segment from cudaMalloc; MS milliseconds between steps.
"""
import ctypes
import sys
import time

lib_dir = sys.argv[1]
rt = ctypes.CDLL(f"{lib_dir}/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
c10 = ctypes.CDLL(f"{lib_dir}/libc10_cuda.so")
c10.c10_mock_alloc.restype = ctypes.c_void_p
c10.c10_mock_alloc.argtypes = [ctypes.c_size_t]
c10.c10_mock_free.argtypes = [ctypes.c_void_p]
c10.c10_mock_fired.restype = ctypes.c_ulong
sem_malloc = ctypes.c_ushort.in_dll(c10, "pytorch_malloc_semaphore")
sem_free = ctypes.c_ushort.in_dll(c10, "pytorch_free_semaphore")
KEPT = []


def load_weights():
    KEPT.append(c10.c10_mock_alloc(0x40000))
    KEPT.append(c10.c10_mock_alloc(0x40000))


def forward():
    big = c10.c10_mock_alloc(0x100000)
    KEPT.append(c10.c10_mock_alloc(0x80000))
    huge = c10.c10_mock_alloc(0x300000)
    c10.c10_mock_free(big)
    c10.c10_mock_free(huge)


def keep_activation():
    KEPT.append(c10.c10_mock_alloc(0x1000))


def scratch():
    c10.c10_mock_free(c10.c10_mock_alloc(0x2000))


def leak(steps, ms, hold_s):
    for _ in range(steps):
        keep_activation()
        scratch()
        time.sleep(ms / 1000)
    time.sleep(hold_s)


def keep_small(size):
    KEPT.append(c10.c10_mock_alloc(size))


def keep_big():
    KEPT.append(c10.c10_mock_alloc(0x300000))


def grow(steps, ms, keep, every):
    for step in range(steps):
        keep_small(keep)
        scratch()
        if step % every == every - 1:
            keep_big()
        time.sleep(ms / 1000)


def main():
    if len(sys.argv) > 2 and sys.argv[2] == "leak":
        hold_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0
        return leak(int(sys.argv[3]), float(sys.argv[4]), hold_s)
    if len(sys.argv) > 2 and sys.argv[2] == "grow":
        return grow(*map(int, sys.argv[3:7]))
    if len(sys.argv) > 2 and sys.argv[2] == "hold":
        load_weights()
        forward()
        return time.sleep(float(sys.argv[3]))
    print(f"ready {__import__('os').getpid()}", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "sem":
            print(f"sem {sem_malloc.value} {sem_free.value} {ctypes.addressof(sem_malloc)}",
                  flush=True)
        elif cmd == "run":
            load_weights()
            forward()
            print("done", flush=True)
        elif cmd == "warm":
            ptr = ctypes.c_void_p()
            assert rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(4096)) == 0
            assert rt.cudaFree(ptr) == 0
            print("warm", flush=True)
        elif cmd == "fired":
            print(f"fired {c10.c10_mock_fired(0)} {c10.c10_mock_fired(1)}", flush=True)
        elif cmd == "quit":
            break


main()
