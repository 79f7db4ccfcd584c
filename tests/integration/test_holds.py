"""Holds: gpumem pauses a process at its first mapping of an unattached CUDA library only when it
is this instance's own target and this instance is alive (a fresh heartbeat); what an ended
instance left paused, the next one to start resumes."""
import json
import os
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (GPUMEM, MOCK_LIB_DIR, TRACING_LINE, WORKLOAD_DL, LineReader, SystemWide,
                      Workload, find_proc)

HOLDS_PIN = Path("/sys/fs/bpf/gpumem_holds")


def fresh_copies(tmp_path):
    """Copies of the mock runtime and driver: files no gpumem has examined yet."""
    for name in ("libcudart.so.13", "libcuda.so.1"):
        shutil.copy2(MOCK_LIB_DIR / name, tmp_path / name)
    return tmp_path / "libcudart.so.13"


def state_of(pid):
    return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0].decode()


def start_gpumem(*args, out):
    proc = subprocess.Popen([str(GPUMEM), "snapshot", "--json", "-o", str(out), *map(str, args)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    err = LineReader(proc.stderr)
    LineReader(proc.stdout)
    err.wait_for(TRACING_LINE)
    return proc, err


def test_a_system_wide_gpumem_pauses_no_process(tmp_path):
    lib = fresh_copies(tmp_path)
    with SystemWide(hold=True) as gpumem:    # holds allowed, but it has no target of its own
        with Workload("--wait", "dlopen", lib, 4096, program=WORKLOAD_DL) as wl:
            wl.wait_for("ready")
            wl.release()
            wl.wait_for("waiting")
            wl.release()
            assert wl.finish() == 0
    assert gpumem.report["tracer"]["holds"] == 0


def test_an_own_target_is_held_until_attached_so_its_first_call_counts(tmp_path):
    lib = fresh_copies(tmp_path)
    with Workload("--wait", "dlopen", lib, 131072, program=WORKLOAD_DL) as wl:
        wl.wait_for("ready")
        with SystemWide("-p", wl.pid, hold=True) as gpumem:
            wl.release()
            wl.wait_for("waiting")
            wl.release()
            assert wl.wait_for("call ").split()[1:3] == ["cudaMalloc", "131072"]
            assert wl.finish() == 0
    proc = find_proc(gpumem.report, wl.pid)
    assert proc["current_bytes"] == 131072 and proc["alloc_count"] == 1
    assert gpumem.report["tracer"]["holds"] >= 1


def test_a_stopped_gpumem_holds_no_one_and_the_next_start_resumes_what_one_left(tmp_path):
    lib = fresh_copies(tmp_path)
    with Workload("--wait", "dlopen", lib, 4096, program=WORKLOAD_DL) as wl:
        wl.wait_for("ready")
        gpumem, _ = start_gpumem("-p", wl.pid, out=tmp_path / "a.json")
        try:
            gpumem.send_signal(signal.SIGSTOP)
            time.sleep(1.5)    # its heartbeat is stale now
            wl.release()
            wl.wait_for("waiting")
            wl.release()
            # It maps the new library while its gpumem cannot answer: never left paused.
            assert wl.finish(timeout=10) == 0
        finally:
            gpumem.kill()
            gpumem.wait(10)


@pytest.mark.skipif(not shutil.which("bpftool"), reason="bpftool is not installed")
def test_a_process_an_ended_gpumem_left_paused_runs_again_when_the_next_one_starts(tmp_path):
    # What a gpumem killed between its hold and its answer leaves behind: a stopped process and
    # its record in the shared map, naming a holder that is gone.
    gpumem, _ = start_gpumem("-d", 1, out=tmp_path / "a.json")     # creates the shared map
    gpumem.wait(30)
    assert HOLDS_PIN.exists()
    sleeper = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        os.kill(sleeper.pid, signal.SIGSTOP)
        deadline = time.time() + 5
        while state_of(sleeper.pid) != "T" and time.time() < deadline:
            time.sleep(0.05)
        assert state_of(sleeper.pid) == "T"
        key = struct.pack("<I", sleeper.pid).hex(" ").split()
        value = struct.pack("<IIQ", gone.pid, 0, 0).hex(" ").split()
        subprocess.run(["bpftool", "map", "update", "pinned", str(HOLDS_PIN), "key", "hex", *key,
                        "value", "hex", *value], check=True, timeout=10)
        gpumem, err = start_gpumem("-d", 1, out=tmp_path / "b.json")
        started = time.time()    # it is tracing: the resume came before, or comes within 1 s
        while state_of(sleeper.pid) == "T" and time.time() - started < 1:
            time.sleep(0.05)
        assert state_of(sleeper.pid) != "T"
        gpumem.wait(30)
        if not any(f"resumed PID {sleeper.pid}" in line for line in err.lines):
            # Tests share the host: another gpumem that started meanwhile may have been the
            # one to resume it. Then its record is gone from the shared map all the same.
            look = subprocess.run(["bpftool", "map", "lookup", "pinned", str(HOLDS_PIN), "key",
                                   "hex", *key], capture_output=True, text=True, timeout=10)
            assert look.returncode != 0, (err.lines, look.stdout)
        json.loads((tmp_path / "b.json").read_text())
    finally:
        sleeper.kill()
        sleeper.wait(10)
