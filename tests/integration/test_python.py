"""CPython frames: Debian's python3 calls the mock runtime through ctypes; gpumem's Python
frames must be what traceback.extract_stack() said at each allocation, file, line and name;
a planted leak is named at its line."""
import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import GPUMEM, MOCK_LIB_DIR, ROOT, run_snapshot_c

PYTHON = Path("/usr/bin/python3")
SCRIPT = ROOT / "tests" / "workloads" / "pyalloc.py"
CUDART = MOCK_LIB_DIR / "libcudart.so.13"
MAX_FRAMES = 32     # GM_PY_MAX_FRAMES
MARKER = "[more Python frames]"

pytestmark = pytest.mark.skipif(
    subprocess.run([str(PYTHON), "-c", "import sys; assert sys.version_info[:2] == (3, 11)"],
                   capture_output=True).returncode != 0,
    reason="needs Debian's /usr/bin/python3, CPython 3.11")


def python_frames(site):
    return [f for f in site["frames"] if f.get("lang") == "python"]


@pytest.fixture(scope="module")
def shapes():
    with tempfile.TemporaryDirectory(prefix="gpumem-py-") as tmp:
        out = Path(tmp) / "stacks.json"
        report, rc = run_snapshot_c([PYTHON, SCRIPT, CUDART, "shapes", out])
        assert rc == 0
        expected = json.loads(out.read_text())
    procs = [p for p in report["processes"] if p["comm"].startswith("python")]
    assert len(procs) == 1, report["processes"]
    assert report["lost"]["python_mismatch"] == 0 and report["lost"]["python_refused"] == 0
    by_size = {s["alloc_bytes_total"]: s for s in procs[0]["sites"]}
    return by_size, {int(k): v for k, v in expected.items()}


@pytest.mark.parametrize("size,shape", [
    (0x10000, "nested functions"), (0x20000, "a method"), (0x30000, "a comprehension"),
    (0x40000, "a generator"), (0x50000, "a lambda"), (0x60000, "a second thread"),
])
def test_python_frames_equal_extract_stack(shapes, size, shape):
    sites, expected = shapes
    site = sites[size]
    assert site["alloc_count"] == 1
    got = python_frames(site)
    want = expected[size]
    assert [(f["file"], f["line"]) for f in got] == [(w[0], w[1]) for w in want], shape
    for f, w in zip(got, want):
        assert f["symbol"].split(".")[-1] == w[2], (f, w)
    # The interpreter's own frames are folded away; the C below (ctypes' libffi) stays.
    assert not any(f["symbol"] == "_PyEval_EvalFrameDefault" for f in site["frames"])
    assert any(f["symbol"] == "ffi_call" for f in site["frames"][:got and 8])


def test_python_qualified_names(shapes):
    sites, _ = shapes
    assert python_frames(sites[0x20000])[1]["symbol"] == "Model.forward"
    assert python_frames(sites[0x30000])[1]["symbol"] == "shapes.<locals>.<listcomp>"
    assert python_frames(sites[0x50000])[1]["symbol"] == "shapes.<locals>.<lambda>"
    assert python_frames(sites[0x60000])[2]["symbol"] == "Thread.run"


def test_python_recursion_deeper_than_the_limit_is_cut_and_says_so(shapes):
    sites, expected = shapes
    got = python_frames(sites[0x70000])
    want = expected[0x70000]
    assert len(want) > MAX_FRAMES
    assert len(got) == MAX_FRAMES + 1
    assert [(f["file"], f["line"]) for f in got[:MAX_FRAMES]] == \
        [(w[0], w[1]) for w in want[:MAX_FRAMES]]
    assert got[-1]["symbol"] == MARKER and got[-1]["line"] is None


def test_python_lines_are_sites_of_their_own(shapes):
    sites, _ = shapes
    # outer() and the thread both reach alloc() through middle(): one native stack shape,
    # still two sites, and every shape above is a site of its own.
    assert len({s for s in sites}) == 7


def test_python_leak_named_at_the_line_of_the_append(tmp_path):
    out = tmp_path / "leaks.json"
    steps, size = 20, 4096
    done = subprocess.run([str(GPUMEM), "leaks", "--json", "-o", str(out), "-c", str(PYTHON),
                           str(SCRIPT), str(CUDART), "leak", str(steps), "150", str(size)],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    reports = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    proc = reports[-1]["processes"][0]
    leak = proc["sites"][0]
    assert leak["verdict"] == "growing" and leak["current_allocs"] == steps
    frames = python_frames(leak)
    lines = SCRIPT.read_text().splitlines()
    assert frames[1]["symbol"] == "Model.step"
    assert "features = alloc(size)" in lines[frames[1]["line"] - 1]
    assert 0.85 * size < leak["growth_bytes_per_step"] < 1.15 * size, leak
    scratch = [s for s in proc["sites"] if python_frames(s)[1:2] and
               "scratch = alloc" in lines[python_frames(s)[1]["line"] - 1]]
    assert len(scratch) == 1 and scratch[0]["verdict"] == "freed"


def test_a_reader_of_a_running_agent_names_python_frames(tmp_path):
    """snapshot reads the agent's pinned maps, the Python stacks among them, and names the
    frames from the living process, as the agent would."""
    from test_serve import Agent, pin_dir, reader_snapshot, reset
    pins = pin_dir()
    agent = Agent(pins)
    out = tmp_path / "stacks.json"
    proc = subprocess.Popen([str(PYTHON), str(SCRIPT), str(CUDART), "shapes-hold", str(out)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        expected = {int(k): v for k, v in json.loads(out.read_text()).items()}
        report = reader_snapshot(pins)
        [me] = [p for p in report["processes"] if p["pid"] == proc.pid]
        site = next(s for s in me["sites"] if s["alloc_bytes_total"] == 0x20000)
        assert [(f["file"], f["line"]) for f in python_frames(site)] == \
            [(w[0], w[1]) for w in expected[0x20000]]
    finally:
        proc.kill()
        proc.wait(10)
        agent.kill()
        reset(pins)
