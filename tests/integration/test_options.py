"""The command line: each command takes only its own options, `COMMAND --help` lists exactly
those, and times and counts outside their bounds are refused. Every case here is refused (or
answered) before anything loads, so each run takes milliseconds."""
import re
import subprocess

import pytest

from conftest import GPUMEM

TIMEOUT = 10
COMMANDS = ("top", "snapshot", "trace", "leaks", "oom")


def run_gpumem(*args):
    done = subprocess.run([str(GPUMEM), *map(str, args)], capture_output=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)
    return (done.returncode, done.stdout.decode(errors="replace"),
            done.stderr.decode(errors="replace").splitlines())


def assert_usage_error(stderr, *words):
    """One `gpumem:` line that holds every word, then the usage line."""
    assert len(stderr) == 2, stderr
    assert stderr[0].startswith("gpumem: "), stderr
    assert stderr[1].startswith("usage: gpumem"), stderr
    for word in words:
        assert word in stderr[0], stderr


def listed_options(help_text):
    """The long options a help text lists in its option column."""
    return set(re.findall(r"^  (?:-\w, )?(--[\w-]+)", help_text, re.MULTILINE))


@pytest.mark.parametrize("args,command,option", [
    (["trace", "--group", "site"], "trace", "--group"),
    (["top", "--json"], "top", "--json"),
    (["snapshot", "-n", 3], "snapshot", "-n"),
    (["oom", "-i", 1], "oom", "-i"),
    (["leaks", "-b"], "leaks", "-b"),
    (["snapshot", "--iterations", 3], "snapshot", "--iterations"),
    (["oom", "--interval", 1], "oom", "--interval"),
    (["trace", "--batch"], "trace", "--batch"),
    (["--json"], "top", "--json"),                  # top is the default command
    (["trace", "--group"], "trace", "--group"),     # refused for the command, not the argument
])
def test_option_the_command_does_not_take_is_refused_naming_the_command(args, command, option):
    rc, stdout, stderr = run_gpumem(*args)
    assert rc == 2
    assert stdout == ""
    assert_usage_error(stderr, f"{command} does not take {option} ",
                       f"(see gpumem {command} --help)")


@pytest.mark.parametrize("args", [
    ["top", "-b", "-n", 1, "-i", 0.5, "--group", "site", "--help"],
    ["snapshot", "--json", "-d", 1, "--help"],
    ["trace", "--json", "-d", 1, "--help"],
    ["leaks", "--json", "-i", 1, "--help"],
    ["oom", "--json", "-d", 1, "--help"],
    ["snapshot", "--keep-ended", 5, "--keep-ended-for", 60, "--help"],
])
def test_options_the_command_takes_are_accepted(args):
    rc, stdout, stderr = run_gpumem(*args)
    assert rc == 0, stderr
    assert stderr == [], stderr
    assert stdout.startswith(f"usage: gpumem {args[0]} "), stdout


def test_trace_help_lists_json_and_not_group():
    rc, stdout, stderr = run_gpumem("trace", "--help")
    assert rc == 0 and stderr == []
    assert stdout.startswith("usage: gpumem trace ")
    options = listed_options(stdout)
    assert "--json" in options and "--duration" in options
    assert not options & {"--group", "--batch", "--iterations", "--interval"}, options


def test_top_help_lists_group_and_not_json():
    rc, stdout, stderr = run_gpumem("top", "--help")
    assert rc == 0 and stderr == []
    assert stdout.startswith("usage: gpumem top ")
    options = listed_options(stdout)
    assert {"--group", "--batch", "--iterations", "--interval"} <= options, options
    assert "--json" not in options


@pytest.mark.parametrize("command,only_here,not_here", [
    ("snapshot", {"--json"}, {"--interval", "--batch", "--iterations", "--group"}),
    ("leaks", {"--json", "--interval"}, {"--batch", "--iterations", "--group"}),
    ("oom", {"--json"}, {"--interval", "--batch", "--iterations", "--group"}),
])
def test_each_command_help_lists_exactly_its_options(command, only_here, not_here):
    rc, stdout, _ = run_gpumem(command, "-h")
    assert rc == 0
    options = listed_options(stdout)
    assert only_here <= options and not options & not_here, options
    for common in ("--pid", "--keep-ended", "--keep-ended-for", "--max-allocs", "--bundle-dir",
                   "--help"):
        assert common in options, (common, options)


def test_general_help_lists_the_commands_and_the_common_options():
    rc, stdout, stderr = run_gpumem("--help")
    assert rc == 0 and stderr == []
    assert stdout.startswith("usage: gpumem [COMMAND] ")
    for command in COMMANDS:
        assert re.search(rf"^  {command} ", stdout, re.MULTILINE), command
    options = listed_options(stdout)
    assert {"--pid", "--duration", "--keep-ended", "--keep-ended-for", "--help"} <= options
    assert not options & {"--json", "--interval", "--batch", "--iterations", "--group"}
    assert "default 1000 processes" in stdout and "default 300 s" in stdout


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e-10", "0.0009", "2e10", "0", "-1",
                                   "abc", ""])
