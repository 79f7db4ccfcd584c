"""Per-GPU numbers in every view, on the mocks with two devices (GPUMEM_MOCK_DEVICES=2): apis
`devices` (a thread switching devices, a context made on another one: GPU 0 12,000 B in 2,000 +
4,000 + 6,000, GPU 1 24,000 B in 1,000 + 3,000 + 5,000 + 7,000 + 8,000) and apis `samesite`
(one line allocating on both). Each view is read as its user reads it: text, JSON, top's batch
table, go tool pprof, the chrome trace's counters, memviz's pickle, a recording through
sqlite3 and `report`, the agent's metrics through promtool."""
import glob
import json
import os
import pickle
import re
import shutil
import sqlite3
import subprocess

import pytest

from conftest import GPUMEM, RUN_TIMEOUT, oom_lines, run_snapshot_c
from test_apis import APIS, MIB, TWO_GPUS, held_apis
from test_serve import Agent, pins, wait_until  # noqa: F401 (pins: a fixture)

GPU0 = [2000, 4000, 6000]
GPU1 = [1000, 3000, 5000, 7000, 8000]


def gpumem(*args, env=None, check=True, stdin=None):
    done = subprocess.run([str(GPUMEM), *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **TWO_GPUS, **(env or {})}, timeout=RUN_TIMEOUT,
                          input=stdin)
    if check:
        assert done.returncode == 0, f"{args}: exit {done.returncode}: {done.stderr}"
    return done


def test_snapshot_text_shows_the_bytes_per_gpu_and_each_sites_gpu(tmp_path):
    out = tmp_path / "snapshot.txt"
    gpumem("snapshot", "--bytes", "-o", out, "-c", APIS, "devices")
    text = out.read_text()
    assert "        by GPU: 0 12000, 1 24000\n" in text, text
    sites = re.findall(r"^ +(\d+) in 1 .* device on GPU (\d) at ", text, re.MULTILINE)
    assert sorted((int(gpu), int(b)) for b, gpu in sites) == \
        sorted([(0, b) for b in GPU0] + [(1, b) for b in GPU1])


def test_a_site_on_two_gpus_gives_each_back_its_own(tmp_path):
    # A free while the other device is current, and a reset of one device: each site of the
    # one line goes back by its own allocations.
    out = tmp_path / "snapshot.json"
    gpumem("snapshot", "--json", "-o", out, "-c", APIS, "sitefree")
    report = json.loads(out.read_text())
    (proc,) = [p for p in report["processes"] if p["comm"] == "apis"]
    sites = sorted((s["gpu"], s["current_bytes"], s["current_allocs"], s["alloc_count"],
                    s["free_count"]) for s in proc["sites"] if s["api"] == "cudaMalloc")
    assert sites == [(0, 1000, 1, 2, 1), (1, 0, 0, 1, 1)]
    # The walk of live allocations finds the GPU 0 site by its key, device included.
    (held,) = [s for s in proc["sites"] if s["api"] == "cudaMalloc" and s["current_allocs"]]
    assert held["oldest_age_ns"] is not None and held["oldest_age_ns"] > 0
    assert [(g["gpu"], g["bytes"]) for g in proc["by_gpu"]] == [(0, 1000)]
    assert report["tracer"]["ctx_released_allocs"] >= 1
    assert all(v == 0 for v in report["lost"].values()), report["lost"]


def test_cu_mem_create_is_on_the_device_its_properties_name():
    report, rc = run_snapshot_c([APIS, "vmmdevice"], env=TWO_GPUS)
    assert rc == 0
    (proc,) = [p for p in report["processes"] if p["comm"] == "apis"]
    assert [(g["gpu"], g["bytes"]) for g in proc["by_gpu"]] == [(0, 2 * MIB), (1, 2 * MIB)]
    assert sorted((s["gpu"], s["current_bytes"]) for s in proc["sites"]
                  if s["api"] == "cuMemCreate") == [(0, 2 * MIB), (1, 2 * MIB)]


def test_snapshot_of_one_gpu_names_no_gpu(tmp_path):
    out = tmp_path / "snapshot.txt"
    gpumem("snapshot", "--bytes", "-o", out, "-c", APIS, "arrays", env={"GPUMEM_MOCK_DEVICES": "1"})
    text = out.read_text()
    assert " device " in text and "by GPU" not in text and " on GPU " not in text, text


def top_tables(out):
    return [t for t in out.read_text().split("\n\n") if t.startswith("gpumem top")]


def test_top_has_a_gpus_line_and_a_gpu_column_per_process_and_per_site(tmp_path):
    for group, scenario in (("process", "devices"), ("site", "samesite")):
        out = tmp_path / f"top-{group}"
        proc = subprocess.Popen([str(GPUMEM), "top", "-b", "-n", "1", "-i", "0.5", "--bytes",
                                 "--group", group, "-o", str(out), "-c", str(APIS), scenario],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, GPUMEM_APIS_HOLD="1", **TWO_GPUS))
        try:
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
        (table,) = top_tables(out)
        lines = table.splitlines()
        if group == "process":
            assert lines[1].startswith("GPUs:  0 held 12000  1 held 24000 (NVML: "), table
            assert lines[2].split()[:2] == ["PID", "GPU"]
            assert lines[3].split()[1] == "0,1", table
        else:
            assert lines[1].startswith("GPUs:  0 held 2000  1 held 2000 (NVML: "), table
            rows = sorted(line.split()[1:4] for line in lines[3:])
            assert rows == [["0", "2000", "2"], ["1", "2000", "1"]], table


