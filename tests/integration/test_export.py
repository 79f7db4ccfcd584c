"""`gpumem export`: each format read back by the tool people use it with, with the numbers and
function names the workload is known to produce — pprof by `go tool pprof -top` and `-traces`,
folded stacks by speedscope in headless Chromium, Chrome trace JSON by a schema check of its
events, memviz by Python's pickle and a replay of its trace against its segments. A consumer
that is not installed makes its test skip and say why."""
import functools
import http.server
import json
import os
import pickle
import pickletools
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import (GPUMEM, MOCK_LIB_ARGS, ROOT, RUN_TIMEOUT, START_TIMEOUT, STOP_TIMEOUT,
                      TRACING_LINE, WORKLOAD, LineReader, Workload)

KEEP_STACK = ["keep_feature_map", "run_leak", "main"]   # leak's site that keeps its buffer


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


def export_c(fmt, out, args, stdin="", env=None, gpumem_args=()):
    """`gpumem export --format fmt -o out -c WORKLOAD args`; returns (exit code, stdout,
    stderr) after checking that gpumem exited with the workload's status 0."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    cmd = [str(GPUMEM), "export", "--format", fmt, "-o", str(out), *gpumem_args, "-c",
           str(WORKLOAD), *map(str, args)]
    done = subprocess.run(cmd, input=stdin.encode(), capture_output=True, env=full_env,
                          timeout=RUN_TIMEOUT)
    stdout, stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}; stderr: {stderr}"
    return stdout, stderr


def ready_pid(stdout):
    """The pid the workload printed with --wait ("ready PID")."""
    found = re.search(r"^ready (\d+)$", stdout, re.MULTILINE)
    assert found, stdout
    return int(found.group(1))


# ---- pprof, read by go tool pprof ----

def go_tool():
    go = shutil.which("go")
    if not go:
        pytest.skip("go is not installed (Debian golang-go: scripts/deps.sh installs it); "
                    "go tool pprof reads the pprof export")
    return go


def pprof(*args):
    """`go tool pprof ARGS` (offline: the profile names every function already)."""
    done = subprocess.run([go_tool(), "tool", "pprof", *map(str, args)], capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode(errors="replace")


def pprof_top(path, *args):
    """{function: (flat, cum)} from -top, in the unit asked for (-unit=B: bytes as '5000B')."""
    rows = {}
    for line in pprof("-top", *args, path).splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1].endswith("%") and parts[4].endswith("%"):
            rows[" ".join(parts[5:])] = (parts[0], parts[3])
    return rows


def pprof_total(path, *args):
    """What the samples -top shows (those -tagfocus/-tagignore keep) add up to."""
    found = re.search(r"accounting for (\S+), ", pprof("-top", *args, path))
    assert found
    return found.group(1)


def pprof_traces(path, *args):
    """The samples of -traces: [{"labels": {k: v}, "value": V, "frames": [leaf..root]}]."""
    samples = []
    for block in pprof("-traces", *args, path).split("-----------+")[1:]:
        labels, frames, value = {}, [], None
        for line in block.splitlines()[1:]:
            label = re.match(r"^\s+(\w+):\s+(.*)$", line)
            if label and value is None:
                labels[label.group(1)] = label.group(2).strip()
            elif line.strip() and value is None:
                value, name = line.split(None, 1)
                frames.append(name.strip())
            elif line.strip():
                frames.append(line.strip())
        if value is not None:
            samples.append({"labels": labels, "value": value, "frames": frames})
    return samples


def test_pprof_keeps_every_frame_of_a_deep_stack(tmp):
    """40 levels of two frames each (one inlined): 86 frames, each a location of the sample,
    where the export kept the innermost 64 and dropped the rest, main's side, unsaid."""
    out, snap = tmp / "deep.pb.gz", tmp / "deep.json"
    export_c("pprof", out, ["deep", 40, 4096])
    done = subprocess.run([str(GPUMEM), "snapshot", "--json", "-o", str(snap), "-c",
                           str(WORKLOAD), "deep", "40", "4096"], capture_output=True,
                          timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    (site,) = [s for p in json.loads(snap.read_text())["processes"] for s in p["sites"]]
    (sample,) = [t for t in pprof_traces(out) if t["value"] != "0"]
    assert len(site["frames"]) > 64 and len(sample["frames"]) == len(site["frames"]), \
        (len(site["frames"]), sample["frames"])
    assert sample["frames"][-1] == "_start", sample["frames"][-3:]


def test_exported_files_carry_what_their_source_lost(tmp):
    """--max-allocs 64 for 200 kept allocations: the loss goes with the file, a pprof comment
    and chrome's otherData.lost, the same numbers as on stderr."""
    pb, trace = tmp / "lost.pb.gz", tmp / "lost.json"
    _, stderr = export_c("pprof", pb, ["leak", 200, 4096], gpumem_args=["--max-allocs", "64"])
    (said,) = [l for l in stderr.splitlines() if l.startswith("lost: alloc_map_full=")]
    full = re.search(r"alloc_map_full=(\d+)", said).group(1)
    comments = pprof("-comments", pb)
    assert f"lost: alloc_map_full={full}, unknown_frees=" in comments, comments
    export_c("chrome", trace, ["leak", 200, 4096], gpumem_args=["--max-allocs", "64"])
    lost = json.loads(trace.read_text())["otherData"]["lost"]
    assert lost["alloc_map_full"] > 0 and lost["unknown_frees"] > 0, lost


def test_pprof_leak_top_shows_the_kept_site_with_exact_bytes_and_counts(tmp):
    out = tmp / "leak.pb.gz"
    export_c("pprof", out, ["leak", 5, 1000])
    assert out.read_bytes()[:2] == b"\x1f\x8b"      # gzip, as pprof writes it
    top = pprof_top(out, "-unit=B")                  # inuse_space, the default sample type
    assert top["keep_feature_map"] == ("5000B", "5000B")
    assert top["main"] == ("0", "5000B")
    assert "step_scratch" not in top                 # it held nothing at the end
    assert pprof_total(out, "-unit=B") == "5000B"
    objects = pprof_top(out, "-sample_index=inuse_objects")
    assert objects["keep_feature_map"][0] == "5"
    space = pprof_top(out, "-sample_index=alloc_space", "-unit=B")
    assert space["keep_feature_map"][0] == "5000B" and space["step_scratch"][0] == "5000B"
    assert pprof_total(out, "-sample_index=alloc_space", "-unit=B") == "10000B"
    allocs = pprof_top(out, "-sample_index=alloc_objects")
    assert allocs["keep_feature_map"][0] == "5" and allocs["step_scratch"][0] == "5"


def test_pprof_traces_carry_the_process_labels_and_the_named_stack(tmp):
    out = tmp / "threads.pb.gz"
    stdout, _ = export_c("pprof", out, ["--wait", "threads", 4, 10, 1000], stdin="\n")
    pid = ready_pid(stdout)
    samples = pprof_traces(out, "-sample_index=alloc_objects")
    by_site = {s["frames"][0]: s for s in samples}
    assert set(by_site) == {"thread_churn", "thread_keep"}, samples
    assert by_site["thread_churn"]["value"] == "40" and by_site["thread_keep"]["value"] == "4"
    for s in samples:
        assert s["labels"]["pid"] == str(pid)
        assert s["labels"]["comm"] == "workload"
        assert s["labels"]["api"] == "cudaMalloc" and s["labels"]["kind"] == "device"
        assert s["frames"][1] == "thread_main", s["frames"]
    inuse = pprof_traces(out, "-unit=B")
    assert {s["frames"][0]: s["value"] for s in inuse} == {"thread_churn": "0",
                                                           "thread_keep": "4000B"}


def test_pprof_strings_a_process_names_reach_pprof_sanitized(tmp):
    """A program at a path with a newline and a terminal escape in it: every string of the
    profile (mapping and source file names, labels, as the function names were) comes out with
    control characters replaced, so -raw keeps one line per location and -traces writes no
    escape to the terminal."""
    where = tmp / "bin\n\x1b]0;TITLE\x07\x1b[2J"
    where.mkdir()
    program = where / "workload"
    shutil.copy(WORKLOAD, program)
    (where / "lib").symlink_to(WORKLOAD.parent / "lib")    # its RUNPATH: $ORIGIN/lib
    out = tmp / "p.pb.gz"
    done = subprocess.run([str(GPUMEM), "export", "--format", "pprof", "-o", str(out), "-c",
                           str(program), "reuse", "4096"], capture_output=True,
                          timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    for view in ("-raw", "-traces"):
        text = pprof(view, out)
        assert "\x1b" not in text and "\x07" not in text, view
    raw = pprof("-raw", out)
    assert "bin??]0;TITLE??[2J/workload" in raw, raw


def test_pprof_kind_label_separates_pinned_host_memory(tmp):
    out = tmp / "kinds.pb.gz"
    export_c("pprof", out, ["kinds"])
    host = pprof_top(out, "-unit=B", "-tagfocus=kind=host")
    assert host["kind_host_alloc"][0] == "5000B"     # cudaHostAlloc, never freed
    assert pprof_total(out, "-unit=B", "-tagfocus=kind=host") == "5000B"
    # pitch 1024 x 10, managed 3000, pool 8000 and pool_ptsz 9000 are held; the rest freed
    assert pprof_total(out, "-unit=B", "-tagignore=kind=host") == "30240B"


# ---- folded, read by speedscope in headless Chromium ----

def folded_lines(path):
    lines = {}
    for line in path.read_text().splitlines():
        stack, weight = line.rsplit(" ", 1)
        assert stack not in lines, f"one line per distinct stack: {line}"
        lines[stack] = int(weight)
    return lines


def test_folded_is_one_line_per_stack_weighted_by_bytes_held_root_first(tmp):
    out = tmp / "leak.folded"
    stdout, _ = export_c("folded", out, ["--wait", "leak", 5, 1000], stdin="\n")
    pid = ready_pid(stdout)
    lines = folded_lines(out)
    assert len(lines) == 1, lines                    # step_scratch holds nothing at the end
    (stack, weight), = lines.items()
    frames = stack.split(";")
    assert weight == 5000
    assert frames[:2] == ["workload", f"pid {pid}"]
    assert frames[-3:] == list(reversed(KEEP_STACK))


def test_folded_sums_sites_per_process_and_leaves_out_freed_memory(tmp):
    out = tmp / "driven.folded"
    export_c("folded", out, ["driven"], stdin="a 1000\na 3000\nb 2000\nf\nq\n")
    by_leaf = {stack.split(";")[-1]: w for stack, w in folded_lines(out).items()}
    assert by_leaf == {"drive_alloc": 3000, "drive_other": 2000}


class SandwichTable(HTMLParser):
    """The rows of speedscope's sandwich view: [total, self, symbol] cell texts."""

    def __init__(self):
        super().__init__()
        self.rows, self.title = [], ""
        self._row = self._cell = None
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = ""
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row:
            self.rows.append(self._row)
            self._row = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_title:
            self.title += data


def speedscope_release():
    """The directory of speedscope's web app, installed by tests/speedscope.sh."""
    done = subprocess.run([str(ROOT / "tests" / "speedscope.sh")], capture_output=True,
                          timeout=300)
    if done.returncode != 0:
        pytest.skip("speedscope could not be installed from npm: " +
                    done.stderr.decode(errors="replace").strip()[-300:])
    return Path(done.stdout.decode().strip())


def serve(directory):
    """A loopback HTTP server for directory, on a port of its own; returns (server, port)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def speedscope_dom(folded, tmp):
    """speedscope's page once it has loaded `folded` in its sandwich view, as headless
    Chromium renders it (--dump-dom after the page's scripts ran)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (Debian chromium: scripts/deps.sh installs "
                    "it); speedscope runs in it to read the folded export")
    site = tmp / "site"
    shutil.copytree(speedscope_release(), site)
    shutil.copy(folded, site / folded.name)
    server, port = serve(site)
    try:
        url = (f"http://127.0.0.1:{port}/index.html#profileURL="
               f"http://127.0.0.1:{port}/{folded.name}&view=sandwich")
        # A loaded CI host can dump the DOM before speedscope has drawn its table (seen once
        # in a fresh-clone run): the page is loaded again, at most three times in all.
        for attempt in range(3):
            done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                   f"--user-data-dir={tmp / f'chromium{attempt}'}",
                                   "--no-first-run", "--virtual-time-budget=15000",
                                   "--dump-dom", url], capture_output=True, timeout=120)
            assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
            page = SandwichTable()
            page.feed(done.stdout.decode(errors="replace"))
            if page.rows:
                break
    finally:
        server.shutdown()
    return page


