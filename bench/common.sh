# Shell helpers the benchmark scripts share (sourced by bench/run.sh, pywalk.sh, tensors.sh,
# discovery.sh, exit.sh).

# SIGINT makes a tracer print its report and exit. Sent again every second: bpftrace can miss
# one that lands just before it sleeps in epoll_wait. Killed after ten. TRACER_PID empty: none.
stop_tracer() {
	[ -n "${TRACER_PID:-}" ] || return 0
	for _ in $(seq 10); do
		kill -INT "$TRACER_PID" 2>/dev/null || break
		for _ in $(seq 20); do
			kill -0 "$TRACER_PID" 2>/dev/null || break 2
			sleep 0.05
		done
	done
	kill -KILL "$TRACER_PID" 2>/dev/null
	wait "$TRACER_PID" 2>/dev/null
	TRACER_PID=
}

# Every tracer in TRACERS stopped, as stop_tracer stops one; TRACERS emptied.
stop_tracers() {
	for TRACER_PID in "${TRACERS[@]}"; do
		stop_tracer
	done
	TRACERS=()
}

# BENCH_BASELINE, another gpumem binary named relative to where the bench was started (OLDPWD
# after the script's own cd), as an absolute path in BASELINE (empty without one); fails when
# it names no executable file.
baseline_binary() {
	BASELINE=${BENCH_BASELINE:+$(cd "$OLDPWD" 2>/dev/null && readlink -f "$BENCH_BASELINE")}
	[ -z "${BENCH_BASELINE:-}" ] || { [ -f "$BASELINE" ] && [ -x "$BASELINE" ]; }
}

# The median of the numbers in file $1, one a line; fails when it has none.
median() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		if (NR == 0) exit 1
		print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Waits until log $1 has a line starting with $2 while TRACER_PID lives (30 s at most); else
# prints the log as the error of $3 and stops the tracer.
wait_for_tracer() {
	for _ in $(seq 600); do
		grep -qs "$2" "$1" && return 0
		kill -0 "$TRACER_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "$3: the tracer did not start:" >&2
	sed 's/^/  /' "$1" >&2
	stop_tracer
	return 1
}

# The BPF time of the tracer's programs over the command "$@" (kernel.bpf_stats_enabled for
# its run): a line "  LABEL NAME RUNS runs NS ns/run" per program that ran and whose name
# starts with PREFIX. Usage: bpf_prog_times LABEL PREFIX COMMAND...
bpf_prog_times() {
	local label=$1 prefix=$2 ids id
	shift 2
	ids=$(grep -hs '^prog_id:' /proc/"$TRACER_PID"/fdinfo/* | awk '{ print $2 }' | sort -un)
	sysctl -q kernel.bpf_stats_enabled=1
	timeout 120 "$@" >/dev/null
	sysctl -q kernel.bpf_stats_enabled=0
	for id in $ids; do
		bpftool prog show id "$id" --json
		echo
	done | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if not line.strip():
        continue
    p = json.loads(line)
    cnt = p.get("run_cnt", 0)
    if cnt and p.get("name", "").startswith(sys.argv[2]):
        print("  %-16s %-20s %9d runs %8.0f ns/run" % (sys.argv[1], p.get("name", "?"), cnt,
              p.get("run_time_ns", 0) / cnt))' "$label" "$prefix"
}

# Until file $1 has a line with text $2 (30 s at most); fails then.
wait_for_line() {
	for _ in $(seq 600); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
