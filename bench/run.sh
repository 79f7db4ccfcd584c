#!/bin/bash
# `make bench`: the cost of one cudaMalloc/cudaFree pair through the mock runtime, untraced,
# under empty probes on the symbols gpumem probes, under gpumem, and under bpftrace, all in one
# run: each configuration's tracer is attached to a copy of the mock libraries of its own, and
# one process (bench/loop --dirs) makes its pairs through every copy in turn, a batch at a
# time, so that what the shared machine does meanwhile falls on every configuration alike.
# The run is made BENCH_RUNS times (the tracers started anew each time); the median of the
# runs is reported. A benchmark measures: nothing here fails on a target.
#
# Two setups (BENCH_SETUP):
#   nested        each runtime call nests a driver call through the driver's exported symbols;
#                 bare = empty programs on every symbol gpumem probes, on entry, and on return
#                 but for the frees (gpumem has no return probe on a free); on kernels with
#                 uprobe sessions gpumem's nested cuMemAlloc_v2 has no return trap, bare's has;
#                 bpftrace = bench/gpumem.bt (gpumem's nesting rule in bpftrace).
#   runtime-only  the runtime reaches the driver through its private table
#                 (GPUMEM_MOCK_RUNTIME_PRIVATE=1), so only runtime probes fire; bare = the three
#                 probes a user's script needs (cudaMalloc entry and return, cudaFree entry);
#                 bpftrace = bench/live_bytes.bt, live bytes per stack as a user would write it.
#
# Knobs: BENCH_SETUP (default nested), BENCH_PAIRS (per configuration and run, default
# 200000), BENCH_BATCH (pairs in a turn, default 2000), BENCH_RUNS (default 3),
# BENCH_STACK_DEPTH (default 0: the pairs made that many 384-byte frames deeper, each with its
# frame record, as a program built with frame pointers allocates from under a framework's
# frames: what the stack walk costs where stacks are deep), BENCH_PROFILE=0
# to skip the per-program BPF time pass, BENCH_TAIL=0 to skip the other benchmarks run after
# the nested one, BENCH_BASELINE=PATH another gpumem binary measured beside (before/after).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
PAIRS=${BENCH_PAIRS:-200000}
BATCH=${BENCH_BATCH:-2000}
RUNS=${BENCH_RUNS:-3}
PROFILE=${BENCH_PROFILE:-1}
SETUP=${BENCH_SETUP:-nested}
TAIL=${BENCH_TAIL:-1}
export LOOP_STACK_DEPTH=${BENCH_STACK_DEPTH:-0}	# bench/loop.c's
SIZE=1048576
WARMUP_PAIRS=2000	# bench/loop.c's, outside the timing but seen by the tracers
case $SETUP in
nested)
	TARGET_GPUMEM_OVER_BARE=1.1
	SCRIPT=bench/gpumem.bt
	BARE_ARGS=()
	;;
runtime-only)
	TARGET_GPUMEM_OVER_BARE=1.2
	SCRIPT=bench/live_bytes.bt
	BARE_ARGS=(--malloc-free)
	BARE_ONLY_RUNTIME=1
	export GPUMEM_MOCK_RUNTIME_PRIVATE=1
	;;
*)
	echo "bench: BENCH_SETUP must be nested or runtime-only, not '$SETUP'" >&2
	exit 2
	;;
esac
TARGET_BPFTRACE_OVER_GPUMEM=1.3

GPUMEM=${GPUMEM:-$BUILD/gpumem}
BARE=$BUILD/bench/bare
LOOP=$BUILD/bench/loop
# The mock libraries, copied for each configuration (see bench/bench.mk).
LIBDIR=$(readlink -f "$BUILD/bench/lib")
CUDART=$(readlink -f "$LIBDIR/libcudart.so.13")
CUDA=$(readlink -f "$LIBDIR/libcuda.so.1")

