"""CPython frames: each interpreter found (Debian's python3.11 always; pyenv's 3.9-3.13 where
installed; GPUMEM_TEST_PYTHONS, colon-separated paths, adds more) calls the mock runtime through
ctypes; gpumem's Python frames must be what traceback.extract_stack() said at each allocation,
file, line and name; a planted leak is named at its line. Interpreters gpumem has no offsets
for (2.7, 3.6-3.8) must give native frames only, and say so."""
import glob
import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import (GPUMEM, MOCK_LIB_ARGS, MOCK_LIB_DIR, ROOT, RUN_TIMEOUT, WORKLOAD,
                      SystemWide, find_proc, run_snapshot_c)

SCRIPT = ROOT / "tests" / "workloads" / "pyalloc.py"
CUDART = MOCK_LIB_DIR / "libcudart.so.13"
MAX_FRAMES = 32     # GM_PY_MAX_FRAMES
MARKER = "[more Python frames]"
DEBIAN = "/usr/bin/python3.11"
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
SUPPORTED = [(3, 9), (3, 10), (3, 11), (3, 12), (3, 13)]
UNSUPPORTED = [(2, 7), (3, 6), (3, 7), (3, 8)]


def pyenv_python(major, minor):
    """The newest pyenv build of major.minor, or None."""
    found = sorted(glob.glob(str(PYENV / f"{major}.{minor}.*" / "bin" / f"python{major}.{minor}")))
    return found[-1] if found else None


def interpreter_params(versions, debian):
    params = [pytest.param(DEBIAN, id="debian-3.11",
                           marks=pytest.mark.skipif(not os.access(DEBIAN, os.X_OK),
                                                    reason=f"{DEBIAN} is not installed"))] \
        if debian else []
    for major, minor in versions:
        path = pyenv_python(major, minor)
        params.append(pytest.param(path, id=f"pyenv-{major}.{minor}", marks=pytest.mark.skipif(
            path is None, reason=f"no pyenv CPython {major}.{minor} under {PYENV}")))
    if debian:
        for path in filter(None, os.environ.get("GPUMEM_TEST_PYTHONS", "").split(":")):
            params.append(pytest.param(path, id=f"extra-{path}", marks=pytest.mark.skipif(
                not os.access(path, os.X_OK), reason=f"GPUMEM_TEST_PYTHONS: {path} not found")))
    return params


def python_frames(site):
    return [f for f in site["frames"] if f.get("lang") == "python"]


class Shapes:
    """One traced run of pyalloc.py's shapes under one interpreter, shared by the checks."""

    def __init__(self, python):
        with tempfile.TemporaryDirectory(prefix="gpumem-py-") as tmp:
            out = Path(tmp) / "stacks.json"
            run = run_snapshot_c([python, SCRIPT, CUDART, "shapes", out], gpumem_args=["-v"])
            assert run.returncode == 0, run.stderr
            written = json.loads(out.read_text())
        self.report, self.stderr = run.report, run.stderr
        self.version = tuple(written["version"])
        self.expected = {int(k): v for k, v in written["stacks"].items()}
        procs = [p for p in self.report["processes"] if p["comm"].startswith("python")]
        assert len(procs) == 1, self.report["processes"]
        # by size, where each shape has a site of its own (a site's one allocation); where
        # shapes share a site, two sums can be equal: all_sites has every one
        self.all_sites = procs[0]["sites"]
        self.sites = {s["alloc_bytes_total"]: s for s in self.all_sites}


@pytest.fixture(scope="module", params=interpreter_params(SUPPORTED, debian=True))
def shapes(request):
    shapes = Shapes(request.param)
    assert shapes.version in SUPPORTED, shapes.version
    lost = shapes.report["lost"]
    assert lost["python_mismatch"] == 0 and lost["python_refused"] == 0, shapes.stderr
    return shapes


@pytest.mark.parametrize("size,shape", [
    (0x10000, "nested functions"), (0x20000, "a method"), (0x30000, "a comprehension"),
    (0x40000, "a generator"), (0x50000, "a lambda"), (0x60000, "a second thread"),
])
def test_python_frames_equal_extract_stack(shapes, size, shape):
    site = shapes.sites[size]
    assert site["alloc_count"] == 1
    got = python_frames(site)
    want = shapes.expected[size]
    assert [(f["file"], f["line"]) for f in got] == [(w[0], w[1]) for w in want], shape
    for f, w in zip(got, want):
        assert f["symbol"].split(".")[-1] == w[2], (f, w)
    # The interpreter's own frames are folded away; the C below (ctypes' libffi) stays.
    assert not any(f["symbol"] == "_PyEval_EvalFrameDefault" for f in site["frames"])
    assert any(f["symbol"] == "ffi_call" for f in site["frames"][:got and 8])


