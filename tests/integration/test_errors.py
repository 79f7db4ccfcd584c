"""Errors: one `gpumem:` line and exit 1 for what cannot be done; usage and exit 2 for a bad
command line."""
import subprocess
from pathlib import Path

from conftest import GPUMEM

TIMEOUT = 20


# Runs that would trace the whole host if their error were not caught pass --no-hold: a test
# must never pause another user's process.
def run_gpumem(*args, prefix=()):
    done = subprocess.run([*prefix, str(GPUMEM), *map(str, args)], capture_output=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr.decode(errors="replace").splitlines()


def assert_one_error_line(stderr, *words):
    assert len(stderr) == 1, stderr
    assert stderr[0].startswith("gpumem:"), stderr
    for word in words:
        assert word in stderr[0], stderr


def unused_pid():
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_bytes().decode(errors="replace"))
    for pid in range(pid_max - 1, 1, -1):
        if not Path(f"/proc/{pid}").exists():
            return pid
    raise AssertionError("every pid is in use")


def test_nonexistent_pid_is_one_error_line_and_exit_1(tmp_path):
    pid = unused_pid()
    rc, stderr = run_gpumem("snapshot", "--json", "-o", tmp_path / "r.json", "-p", pid,
                            "--duration", 1, "--no-hold")
    assert rc == 1
    assert_one_error_line(stderr, str(pid))


def test_pid_beyond_pid_max_is_one_error_line_and_exit_1(tmp_path):
    rc, stderr = run_gpumem("snapshot", "-o", tmp_path / "r.json", "-p", 4000000,
                            "--duration", 1, "--no-hold")
    assert rc == 1
    assert_one_error_line(stderr, "4000000")


def test_unreadable_lib_is_one_error_line_and_exit_1(tmp_path):
    rc, stderr = run_gpumem("snapshot", "-o", tmp_path / "r.json", "--lib", "/nonexistent",
                            "--duration", 1, "--no-hold")
    assert rc == 1
    assert_one_error_line(stderr, "/nonexistent")


def test_lib_without_cuda_symbols_is_one_error_line_and_exit_1(tmp_path):
    rc, stderr = run_gpumem("snapshot", "-o", tmp_path / "r.json", "--lib", "/bin/true",
                            "--duration", 1, "--no-hold")
    assert rc == 1
    assert_one_error_line(stderr, "/bin/true")


def test_unknown_option_prints_usage_and_exits_2():
    rc, stderr = run_gpumem("snapshot", "--bogus")
    assert rc == 2
    assert any(line.startswith("usage: gpumem") for line in stderr), stderr


def test_duration_that_is_not_a_number_prints_usage_and_exits_2():
    rc, stderr = run_gpumem("snapshot", "--duration", "abc")
    assert rc == 2
    assert any("abc" in line for line in stderr), stderr
    assert any(line.startswith("usage: gpumem") for line in stderr), stderr


def test_unknown_subcommand_prints_usage_and_exits_2():
    rc, stderr = run_gpumem("frobnicate")
    assert rc == 2
    assert any("frobnicate" in line for line in stderr), stderr
    assert any(line.startswith("usage: gpumem") for line in stderr), stderr


def test_unprivileged_user_gets_one_line_mentioning_root_and_exit_1():
    rc, stderr = run_gpumem("snapshot", "--json", "--duration", 1, "--no-hold",
                            prefix=("setpriv", "--reuid=65534", "--regid=65534",
                                    "--clear-groups"))
    assert rc == 1
    assert_one_error_line(stderr, "root")


def test_another_pid_namespace_is_one_line_naming_the_hosts_and_exit_1():
    """The kernel gives gpumem host PIDs: in a PID namespace of its own it would look them up,
    and resume the processes it held, in the wrong namespace, leaving them stopped for good.
    It refuses, with /proc of its namespace mounted and without."""
    for unshare in (("unshare", "-p", "-f", "--mount-proc"), ("unshare", "-p", "-f")):
        rc, stderr = run_gpumem("snapshot", "--json", "--duration", 1, prefix=unshare)
        assert rc == 1
        assert_one_error_line(stderr, "host's PID namespace", "hostPID")