def weight(cell):
    """'5,000 (100%)' -> 5000"""
    return int(cell.split(" ")[0].replace(",", ""))


def test_folded_loads_in_speedscope_with_the_frames_and_their_weights(tmp):
    out = tmp / "gpumem-leak.folded"
    export_c("folded", out, ["driven"], stdin="a 1000\na 3000\nb 2000\nf\nq\n")
    page = speedscope_dom(out, tmp)
    assert page.title.strip() == "gpumem-leak.folded - speedscope", page.title
    rows = {row[2]: (weight(row[0]), weight(row[1])) for row in page.rows if len(row) == 3}
    # the sandwich view lists every function with its total and self weight
    assert "drive_alloc" in rows, (page.rows, out.read_text())
    assert rows["drive_alloc"] == (3000, 3000), rows
    assert rows["drive_other"] == (2000, 2000), rows
    assert rows["run_driven"] == (5000, 0), rows
    assert rows["workload"] == (5000, 0), rows


# ---- chrome trace-event JSON ----

def check_trace_schema(trace):
    """The trace-event format as Perfetto and chrome://tracing read it: every event has a
    name, a phase, a pid and a timestamp in microseconds; counters carry numbers."""
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    for e in trace["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"], e
        assert e["ph"] in ("M", "C", "i"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        assert isinstance(e["args"], dict), e
        if e["ph"] == "M":
            assert e["name"] == "process_name" and isinstance(e["args"]["name"], str)
        elif e["ph"] == "C":
            assert set(e["args"]) == {"bytes"} and isinstance(e["args"]["bytes"], int), e
        else:
            assert e["s"] == "t", e
            assert {"api", "size", "error", "error_name", "site"} <= set(e["args"]), e


def counter_values(trace, pid, name):
    events = [e for e in trace["traceEvents"]
              if e["ph"] == "C" and e["pid"] == pid and e["name"] == name]
    return [e["args"]["bytes"] for e in sorted(events, key=lambda e: e["ts"])]


def test_chrome_trace_has_process_and_site_counters_and_failure_instants(tmp):
    out = tmp / "driven.json"
    stdout, _ = export_c("chrome", out, ["--wait", "driven"],
                         stdin="\na 1000\nb 2000\nf\na 5000000\nq\n",
                         env={"GPUMEM_MOCK_FAIL_SIZE": "4000000"})
    pid = ready_pid(stdout)
    trace = json.loads(out.read_text())
    check_trace_schema(trace)
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"]
    assert names == [f"workload ({pid})"]
    # the kernel's count after each call, then 0 when the process ends
    assert counter_values(trace, pid, "GPU memory") == [1000, 3000, 2000, 0]
    sites = {e["name"] for e in trace["traceEvents"] if e["ph"] == "C"} - {"GPU memory"}
    by_leaf = {name.split()[1]: name for name in sites}
    assert set(by_leaf) == {"drive_alloc", "drive_other"}, sites
    assert counter_values(trace, pid, by_leaf["drive_alloc"]) == [1000, 0]
    assert counter_values(trace, pid, by_leaf["drive_other"]) == [2000, 0]
    fails = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert len(fails) == 1, fails
    assert fails[0]["pid"] == pid and fails[0]["name"] == "cudaMalloc failed"
    assert fails[0]["args"]["size"] == 5000000 and fails[0]["args"]["error"] == 2
    assert (fails[0]["args"]["error_name"], fails[0]["args"]["vendor"]) == \
        ("cudaErrorMemoryAllocation", "nvidia")
    assert fails[0]["args"]["site"].startswith("drive_alloc <- run_driven")


def test_chrome_trace_of_a_live_run_ended_by_duration(tmp):
    out = tmp / "live.json"
    cmd = [str(GPUMEM), "export", "--format", "chrome", "-o", str(out), "--no-hold", "-d", "3",
           "-i", "0.2", *MOCK_LIB_ARGS]
    gpumem = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    err = LineReader(gpumem.stderr)
    try:
        err.wait_for(TRACING_LINE, START_TIMEOUT)
        with Workload("hold", 4096) as w:
            w.wait_for("holding")
            rc = gpumem.wait(STOP_TIMEOUT)      # -d 3 ends it while the workload holds
            w.finish()
    finally:
        if gpumem.poll() is None:
            gpumem.kill()
            gpumem.wait(10)
    assert rc == 0, err.lines
    trace = json.loads(out.read_text())
    check_trace_schema(trace)
    values = counter_values(trace, w.pid, "GPU memory")
    # the allocation's event, then the 0.2 s samples of the living process: 4096 every time
    assert values[0] == 4096 and len(values) >= 3 and set(values) == {4096}, values


# ---- memviz: PyTorch's memory snapshot pickle ----

# The opcodes PyTorch's MemoryViz.js unpickler reads (torch/utils/viz/MemoryViz.js).
MEMORY_VIZ_OPCODES = {
    "PROTO", "STOP", "EMPTY_DICT", "EMPTY_LIST", "MARK", "SETITEMS", "SETITEM", "APPENDS",
    "APPEND", "BINUNICODE", "SHORT_BINUNICODE", "BININT", "BININT1", "BININT2", "LONG1",
    "NONE", "NEWTRUE", "NEWFALSE", "BINPUT", "BINGET", "LONG_BINPUT", "LONG_BINGET",
    "MEMOIZE", "FRAME", "BINFLOAT", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_TUPLE",
    "LIST", "DICT"}


def load_memviz(directory, pid):
    path = directory / f"{pid}-workload.pickle"
    assert path.exists(), list(directory.iterdir())
    data = path.read_bytes()
    used = {op.name for op, _, _ in pickletools.genops(data)}
    assert used <= MEMORY_VIZ_OPCODES, used - MEMORY_VIZ_OPCODES
    return pickle.loads(data)


def replay(snapshot):
    """Replays device 0's trace from nothing, as memory_viz does backwards from the segments:
    every free matches a live allocation, every block lies in a live segment, and what is live
    at the end is exactly the snapshot's segments and blocks. Returns the live blocks."""
    segments, blocks = {}, {}
    for e in snapshot["device_traces"][0]:
        addr = e.get("addr")
        if e["action"] == "segment_alloc":
            assert addr not in segments
            segments[addr] = e["size"]
        elif e["action"] == "alloc":
            assert any(s <= addr and addr + e["size"] <= s + n for s, n in segments.items())
            blocks[addr] = e["size"]
        elif e["action"] == "free_requested":
            assert blocks.get(addr) == e["size"], e
        elif e["action"] == "free_completed":
            assert blocks.pop(addr) == e["size"], e
        elif e["action"] == "segment_free":
            assert segments.pop(addr) == e["size"], e
            assert not any(addr <= b < addr + e["size"] for b in blocks), e
        else:
            assert e["action"] == "oom", e
    final_segments = {s["address"]: s["total_size"] for s in snapshot["segments"]}
    final_blocks = {}
    for s in snapshot["segments"]:
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]   # blocks tile it
        assert s["device"] == 0 and s["stream"] == 0
        for b in s["blocks"]:
            assert b["state"] == "active_allocated"
            final_blocks[b["address"]] = b["size"]
    assert final_segments == segments and final_blocks == blocks
    return snapshot["segments"]