def test_python_qualified_names(shapes):
    """co_qualname from 3.11; co_name before (no qualified names there). 3.12 inlines list
    comprehensions (PEP 709): the comprehension's line is in shapes() itself."""
    qual = shapes.version >= (3, 11)
    frames = {size: python_frames(shapes.sites[size]) for size in (0x20000, 0x30000, 0x50000,
                                                                   0x60000)}
    assert frames[0x20000][1]["symbol"] == ("Model.forward" if qual else "forward")
    assert frames[0x30000][1]["symbol"] == (
        "shapes" if shapes.version >= (3, 12) else
        "shapes.<locals>.<listcomp>" if qual else "<listcomp>")
    assert frames[0x50000][1]["symbol"] == ("shapes.<locals>.<lambda>" if qual else "<lambda>")
    assert frames[0x60000][2]["symbol"] == ("Thread.run" if qual else "run")


def test_python_recursion_deeper_than_the_limit_is_cut_and_says_so(shapes):
    got = python_frames(shapes.sites[0x70000])
    want = shapes.expected[0x70000]
    assert len(want) > MAX_FRAMES
    assert len(got) == MAX_FRAMES + 1
    assert [(f["file"], f["line"]) for f in got[:MAX_FRAMES]] == \
        [(w[0], w[1]) for w in want[:MAX_FRAMES]]
    assert got[-1]["symbol"] == MARKER and got[-1]["line"] is None


def test_python_lines_are_sites_of_their_own(shapes):
    # outer() and the thread both reach alloc() through middle(): one native stack shape,
    # still two sites, and every shape above is a site of its own.
    assert len(shapes.sites) == 7


