#!/bin/bash
# The cost of a PyTorch tensor event (`make bench`): tensor malloc+free pairs through a copy of
# the mock caching allocator (bench/tensor_loop.c: USDT pytorch:malloc and pytorch:free behind
# their semaphores), with nothing attached (off), with gpumem's probes attached but the process
# filtered out at their first instruction (idle: -p 1, the kernel's trap and an empty program),
# under system-wide gpumem (maps: snapshot, the maps only) and under gpumem trace (every event
# streamed), rounds interleaved (the order turns each round); medians of the loop thread's CPU
# time. Per event = the added cost of a pair / 2; maps - idle is what gpumem's BPF adds to the
# trap. The loop is C, so no Python frames are walked (bench/pywalk.sh measures that walk). A
# benchmark measures: nothing here fails on the 0.5 µs target.
#
# Knobs: BENCH_TENSOR_PAIRS (pairs per run, default 200000), BENCH_ROUNDS (default 7),
# BENCH_PROFILE=0 to skip the per-program BPF time pass.
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
PAIRS=${BENCH_TENSOR_PAIRS:-200000}
ROUNDS=${BENCH_ROUNDS:-7}
PROFILE=${BENCH_PROFILE:-1}
TARGET_NS=500
ON_TOP_NS=150	# what gpumem's programs add to the trap, per event
GPUMEM=${GPUMEM:-$BUILD/gpumem}
LOOP=$BUILD/bench/tensor_loop
LIBDIR=$(readlink -f "$BUILD/bench/lib")
C10=$(readlink -f "$LIBDIR/libc10_cuda.so" 2>/dev/null)
CUDART=$(readlink -f "$LIBDIR/libcudart.so.13")
CUDA=$(readlink -f "$LIBDIR/libcuda.so.1")
CONFIGS=(off idle maps trace)

WORK=$(mktemp -d /tmp/gpumem-tensors.XXXXXX)
TRACER_PID=
. bench/common.sh
trap 'stop_tracer; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

if [ ! -x "$LOOP" ] || [ -z "$C10" ]; then
	echo "tensor events: $LOOP not built (needs <sys/sdt.h>: systemtap-sdt-dev), skipped"
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "tensors: must run as root (BPF)" >&2; exit 1; }

# gpumem system-wide on the benchmark's private copies; $1: idle (pid 1 only), maps (snapshot)
# or trace.
start_gpumem() {
	local args=(--no-hold --lib "$C10" --lib "$CUDART" --lib "$CUDA" --duration 600)

	[ "$1" = idle ] && args+=(-p 1)
	if [ "$1" = trace ]; then
		args=(trace --json -o /dev/null "${args[@]}")
	else
		args=(snapshot --json -o "$WORK/snapshot.json" "${args[@]}")
	fi
	"$GPUMEM" "${args[@]}" >"$WORK/gpumem.log" 2>&1 &
	TRACER_PID=$!
	wait_for_tracer "$WORK/gpumem.log" "gpumem: tracing:" tensors
}

# The tensors gpumem counted for pid $1 (its snapshot), to show the probes fired.
tensors_seen() {
	/usr/bin/python3 - "$WORK/snapshot.json" "$1" <<'PY' 2>/dev/null || echo "?"
import json, sys
snap = json.load(open(sys.argv[1]))
print(sum(p["tensor_alloc_count"] for p in snap["processes"] if p["pid"] == int(sys.argv[2])))
PY
}

measure() {
	local config=$1 out pid cpu fired seen=-
	if [ "$config" != off ]; then
		start_gpumem "$config" || return 1
	fi
	if ! out=$(timeout 120 "$LOOP" "$PAIRS"); then
		echo "tensors: $LOOP failed" >&2
		stop_tracer
		return 1
	fi
	# "tensors: pid P pairs N: W ns/pair wall, C ns/pair cpu, fired F"
	read -r pid cpu fired <<<"$(awk '{ print $3, $(NF - 4), $NF }' <<<"$out")"
	stop_tracer
	if [ "$config" != off ] && [ "$fired" = 0 ]; then
		echo "tensors: $config run discarded: the probes never fired (gpumem's log:" \
			"$(tr '\n' ' ' <"$WORK/gpumem.log"))" >&2
		return 1
	fi
	[ "$config" = maps ] && seen=$(tensors_seen "$pid")
	echo "$cpu" >>"$WORK/$config"
	printf '  %-6s %8.1f ns/pair cpu  (probes fired %s, tensors counted %s)\n' "$config" \
		"$cpu" "$fired" "$seen"
}

echo "Tensor events: malloc+free pairs through the mock caching allocator's USDT probes;" \
	"$ROUNDS rounds of ${CONFIGS[*]}, interleaved; $PAIRS pairs a run"
for round in $(seq "$ROUNDS"); do
	echo "round $round/$ROUNDS"
	for i in "${!CONFIGS[@]}"; do
		config=${CONFIGS[$(((i + round) % ${#CONFIGS[@]}))]}
		measure "$config" || echo "tensors: $config run failed" >&2
	done
done

echo
off=$(median "$WORK/off" 2>/dev/null) || { echo "tensors: no result without gpumem"; exit 0; }
printf '%-6s %12s %8s %14s %14s %8s\n' "config" "ns/pair cpu" "ratio" "added ns/pair" \
	"ns/event" "target"
for config in "${CONFIGS[@]}"; do
	if ! m=$(median "$WORK/$config" 2>/dev/null); then
		printf '%-6s %12s\n' "$config" "no result"
		continue
	fi
	awk -v c="$config" -v m="$m" -v o="$off" -v t="$TARGET_NS" 'BEGIN {
		printf "%-6s %12.1f %8.2f %14.1f %14.1f %8s\n", c, m, m / o, m - o, (m - o) / 2,
			c == "off" || c == "idle" ? "" : "< " t }'
done
idle=$(median "$WORK/idle" 2>/dev/null) && maps=$(median "$WORK/maps" 2>/dev/null) &&
	awk -v i="$idle" -v o="$off" -v m="$maps" 'BEGIN {
		printf "the trap alone (idle - off): %.1f ns/event; " \
			"gpumem'"'"'s BPF on top (maps - idle): %.1f ns/event (target <= %d)\n",
			(i - o) / 2, (m - i) / 2, '"$ON_TOP_NS"' }'

# Where the time goes: one more run each with kernel.bpf_stats_enabled, per program.
if [ "$PROFILE" = 1 ]; then
	echo
	echo "BPF time per program (separate runs, kernel.bpf_stats_enabled=1):"
	for config in maps trace; do
		start_gpumem "$config" || continue
		bpf_prog_times "$config" tensor "$LOOP" "$PAIRS"
		stop_tracer
	done
fi
