#!/bin/bash
# `make bench-churn`: what a long-running system-wide gpumem keeps for each process that ended
# (issue 8, item 6). For each view, a system-wide gpumem is started, CHURN_N short-lived
# processes (`workload leak 5 1000`, one after another, each must exit 0) run under it, and
# its VmRSS is read after CHURN_BASE of them and after all of them. A bounded model keeps the
# second reading close to the first: the target is a ratio under 2. Numbers are printed; only
# --check turns a ratio of 2 or more into a failing exit status.
#
# Usage: bench/churn.sh [--check] [CASE...]
#   CASE: top, snapshot or leaks (the default is all three, each in a gpumem of its own), serve
#   (the agent, on a free loopback port, pinned in a directory of its own under /sys/fs/bpf that
#   is reset after it; bench/serve.sh runs this case), or gpumem's arguments in one word
#   ("top -b -i 2 --no-hold"), whose stdout goes to /dev/null.
# Knobs: CHURN_N (processes, default 2000), CHURN_BASE (the first reading, default 100),
# CHURN_MID (a reading between them, printed with the ratio of the last to it: none unless set;
# 1000, gpumem's --keep-ended, shows whether RSS stays flat once the model keeps all it may),
# CHURN_SETTLE_S (seconds gpumem gets to handle the exits before a reading, default 2),
# CHURN_STOP_S (seconds it gets to exit after SIGINT, default 60), GPUMEM, BUILD.
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
GPUMEM=${GPUMEM:-$BUILD/gpumem}
WORKLOAD=$BUILD/tests/workload
N=${CHURN_N:-2000}
BASE=${CHURN_BASE:-100}
MID=${CHURN_MID:-}
SETTLE=${CHURN_SETTLE_S:-2}
STOP_S=${CHURN_STOP_S:-60}
PYTHON=${PYTHON:-python3}
TARGET=2
MOCK_LIB=$(readlink -f "$BUILD/tests/lib")
# System-wide, and the mock libraries named too: with --no-hold, a library gpumem finds only
# when a process opens it is attached only if that process still runs when gpumem looks, and
# the workload lasts a few milliseconds; without these, some runs would trace none of them.
LIBS="--lib $MOCK_LIB/libcudart.so.13 --lib $MOCK_LIB/libcuda.so.1"

CHECK=0
CASES=()
for arg in "$@"; do
	case $arg in
	--check) CHECK=1 ;;
	-h | --help)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*) CASES+=("$arg") ;;
	esac
done
[ ${#CASES[@]} -gt 0 ] || CASES=(top snapshot leaks)

WORK=$(mktemp -d /tmp/gpumem-churn.XXXXXX)
GPUMEM_PID=
PIN_DIR=/sys/fs/bpf/gpumem-churn-$$	# the serve case's, reset once its agent is gone
cleanup() {
	if [ -n "$GPUMEM_PID" ]; then
		kill -KILL "$GPUMEM_PID" 2>/dev/null
		wait "$GPUMEM_PID" 2>/dev/null
	fi
	reset_pins
	rm -rf "$WORK"
}
reset_pins() {
	[ -e "$PIN_DIR" ] || return 0
	"$GPUMEM" serve --reset --pin-dir "$PIN_DIR" >/dev/null 2>"$WORK/reset.err" ||
		echo "bench-churn: 'gpumem serve --reset --pin-dir $PIN_DIR' failed:" \
			"$(head -3 "$WORK/reset.err")" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "bench-churn: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (BPF): sudo make bench-churn"
for f in "$GPUMEM" "$WORKLOAD" "$BUILD/tests/lib/libcudart.so.13" "$BUILD/tests/lib/libcuda.so.1"; do
	[ -e "$f" ] || die "$f is missing: run 'make bench-churn' (it builds it)"
done
case $N$BASE in *[!0-9]*) die "CHURN_N and CHURN_BASE must be numbers" ;; esac
{ [ "$BASE" -ge 1 ] && [ "$N" -gt "$BASE" ]; } || die "need 1 <= CHURN_BASE < CHURN_N"
case $MID in *[!0-9]*) die "CHURN_MID must be a number" ;; esac
[ -z "$MID" ] || { [ "$MID" -gt "$BASE" ] && [ "$N" -gt "$MID" ]; } ||
	die "need CHURN_BASE < CHURN_MID < CHURN_N"

# Every system-wide gpumem sees every process of the machine: others' count in the readings.
others=$(pgrep -x gpumem | tr '\n' ' ')
[ -z "$others" ] || echo "bench-churn: note: other gpumem processes run ($others); their" \
	"workloads are seen here too and add to the readings" >&2

rss_kb() {	# VmRSS of gpumem, in kB
	awk '/^VmRSS:/ { print $2; found = 1 } END { if (!found) print 0 }' \
		"/proc/$GPUMEM_PID/status" 2>/dev/null || echo 0
}

# Where the RSS is, for the detail line: anonymous (the heap) or file pages (mapped files),
# and the descriptors and mappings gpumem holds.
detail() {
	awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 }
		END { printf "anon %.1f MB, file %.1f MB", a / 1024, f / 1024 }' \
		"/proc/$GPUMEM_PID/status" 2>/dev/null
	printf ', %s fds, %s mappings' "$(find "/proc/$GPUMEM_PID/fd" -mindepth 1 2>/dev/null | wc -l)" \
		"$(wc -l <"/proc/$GPUMEM_PID/maps" 2>/dev/null)"
}

