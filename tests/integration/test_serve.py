"""gpumem serve: pinned state that survives the agent (kill -9, restart, adoption with exact
numbers), readers that attach nothing, the metrics endpoint (promtool, a real Prometheus), and
--reset.

Each test's agent pins under a directory of its own, so other gpumems on the host (and the
default /sys/fs/bpf/gpumem) are never touched.
"""
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import (GPUMEM, MOCK_LIB_ARGS, MOCK_LIB_DIR, TRACING_LINE, WORKLOAD, LineReader,
                      find_proc, has_proc, rewritten_library, site_by_symbol)

BPFFS = Path("/sys/fs/bpf")


def pin_dir():
    return BPFFS / f"gpumem-it-{uuid.uuid4().hex[:12]}"


class Agent:
    """`gpumem serve` on a pin directory of the test's, listening on a free loopback port."""

    def __init__(self, pins, *args, env=None):
        self.pins = pins
        cmd = [str(GPUMEM), "serve", "--pin-dir", str(pins), "--listen", "127.0.0.1:0",
               *MOCK_LIB_ARGS, *map(str, args)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=False,
                                     env=dict(os.environ, **(env or {})))
        self.stderr = LineReader(self.proc.stderr)
        self.stdout = LineReader(self.proc.stdout)
        try:
            line = self.stderr.wait_for("gpumem: serving metrics", 30)
            self.port = int(re.search(r"\(port (\d+)\)", line).group(1))
            self.stderr.wait_for(TRACING_LINE, 30)
            wait_until(lambda: self.get("/healthz")[0] == 200, what="the agent to be ready")
        except BaseException:
            self.kill()
            raise

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path, method="GET"):
        req = urllib.request.Request(self.url(path), method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self):
        status, body = self.get("/metrics")
        assert status == 200, body
        return body

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def term(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        self.stderr.join()
        return rc


def reset(pins):
    subprocess.run([str(GPUMEM), "serve", "--reset", "--pin-dir", str(pins)],
                   capture_output=True, timeout=60)


@pytest.fixture
def pins():
    d = pin_dir()
    yield d
    reset(d)
    shutil.rmtree(d, ignore_errors=True)


class Driven:
    """The `driven` workload: allocations and frees when the test says."""

    def __init__(self, env=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen([str(WORKLOAD), "driven"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=full_env)
        self.pid = self.proc.pid
        assert self.proc.stdout.readline().strip() == "driven"

    def do(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            assert line, f"workload {self.pid} ended during {command!r}"
            if line.strip() == "ok":
                return lines
            lines.append(line.split())

    def quit(self):
        self.proc.stdin.write("q\n")
        self.proc.stdin.flush()
        assert self.proc.wait(30) == 0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def reader_snapshot(pins, *args):
    """snapshot --json of the agent's state (a reader: it attaches nothing)."""
    done = subprocess.run([str(GPUMEM), "snapshot", "--json", "--pin-dir", str(pins), "-d",
                           "0.5", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "reading the state of the agent" in done.stderr, done.stderr
    return json.loads(done.stdout)


def pinned_link_ids(pins):
    """The kernel ids of every link pinned in pins, by pin name."""
    ids = {}
    for entry in sorted(os.listdir(pins)):
        if not entry.startswith(("file-", "link-")):
            continue
        out = subprocess.run(["bpftool", "-j", "link", "show", "pinned", str(pins / entry)],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        ids[entry] = json.loads(out.stdout)["id"]
    return ids


def bpf_link_fds(pid):
    """How many BPF links process pid holds open."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:bpf_link":
                n += 1
        except OSError:
            pass
    return n


def wait_until(predicate, timeout=15, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_restart_after_kill_9_loses_nothing(pins):
    """Workloads allocate and free through a kill -9 of the agent: while it is down one ends
    and one has allocations fail; the restarted agent adopts the pins, and every living
    process's bytes, per process and per site, its failures, and the ended one are exact."""
    fail_env = {"GPUMEM_MOCK_FAIL_SIZE": "1000000"}
    agent = Agent(pins)
    a, b, c = Driven(), Driven(), Driven(fail_env)
    try:
        for _ in range(5):
            a.do("a 4096")
            a.do("b 1000")
            b.do("a 8192")
            c.do("a 300")
        a.do("f")
        links_before = pinned_link_ids(pins)
        assert any(k.startswith("file-") for k in links_before), links_before
        agent.kill()    # SIGKILL: no clean-up at all
        # The agent is down: the probes go on counting.
        for _ in range(3):
            a.do("a 4096")
            a.do("f")
            b.do("a 8192")
            b.do("f")
        assert c.do("a 2000000")[0][-1] == "2"
        assert c.do("a 3000000")[0][-1] == "2"
        c.do("a 300")
        b.quit()
        agent = Agent(pins)
        assert any("adopted the pinned state" in line for line in agent.stderr.lines), \
            agent.stderr.lines
        # Nothing attached twice: every link of the runtime and driver pinned before is the
        # same link now (a file's links have one pin name each; files that appeared on the
        # host meanwhile add theirs, those no process maps now lost theirs).
        mock = {f"-{(MOCK_LIB_DIR / n).stat().st_ino}-" for n in ("libcudart.so.13",
                                                                 "libcuda.so.1")}
        mine = {k: v for k, v in links_before.items() if any(m in k for m in mock)}
        assert mine and mine.items() <= pinned_link_ids(pins).items()
        report = reader_snapshot(pins)
        pa, pc = find_proc(report, a.pid), find_proc(report, c.pid)
        # a: 5 x 4096 + 5 x 1000, minus its first 4096, then 3 more 4096 freed oldest-first
        # (frees of 4096, 1000, 4096: the queue is a's, in allocation order).
        assert pa["alive"] and pc["alive"]
        assert (pa["current_bytes"], pa["current_allocs"]) == (
            expected_driven_bytes(["a 4096", "b 1000"] * 5 + ["f"] + ["a 4096", "f"] * 3))
        assert site_by_symbol(pa, "drive_other")["current_bytes"] == sum(
            s for s in driven_live(["a 4096", "b 1000"] * 5 + ["f"] + ["a 4096", "f"] * 3)
            if s == 1000)
        assert (pc["current_bytes"], pc["current_allocs"], pc["failed_count"]) == (1800, 6, 2)
        assert site_by_symbol(pc, "drive_alloc")["failed_count"] == 2
        # b ended while no agent ran: reaped, so readers no longer see it.
        assert not has_proc(report, b.pid)
        assert not re.search(rf'pid="{b.pid}"', agent.metrics())
    finally:
        for w in (a, b, c):
            w.kill()
        agent.kill()


def driven_live(commands):
    """The sizes a driven workload holds after these commands (frees take the oldest)."""
    live = []
    for cmd in commands:
        if cmd == "f":
            live.pop(0)
        else:
            live.append(int(cmd.split()[1]))
    return live


def expected_driven_bytes(commands):
    live = driven_live(commands)
    return sum(live), len(live)


def test_sigterm_leaves_the_probes_counting_for_the_next_agent(pins):
    agent = Agent(pins)
    w = Driven()
    try:
        w.do("a 4096")
        assert agent.term() == 0
        assert any("stay pinned" in line for line in agent.stderr.lines)
        assert (pins / "agent").exists()
        w.do("a 8192")      # counted by the pinned probes, with no agent at all
        agent = Agent(pins)
        p = find_proc(reader_snapshot(pins), w.pid)
        assert (p["current_bytes"], p["current_allocs"]) == (12288, 2)
    finally:
        w.kill()
        agent.kill()


def test_a_library_written_in_place_while_no_agent_ran_is_attached_anew(pins, tmp_path):
    """The agent's probes on a library stay pinned while it is down; cp over the library then
    keeps its inode, and the probes placed by the old code's offsets stay in the new code
    (nothing can take them out while no agent runs: known-gaps.md). The next agent does not
    adopt them: the file's ctime is not the one its links were made for, so its links are
    made anew, and a program's run is exact again."""
    lib, v2, caller = rewritten_library(tmp_path)
    agent = Agent(pins, "--lib", lib)
    try:
        assert subprocess.run([caller, lib], capture_output=True, timeout=30).returncode == 0
        linked = {k for k in pinned_link_ids(pins) if f"-{lib.stat().st_ino}-" in k}
        assert linked, pinned_link_ids(pins)
        assert agent.term() == 0
        shutil.copy(v2, lib)        # in place: the same inode, its links still pinned
        agent = Agent(pins, "--lib", lib)
        run = subprocess.Popen([caller, lib, "hold"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        try:
            assert run.stdout.readline().startswith("mix ")
            p = find_proc(reader_snapshot(pins), run.pid)
            assert (p["alloc_count"], p["current_bytes"]) == (1, 4096), p
        finally:
            run.stdin.close()
            assert run.wait(30) == 0        # no probe of the old code in the new
        assert any("was written since its links were pinned" in line
                   for line in agent.stderr.lines), agent.stderr.lines
    finally:
        agent.kill()


def test_a_second_agent_on_the_same_pins_is_refused(pins):
    agent = Agent(pins)
    try:
        done = subprocess.run([str(GPUMEM), "serve", "--pin-dir", str(pins), "--listen",
                               "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        assert f"an agent already runs on {pins} (PID {agent.proc.pid})" in done.stderr
    finally:
        agent.kill()


def test_pins_of_other_capacities_are_refused_with_the_reset_command(pins):
    agent = Agent(pins, "--max-allocs", "4096")
    agent.kill()
    done = subprocess.run([str(GPUMEM), "serve", "--pin-dir", str(pins), "--listen",
                           "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "map allocs has 8192 entries" in lines[0]     # twice --max-allocs: slots
    assert f"gpumem serve --reset --pin-dir {pins}" in lines[0]


def test_reset_detaches_and_removes_every_pin(pins):
    agent = Agent(pins)
    ids = pinned_link_ids(pins)
    agent.kill()
    done = subprocess.run([str(GPUMEM), "serve", "--reset", "--pin-dir", str(pins)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "probes are detached" in done.stderr
    assert not pins.exists()
    out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True,
                         timeout=30)
    alive = {link["id"] for link in json.loads(out.stdout)}
    assert not alive & set(ids.values()), "links outlived --reset"


def test_reset_while_the_agent_runs_is_refused(pins):
    agent = Agent(pins)
    try:
        done = subprocess.run([str(GPUMEM), "serve", "--reset", "--pin-dir", str(pins)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        assert f"PID {agent.proc.pid}" in done.stderr and "stop it" in done.stderr
        assert pins.exists()
    finally:
        agent.kill()


@pytest.mark.parametrize("view", [["snapshot", "--json", "-d", "1"],
                                  ["top", "-b", "-n", "2", "-i", "0.5"],
                                  ["leaks", "--json", "-d", "1"]])
def test_readers_of_a_running_agent_attach_nothing(pins, view):
    agent = Agent(pins)
    w = Driven()
    try:
        w.do("a 4096")
        links = pinned_link_ids(pins)
        reader = subprocess.Popen([str(GPUMEM), *view, "--pin-dir", str(pins)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.4)
        held = bpf_link_fds(reader.pid)
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err
        assert "reading the state of the agent" in err and "attaching nothing" in err
        assert held == 0, "a reader holds BPF links"
        # The links of the files our workload keeps mapped, and the lifecycle's, are as they
        # were (a neighbour's file on a shared host may be let go meanwhile).
        ours = {str(os.stat(MOCK_LIB_DIR / n).st_ino) for n in ("libcudart.so.13",
                                                                  "libcuda.so.1")}
        kept = {k: v for k, v in links.items()
                if k.startswith("link-") or k.split("-")[2] in ours}
        assert kept and kept.items() <= pinned_link_ids(pins).items()
        assert str(w.pid) in out
    finally:
        w.kill()
        agent.kill()


def test_no_agent_makes_a_reader_attach_its_own_probes(pins):
    agent = Agent(pins)
    try:
        done = subprocess.run([str(GPUMEM), "snapshot", "--json", "-d", "0.5", "--no-hold",
                               "--no-agent", "--pin-dir", str(pins), *MOCK_LIB_ARGS],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert TRACING_LINE in done.stderr
    finally:
        agent.kill()


def test_http_routes(pins):
    agent = Agent(pins)
    try:
        wait_until(lambda: agent.get("/healthz")[0] == 200, what="/healthz 200")
        assert agent.get("/healthz")[1].strip() == "ok"
        assert agent.get("/nope")[0] == 404
        assert agent.get("/metrics", method="POST")[0] == 405
        status, body = agent.get("/metrics", method="HEAD")
        assert status == 200 and body == ""
    finally:
        agent.kill()


def test_metrics_pass_promtool_and_a_process_series_vanish_when_it_ends(pins):
    promtool = shutil.which("promtool")
    agent = Agent(pins, "--site-series", "1")
    w = Driven()
    try:
        w.do("a 4096")
        w.do("b 1000")
        w.do("b 1000")
        def my_series():
            m = agent.metrics()
            return m if f'pid="{w.pid}"' in m else None
        body = wait_until(my_series, what="the workload's series")
        mine = [l for l in body.splitlines() if f'pid="{w.pid}"' in l]
        assert f'gpumem_process_memory_bytes{{pid="{w.pid}"' in body
        assert any(l.startswith("gpumem_process_memory_bytes") and 'kind="device"' in l
                   and l.endswith(" 6096") for l in mine), mine
        sites = [l for l in mine if l.startswith("gpumem_site_memory_bytes")]
        assert len(sites) == 1 and sites[0].endswith(" 4096"), sites    # --site-series 1
        # every site is the program's own: one library series with all of it
        libs = [l for l in mine if l.startswith("gpumem_library_memory_bytes")]
        assert len(libs) == 1 and 'library="workload",family="program"' in libs[0] \
            and libs[0].endswith(" 6096"), libs
        # gpumem's own cost: its probes ran in the workload (three calls, each an entry and
        # a return at least), at a measured cost a hit
        hits = [l for l in mine if l.startswith("gpumem_process_probe_hits_total")]
        assert len(hits) == 1 and int(hits[0].rsplit(" ", 1)[1]) >= 6, hits
        cost = re.search(r"^gpumem_probe_hit_cost_seconds (\S+)$", body, re.M)
        assert cost and 0 < float(cost.group(1)) < 1e-4, body
        if promtool:
            check = subprocess.run([promtool, "check", "metrics"], input=body,
                                   capture_output=True, text=True, timeout=30)
            assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), \
                check.stdout + check.stderr
        w.quit()
        wait_until(lambda: f'pid="{w.pid}"' not in agent.metrics(), what="series to vanish")
    finally:
        w.kill()
        agent.kill()
    if not promtool:
        pytest.skip("promtool is not installed (Debian package prometheus): the exposition "
                    "was checked by our own assertions only")


def test_a_failure_whose_process_ends_before_a_scrape_is_still_counted(pins):
    """Out-of-memory failures whose processes end between two scrapes: the processes' own
    series go with them, gpumem_failed_allocations_total counts them (every process's, ended
    or not). 40 of them: more than a busy neighbour's failures over the wait."""
    agent = Agent(pins)
    try:
        def failed():
            m = re.search(r"^gpumem_failed_allocations_total (\d+)$", agent.metrics(), re.M)
            assert m, "gpumem_failed_allocations_total missing"
            return int(m.group(1))
        before = failed()
        pids = []
        for _ in range(40):    # one failure each, then the end
            w = subprocess.Popen([str(WORKLOAD), "fail", "4096", "10"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE,
                                 env=dict(os.environ, GPUMEM_MOCK_FAIL_AFTER="3"))
            out, err = w.communicate(timeout=30)
            assert w.returncode == 0 and b"failure 3 2" in out, err
            pids.append(w.pid)
        # Other programs on the host may fail too: at least the workloads' 40.
        wait_until(lambda: failed() >= before + 40, what="the failures to be counted")
        wait_until(lambda: not [p for p in pids if f'pid="{p}"' in agent.metrics()],
                   what="the ended processes' series to go")
    finally:
        agent.kill()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """Debian's prometheus, scraping the agent every second, on a loopback port."""

    def __init__(self, target_port):
        self.dir = Path(tempfile.mkdtemp(prefix="gpumem-prom-"))
        self.port = free_port()
        (self.dir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: gpumem\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n")
        self.proc = subprocess.Popen(
            [shutil.which("prometheus"), f"--config.file={self.dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def query(self, expr):
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?" +
               urllib.parse.urlencode({"query": expr}))
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                answer = json.loads(r.read())
        except (urllib.error.URLError, ConnectionError):
            return None
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.mark.skipif(not shutil.which("prometheus"),
                    reason="prometheus is not installed (Debian package prometheus)")
def test_a_real_prometheus_scrapes_exact_bytes_per_pid_and_pod(pins, tmp_path):
    from test_containers import (CGROUP2, CONTAINERD_KEYS, Cgroup, bundle_config, pod_cgroup,
                                 write_bundle)
    if CGROUP2 is None:
        pytest.skip("no cgroup v2 file system is mounted")
    pod = str(uuid.uuid4())
    cid = uuid.uuid4().hex + uuid.uuid4().hex
    cgroup = pod_cgroup("besteffort", pod, f"cri-containerd-{cid}.scope")
    bundles = tmp_path / "containerd"
    write_bundle(bundles / "k8s.io" / cid / "config.json",
                 bundle_config(CONTAINERD_KEYS, "trainer-0", "ml", "cuda"))
    agent = Agent(pins, "--bundle-dir", bundles)
    prom = Prometheus(agent.port)
    workloads = []
    try:
        with Cgroup(cgroup) as cg:
            for size in ("4096", "8192"):
                w = Driven()
                cg.add(w.pid)
                w.do(f"a {size}")
                workloads.append(w)
            solo = Driven()
            workloads.append(solo)
            solo.do("a 1000")
            expr = f'sum by (pod) (gpumem_process_memory_bytes{{pod="{pod}"}})'
            result = wait_until(lambda: prom.query(expr), timeout=60,
                                what="Prometheus to answer " + expr)
            assert [r["metric"]["pod"] for r in result] == [pod]
            assert result[0]["value"][1] == "12288"
            # Names from the OCI bundle, as labels.
            named = prom.query('sum by (namespace, pod_name, container_name) '
                               '(gpumem_process_memory_bytes{pod_name="trainer-0"})')
            assert [(r["metric"], r["value"][1]) for r in named] == [
                ({"namespace": "ml", "pod_name": "trainer-0", "container_name": "cuda"},
                 "12288")]
            per_pid = wait_until(
                lambda: prom.query(f'gpumem_process_memory_bytes{{pid="{solo.pid}",kind="device"}}'),
                what="the per-pid series")
            assert [r["value"][1] for r in per_pid] == ["1000"]
            assert per_pid[0]["metric"].get("pod", "") == ""    # empty labels are dropped
            for w in workloads:
                w.kill()
    finally:
        for w in workloads:
            w.kill()
        prom.stop()
        agent.kill()


@pytest.mark.parametrize("args, message", [
    (["-p", "1"], "serve does not take -p"),
    (["--cgroup", "/x"], "serve does not take --cgroup"),
    (["-c", "true"], "serve does not take -c"),
    (["--listen", "9473"], "--listen takes ADDR:PORT"),
    (["--pin-dir", "relative/dir"], "--pin-dir takes an absolute path"),
    (["--site-series", "0"], "--site-series takes a whole number from 1 to 1000"),
])
def test_serve_refuses_what_it_cannot_do(args, message):
    done = subprocess.run([str(GPUMEM), "serve", *args], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr.splitlines()[0], done.stderr


def test_a_port_in_use_is_one_line_and_exit_1(pins):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run([str(GPUMEM), "serve", "--pin-dir", str(pins), "--listen",
                               f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    errors = [l for l in done.stderr.splitlines() if "in use" in l]
    assert len(errors) == 1, done.stderr


def test_events_no_one_read_while_the_agent_was_down_are_counted(pins):
    """A failure storm while no agent runs overflows the pinned ring buffer: the records it
    had no room for are counted (ringbuf_dropped), the failure counts stay exact."""
    agent = Agent(pins, "--ringbuf-mb", "1")
    w = Driven({"GPUMEM_MOCK_FAIL_SIZE": "1000000"})
    try:
        w.do("a 4096")
        agent.kill()
        assert w.do("n 50000 2000000") == [["calls", "50000", "failed", "50000"]]
        agent = Agent(pins, "--ringbuf-mb", "1")
        report = reader_snapshot(pins)
        p = find_proc(report, w.pid)
        assert (p["current_bytes"], p["failed_count"]) == (4096, 50000)
        assert site_by_symbol(p, "drive_quiet")["failed_count"] == 50000
        assert report["lost"]["ringbuf_dropped"] > 0
        assert re.search(r'gpumem_lost_total\{reason="ringbuf_dropped"\} [1-9]',
                         agent.metrics())
    finally:
        w.kill()
        agent.kill()


def pinned_map_values(pins, name):
    """The values of the pinned map name, as bpftool formats them from their BTF."""
    done = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", str(pins / name)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [e["formatted"]["value"] for e in json.loads(done.stdout)]


def agent_record(pins):
    """The pins' agent record (struct gm_agent)."""
    return pinned_map_values(pins, "agent")[0]


def test_an_agent_that_adopts_the_pins_keeps_their_record_of_when_they_were_made(pins):
    """The first heartbeat wrote a blank record over the pins' before the agent made its own:
    an adopting agent found no record, and took the pins for new (recordings count their
    kernel losses by that identity)."""
    agent = Agent(pins)
    try:
        made = agent_record(pins)
    finally:
        agent.kill()
    agent = Agent(pins)
    try:
        adopted = agent_record(pins)
    finally:
        agent.kill()
    assert made["started_ns"] > 0 and made["layout"] > 0, made
    assert (adopted["started_ns"], adopted["layout"]) == (made["started_ns"], made["layout"])
    assert adopted["pid"] != made["pid"], (made, adopted)


def test_pins_of_another_layout_version_are_refused(pins):
    agent = Agent(pins)
    agent.kill()
    value = ["0x63"] + ["0"] * 47    # struct gm_agent (48 bytes) with layout 99, no agent
    done = subprocess.run(["bpftool", "map", "update", "pinned", str(pins / "agent"), "key",
                           "0", "0", "0", "0", "value", *value], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([str(GPUMEM), "serve", "--pin-dir", str(pins), "--listen",
                           "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "layout 99" in done.stderr and "gpumem serve --reset" in done.stderr, done.stderr


SMALL_TABLE = ("--max-allocs", "4096")     # a table bpftool dumps whole in a moment


def alloc_entries_of(pins, pid):
    """The live-allocation entries of process pid in the agent's pinned table (its slots in
    state GM_SLOT_LIVE, 2 in the state's two low bits)."""
    slots = pinned_map_values(pins, "allocs")
    assert len(slots) == 8192        # twice --max-allocs
    return sum(1 for v in slots if v["state"] & 3 == 2 and v["tgid"] == pid)


def test_an_ended_process_leaves_no_allocation_entries_in_the_pins(pins):
    """An end costs no walk over every allocation: the entries of processes that ended holding
    memory are deleted later, together; an agent that stops deletes what waits, and one that
    adopts the pins of a killed one deletes what it left."""
    agent = Agent(pins, *SMALL_TABLE)
    try:
        w = Driven()
        for _ in range(3):
            w.do("a 4096")
        assert alloc_entries_of(pins, w.pid) == 3    # the count sees live entries
        w.quit()
        wait_until(lambda: f'pid="{w.pid}"' not in agent.metrics(), what="the end")
        assert agent.term() == 0
        assert alloc_entries_of(pins, w.pid) == 0
        agent = Agent(pins, *SMALL_TABLE)
        w = Driven()
        for _ in range(3):
            w.do("a 4096")
        w.quit()
        wait_until(lambda: f'pid="{w.pid}"' not in agent.metrics(), what="the end")
        agent.kill()
        agent = Agent(pins, *SMALL_TABLE)
        assert alloc_entries_of(pins, w.pid) == 0
        adopted = [l for l in agent.stderr.lines if "adopted the pinned state" in l]
        assert adopted and re.search(r"\((\d+) allocation entries", adopted[0]), adopted
    finally:
        agent.kill()


def test_pins_whose_programs_were_loaded_otherwise_are_refused(pins):
    """The adopted links keep the programs an earlier agent loaded, with its --unwind: an
    agent that asks for another is refused, not silently given the old."""
    agent = Agent(pins, "--unwind", "fp")
    agent.kill()
    done = subprocess.run([str(GPUMEM), "serve", "--pin-dir", str(pins), "--listen",
                           "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "--unwind" in done.stderr and "gpumem serve --reset" in done.stderr, done.stderr
    agent = Agent(pins, "--unwind", "fp")     # the same options: adopted
    try:
        assert any("adopted the pinned state" in l for l in agent.stderr.lines)
    finally:
        agent.kill()


def agent_program_names(pid):
    ids = set()
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            ids |= {int(l.split()[1]) for l in fdinfo.read_text(errors="replace").splitlines()
                    if l.startswith("prog_id:")}
        except OSError:
            continue
    shown = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], check=True,
                                      capture_output=True, text=True).stdout)
    return {p["name"] for p in shown if p["id"] in ids}


@pytest.mark.parametrize("first, then", [("0", "1"), ("1", "0")])
def test_an_agent_adopts_its_pins_kind_of_links_sessions_or_not(pins, first, then):
    """The pinned alloc links are uprobe sessions or entry and return links: an agent that
    would make the other kind (GPUMEM_UPROBE_SESSIONS) adopts the pins' kind, which a mix would
    break (one link unused, or a second return on a session's probes)."""
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    if (major, minor) < (6, 13):
        pytest.skip(f"kernel {platform.release()} has no uprobe sessions (6.13+)")
    made = "session_alloc" if first == "1" else "enter_alloc"
    agent = Agent(pins, env={"GPUMEM_UPROBE_SESSIONS": first})
    try:
        assert made in agent_program_names(agent.proc.pid)
    finally:
        agent.kill()
    agent = Agent(pins, "-v", env={"GPUMEM_UPROBE_SESSIONS": then})
    try:
        assert any("adopted the pinned state" in l for l in agent.stderr.lines)
        assert any("adopted as they are" in l for l in agent.stderr.lines)
        assert {"enter_alloc", "session_alloc"} & agent_program_names(agent.proc.pid) == {made}
    finally:
        agent.kill()
