"""Hardening: what a hostile user or a careless operator can hand gpumem. The report never goes
through a symlink, a write error is an error, trace --json says what it lost, and a corrupt
--lib is called corrupt."""
import json
import os
import signal
import subprocess
from pathlib import Path

from conftest import GPUMEM, MAPLOCK, WORKLOAD, MOCK_LIB_DIR, oom_lines, run_snapshot_c

TIMEOUT = 60


def run(*args, cwd=None):
    done = subprocess.run([str(GPUMEM), *map(str, args)], capture_output=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL, cwd=cwd)
    return done.returncode, done.stderr.decode(errors="replace").splitlines()


def error_lines(stderr):
    return [line for line in stderr if not line.startswith("gpumem: tracing:")]


def test_output_never_follows_a_symlink_and_leaves_its_target_untouched(tmp_path):
    target = tmp_path / "secret"
    target.write_text("keep me\n")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    rc, stderr = run("snapshot", "--json", "-o", link, "-c", "true")
    assert rc == 1
    assert len(stderr) == 1 and "symbolic link" in stderr[0], stderr
    assert target.read_text() == "keep me\n"


def test_a_report_that_cannot_be_written_is_an_error():
    rc, stderr = run("snapshot", "-o", "/dev/full", "-c", WORKLOAD, "leak", 2, 4096)
    assert rc == 1
    assert error_lines(stderr) == [
        "gpumem: cannot write the report to /dev/full: No space left on device"], stderr


def test_trace_json_ends_with_its_loss_counters(tmp_path):
    out = tmp_path / "trace.json"
    rc, stderr = run("trace", "--json", "-o", out, "--ringbuf-mb", 1, "-c", WORKLOAD,
                     "threads", 2, 20000, 4096)
    assert rc == 0, stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    losses = [line for line in lines if line["event"] == "lost"]
    assert losses and losses[-1]["final"] is True, lines[-3:]
    assert lines[-1] is losses[-1]
    assert all(any(line["lost"].values()) for line in losses[:-1]), losses   # each says a loss
    calls = sum(1 for line in lines if line["event"] in ("alloc", "free"))
    # 2 threads x 20,000 allocations and frees, and one allocation each thread keeps: each one
    # is in the stream or counted lost.
    assert calls + losses[-1]["lost"]["ringbuf_dropped"] >= 2 * 2 * 20000 + 2
    assert calls <= 2 * 2 * 20000 + 2


def test_oom_json_ends_with_its_loss_counters_and_text_with_its_loss_line(tmp_path):
    """--max-allocs 64 (128 slots) for 200 kept allocations: no failure, but the stream says
    what its tables could not keep, in JSON as its last line, in text after the count."""
    out = tmp_path / "oom.json"
    rc, stderr = run("oom", "--json", "-o", out, "--max-allocs", 64, "-c", WORKLOAD, "leak", 200,
                     4096)
    assert rc == 0, stderr
    failures, lost = oom_lines(out.read_text())
    assert failures == [] and lost["lost"]["alloc_map_full"] > 0, lost
    # Nothing lost over 3 s of steps (each second checked): the final line alone, all zero.
    rc, stderr = run("oom", "--json", "-o", out, "-c", WORKLOAD, "steps", 30, 100, 4096)
    assert rc == 0, stderr
    failures, lost = oom_lines(out.read_text())
    assert failures == [], failures
    # A loss line only where a counter moved (another program's CUDA file not attached may
    # move one, system-wide): never one of zeros, nor one that repeats the line before.
    said = [json.loads(line)["lost"] for line in out.read_text().splitlines()]
    assert said[-1] == lost["lost"], said
    for before, now in zip([dict.fromkeys(said[0], 0)] + said, said[:-1]):
        assert any(now[k] > before[k] for k in now), said
    text = tmp_path / "oom.txt"
    rc, stderr = run("oom", "-o", text, "--max-allocs", 64, "-c", WORKLOAD, "leak", 200, 4096)
    assert rc == 0, stderr
    tail = text.read_text().splitlines()[-2:]
    assert tail[0] == "0 failed allocations" and tail[1].startswith("lost: alloc_map_full="), tail


