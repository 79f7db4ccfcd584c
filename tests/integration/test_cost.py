"""gpumem's own cost in each process it traces: the probe programs run in the process's threads
(counted by the kernel), a hit's cost (measured once on a probe of gpumem's own), their product,
and its share of the process's CPU time; in snapshot --json, top (from 140 columns) and the
agent's metrics (test_serve.py)."""
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import GPUMEM, RUN_TIMEOUT, WORKLOAD, run_snapshot_c


def workload_proc(report):
    procs = [p for p in report["processes"] if p["comm"] == "workload"]
    assert len(procs) == 1, report["processes"]
    return procs[0]


def test_probe_hits_grow_with_the_calls_and_their_time_is_hits_times_a_hits_cost():
    runs = {}
    for steps in (100, 200):
        run = run_snapshot_c([WORKLOAD, "leak", steps, 4096])
        assert run.returncode == 0, run.stderr
        runs[steps] = run.report
    hits = {n: workload_proc(r)["probe_hits"] for n, r in runs.items()}
    # each step is the same calls (two cudaMalloc and a cudaFree, each with the driver's call
    # inside): the same hits a step, at least an entry and a return per allocation
    per_100 = hits[200] - hits[100]
    assert per_100 % 100 == 0 and 5 <= per_100 // 100 <= 12, hits
    for r in runs.values():
        p, tracer = workload_proc(r), r["tracer"]
        ns = tracer["probe_hit_ns"]
        assert ns is not None and 50 < ns < 100_000, tracer   # measured: a trap is ~1 us here
        per_hit = ns + (tracer["bpf_run_ns"] or 0)
        assert abs(p["probe_seconds"] - p["probe_hits"] * per_hit / 1e9) < 1e-9, p
        share = p["probe_cpu_share"]
        assert share is not None and 0 < share <= 1, p   # at its exit: the scheduler's ns


# Runs argv[1:] as a child and prints the CPU time the kernel gives it at its wait, every
# thread's (user and system, seconds), then exits as it did.
CPU_OF_CHILD = ("import os, sys\n"
                "pid = os.fork() or os.execv(sys.argv[1], sys.argv[1:])\n"
                "_, status, ru = os.wait4(pid, 0)\n"
                "print('cpu', ru.ru_utime + ru.ru_stime, flush=True)\n"
                "sys.exit(os.waitstatus_to_exitcode(status))\n")


def test_a_process_whose_last_thread_ends_before_another_is_released_has_all_its_cpu_time():
    # slowexit: a worker works 300 ms of CPU, then wakes main's join and spends a few ms more
    # closing the files of its own file table; main ends at once, before the worker is
    # released, so the process's end is main's. The worker's time is counted all the same.
    run = run_snapshot_c(["/usr/bin/python3", "-c", CPU_OF_CHILD, WORKLOAD, "slowexit", 300,
                          100000, 4096])
    assert run.returncode == 0, (run.stdout, run.stderr)
    if "slowexit: the worker ended first" in run.stdout:
        pytest.skip("the worker was released before main ended: no race to count through")
    assert "slowexit raced\n" in run.stdout, run.stdout
    kernel = float(run.stdout.split("cpu ")[-1])
    p = workload_proc(run.report)
    assert p["probe_cpu_share"], p
    cpu = p["probe_seconds"] / p["probe_cpu_share"]
    assert 0.28 <= kernel and 0.9 * kernel <= cpu <= 1.1 * kernel + 0.005, (cpu, kernel, p)


def test_a_recording_knows_no_probe_hits(tmp_path):
    db = tmp_path / "r.db"
    done = subprocess.run([GPUMEM, "record", "-o", db, "-c", WORKLOAD, "leak", "10", "4096"],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    rep = subprocess.run([GPUMEM, "report", db, "snapshot", "--json"], capture_output=True,
                         text=True, timeout=RUN_TIMEOUT)
    p = workload_proc(json.loads(rep.stdout))
    assert (p["probe_hits"], p["probe_seconds"], p["probe_cpu_share"]) == (None, None, None)
    assert json.loads(rep.stdout)["tracer"]["probe_hit_ns"] is None


def test_top_shows_gpumems_share_of_a_busy_process_from_140_columns():
    with tempfile.TemporaryDirectory(prefix="gpumem-cost-") as tmp:
        out = Path(tmp) / "top.txt"
        # 2 threads allocating and freeing as fast as they can for a few seconds
        done = subprocess.run([GPUMEM, "top", "-b", "-n", "4", "-i", "0.5", "-o", out, "-c",
                               WORKLOAD, "threads", "2", "100000", "4096"], capture_output=True,
                              env=dict(os.environ, COLUMNS="150"), timeout=RUN_TIMEOUT)
        assert done.returncode == 0, done.stderr
        text = out.read_text()
    tables = [t.splitlines() for t in text.split("\n\n") if t.startswith("gpumem top")]
    header = tables[-1][1].split()
    assert "GPUMEM" in header, tables[-1]
    rows = [l for t in tables for l in t[2:] if "workload threads" in l]
    assert rows, text
    # the one cell with a % in it: GPUMEM, gpumem's share of the process's CPU time
    shares = [c for l in rows for c in l.split() if c.endswith("%")]
    assert shares, rows
    for share in shares:
        assert 0 < float(share.rstrip("%")) <= 100, rows
