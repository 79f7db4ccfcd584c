#!/usr/bin/env bash
# The integration suite on a host it shares: while it runs, another system-wide gpumem
# (`top -b`) traces everything, and another CUDA program (the mock workload, in a loop) keeps
# allocating, freeing, failing and exiting. A test that passes alone but fails here asserts on
# something that is not its own (host-wide counters, every process seen, every failure).
#
# Usage: tests/shared_host.sh [PYTEST ARGS...]   (as root, after `make all test-progs`)
# The whole integration suite, or the test files and ids among the arguments
# (tests/integration/test_x.py::test_y).
# Exits with pytest's status; the neighbours are stopped on every exit, failure included.
set -u
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-/usr/bin/python3}
GPUMEM=build/gpumem
WORKLOAD=build/tests/workload
START_TIMEOUT=30

for f in "$GPUMEM" "$WORKLOAD"; do
	[ -x "$f" ] || { echo "shared_host: $f is missing: run \`make all test-progs\`" >&2; exit 2; }
done

log_dir=$(mktemp -d /tmp/gpumem-shared-host.XXXXXX)
loop_pid=
top_pid=

stop_neighbours() {
	# The loop runs in a session of its own: its group takes the workload running now with it.
	if [ -n "$loop_pid" ] && kill -0 "$loop_pid" 2>/dev/null; then
		kill -TERM -- "-$loop_pid" 2>/dev/null
		# One left stopped by a holding gpumem that was killed takes the TERM when resumed.
		kill -CONT -- "-$loop_pid" 2>/dev/null
		wait "$loop_pid" 2>/dev/null
	fi
	# SIGINT is gpumem's Ctrl-C: it detaches and exits cleanly.
	if [ -n "$top_pid" ] && kill -0 "$top_pid" 2>/dev/null; then
		kill -INT "$top_pid" 2>/dev/null
		for _ in $(seq 100); do
			kill -0 "$top_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$top_pid" 2>/dev/null
		wait "$top_pid" 2>/dev/null
	fi
	rm -rf "$log_dir"
}
trap stop_neighbours EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The busy neighbour, each program a new pid as a real job's processes come and go: threads
# churning pairs; a step loop; allocations held across 0.5 s and freed later, so that a gpumem
# started meanwhile counts unknown frees; failed allocations; a leak; children.
setsid bash -c '
	w=$1
	while :; do
		"$w" threads 2 5000 4096
		"$w" steps 10 50 4096
		sleep 0.5 | "$w" prefree 20 4096
		GPUMEM_MOCK_FAIL_AFTER=3 "$w" fail 4096 10
		"$w" leak 20 4096
		"$w" children 2 4096
	done >/dev/null 2>&1 </dev/null
' shared-host-workload "$WORKLOAD" &
loop_pid=$!

# The other gpumem: system-wide, never holding anyone.
"$GPUMEM" top -b -i 1 --no-hold >/dev/null 2>"$log_dir/top.err" </dev/null &
top_pid=$!
for _ in $(seq $((START_TIMEOUT * 10))); do
	grep -q "gpumem: tracing:" "$log_dir/top.err" && break
	if ! kill -0 "$top_pid" 2>/dev/null; then
		echo "shared_host: the neighbour gpumem exited:" >&2
		cat "$log_dir/top.err" >&2
		exit 2
	fi
	sleep 0.1
done
if ! grep -q "gpumem: tracing:" "$log_dir/top.err"; then
	echo "shared_host: the neighbour gpumem did not start tracing in ${START_TIMEOUT}s" >&2
	exit 2
fi
echo "shared_host: neighbours running: gpumem top (pid $top_pid), workload loop (pid $loop_pid)"

suite=tests/integration
prev=
for arg in "$@"; do
	# A test file or id of its own, not the value of an option (--deselect PATH).
	case $prev in -k|-m|-p|-c|-o|--deselect|--ignore|--ignore-glob|--rootdir|--basetemp) ;;
	*) [ -e "${arg%%::*}" ] && suite= ;;
	esac
	prev=$arg
done
"$PYTHON" -m pytest -ra $suite "$@"
status=$?

for pid in "$top_pid" "$loop_pid"; do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "shared_host: neighbour $pid ended during the run: the host was not shared" \
			"to the end" >&2
		[ "$status" -eq 0 ] && status=1
	fi
done
exit "$status"
