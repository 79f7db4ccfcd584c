"""PyTorch tensors: the mock caching allocator (libc10_cuda.so, PyTorch's USDT probes
pytorch:malloc and pytorch:free behind their semaphores) carves tensors out of 2 MiB
segments it takes with cudaMalloc. gpumem must count the tensors (allocated) per process and
per Python line beside the segments (reserved), never twice, and set the semaphores only
while it is attached."""
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (MOCK_LIB_DIR, SystemWide, Workload, find_proc, run_snapshot_c,
                      run_trace_c, C10_LIB, TENSOR_PYTHON, TENSOR_SCRIPT, TENSOR_SKIPS)

PYTHON, SCRIPT, C10 = TENSOR_PYTHON, TENSOR_SCRIPT, C10_LIB
KIB, MIB = 1 << 10, 1 << 20

pytestmark = TENSOR_SKIPS


def ask(w, cmd, prefix):
    w.proc.stdin.write(f"{cmd}\n".encode())
    w.proc.stdin.flush()
    return w.wait_for(prefix).split()[1:]


def semaphores(w):
    """(malloc, free) as the process reads them, and malloc's through /proc/PID/mem."""
    malloc, free, addr = (int(x) for x in ask(w, "sem", "sem "))
    with open(f"/proc/{w.pid}/mem", "rb") as mem:
        mem.seek(addr)
        from_mem = int.from_bytes(mem.read(2), "little")
    assert from_mem == malloc
    return malloc, free


def python_lines(site):
    return [(Path(f["file"]).name, f["symbol"]) for f in site["frames"]
            if f.get("lang") == "python"]


@pytest.fixture(scope="module")
def traced():
    """The sequence run while a system-wide gpumem is attached; the semaphores before, while
    and after; and a plain C workload traced beside it."""
    w = Workload(SCRIPT, MOCK_LIB_DIR, program=PYTHON)
    try:
        w.wait_for("ready")
        others = other_gpumems()    # asked at each reading: one may come and go between
        before = semaphores(w)
        with SystemWide() as g:
            during = semaphores(w)
            # Started before gpumem, the process is not held at its first call: let gpumem
            # find its interpreter before the sequence, so every call has its Python frames.
            ask(w, "warm", "warm")
            time.sleep(1)
            ask(w, "run", "done")
            fired = [int(x) for x in ask(w, "fired", "fired ")]
            with Workload("hold", 4096) as plain:
                plain.wait_for("holding")
                plain_pid = plain.pid
                g.stop()
        after = semaphores(w)
        others = others or other_gpumems()
        return {"report": g.report, "pid": w.pid, "plain": plain_pid, "before": before,
                "during": during, "after": after, "fired": fired,
                "other_tracers": others}
    finally:
        w.kill()


def other_gpumems():
    """Whether a gpumem other than the tests' own runs on the host (it may attach our mock
    library too, and the kernel then counts its probes in the semaphores)."""
    out = subprocess.run(["pgrep", "-x", "gpumem"], capture_output=True, text=True)
    return bool(out.stdout.split())


def test_semaphores_are_set_only_while_gpumem_is_attached(traced):
    # The host is shared: another tracer (another gpumem system-wide) may hold the probes
    # already, and the kernel's count is then non-zero before and after ours. What this
    # gpumem does is set them while attached and leave them as it found them.
    before, during, after = traced["before"], traced["during"], traced["after"]
    assert during[0] > 0 and during[1] > 0
    assert traced["fired"] == [5, 2]
    if not traced["other_tracers"]:
        assert before == (0, 0) and after == (0, 0)
    else:   # another gpumem may have attached before, during or after ours: it holds them
        assert after[0] <= during[0] and after[1] <= during[1]


def test_tensors_allocated_beside_reserved_segments_per_process(traced):
    p = find_proc(traced["report"], traced["pid"])
    # Reserved: a 2 MiB segment holding four tensors, and a 4 MiB one for the 3 MiB tensor.
    # The warm-up's 4 KiB came and went.
    assert p["current_bytes"] == 6 * MIB
    assert p["alloc_count"] == 3 and p["free_count"] == 1 and p["current_allocs"] == 2
    assert sorted(s["current_bytes"] for s in p["sites"]) == [0, 2 * MIB, 4 * MIB]
    assert all(s["api"] == "cudaMalloc" for s in p["sites"])
    # Allocated: 2 x 256 KiB weights and a 512 KiB activation live; 1 MiB and 3 MiB freed.
    assert p["tensor_bytes"] == 1 * MIB
    assert p["tensor_allocs"] == 3
    assert p["tensor_alloc_count"] == 5 and p["tensor_free_count"] == 2
    assert p["tensor_bytes_total"] == 512 * KIB + 1 * MIB + 512 * KIB + 3 * MIB
    assert traced["report"]["lost"]["unknown_tensor_frees"] == 0


