#!/bin/bash
# The cost of the Python walk (`make bench`): cudaMalloc/cudaFree pairs through ctypes at
# Python stack depths 10 and 50 (bench/pywalk.py), from Debian's python3 and each pyenv CPython
# 3.9-3.13 installed, measured side by side: two copies of the mock runtime, one under a
# gpumem with Python frames and one under a gpumem with --no-python, both tracers running, and
# one Python process making its pairs through the two copies in turn, 2,000 at a time (the
# first of a turn rotating), timed on its thread's CPU clock (uprobes are per inode: each
# tracer's probes fire on its copy alone). Whatever the shared machine does meanwhile falls on
# both alike. The difference is the walk's cost per allocation (one allocation a pair); the
# median of the runs' differences is reported.
# The runtime reaches the driver through its private table (bench/run.sh's runtime-only
# setup), so the two copies share one driver with no probe on it: the walk runs once an
# allocation either way. A benchmark measures: nothing here fails on a target.
#
# Knobs: BENCH_PY_PAIRS (pairs per run and copy, default 20000), BENCH_ROUNDS (runs, default
# 7, the tracers started anew for each), BENCH_PYTHONS (space-separated interpreters; default:
# those found), BENCH_PROFILE=0 to skip the per-program BPF time pass (Debian's python3),
# BENCH_BASELINE=PATH another gpumem binary with Python frames on a third copy, beside the two
# (before and after a change, in one run).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
PAIRS=${BENCH_PY_PAIRS:-20000}
ROUNDS=${BENCH_ROUNDS:-7}
PROFILE=${BENCH_PROFILE:-1}
BATCH=2000
DEPTHS=(10 50)
TARGET_NS=1000
TARGET_OLD_NS=1500	# CPython 3.9 and 3.10: heap frames, a read a page
PY=/usr/bin/python3
PYENV_VERSIONS=${PYENV_ROOT:-/root/.pyenv}/versions
GPUMEM=${GPUMEM:-$BUILD/gpumem}
LIBDIR=$(readlink -f "$BUILD/bench/lib")
CUDART=$(readlink -f "$LIBDIR/libcudart.so.13")
CUDA=$(readlink -f "$LIBDIR/libcuda.so.1")
CONFIGS=(python nopython)

WORK=$(mktemp -d /tmp/gpumem-pywalk.XXXXXX)
TRACER_PID=
TRACERS=()
. bench/common.sh
baseline_binary ||
	{ echo "pywalk: BENCH_BASELINE=$BENCH_BASELINE is no executable file" >&2; exit 2; }
[ -z "$BASELINE" ] || CONFIGS+=(baseline)
trap 'stop_tracers; [ "$PROFILE" = 1 ] && sysctl -q kernel.bpf_stats_enabled=0; rm -rf "$WORK"' EXIT
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
export GPUMEM_MOCK_RUNTIME_PRIVATE=1

# A configuration's copies of the mock libraries, in $WORK/$1: files of their own (their own
# inodes), named so that neither tracer's discovery takes the other's.
for config in "${CONFIGS[@]}"; do
	mkdir -p "$WORK/$config"
	cp "$CUDART" "$WORK/$config/bench-mock-cudart.so.13"
	cp "$CUDA" "$WORK/$config/bench-mock-cuda.so.1"
	ln -s bench-mock-cuda.so.1 "$WORK/$config/libcuda.so.1"
done

# Both tracers, system-wide, each on its configuration's copy of the runtime.
start_tracers() {
	local config args bin
	for config in "${CONFIGS[@]}"; do
		bin=$GPUMEM
		[ "$config" = baseline ] && bin=$BASELINE
		args=(snapshot --json -o "$WORK/$config.json" --no-hold
		      --lib "$WORK/$config/bench-mock-cudart.so.13" --duration 600)
		[ "$config" = nopython ] && args+=(--no-python)
		"$bin" "${args[@]}" >"$WORK/$config.log" 2>&1 &
		TRACER_PID=$!
		TRACERS+=("$TRACER_PID")
		wait_for_tracer "$WORK/$config.log" "gpumem: tracing:" "pywalk: $config" || {
			TRACERS=("${TRACERS[@]:0:${#TRACERS[@]}-1}")
			stop_tracers
			return 1
		}
	done
}

# The Python frames gpumem recorded for the loop's site of pid $1 (0 with --no-python).
python_frames_seen() {
	"$PY" - "$WORK/$2.json" "$1" <<'PY' 2>/dev/null || echo "?"
import json, sys
snap = json.load(open(sys.argv[1]))
sites = [s for p in snap["processes"] if p["pid"] == int(sys.argv[2]) for s in p["sites"]]
print(max((sum(f.get("lang") == "python" for f in s["frames"]) for s in sites), default=0))
PY
}

# The workload's command line, through every configuration's copy, into WORKLOAD ($1: the
# interpreter, $2: the depth).
workload() {
	local config
	WORKLOAD=("$1" bench/pywalk.py "$2" "$PAIRS" "$BATCH")
	for config in "${CONFIGS[@]}"; do
		WORKLOAD+=("$WORK/$config/bench-mock-cudart.so.13")
	done
}

