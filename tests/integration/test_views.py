"""leaks, oom and top against real BPF: verdicts on planted leaks, a plateau and a leak hidden
under a large allocation; step detection on a loop of known period; an OOM record with its
snapshot; top in batch mode and its full-screen UI driven through tmux; the views under ASan."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import GPUMEM, ROOT, TRACING_LINE, WORKLOAD, oom_lines, site_by_symbol

KIB = 1024
MIB = 1024 * KIB
ASAN_GPUMEM = ROOT / "build" / "asan" / "gpumem"


def run_view(view, args, env=None, gpumem_args=(), timeout=60, gpumem=GPUMEM, json_out=True):
    """`gpumem VIEW [--json] -o FILE ARGS -c WORKLOAD ARGS`: (output text, exit code, stderr)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    with tempfile.TemporaryDirectory(prefix="gpumem-views-") as tmp:
        out = Path(tmp) / "out"
        cmd = [str(gpumem), view, *(["--json"] if json_out else []), "-o", str(out),
               *map(str, gpumem_args), "-c", str(WORKLOAD), *map(str, args)]
        done = subprocess.run(cmd, capture_output=True, env=full_env, timeout=timeout)
        text = out.read_text() if out.exists() else ""
    return text, done.returncode, done.stderr.decode(errors="replace")


def leaks_report(args, **kw):
    text, rc, stderr = run_view("leaks", args, **kw)
    assert rc == 0, stderr
    reports = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert reports and reports[-1]["final"] is True, text
    procs = reports[-1]["processes"]
    assert len(procs) == 1, procs
    return procs[0]


def test_leaks_planted_leak_grows_one_step_at_a_time_and_step_period_is_found():
    proc = leaks_report(["steps", 25, 200, 4 * KIB])
    assert proc["alive"] is False and proc["current_bytes"] == 25 * 4 * KIB
    assert proc["growing_sites"] == 1
    step = proc["step"]
    assert step["method"] == "alloc_rates"
    assert 0.16e9 < step["period_ns"] < 0.26e9, step      # usleep(200 ms) a step
    leak = proc["sites"][0]
    assert leak["frames"][0]["symbol"] == "step_keep_loss"
    assert leak["rank"] == 1 and leak["verdict"] == "growing" and leak["method"] == "window"
    assert leak["current_bytes"] == 25 * 4 * KIB and leak["current_allocs"] == 25
    assert 0.85 * 4 * KIB < leak["growth_bytes_per_step"] < 1.15 * 4 * KIB, leak
    assert 0.8 * 4 * KIB / 0.2 < leak["growth_bytes_per_s"] < 1.2 * 4 * KIB / 0.2, leak
    assert leak["fit_r2_pct"] >= 95
    # Allocations spread evenly over ~5 s: the median is about half as old as the oldest.
    assert leak["oldest_age_ns"] > 4e9
    assert 0.3 < leak["median_age_ns"] / leak["oldest_age_ns"] < 0.7, leak
    scratch = [s for s in proc["sites"] if s["frames"][0]["symbol"] == "step_activations"]
    # Both scratch buffers of a step are made on one line: one site, two a step.
    assert [(s["verdict"], s["alloc_count"], s["median_age_ns"]) for s in scratch] == [
        ("freed", 50, 0)]


def test_leaks_plateau_that_stops_growing_is_steady_not_a_leak():
    proc = leaks_report(["plateau", 40, 100, 5, 64 * KIB])
    assert proc["growing_sites"] == 0
    (cache,) = proc["sites"]
    assert cache["frames"][0]["symbol"] == "cache_insert"
    assert cache["verdict"] == "steady" and cache["method"] == "window"
    assert cache["current_bytes"] == 5 * 64 * KIB and cache["alloc_count"] == 40
    assert cache["free_count"] == 35
    assert cache["growth_bytes_per_s"] == 0


