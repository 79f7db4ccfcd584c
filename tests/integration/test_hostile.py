"""Hardening, second pass: what a recording, a path, a pin directory or a client can do to
gpumem, each reproduced as it was found (issue 24) and held to a bound: a recording is read
read-only and never runs what it holds (views, triggers), its strings are cut; -o never waits on
a FIFO; --reset removes only what an agent pinned; errors are exit 1."""
import os
import shutil
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import GPUMEM, WORKLOAD
from test_record import record_c, report, tmp  # noqa: F401 (a fixture)

ENDLESS = ("with recursive r(x) as (select 1 union all select x + 1 from r) "
           "select x, 1 from r")


def recording(tmp, name="r.db"):
    db = tmp / name
    assert record_c(db, WORKLOAD, "steps", 6, 20, 1000).returncode == 0
    return db


def run(*args, timeout=30, **kw):
    return subprocess.run([str(GPUMEM), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


def one_error(done):
    lines = [line for line in done.stderr.splitlines() if line.startswith("gpumem: ")]
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, done.stderr)
    return lines[0]


@pytest.mark.parametrize("table", ["samples", "events", "sessions", "meta", "processes",
                                   "frames"])
def test_a_recording_whose_table_is_an_endless_view_is_refused_at_once(tmp, table):
    """F1: every view and every export spun at 100% CPU for ever."""
    db = recording(tmp)
    cols = {"samples": "time_ns, session_id", "events": "id, time_ns",
            "sessions": "id, start_ns", "meta": "key, value", "processes": "id, pid",
            "frames": "stack_id, idx"}[table]
    with sqlite3.connect(db) as c:
        c.executescript(f"drop table {table}; create view {table}({cols}) as {ENDLESS};")
    for args in (["report", db], ["report", db, "leaks"], ["report", db, "oom"],
                 ["report", db, "sites"],
                 ["export", "--format", "chrome", "-o", tmp / "o.json", db],
                 ["export", "--format", "pprof", "-o", tmp / "o.pb.gz", db]):
        t0 = time.monotonic()
        line = one_error(run(*args, timeout=20))
        assert time.monotonic() - t0 < 5
        assert f"'{table}' is a view, not a table" in line, line


@pytest.mark.parametrize("table", ["frames", "stacks", "meta", "samples", "processes"])
def test_a_recording_missing_a_table_is_an_error_not_an_answer(tmp, table):
    """F10: "cannot read X: no such table" and exit 0, the answer without its frames."""
    db = recording(tmp)
    with sqlite3.connect(db) as c:
        c.execute(f"drop table {table}")
    line = one_error(report(db, "oom" if table == "processes" else "snapshot", check=False))
    assert f"its table '{table}' is missing" in line


def test_serve_refuses_to_append_to_a_recording_with_a_trigger(tmp):
    """F2: the trigger's endless query held the agent's loop, SIGTERM could not stop it, and
    /healthz said 200."""
    db = recording(tmp)
    with sqlite3.connect(db) as c:
        c.execute("create trigger t after insert on samples begin "
                  f"insert into meta select 'x', x from ({ENDLESS}); end")
    for args in (["serve", "--pin-dir", "/sys/fs/bpf/gpumem-hostile", "--listen",
                  "127.0.0.1:0", "--record", db, "-d", "5"],
                 ["record", "-o", db, "-d", "1"]):
        t0 = time.monotonic()
        done = run(*args, timeout=30)
        assert done.returncode == 1, done.stderr
        assert "it holds a trigger (t), which no recording has" in done.stderr
        assert time.monotonic() - t0 < 10
    run("serve", "--reset", "--pin-dir", "/sys/fs/bpf/gpumem-hostile")
    assert report(db, check=False).returncode == 1     # nor is it read


def test_report_reads_a_root_recording_it_may_read_but_not_write(tmp):
    """F11: as nobody, "is not a gpumem recording: attempt to write a readonly database"."""
    shutil.chown(tmp, "root")
    db = recording(tmp)
    os.chmod(tmp, 0o755)
    for f in tmp.iterdir():
        os.chmod(f, 0o644)
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           str(GPUMEM), "report", str(db), "sites"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "step_keep_loss" in done.stdout


def test_strings_of_a_recording_are_cut_as_live_ones_are(tmp):
    """F12: one 1 MB function name shared by 100 sites gave 101 MB of report; a 5 MB command
    line was printed whole."""
    db = recording(tmp)
    with sqlite3.connect(db) as c:
        c.execute("update frames set symbol = ?", ("f" * (1 << 20),))
        c.execute("update processes set cmdline = ?", ("c" * (5 << 20),))
    done = report(db, "--json", check=False)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) < 1 << 20
    assert "f" * 4095 in done.stdout and "f" * 4096 not in done.stdout
    assert "c" * 4095 in done.stdout and "c" * 4096 not in done.stdout


@pytest.mark.parametrize("command", [["snapshot", "--no-agent", "-d", "1", "-p", str(os.getpid())],
                                     ["trace", "-d", "1"],
                                     ["export", "--format", "pprof", "-d", "1"]])
def test_output_to_a_fifo_is_refused_at_once(tmp_path, command):
    """F3: open() of a FIFO no one reads blocked for ever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    line = one_error(run(*command, "-o", fifo, timeout=20))
    assert time.monotonic() - t0 < 5
    assert "it is a FIFO or a socket" in line


def bpffs(name):
    return Path("/sys/fs/bpf") / name


def test_reset_removes_only_what_an_agent_pinned(tmp_path):
    """F7: --reset unlinked every entry, even where no agent ever ran, and made a refused
    non-bpffs --pin-dir."""
    foreign_dir = bpffs(f"gpumem-foreign-{os.getpid()}")
    foreign_dir.mkdir()
    try:
        subprocess.run(["bpftool", "map", "create", str(foreign_dir / "foreign"), "type",
                        "array", "key", "4", "value", "4", "entries", "1", "name", "foreign"],
                       check=True, timeout=30)
        line = one_error(run("serve", "--reset", "--pin-dir", foreign_dir))
        assert "holds no gpumem agent's record" in line
        assert (foreign_dir / "foreign").exists()
    finally:
        shutil.rmtree(foreign_dir, ignore_errors=True)
    agent_dir = bpffs(f"gpumem-agent-{os.getpid()}")
    done = run("serve", "--pin-dir", agent_dir, "--listen", "127.0.0.1:0", "-d", "1")
    assert done.returncode == 0, done.stderr
    subprocess.run(["bpftool", "map", "create", str(agent_dir / "foreign"), "type", "array",
                    "key", "4", "value", "4", "entries", "1", "name", "foreign"], check=True,
                   timeout=30)
    done = run("serve", "--reset", "--pin-dir", agent_dir)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in agent_dir.iterdir()) == ["foreign"]
    shutil.rmtree(agent_dir, ignore_errors=True)
    plain = tmp_path / "not-bpffs"
    line = one_error(run("serve", "--pin-dir", plain, "--listen", "127.0.0.1:0", "-d", "1"))
    assert "not on a BPF file system" in line and not plain.exists()