WORK=$(mktemp -d /tmp/gpumem-bench.XXXXXX)
TRACER_PID=
TRACERS=()
. bench/common.sh
cleanup() {
	stop_tracers
	sysctl -q kernel.bpf_stats_enabled=0 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "bench: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (BPF): sudo make bench"
for f in "$GPUMEM" "$BARE" "$LOOP" "$CUDART" "$CUDA"; do
	[ -e "$f" ] || die "$f is missing: run 'make bench' (it builds it)"
done

# gpumem as shipped (DWARF mode: frame-pointer stacks, CFI unwinding of each new site's
# first stack), and with --unwind fp and --unwind none, for the cost of stacks.
CONFIGS=(untraced bare gpumem gpumem-fp gpumem-nostack)
# Where the kernel has uprobe sessions (6.13+) gpumem uses them; beside it, gpumem with the
# entry and return links of older kernels (GPUMEM_UPROBE_SESSIONS=0), for what they save.
if bpftool btf dump file /sys/kernel/btf/vmlinux 2>/dev/null | grep -q "'BPF_TRACE_UPROBE_SESSION'"
then
	CONFIGS+=(gpumem-nosession)
fi
baseline_binary || die "BENCH_BASELINE=$BENCH_BASELINE is no executable file"
[ -z "$BASELINE" ] || CONFIGS+=(baseline)
if command -v bpftrace >/dev/null; then
	CONFIGS+=(bpftrace)
	HAVE_BPFTRACE=1
else
	HAVE_BPFTRACE=0
fi

# A configuration's copies of the libraries, under names unlike CUDA libraries' (the sonames
# are symlinks), so that no system-wide gpumem another user runs attaches to them; each copy
# is an inode of its own, and uprobes are per inode: only its own tracer's probes fire on it.
make_copies() {
	local dir=$1
	mkdir -p "$dir"
	cp "$CUDART" "$dir/bench-mock-cudart.so.13"
	cp "$CUDA" "$dir/bench-mock-cuda.so.1"
	ln -s bench-mock-cudart.so.13 "$dir/libcudart.so.13"
	ln -s bench-mock-cuda.so.1 "$dir/libcuda.so.1"
}

# Another tool's probes on the benchmark's copies would run in a configuration. Probes put by
# uprobe_multi links name their file in the link's fdinfo.
foreign_probe_pids() {
	grep -ls "^path:[[:space:]]*$WORK/" /proc/[0-9]*/fdinfo/* 2>/dev/null |
		awk -F/ -v ours=" ${TRACERS[*]} " 'index(ours, " " $3 " ") == 0 { print $3 }' |
		sort -un | tr '\n' ' '
}

# Starts a configuration's tracer on the copies in dir (none for untraced), in the background.
start_config() {
	local config=$1 dir=$2 log=$3 unwind=dwarf sessions=${GPUMEM_UPROBE_SESSIONS:-1}
	local bin=$GPUMEM rt=$2/bench-mock-cudart.so.13 drv=$2/bench-mock-cuda.so.1
	case $config in
	untraced)
		return 0
		;;
	bare)
		if [ -n "${BARE_ONLY_RUNTIME:-}" ]; then
			"$BARE" "${BARE_ARGS[@]}" "$rt" >"$log" 2>&1 &
		else
			"$BARE" "${BARE_ARGS[@]}" "$rt" "$drv" >"$log" 2>&1 &
		fi
		TRACER_PID=$!
		TRACERS+=("$TRACER_PID")
		wait_for_tracer "$log" "attached" "bench: $config"
		return
		;;
	bpftrace)
		bpftrace "$SCRIPT" "$rt" "$drv" >"$log" 2>&1 &
		TRACER_PID=$!
		TRACERS+=("$TRACER_PID")
		wait_for_tracer "$log" ".bt: tracing" "bench: $config"
		return
		;;
	gpumem-fp) unwind=fp ;;
	gpumem-nostack) unwind=none ;;
	gpumem-nosession) sessions=0 ;;
	baseline) bin=$BASELINE ;;
	esac
	env GPUMEM_UPROBE_SESSIONS="$sessions" "$bin" snapshot --json -o "$log.json" \
		--lib "$rt" --lib "$drv" --duration 900 --unwind "$unwind" >"$log" 2>&1 &
	TRACER_PID=$!
	TRACERS+=("$TRACER_PID")
	wait_for_tracer "$log" "gpumem: tracing:" "bench: $config"
}

# How many of pid's allocations a configuration's tracer counted (empty: it does not say).
allocations_seen() {
	local config=$1 log=$2 pid=$3
	case $config in
	untraced | bare) ;;
	bpftrace)
		# live_bytes.bt's sums end at zero: only gpumem.bt's say how many it saw.
		[ "$SETUP" = nested ] || return 0
		awk -v pid="$pid" -v size="$SIZE" '
			/^@bytes\[/ { split($0, a, /[[,]/); mine = a[2] == pid }
			mine && /^\]: / { sum += $2; mine = 0 }
			END { printf "%d\n", sum / size }' "$log"
		;;
	*)
		"${PYTHON:-python3}" - "$log.json" "$pid" <<'PY' 2>/dev/null || echo "?"
import json, sys
snap = json.load(open(sys.argv[1]))
print(sum(p["alloc_count"] for p in snap["processes"] if p["pid"] == int(sys.argv[2])))
PY
		;;
	esac
}

# One run: every configuration's tracer on its copies, the loop through all of them, the
# tracers stopped. "stats" as $2: with kernel.bpf_stats_enabled, printing each tracer's BPF
# time per program instead of keeping the timings. A configuration whose tracer does not start
# is left out of the run (said); the others are measured.
run_all() {
	local run=$1 mode=${2:-} dirs= pid line config others
	local base=$WORK/run$run
	local -a ran=() traced=()
	for config in "${CONFIGS[@]}"; do
		make_copies "$base/$config"
		local before=${#TRACERS[@]}
		if ! start_config "$config" "$base/$config" "$base/$config.log"; then
			echo "bench: run $run goes on without $config" >&2
			TRACERS=("${TRACERS[@]:0:$before}")	# stopped by wait_for_tracer
			continue
		fi
		dirs=$dirs:$base/$config
		ran+=("$config")
		[ "$config" = untraced ] || traced+=("$config")
	done
	others=$(foreign_probe_pids)
	[ -z "$others" ] || echo "bench: pids $others put probes on the copies: run $run may be off" >&2
	[ "$mode" = stats ] && sysctl -q kernel.bpf_stats_enabled=1
	timeout 600 "$LOOP" --dirs "${dirs#:}" "$PAIRS" "$SIZE" "$BATCH" >"$base.out" \
		2>"$base.err"
	local rc=$?
	[ "$mode" = stats ] && sysctl -q kernel.bpf_stats_enabled=0
	if [ "$mode" = stats ]; then
		for i in "${!traced[@]}"; do
			TRACER_PID=${TRACERS[$i]}
			bpf_prog_times "${traced[$i]}" "" true
		done
	fi
	stop_tracers
	if [ "$rc" != 0 ]; then
		echo "bench: $LOOP failed: $(cat "$base.err")" >&2
		return 1
	fi
	[ "$mode" = stats ] && return 0
	pid=$(awk '/^loop: pid/ { sub(/,/, "", $3); print $3; exit }' "$base.out")
	echo "run $run/$RUNS (pid $pid)"
	for config in "${ran[@]}"; do
		# "loop: pid P, DIR: N pairs ... in B batches: C ns/pair cpu, batches p10 ..."
		line=$(grep -F "$base/$config:" "$base.out") || {
			echo "bench: $LOOP said nothing of $config" >&2
			continue
		}
		local cpu p10 p90 seen
		cpu=$(awk '{ print $(NF - 9) }' <<<"$line")
		p10=$(awk '{ print $(NF - 4) }' <<<"$line")
		p90=$(awk '{ print $NF }' <<<"$line")
		echo "$cpu" >>"$WORK/$config.cpu"
		seen=$(allocations_seen "$config" "$base/$config.log" "$pid")
		if [ -n "$seen" ] && [ "$seen" != $((PAIRS / BATCH * BATCH + WARMUP_PAIRS)) ]; then
			echo "bench: $config counted $seen allocations of pid $pid, expected" \
				"$((PAIRS / BATCH * BATCH + WARMUP_PAIRS))" >&2
		fi
		printf '  %-16s %9.1f ns/pair cpu (batches p10 %.1f, p90 %.1f)%s\n' "$config" "$cpu" \
			"$p10" "$p90" "${seen:+  ($seen allocations seen)}"
	done
	return 0
}

us() {
	awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1000 }'
}

entry_instruction() {
	objdump -d --no-show-raw-insn --disassemble="$2" "$1" 2>/dev/null |
		awk -v sym="<$2>:" '$2 == sym { getline; sub(/^[ \t]*[0-9a-f]+:[ \t]*/, ""); print; exit }'
}

