#!/bin/bash
# `make bench`: the cost of one cudaMalloc/cudaFree pair through the mock runtime, untraced,
# under empty probes on the symbols gpumem probes, under gpumem, and under bpftrace.
# Configurations are interleaved, each run several times; the median is reported. A benchmark
# measures: nothing here fails on a target.
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
# Knobs: BENCH_SETUP (default nested), BENCH_PAIRS (traced runs, default 200000),
# BENCH_UNTRACED_PAIRS (default 10x), BENCH_ROUNDS (default 11), BENCH_PROFILE=0 to skip the
# per-program BPF time pass, BENCH_TAIL=0 to skip the other benchmarks run after the nested one,
# BENCH_BASELINE=PATH another gpumem binary measured beside in the same rounds (before/after).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
PAIRS=${BENCH_PAIRS:-200000}
UNTRACED_PAIRS=${BENCH_UNTRACED_PAIRS:-$((PAIRS * 10))}
ROUNDS=${BENCH_ROUNDS:-11}
PROFILE=${BENCH_PROFILE:-1}
SETUP=${BENCH_SETUP:-nested}
TAIL=${BENCH_TAIL:-1}
SIZE=1048576
WARMUP_PAIRS=2000	# bench/loop.c's, outside the timing but seen by the tracers
case $SETUP in
nested)
	TARGET_GPUMEM_OVER_BARE=1.15
	SCRIPT=bench/gpumem.bt
	BARE_ARGS=()
	;;
runtime-only)
	TARGET_GPUMEM_OVER_BARE=1.5
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
# Private copies (see bench/bench.mk): probes other tools put on build/tests/lib never fire here.
LIBDIR=$(readlink -f "$BUILD/bench/lib")
CUDART=$(readlink -f "$LIBDIR/libcudart.so.13")
CUDA=$(readlink -f "$LIBDIR/libcuda.so.1")
BARE_LIBS="$CUDART $CUDA"
[ -z "${BARE_ONLY_RUNTIME:-}" ] || BARE_LIBS=$CUDART