def test_leaks_small_leak_under_large_steady_allocation_ranks_first():
    proc = leaks_report(["hidden", 30, 100, 1024 * MIB, 4 * KIB])
    assert proc["current_bytes"] == 1024 * MIB + 30 * 4 * KIB
    first, second = proc["sites"][0], proc["sites"][1]
    assert first["frames"][0]["symbol"] == "hidden_leak" and first["verdict"] == "growing"
    assert 0.85 * 4 * KIB < first["growth_bytes_per_step"] < 1.15 * 4 * KIB, first
    assert second["frames"][0]["symbol"] == "load_weights" and second["verdict"] == "steady"
    assert second["current_bytes"] == 1024 * MIB
    workspace = [s for s in proc["sites"] if s["frames"][0]["symbol"] == "hidden_workspace"]
    assert workspace[0]["verdict"] == "freed"


def test_leaks_run_too_short_to_sample_is_judged_on_lifetime_counts():
    proc = leaks_report(["leak", 5, 1000])
    leak = proc["sites"][0]
    assert leak["frames"][0]["symbol"] == "keep_feature_map"
    assert (leak["verdict"], leak["method"]) == ("growing", "lifetime")
    assert proc["step"]["method"] == "lifetime"
    assert leak["growth_bytes_per_step"] == 1000
    assert proc["sites"][1]["verdict"] == "freed"


def test_leaks_text_final_report_says_what_was_held_and_what_grew_per_step():
    text, rc, _ = run_view("leaks", ["steps", 12, 200, 4 * KIB], json_out=False)
    assert rc == 0
    assert "at its end: 1 site still held 48.0 KiB in 12 allocations" in text, text
    line = next(l for l in text.splitlines() if "grew by ~" in l)
    assert line.strip().startswith("step_keep_loss") and "per step" in line, line
    text, _, _ = run_view("leaks", ["steps", 12, 200, 4 * KIB], json_out=False,
                          gpumem_args=["--bytes"])
    assert "still held 49152 in 12 allocations" in text, text


def test_leaks_prints_periodically_with_interval():
    text, rc, _ = run_view("leaks", ["steps", 12, 200, 4 * KIB], gpumem_args=["-i", "1"])
    assert rc == 0
    reports = [json.loads(line) for line in text.splitlines()]
    assert len(reports) >= 3 and [r["final"] for r in reports].count(True) == 1


def test_oom_record_has_process_context_top_sites_and_failing_site():
    text, rc, stderr = run_view("oom", ["fail", 4096, 10], env={"GPUMEM_MOCK_FAIL_AFTER": "3"})
    assert rc == 0, stderr
    records, lost = oom_lines(text)
    assert len(records) == 1 and lost["lost"]["ringbuf_dropped"] == 0
    r = records[0]
    assert (r["api"], r["kind"], r["size"]) == ("cudaMalloc", "device", 4096)
    assert (r["error"], r["error_name"]) == (2, "cudaErrorMemoryAllocation")
    assert r["process_bytes"] == 12288 and r["process_peak_bytes"] == 12288
    assert r["process_allocs"] == 3 and r["process_failed_count"] == 1
    assert r["devices"] == []                   # no NVML here
    assert [f["symbol"] for f in r["frames"][:2]] == ["oom_step", "run_fail"]
    (held,) = r["top_sites"]
    assert held["frames"][0]["symbol"] == "oom_step"
    assert (held["current_bytes"], held["current_allocs"]) == (12288, 3)


def test_oom_text_shows_holding_and_device_unknown_without_nvml():
    text, rc, _ = run_view("oom", ["fail", 4096, 10], env={"GPUMEM_MOCK_DEVICE_BYTES": "10000"},
                           json_out=False)
    assert rc == 0
    assert "cudaMalloc(4.0 KiB) = 2 cudaErrorMemoryAllocation" in text, text
    assert "held 8.0 KiB (peak 8.0 KiB); device free - of -" in text
    assert "failed at oom_step" in text
    assert "held by    8.0 KiB in 2 cudaMalloc device at oom_step" in text
    assert text.rstrip().endswith("1 failed allocation")


def batch_tables(text):
    return [t for t in text.split("\n\n") if t.startswith("gpumem top")]