@pytest.fixture(scope="module")
def spawn_lib(tmp_path_factory):
    """tests/workloads/native_thread.c built against the mock runtime."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build tests/workloads/native_thread.c")
    lib = tmp_path_factory.mktemp("native-thread") / "libnative_thread.so"
    built = subprocess.run([cc, "-O2", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o",
                            str(lib), str(ROOT / "tests" / "workloads" / "native_thread.c"),
                            f"-L{MOCK_LIB_DIR}", "-l:libcudart.so.13",
                            f"-Wl,-rpath,{MOCK_LIB_DIR}", "-lpthread"],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    return lib


@pytest.mark.parametrize("python", interpreter_params(SUPPORTED, debian=True))
def test_python_a_thread_python_never_saw_gets_native_frames_only(python, spawn_lib,
                                                                    tmp_path):
    out = tmp_path / "stacks.json"
    run = run_snapshot_c([python, SCRIPT, CUDART, "native-thread", out, spawn_lib])
    assert run.returncode == 0, run.stderr
    expected = {int(k): v for k, v in json.loads(out.read_text())["stacks"].items()}
    [proc] = [p for p in run.report["processes"] if p["comm"].startswith("python")]
    sites = {s["alloc_bytes_total"]: s for s in proc["sites"]}
    native = sites[0x80000]
    assert native["alloc_count"] == 1 and not python_frames(native)
    # Its stack is the native thread's (the library it ran in, libc's thread start); the
    # library was loaded late, so its name may be all a snapshot at exit has of it, and none
    # where the kernel's walk of its map at its end was refused (another task held its
    # mmap_lock throughout): then its address stands, and the loss is counted.
    named = "" if run.report["lost"]["module_maps_missed"] else "libnative_thread.so"
    assert [Path(f["module"] or "").name for f in native["frames"][:1]] == [named], \
        (native["frames"], run.report["lost"]["module_maps_missed"])
    assert any(f["symbol"] == "start_thread" for f in native["frames"]), native["frames"]
    # The process's Python frames stay on: the Python caller's site is named as ever.
    assert [(f["file"], f["line"]) for f in python_frames(sites[0x10000])] == \
        [(w[0], w[1]) for w in expected[0x10000]]
    assert run.report["lost"]["python_mismatch"] == 0


@pytest.mark.parametrize("python", interpreter_params([(3, 9), (3, 10)], debian=False))
def test_python_a_caller_pointer_whose_frame_would_wrap_ends_the_walk(python):
    """A frame whose caller pointer is the address space's last 8 bytes (its end, read
    frame_read bytes on, wraps past zero): no frame there, not the bytes of a window read
    elsewhere. The walk fails, and Python frames stop for the process, counted, as for any
    frame chain the offsets do not describe; the allocations are counted all the same."""
    run = run_snapshot_c([python, SCRIPT, CUDART, "wrapped-caller"])
    assert run.returncode == 0, run.stderr
    [proc] = [p for p in run.report["processes"] if p["comm"].startswith("python")]
    sites = {s["alloc_bytes_total"]: s for s in proc["sites"]}
    assert sites[0x30000]["alloc_count"] == 1 and sites[0x40000]["alloc_count"] == 1, sites
    assert run.report["lost"]["python_mismatch"] == 1, run.report["lost"]
    assert not python_frames(sites[0x30000]), sites[0x30000]["frames"]


@pytest.mark.parametrize("python", interpreter_params(UNSUPPORTED, debian=False))
def test_python_versions_without_offsets_give_native_frames_and_say_so(python):
    shapes = Shapes(python)
    assert shapes.report["lost"]["python_refused"] == 1
    assert shapes.report["lost"]["python_mismatch"] == 0
    major, minor = shapes.version
    assert f"Python {major}.{minor} has no offsets in this gpumem" in shapes.stderr
    # Without Python stacks in their keys, shapes that share a native stack share a site.
    assert sum(s["alloc_count"] for s in shapes.all_sites) == 7, \
        ([(s["alloc_count"], s["alloc_bytes_total"]) for s in shapes.all_sites],
         shapes.report["lost"], shapes.stderr)
    for site in shapes.all_sites:
        assert not python_frames(site) and site["frames"], site


def test_python_a_library_named_for_another_version_is_refused(tmp_path):
    """3.9 and 3.10 carry no Py_Version: the file's name says which, and its exports must
    agree. 3.10's libpython under 3.9's name would be read with 3.9's frame layout, so it is
    refused (native frames only), never named wrong."""
    python = pyenv_python(3, 10)
    if python is None:
        pytest.skip(f"no pyenv CPython 3.10 under {PYENV}")
    lib = Path(python).parent.parent / "lib" / "libpython3.10.so.1.0"
    (tmp_path / "libpython3.9.so.1.0").write_bytes(lib.read_bytes())
    # The executable's runpath names its own lib directory: the loader is told first.
    (tmp_path / "libpython3.10.so.1.0").symlink_to(tmp_path / "libpython3.9.so.1.0")
    out = tmp_path / "stacks.json"
    run = run_snapshot_c([python, SCRIPT, CUDART, "shapes", out], gpumem_args=["-v"],
                         env={"LD_LIBRARY_PATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert "its exports are not those of the version its name says" in run.stderr
    assert run.report["lost"]["python_refused"] == 1
    [proc] = [p for p in run.report["processes"] if p["comm"].startswith("python")]
    assert sum(s["alloc_count"] for s in proc["sites"]) == 7
    assert not any(python_frames(s) for s in proc["sites"])


@pytest.mark.parametrize("python", interpreter_params(SUPPORTED, debian=True))
def test_python_leak_named_at_the_line_of_the_append(tmp_path, python):
    out = tmp_path / "leaks.json"
    steps, size = 20, 4096
    done = subprocess.run([str(GPUMEM), "leaks", "--json", "-o", str(out), "-c", python,
                           str(SCRIPT), str(CUDART), "leak", str(steps), "150", str(size)],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    reports = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    proc = reports[-1]["processes"][0]
    leak = proc["sites"][0]
    assert leak["verdict"] == "growing" and leak["current_allocs"] == steps
    frames = python_frames(leak)
    lines = SCRIPT.read_text().splitlines()
    assert frames[1]["symbol"].split(".")[-1] == "step"
    assert "features = alloc(size)" in lines[frames[1]["line"] - 1]
    assert 0.85 * size < leak["growth_bytes_per_step"] < 1.15 * size, leak
    scratch = [s for s in proc["sites"] if python_frames(s)[1:2] and
               "scratch = alloc" in lines[python_frames(s)[1]["line"] - 1]]
    assert len(scratch) == 1 and scratch[0]["verdict"] == "freed"


def test_a_reader_of_a_running_agent_names_python_frames(tmp_path):
    """snapshot reads the agent's pinned maps, the Python stacks among them, and names the
    frames from the living process, as the agent would."""
    from test_serve import Agent, pin_dir, reader_snapshot, reset, wait_until
    if not os.access(DEBIAN, os.X_OK):
        pytest.skip(f"{DEBIAN} is not installed")
    pins = pin_dir()
    agent = Agent(pins)
    out = tmp_path / "stacks.json"
    proc = subprocess.Popen([DEBIAN, str(SCRIPT), str(CUDART), "shapes-hold", str(out)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def warm_named():
        """The agent walks the process's Python frames: its warm() pairs have them."""
        mine = [p for p in reader_snapshot(pins)["processes"] if p["pid"] == proc.pid]
        return any(f.get("symbol") == "warm" for p in mine for s in p["sites"]
                   for f in python_frames(s))

    try:
        # The agent examines the interpreter when the process execs; the process does not
        # wait for it (nothing new is mapped: the runtime is known), so on a loaded host its
        # first calls can come before. The shapes start once the agent names its lines.
        wait_until(warm_named, timeout=30, what="the agent to walk the process's Python frames")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ready"
        expected = {int(k): v for k, v in json.loads(out.read_text())["stacks"].items()}
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


