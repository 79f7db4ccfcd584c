"""numba, a third-party GPU library: Debian's python3-numba calls the driver API through ctypes
(device_array, to_device, its deferred deallocation) against the mock libcuda.so.1. gpumem must
count its bytes exactly, per process and per site, and name each site down to the user's line,
below numba's own frames."""
import json
import subprocess
from pathlib import Path

import pytest

from conftest import MOCK_LIB_DIR, ROOT, run_snapshot_c, run_trace_c

PYTHON = Path("/usr/bin/python3")
SCRIPT = ROOT / "tests" / "workloads" / "numba_loop.py"
ENV = {"NUMBA_CUDA_DRIVER": str(MOCK_LIB_DIR / "libcuda.so.1")}
STEPS = 25
DEFERRED = 12                               # numba_loop.DEFERRED
SCRATCH, UPLOAD, DEFER = 12000, 20000, 56000  # bytes of each site's arrays
NUMBA_DIR = "/numba/"

pytestmark = pytest.mark.skipif(
    subprocess.run([str(PYTHON), "-c", "import sys, numba; assert sys.version_info[:2] == (3, 11)"],
                   capture_output=True).returncode != 0,
    reason="needs Debian's /usr/bin/python3 (CPython 3.11) with numba (apt-get install "
           "python3-numba)")


def python_frames(site):
    return [f for f in site["frames"] if f.get("lang") == "python"]


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    out = tmp_path_factory.mktemp("numba") / "sites.json"
    report, rc = run_snapshot_c([PYTHON, SCRIPT, out, STEPS], env=ENV, timeout=120)
    assert rc == 0
    procs = [p for p in report["processes"] if p["comm"].startswith("python")]
    assert len(procs) == 1, report["processes"]
    assert report["lost"]["python_mismatch"] == 0 and report["lost"]["python_refused"] == 0
    assert report["lost"]["python_stack_errors"] == 0
    return procs[0], json.loads(out.read_text())


def site_of(proc, size):
    """The one site whose allocations are all of this size."""
    [site] = [s for s in proc["sites"] if s["alloc_bytes_total"] == size * s["alloc_count"]]
    return site


def test_numba_arrays_counted_exactly_per_process(loop):
    proc, expected = loop
    assert {k: (v["bytes"], v["count"]) for k, v in expected.items()} == {
        "scratch": (SCRATCH, STEPS), "upload": (UPLOAD, STEPS), "deferred": (DEFER, DEFERRED)}
    kept = (STEPS + 1) // 2                 # the even steps' uploads
    assert proc["alloc_count"] == 2 * STEPS + DEFERRED
    assert proc["alloc_bytes_total"] == STEPS * (SCRATCH + UPLOAD) + DEFERRED * DEFER
    assert proc["free_count"] == 2 * STEPS + DEFERRED - kept
    assert proc["current_allocs"] == kept
    assert proc["current_bytes"] == proc["by_kind"]["device"] == kept * UPLOAD
    assert len(proc["sites"]) == 3
    assert {s["api"] for s in proc["sites"]} == {"cuMemAlloc_v2"}


@pytest.mark.parametrize("name,size,count,live", [
    ("scratch", SCRATCH, STEPS, 0),         # dropped each step, freed by numba's deferred frees
    ("upload", UPLOAD, STEPS, (STEPS + 1) // 2),
    ("deferred", DEFER, DEFERRED, 0),       # freed after cuda.defer_cleanup()
])
def test_numba_sites_counted_exactly(loop, name, size, count, live):
    proc, _ = loop
    site = site_of(proc, size)
    assert site["alloc_count"] == count and site["alloc_bytes_total"] == count * size
    assert site["free_count"] == count - live
    assert site["current_allocs"] == live and site["current_bytes"] == live * size


@pytest.mark.parametrize("name,size", [("scratch", SCRATCH), ("upload", UPLOAD),
                                       ("deferred", DEFER)])
def test_numba_site_named_at_the_users_line(loop, name, size):
    proc, expected = loop
    frames = python_frames(site_of(proc, size))
    want = expected[name]["stack"]
    # numba's own frames (its ctypes call, memory manager, device_array/to_device) come first;
    # below them, the user's frames, the allocating line innermost, as extract_stack saw them.
    numba = frames[:len(frames) - len(want)]
    assert numba and all(NUMBA_DIR in f["file"] for f in numba), frames
    assert numba[0]["symbol"].endswith("safe_cuda_api_call")
    assert [(f["file"], f["line"]) for f in frames[len(numba):]] == [(w[0], w[1]) for w in want]
    user = frames[len(numba)]
    assert user["file"] == str(SCRIPT) and user["symbol"] == name
    line = SCRIPT.read_text().splitlines()[user["line"] - 1]
    assert ("to_device(" if name == "upload" else "device_array(") in line


def test_numba_deferred_frees_come_after_defer_cleanup(tmp_path):
    """Inside cuda.defer_cleanup() numba queues its frees past its pending-count threshold;
    the driver sees all of them after the block, each freeing one of its allocations."""
    events, rc = run_trace_c([PYTHON, SCRIPT, tmp_path / "sites.json", 4], env=ENV, timeout=120)
    assert rc == 0
    events = [e for e in events if e["event"] in ("alloc", "free")]
    deferred = {e["addr"] for e in events if e["event"] == "alloc" and e["size"] == DEFER}
    order = [e["event"] for e in events if e["addr"] in deferred]
    allocs = [i for i, e in enumerate(events) if e["event"] == "alloc" and e["size"] == DEFER]
    frees = [i for i, e in enumerate(events) if e["event"] == "free" and e["addr"] in deferred]
    assert len(allocs) == DEFERRED and len(frees) == DEFERRED, order
    assert min(frees) > max(allocs)
