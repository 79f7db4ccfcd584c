"""A forecast of the out-of-memory: a loop that keeps 1 MiB a step on a mock device with known
memory, whose mock NVML counts what the mock driver's programs use (as a real device's does),
runs until the device fails; every forecast `leaks` made on the way must name the step at which
it really failed, and its own numbers must agree (steps x growth a step = free memory). No
forecast without NVML, and none for memory that stopped growing."""
import json
import time
import os
import subprocess
import tempfile
from pathlib import Path

from conftest import GPUMEM, MOCK_NVML_DIR, RUN_TIMEOUT, WORKLOAD

MIB = 1 << 20
CAPACITY = 120 * MIB        # the mock device's memory for the process
OTHERS = 1024 * MIB         # what NVML says the rest of the device's users hold
SCRATCH = 4 * MIB           # each step also takes and frees 2 x 4 MiB


def leaks_reports(args, nvml=True):
    with tempfile.TemporaryDirectory(prefix="gpumem-forecast-") as tmp:
        usage, out = Path(tmp) / "usage", Path(tmp) / "leaks.json"
        env = dict(os.environ, GPUMEM_MOCK_DEVICE_BYTES=str(CAPACITY),
                   GPUMEM_MOCK_USAGE_FILE=str(usage))
        if nvml:
            env.update(LD_LIBRARY_PATH=str(MOCK_NVML_DIR), GPUMEM_MOCK_NVML_USAGE_FILE=str(usage),
                       GPUMEM_MOCK_NVML=f"mock GPU,GPU-0001,{CAPACITY + OTHERS},{OTHERS},0,"
                                        "00000000:01:00.0")
        done = subprocess.run([GPUMEM, "leaks", "--json", "-i", "1", "-o", out, "-c", WORKLOAD,
                               *map(str, args)], capture_output=True, text=True, env=env,
                              timeout=RUN_TIMEOUT)
        reports = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    return done, reports


def forecasts(reports):
    return [(r, p) for r in reports for p in r["processes"] if p["comm"] == "workload"]


def test_the_forecast_names_the_step_at_which_the_device_runs_out():
    done, reports = leaks_reports(["steps", 400, 50, MIB])
    # the mock device failed: the step that kept the last MiB was the last one
    failed = [l for l in done.stdout.splitlines() if l.startswith("call cudaMalloc")
              and not l.endswith(" 0")]
    assert done.returncode == 1 and failed, done.stdout[-500:]
    kept = sum(1 for l in done.stdout.splitlines()
               if l.startswith(f"call cudaMalloc {MIB} ") and l.endswith(" 0"))
    failing_step = kept + 1
    made = [(r, p) for r, p in forecasts(reports) if p["oom_forecast"]]
    assert len(made) >= 2, reports       # a report a second over ~6 s, the first too early
    for r, p in made:
        f = p["oom_forecast"]
        assert f["gpu"] == 0
        # the arithmetic: what is free, at the growth a step, is the steps left (a whole
        # number of them: half a step's growth either way is the rounding)
        assert abs(f["steps"] * f["growth_bytes_per_step"] - f["device_free_bytes"]) \
            <= 0.01 * f["device_free_bytes"] + f["growth_bytes_per_step"] / 2, f
        assert abs(f["growth_bytes_per_step"] - MIB) <= 0.05 * MIB, f
        assert abs(f["seconds"] * f["growth_bytes_per_s"] - f["device_free_bytes"]) \
            <= 0.01 * f["device_free_bytes"], f
        # NVML's free is the device's: the process's bytes (read a moment apart) taken off
        assert abs(f["device_free_bytes"] - (CAPACITY - p["current_bytes"])) <= SCRATCH + 2 * MIB
        # and the step it names is the step that failed (4 MiB of scratch a step early)
        predicted = p["current_bytes"] / MIB + f["steps"]
        assert abs(predicted - failing_step) <= 0.05 * failing_step + SCRATCH / MIB, \
            (predicted, failing_step, f)
    final = [p for r, p in forecasts(reports) if r["final"]]
    assert final and final[0]["oom_forecast"] is None    # ended: nothing left to forecast


