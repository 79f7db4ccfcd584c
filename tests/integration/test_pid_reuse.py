"""A pid handed to a new process at once: the first process has ended, but gpumem's userspace
has not reaped it yet, when the second one starts on the same pid and allocates. They are two
processes: each keeps its own record, comm and numbers, and the end of the first drops none of
the second's entries.

gpumem is stopped (SIGSTOP) while the pair runs, so every event of both reaches userspace
only after both have started: what a busy host does to it now and then, here every time. The
second process gets the first one's pid from clone3's set_tid (tests/workloads/samepid.c)."""
import signal

from conftest import MOCK_LIB_ARGS, SAMEPID, WORKLOAD, SystemWide, Workload


def procs_on(report, pid):
    return [p for p in report["processes"] if p["pid"] == pid]


def numbers(proc):
    return (proc["current_bytes"], proc["current_allocs"], proc["peak_bytes"],
            proc["alloc_count"], proc["free_count"])


def test_a_pid_reused_at_once_gives_the_new_process_its_own_record_and_numbers(tmp_path):
    # Two names for the workload, so that each process has a comm of its own.
    first, second = tmp_path / "first", tmp_path / "second"
    first.symlink_to(WORKLOAD)
    second.symlink_to(WORKLOAD)
    with SystemWide(*MOCK_LIB_ARGS) as gpumem:
        gpumem.proc.send_signal(signal.SIGSTOP)
        try:
            with Workload(first, "hold", 500, "--", second, "hold", 300,
                          program=SAMEPID) as pair:
                _, pid, status = pair.wait_for("first ").split()
                assert status == "0"
                assert pair.wait_for("second ").split()[1] == pid, pair.stderr.lines
                pair.wait_for("holding")    # the second has allocated, on the first's pid
                gpumem.proc.send_signal(signal.SIGCONT)
                gpumem.stop()               # the second still holds its 300 bytes
                assert pair.finish() == 0
        finally:
            gpumem.proc.send_signal(signal.SIGCONT)
    on_pid = procs_on(gpumem.report, int(pid))
    assert len(on_pid) == 2, [(p["comm"], p["alive"], numbers(p)) for p in on_pid]
    ended, alive = on_pid
    assert (ended["alive"], alive["alive"]) == (False, True)
    assert (ended["comm"], alive["comm"]) == ("first", "second")
    assert ended["exit_code"] == 0
    assert numbers(ended) == (500, 1, 500, 1, 0)
    assert numbers(alive) == (300, 1, 300, 1, 0)
    assert [s["current_bytes"] for s in ended["sites"]] == [500]
    assert [s["current_bytes"] for s in alive["sites"]] == [300]
    assert alive["cmdline"].endswith("second hold 300")


def test_an_exec_ends_the_image_that_allocated_and_keeps_its_frames():
    """F8: a process allocated 5 x 1,000 B, then exec'd a program that allocated 1,000 B: the
    new program was shown holding 6,000 B in 6 allocations, the old site's frames null. The old
    image's memory went with its address space: it is a process of its own, ended by the exec,
    its site named; the new image holds only its own."""
    with SystemWide(*MOCK_LIB_ARGS) as gpumem:
        with Workload("exec", 5, 1000) as w:
            w.wait_for("execing")
            w.wait_for("holding")
            assert w.finish() == 0
    old, new = procs_on(gpumem.report, w.proc.pid)
    assert (old["alive"], old["execed"], old.get("exit_code")) == (False, True, None), old
    assert numbers(old)[:2] == (5000, 5) and old["alloc_count"] == 5
    [site] = old["sites"]
    assert [f["symbol"] for f in site["frames"][:2]] == ["before_exec", "run_exec"], site
    assert (new["execed"], new["current_bytes"], new["alloc_count"]) == (False, 1000, 1), new
    assert [f["symbol"] for f in new["sites"][0]["frames"][:1]] == ["hold_alloc"]
