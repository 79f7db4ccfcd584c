#!/bin/bash
# The cost of the Python walk (`make bench`): cudaMalloc/cudaFree pairs through ctypes at
# Python stack depths 10 and 50 (bench/pywalk.py), from Debian's python3 and each pyenv CPython
# 3.9-3.13 installed, under system-wide gpumem with Python frames and with --no-python, rounds
# interleaved (order swapped each round); medians of the loop thread's CPU time. The difference
# is the walk's cost per allocation (one allocation a pair). A benchmark measures: nothing here
# fails on the 1 µs target.
#
# Knobs: BENCH_PY_PAIRS (pairs per run, default 20000), BENCH_ROUNDS (default 7),
# BENCH_PYTHONS (space-separated interpreters; default: those found), BENCH_PROFILE=0 to skip
# the per-program BPF time pass (Debian's python3).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
PAIRS=${BENCH_PY_PAIRS:-20000}
ROUNDS=${BENCH_ROUNDS:-7}
PROFILE=${BENCH_PROFILE:-1}
DEPTHS=(10 50)
TARGET_NS=1000
TARGET_OLD_NS=1500	# CPython 3.9 and 3.10: heap frames, a read a page
PY=/usr/bin/python3
PYENV_VERSIONS=${PYENV_ROOT:-/root/.pyenv}/versions
GPUMEM=${GPUMEM:-$BUILD/gpumem}
LIBDIR=$(readlink -f "$BUILD/bench/lib")
CUDART=$(readlink -f "$LIBDIR/libcudart.so.13")
CUDA=$(readlink -f "$LIBDIR/libcuda.so.1")

WORK=$(mktemp -d /tmp/gpumem-pywalk.XXXXXX)
TRACER_PID=
. bench/common.sh
trap 'stop_tracer; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# The interpreters measured, each named by its version: Debian's first, then pyenv's.
PYTHONS=()
NAMES=()
add_python() {
	local version
	version=$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return
	case "$version" in 3.9|3.1[0-3]) ;; *) echo "pywalk: $1 is CPython $version, skipped"; return ;; esac
	PYTHONS+=("$1")
	NAMES+=("$2$version")
}
if [ -n "${BENCH_PYTHONS:-}" ]; then
	for p in $BENCH_PYTHONS; do add_python "$p" ""; done
else
	[ -x "$PY" ] && add_python "$PY" "debian-"
	for minor in 9 10 11 12 13; do
		p=$(ls -d "$PYENV_VERSIONS"/3.$minor.*/bin/python3.$minor 2>/dev/null | tail -1)
		[ -n "$p" ] && add_python "$p" "pyenv-"
	done
fi
if [ ${#PYTHONS[@]} = 0 ]; then
	echo "python walk: no CPython 3.9-3.13 found, skipped"
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
	local config=$1 depth out pid cpu i key
	start_gpumem "$config" || return 1
	for i in "${!PYTHONS[@]}"; do
		for depth in "${DEPTHS[@]}"; do
			key="${NAMES[$i]}.$config.$depth"
			out=$(timeout 120 "${PYTHONS[$i]}" bench/pywalk.py "$CUDART" "$depth" \
				"$PAIRS") || {
				echo "pywalk: ${NAMES[$i]}: bench/pywalk.py failed at depth $depth" >&2
				continue
			}
			# "pywalk: pid P depth D pairs N: W ns/pair wall, C ns/pair cpu"
			read -r pid cpu <<<"$(awk '{ print $3, $(NF - 2) }' <<<"$out")"
			echo "$cpu" >>"$WORK/$key"
			echo "$pid" >>"$WORK/$key.pids"
		done
	done
	stop_tracer
	for i in "${!PYTHONS[@]}"; do
		for depth in "${DEPTHS[@]}"; do
			key="${NAMES[$i]}.$config.$depth"
			pid=$(tail -1 "$WORK/$key.pids" 2>/dev/null) || continue
			printf '  %-12s %-9s depth %2d %8.1f ns/pair cpu  (%s Python frames seen)\n' \
				"${NAMES[$i]}" "$config" "$depth" "$(tail -1 "$WORK/$key")" \
				"$(python_frames_seen "$pid")"
		done
	done
}

echo "Python walk: cudaMalloc+cudaFree pairs through ctypes (${NAMES[*]}), depths" \
	"${DEPTHS[*]}; $ROUNDS rounds of python, nopython, interleaved; $PAIRS pairs a run"
configs=(python nopython)
for round in $(seq "$ROUNDS"); do
	echo "round $round/$ROUNDS"
	for i in 0 1; do
		measure "${configs[$(((i + round) % 2))]}" || echo "pywalk: run failed" >&2
	done
done

echo
printf '%-12s %-6s %14s %14s %14s %8s\n' "python" "depth" "python ns/pair" "--no-python" \
	"added ns/alloc" "target"
for name in "${NAMES[@]}"; do
	for depth in "${DEPTHS[@]}"; do
		if [ ! -s "$WORK/$name.python.$depth" ] || [ ! -s "$WORK/$name.nopython.$depth" ]; then
			printf '%-12s %-6s %14s\n' "$name" "$depth" "no result"
			continue
		fi
		py=$(median "$WORK/$name.python.$depth")
		nopy=$(median "$WORK/$name.nopython.$depth")
		target=$TARGET_NS
		case "$name" in *3.9|*3.10) target=$TARGET_OLD_NS ;; esac
		awk -v n="$name" -v d="$depth" -v a="$py" -v b="$nopy" -v t="$target" \
			'BEGIN { printf "%-12s %-6s %14.1f %14.1f %14.1f %8s %s\n", n, d, a, b, a - b,
				 "< " t, a - b < t ? "met" : "MISSED" }'
	done
done

# Where the time goes: one more run at depth 50 with kernel.bpf_stats_enabled, per program.
if [ "$PROFILE" = 1 ]; then
	echo
	echo "BPF time per program at depth 50, ${NAMES[0]} (separate runs," \
		"kernel.bpf_stats_enabled=1):"
	for config in python nopython; do
		start_gpumem "$config" || continue
		bpf_prog_times "$config" "" "${PYTHONS[0]}" bench/pywalk.py "$CUDART" 50 "$PAIRS"
		stop_tracer
	done
fi