def test_no_forecast_without_nvml_or_once_memory_stops_growing():
    _, reports = leaks_reports(["steps", 60, 50, MIB], nvml=False)
    assert forecasts(reports) and all(p["oom_forecast"] is None for _, p in forecasts(reports))
    # a cache that fills to 10 buffers in 0.3 s, then recycles them for 3 s: steady
    _, reports = leaks_reports(["plateau", 100, 30, 10, MIB])
    later = [p for r, p in forecasts(reports) if not r["final"]]
    assert later and all(p["oom_forecast"] is None for p in later), later


def test_top_shows_when_the_device_runs_out():
    with tempfile.TemporaryDirectory(prefix="gpumem-forecast-") as tmp:
        usage, out = Path(tmp) / "usage", Path(tmp) / "top.txt"
        env = dict(os.environ, COLUMNS="80", GPUMEM_MOCK_DEVICE_BYTES=str(CAPACITY),
                   GPUMEM_MOCK_USAGE_FILE=str(usage), LD_LIBRARY_PATH=str(MOCK_NVML_DIR),
                   GPUMEM_MOCK_NVML_USAGE_FILE=str(usage),
                   GPUMEM_MOCK_NVML=f"mock GPU,GPU-0001,{CAPACITY + OTHERS},{OTHERS},0,"
                                    "00000000:01:00.0")
        subprocess.run([GPUMEM, "top", "-b", "-n", "8", "-i", "0.5", "-o", out, "-c", WORKLOAD,
                        "steps", "400", "50", str(MIB)], capture_output=True, env=env,
                       timeout=RUN_TIMEOUT)
        text = out.read_text()
    tables = [t.splitlines() for t in text.split("\n\n") if t.startswith("gpumem top")]
    with_oom = [t for t in tables if "OOM IN" in t[1]]
    assert with_oom, text
    header = with_oom[-1][1].split()
    assert header[header.index("FAIL") + 1:header.index("FAIL") + 3] == ["OOM", "IN"], header
    row = next(l for l in with_oom[-1][2:] if "workload steps" in l)
    # OOM IN, the last cell before the command: an age such as 2s or 998ms, never "-" while
    # the process grows
    cells = row.split()
    oom = cells[cells.index("workload") - 1]
    assert oom != "-" and oom[0].isdigit(), row


def test_the_agent_exports_the_forecast_as_a_gauge(tmp_path):
    from test_serve import Agent, pin_dir, reset
    import shutil
    from conftest import Workload
    usage = tmp_path / "usage"
    nvml = dict(LD_LIBRARY_PATH=str(MOCK_NVML_DIR), GPUMEM_MOCK_NVML_USAGE_FILE=str(usage),
                GPUMEM_MOCK_NVML=f"mock GPU,GPU-0001,{CAPACITY + OTHERS},{OTHERS},0,"
                                 "00000000:01:00.0")
    pins = pin_dir()
    agent = Agent(pins, env=nvml)
    try:
        with Workload("steps", 300, 50, MIB,
                      env=dict(GPUMEM_MOCK_DEVICE_BYTES=str(CAPACITY),
                               GPUMEM_MOCK_USAGE_FILE=str(usage))) as w:
            def gauge():
                for line in agent.metrics().splitlines():
                    if line.startswith("gpumem_process_oom_forecast_seconds{") and \
                            f'pid="{w.pid}"' in line:
                        return line
                return None
            deadline = time.time() + 12
            line = None
            while line is None and time.time() < deadline:
                line = gauge()
                time.sleep(0.5)
            assert line, agent.metrics()
            assert 'gpu="0"' in line
            seconds = int(line.rsplit(" ", 1)[1])
            # at 20 steps a second and 1 MiB a step, 120 MiB last 6 s at most
            assert 0 <= seconds <= 7, line
    finally:
        agent.kill()
        reset(pins)
        shutil.rmtree(pins, ignore_errors=True)