def test_oom_on_gpu_1_names_it_and_only_the_sites_holding_it(tmp_path):
    out = tmp_path / "oom.json"
    done = gpumem("oom", "--json", "-o", out, "-c", APIS, "devices",
                  env={"GPUMEM_MOCK_FAIL_SIZE": "8000"}, check=False)
    assert done.returncode == 1, done.stderr      # apis says its last allocation failed
    (failure,), _ = oom_lines(out.read_text())
    assert failure["gpu"] == 1 and failure["size"] == 8000
    assert [(s["gpu"], s["current_bytes"]) for s in failure["top_sites"]] == \
        [(1, 7000), (1, 5000), (1, 3000), (1, 1000)]
    text = tmp_path / "oom.txt"
    gpumem("oom", "--bytes", "-o", text, "-c", APIS, "devices",
           env={"GPUMEM_MOCK_FAIL_SIZE": "8000"}, check=False)
    body = text.read_text()
    assert "cudaMalloc(8000) = 2 cudaErrorMemoryAllocation on GPU 1\n" in body, body
    assert "held 28000 (peak 28000); on GPU 1 16000; " in body, body


def test_exports_carry_the_gpu_of_each_site(tmp_path):
    for fmt in ("pprof", "folded", "chrome", "memviz"):
        gpumem("export", "--format", fmt, "-o", tmp_path / fmt, "-c", APIS, "devices")
    per_gpu = {}
    for line in (tmp_path / "folded").read_text().splitlines():
        frames, weight = line.rsplit(" ", 1)
        gpu = frames.split(";")[2]
        per_gpu[gpu] = per_gpu.get(gpu, 0) + int(weight)
    assert per_gpu == {"GPU 0": 12000, "GPU 1": 24000}

    trace = json.loads((tmp_path / "chrome").read_text())
    last = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "C" and e["name"].startswith("GPU "):
            last[e["name"]] = e["args"]["bytes"]
    # The process ended: its tracks drop to 0 at its end; their peaks are what it held.
    peaks = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "C" and e["name"] in ("GPU 0 memory", "GPU 1 memory"):
            peaks[e["name"]] = max(peaks.get(e["name"], 0), e["args"]["bytes"])
    assert peaks == {"GPU 0 memory": 12000, "GPU 1 memory": 24000}
    assert last["GPU 0 memory"] == last["GPU 1 memory"] == 0
    site_tracks = [e["name"] for e in trace["traceEvents"]
                   if e.get("ph") == "C" and e["name"].startswith("site ")]
    assert any(name.endswith(" on GPU 1)") for name in site_tracks), site_tracks

    (path,) = glob.glob(str(tmp_path / "memviz" / "*.pickle"))
    with open(path, "rb") as f:
        snap = pickle.load(f)
    assert sorted((s["device"], s["total_size"]) for s in snap["segments"]) == \
        sorted([(0, b) for b in GPU0] + [(1, b) for b in GPU1])
    assert len(snap["device_traces"]) == 2
    for device, trace in enumerate(snap["device_traces"]):
        sizes = sorted(e["size"] for e in trace if e["action"] == "segment_alloc")
        assert sizes == (GPU0 if device == 0 else GPU1)

    go = shutil.which("go")
    if not go:
        pytest.skip("go is not installed (Debian golang-go): go tool pprof reads the gpu tag")
    tags = subprocess.run([go, "tool", "pprof", "-tags", "-unit=B", str(tmp_path / "pprof")],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert tags.returncode == 0, tags.stderr
    gpu = tags.stdout.split(" gpu: ")[1].split("\n\n")[0]
    assert re.findall(r"(\d+)\.0B \(.*\): (\d)", gpu) == [("24000", "1"), ("12000", "0")], gpu


def test_a_recording_keeps_each_sites_gpu(tmp_path):
    db = tmp_path / "r.db"
    gpumem("record", "-o", db, "-c", APIS, "devices")
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT s.gpu, ss.current_bytes FROM sites s JOIN site_samples ss"
                           " ON ss.site_id = s.id AND ss.time_ns = (SELECT max(time_ns) FROM"
                           " site_samples WHERE site_id = s.id)").fetchall()
    assert sorted(rows) == sorted([(0, b) for b in GPU0] + [(1, b) for b in GPU1])
    report = json.loads(gpumem("report", db, "snapshot", "--json").stdout)
    (proc,) = [p for p in report["processes"] if p["comm"] == "apis"]
    assert [(g["gpu"], g["bytes"]) for g in proc["by_gpu"]] == [(0, 12000), (1, 24000)]
    sites = json.loads(gpumem("report", db, "sites", "--json").stdout)["sites"]
    assert sorted((s["gpu"], s["current_bytes"]) for s in sites if s["comm"] == "apis") == \
        sorted([(0, b) for b in GPU0] + [(1, b) for b in GPU1])


def test_agent_site_series_have_a_gpu_label_and_pass_promtool(pins):
    agent = Agent(pins)
    try:
        same = held_apis("samesite", TWO_GPUS)
        mine = f'pid="{same.pid}"'

        def site_series():
            lines = [line for line in agent.metrics().splitlines()
                     if line.startswith("gpumem_site_memory_bytes{") and mine in line]
            return lines if len(lines) == 2 else None

        lines = wait_until(site_series, what="the two-GPU site's series")
        got = sorted((line.split('gpu="')[1].split('"')[0], int(float(line.rsplit(" ", 1)[1])))
                     for line in lines)
        assert got == [("0", 2000), ("1", 2000)]
        body = agent.metrics()
        same.communicate("\n", timeout=30)
    finally:
        agent.kill()
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian prometheus): the exposition is unchecked")
    check = subprocess.run([promtool, "check", "metrics"], input=body, text=True,
                           capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