mb() {
	awk -v kb="$1" 'BEGIN { printf "%.1f", kb / 1024 }'
}

# SIGINT, as Ctrl-C: gpumem prints its final report, detaches and exits. Killed after STOP_S.
stop_gpumem() {
	local rc
	kill -INT "$GPUMEM_PID" 2>/dev/null
	for _ in $(seq $((STOP_S * 10))); do
		kill -0 "$GPUMEM_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$GPUMEM_PID" 2>/dev/null; then
		echo "bench-churn: gpumem did not exit ${STOP_S} s after SIGINT: killed" >&2
		kill -KILL "$GPUMEM_PID" 2>/dev/null
		wait "$GPUMEM_PID" 2>/dev/null
		GPUMEM_PID=
		return 1
	fi
	wait "$GPUMEM_PID"
	rc=$?
	GPUMEM_PID=
	[ "$rc" = 0 ] || { echo "bench-churn: gpumem exited with status $rc" >&2; return 1; }
}

# How many of the workload pids (one a line in $1) the report $2 names; the check that
# gpumem saw them, not only ran beside them.
pids_in_json() {	# PIDS REPORT: "SEEN TOTAL" (ours among the report's, and all processes)
	"$PYTHON" - "$1" "$2" <<'PY' 2>/dev/null || echo "0 0"
import json, sys
ours = {int(l) for l in open(sys.argv[1]) if l.strip()}
seen = {p["pid"] for p in json.load(open(sys.argv[2]))["processes"]}
print(len(ours & seen), len(seen))
PY
}

pids_in_leaks_text() {	# PIDS REPORT: how many of the pids a "pid N ..." line names
	awk 'NR == FNR { ours[$1] = 1; next } $1 == "pid" && ($2 in ours) && !($2 in seen) {
		seen[$2] = 1; n++ } END { print n + 0 }' "$1" "$2"
}

pids_ended_in_log() {	# PIDS LOG: how many of the pids serve's "process N (...) ended" names
	awk 'NR == FNR { ours[$1] = 1; next }
		$1 == "gpumem:" && $2 == "process" && $5 == "ended," && ($3 in ours) && !($3 in seen) {
		seen[$3] = 1; n++ } END { print n + 0 }' "$1" "$2"
}

FAILED=0
OVER=0