def test_record_says_on_stderr_what_its_recording_lost(tmp_path):
    """The recording keeps its losses; the run that made it says them too, the same numbers."""
    db = tmp_path / "r.db"
    rc, stderr = run("record", "-o", db, "--max-allocs", 64, "-c", WORKLOAD, "leak", 200, 4096)
    assert rc == 0, stderr
    lost = json.loads(subprocess.run([GPUMEM, "report", db, "--json"], capture_output=True,
                                     text=True, check=True, timeout=TIMEOUT).stdout)["lost"]
    said = [line for line in stderr if line.startswith("lost: ")]
    assert lost["alloc_map_full"] > 0 and said, stderr
    assert f"alloc_map_full={lost['alloc_map_full']} " in said[0], (said, lost)
    assert f"unknown_frees={lost['unknown_frees']} " in said[0], (said, lost)


FORKS = """
import os, sys
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
os.execv(sys.argv[2], sys.argv[2:])
"""


def test_a_command_that_forks_thousands_keeps_its_cuda_processes_followed_and_reported():
    """-c follows the command's children through a table of 8,192 processes: each leaves it at
    its end, so the children made after 9,000 short ones are followed still; and over
    --keep-ended the processes that made no call go first, unnoticed (nothing of theirs is
    lost), so the CUDA process that ended before them stays in the report."""
    script = (f"{WORKLOAD} leak 2 4096 >/dev/null && "
              f"/usr/bin/python3 -c '{FORKS}' 9000 {WORKLOAD} children 3 1000 >/dev/null")
    report, rc = run_snapshot_c(["sh", "-c", script])
    assert rc == 0
    mine = [(p["comm"], p["current_bytes"]) for p in report["processes"] if p["alloc_count"]]
    assert sorted(mine) == [("workload", 1000)] * 4 + [("workload", 8192)], mine
    assert report["lost"]["ended_procs_dropped"] == 0 and report["lost"]["targets_full"] == 0


def test_corrupt_lib_is_called_corrupt(tmp_path):
    bad = tmp_path / "libcudart.so.13"
    data = (MOCK_LIB_DIR / "libcudart.so.13").read_bytes()
    bad.write_bytes(data[:64] + b"\xff" * 512)    # an ELF header, then garbage
    rc, stderr = run("snapshot", "--lib", bad, "-d", 1)
    assert rc == 1
    assert len(stderr) == 1 and "not an ELF file" in stderr[0], stderr


def test_a_fifo_named_like_a_library_in_gpumems_cwd_is_never_opened(tmp_path):
    # Exit-time frames carry bare names (libc.so.6, workload): they are never opened as
    # relative paths, so FIFOs of those names in gpumem's working directory block nothing.
    for name in ("libc.so.6", "workload", "libcudart.so.13", "libcuda.so.1"):
        os.mkfifo(tmp_path / name)
    rc, stderr = run("snapshot", "--json", "-o", tmp_path / "r.json", "-c", WORKLOAD, "leak", 3,
                     4096, cwd=tmp_path)
    assert rc == 0, stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [p["current_bytes"] for p in report["processes"]] == [3 * 4096]