WORK=$(mktemp -d /tmp/gpumem-bench.XXXXXX)
TRACER_PID=
. bench/common.sh
cleanup() {
	[ -z "$TRACER_PID" ] || stop_tracer
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
BASELINE=${BENCH_BASELINE:-}
if [ -n "$BASELINE" ]; then
	[ -x "$BASELINE" ] || die "BENCH_BASELINE=$BASELINE is no executable"
	CONFIGS+=(baseline)
fi
if command -v bpftrace >/dev/null; then
	CONFIGS+=(bpftrace)
	HAVE_BPFTRACE=1
else
	HAVE_BPFTRACE=0
fi

# Another tool's probes on the benchmark's libraries would run in every configuration. Probes
# put by uprobe_multi links name their file in the link's fdinfo; a system-wide gpumem attaches
# to any CUDA library a process opens, so the check runs before and after every run.
FOREIGN_WAIT_S=20
foreign_probe_pids() {
	grep -ls "^path:[[:space:]]*$LIBDIR/" /proc/[0-9]*/fdinfo/* 2>/dev/null |
		awk -F/ -v self="${TRACER_PID:-none}" '$3 != self { print $3 }' | sort -un | tr '\n' ' '
}

wait_for_quiet() {
	local others
	for _ in $(seq "$FOREIGN_WAIT_S"); do
		others=$(foreign_probe_pids)
		[ -z "$others" ] && return 0
		sleep 1
	done
	echo "bench: pids $others keep probes on $LIBDIR; measuring anyway" >&2
}

# Starts a tracer in the background and waits until its log shows READY.
start_tracer() {
	local log=$1 ready=$2
	shift 2
	"$@" >"$log" 2>&1 &
	TRACER_PID=$!
	wait_for_tracer "$log" "$ready" "bench: '$*'"
}

# Runs the workload; prints "PID NS_PER_PAIR".
run_loop() {
	local out
	out=$(timeout 120 "$LOOP" "$1" "$SIZE" 2>"$WORK/loop.err") || {
		echo "bench: $LOOP $1 failed: $(cat "$WORK/loop.err")" >&2
		return 1
	}
	# "loop: pid P, N pairs of S bytes: W ns/pair wall, C ns/pair cpu" -> "P W C"
	awk '/ns\/pair/ { sub(/,/, "", $3); print $3, $(NF - 5), $(NF - 2) }' <<<"$out"
}

# gpumem's count of the loop's allocations, from its JSON snapshot.
gpumem_allocs() {
	"${PYTHON:-python3}" - "$1" "$2" <<'PY' 2>/dev/null || echo "?"
import json, sys
snap = json.load(open(sys.argv[1]))
print(sum(p["alloc_count"] for p in snap["processes"] if p["pid"] == int(sys.argv[2])))
PY
}

# bpftrace's count of the loop's allocations: its per-stack byte sums over the size.
bpftrace_allocs() {
	awk -v pid="$2" -v size="$SIZE" '
		/^@bytes\[/ { split($0, a, /[[,]/); mine = a[2] == pid }
		mine && /^\]: / { sum += $2; mine = 0 }
		END { printf "%d\n", sum / size }' "$1"
}

measure_once() {
	local config=$1 result pid wall cpu seen= others
	wait_for_quiet
	case $config in
	untraced)
		result=$(run_loop "$UNTRACED_PAIRS") || return 1
		;;
	bare)
		start_tracer "$WORK/bare.log" "attached" "$BARE" "${BARE_ARGS[@]}" $BARE_LIBS ||
			return 1
		result=$(run_loop "$PAIRS")
		stop_tracer
		;;
	gpumem | gpumem-fp | gpumem-nostack | gpumem-nosession | baseline)
		local unwind=dwarf sessions=${GPUMEM_UPROBE_SESSIONS:-1} bin=$GPUMEM
		[ "$config" = gpumem-fp ] && unwind=fp
		[ "$config" = gpumem-nostack ] && unwind=none
		[ "$config" = gpumem-nosession ] && sessions=0
		[ "$config" = baseline ] && bin=$BASELINE
		start_tracer "$WORK/gpumem.log" "gpumem: tracing:" \
			env GPUMEM_UPROBE_SESSIONS=$sessions "$bin" snapshot --json \
			-o "$WORK/snapshot.json" --lib "$CUDART" --lib "$CUDA" --duration 600 \
			--unwind "$unwind" || return 1
		result=$(run_loop "$PAIRS")
		stop_tracer
		seen=$(gpumem_allocs "$WORK/snapshot.json" "${result%% *}")
		;;
	bpftrace)
		start_tracer "$WORK/bpftrace.log" ".bt: tracing" \
			bpftrace "$SCRIPT" "$CUDART" "$CUDA" || return 1
		result=$(run_loop "$PAIRS")
		stop_tracer
		# live_bytes.bt's sums end at zero: only gpumem.bt's say how many it saw.
		[ "$SETUP" = nested ] && seen=$(bpftrace_allocs "$WORK/bpftrace.log" "${result%% *}")
		;;
	esac
	[ -n "$result" ] || return 1
	read -r pid wall cpu <<<"$result"
	others=$(foreign_probe_pids)
	if [ -n "$others" ]; then
		echo "bench: $config run discarded: pids $others put probes on $LIBDIR" >&2
		return 2
	fi
	echo "$cpu" >>"$WORK/$config.cpu"
	echo "$wall" >>"$WORK/$config.wall"
	if [ -n "$seen" ] && [ "$seen" != $((PAIRS + WARMUP_PAIRS)) ]; then
		echo "bench: $config counted $seen allocations of pid $pid, expected" \
			"$((PAIRS + WARMUP_PAIRS))" >&2
	fi
	printf '  %-16s %9.1f ns/pair cpu %9.1f wall%s\n' "$config" "$cpu" "$wall" \
		"${seen:+  ($seen allocations seen)}"
}

# A run another tool's probes overlapped is discarded and tried again.
measure() {
	local rc
	for _ in 1 2 3; do
		measure_once "$1"
		rc=$?
		[ "$rc" = 2 ] || return "$rc"
	done
	return 1
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
echo "runs: $ROUNDS rounds of ${CONFIGS[*]}, interleaved (order rotated each round);" \
	"$PAIRS pairs per traced run, $UNTRACED_PAIRS untraced; size $SIZE"
[ "$HAVE_BPFTRACE" = 1 ] || echo "bpftrace: not installed, its row is skipped"

for round in $(seq "$ROUNDS"); do
	echo "round $round/$ROUNDS"
	n=${#CONFIGS[@]}
	for i in $(seq 0 $((n - 1))); do
		config=${CONFIGS[$(((i + round - 1) % n))]}
		measure "$config" || echo "bench: $config run failed" >&2
	done
done

# Medians of the loop thread's CPU time (the probes run in that thread; other processes'
# time slices do not count), wall time beside it.
declare -A MED
echo
printf '%-36s %10s %9s %9s %10s %5s\n' "µs per pair (median)" "cpu" "cpu min" "cpu max" "wall" "runs"
for config in "${CONFIGS[@]}"; do
	case $config in
	untraced) label="untraced" ;;
	bare) label="bare probes (empty BPF, same links)" ;;
	gpumem) label="gpumem (system-wide, as shipped)" ;;
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
	printf '%-36s %10s %9s %9s %10s %5d\n' "$label" "$(us "${MED[$config]}")" \
		"$(us "$(sort -g "$WORK/$config.cpu" | head -1)")" \
		"$(us "$(sort -g "$WORK/$config.cpu" | tail -1)")" \
		"$(us "$(median "$WORK/$config.wall")")" "$(wc -l <"$WORK/$config.cpu")"
done

ratio() {
	[ -n "${MED[$1]:-}" ] && [ -n "${MED[$2]:-}" ] &&
		awk -v a="${MED[$1]}" -v b="${MED[$2]}" 'BEGIN { printf "%.2f", a / b }'
}
echo
printf '%-20s %9s %9s\n' "ratio (cpu medians)" "measured" "target"
printf '%-20s %9s %9s\n' "gpumem / bare" "$(ratio gpumem bare || echo -)" "<= $TARGET_GPUMEM_OVER_BARE"
if [ "$HAVE_BPFTRACE" = 1 ]; then
	printf '%-20s %9s %9s\n' "bpftrace / gpumem" "$(ratio bpftrace gpumem || echo -)" \
		">= $TARGET_BPFTRACE_OVER_GPUMEM"
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

# Where gpumem's BPF time goes: one more run of each with kernel.bpf_stats_enabled, apart from
# the timed runs above (the statistics add two clock reads to every program run).
profile_programs() {
	local label=$1 log=$2 ready=$3
	shift 3
	start_tracer "$log" "$ready" "$@" || return 1
	local ids
	# The tracer's own programs, from its file descriptors (bpftool here cannot show pids).
	ids=$(grep -hs '^prog_id:' /proc/"$TRACER_PID"/fdinfo/* | awk '{ print $2 }' | sort -un)
	sysctl -q kernel.bpf_stats_enabled=1
	run_loop "$PAIRS" >/dev/null
	sysctl -q kernel.bpf_stats_enabled=0
	for id in $ids; do
		bpftool prog show id "$id" --json
		echo
	done | "${PYTHON:-python3}" -c '
import json, sys
for line in sys.stdin:
    if not line.strip():
        continue
    p = json.loads(line)
    cnt = p.get("run_cnt", 0)
    if cnt:
        print("  %-8s %-20s %9d runs %8.0f ns/run" % (sys.argv[1], p.get("name", "?"), cnt,
              p.get("run_time_ns", 0) / cnt))' "$label"
	stop_tracer
}
if [ "$PROFILE" = 1 ]; then
	echo
	echo "BPF time per program (one separate run each, kernel.bpf_stats_enabled=1):"
	wait_for_quiet
	profile_programs bare "$WORK/bare.log" "attached" "$BARE" "${BARE_ARGS[@]}" $BARE_LIBS
	wait_for_quiet
	profile_programs gpumem "$WORK/gpumem.log" "gpumem: tracing:" "$GPUMEM" snapshot \
		-o /dev/null --lib "$CUDART" --lib "$CUDA" --duration 600
	if [ -n "$BASELINE" ]; then
		wait_for_quiet
		profile_programs baseline "$WORK/gpumem.log" "gpumem: tracing:" "$BASELINE" \
			snapshot -o /dev/null --lib "$CUDART" --lib "$CUDA" --duration 600
	fi
fi

# The other benchmarks, once per `make bench` (after the nested setup).
[ "$TAIL" = 1 ] || exit 0

# Symbolization throughput, cold and warm, over gpumem's own binary (bench/symbench.c).
[ -x "$BUILD/bench/symbench" ] && { echo; "$BUILD/bench/symbench" "$GPUMEM"; }

# Probes on NVIDIA's driver stubs: at the symbol against past the cmpl (bench/probeplace.sh).
echo
bench/probeplace.sh

# The Python walk: its added cost per allocation at Python depths 10 and 50 (bench/pywalk.sh).
echo
bench/pywalk.sh

# PyTorch's tensors: a USDT tensor event's cost, attached vs not (bench/tensors.sh).
echo
bench/tensors.sh

# The event consumer: events per second trace --json delivers, and its drops (bench/trace_rate.sh).
echo
bench/trace_rate.sh

# Discovery: late-attach latency, start-up on a host with 1,000 processes (bench/discovery.sh).
echo
bench/discovery.sh

# The agent: CPU at rest under scrapes, scrape latency, RSS across short-lived processes
# (bench/serve.sh, about two minutes).
echo
bench/serve.sh