def test_tensor_sites_are_their_python_lines(traced):
    p = find_proc(traced["report"], traced["pid"])
    sites = p["tensor_sites"]
    assert all(s["api"] == "pytorch:malloc" for s in sites)
    assert all(s["gpu"] == 0 for s in sites)   # pytorch:malloc's device argument
    by_size = sorted((s["alloc_bytes_total"], s["current_bytes"], s["alloc_count"],
                      s["free_count"], python_lines(s)[0]) for s in sites)
    assert by_size == [
        (256 * KIB, 256 * KIB, 1, 0, ("tensors.py", "load_weights")),
        (256 * KIB, 256 * KIB, 1, 0, ("tensors.py", "load_weights")),
        (512 * KIB, 512 * KIB, 1, 0, ("tensors.py", "forward")),
        (1 * MIB, 0, 1, 1, ("tensors.py", "forward")),
        (3 * MIB, 0, 1, 1, ("tensors.py", "forward")),
    ]
    lines = {python_frames_line(s) for s in sites}
    assert len(lines) == 5, lines    # five lines, five sites
    # Each segment's cudaMalloc is at the Python line whose tensor needed it.
    seg = {s["current_bytes"]: python_lines(s)[0] for s in p["sites"] if s["current_bytes"]}
    assert seg == {2 * MIB: ("tensors.py", "load_weights"), 4 * MIB: ("tensors.py", "forward")}


def python_frames_line(site):
    f = [f for f in site["frames"] if f.get("lang") == "python"][0]
    return (f["file"], f["line"])


def test_a_process_without_the_library_is_unaffected(traced):
    p = find_proc(traced["report"], traced["plain"])
    assert p["current_bytes"] == 4096
    assert p["tensor_bytes"] == 0 and p["tensor_alloc_count"] == 0 and p["tensor_sites"] == []


@pytest.mark.parametrize("flags", [(), ("--no-tensors",)])
def test_no_tensors_leaves_the_probes_off_and_segments_exact(flags):
    # The known sequence under -c, with and without --no-tensors: the segments are the same
    # either way; the tensors are counted only with the probes on.
    run = run_snapshot_c([PYTHON, SCRIPT, MOCK_LIB_DIR, "hold", "0"], gpumem_args=flags)
    p = max(run.report["processes"], key=lambda p: p["alloc_count"])
    assert (p["current_bytes"], p["alloc_count"], p["free_count"]) == (6 * MIB, 2, 0)
    if flags:
        assert p["tensor_alloc_count"] == 0 and p["tensor_sites"] == []
    else:
        assert (p["tensor_bytes"], p["tensor_alloc_count"]) == (1 * MIB, 5)


def test_each_tensor_probe_run_is_a_probe_hit_of_its_process():
    # gpumem's own cost in a process counts its probes' runs; a tensor free's run goes to the
    # process without the thread's record. The leak loop's step is three tensor events (a kept
    # activation, a scratch tensor and its free): 100 steps more are 300 hits more, and those
    # of the cudaMalloc of each segment the allocator takes (an entry, the driver's call inside
    # it, a return: a few hits each).
    hits, segments = {}, {}
    for steps in (100, 200):
        run = run_snapshot_c([PYTHON, SCRIPT, MOCK_LIB_DIR, "leak", str(steps), "0"])
        assert run.returncode == 0, run.stderr
        p = max(run.report["processes"], key=lambda p: p["tensor_alloc_count"])
        assert (p["tensor_alloc_count"], p["tensor_free_count"]) == (2 * steps, steps), p
        hits[steps], segments[steps] = p["probe_hits"], p["alloc_count"]
    more_segments = segments[200] - segments[100]
    assert 300 + more_segments <= hits[200] - hits[100] <= 300 + 4 * more_segments, (hits,
                                                                                     segments)


def test_a_tensor_walked_by_frame_pointers_starts_at_the_probes_function_and_its_caller():
    # A USDT probe fires inside its function: the walk starts at the probed instruction and
    # reads its first window from the function's frame record up, not from sp (the function's
    # own locals hold no frame). Under --unwind fp the frames shown are the walk's own: the
    # allocator's function, then its caller, ctypes' libffi (its frames past that are libffi's
    # own layout, not checked here). Each streamed event walks: 2 steps, 4 mallocs, 2 frees.
    run = run_trace_c([PYTHON, SCRIPT, MOCK_LIB_DIR, "leak", "2", "0"],
                      gpumem_args=("--unwind", "fp"))
    assert run.returncode == 0, run.stderr
    events = [e for e in run.report if e.get("layer") == "pytorch"]
    assert sorted(e["event"] for e in events) == ["alloc"] * 4 + ["free"] * 2, events
    for e in events:
        native = [(f.get("symbol"), Path(f.get("module") or "").name) for f in e["frames"]
                  if f.get("lang") == "native"]
        if e["event"] == "alloc":
            assert native[0] == ("c10_mock_alloc", C10.name), native
            assert native[1][1].startswith("libffi.so"), native
        else:
            assert native[0] == ("c10_mock_free", C10.name), native
