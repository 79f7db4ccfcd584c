"""Integration tests: real BPF, real uprobes, the mock CUDA libraries and the test workloads.

Every helper bounds each subprocess with a timeout, so a hang fails a test instead of blocking
the suite. Tests import the helpers with `from conftest import ...`.
"""
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

# top -b takes its width from COLUMNS, as procps does: the tests that read a layout set it.
os.environ.pop("COLUMNS", None)

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
GPUMEM = BUILD / "gpumem"
WORKLOAD = BUILD / "tests" / "workload"
WORKLOAD_DL = BUILD / "tests" / "workload_dl"
SAMEPID = BUILD / "tests" / "samepid"    # two processes on one pid, back to back
MAPLOCK = BUILD / "tests" / "maplock"    # runs a program while its memory map is locked
MOCK_LIB_DIR = BUILD / "tests" / "lib"
REAL_CUDART_PROG = BUILD / "tests" / "real_cudart"
STATIC_CUDA_PROG = BUILD / "tests" / "static_cuda"
REAL_CUDART_LIB = Path("/usr/local/cuda/lib64/libcudart.so.13")
# NVIDIA's real driver, NVML and CUDA 11.8's runtime from Debian non-free, unpacked by
# scripts/nvidia.sh (`make nvidia`), which leaves the reason in unavailable when it cannot.
NVIDIA_DIR = BUILD / "nvidia"
NVIDIA_LIB_DIR = NVIDIA_DIR / "usr" / "lib" / "x86_64-linux-gnu"
REAL_LIBCUDA = NVIDIA_LIB_DIR / "libcuda.so.1"
REAL_NVML = NVIDIA_LIB_DIR / "libnvidia-ml.so.1"
REAL_CUDART11_LIB = NVIDIA_LIB_DIR / "libcudart.so.11.0"
REAL_NVIDIA_PROG = BUILD / "tests" / "real_nvidia"
# The mock NVML (tests/mock/nvml.c) alone in its directory: LD_LIBRARY_PATH=MOCK_NVML_DIR makes
# gpumem load it, with the devices GPUMEM_MOCK_NVML describes.
MOCK_NVML_DIR = BUILD / "tests" / "lib-nvml"
PROBES_C = ROOT / "userspace" / "probes" / "table.c"

TRACING_LINE = "gpumem: tracing:"
RUN_TIMEOUT = 60
START_TIMEOUT = 30
STOP_TIMEOUT = 30
LINE_TIMEOUT = 30

# The GPU-side kinds a process's current_bytes adds up; host is kept apart.
GPU_KINDS = ("device", "managed", "async", "vmm")


def bpf_unavailable_reason():
    """Why real BPF cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "integration tests load BPF programs and need root (run them as root)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "the kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing)"
    for path in (GPUMEM, WORKLOAD, WORKLOAD_DL, SAMEPID, MOCK_LIB_DIR / "libcudart.so.13",
                 MOCK_LIB_DIR / "libcuda.so.1"):
        if not path.exists():
            return f"{path} is missing: run `make all test-progs` first"
    return None


@pytest.fixture(scope="session", autouse=True)
def bpf_environment():
    reason = bpf_unavailable_reason()
    if reason:
        pytest.skip(reason)


class LineReader:
    """Collects a stream's lines on a thread so callers can wait for one with a timeout."""

    def __init__(self, stream):
        self.lines = []
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream):
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, prefix, timeout=LINE_TIMEOUT):
        """Returns the first unread line that starts with prefix; fails on timeout or EOF."""
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line starting {prefix!r} within {timeout}s; "
                                     f"got {self.lines!r}") from None
            if line is None:
                raise AssertionError(f"stream ended before a line starting {prefix!r}; "
                                     f"got {self.lines!r}")
            if line.startswith(prefix):
                return line

    def join(self, timeout=10):
        self._thread.join(timeout)


def parse_calls(lines):
    """The workload's `call API SIZE 0xADDR RC` lines as dicts."""
    calls = []
    for line in lines:
        parts = line.split()
        if len(parts) == 5 and parts[0] == "call":
            calls.append({"api": parts[1], "size": int(parts[2]), "addr": parts[3],
                          "rc": int(parts[4])})
    return calls