run_case() {
	local name=$1 args out=/dev/null report='' rss_base=0 rss_end ratio seen total i pid
	local detail_base detail_end rss_mid=0 detail_mid=
	case $name in
	top) args="top -b -i 1 --no-hold" ;;
	snapshot)
		report=$WORK/snapshot.json
		args="snapshot --no-hold --json -o $report"
		;;
	leaks)
		args="leaks -i 5 --no-hold"
		out=$WORK/leaks.out
		;;
	serve)
		args="serve --listen 127.0.0.1:0 --pin-dir $PIN_DIR"
		;;
	*)
		args=$name
		name=${name%% *}
		;;
	esac
	: >"$WORK/pids"
	rm -f "$WORK/gpumem.err" "$report"
	# shellcheck disable=SC2086 # the view's arguments, word-split on purpose
	"$GPUMEM" $args $LIBS >"$out" 2>"$WORK/gpumem.err" &
	GPUMEM_PID=$!
	for _ in $(seq 600); do
		grep -q "gpumem: tracing:" "$WORK/gpumem.err" 2>/dev/null && break
		kill -0 "$GPUMEM_PID" 2>/dev/null || break
		sleep 0.05
	done
	if ! grep -q "gpumem: tracing:" "$WORK/gpumem.err" 2>/dev/null; then
		echo "bench-churn: 'gpumem $args' did not start:" >&2
		sed 's/^/  /' "$WORK/gpumem.err" >&2
		kill -KILL "$GPUMEM_PID" 2>/dev/null
		wait "$GPUMEM_PID" 2>/dev/null
		GPUMEM_PID=
		return 1
	fi
	# Its uprobe_multi links name the files they probe in their fdinfo.
	if ! grep -qs "^path:[[:space:]]*$MOCK_LIB/libcudart.so.13" "/proc/$GPUMEM_PID/fdinfo/"*; then
		echo "bench-churn: $name: gpumem has no probes on $MOCK_LIB/libcudart.so.13" >&2
		stop_gpumem
		return 1
	fi
	local rss_start
	rss_start=$(rss_kb)
	for i in $(seq "$N"); do
		"$WORKLOAD" leak 5 1000 >/dev/null 2>"$WORK/workload.err" &
		pid=$!
		if ! wait "$pid"; then
			echo "bench-churn: $name: workload run $i (pid $pid) failed:" \
				"$(head -3 "$WORK/workload.err")" >&2
			stop_gpumem
			return 1
		fi
		echo "$pid" >>"$WORK/pids"
		if [ "$i" = "$BASE" ]; then
			sleep "$SETTLE"
			rss_base=$(rss_kb)
			detail_base=$(detail)
		elif [ "$i" = "$MID" ]; then
			sleep "$SETTLE"
			rss_mid=$(rss_kb)
			detail_mid=$(detail)
		fi
	done
	sleep "$SETTLE"
	rss_end=$(rss_kb)
	detail_end=$(detail)
	if [ "$rss_base" = 0 ] || [ "$rss_end" = 0 ]; then
		echo "bench-churn: $name: gpumem ended during the run:" >&2
		sed 's/^/  /' "$WORK/gpumem.err" | tail -5 >&2
		stop_gpumem
		return 1
	fi
	stop_gpumem || return 1

	seen=
	if [ "$name" = serve ]; then
		reset_pins
		seen=$(pids_ended_in_log "$WORK/pids" "$WORK/gpumem.err")
		seen="$seen of $N workload pids logged as ended"
	elif [ -n "$report" ]; then
		read -r seen total < <(pids_in_json "$WORK/pids" "$report")
		seen="$seen of $N workload pids in the final report ($total processes in it)"
	elif [ "$out" != /dev/null ]; then
		seen=$(pids_in_leaks_text "$WORK/pids" "$out")
		seen="$seen of $N workload pids in its reports"
	fi
	if [ -n "$seen" ] && [ "${seen%% *}" = 0 ]; then
		echo "bench-churn: $name: gpumem saw none of the workloads ($seen)" >&2
		return 1
	fi

	ratio=$(awk -v a="$rss_base" -v b="$rss_end" 'BEGIN { printf "%.2f", b / a }')
	printf 'churn %s: rss after %d = %s MB, after %d = %s MB, ratio Y/X = %s (target < %d)\n' \
		"$name" "$BASE" "$(mb "$rss_base")" "$N" "$(mb "$rss_end")" "$ratio" "$TARGET"
	awk -v a="$rss_base" -v b="$rss_end" -v n=$((N - BASE)) -v s="$rss_start" 'BEGIN {
		printf "  at start %.1f MB; %.0f KB more for each of the last %d processes\n",
			s / 1024, (b - a) / n, n }'
	if [ -n "$MID" ]; then
		awk -v m="$rss_mid" -v b="$rss_end" -v mid="$MID" -v n="$N" 'BEGIN {
			printf "  after %d = %.1f MB; after %d / after %d = %.2f\n", mid, m / 1024,
				n, mid, m ? b / m : 0 }'
	fi
	echo "  after $BASE: $detail_base"
	[ -z "$MID" ] || echo "  after $MID: $detail_mid"
	echo "  after $N: $detail_end"
	[ -z "$seen" ] || echo "  seen: $seen"
	awk -v r="$ratio" -v t="$TARGET" 'BEGIN { exit !(r >= t) }' && OVER=1
	return 0
}

echo "gpumem churn: $N processes ('workload leak 5 1000', one after another) under a" \
	"system-wide gpumem; VmRSS after $BASE and after $N, ${SETTLE} s after the last exit"
for c in "${CASES[@]}"; do
	run_case "$c" || FAILED=1
done
[ "$FAILED" = 0 ] || exit 1
[ "$CHECK" = 1 ] && [ "$OVER" = 1 ] && exit 1
exit 0
