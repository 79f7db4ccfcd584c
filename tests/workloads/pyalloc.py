"""CPython calling the mock CUDA runtime through ctypes, for gpumem's Python frames.

pyalloc.py LIB shapes OUT: one cudaMalloc from each shape (nested functions, a method, a
comprehension, a generator, a lambda, a second thread, recursion deeper than gpumem's frame
limit), each of its own size; OUT gets {"version": [major, minor], "stacks": {size:
traceback.extract_stack() at that call, innermost first, as [file, line, name]}}.
pyalloc.py LIB shapes-hold OUT: warm()'s pairs until a line on stdin, the shapes, "ready", then
alive, holding, until another line.
pyalloc.py LIB native-thread OUT SPAWNLIB: one cudaMalloc from Python, then one from a thread
CPython never saw (SPAWNLIB's spawn_alloc, tests/workloads/native_thread.c); OUT as for shapes.
pyalloc.py LIB wrapped-caller: one cudaMalloc of 0x30000 bytes from a frame whose caller pointer
(3.9's and 3.10's f_back) points at the address space's last 8 bytes during the call, then one
of 0x40000 bytes from a frame left as it is.
pyalloc.py LIB leak STEPS PERIOD_MS SIZE: a training loop whose model appends each step's
feature map to self.feature_map (the leak) and frees its scratch activations.

Runs on every CPython gpumem is tested with, 2.7 and 3.6+ included (unsupported ones must give
native frames only).
"""
import ctypes
import gc
import json
import sys
import threading
import time
import traceback

rt = ctypes.CDLL(sys.argv[1])
stacks = {}


def alloc(size):
    ptr = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)); st = traceback.extract_stack()
    assert rc == 0, rc
    stacks[size] = [[f[0], f[1], f[2]] for f in reversed(st)]
    return ptr.value


def free(addr):
    assert rt.cudaFree(ctypes.c_void_p(addr)) == 0


def outer(size):
    return middle(size)


def middle(size):
    return alloc(size)


class Model:
    def __init__(self):
        self.feature_map = []

    def forward(self, size):
        return alloc(size)

    def step(self, size):
        features = alloc(size)
        self.feature_map.append(features)     # kept: the leak
        scratch = alloc(2 * size)
        free(scratch)


def gen(size):
    yield alloc(size)


def recurse(depth, size):
    if depth == 0:
        return alloc(size)
    return recurse(depth - 1, size)


def shapes(out):
    outer(0x10000)
    Model().forward(0x20000)
    [alloc(s) for s in [0x30000]]
    next(gen(0x40000))
    (lambda s: alloc(s))(0x50000)
    t = threading.Thread(target=middle, args=(0x60000,))
    t.start()
    t.join()
    recurse(50, 0x70000)
    with open(out, "w") as f:
        json.dump({"version": list(sys.version_info[:2]), "stacks": stacks}, f)


def warm(size):
    free(alloc(size))


def warm_until_line():
    """warm()'s cudaMalloc/cudaFree pairs of 0x1000 until a line comes on stdin: a gpumem
    already running names a process's Python lines only once it has examined the interpreter,
    which on a loaded host can come after the first calls; the caller says when it has."""
    import select
    while not select.select([sys.stdin], [], [], 0.02)[0]:
        warm(0x1000)
    sys.stdin.readline()


def native_thread(out, spawn_lib):
    outer(0x10000)
    spawn = ctypes.CDLL(spawn_lib)
    assert spawn.spawn_alloc(ctypes.c_size_t(0x80000)) == 0
    with open(out, "w") as f:
        json.dump({"version": list(sys.version_info[:2]), "stacks": stacks}, f)


def wrapped_caller():
    """A traced program may point its frames anywhere: f_back (after the frame object's 24-byte
    head in 3.9 and 3.10) set to 0xfffffffffffffff8, where a frame's end wraps past zero, for
    the call only (the collector, which follows it, kept off meanwhile)."""
    ptr = ctypes.c_void_p()
    ref, size, malloc = ctypes.byref(ptr), ctypes.c_size_t(0x30000), rt.cudaMalloc
    back = ctypes.c_void_p.from_address(id(sys._getframe()) + 24)
    saved = back.value
    gc.disable()
    back.value = 0xfffffffffffffff8
    rc = malloc(ref, size)
    back.value = saved
    gc.enable()
    assert rc == 0
    alloc(0x40000)


def leak(steps, period_ms, size):
    model = Model()
    for _ in range(steps):
        model.step(size)
        time.sleep(period_ms / 1000)


if __name__ == "__main__":
    if sys.argv[2] == "shapes":
        shapes(sys.argv[3])
    elif sys.argv[2] == "shapes-hold":     # then alive, holding, until a line on stdin
        warm_until_line()
        shapes(sys.argv[3])
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()
    elif sys.argv[2] == "native-thread":
        native_thread(sys.argv[3], sys.argv[4])
    elif sys.argv[2] == "wrapped-caller":
        wrapped_caller()
    else:
        leak(int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
