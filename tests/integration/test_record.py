"""gpumem record and gpumem report: the recording's tables hold the numbers the workloads are
known to produce, with named frames; a kill -9 leaves an intact file; reports from the file
(snapshot at a time, leaks, oom, sites) answer as the live views do; sampling keeps what it
must; retention keeps the file from growing; the Nsight-shaped view answers its queries; bad
input is one line and a non-zero exit."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (GPUMEM, MOCK_LIB_ARGS, RUN_TIMEOUT, TRACING_LINE, WORKLOAD, LineReader,
                      assert_nothing_lost, find_proc, oom_lines, site_by_symbol)
from test_serve import Agent, Driven, pin_dir, reset
from test_views import asan_gpumem  # noqa: F401 (a fixture)

NS = 1_000_000_000


@pytest.fixture
def tmp():
    d = Path(tempfile.mkdtemp(prefix="gpumem-rec-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def record_c(db, *args, gpumem_args=(), env=None, stdin=None, timeout=RUN_TIMEOUT):
    """`gpumem record -o db ... -c ARGS`; returns the finished process (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    cmd = [str(GPUMEM), "record", "-o", str(db), *map(str, gpumem_args), "-c",
           *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, input=stdin,
                          timeout=timeout)


def report(db, *args, check=True):
    done = subprocess.run([str(GPUMEM), "report", str(db), *map(str, args)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if check:
        assert done.returncode == 0, done.stderr
        assert done.stderr == "", done.stderr
    return done


def report_json(db, *args):
    return json.loads(report(db, *args, "--json").stdout)


def query(db, sql, *params):
    with sqlite3.connect(db) as c:
        return c.execute(sql, params).fetchall()


def process_row(db, cmdline_part):
    """(id, pid) of the one process whose command line holds cmdline_part."""
    rows = query(db, "SELECT id, pid FROM processes WHERE cmdline LIKE ?",
                 f"%{cmdline_part}%")
    assert len(rows) == 1, rows
    return rows[0]


def gpumem_errors(stderr):
    return [line for line in stderr.splitlines() if line.startswith("gpumem: ") and
            not line.startswith("gpumem: tracing:")]


def assert_spans_cover_every_event(db):
    """Each event lies in one row of event_spans, by id and by time (what a window's query
    relies on, the events having no index on time)."""
    outside = query(db, "SELECT count(*) FROM events e WHERE (SELECT count(*) FROM"
                    " event_spans s WHERE e.id BETWEEN s.first_id AND s.last_id AND"
                    " e.time_ns BETWEEN s.min_time_ns AND s.max_time_ns) != 1")
    assert outside == [(0,)]


class Recorder:
    """A system-wide `gpumem record` in the background, ready once it says it is tracing."""

    def __init__(self, db, *args):
        cmd = [str(GPUMEM), "record", "--no-hold", *MOCK_LIB_ARGS, "-o", str(db),
               *map(str, args)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.stderr = LineReader(self.proc.stderr)
        self.stdout = LineReader(self.proc.stdout)
        try:
            self.stderr.wait_for(TRACING_LINE, 30)
        except BaseException:
            self.kill()
            raise

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(30)
        self.stderr.join()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_record_c_tables_hold_the_workloads_numbers(tmp):
    """leak 5 1000: step_scratch allocates and frees 5 x 1000 B, keep_feature_map keeps 5 x
    1000 B. The tables say so: ten allocations and five frees, each free paired with its
    allocation and site, the process's end and exit code, samples of the final numbers, and
    stacks stored once with their frames named."""
    db = tmp / "leak.db"
    done = record_c(db, WORKLOAD, "leak", 5, 1000)
    assert done.returncode == 0, done.stderr
    assert gpumem_errors(done.stderr) == []
    assert query(db, "PRAGMA journal_mode") == [("wal",)]
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    proc_id, pid = process_row(db, "workload leak 5 1000")
    assert query(db, "SELECT comm, exit_code, end_ns > start_ns FROM processes WHERE id = ?",
                 proc_id) == [("workload", 0, 1)]
    counts = dict(query(db, "SELECT t.name, count(*) FROM events e JOIN event_types t ON"
                        " t.type = e.type WHERE e.process_id = ? GROUP BY t.name", proc_id))
    assert counts == {"alloc": 10, "free": 5, "process_exit": 1}
    # Every free names its allocation (same address, earlier) and the site that allocated.
    pairs = query(db, "SELECT f.addr = a.addr, f.time_ns >= a.time_ns, f.site_id = a.site_id"
                  " FROM events f JOIN events a ON a.id = f.alloc_id WHERE f.type = 2 AND"
                  " f.process_id = ?", proc_id)
    assert pairs == [(1, 1, 1)] * 5
    sites = dict(query(db, "SELECT fr.symbol, ss.current_bytes FROM sites s JOIN frames fr ON"
                       " fr.stack_id = s.stack_id AND fr.idx = 0 JOIN site_samples ss ON"
                       " ss.site_id = s.id AND ss.time_ns = (SELECT max(time_ns) FROM"
                       " site_samples WHERE site_id = s.id) WHERE s.process_id = ?", proc_id))
    assert sites == {"keep_feature_map": 5000, "step_scratch": 0}
    last = query(db, "SELECT current_bytes, current_allocs, peak_bytes, alloc_count,"
                 " free_count, alloc_bytes_total, device_bytes FROM process_samples WHERE"
                 " process_id = ? ORDER BY time_ns DESC LIMIT 1", proc_id)
    assert last == [(5000, 5, 5000, 10, 5, 10000, 5000)]
    frames = query(db, "SELECT fr.symbol, fr.file, fr.line > 0 FROM stacks st JOIN frames fr"
                   " ON fr.stack_id = st.id WHERE fr.idx = 1 AND fr.symbol = 'run_leak'")
    assert frames and all(f[1].endswith("workload.c") and f[2] for f in frames), frames
    # Stored once: as many stack rows as distinct stacks, however many events use them.
    assert query(db, "SELECT count(*) = count(DISTINCT hash) FROM stacks") == [(1,)]
    uses = query(db, "SELECT count(*) FROM events WHERE process_id = ? AND stack_id IS NOT"
                 " NULL", proc_id)[0][0]
    assert uses == 15 and query(db, "SELECT count(*) FROM stacks")[0][0] <= 4


def test_report_snapshot_json_of_a_recording_is_the_live_contract(tmp):
    db = tmp / "leak.db"
    assert record_c(db, WORKLOAD, "leak", 5, 1000).returncode == 0
    _, pid = process_row(db, "workload leak 5 1000")
    snap = report_json(db, "snapshot")
    assert snap["version"] == 1 and set(snap) >= {"time_ns", "processes", "failures", "lost"}
    p = find_proc(snap, pid)
    assert p["alive"] is False and p["exit_code"] == 0
    assert (p["current_bytes"], p["current_allocs"], p["peak_bytes"]) == (5000, 5, 5000)
    assert (p["alloc_count"], p["free_count"], p["alloc_bytes_total"]) == (10, 5, 10000)
    assert p["by_kind"] == {"device": 5000, "managed": 0, "host": 0, "async": 0, "vmm": 0}
    kept = site_by_symbol(p, "keep_feature_map")
    assert (kept["current_bytes"], kept["alloc_count"], kept["free_count"]) == (5000, 5, 0)
    assert [f["symbol"] for f in kept["frames"][:3]] == ["keep_feature_map", "run_leak", "main"]
    assert kept["frames"][0]["file"].endswith("workload.c") and kept["frames"][0]["line"]
    scratch = site_by_symbol(p, "step_scratch")
    assert (scratch["current_bytes"], scratch["alloc_count"], scratch["free_count"]) == (0, 5, 5)
    assert all(v == 0 for v in snap["lost"].values()), snap["lost"]
    text = report(db).stdout    # snapshot is the default view, as a table
    assert "keep_feature_map (workload.c:" in text and str(pid) in text


def rfc3339(ns):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // NS)) + f".{ns % NS:09d}Z"


def local(ns):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns // NS)) + f".{ns % NS:09d}"


def test_report_at_a_time_in_the_middle_gives_the_numbers_of_that_moment(tmp):
    """A system-wide recording of a driven workload: --at each noted instant gives what the
    process held then, between samples too (the events after the last sample replayed)."""
    db = tmp / "at.db"
    rec = Recorder(db)
    w = Driven()
    try:
        w.do("a 1000")
        time.sleep(1.5)
        t1 = time.time_ns()
        time.sleep(1.2)
        w.do("a 2000")
        t2 = time.time_ns()        # within a sample interval of the allocation, most likely
        time.sleep(0.3)
        w.do("b 3000")
        time.sleep(1.5)
        t3 = time.time_ns()
        w.do("f")                   # the 1000 goes
        time.sleep(1.2)
        w.quit()
        time.sleep(0.5)
    finally:
        w.kill()
        rc = rec.stop()
    assert rc == 0, rec.stderr.lines
    held = {}
    for name, at in (("t1", rfc3339(t1)), ("t2", local(t2)), ("t3", rfc3339(t3)),
                     ("end", "end")):
        p = find_proc(report_json(db, "snapshot", "--at", at), w.pid)
        held[name] = (p["current_bytes"], p["current_allocs"], p["alive"])
    assert held == {"t1": (1000, 1, True), "t2": (3000, 2, True), "t3": (6000, 3, True),
                    "end": (5000, 2, False)}
    only = report_json(db, "snapshot", "-p", w.pid)     # system-wide, then one process
    assert [p["pid"] for p in only["processes"]] == [w.pid]
    # Relative to the start: before the workload's first allocation nothing of it is there.
    start = query(db, "SELECT min(start_ns) FROM sessions")[0][0]
    first = query(db, "SELECT min(e.time_ns) FROM events e JOIN processes p ON"
                  " p.id = e.process_id WHERE p.pid = ?", w.pid)[0][0]
    early = report_json(db, "snapshot", "--at", f"+{max(first - start - 10**8, 0) / NS:.3f}s")
    assert all(p["pid"] != w.pid for p in early["processes"])


def test_kill_9_leaves_an_intact_file_with_the_rows_up_to_a_second_before(tmp):
    db = tmp / "killed.db"
    rec = Recorder(db)
    w = Driven()
    try:
        w.do("n 100 4096")
        time.sleep(2)
        w.do("a 7777")
        time.sleep(1.5)
        killed_at = time.time_ns()
        rec.kill()                  # SIGKILL: no commit, no clean-up
        w.quit()
    finally:
        w.kill()
        rec.kill()
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    rows = dict(query(db, "SELECT e.size, count(*) FROM events e JOIN processes p ON"
                      " p.id = e.process_id WHERE p.pid = ? AND e.type = 1 GROUP BY e.size",
                      w.pid))
    assert rows == {4096: 100, 7777: 1}
    last_sample = query(db, "SELECT max(time_ns) FROM samples")[0][0]
    assert last_sample >= killed_at - int(1.5 * NS), (killed_at - last_sample) / NS
    assert_spans_cover_every_event(db)
    assert query(db, "SELECT count(*) FROM sessions WHERE end_ns IS NULL") == [(1,)]
    p = find_proc(report_json(db, "snapshot"), w.pid)
    assert (p["current_bytes"], p["current_allocs"], p["alive"]) == (100 * 4096 + 7777, 101,
                                                                      True)


def test_leaks_from_a_recording_names_the_leaking_site(tmp):
    """steps 40 100 1000: step_keep_loss keeps 1000 B a step, a step every 100 ms."""
    db = tmp / "steps.db"
    assert record_c(db, WORKLOAD, "steps", 40, 100, 1000).returncode == 0
    _, pid = process_row(db, "workload steps 40 100 1000")
    leaks = report_json(db, "leaks")
    assert leaks["final"] is True and leaks["sample_interval_ns"] == NS     # record's -i
    p = find_proc(leaks, pid)
    growing = [s for s in p["sites"] if s["verdict"] == "growing"]
    assert [s["frames"][0]["symbol"] for s in growing] == ["step_keep_loss"], p["sites"]
    assert growing[0]["current_bytes"] == 40 * 1000 and growing[0]["alloc_count"] == 40
    assert 800 <= growing[0]["growth_bytes_per_step"] <= 1200, growing[0]
    assert all(s["verdict"] == "freed" for s in p["sites"] if s not in growing)
    text = report(db, "leaks").stdout
    assert "step_keep_loss (workload.c:" in text and "grew by ~" in text


def test_oom_from_a_recording_shows_the_failure_with_its_context(tmp):
    """driven under GPUMEM_MOCK_FAIL_SIZE: 4 KiB and 8 KiB held, then 2 MB fails."""
    db = tmp / "oom.db"
    done = record_c(db, WORKLOAD, "driven", env={"GPUMEM_MOCK_FAIL_SIZE": "1000000"},
                    stdin="a 4096\nb 8192\na 2000000\nq\n")
    assert done.returncode == 0, done.stderr
    _, pid = process_row(db, "workload driven")
    lines, lost = oom_lines(report(db, "oom", "--json").stdout)
    assert len(lines) == 1, lines
    assert_nothing_lost(lost)
    f = lines[0]
    assert (f["pid"], f["size"], f["error"], f["error_name"]) == (pid, 2000000, 2,
                                                                  "cudaErrorMemoryAllocation")
    assert f["process_bytes"] == 4096 + 8192 and f["process_failed_count"] == 1
    assert f["frames"][0]["symbol"] == "drive_alloc"
    top = {s["frames"][0]["symbol"]: s["current_bytes"] for s in f["top_sites"]
           if s["current_bytes"]}
    assert top == {"drive_alloc": 4096, "drive_other": 8192}
    text = report(db, "oom").stdout
    assert "cudaMalloc(1.9 MiB) = 2 cudaErrorMemoryAllocation" in text, text
    assert "1 failed allocation" in text
    # The snapshot of the file lists it too.
    fails = report_json(db, "snapshot")["failures"]
    assert [(x["pid"], x["size"], x["process_bytes_at_failure"]) for x in fails] == \
        [(pid, 2000000, 12288)]


def test_sites_table_covers_the_window(tmp):
    db = tmp / "sites.db"
    assert record_c(db, WORKLOAD, "steps", 10, 50, 1000).returncode == 0
    _, pid = process_row(db, "workload steps 10 50 1000")
    sites = report_json(db, "sites")
    assert sites["peaks"] == "events"
    mine = [s for s in sites["sites"] if s["pid"] == pid]
    keep = [s for s in mine if s["frames"][0]["symbol"] == "step_keep_loss"]
    scratch = [s for s in mine if s["frames"][0]["symbol"] == "step_activations"]
    # The step's two scratch buffers are made on one line: one site.
    assert len(keep) == 1 and len(scratch) == 1, [s["frames"][0]["symbol"] for s in mine]
    assert (keep[0]["current_bytes"], keep[0]["peak_bytes"], keep[0]["alloc_count"]) == \
        (10000, 10000, 10)
    for s in scratch:   # 4000 B allocated and freed twice a step: 4000 at its peak
        assert (s["current_bytes"], s["peak_bytes"], s["alloc_count"], s["free_count"]) == \
            (0, 4000, 20, 20)
    text = report(db, "sites").stdout
    assert "step_keep_loss (workload.c:" in text and "HELD" in text


def test_sampling_keeps_failures_and_exits_and_pairs_allocations_with_frees(tmp):
    """--sample-events 4: prefree 400 allocates 400 distinct addresses and frees them, storm
    50 fails 50 times. About a quarter of the allocations are kept, each with its free; every
    failure and every process end is kept; the samples stay exact."""
    db = tmp / "sampled.db"
    script = (f"{WORKLOAD} prefree 400 4096 </dev/null; "
              f"GPUMEM_MOCK_FAIL_AFTER=0 {WORKLOAD} storm 50 4096")
    done = record_c(db, "sh", "-c", script, gpumem_args=("--sample-events", 4))
    assert done.returncode == 0, done.stderr
    pre, _ = process_row(db, "workload prefree 400")
    storm, _ = process_row(db, "workload storm 50")
    allocs = query(db, "SELECT id, addr FROM events WHERE process_id = ? AND type = 1", pre)
    frees = query(db, "SELECT alloc_id, addr FROM events WHERE process_id = ? AND type = 2",
                  pre)
    assert 40 <= len(allocs) <= 170, len(allocs)
    assert sorted(frees) == sorted(allocs)      # each kept allocation with its own free
    assert query(db, "SELECT count(*) FROM events WHERE process_id = ? AND type = 3",
                 storm) == [(50,)]
    ends = query(db, "SELECT p.cmdline, p.exit_code FROM events e JOIN processes p ON"
                 " p.id = e.process_id WHERE e.type = 6 AND p.id IN (?, ?)", pre, storm)
    assert len(ends) == 2 and all(code == 0 for _, code in ends), ends
    assert query(db, "SELECT sample_events FROM sessions") == [(4,)]
    last = query(db, "SELECT alloc_count, free_count FROM process_samples WHERE"
                 " process_id = ? ORDER BY time_ns DESC LIMIT 1", pre)
    assert last == [(400, 400)]
    p = [x for x in report_json(db, "snapshot")["processes"] if x["cmdline"] and
         "prefree" in x["cmdline"]][0]
    assert (p["alloc_count"], p["free_count"], p["current_bytes"]) == (400, 400, 0)
    sites = report_json(db, "sites")
    assert sites["peaks"] == "samples"


def file_size(db):
    return sum(os.path.getsize(f"{db}{s}") for s in ("", "-wal") if os.path.exists(f"{db}{s}"))


def test_retention_keeps_the_file_from_growing(tmp):
    """plateau recycles 16 buffers a millisecond apart for ~20 s (about 2,000 events a
    second) under --retention 4s: the file grows for the first seconds, then stays."""
    db = tmp / "ret.db"
    cmd = [str(GPUMEM), "record", "-o", str(db), "--retention", "4s", "-c", str(WORKLOAD),
           "plateau", "20000", "1", "16", "4096"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sizes = []
    try:
        for _ in range(18):
            time.sleep(1)
            sizes.append(file_size(db))
        assert proc.poll() is None, "the workload ended early: the test saw too little"
    finally:
        proc.send_signal(signal.SIGTERM)    # passed on to the workload: both end at once
        proc.wait(60)
    early, late = max(sizes[6:10]), max(sizes[10:])
    assert late <= early * 1.25, sizes
    assert sizes[-1] > 0 and sizes[2] < sizes[6], sizes      # it did grow at first
    span = query(db, "SELECT (max(time_ns) - min(time_ns)) / 1e9, count(*) FROM events")[0]
    assert span[0] < 4 + 3 and span[1] > 2000, span
    assert_spans_cover_every_event(db)
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    assert query(db, "PRAGMA auto_vacuum") == [(2,)]            # incremental


def test_event_spans_find_a_window_of_time_without_an_index_on_it(tmp):
    """2 threads x 20,000 pairs: ~20 spans of 4,096 events. The events' only index is the
    failures'; the spans cover every event, and the window query of docs/recording.md gives
    the rows a scan of every event gives, for windows across the recording."""
    db = tmp / "spans.db"
    done = record_c(db, WORKLOAD, "threads", 2, 20000, 4096)
    assert done.returncode == 0, done.stderr
    indexes = [row[1] for row in query(db, "PRAGMA index_list(events)")]
    assert indexes == ["events_failures"], indexes
    spans = query(db, "SELECT first_id, last_id FROM event_spans ORDER BY first_id")
    assert len(spans) >= 10 and spans[0][0] == 1, spans
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:])), spans
    assert spans[-1][1] == query(db, "SELECT max(id) FROM events")[0][0]
    assert_spans_cover_every_event(db)
    lo, hi = query(db, "SELECT min(time_ns), max(time_ns) FROM events")[0]
    window = ("SELECT e.id FROM events e WHERE e.time_ns BETWEEN :from AND :to AND e.id BETWEEN"
              " (SELECT min(first_id) FROM event_spans WHERE max_time_ns >= :from AND"
              " min_time_ns <= :to) AND (SELECT max(last_id) FROM event_spans WHERE"
              " max_time_ns >= :from AND min_time_ns <= :to) ORDER BY e.id")
    for a, b in ((0, 0.01), (0.3, 0.35), (0.5, 0.9), (0, 1), (0.999, 1)):
        t0, t1 = lo + int((hi - lo) * a), lo + int((hi - lo) * b)
        with sqlite3.connect(db) as c:
            found = c.execute(window, {"from": t0, "to": t1}).fetchall()
        scanned = query(db, "SELECT id FROM events WHERE time_ns BETWEEN ? AND ? ORDER BY id",
                        t0, t1)
        assert found == scanned and found, (a, b, len(found), len(scanned))
    # report's replay reads the rows in id order: a process's bytes are its latest event's
    # by time, its peak the largest
    p = [p for p in report_json(db, "snapshot")["processes"] if p["comm"] == "workload"]
    last, peak = query(db, "SELECT (SELECT process_bytes FROM events WHERE type IN (1, 2, 3)"
                       " ORDER BY time_ns DESC, id DESC LIMIT 1), max(process_bytes) FROM events"
                       " WHERE type IN (1, 2, 3)")[0]
    assert len(p) == 1 and (p[0]["current_bytes"], p[0]["peak_bytes"]) == (last, peak), p


def test_an_appended_session_numbers_its_events_past_every_span(tmp):
    """A span can outlast its last events (the retention deletes by time, and times cross):
    the agent's next session on the file numbers its events past it, so no two spans share
    an id."""
    pins = pin_dir()
    db = tmp / "append.db"
    try:
        for size in (4096, 8192):
            agent = Agent(pins, "--record", db, "-i", "0.5")
            w = Driven()
            try:
                for _ in range(20):
                    w.do(f"a {size}")
                time.sleep(1.5)
                w.quit()
                time.sleep(0.5)
            finally:
                w.kill()
            assert agent.term() == 0, agent.stderr.lines
            if size == 4096:    # the first session's last 10 events gone, not their span
                with sqlite3.connect(db) as c:
                    c.execute("DELETE FROM events WHERE id > (SELECT max(id) - 10 FROM"
                              " events)")
                (gone_to,) = query(db, "SELECT max(last_id) FROM event_spans")[0]
                assert query(db, "SELECT max(id) FROM events")[0][0] == gone_to - 10
    finally:
        reset(pins)
        shutil.rmtree(pins, ignore_errors=True)
    assert query(db, "SELECT min(e.id) FROM events e JOIN processes p ON p.id = e.process_id"
                 " WHERE p.session_id = 2")[0][0] == gone_to + 1
    spans = query(db, "SELECT first_id, last_id FROM event_spans ORDER BY first_id")
    assert len(spans) >= 2 and all(b[0] > a[1] for a, b in zip(spans, spans[1:])), spans
    assert_spans_cover_every_event(db)


def test_nsight_shaped_view_answers_a_query(tmp):
    """The query Nsight Systems users run on CUDA_GPU_MEMORY_USAGE_EVENTS: bytes held per
    process and memory kind, allocations minus deallocations, the kinds by their names."""
    db = tmp / "nsight.db"
    assert record_c(db, WORKLOAD, "leak", 5, 1000).returncode == 0
    _, pid = process_row(db, "workload leak 5 1000")
    rows = query(db, "SELECT k.name, o.name, count(*), sum(e.bytes) FROM"
                 " CUDA_GPU_MEMORY_USAGE_EVENTS e JOIN ENUM_CUDA_MEM_KIND k ON k.id = e.memKind"
                 " JOIN ENUM_CUDA_DEV_MEM_EVENT_OPER o ON o.id = e.memoryOperationType"
                 " WHERE e.globalPid / 0x1000000 % 0x1000000 = ? GROUP BY 1, 2 ORDER BY 2",
                 pid)
    assert rows == [("CUDA_MEMOPR_MEMORY_KIND_DEVICE", "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION",
                     10, 10000),
                    ("CUDA_MEMOPR_MEMORY_KIND_DEVICE", "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION",
                     5, 5000)]
    net = query(db, "SELECT sum(CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END),"
                " min(start) >= 0, count(pc) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE globalPid ="
                " ? * 16777216", pid)
    assert net == [(5000, 1, 15)]
    epoch = query(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    assert abs(epoch - query(db, "SELECT min(start_ns) FROM sessions")[0][0]) < 10 * NS


def test_serve_record_streams_every_allocation_into_the_recording(tmp):
    """serve --record: per-allocation events are on for the agent, and a workload's numbers
    are in the file when the agent stops."""
    pins = pin_dir()
    db = tmp / "agent.db"
    try:
        agent = Agent(pins, "--record", db, "--retention", "1h", "-i", "0.5")
        w = Driven()
        try:
            for _ in range(3):
                w.do("a 4096")
            w.do("f")
            w.quit()
            time.sleep(1.5)
        finally:
            w.kill()
        assert agent.term() == 0, agent.stderr.lines
        assert any(f"recording to {db}" in line for line in agent.stderr.lines)
    finally:
        reset(pins)
        shutil.rmtree(pins, ignore_errors=True)
    rows = dict(query(db, "SELECT e.type, count(*) FROM events e JOIN processes p ON"
                      " p.id = e.process_id WHERE p.pid = ? GROUP BY e.type", w.pid))
    assert rows == {1: 3, 2: 1, 6: 1}, rows
    p = find_proc(report_json(db, "snapshot"), w.pid)
    assert (p["current_bytes"], p["alloc_count"], p["free_count"], p["alive"]) == \
        (8192, 3, 1, False)
    assert query(db, "SELECT command, retention_ns FROM sessions") == [("serve", 3600 * NS)]


# ---- bad input: one clear line, a non-zero exit ----

def one_error(done, *words):
    errors = gpumem_errors(done.stderr)
    assert len(errors) == 1, done.stderr
    for word in words:
        assert word in errors[0], errors
    assert done.returncode != 0


def test_report_of_a_missing_file_is_one_line(tmp):
    one_error(report(tmp / "nothing.db", check=False), "nothing.db", "No such file")


def test_report_of_a_text_file_is_one_line(tmp):
    path = tmp / "notes.db"
    path.write_text("not a database at all\n" * 100)
    one_error(report(path, check=False), "is not a gpumem recording")


def test_report_of_another_programs_database_is_one_line(tmp):
    path = tmp / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE t (a)")
    one_error(report(path, check=False), "not a gpumem recording", "something else")


def test_record_refuses_a_symlink_for_o(tmp):
    target = tmp / "target"
    target.write_text("keep me\n")
    link = tmp / "link.db"
    link.symlink_to(target)
    done = record_c(link, WORKLOAD, "leak", 1, 100)
    one_error(done, "symbolic link")
    assert target.read_text() == "keep me\n"


def test_record_refuses_to_overwrite_a_file_that_is_no_recording(tmp):
    path = tmp / "important.txt"
    path.write_text("keep me\n")
    one_error(record_c(path, WORKLOAD, "leak", 1, 100), "is not a gpumem recording")
    assert path.read_text() == "keep me\n"


def test_record_replaces_an_older_recording(tmp):
    db = tmp / "twice.db"
    assert record_c(db, WORKLOAD, "leak", 1, 100).returncode == 0
    assert record_c(db, WORKLOAD, "leak", 2, 100).returncode == 0
    assert query(db, "SELECT count(*) FROM sessions") == [(1,)]
    assert query(db, "SELECT cmdline FROM processes WHERE cmdline LIKE '%leak%'") == \
        [(f"{WORKLOAD} leak 2 100",)]


def test_a_recording_another_process_writes_is_refused(tmp):
    db = tmp / "busy.db"
    assert record_c(db, WORKLOAD, "leak", 1, 100).returncode == 0
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        one_error(record_c(db, WORKLOAD, "leak", 1, 100), "another process is writing it")
    finally:
        holder.close()


@pytest.mark.parametrize("at", ["yesterday", "25:00", "2026-13-01 00:00", "+", "-10x",
                                "2026-01-01T00:00:00+25:00"])
def test_report_refuses_a_bad_at(tmp, at):
    done = report(tmp / "whatever.db", "--at", at, check=False)
    assert done.returncode == 2
    one_error(done, "--at takes a time", f"'{at}'")


def test_report_refuses_a_time_outside_the_recording(tmp):
    db = tmp / "short.db"
    assert record_c(db, WORKLOAD, "leak", 1, 100).returncode == 0
    one_error(report(db, "--at", "2001-01-01 00:00:00", check=False), "outside the recording")
    one_error(report(db, "sites", "--since", "end", "--until", "start", check=False),
              "--since is after --until")
    wide = report_json(db, "sites", "--since", "2001-01-01 00:00:00", "--until", "+1d")
    assert any(s["frames"][0]["symbol"] == "keep_feature_map" for s in wide["sites"])


def test_report_refuses_an_unknown_view(tmp):
    done = report(tmp / "x.db", "flamegraph", check=False)
    assert done.returncode == 2
    one_error(done, "report shows snapshot, leaks, oom or sites, not 'flamegraph'")


def test_record_needs_o():
    done = subprocess.run([str(GPUMEM), "record", "-c", str(WORKLOAD), "leak", "1", "1"],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == "gpumem: record needs -o FILE.db, the recording to write"


def test_a_full_disk_ends_the_recording_with_one_line_and_exit_1(tmp):
    small = tmp / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        done = record_c(small / "full.db", WORKLOAD, "prefree", 20000, 4096)
        one_error(done, "cannot write the recording", "full")
        assert done.returncode == 1
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_sigterm_while_recording_a_busy_process_still_writes_its_end(tmp):
    """SIGTERM ended every statement of the recorder at once, the last ones of the run too:
    "cannot write the recording: interrupted", exit 1, the session left open. A stop now lets
    the writes finish (5 s of grace) and ends only one that runs on past it."""
    db = tmp / "busy.db"
    proc = subprocess.Popen([str(GPUMEM), "record", "-o", str(db), "--retention", "1h", "-c",
                             str(WORKLOAD), "threads", "2", "200000", "4096"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = LineReader(proc.stderr)
    err.wait_for(TRACING_LINE, 30)
    time.sleep(1.5)     # busy: 2 threads allocating and freeing as fast as they can
    proc.send_signal(signal.SIGTERM)
    proc.wait(RUN_TIMEOUT)
    err.join()
    # The command's status: 0 if it ended first, else the SIGTERM it was passed.
    assert proc.returncode in (0, 128 + signal.SIGTERM), err.lines
    assert not any("cannot write" in line for line in err.lines), err.lines
    ((end,),) = query(db, "SELECT end_ns FROM sessions")
    assert end is not None
    ((events,),) = query(db, "SELECT count(*) FROM events WHERE type = 1")
    assert events > 0


def test_record_and_report_run_clean_under_address_sanitizer(tmp, asan_gpumem):
    """The recorder (with sampling and retention) and every report view, under ASan and UBSan
    with leak detection: no error, and the numbers of steps 6 200 4096."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               GPUMEM_MOCK_FAIL_SIZE="100000000")
    db = tmp / "asan.db"
    script = f"{WORKLOAD} steps 6 200 4096; {WORKLOAD} driven <<EOF\na 200000000\nq\nEOF"
    runs = [subprocess.run([str(asan_gpumem), "record", "-o", str(db), "--retention", "1h",
                            "--sample-events", "2", "-c", "sh", "-c", script],
                           capture_output=True, text=True, env=env, timeout=120)]
    for view in ("snapshot", "leaks", "oom", "sites"):
        for json_out in ([], ["--json"]):
            runs.append(subprocess.run([str(asan_gpumem), "report", str(db), view, *json_out],
                                       capture_output=True, text=True, env=env, timeout=120))
    # The exports replay it too, chrome's reports moving one state forward (a cursor).
    for fmt, args in (("chrome", ["-i", "0.05"]), ("memviz", []), ("pprof", []),
                      ("folded", [])):
        runs.append(subprocess.run([str(asan_gpumem), "export", "--format", fmt, *args, "-o",
                                    str(tmp / f"asan.{fmt}"), str(db)],
                                   capture_output=True, text=True, env=env, timeout=120))
    for done in runs:
        assert done.returncode == 0, done.stderr
        for error in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            assert error not in done.stderr, done.stderr
    snap = json.loads(runs[2].stdout)
    (steps,) = [p for p in snap["processes"] if p["cmdline"] and "steps 6" in p["cmdline"]]
    assert (steps["current_bytes"], steps["alloc_count"], steps["free_count"]) == \
        (6 * 4096, 18, 12)
    assert [f["size"] for f in snap["failures"]] == [200000000]


def test_serve_record_appends_a_session_when_the_agent_restarts(tmp):
    """An agent killed with SIGKILL and started again on the same pins and file: the file is
    intact, a second session follows the first, and a process that lived through the restart
    is in both, its numbers exact at the end (the kernel's maps kept counting). What happened
    while no agent ran waited in the pinned ring buffer: the next agent records it."""
    pins = pin_dir()
    db = tmp / "agent.db"
    try:
        agent = Agent(pins, "--record", db, "-i", "0.5")
        w = Driven()
        try:
            w.do("a 4096")
            time.sleep(1.5)
            agent.kill()                # SIGKILL
            w.do("b 8192")              # while no agent runs
            agent = Agent(pins, "--record", db, "-i", "0.5")
            w.do("a 1000")
            time.sleep(1.5)
            w.quit()
            time.sleep(1)
        finally:
            w.kill()
        assert agent.term() == 0, agent.stderr.lines
    finally:
        reset(pins)
        shutil.rmtree(pins, ignore_errors=True)
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    sessions = query(db, "SELECT id, end_ns IS NOT NULL FROM sessions ORDER BY id")
    assert sessions == [(1, 1), (2, 1)], sessions
    rows = query(db, "SELECT session_id, end_ns IS NOT NULL FROM processes WHERE pid = ?"
                 " ORDER BY session_id", w.pid)
    assert rows == [(1, 1), (2, 1)], rows
    sizes = query(db, "SELECT p.session_id, e.size FROM events e JOIN processes p ON"
                  " p.id = e.process_id WHERE p.pid = ? AND e.type = 1 ORDER BY e.time_ns",
                  w.pid)
    assert sizes == [(1, 4096), (2, 8192), (2, 1000)], sizes
    last = [p for p in report_json(db, "snapshot")["processes"] if p["pid"] == w.pid]
    assert [(p["alive"], p["current_bytes"]) for p in last][-1] == (False, 4096 + 8192 + 1000)


def test_a_killed_agents_session_ends_after_the_last_event_it_wrote(tmp):
    """F9: a session an agent left open (kill -9) ended at its last sample, so the events it
    wrote after that sample (it commits them every half second, samples far less often) were
    timed after their process's end, and peaks replayed allocations of no process."""
    pins = pin_dir()
    db = tmp / "agent.db"
    try:
        agent = Agent(pins, "--record", db, "-i", "30")
        w = Driven()
        try:
            time.sleep(1)
            for _ in range(5):
                w.do("a 4096")
            time.sleep(1.5)             # committed, and no sample since the first
            agent.kill()
            agent = Agent(pins, "--record", db, "-i", "30")
            w.quit()
        finally:
            w.kill()
        assert agent.term() == 0, agent.stderr.lines
    finally:
        reset(pins)
        shutil.rmtree(pins, ignore_errors=True)
    written = query(db, "SELECT count(*) FROM events e JOIN processes p ON p.id = e.process_id"
                    " WHERE p.pid = ? AND p.session_id = 1 AND e.type = 1", w.pid)
    assert written == [(5,)], "the first agent committed its events before the kill"
    late = query(db, "SELECT p.session_id, p.end_ns, max(e.time_ns) FROM events e JOIN"
                 " processes p ON p.id = e.process_id GROUP BY p.id"
                 " HAVING max(e.time_ns) > p.end_ns")
    assert late == [], late
    assert query(db, "SELECT count(*) FROM sessions s WHERE end_ns < (SELECT max(e.time_ns)"
                 " FROM events e JOIN processes p ON p.id = e.process_id"
                 " WHERE p.session_id = s.id)") == [(0,)]


def test_serve_record_losses_are_the_recordings_across_its_sessions(tmp):
    """An agent's losses in a file it appends to: a session on new pins (after --reset) adds its
    counts to those before it, where its counters began at zero; one that adopted its pins
    goes on from them (the kernel's counters are the recording's already), not counting them
    twice. --max-allocs 64: 200 kept allocations overflow the table, each session alike."""
    pins = pin_dir()
    db = tmp / "agent.db"

    def session(reset_first):
        if reset_first:
            reset(pins)
        agent = Agent(pins, "--record", db, "-i", "0.5", "--max-allocs", "64")
        try:
            done = subprocess.run([str(WORKLOAD), "leak", "200", "4096"], capture_output=True,
                                  timeout=RUN_TIMEOUT)
            assert done.returncode == 0, done.stderr
            time.sleep(1.5)     # a sample past the workload's end
        finally:
            assert agent.term() == 0, agent.stderr.lines
        kernel = query(db, "SELECT value FROM tracer_stats WHERE name LIKE"
                       " 'kernel.%.alloc_map_full' ORDER BY time_ns DESC LIMIT 1")
        return report_json(db)["lost"]["alloc_map_full"], kernel[0][0] if kernel else 0

    try:
        first, raw1 = session(False)
        second, raw2 = session(True)    # new pins: counted from zero, added on
        third, raw3 = session(False)    # adopted pins: the same counters, not counted twice
    finally:
        reset(pins)
        shutil.rmtree(pins, ignore_errors=True)
    # The agents trace the whole host: another program's allocations fill the table too.
    if not raw1 == first == raw2 == raw3 - raw2 > 0:
        pytest.skip(f"other programs' allocations overflowed the agents' table too (each "
                    f"session's own count, {first}, {raw2}, {raw3 - raw2}, differs)")
    assert second == first + raw2, (first, second, raw2)
    assert third == second + (raw3 - raw2), (second, third, raw2, raw3)