if [ "$SETUP" = nested ]; then
	echo "gpumem benchmark (nested): cost per cudaMalloc+cudaFree pair, mock runtime nesting" \
		"a driver call"
else
	echo "gpumem benchmark (runtime-only): cost per cudaMalloc+cudaFree pair, no driver probe" \
		"fires; bare = cudaMalloc entry+return, cudaFree entry"
fi
echo "entry instruction: cudaMalloc in $CUDART: '$(entry_instruction "$CUDART" cudaMalloc)'," \
	"cuMemAlloc_v2 in $CUDA: '$(entry_instruction "$CUDA" cuMemAlloc_v2)' (NVIDIA's runtime:" \
	"push %rbp; NVIDIA's driver: a cmpl;je stub, measured by bench/probeplace.sh below)"
echo "runs: $RUNS, each with ${CONFIGS[*]} at once, one copy of the libraries each; $PAIRS" \
	"pairs per configuration, $BATCH at a time in turn; size $SIZE"
[ "$LOOP_STACK_DEPTH" = 0 ] ||
	echo "stack: the pairs made from $LOOP_STACK_DEPTH frames of 384 bytes deeper (BENCH_STACK_DEPTH)"
[ "$HAVE_BPFTRACE" = 1 ] || echo "bpftrace: not installed, its row is skipped"

