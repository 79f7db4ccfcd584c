#!/bin/bash
# The cost of a PyTorch tensor event (`make bench`): 4 KiB tensor malloc+free pairs through
# copies of the mock caching allocator (bench/tensor_loop.c: USDT pytorch:malloc and
# pytorch:free behind their semaphores), measured side by side: one copy with nothing attached
# (off), one under a gpumem that filters the process out at its programs' first instruction
# (idle: -p 1, the kernel's trap and an empty program), one under system-wide gpumem (maps:
# snapshot, the maps only), one under gpumem trace (every event streamed), all tracers running
# and one process making its pairs through the copies in turn, 2,000 at a time (the first of
# a turn rotating), timed on its thread's CPU clock (uprobes are per inode: each tracer's
# probes fire on its copy alone). Whatever the shared machine does meanwhile falls on every
# configuration alike. Per event = a pair's added cost / 2; maps - idle, taken in each run and
# the median of the runs reported, is what gpumem's BPF adds to the trap. The loop is C, so no
# Python frames are walked (bench/pywalk.sh measures that walk). A benchmark measures: nothing
# here fails on a target.
#
# Knobs: BENCH_TENSOR_PAIRS (pairs per run and copy, default 200000), BENCH_ROUNDS (runs,
# default 7, the tracers started anew for each), BENCH_PROFILE=0 to skip the per-program BPF
# time pass, BENCH_BASELINE=PATH another gpumem binary, maps only, on a copy of its own beside
# the others (before and after a change, in one run).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
PAIRS=${BENCH_TENSOR_PAIRS:-200000}
ROUNDS=${BENCH_ROUNDS:-7}
PROFILE=${BENCH_PROFILE:-1}
BATCH=2000
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
TRACERS=()
. bench/common.sh
baseline_binary ||
	{ echo "tensors: BENCH_BASELINE=$BENCH_BASELINE is no executable file" >&2; exit 2; }
[ -z "$BASELINE" ] || CONFIGS+=(baseline)
trap 'stop_tracers; [ "$PROFILE" = 1 ] && sysctl -q kernel.bpf_stats_enabled=0; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

if [ ! -x "$LOOP" ] || [ -z "$C10" ]; then
	echo "tensor events: $LOOP not built (needs <sys/sdt.h>: systemtap-sdt-dev), skipped"
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "tensors: must run as root (BPF)" >&2; exit 1; }

# A configuration's copy of the allocator, $WORK/$1/bench-c10.so: a file of its own (its own
# inode, its own semaphores), named so that no tracer's discovery takes another's. The copies
# share the runtime the loop links, which every tracer attaches too: a process gpumem saw
# only through a tensor library it was not told of by name is not in its snapshot.
copy_of() {
	echo "$WORK/$1/bench-c10.so"
}
for config in "${CONFIGS[@]}"; do
	mkdir -p "$WORK/$config"
	cp "$C10" "$(copy_of "$config")"
done

# One configuration's tracer, system-wide, on its copy, in the background.
start_tracer() {
	local config=$1 bin=$GPUMEM
	local args=(--no-hold --lib "$(copy_of "$config")" --lib "$CUDART" --lib "$CUDA"
		    --duration 600)

	case $config in
	idle) args=(snapshot --json -o "$WORK/idle.json" -p 1 "${args[@]}") ;;
	trace) args=(trace --json -o /dev/null "${args[@]}") ;;
	baseline) bin=$BASELINE; args=(snapshot --json -o "$WORK/baseline.json" "${args[@]}") ;;
	*) args=(snapshot --json -o "$WORK/$config.json" "${args[@]}") ;;
	esac
	"$bin" "${args[@]}" >"$WORK/$config.log" 2>&1 &
	TRACER_PID=$!
	TRACERS+=("$TRACER_PID")
	wait_for_tracer "$WORK/$config.log" "gpumem: tracing:" "tensors: $config" || {
		TRACERS=("${TRACERS[@]:0:${#TRACERS[@]}-1}")
		return 1
	}
}

# The tensors a configuration's gpumem counted for pid $2 (its snapshot; - for a stream).
tensors_seen() {
	[ -f "$WORK/$1.json" ] || { echo -; return; }
	/usr/bin/python3 - "$WORK/$1.json" "$2" <<'PY' 2>/dev/null || echo "?"
import json, sys
snap = json.load(open(sys.argv[1]))
print(sum(p["tensor_alloc_count"] for p in snap["processes"] if p["pid"] == int(sys.argv[2])))
PY
}