def test_an_interpreter_that_never_allocates_is_not_a_loss():
    """A refusal counts in python_refused only for a process that allocates: an unsupported
    interpreter the traced command runs, which opens the CUDA runtime (so gpumem examines it)
    but never allocates, is said with -v and loses nothing; a -c run's loss counters stay
    zero."""
    python = pyenv_python(3, 8)
    if python is None:
        pytest.skip(f"no pyenv CPython 3.8 under {PYENV}")
    # gpumem examines it from /proc when the open's record arrives, which on a loaded host can
    # be long after the open: the interpreter stays until gpumem has said so (or 30 s). Its
    # libpython is mapped after exec, so the open is what shows it; the runtime opened is a
    # copy of its own, since a library gpumem already knows (one a neighbour on a shared host
    # has mapped) makes no record.
    with tempfile.TemporaryDirectory(prefix="gpumem-it-") as tmp:
        said = Path(tmp) / "stderr"
        cudart = Path(tmp) / CUDART.name
        shutil.copy(CUDART, cudart)
        opens = (f"import ctypes, time; ctypes.CDLL('{cudart}'); "
                 f"end = time.time() + 30\n"
                 f"while time.time() < end and b'has no offsets' not in "
                 f"open('{said}', 'rb').read(): time.sleep(0.05)")
        out = Path(tmp) / "report.json"
        with open(said, "wb") as err:
            done = subprocess.run(
                [str(GPUMEM), "snapshot", "--json", "-o", str(out), "-v", "-c", "/bin/sh", "-c",
                 f'"{python}" -c "{opens}" && exec "{WORKLOAD}" reuse 4096'],
                stdout=subprocess.DEVNULL, stderr=err, timeout=RUN_TIMEOUT + 30)
        stderr = said.read_text(errors="replace")
        assert done.returncode == 0, stderr
        assert "has no offsets in this gpumem" in stderr    # said at once, with -v
        report = json.loads(out.read_text())
    assert report["lost"]["python_refused"] == 0
    [proc] = [p for p in report["processes"] if p["comm"] == "workload"]
    assert proc["alloc_count"] == 2


MANY_STACKS = """
import ctypes, sys
rt = ctypes.CDLL(sys.argv[1])
ptr = ctypes.c_void_p()
def alloc():
    assert rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(64)) == 0
    assert rt.cudaFree(ptr) == 0
kept = []     # each code object lives on: its address is never another's
for i in range(int(sys.argv[2])):
    space = {"alloc": alloc}
    exec(compile(f"def f():\\n    alloc()\\n", f"<f{i}>", "exec"), space)
    kept.append(space["f"])
    space["f"]()
"""