for run in $(seq "$RUNS"); do
	run_all "$run" || echo "bench: run $run failed" >&2
done

# Medians over the runs of each configuration's mean over its batches (the loop thread's CPU
# time: the probes run in that thread, other processes' time slices do not count).
declare -A MED
echo
printf '%-36s %10s %9s %9s %5s\n' "µs per pair (median)" "cpu" "cpu min" "cpu max" "runs"
for config in "${CONFIGS[@]}"; do
	case $config in
	untraced) label="untraced" ;;
	bare) label="bare probes (empty BPF, same links)" ;;
	gpumem) label="gpumem (as shipped)" ;;
	gpumem-fp) label="gpumem --unwind fp" ;;
	gpumem-nostack) label="gpumem --unwind none (no stacks)" ;;
	gpumem-nosession) label="gpumem, no uprobe sessions" ;;
	baseline) label="baseline (BENCH_BASELINE)" ;;
	bpftrace) label="bpftrace ($SCRIPT)" ;;
	esac
	if [ ! -s "$WORK/$config.cpu" ]; then
		printf '%-36s %10s\n' "$label" "no result"
		continue
	fi
	MED[$config]=$(median "$WORK/$config.cpu")
	printf '%-36s %10s %9s %9s %5d\n' "$label" "$(us "${MED[$config]}")" \
		"$(us "$(sort -g "$WORK/$config.cpu" | head -1)")" \
		"$(us "$(sort -g "$WORK/$config.cpu" | tail -1)")" "$(wc -l <"$WORK/$config.cpu")"
done

