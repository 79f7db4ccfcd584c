#!/bin/bash
# The cost of the Python walk (`make bench`): cudaMalloc/cudaFree pairs through ctypes from
# Debian's python3 at Python stack depths 10 and 50 (bench/pywalk.py), under system-wide gpumem
# with Python frames and with --no-python, rounds interleaved (order swapped each round);
# medians of the loop thread's CPU time. The difference is the walk's cost per allocation
# (one allocation a pair). A benchmark measures: nothing here fails on the 1 µs target.
#
# Knobs: BENCH_PY_PAIRS (pairs per run, default 20000), BENCH_ROUNDS (default 7),
# BENCH_PROFILE=0 to skip the per-program BPF time pass.
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
PAIRS=${BENCH_PY_PAIRS:-20000}
ROUNDS=${BENCH_ROUNDS:-7}
PROFILE=${BENCH_PROFILE:-1}
DEPTHS=(10 50)
TARGET_NS=1000
PY=/usr/bin/python3
GPUMEM=${GPUMEM:-$BUILD/gpumem}
LIBDIR=$(readlink -f "$BUILD/bench/lib")
CUDART=$(readlink -f "$LIBDIR/libcudart.so.13")
CUDA=$(readlink -f "$LIBDIR/libcuda.so.1")

WORK=$(mktemp -d /tmp/gpumem-pywalk.XXXXXX)
TRACER_PID=
. bench/common.sh
trap 'stop_tracer; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

if ! "$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
	echo "python walk: $PY is not CPython 3.11, skipped"
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "pywalk: must run as root (BPF)" >&2; exit 1; }
[ -e "$CUDART" ] && [ -e "$CUDA" ] || { echo "pywalk: $LIBDIR: run 'make bench'" >&2; exit 1; }

# gpumem system-wide on the benchmark's private copies of the mock libraries; $1: "python"
# or "nopython".
start_gpumem() {
	local args=(snapshot --json -o "$WORK/snapshot.json" --no-hold --lib "$CUDART" --lib "$CUDA"
		--duration 600)
	[ "$1" = nopython ] && args+=(--no-python)
	"$GPUMEM" "${args[@]}" >"$WORK/gpumem.log" 2>&1 &
	TRACER_PID=$!
	wait_for_tracer "$WORK/gpumem.log" "gpumem: tracing:" pywalk
}

# The Python frames gpumem recorded for the loop's site of pid $1 (0 with --no-python).
python_frames_seen() {
	"$PY" - "$WORK/snapshot.json" "$1" <<'PY' 2>/dev/null || echo "?"
import json, sys
snap = json.load(open(sys.argv[1]))
sites = [s for p in snap["processes"] if p["pid"] == int(sys.argv[2]) for s in p["sites"]]
print(max((sum(f.get("lang") == "python" for f in s["frames"]) for s in sites), default=0))
PY
}

measure() {
	local config=$1 depth out pid cpu
	start_gpumem "$config" || return 1
	for depth in "${DEPTHS[@]}"; do
		out=$(timeout 120 "$PY" bench/pywalk.py "$CUDART" "$depth" "$PAIRS") || {
			echo "pywalk: bench/pywalk.py failed at depth $depth" >&2
			continue
		}
		# "pywalk: pid P depth D pairs N: W ns/pair wall, C ns/pair cpu"
		read -r pid cpu <<<"$(awk '{ print $3, $(NF - 2) }' <<<"$out")"
		echo "$cpu" >>"$WORK/$config.$depth"
		echo "$pid" >>"$WORK/$config.$depth.pids"
	done
	stop_tracer
	for depth in "${DEPTHS[@]}"; do
		pid=$(tail -1 "$WORK/$config.$depth.pids" 2>/dev/null) || continue
		printf '  %-9s depth %2d %8.1f ns/pair cpu  (%s Python frames seen)\n' "$config" \
			"$depth" "$(tail -1 "$WORK/$config.$depth")" "$(python_frames_seen "$pid")"
	done
}

echo "Python walk: cudaMalloc+cudaFree pairs through ctypes ($PY), depths ${DEPTHS[*]};" \
	"$ROUNDS rounds of python, nopython, interleaved; $PAIRS pairs a run"
configs=(python nopython)
for round in $(seq "$ROUNDS"); do
	echo "round $round/$ROUNDS"
	for i in 0 1; do
		measure "${configs[$(((i + round) % 2))]}" || echo "pywalk: run failed" >&2
	done
done

echo
printf '%-8s %14s %14s %14s %8s\n' "depth" "python ns/pair" "--no-python" "added ns/alloc" "target"
for depth in "${DEPTHS[@]}"; do
	if [ ! -s "$WORK/python.$depth" ] || [ ! -s "$WORK/nopython.$depth" ]; then
		printf '%-8s %14s\n' "$depth" "no result"
		continue
	fi
	py=$(median "$WORK/python.$depth")
	nopy=$(median "$WORK/nopython.$depth")
	awk -v d="$depth" -v a="$py" -v b="$nopy" -v t="$TARGET_NS" \
		'BEGIN { printf "%-8s %14.1f %14.1f %14.1f %8s\n", d, a, b, a - b, "< " t }'
done

# Where the time goes: one more run at depth 50 with kernel.bpf_stats_enabled, per program.
if [ "$PROFILE" = 1 ]; then
	echo
	echo "BPF time per program at depth 50 (separate runs, kernel.bpf_stats_enabled=1):"
	for config in python nopython; do
		start_gpumem "$config" || continue
		bpf_prog_times "$config" "" "$PY" bench/pywalk.py "$CUDART" 50 "$PAIRS"
		stop_tracer
	done
fi