# One run: the tracers, every interpreter at every depth, the tracers stopped (each snapshot
# then written), each result printed with the Python frames its tracer saw.
run() {
	local round=$1 i depth out pid py nopy base key
	local -A pid_of=()
	start_tracers || return 1
	for i in "${!PYTHONS[@]}"; do
		for depth in "${DEPTHS[@]}"; do
			key="${NAMES[$i]}.$depth"
			# "pywalk: pid P depth D pairs N", then "LIB: C ns/pair cpu" for each copy
			workload "${PYTHONS[$i]}" "$depth"
			out=$(timeout 120 "${WORKLOAD[@]}") || {
				echo "pywalk: ${NAMES[$i]}: bench/pywalk.py failed at depth $depth" >&2
				continue
			}
			pid=$(awk '/^pywalk: pid/ { print $3; exit }' <<<"$out")
			py=$(awk '/\/python\// { print $2 }' <<<"$out")
			nopy=$(awk '/\/nopython\// { print $2 }' <<<"$out")
			base=$(awk '/\/baseline\// { print $2 }' <<<"$out")
			if [ -z "$pid" ] || [ -z "$py" ] || [ -z "$nopy" ] ||
			   { [ -n "$BASELINE" ] && [ -z "$base" ]; }; then
				echo "pywalk: ${NAMES[$i]}: bench/pywalk.py printed no result at depth" \
					"$depth: $out" >&2
				continue
			fi
			echo "$py" >>"$WORK/$key.python"
			echo "$nopy" >>"$WORK/$key.nopython"
			awk -v a="$py" -v b="$nopy" 'BEGIN { print a - b }' >>"$WORK/$key.added"
			[ -z "$BASELINE" ] ||
				awk -v a="$base" -v b="$nopy" 'BEGIN { print a - b }' >>"$WORK/$key.baseline"
			pid_of[$key]=$pid
		done
	done
	stop_tracers
	echo "run $round/$ROUNDS"
	for i in "${!PYTHONS[@]}"; do
		for depth in "${DEPTHS[@]}"; do
			key="${NAMES[$i]}.$depth"
			pid=${pid_of[$key]:-}
			[ -n "$pid" ] || continue
			printf '  %-12s depth %2d  python %8.1f, nopython %8.1f ns/pair cpu  (%s and %s Python frames seen)\n' \
				"${NAMES[$i]}" "$depth" "$(tail -1 "$WORK/$key.python")" \
				"$(tail -1 "$WORK/$key.nopython")" "$(python_frames_seen "$pid" python)" \
				"$(python_frames_seen "$pid" nopython)"
			[ -z "$BASELINE" ] ||
				printf '  %-12s depth %2d  baseline %8.1f ns/pair cpu added (%s Python frames seen)\n' \
					"${NAMES[$i]}" "$depth" "$(tail -1 "$WORK/$key.baseline")" \
					"$(python_frames_seen "$pid" baseline)"
		done
	done
}

echo "Python walk: cudaMalloc+cudaFree pairs through ctypes (${NAMES[*]}), depths" \
	"${DEPTHS[*]}; python and nopython side by side in each process, $BATCH pairs a turn;" \
	"$ROUNDS runs of $PAIRS pairs a copy"
for round in $(seq "$ROUNDS"); do
	run "$round" || echo "pywalk: run $round failed" >&2
done

echo
printf '%-12s %-6s %14s %14s %14s %8s\n' "python" "depth" "python ns/pair" "--no-python" \
	"added ns/alloc" "target"
for name in "${NAMES[@]}"; do
	for depth in "${DEPTHS[@]}"; do
		key="$name.$depth"
		if [ ! -s "$WORK/$key.added" ]; then
			printf '%-12s %-6s %14s\n' "$name" "$depth" "no result"
			continue
		fi
		target=$TARGET_NS
		case "$name" in *3.9|*3.10) target=$TARGET_OLD_NS ;; esac
		awk -v n="$name" -v d="$depth" -v a="$(median "$WORK/$key.python")" \
			-v b="$(median "$WORK/$key.nopython")" -v x="$(median "$WORK/$key.added")" \
			-v t="$target" 'BEGIN { printf "%-12s %-6s %14.1f %14.1f %14.1f %8s %s\n", n, d,
				 a, b, x, "< " t, x < t ? "met" : "MISSED" }'
		[ -z "$BASELINE" ] ||
			printf '%-12s %-6s %44.1f (BENCH_BASELINE)\n' "$name" "$depth" \
				"$(median "$WORK/$key.baseline")"
	done
done
echo "(added: the median of the runs' differences, each measured side by side in one process)"

# Where the time goes: one more run at depth 50 with kernel.bpf_stats_enabled, per program.
if [ "$PROFILE" = 1 ]; then
	echo
	echo "BPF time per program at depth 50, ${NAMES[0]} (one run, every tracer," \
		"kernel.bpf_stats_enabled=1):"
	if start_tracers; then
		workload "${PYTHONS[0]}" 50
		sysctl -q kernel.bpf_stats_enabled=1
		timeout 120 "${WORKLOAD[@]}" >/dev/null
		sysctl -q kernel.bpf_stats_enabled=0
		# Each tracer's programs, as the run left them (the command of bpf_prog_times: none).
		for i in "${!CONFIGS[@]}"; do
			TRACER_PID=${TRACERS[$i]}
			bpf_prog_times "${CONFIGS[$i]}" "" true
		done
		stop_tracers
	fi
fi