ratio() {
	[ -n "${MED[$1]:-}" ] && [ -n "${MED[$2]:-}" ] &&
		awk -v a="${MED[$1]}" -v b="${MED[$2]}" 'BEGIN { printf "%.2f", a / b }'
}
echo
printf '%-20s %9s %9s\n' "ratio (cpu medians)" "measured" "target"
# "met" or "MISSED": ratio $1 against target $3 by comparison $2 (<= or >=).
verdict() {
	awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN {
		if (r == "-") exit
		print (op == "<=" ? r <= t : r >= t) ? "met" : "MISSED" }'
}
r=$(ratio gpumem bare || echo -)
if [ "$LOOP_STACK_DEPTH" = 0 ]; then
	printf '%-20s %9s %9s %s\n' "gpumem / bare" "$r" "<= $TARGET_GPUMEM_OVER_BARE" \
		"$(verdict "$r" "<=" "$TARGET_GPUMEM_OVER_BARE")"
else	# the targets are the shallow stack's; here the walk's cost is what is measured
	printf '%-20s %9s %9s\n' "gpumem / bare" "$r" "-"
fi
if [ "$HAVE_BPFTRACE" = 1 ]; then
	r=$(ratio bpftrace gpumem || echo -)
	printf '%-20s %9s %9s %s\n' "bpftrace / gpumem" "$r" ">= $TARGET_BPFTRACE_OVER_GPUMEM" \
		"$(verdict "$r" ">=" "$TARGET_BPFTRACE_OVER_GPUMEM")"
fi
printf '%-20s %9s %9s\n' "gpumem / untraced" "$(ratio gpumem untraced || echo -)" "-"
printf '%-20s %9s %9s\n' "dwarf / no stacks" "$(ratio gpumem gpumem-nostack || echo -)" "-"
printf '%-20s %9s %9s\n' "fp / no stacks" "$(ratio gpumem-fp gpumem-nostack || echo -)" "-"
if [ -n "${MED[gpumem-nosession]:-}" ]; then
	printf '%-20s %9s %9s\n' "no sessions / bare" "$(ratio gpumem-nosession bare || echo -)" "-"
fi
if [ -n "${MED[baseline]:-}" ]; then
	printf '%-20s %9s %9s\n' "baseline / bare" "$(ratio baseline bare || echo -)" "-"
fi
if [ -n "${MED[gpumem]:-}" ] && [ -n "${MED[bare]:-}" ]; then
	awk -v g="${MED[gpumem]}" -v b="${MED[bare]}" 'BEGIN {
		printf "gpumem above bare: %.0f ns per pair\n", g - b }'
fi

# Where the BPF time goes: one more run with kernel.bpf_stats_enabled, apart from the timed
# ones (the statistics add two clock reads to every program run).
if [ "$PROFILE" = 1 ]; then
	echo
	echo "BPF time per program (one more run, kernel.bpf_stats_enabled=1):"
	run_all stats stats || echo "bench: the profile run failed" >&2
fi

# The other benchmarks, once per `make bench` (after the nested setup).
[ "$TAIL" = 1 ] || exit 0

# Symbolization throughput, cold and warm, over gpumem's own binary (bench/symbench.c).
[ -x "$BUILD/bench/symbench" ] && { echo; "$BUILD/bench/symbench" "$GPUMEM"; }

# Probes on NVIDIA's driver stubs: at the symbol against past the cmpl (bench/probeplace.sh).
echo
bench/probeplace.sh

# The Python walk: its added cost per allocation at Python depths 10 and 50 (bench/pywalk.sh),
# the baseline beside it too (by its absolute path: pywalk.sh starts elsewhere).
echo
BENCH_BASELINE=$BASELINE bench/pywalk.sh

# PyTorch's tensors: a USDT tensor event's cost, attached vs not (bench/tensors.sh).
echo
bench/tensors.sh

# The event consumer: events per second trace --json delivers, and its drops (bench/trace_rate.sh).
echo
bench/trace_rate.sh

# Discovery: late-attach latency, start-up on a host with 1,000 processes, what each program
# the host runs costs gpumem, the baseline's beside it (bench/discovery.sh).
echo
BENCH_BASELINE=$BASELINE bench/discovery.sh

# Stopping: from SIGINT, and from a -c command's start, to gpumem's exit (bench/exit.sh).
echo
bench/exit.sh

# The agent: CPU at rest under scrapes, scrape latency, RSS across short-lived processes
# (bench/serve.sh, about two minutes).
echo
bench/serve.sh