def test_python_stacks_past_what_a_process_names_are_counted():
    """4,200 distinct Python stacks (each from a code object of its own): the first 4,096 are
    named, each one after that is counted, never silently shown as the interpreter's frames."""
    if not Path(DEBIAN).exists():
        pytest.skip(f"{DEBIAN} is missing (Debian's python3)")
    run = run_snapshot_c([DEBIAN, "-c", MANY_STACKS, CUDART, 4200])
    assert run.returncode == 0, run.stderr
    lost = run.report["lost"]
    (p,) = [p for p in run.report["processes"] if p["alloc_count"]]
    assert p["alloc_count"] == 4200, p["alloc_count"]
    assert lost["python_stack_errors"] == 0, lost
    # Each allocation's stack is new: those past the 4,096 named (a few of the process's own
    # stacks, its start-up's, may be among them) are counted.
    assert 4200 - 4096 - 8 <= lost["python_stacks_unnamed"] <= 4200 - 4096, lost


FIFO_AT_ITS_PATH = """
import ctypes, os, sys
os.unlink(sys.executable)
os.mkfifo(sys.executable)       # what lies at its path now: a FIFO, opened, would never return
print("ready", flush=True)
rt = ctypes.CDLL(sys.argv[1])
ptr = ctypes.c_void_p()
for size in (4096, 12288):      # the first call has gpumem examine it; the second, walked
    sys.stdin.readline()
    assert rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0
    print("done", flush=True)
sys.stdin.readline()
"""


def test_an_interpreter_whose_path_now_holds_a_fifo_is_read_from_its_mapping(tmp_path):
    """A process controls what lies at the path its interpreter was mapped from: one that
    deletes its python and puts a FIFO there, then allocates under a gpumem started after,
    is examined (at its first call) through the very file it maps (/proc/PID/map_files):
    gpumem neither blocks opening the FIFO (it would, for ever, SIGINT and all) nor reads
    another file, and names its next allocation's Python line."""
    if not Path(DEBIAN).exists():
        pytest.skip(f"{DEBIAN} is missing (Debian's python3)")
    python = tmp_path / "python3.11"
    shutil.copy(DEBIAN, python)
    proc = subprocess.Popen([str(python), "-c", FIFO_AT_ITS_PATH, str(CUDART)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        assert stat.S_ISFIFO(os.lstat(python).st_mode)
        with SystemWide("-v", "-p", proc.pid, *MOCK_LIB_ARGS) as gpumem:
            for said in (f"gpumem: PID {proc.pid}: Python 3.11 frames from {python}", None):
                proc.stdin.write("go\n")
                proc.stdin.flush()
                assert proc.stdout.readline() == "done\n"
                if said:
                    gpumem.stderr.wait_for(said, 30)
            gpumem.stop()       # within its stop timeout: it did not block on the FIFO
        mine = find_proc(gpumem.report, proc.pid)
        assert mine["alloc_count"] == 2
        [walked] = [s for s in mine["sites"] if s["alloc_bytes_total"] == 12288]
        assert [(f["file"], f["line"]) for f in python_frames(walked)] == [("<string>", 10)]
    finally:
        proc.kill()
        proc.wait(10)


ONE_ALLOC = """
import ctypes, sys
rt = ctypes.CDLL(sys.argv[1])
ptr = ctypes.c_void_p()
def alloc():
    assert rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(4096)) == 0
alloc()
"""


def test_an_interpreter_file_rewritten_in_place_is_read_again(tmp_path):
    """gpumem reads an interpreter's symbols once per file, not at every exec: a file is known
    by its device and inode and, lest what it found be another file's, by its size and times.
    A program named python3.11 that is no interpreter (a copy of sleep) is examined at its exec;
    the same inode, then rewritten as Debian's python, gives its allocation Python frames."""
    if not Path(DEBIAN).exists():
        pytest.skip(f"{DEBIAN} is missing (Debian's python3)")
    python = tmp_path / "python3.11"
    shutil.copy("/bin/sleep", python)
    inode = python.stat().st_ino
    script = (f'"{python}" 0.5 && cat "{DEBIAN}" > "{python}" && '
              f'exec "{python}" -c "$1" "{CUDART}"')
    run = run_snapshot_c(["/bin/sh", "-c", script, "sh", ONE_ALLOC])
    assert run.returncode == 0, run.stderr
    assert python.stat().st_ino == inode
    [proc] = [p for p in run.report["processes"] if p["alloc_count"]]
    [site] = proc["sites"]
    assert [(f["file"], f["line"]) for f in python_frames(site)] == [("<string>", 6),
                                                                     ("<string>", 7)], site