def test_a_command_that_ignores_sigterm_is_killed_and_gpumem_says_so(tmp_path):
    proc = subprocess.Popen([str(GPUMEM), "snapshot", "-o", str(tmp_path / "r.txt"), "-c", "sh",
                             "-c", "trap '' TERM; echo ignoring; exec sleep 60"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        line = proc.stderr.readline().decode()
        assert line.startswith("gpumem: tracing:"), line
        assert proc.stdout.readline() == b"ignoring\n"    # the command ignores SIGTERM now
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    stderr = proc.stderr.read().decode()
    assert rc == 128 + signal.SIGKILL, stderr
    assert "sh did not end 5 s after it was told to: killed" in stderr
    assert (tmp_path / "r.txt").read_text().startswith("    PID")


def test_a_failure_storm_keeps_exact_counts_and_the_first_and_last_records(tmp_path):
    report, rc = run_snapshot_c([WORKLOAD, "storm", 1000, 4096], env={"GPUMEM_MOCK_FAIL_AFTER": "0"},
                                gpumem_args=["--keep-failures", "10"])
    assert rc == 0
    [proc] = [p for p in report["processes"] if p["comm"] == "workload"]
    assert proc["failed_count"] == 1000 and report["tracer"]["failed_allocs"] == 1000
    assert sum(s["failed_count"] for s in proc["sites"]) == 1000
    mine = [f for f in report["failures"] if f["pid"] == proc["pid"]]
    assert len(mine) == 20 and all(f["size"] == 4096 for f in mine)
    assert report["lost"]["failure_records_dropped"] == 980
    times = [f["time_ns"] for f in mine]
    assert times == sorted(times)    # the first ten, then the last ten, in order


def test_a_full_allocation_table_counts_every_allocation_it_could_not_keep():
    """--max-allocs 64: 128 slots for 200 kept allocations and 200 freed at once. Each one is
    either kept (and exact in its site) or counted in alloc_map_full, and each free of one not
    kept is an unknown free: nothing is lost without a count."""
    report, rc = run_snapshot_c([WORKLOAD, "leak", 200, 4096], gpumem_args=["--max-allocs", "64"])
    assert rc == 0
    [proc] = [p for p in report["processes"] if p["comm"] == "workload"]
    lost = report["lost"]
    kept = proc["alloc_count"] - proc["free_count"]
    assert 0 < lost["alloc_map_full"] and 0 < kept <= 128    # 128 slots
    assert proc["alloc_count"] + lost["alloc_map_full"] == 400
    assert proc["free_count"] + lost["unknown_frees"] == 200
    assert proc["current_bytes"] == kept * 4096 == sum(s["current_bytes"] for s in proc["sites"])


def test_processes_beyond_max_procs_show_their_sites_totals_and_leave_nothing_in_the_maps():
    # 10 processes, room for 4 process entries: those without one have sites but no totals.
    script = ("for i in 1 2 3 4 5 6 7 8 9 10; do "
              f"{WORKLOAD} --wait hold 4096 </dev/null & done; sleep 2; kill $(jobs -p); wait")
    report, rc = run_snapshot_c(["sh", "-c", script], gpumem_args=["--max-procs", "4"])
    workloads = [p for p in report["processes"] if p["comm"] == "workload"]
    assert len(workloads) == 10, report["processes"]
    assert [(p["current_bytes"], p["current_allocs"], p["peak_bytes"]) for p in workloads] == [
        (4096, 1, 4096)] * 10
    assert report["lost"]["proc_map_full"] >= 1    # some had no entry of their own
    # Every one of them ended: none of their entries is left behind in the maps.
    assert (report["tracer"]["map_sites"], report["tracer"]["map_allocs"]) == (0, 0)


def test_a_full_site_table_counts_every_call_it_could_not_give_a_site():
    """--max-sites 1: two slots for the sites of every kind of allocation. A call that finds no
    site is counted in site_map_full, and the process's GPU bytes (a running total of its own)
    stay exact: the same as with every site kept."""
    full, rc = run_snapshot_c([WORKLOAD, "kinds"], gpumem_args=["--max-sites", "1"])
    assert rc == 0
    roomy, rc = run_snapshot_c([WORKLOAD, "kinds"])
    assert rc == 0
    [cramped] = [p for p in full["processes"] if p["comm"] == "workload"]
    [whole] = [p for p in roomy["processes"] if p["comm"] == "workload"]
    assert roomy["lost"]["site_map_full"] == 0 and len(whole["sites"]) > 2
    assert len(cramped["sites"]) == 2    # two slots, both taken
    assert full["lost"]["site_map_full"] > 0
    assert cramped["alloc_count"] + full["lost"]["site_map_full"] == whole["alloc_count"]
    assert cramped["current_bytes"] == whole["current_bytes"]
    assert cramped["peak_bytes"] == whole["peak_bytes"]


def test_a_map_another_task_keeps_locking_is_walked_at_each_start_and_end():
    """The kernel's walk of a process's module map, at its first call and at its end, only
    tries the mmap_lock: while another task holds it for writing (here writes to the
    process's clear_refs, again and again; a tracer placing uprobes does the same), the walk
    is tried again rather than given up, so no process loses the names of its libraries.
    Given up on, 4 to 9 of some 400 walks here were refused; with the retries, a writer kept
    off its CPU while it holds the lock can still outlast them, once in a run at most."""
    run = run_snapshot_c([MAPLOCK, 2, WORKLOAD, "leak", 1, 4096])
    assert run.returncode == 0, run.stderr
    runs, _, writes, _ = run.stdout.split()[-4:]
    assert int(runs) >= 10 and int(writes) >= int(runs), run.stdout
    assert run.report["tracer"]["module_maps_busy"] <= 1, run.report["tracer"]
    assert run.report["lost"]["module_maps_missed"] == 0
    ended = [p for p in run.report["processes"] if p["comm"] == "workload"]
    assert ended and all(not p["alive"] for p in ended)
    for proc in ended:
        assert {Path(s["frames"][0]["module"] or "").name for s in proc["sites"]} == \
            {"workload"}, proc["sites"]
