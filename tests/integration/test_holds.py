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

from conftest import (GPUMEM, MOCK_LIB_DIR, TRACING_LINE, WORKLOAD, WORKLOAD_DL, LineReader,
                      SystemWide, Workload, find_proc, run_snapshot_c)

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


def plant_hold(pid, holder, time_ns):
    """A hold's record in the shared map, as a gpumem (holder) writes it when it pauses pid;
    returns the key, as bpftool takes it."""
    key = struct.pack("<I", pid).hex(" ").split()
    value = struct.pack("<IIQ", holder, 0, time_ns).hex(" ").split()
    subprocess.run(["bpftool", "map", "update", "pinned", str(HOLDS_PIN), "key", "hex", *key,
                    "value", "hex", *value], check=True, timeout=10)
    return key


def stopped_sleeper():
    sleeper = subprocess.Popen(["sleep", "30"])
    os.kill(sleeper.pid, signal.SIGSTOP)
    deadline = time.time() + 5
    while state_of(sleeper.pid) != "T" and time.time() < deadline:
        time.sleep(0.05)
    assert state_of(sleeper.pid) == "T"
    return sleeper


def ended_pid():
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


@pytest.mark.skipif(not shutil.which("bpftool"), reason="bpftool is not installed")
def test_a_running_gpumem_resumes_what_one_that_ended_meanwhile_left_paused(tmp_path):
    """A gpumem killed (or crashed) during a hold, while another runs: the running one looks
    for such holds every second, not only at its start."""
    gpumem, err = start_gpumem("-d", 8, "--no-hold", out=tmp_path / "a.json")
    sleeper = stopped_sleeper()
    try:
        plant_hold(sleeper.pid, ended_pid(), time.monotonic_ns())
        deadline = time.time() + 3
        while state_of(sleeper.pid) == "T" and time.time() < deadline:
            time.sleep(0.05)
        assert state_of(sleeper.pid) != "T", err.lines
    finally:
        sleeper.kill()
        sleeper.wait(10)
        gpumem.kill()
        gpumem.wait(10)


@pytest.mark.skipif(not shutil.which("bpftool"), reason="bpftool is not installed")
def test_a_pid_that_is_another_process_since_the_hold_is_not_resumed(tmp_path):
    """The held process was killed by its user while no gpumem answered, and its PID went to a
    process the user stopped on purpose: resuming that one would undo the user's stop. It
    started after the hold: its record goes, it stays stopped."""
    held_at = time.monotonic_ns()
    time.sleep(0.1)
    sleeper = stopped_sleeper()     # a process that started after the hold
    try:
        gpumem, err = start_gpumem("-d", 3, "--no-hold", out=tmp_path / "a.json")
        key = plant_hold(sleeper.pid, ended_pid(), held_at)
        time.sleep(2)
        assert state_of(sleeper.pid) == "T"
        gpumem.wait(30)
        look = subprocess.run(["bpftool", "map", "lookup", "pinned", str(HOLDS_PIN), "key",
                               "hex", *key], capture_output=True, text=True, timeout=10)
        assert look.returncode != 0, (err.lines, look.stdout)
    finally:
        sleeper.kill()
        sleeper.wait(10)


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
        key = plant_hold(sleeper.pid, gone.pid, time.monotonic_ns())
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


def holds_of_a_run(tmp_path, *wrap):
    """The holds a -c gpumem took over a run of one new library's allocation, wrapped."""
    lib = fresh_copies(tmp_path)
    run = run_snapshot_c([*wrap, WORKLOAD_DL, "dlopen", lib, 4096])
    assert run.returncode == 0, run.stderr
    return run.report["tracer"]["holds"]


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed")
def test_a_process_a_debugger_traces_is_never_paused(tmp_path):
    """A debugger sees every signal its process gets: a hold's SIGSTOP stops it in the
    debugger (gdb -batch ends the run there, and kills the program). Such a process is not
    held (its first calls on the new library may go unseen: late_attach_unheld)."""
    assert holds_of_a_run(tmp_path, "/bin/sh", "-c", '"$@"; true', "sh") >= 1    # the control
    assert holds_of_a_run(tmp_path, "strace", "-f", "-o", "/dev/null") == 0


@pytest.mark.skipif(not shutil.which("script"), reason="script (util-linux) is not installed")
def test_a_job_of_an_interactive_shell_is_never_paused(tmp_path):
    """A process on a terminal whose parent leads the terminal's session is a shell's job: a
    hold's stop would make the shell report it stopped, take the terminal back and run the
    user's next command. script(1) gives the shell a terminal of its own here."""
    def holds_under_script(d, command):
        d.mkdir()
        command = command.format(f"{WORKLOAD_DL} dlopen {fresh_copies(d)} 4096")
        run = run_snapshot_c(["script", "-qec", command, "/dev/null"])
        assert run.returncode == 0, run.stderr
        return run.report["tracer"]["holds"]

    # The control: the same program on the same terminal, a child of a shell that is not the
    # session's leader (a script's), is held.
    assert holds_under_script(tmp_path / "a", "sh -c '{}; true'; true") >= 1
    assert holds_under_script(tmp_path / "b", "{}; true") == 0


def test_a_process_held_while_gpumem_cannot_write_its_output_is_resumed(tmp_path):
    """trace's output not read (a pipe left full: `gpumem trace | less` on its first page)
    blocks the loop that answers holds. gpumem's watchdog resumes the processes it holds once
    the loop's heartbeat is older than holds are taken with, and says so."""
    lib = fresh_copies(tmp_path)
    done = tmp_path / "done"
    script = (f"{WORKLOAD} leak 3000 64 >/dev/null; {WORKLOAD_DL} dlopen {lib} 4096 >/dev/null; "
              f"touch {done}")
    gpumem = subprocess.Popen([str(GPUMEM), "trace", "--json", "-c", "/bin/sh", "-c", script],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20     # the output is not read meanwhile
        while not done.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert done.exists(), "the command did not end while gpumem's output was not read"
        out, err = gpumem.communicate(timeout=120)
    finally:
        gpumem.kill()
        gpumem.wait(10)
    assert gpumem.returncode == 0, err.decode(errors="replace")
    assert b"that the loop did not answer within" in err, err.decode(errors="replace")