class Workload:
    """A workload started in the background with its stdin and stdout held by the test."""

    def __init__(self, *args, program=WORKLOAD, env=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen([str(program), *map(str, args)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env)
        self.pid = self.proc.pid
        self.stdout = LineReader(self.proc.stdout)
        self.stderr = LineReader(self.proc.stderr)

    def wait_for(self, prefix, timeout=LINE_TIMEOUT):
        return self.stdout.wait_for(prefix, timeout)

    def release(self):
        """Sends the line the workload waits for."""
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def finish(self, timeout=RUN_TIMEOUT):
        """Releases the workload if it still waits, and returns its exit status."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = self.proc.wait(timeout)
        self.stdout.join()
        self.stderr.join()
        return rc

    @property
    def calls(self):
        return parse_calls(self.stdout.lines)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


class Run:
    """What one `gpumem ... -c CMD` run left: the parsed report and both processes' output."""

    def __init__(self, report, returncode, stdout, stderr):
        self.report = report
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def __iter__(self):
        return iter((self.report, self.returncode))

    @property
    def calls(self):
        return parse_calls(self.stdout.splitlines())


def _run_c(mode, args, env, gpumem_args, timeout, parse):
    full_env = dict(os.environ)
    full_env.update(env or {})
    with tempfile.TemporaryDirectory(prefix="gpumem-it-") as tmp:
        out = Path(tmp) / "report.json"
        cmd = [str(GPUMEM), mode, "--json", "-o", str(out), *gpumem_args, "-c",
               *map(str, args)]
        done = subprocess.run(cmd, capture_output=True, env=full_env, timeout=timeout)
        text = out.read_text() if out.exists() else ""
    stderr = done.stderr.decode(errors="replace")
    assert text, f"{cmd} wrote no report (exit {done.returncode}); stderr: {stderr}"
    return Run(parse(text), done.returncode, done.stdout.decode(errors="replace"), stderr)


def run_snapshot_c(args, env=None, gpumem_args=(), timeout=RUN_TIMEOUT):
    """`gpumem snapshot --json -c ARGS`: returns a Run that unpacks to (report, exit code)."""
    return _run_c("snapshot", args, env, gpumem_args, timeout, json.loads)


def run_trace_c(args, env=None, gpumem_args=(), timeout=RUN_TIMEOUT):
    """`gpumem trace --json -c ARGS`: returns a Run whose report is the list of events."""
    return _run_c("trace", args, env, gpumem_args, timeout, parse_trace)


def parse_trace(text):
    """The events of trace --json, without its loss lines ({"event": "lost"}, checked in
    test_hardening.py)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [line for line in lines if line.get("event") != "lost"]


# Attach the mock runtime and driver at start-up: a workload started later is then traced
# from its first call without gpumem having to hold it.
MOCK_LIB_ARGS = ("--lib", str(MOCK_LIB_DIR / "libcudart.so.13"),
                 "--lib", str(MOCK_LIB_DIR / "libcuda.so.1"))


class SystemWide:
    """gpumem started in the background (system-wide, or with -p), ready once it says it is
    tracing; leaving the block sends SIGINT and parses the report into .report.

    It runs with --no-hold unless hold=True: a hold pauses any process on the host that maps a
    CUDA library gpumem has not seen, other users' included, so only a test of holding holds.
    """

    def __init__(self, *gpumem_args, mode="snapshot", hold=False, start_timeout=START_TIMEOUT,
                 stop_timeout=STOP_TIMEOUT, env=None):
        self.mode = mode
        self.env = env      # added to gpumem's environment (LD_LIBRARY_PATH=MOCK_NVML_DIR)
        self.gpumem_args = [str(a) for a in gpumem_args]
        if not hold:
            self.gpumem_args.insert(0, "--no-hold")
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.report = None
        self.returncode = None
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid

    def __enter__(self):
        self._tmp = tempfile.mkdtemp(prefix="gpumem-it-")
        self.out = Path(self._tmp) / "report.json"
        cmd = [str(GPUMEM), self.mode, "--json", "-o", str(self.out), *self.gpumem_args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=dict(os.environ, **(self.env or {})))
        self.stderr = LineReader(self.proc.stderr)
        self.stdout = LineReader(self.proc.stdout)
        try:
            self.stderr.wait_for(TRACING_LINE, self.start_timeout)
        except BaseException:
            self._kill()
            raise
        return self

    def stop(self):
        """SIGINT, wait, parse: what leaving the block does; callable earlier."""
        if self.returncode is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.returncode = self.proc.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise AssertionError(f"gpumem ignored SIGINT for {self.stop_timeout}s")
        self.stderr.join()
        self.stdout.join()
        text = self.out.read_text() if self.out.exists() else ""
        assert text, (f"gpumem wrote no report (exit {self.returncode}); "
                      f"stderr: {self.stderr.lines}")
        self.report = parse_trace(text) if self.mode == "trace" else json.loads(text)

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __exit__(self, exc_type, *exc):
        try:
            if exc_type is None:
                self.stop()
            else:
                self._kill()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)


def find_proc(report, pid):
    """The report's entry for pid; fails the test if the pid is absent."""
    found = [p for p in report["processes"] if p["pid"] == pid]
    assert len(found) == 1, (f"pid {pid} appears {len(found)} times; processes: "
                             f"{[(p['pid'], p['comm']) for p in report['processes']]}")
    return found[0]


def has_proc(report, pid):
    return any(p["pid"] == pid for p in report["processes"])


def site_by_symbol(proc, name):
    """The one site whose innermost frame (the CUDA API's caller) is the function name."""
    found = [s for s in proc["sites"] if s["frames"] and s["frames"][0]["symbol"] == name]
    assert len(found) == 1, (f"{len(found)} sites called from {name}; sites called from: "
                             f"{[s['frames'][0]['symbol'] if s['frames'] else None for s in proc['sites']]}")
    return found[0]


def skip_if_end_map_refused(report):
    """Skips when the kernel refused its walk of a process's map at the process's end (another
    task held its mmap_lock; a host's other tracers make it happen now and then): frames in
    libraries loaded after gpumem last read the maps then show addresses, counted in
    lost.module_maps_missed, and what a test asserts of their names cannot hold."""
    missed = report["lost"]["module_maps_missed"]
    if missed:
        pytest.skip(f"the kernel refused the walk of {missed} ended process(es)' maps "
                    f"(mmap_lock held by another task): module_maps_missed {missed}")


def oom_lines(text):
    """oom --json's stream: its failures, and the loss line that must end it (final)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines and lines[-1]["event"] == "lost" and lines[-1]["final"] is True, lines[-1:]
    assert all(l["event"] in ("alloc_failed", "lost") for l in lines), lines
    # A loss line before the end says a loss: one with every counter at zero says nothing.
    assert all(any(l["lost"].values()) for l in lines[:-1] if l["event"] == "lost"), lines
    return [l for l in lines if l["event"] == "alloc_failed"], lines[-1]


def assert_nothing_lost(report):
    """Every loss counter is zero (unknown frees included).

    The counters are the run's, over every process it traced: use it only on a run restricted
    to the test's own processes (-c, -p). Another program on the host can make a system-wide
    run count unknown frees (it freed what it allocated before gpumem started)."""
    lost = {k: v for k, v in report["lost"].items() if v}
    assert lost == {}, f"lost counters not zero: {lost}"


def nvidia_unavailable_reason():
    """Why the tests cannot use NVIDIA's Debian packages, or None when they are unpacked."""
    if not REAL_NVIDIA_PROG.exists():
        return f"{REAL_NVIDIA_PROG} is missing: run `make test-progs` first"
    why = NVIDIA_DIR / "unavailable"
    if why.exists():
        return f"NVIDIA's Debian packages could not be fetched: {why.read_text().strip()}"
    for lib in (REAL_LIBCUDA, REAL_NVML, REAL_CUDART11_LIB):
        if not lib.exists():
            return f"{lib} is missing: run `make nvidia` (scripts/nvidia.sh) first"
    return None


def probe_table(layer):
    """The symbols of the probe table's rows of layer ("runtime" or "driver"), in its order,
    read from userspace/probes/table.c: what gpumem probes, whoever adds rows."""
    tag = {"runtime": "RT", "driver": "DRV"}[layer]
    rows = re.findall(r'\{\s*"(\w+)",\s*(RT|DRV)\s*,', PROBES_C.read_text())
    return [symbol for symbol, row_layer in rows if row_layer == tag]


def elf_exports(path):
    """The functions an ELF file exports (its defined dynamic symbols), by `nm -D`."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWi":
            names.add(parts[2].split("@")[0])
    return names


def attached_probes(report, path):
    """What a snapshot report says gpumem attached in the file at path (by device and inode),
    or None when it did not attach it."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    found = [f for f in report["tracer"]["files"] if f["dev"] == dev and f["ino"] == st.st_ino]
    assert len(found) <= 1, f"{path} listed {len(found)} times: {report['tracer']['files']}"
    return found[0]["probes"] if found else None


def late_attached_files(gpumem, pid):
    """The names of the CUDA files a `-v` SystemWide run says it attached after start-up
    because process pid mapped or exec'd them (the tracer's late_attaches counts every
    process's)."""
    mark = f"(PID {pid}: "
    return sorted(line.split(mark, 1)[1].rstrip(")") for line in gpumem.stderr.lines
                  if "attached a new CUDA file" in line and mark in line)


def lines_about(gpumem, pid):
    """What a `-v` SystemWide run said about process pid (for assertion messages)."""
    return [line for line in gpumem.stderr.lines if f"PID {pid}" in line or f"/{pid}/" in line]


# PyTorch tensors: Debian's CPython 3.11 runs tests/workloads/tensors.py on the mock caching
# allocator (built where <sys/sdt.h> is: systemtap-sdt-dev).
TENSOR_PYTHON = Path("/usr/bin/python3")
TENSOR_SCRIPT = ROOT / "tests" / "workloads" / "tensors.py"
C10_LIB = MOCK_LIB_DIR / "libc10_cuda.so"
TENSOR_SKIPS = [
    pytest.mark.skipif(not C10_LIB.exists(),
                       reason=f"{C10_LIB} missing (needs systemtap-sdt-dev)"),
    pytest.mark.skipif(
        subprocess.run([str(TENSOR_PYTHON), "-c",
                        "import sys; assert sys.version_info[:2] == (3, 11)"],
                       capture_output=True).returncode != 0,
        reason="needs Debian's /usr/bin/python3, CPython 3.11"),
]


# A library written in place (cp over it keeps the inode): version 1, then version 2 whose code
# lies where version 1's cudaMalloc and cudaFree were, and a program that calls it.
REWRITTEN_V1 = r"""
#include <stdlib.h>
int cudaMalloc(void **p, size_t n) { *p = malloc(n); return 0; }
int cudaFree(void *p) { free(p); return 0; }
"""
# The same API, its code where version 1's cudaMalloc and cudaFree were: a probe left at their
# old offsets fires in the middle of mix().
REWRITTEN_V2 = r"""
#include <stdlib.h>
__attribute__((noinline)) long mix(long a, long b)
{
	long r = 0;

	for (long i = 0; i < a; i++)
		r = r * 31 + (b ^ i) + (i << 3);
	return r;
}
int cudaMalloc(void **p, size_t n) { *p = malloc(n); return 0; }
int cudaFree(void *p) { free(p); return 0; }
"""
REWRITTEN_CALLER = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	void *h = dlopen(argv[1], RTLD_NOW);
	int (*alloc)(void **, unsigned long) = h ? dlsym(h, "cudaMalloc") : NULL;
	long (*mix)(long, long) = h ? dlsym(h, "mix") : NULL;
	void *p = NULL;

	if (!alloc || alloc(&p, 4096))
		return 1;
	printf("mix %ld\n", mix ? mix(1000, 7) : 0);
	if (argc > 2) {		/* "hold": until its standard input ends */
		fflush(stdout);
		while (getchar() != EOF)
			;
	}
	return 0;
}
"""


def rewritten_library(d):
    """A library to write in place: d/lib/libcudart.so.13 as version 1, with version 2 and the
    caller beside it (build_rewritten). Skips beside another gpumem, whose probes on the file
    go in a race with the process it does not hold."""
    neighbour = another_gpumem()
    if neighbour:
        pytest.skip(f"gpumem {neighbour} runs beside: its probes on this file go in a race with "
                    "the process it does not hold (known-gaps.md)")
    v1, v2, caller = build_rewritten(d)
    lib = d / "lib" / "libcudart.so.13"
    lib.parent.mkdir()
    shutil.copy(v1, lib)
    return lib, v2, caller


def build_rewritten(d):
    """Builds the two versions (d/v1.so, d/v2.so) and the caller (d/caller) in directory d."""
    for name, src in (("v1.so", REWRITTEN_V1), ("v2.so", REWRITTEN_V2)):
        (d / f"{name}.c").write_text(src)
        subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(d / name),
                        str(d / f"{name}.c")], check=True)
    (d / "caller.c").write_text(REWRITTEN_CALLER)
    subprocess.run(["cc", "-O2", "-o", str(d / "caller"), str(d / "caller.c"), "-ldl"],
                   check=True)
    return d / "v1.so", d / "v2.so", d / "caller"


def another_gpumem():
    """The pid of a gpumem already running on the host (a shared host's neighbour), or None."""
    found = subprocess.run(["pgrep", "-x", "gpumem"], capture_output=True, text=True)
    return found.stdout.split()[0] if found.returncode == 0 else None