def frame_names(frames):
    return [f["name"] for f in frames]


def test_memviz_pickle_replays_consistently_with_its_segments(tmp):
    out = tmp / "memviz"
    stdout, _ = export_c("memviz", out, ["--wait", "driven"],
                         stdin="\na 1000\nb 2000\na 3000\nf\na 5000000\nq\n",
                         env={"GPUMEM_MOCK_FAIL_SIZE": "4000000"})
    pid = ready_pid(stdout)
    snap = load_memviz(out, pid)
    assert [p.name for p in out.iterdir()] == [f"{pid}-workload.pickle"]
    segments = replay(snap)
    assert sorted(s["total_size"] for s in segments) == [2000, 3000]
    for s in segments:
        leaf = "drive_other" if s["total_size"] == 2000 else "drive_alloc"
        assert frame_names(s["blocks"][0]["frames"])[:2] == [leaf, "run_driven"]
        assert all(isinstance(f["filename"], str) and isinstance(f["line"], int)
                   for f in s["blocks"][0]["frames"])
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert actions == ["segment_alloc", "alloc"] * 3 + \
        ["free_requested", "free_completed", "segment_free", "oom"]
    oom = snap["device_traces"][0][-1]
    assert oom["size"] == 5000000 and "device_free" in oom
    assert frame_names(oom["frames"])[0] == "drive_alloc"
    assert snap["gpumem"]["pid"] == pid and snap["gpumem"]["unmatched_frees"] == 0