@pytest.mark.parametrize("args,option", [
    (["snapshot", "-d"], "--duration"),
    (["snapshot", "--duration"], "--duration"),
    (["leaks", "-i"], "--interval"),
    (["top", "-b", "-i"], "--interval"),
    (["snapshot", "--keep-ended-for"], "--keep-ended-for"),
])
def test_seconds_out_of_bounds_are_refused(args, option, value):
    rc, stdout, stderr = run_gpumem(*args, value)
    assert rc == 2
    assert_usage_error(stderr, f"{option} takes a number of seconds from 0.001 to 31536000",
                       f"'{value}'")


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "x", "4194305"])
def test_keep_ended_needs_a_whole_number_from_one(value):
    rc, _, stderr = run_gpumem("snapshot", "--keep-ended", value)
    assert rc == 2
    assert_usage_error(stderr, "--keep-ended takes a whole number from 1 to 4194304",
                       f"'{value}'")


@pytest.mark.parametrize("args,words", [
    (["snapshot", "--bogus"], ["unknown or ambiguous option '--bogus'", "snapshot --help"]),
    (["snapshot", "--keep"], ["unknown or ambiguous option '--keep'"]),
    (["trace", "-x"], ["unknown option -x", "trace --help"]),
    (["snapshot", "--json=1"], ["--json takes no argument"]),
    (["snapshot", "--duration"], ["--duration needs an argument"]),
    (["snapshot", "--pid="], ["--pid takes a process id"]),
    (["snapshot", "-p", "1,x"], ["--pid takes a whole number", "'x'"]),
    (["snapshot", "--ringbuf-mb", 3], ["--ringbuf-mb must be a power of two"]),
    (["snapshot", "--stack-bytes", 7], ["--stack-bytes must be a multiple of 8"]),
    (["top", "--group", "user"], ["--group takes process, site, container or library", "'user'"]),
    (["snapshot", "--unwind", "lbr"], ["--unwind takes dwarf, fp or none", "'lbr'"]),
    (["snapshot", "-bc", "true"], ["snapshot does not take -b"]),
    (["snapshot", "-ctrue"], ["-c must be an argument of its own"]),
    (["snapshot", "stray"], ["unexpected argument 'stray'"]),
    (["snapshot", "--bundle-dir", "run/containerd"],
     ["--bundle-dir takes an absolute path", "'run/containerd'"]),
    (["trace", "--bundle-dir", ""], ["--bundle-dir takes an absolute path"]),
    (["snapshot", *["--bundle-dir", "/run"] * 17], ["--bundle-dir can be given at most 16 times"]),
])
def test_bad_command_line_is_one_line_and_exit_2(args, words):
    rc, _, stderr = run_gpumem(*args)
    assert rc == 2
    assert_usage_error(stderr, *words)


def test_keep_ended_bounds_are_accepted():
    rc, _, stderr = run_gpumem("snapshot", "--keep-ended", 1, "--keep-ended-for", 0.001,
                               "--help")
    assert rc == 0, stderr
    rc, _, stderr = run_gpumem("snapshot", "--keep-ended", 4194304, "--keep-ended-for",
                               31536000, "--help")
    assert rc == 0, stderr


@pytest.mark.parametrize("args,words", [
    (["snapshot", "-p", "1,,2", "-d", 1], ["--pid", "empty element", "1,,2"]),
    (["snapshot", "-p", "1,", "-d", 1], ["--pid", "empty element"]),
    (["snapshot", "--cgroup", "", "-d", 1], ["--cgroup", "non-empty"]),
    (["snapshot", "--max-allocs", 268435456, "-d", 1], ["--max-allocs", "67108864"]),
    (["snapshot", "--max-stacks", 16777216, "-d", 1], ["--max-stacks", "1048576"]),
])
def test_values_that_would_mean_something_else_are_refused(args, words):
    done = subprocess.run([str(GPUMEM), *map(str, args)], capture_output=True, timeout=20,
                          stdin=subprocess.DEVNULL)
    lines = done.stderr.decode(errors="replace").splitlines()
    assert done.returncode == 2, lines
    assert lines[0].startswith("gpumem:") and all(w in lines[0] for w in words), lines


def test_a_kernel_threads_pid_is_refused():
    done = subprocess.run([str(GPUMEM), "snapshot", "-p", "2", "-d", "1"], capture_output=True,
                          timeout=20, stdin=subprocess.DEVNULL)
    lines = done.stderr.decode(errors="replace").splitlines()
    assert done.returncode == 1
    assert lines == ["gpumem: PID 2 is a kernel thread: it runs no CUDA code"], lines