# One run: every tracer, the loop through every copy, the tracers stopped (each snapshot then
# written), each configuration's result printed with the probes it fired and the tensors its
# gpumem counted.
run() {
	local round=$1 config out pid cpu fired seen
	local -a copies=()
	local -A cpu_of=() fired_of=()
	rm -f "$WORK"/*.json	# a tracer that writes none this run shows "?", not the last
	for config in "${CONFIGS[@]}"; do
		copies+=("$(copy_of "$config")")
		[ "$config" = off ] && continue
		start_tracer "$config" || { stop_tracers; return 1; }
	done
	# "tensors: pid P pairs N", then "COPY: C ns/pair cpu, fired F" for each copy
	if ! out=$(timeout 300 "$LOOP" "$PAIRS" "$BATCH" "${copies[@]}"); then
		echo "tensors: $LOOP failed" >&2
		stop_tracers
		return 1
	fi
	stop_tracers
	pid=$(awk '/^tensors: pid/ { print $3; exit }' <<<"$out")
	for config in "${CONFIGS[@]}"; do
		read -r cpu fired <<<"$(awk -v f="$(copy_of "$config"):" \
			'$1 == f { print $2, $NF }' <<<"$out")"
		if [ -z "$cpu" ]; then
			echo "tensors: run $round: no result for $config: $out" >&2
			return 1
		fi
		if [ "$config" != off ] && [ "$fired" = 0 ]; then
			echo "tensors: run $round discarded: $config's probes never fired (its log:" \
				"$(tr '\n' ' ' <"$WORK/$config.log"))" >&2
			return 1
		fi
		if [ "$config" = off ] && [ "$fired" != 0 ]; then
			echo "tensors: run $round discarded: probes fired on the copy with nothing" \
				"attached ($fired): another tracer is on it" >&2
			return 1
		fi
		cpu_of[$config]=$cpu
		fired_of[$config]=$fired
	done
	echo "run $round/$ROUNDS (pid $pid)"
	for config in "${CONFIGS[@]}"; do
		echo "${cpu_of[$config]}" >>"$WORK/cpu.$config"
		seen=-
		[ "$config" = off ] || seen=$(tensors_seen "$config" "$pid")
		printf '  %-8s %8.1f ns/pair cpu  (probes fired %s, tensors counted %s)\n' "$config" \
			"${cpu_of[$config]}" "${fired_of[$config]}" "$seen"
	done
	awk -v m="${cpu_of[maps]}" -v i="${cpu_of[idle]}" 'BEGIN { print (m - i) / 2 }' \
		>>"$WORK/on_top"
	[ -z "$BASELINE" ] || awk -v m="${cpu_of[baseline]}" -v i="${cpu_of[idle]}" \
		'BEGIN { print (m - i) / 2 }' >>"$WORK/on_top.baseline"
}

echo "Tensor events: malloc+free pairs through copies of the mock caching allocator's USDT" \
	"probes (${CONFIGS[*]}), side by side in each process, $BATCH pairs a turn; $ROUNDS runs" \
	"of $PAIRS pairs a copy"
for round in $(seq "$ROUNDS"); do
	run "$round" || echo "tensors: run $round failed" >&2
done

echo
off=$(median "$WORK/cpu.off" 2>/dev/null) || { echo "tensors: no result without gpumem"; exit 0; }
printf '%-8s %12s %8s %14s %14s %8s\n' "config" "ns/pair cpu" "ratio" "added ns/pair" \
	"ns/event" "target"
for config in "${CONFIGS[@]}"; do
	m=$(median "$WORK/cpu.$config")
	awk -v c="$config" -v m="$m" -v o="$off" -v t="$TARGET_NS" 'BEGIN {
		printf "%-8s %12.1f %8.2f %14.1f %14.1f %8s\n", c, m, m / o, m - o, (m - o) / 2,
			c == "off" || c == "idle" ? "" : "< " t }'
done
idle=$(median "$WORK/cpu.idle") && on_top=$(median "$WORK/on_top") &&
	awk -v i="$idle" -v o="$off" -v t="$on_top" -v r="$(paste -sd, "$WORK/on_top")" 'BEGIN {
		printf "the trap alone (idle - off): %.1f ns/event; gpumem'"'"'s BPF on top " \
			"(maps - idle, each run): %.1f ns/event (runs: %s; target <= %d) %s\n",
			(i - o) / 2, t, r, '"$ON_TOP_NS"', t <= '"$ON_TOP_NS"' ? "met" : "MISSED" }'
[ -z "$BASELINE" ] || { b=$(median "$WORK/on_top.baseline") &&
	printf 'the baseline'"'"'s BPF on top (baseline - idle, each run): %.1f ns/event (runs: %s)\n' \
		"$b" "$(paste -sd, "$WORK/on_top.baseline")"; }

# Where the time goes: one more run each with kernel.bpf_stats_enabled, per program.
if [ "$PROFILE" = 1 ]; then
	echo
	echo "BPF time per program (separate runs, kernel.bpf_stats_enabled=1):"
	for config in maps trace; do
		start_tracer "$config" || continue
		bpf_prog_times "$config" tensor "$LOOP" "$PAIRS" "$BATCH" "$(copy_of "$config")"
		stop_tracers
	done
fi