def test_memviz_threads_interleaved_frees_still_replay(tmp):
    out = tmp / "memviz"
    stdout, _ = export_c("memviz", out, ["--wait", "threads", 4, 25, 4096], stdin="\n")
    snap = load_memviz(out, ready_pid(stdout))
    segments = replay(snap)
    assert len(segments) == 4 and {s["total_size"] for s in segments} == {4096}
    assert {frame_names(s["frames"])[0] for s in segments} == {"thread_keep"}
    assert len(snap["device_traces"][0]) == 4 * 25 * 5 + 4 * 2


# ---- the command line ----

def run_gpumem(*args):
    done = subprocess.run([str(GPUMEM), *map(str, args)], capture_output=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr.decode(errors="replace")


def test_export_needs_a_format_and_an_output():
    rc, err = run_gpumem("export", "-o", "/tmp/x", "-c", "true")
    assert rc == 2 and "export needs --format F" in err
    rc, err = run_gpumem("export", "--format", "pprof", "-c", "true")
    assert rc == 2 and "export needs -o OUT" in err
    rc, err = run_gpumem("export", "--format", "svg", "-o", "/tmp/x")
    assert rc == 2 and "--format takes pprof, folded, chrome or memviz, not 'svg'" in err
    rc, err = run_gpumem("export", "--format", "pprof", "-o", "/tmp/x", "--json")
    assert rc == 2 and "export does not take --json" in err
    rc, err = run_gpumem("export", "--format", "memviz", "-o", "/tmp/x", "-i", "1")
    assert rc == 2 and "-i applies to --format chrome only" in err


# ---- from a recording (gpumem record): the same files as live ----

def record_c(db, args, stdin="", env=None):
    """`gpumem record -o db -c WORKLOAD args`; returns the workload's stdout."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    cmd = [str(GPUMEM), "record", "-o", str(db), "-c", str(WORKLOAD), *map(str, args)]
    done = subprocess.run(cmd, input=stdin.encode(), capture_output=True, env=full_env,
                          timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode(errors="replace")


def export_db(fmt, out, db):
    rc, err = run_gpumem("export", "--format", fmt, "-o", out, db)
    assert rc == 0, err


def test_pprof_and_folded_from_a_recording_have_the_live_numbers(tmp):
    db = tmp / "leak.db"
    stdout = record_c(db, ["--wait", "leak", 5, 1000], stdin="\n")
    pid = ready_pid(stdout)
    export_db("pprof", tmp / "rec.pb.gz", db)
    top = pprof_top(tmp / "rec.pb.gz", "-unit=B")
    assert top["keep_feature_map"] == ("5000B", "5000B")
    assert pprof_total(tmp / "rec.pb.gz", "-sample_index=alloc_space", "-unit=B") == "10000B"
    export_db("folded", tmp / "rec.folded", db)
    (stack, weight), = folded_lines(tmp / "rec.folded").items()
    assert weight == 5000
    assert stack.split(";")[:2] == ["workload", f"pid {pid}"]
    assert stack.split(";")[-3:] == list(reversed(KEEP_STACK))


def test_chrome_and_memviz_from_a_recording_replay_its_events(tmp):
    db = tmp / "driven.db"
    stdout = record_c(db, ["--wait", "driven"], stdin="\na 1000\nb 2000\nf\na 5000000\nq\n",
                      env={"GPUMEM_MOCK_FAIL_SIZE": "4000000"})
    pid = ready_pid(stdout)
    export_db("chrome", tmp / "rec.json", db)
    trace = json.loads((tmp / "rec.json").read_text())
    check_trace_schema(trace)
    assert counter_values(trace, pid, "GPU memory")[:3] == [1000, 3000, 2000]
    fails = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert len(fails) == 1 and fails[0]["args"]["size"] == 5000000
    export_db("memviz", tmp / "memviz", db)
    snap = load_memviz(tmp / "memviz", pid)
    assert sorted(s["total_size"] for s in replay(snap)) == [2000]
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert actions == ["segment_alloc", "alloc"] * 2 + \
        ["free_requested", "free_completed", "segment_free", "oom"]


def idle_day(db):
    """What an agent adds to its recording over a day with nothing to record: its session goes
    on, a sample tick a second (no process or site sample: no number changed)."""
    with sqlite3.connect(db) as c:
        c.execute("UPDATE sessions SET end_ns = end_ns + 86400 * 1000000000")
        c.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
                  " WHERE i < 86400) INSERT OR IGNORE INTO samples SELECT"
                  " (SELECT max(time_ns) FROM samples) + i * 1000000000, 1 FROM n")


def test_an_idle_day_exports_as_its_events_and_sigterm_ends_a_long_export(tmp):
    """Slow export: the state was read again at every sample, 1-second apart: a day with 8
    events took 21 s and SIGTERM could not end it. The states now move forward from one report
    to the next by the events between; a signal ends the export at the instant reached, written,
    with 128 + the signal."""
    db = tmp / "driven.db"
    stdout = record_c(db, ["--wait", "driven"], stdin="\na 1000\nb 2000\nf\nq\n")
    pid = ready_pid(stdout)
    export_db("chrome", tmp / "short.json", db)
    idle_day(db)
    export_db("chrome", tmp / "day.json", db)
    short, day = (json.loads((tmp / f).read_text()) for f in ("short.json", "day.json"))
    check_trace_schema(day)
    assert counter_values(day, pid, "GPU memory") == counter_values(short, pid, "GPU memory")
    assert counter_values(day, pid, "GPU memory")[:3] == [1000, 3000, 2000]

    # A report every millisecond of the day: 86 million of them.
    out = tmp / "long.json"
    proc = subprocess.Popen([str(GPUMEM), "export", "--format", "chrome", "-i", "0.001", "-o",
                             str(out), str(db)], stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=STOP_TIMEOUT)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert re.search(r"stopped [0-9.]+ s into the recording's 864[0-9]{2}\.[0-9]+ s: the "
                     r"output ends there", err), err
    trace = json.loads(out.read_text())
    check_trace_schema(trace)
    held = counter_values(trace, pid, "GPU memory")     # one a millisecond: the changes
    assert [v for i, v in enumerate(held) if i == 0 or held[i - 1] != v][:3] == \
        [1000, 3000, 2000]


def test_export_of_what_is_not_a_recording_is_one_line_and_writes_nothing(tmp):
    (tmp / "a.db").write_text("not a database")
    rc, err = run_gpumem("export", "--format", "pprof", "-o", tmp / "x.pb.gz", tmp / "a.db")
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert not (tmp / "x.pb.gz").exists()


@pytest.mark.parametrize("fmt", ["pprof", "folded", "chrome", "memviz"])
def test_export_refuses_a_symlink_as_output_before_running_cmd(tmp, fmt):
    target = tmp / "target"
    target.mkdir() if fmt == "memviz" else target.write_text("keep")
    link = tmp / "link"
    link.symlink_to(target)
    cmd = [str(GPUMEM), "export", "--format", fmt, "-o", str(link), "-c", str(WORKLOAD),
           "--wait", "leak", "1", "1000"]
    done = subprocess.run(cmd, capture_output=True, timeout=RUN_TIMEOUT,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert b"symbolic link, which -o does not follow" in done.stderr
    assert b"ready" not in done.stdout               # CMD never ran
    if fmt == "memviz":
        assert not list(target.iterdir())
    else:
        assert target.read_text() == "keep"


def test_export_at_ctrl_c_writes_what_a_running_process_holds(tmp):
    out = tmp / "live.folded"
    cmd = [str(GPUMEM), "export", "--format", "folded", "-o", str(out), "--no-hold",
           *MOCK_LIB_ARGS]
    gpumem = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    err = LineReader(gpumem.stderr)
    try:
        err.wait_for(TRACING_LINE, START_TIMEOUT)
        with Workload("hold", 8192) as w:
            w.wait_for("holding")
            gpumem.send_signal(signal.SIGINT)
            rc = gpumem.wait(STOP_TIMEOUT)
            w.finish()
    finally:
        if gpumem.poll() is None:
            gpumem.kill()
            gpumem.wait(10)
    assert rc == 0, err.lines
    mine = {s: n for s, n in folded_lines(out).items() if f";pid {w.pid};" in s}
    assert list(mine.values()) == [8192], folded_lines(out)
    assert list(mine)[0].endswith(";main;run_hold;hold_alloc")
