"""gpumem leaves nothing behind: after it exits, none of its BPF programs, links or uprobes
remain in the kernel. What is gpumem's is read from its own file descriptors, so another
gpumem running on the machine at the same time does not confuse the tests."""
import json
import os
import platform
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (GPUMEM, ROOT, WORKLOAD, LineReader, SystemWide, find_proc,
                      parse_calls)

BPF_SOURCE = ROOT / "bpf" / "gpumem.bpf.c"
KERNEL_NAME_LEN = 15  # bpf_prog_info.name holds 16 bytes with the NUL
RELEASE_DEADLINE = 5  # the kernel frees a program after an RCU grace period, not at close

pytestmark = pytest.mark.skipif(shutil.which("bpftool") is None, reason="needs bpftool")


def gpumem_program_names():
    """Names of the programs gpumem.bpf.c defines, cut as the kernel keeps them."""
    text = BPF_SOURCE.read_text()
    names = re.findall(r"\bBPF_(?:KPROBE|KRETPROBE|PROG|USDT)\((\w+)", text)
    names += re.findall(r'^SEC\("[^"]+"\)\nint (?!BPF_)(\w+)\(', text, re.M)  # plain ones
    assert names, f"no programs found in {BPF_SOURCE}"
    return {name[:KERNEL_NAME_LEN] for name in names}


def bpftool(*args):
    done = subprocess.run(["bpftool", "--json", *args], capture_output=True, timeout=20)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout or b"[]")


def held_bpf_objects(pid):
    """The prog ids and {link id: link type} that process pid holds open."""
    progs, links = set(), {}
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        # Bytes: an fdinfo can hold text that is not UTF-8 (a file name, an inotify mask...).
        try:
            text = fdinfo.read_bytes().decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if "prog_id" in fields:
            progs.add(int(fields["prog_id"]))
        if "link_id" in fields:
            links[int(fields["link_id"])] = fields.get("link_type")
    return progs, links


def still_loaded(prog_ids, link_ids):
    """Polls until the kernel has freed them all or the deadline passes; returns the rest."""
    deadline = time.monotonic() + RELEASE_DEADLINE
    while True:
        progs = {p["id"]: p.get("name") for p in bpftool("prog", "show")
                 if p["id"] in prog_ids}
        links = [l["id"] for l in bpftool("link", "show")
                 if l["id"] in link_ids or l.get("prog_id") in prog_ids]
        perf = [p for p in bpftool("perf", "show") if p.get("prog_id") in prog_ids]
        if (not progs and not links and not perf) or time.monotonic() > deadline:
            return progs, links, perf
        time.sleep(0.1)


def assert_attached_everything(pid):
    progs, links = held_bpf_objects(pid)
    names = {p["id"]: p.get("name", "") for p in bpftool("prog", "show") if p["id"] in progs}
    assert {n[:KERNEL_NAME_LEN] for n in names.values()} <= gpumem_program_names()
    assert {"enter_free", "call_return", "on_exec", "on_exit"} <= set(names.values())
    # cudaMalloc's shape: a session program where the kernel has uprobe sessions (6.13+)
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    sessions = (major, minor) >= (6, 13) and os.environ.get("GPUMEM_UPROBE_SESSIONS") != "0"
    assert {"enter_alloc", "session_alloc"} & set(names.values()) == \
        {"session_alloc" if sessions else "enter_alloc"}
    assert {"uprobe_multi", "uretprobe_multi", "raw_tracepoint"} <= set(links.values())
    return progs, set(links)


def test_after_sigint_no_gpumem_program_link_or_uprobe_remains():
    with SystemWide() as gpumem:
        progs, links = assert_attached_everything(gpumem.pid)
    assert gpumem.returncode == 0
    assert still_loaded(progs, links) == ({}, [], [])


def test_after_command_ends_no_gpumem_program_link_or_uprobe_remains(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.Popen([str(GPUMEM), "snapshot", "--json", "-o", str(out), "-c",
                             str(WORKLOAD), "--wait", "hold", "4096"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        stdout = LineReader(proc.stdout)
        stdout.wait_for("ready")
        progs, links = assert_attached_everything(proc.pid)
        proc.stdin.write(b"\n\n")
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    stdout.join()
    report = json.loads(out.read_text())
    workload_pid = int(stdout.lines[0].split()[1])
    assert find_proc(report, workload_pid)["current_bytes"] == 4096
    assert [c["size"] for c in parse_calls(stdout.lines)] == [4096]
    assert still_loaded(progs, links) == ({}, [], [])