def test_top_batch_prints_n_tables_and_stops():
    with tempfile.TemporaryDirectory(prefix="gpumem-views-") as tmp:
        out = Path(tmp) / "out"
        proc = subprocess.Popen([str(GPUMEM), "top", "-b", "-n", "2", "-i", "0.5", "-o", str(out),
                                 "-c", str(WORKLOAD), "hold", str(MIB)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc.wait(30)
        finally:
            proc.kill() if proc.poll() is None else None
        text = out.read_text()
    tables = batch_tables(text)
    assert len(tables) == 2, text
    header = tables[1].splitlines()[1].split()
    assert header[:4] == ["PID", "USER", "CURRENT", "PEAK"] and header[-1] == "COMMAND"
    row = tables[1].splitlines()[2]
    assert "1.0 MiB" in row and row.endswith(f"workload hold {MIB}"), tables[1]
    # Every column but the last (never cut in a plain table) fits 80 columns.
    assert all(len(line) <= 80 for line in text.splitlines() if "workload" not in line), text


# ---- the full-screen UI in tmux ----

TMUX = shutil.which("tmux")
SESSION = "gpumem-test-top"


def tmux(*args):
    return subprocess.run([TMUX, *args], capture_output=True, text=True, timeout=10)


def screen():
    return tmux("capture-pane", "-p", "-t", SESSION).stdout


def wait_screen(predicate, timeout=15):
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = screen()
        if predicate(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"screen never matched; last screen:\n{text}")


def rows(text):
    """The table rows under the header line, up to the first blank line."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines)
                 if l.lstrip().startswith(("PID", "CURRENT", "CONTAINER")))
    out = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        out.append(line)
    return out


@pytest.fixture
def top_screen():
    if not TMUX:
        pytest.skip("tmux is not installed (scripts/deps.sh installs it)")
    tmux("kill-session", "-t", SESSION)
    w = str(WORKLOAD)
    script = (f"sleep 300 | {w} hold {MIB} & sleep 300 | {w} hold {3 * MIB} & "
              f"sleep 300 | {w} manyhold 10 {64 * KIB} & wait")
    cmd = f"{GPUMEM} top -i 0.5 -c sh -c '{script}'"
    assert tmux("new-session", "-d", "-s", SESSION, "-x", "120", "-y", "30", cmd).returncode == 0
    try:
        wait_screen(lambda t: "3 processes" in t and "manyhold" in t)
        yield
    finally:
        tmux("send-keys", "-t", SESSION, "q")
        time.sleep(0.5)
        tmux("kill-session", "-t", SESSION)


def test_top_ui_sorts_filters_drills_into_a_process_and_resizes(top_screen):
    text = wait_screen(lambda t: len(rows(t)) == 3)
    assert "sorted by CURRENT" in text
    assert ["3.0 MiB" in r for r in rows(text)] == [True, False, False]
    assert "LAST MINUTE" in text                # 120 columns: room for the sparkline

    tmux("send-keys", "-t", SESSION, "C")       # by command, ascending
    text = wait_screen(lambda t: "sorted by COMMAND" in t)
    commands = [f"workload hold {MIB}", f"workload hold {3 * MIB}",
                f"workload manyhold 10 {64 * KIB}"]
    assert len(rows(text)) == 3, text
    assert all(r.endswith(c) for r, c in zip(rows(text), commands)), text

    tmux("send-keys", "-t", SESSION, "/", "m", "a", "n", "y", "Enter")
    text = wait_screen(lambda t: "filter: many" in t and len(rows(t)) == 1)
    assert "manyhold" in rows(text)[0] and "640 KiB" in rows(text)[0]

    tmux("send-keys", "-t", SESSION, "Enter")   # its call sites and frames
    text = wait_screen(lambda t: "call sites" in t and "manyhold_alloc" in t)
    (site,) = rows(text)
    assert site.split()[:4] == ["640", "KiB", "10", "0"], site
    assert "frames of the selected site" in text and "run_manyhold" in text

    tmux("send-keys", "-t", SESSION, "Escape")
    tmux("resize-window", "-t", SESSION, "-x", "80", "-y", "24")
    text = wait_screen(lambda t: "by process" in t and len(t.splitlines()[0]) <= 80)
    assert "LAST MINUTE" not in text            # 80 columns: no sparkline, every column fits
    assert all(len(line) <= 80 for line in text.splitlines())
    header = next(l for l in text.splitlines() if l.lstrip().startswith("PID"))
    assert header.split() == ["PID", "USER", "CURRENT", "PEAK", "ALLOC/s", "FREE/s",
                              "GROW/min", "FAIL", "COMMAND"]

    tmux("send-keys", "-t", SESSION, "h")
    wait_screen(lambda t: "this help" in t)
    tmux("send-keys", "-t", SESSION, "x")       # any key closes the help
    wait_screen(lambda t: "by process" in t)


def test_top_ui_groups_by_call_site_and_quits_on_q(top_screen):
    tmux("send-keys", "-t", SESSION, "s")
    text = wait_screen(lambda t: "by call site" in t and len(rows(t)) == 3)
    assert any("hold_alloc" in r for r in rows(text))
    assert any("manyhold_alloc" in r for r in rows(text))
    tmux("send-keys", "-t", SESSION, "q")
    deadline = time.time() + 15
    while time.time() < deadline and tmux("has-session", "-t", SESSION).returncode == 0:
        time.sleep(0.2)
    assert tmux("has-session", "-t", SESSION).returncode != 0, screen()


def test_top_ui_wraps_its_loss_counters_rather_than_cut_them():
    """A screen narrower than the loss line shows every counter whole, on the next row."""
    if not TMUX:
        pytest.skip("tmux is not installed (scripts/deps.sh installs it)")
    session = SESSION + "-lost"
    tmux("kill-session", "-t", session)
    cmd = (f"{GPUMEM} top -i 0.5 --max-allocs 64 -c sh -c "
           f"'{WORKLOAD} leak 200 4096 >/dev/null; sleep 300'")
    assert tmux("new-session", "-d", "-s", session, "-x", "40", "-y", "20", cmd).returncode == 0
    try:
        deadline, text = time.time() + 15, ""
        while time.time() < deadline and "unknown_frees=72" not in text:
            time.sleep(0.2)
            text = tmux("capture-pane", "-p", "-t", session).stdout
        lines = text.splitlines()
        at = next(i for i, l in enumerate(lines) if l.startswith("lost: "))
        assert lines[at].startswith("lost: alloc_map_full=") and lines[at].endswith(","), text
        assert lines[at + 1] == "unknown_frees=72", text
        assert all(len(line) <= 40 for line in lines), text
        # Too narrow for its three rows: the last says how many counters it could not show.
        tmux("resize-window", "-t", session, "-x", "12")
        deadline = time.time() + 10
        while time.time() < deadline and " more" not in text:
            time.sleep(0.2)
            text = tmux("capture-pane", "-p", "-t", session).stdout
        lines = text.splitlines()
        at = next(i for i, l in enumerate(lines) if l.startswith("lost: "))
        assert lines[at:at + 2] == ["lost: alloc", "_map_full=1"], text
        assert lines[at + 2].endswith(", +1 more") and len(lines[at + 2]) <= 11, text
    finally:
        tmux("send-keys", "-t", session, "q")
        time.sleep(0.5)
        tmux("kill-session", "-t", session)


# ---- AddressSanitizer ----

@pytest.fixture(scope="module")
def asan_gpumem():
    done = subprocess.run(["make", "-s", "BUILD=build/asan", "SANITIZE=1", "all"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return ASAN_GPUMEM


def run_asan_view(gpumem, view, args, env, gpumem_args, json_out):
    """run_view's run, the workload started by a shell that says its pid and execs it (the pid
    stays the workload's): (output text, exit code, stderr, the workload's pid)."""
    full_env = dict(os.environ, **env)
    with tempfile.TemporaryDirectory(prefix="gpumem-views-") as tmp:
        out = Path(tmp) / "out"
        cmd = [str(gpumem), view, *(["--json"] if json_out else []), "-o", str(out),
               *gpumem_args, "-c", "sh", "-c", 'echo "pid $$"; exec "$0" "$@"', str(WORKLOAD),
               *map(str, args)]
        done = subprocess.run(cmd, capture_output=True, env=full_env, timeout=120)
        text = out.read_text() if out.exists() else ""
    stdout = done.stdout.decode(errors="replace")
    pids = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("pid ")]
    assert len(pids) == 1, stdout
    return text, done.returncode, done.stderr.decode(errors="replace"), pids[0]


def assert_asan_leaks_report(text, pid):
    final = [json.loads(line) for line in text.splitlines() if line.strip()][-1]
    assert final["final"] is True
    (proc,) = final["processes"]
    assert (proc["pid"], proc["alive"], proc["exit_code"]) == (pid, False, 0)
    assert (proc["current_bytes"], proc["current_allocs"]) == (6 * 4096, 6)
    kept = [s for s in proc["sites"] if s["frames"][0]["symbol"] == "step_keep_loss"]
    assert [(s["current_bytes"], s["alloc_count"]) for s in kept] == [(6 * 4096, 6)], proc
    scratch = [s for s in proc["sites"] if s["frames"][0]["symbol"] == "step_activations"]
    assert [(s["verdict"], s["alloc_count"], s["free_count"]) for s in scratch] == [
        ("freed", 12, 12)], proc


def assert_asan_oom_report(text, pid):
    (record,), _ = oom_lines(text)
    assert (record["pid"], record["api"], record["size"], record["error"]) == (
        pid, "cudaMalloc", 4096, 2)
    assert (record["process_bytes"], record["process_allocs"]) == (3 * 4096, 3)
    assert record["frames"][0]["symbol"] == "oom_step"


def assert_asan_top_report(text, pid):
    # The last table is printed once the command has ended: its final numbers.
    last = batch_tables(text)[-1].splitlines()
    (row,) = [line for line in last[2:] if line.split()[:1] == [str(pid)]]
    # CURRENT: the 6 kept buffers; PEAK: 5 kept and one 16 KiB activation, in the last step.
    assert row.split()[2:4] == [str(6 * 4096), str(5 * 4096 + 4 * 4096)], last
    assert row.endswith("workload steps 6 200 4096 <ended>"), last


@pytest.mark.parametrize("view,args,env,check", [
    ("leaks", ["steps", 6, 200, 4096], {}, assert_asan_leaks_report),
    ("oom", ["fail", 4096, 10], {"GPUMEM_MOCK_FAIL_AFTER": "3"}, assert_asan_oom_report),
    ("top", ["steps", 6, 200, 4096], {}, assert_asan_top_report),
])
def test_views_run_clean_under_address_sanitizer_and_report_the_workload(asan_gpumem, view,
                                                                          args, env, check):
    env = dict(env, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0")
    extra = ["-b", "-i", "0.3", "--bytes"] if view == "top" else []
    text, rc, stderr, pid = run_asan_view(asan_gpumem, view, args, env, extra,
                                          json_out=view != "top")
    assert rc == 0, stderr
    for error in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        assert error not in stderr, stderr
    check(text, pid)


def test_top_ui_groups_by_container_and_lists_its_processes(top_screen):
    tmux("send-keys", "-t", SESSION, "c")       # process -> call site
    wait_screen(lambda t: "by call site" in t)
    tmux("send-keys", "-t", SESSION, "c")       # call site -> container
    text = wait_screen(lambda t: "by container" in t and len(rows(t)) == 1)
    # The three workloads share the container (or the host) they were started in.
    (row,) = rows(text)
    assert row.split()[1] == "3", text
    assert "PROCS" in text and "CONTAINER / POD" in text

    tmux("send-keys", "-t", SESSION, "Enter")   # that container's processes
    text = wait_screen(lambda t: "processes (Esc: back)" in t and len(rows(t)) == 3)
    tmux("send-keys", "-t", SESSION, "Escape")
    wait_screen(lambda t: "by container" in t)
