"""Uprobe sessions (Linux 6.13+): the alloc shape's entry and return are one program
(session_alloc), whose entry spares a return with nothing to do its trap: a driver call nested
in the runtime's, a call of a process gpumem does not trace. The mock library says whether the
kernel armed a return probe for each call (GPUMEM_MOCK_SAY_RETURN_PROBES: its return address
replaced by the kernel's trampoline), on private copies of the libraries."""
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import GPUMEM, MOCK_LIB_DIR, RUN_TIMEOUT, WORKLOAD


def kernel_has_sessions():
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) >= (6, 13)


def tracers_of(libdir, but):
    """Pids other than but whose uprobe_multi links are on a file under libdir, and other
    gpumems with uprobe_multi links on any file: a system-wide gpumem attaches these copies
    when a process maps them and lets them go once none does, so that it may have armed a
    call's return and be gone from them by the time they are looked at."""
    pids = set()
    for fdinfo in Path("/proc").glob("[0-9]*/fdinfo/*"):
        try:
            text = fdinfo.read_text(errors="replace")
            paths = [line.split(":", 1)[1].strip() for line in text.splitlines()
                     if line.startswith("path:")]
            if paths and (any(p.startswith(f"{libdir}/") for p in paths) or
                          (fdinfo.parent.parent / "comm").read_text().strip() == "gpumem"):
                pids.add(int(fdinfo.parts[2]))
        except OSError:
            continue
    return pids - {but}


def said(path):
    """{(api, armed)} and their count from a mock's "return probe API yes|no" lines."""
    lines = [l.split()[2:] for l in Path(path).read_text().splitlines()
             if l.startswith("return probe ")]
    return sorted((api, armed == "yes") for api, armed in lines)


def armed_returns(env_extra):
    """gpumem -c runs one leak on private libraries, then an untraced process runs one on
    them too; what the mock said of each call's return probe, and gpumem's report."""
    with tempfile.TemporaryDirectory(prefix="gpumem-it-") as tmp:
        tmp = Path(tmp)
        libs = (tmp / "lib").resolve()
        shutil.copytree(MOCK_LIB_DIR, libs, symlinks=True)
        env = dict(os.environ, LD_LIBRARY_PATH=str(libs), GPUMEM_MOCK_SAY_RETURN_PROBES="1")
        env.pop("GPUMEM_UPROBE_SESSIONS", None)
        env.update(env_extra)
        # Before gpumem: a return probe armed now is another tracer's (a system-wide one
        # attaches to every CUDA library a process maps, these copies too).
        with open(tmp / "before", "wb") as err:
            subprocess.run([str(WORKLOAD), "leak", "1", "4096"], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=err, timeout=RUN_TIMEOUT)
        if any(armed for _, armed in said(tmp / "before")):
            pytest.skip("another tracer arms return probes on this test's libraries")
        done, out = tmp / "done", tmp / "report.json"
        script = (f'"{WORKLOAD}" leak 1 4096 >/dev/null 2>"{tmp}/traced" && touch "{done}" && '
                  f'while [ ! -e "{done}.end" ]; do sleep 0.05; done')
        gpumem = subprocess.Popen([str(GPUMEM), "snapshot", "--json", "-o", str(out), "-c",
                                   "/bin/sh", "-c", script], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + RUN_TIMEOUT
            while not done.exists():
                assert gpumem.poll() is None, gpumem.stderr.read().decode(errors="replace")
                assert time.monotonic() < deadline, "the traced leak never ended"
                time.sleep(0.05)
            # Not a target (-c traces the command's tree): the probes fire, nothing counts.
            with open(tmp / "untraced", "wb") as err:
                subprocess.run([str(WORKLOAD), "leak", "1", "4096"], env=env, check=True,
                               stdout=subprocess.DEVNULL, stderr=err, timeout=RUN_TIMEOUT)
            others = tracers_of(libs, gpumem.pid)
            (tmp / "done.end").touch()
            assert gpumem.wait(RUN_TIMEOUT) == 0, gpumem.stderr.read().decode(errors="replace")
        finally:
            if gpumem.poll() is None:
                gpumem.kill()
                gpumem.wait(10)
            gpumem.stderr.close()
        if others or any(armed for _, armed in said(tmp / "before")):
            pytest.skip(f"pids {sorted(others)} trace this test's libraries too: the return "
                        "probes they arm are theirs")
        report = json.loads(out.read_text())
        return said(tmp / "traced"), said(tmp / "untraced"), report


def leak_counts(report):
    [proc] = [p for p in report["processes"] if p["comm"] == "workload"]
    return proc["alloc_count"], proc["free_count"], proc["current_bytes"]


def test_a_nested_or_untraced_allocation_spares_its_return_trap():
    """A traced cudaMalloc has its return probe, the cuMemAlloc_v2 inside it none; an untraced
    process's calls have none at all; the accounting is the same exact one."""
    if not kernel_has_sessions():
        pytest.skip(f"kernel {platform.release()} has no uprobe sessions (6.13+)")
    traced, untraced, report = armed_returns({})
    allocs, frees, current = leak_counts(report)
    assert traced == sorted([("cuMemAlloc_v2", False)] * allocs + [("cudaMalloc", True)] * allocs)
    assert untraced == sorted([("cuMemAlloc_v2", False), ("cudaMalloc", False)] * allocs)
    assert (allocs, frees, current) == (2, 1, 4096)


def test_without_sessions_every_return_is_probed_and_counts_the_same():
    """GPUMEM_UPROBE_SESSIONS=0, as on kernels before 6.13: entry and return links, every
    allocation's return probed (nested, untraced), and the same numbers."""
    traced, untraced, report = armed_returns({"GPUMEM_UPROBE_SESSIONS": "0"})
    allocs, frees, current = leak_counts(report)
    both = sorted([("cuMemAlloc_v2", True), ("cudaMalloc", True)] * allocs)
    assert traced == both and untraced == both
    assert (allocs, frees, current) == (2, 1, 4096)
