#!/bin/bash
# Part of `make bench` (alone: `make bench-probeplace`): what an empty probe on a driver stub
# costs at its symbol (a RIP-relative cmpl, which the kernel single-steps out of line) and where
# gpumem puts it (past the cmpl, on the je, which the kernel emulates), against the untraced
# call: NVIDIA's cuMemAlloc_v2 (Debian's libcuda1 535.261.03, returning 3 without a device) and
# the stub-shaped mock's cuMemAlloc_v2/cuMemFree_v2. bench/bare.c's empty programs in
# uprobe_multi links, as gpumem attaches; interleaved rounds, medians of the loop thread's CPU
# time per call. A benchmark measures: nothing here fails on a number.
#
# Knobs: PLACE_CALLS (traced calls a run, default 200000; untraced 10x), PLACE_ROUNDS (default
# 5), NVIDIA_LIBCUDA=PATH (NVIDIA's libcuda.so.1 to use instead of looking for one).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
CALLS=${PLACE_CALLS:-200000}
UNTRACED_CALLS=$((CALLS * 10))
ROUNDS=${PLACE_ROUNDS:-5}
BARE=$BUILD/bench/bare
DRVLOOP=$BUILD/tests/driver_loop
LIBDIR=$(readlink -f "$BUILD/bench/lib")
STUB_LIB=$LIBDIR/bench-mock-stub-cuda.so.1
REAL_COPY=$LIBDIR/bench-nvidia-cuda.so
NV_DIR=usr/lib/x86_64-linux-gnu

WORK=$(mktemp -d /tmp/gpumem-probeplace.XXXXXX)
BARE_PID=
cleanup() {
	[ -z "$BARE_PID" ] || stop_bare
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

skip() {
	echo "probe placement benchmark: skipped: $*"
	exit 0
}

[ "$(uname -m)" = x86_64 ] || skip "the stubs and the decoder are x86-64"
[ "$(id -u)" = 0 ] || skip "must run as root (BPF)"
for f in "$BARE" "$DRVLOOP" "$STUB_LIB"; do
	[ -e "$f" ] || skip "$f is missing: run 'make bench-probeplace' (it builds it)"
done

find_nvidia() {
	local c
	for c in "${NVIDIA_LIBCUDA:-}" "$BUILD/nvidia/$NV_DIR/libcuda.so.1"; do
		[ -n "$c" ] && [ -e "$c" ] && { readlink -f "$c"; return 0; }
	done
	return 1
}

REAL=$(find_nvidia)
if [ -z "$REAL" ]; then
	# Debian non-free's packages, unpacked under build/ (nothing is installed).
	echo "NVIDIA's libcuda.so.1: not under $BUILD/nvidia; fetching it (scripts/nvidia.sh)"
	scripts/nvidia.sh "$BUILD/nvidia" || true
	REAL=$(find_nvidia)
fi
TARGETS=(stub)
if [ -n "$REAL" ]; then
	# A copy: an inode of its own that no other tool probes, named unlike a CUDA library.
	cmp -s "$REAL" "$REAL_COPY" 2>/dev/null || cp "$REAL" "$REAL_COPY"
	TARGETS=(nvidia stub)
else
	echo "NVIDIA's driver: skipped: no libcuda.so.1 (set NVIDIA_LIBCUDA=PATH); the mock only"
fi

lib_of() {
	[ "$1" = nvidia ] && echo "$REAL_COPY" || echo "$STUB_LIB"
}

# The first instructions of cuMemAlloc_v2, as objdump shows them.
entry_of() {
	local lib=$1 addr
	addr=$(objdump -T "$lib" | awk '$NF == "cuMemAlloc_v2" { print $1; exit }')
	[ -n "$addr" ] || return
	objdump -d --start-address=0x"$addr" --stop-address=$((0x$addr + 12)) "$lib" |
		awk -F'\t' '/^ +[0-9a-f]+:\t/ && NF >= 3 {
			sub(/ *#.*/, "", $3); sub(/ *<.*/, "", $3); gsub(/ +/, " ", $3); printf "%s; ", $3 }'
}

stop_bare() {
	kill -INT "$BARE_PID" 2>/dev/null
	wait "$BARE_PID" 2>/dev/null
	BARE_PID=
}

start_bare() {
	"$BARE" --at "$1" "$2" >"$WORK/bare.log" 2>&1 &
	BARE_PID=$!
	for _ in $(seq 200); do
		grep -q attached "$WORK/bare.log" && return 0
		kill -0 "$BARE_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "bench: bare did not attach: $(cat "$WORK/bare.log")" >&2
	stop_bare
	return 1
}

# Other tools' probes on our copies would run in every configuration: say so.
foreign_probes() {
	grep -ls "^path:[[:space:]]*$1\$" /proc/[0-9]*/fdinfo/* 2>/dev/null |
		awk -F/ -v self="${BARE_PID:-none}" '$3 != self { print $3 }' | sort -un | tr '\n' ' '
}

# One run: prints the loop thread's CPU ns per call.
measure() {
	local target=$1 mode=$2 lib calls=$CALLS out others
	lib=$(lib_of "$target")
	others=$(foreign_probes "$lib")
	[ -z "$others" ] || echo "bench: pids $others keep probes on $lib; measuring anyway" >&2
	if [ "$mode" = untraced ]; then
		calls=$UNTRACED_CALLS
	else
		start_bare "$mode" "$lib" || return 1
	fi
	out=$(timeout 300 "$DRVLOOP" "$lib" "$calls" 2>&1)
	[ "$mode" = untraced ] || stop_bare
	# "driver_loop: pid P, N calls, rc R: W ns/call wall, C ns/call cpu"
	awk '/ns\/call cpu/ { print $(NF - 2) }' <<<"$out" | grep . || {
		echo "bench: $DRVLOOP $lib failed: $out" >&2
		return 1
	}
}

median() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		if (NR == 0) exit 1
		print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

MODES=(untraced symbol placed)
echo "probe placement benchmark: empty entry+return probes on cuMemAlloc_v2 (and cuMemFree_v2)"
for t in "${TARGETS[@]}"; do
	lib=$(lib_of "$t")
	echo "  $t: $lib: $(entry_of "$lib")"
	start_bare placed "$lib" && sed 's/^/    /' "$WORK/bare.log" && stop_bare
done
echo "  $ROUNDS rounds of ${TARGETS[*]} x ${MODES[*]}, interleaved (order rotated each round);" \
	"$CALLS calls a traced run, $UNTRACED_CALLS untraced"
CONFIGS=()
for t in "${TARGETS[@]}"; do
	for m in "${MODES[@]}"; do
		CONFIGS+=("$t:$m")
	done
done
for round in $(seq "$ROUNDS"); do
	n=${#CONFIGS[@]}
	line="  round $round:"
	for i in $(seq 0 $((n - 1))); do
		config=${CONFIGS[$(((i + round - 1) % n))]}
		ns=$(measure "${config%%:*}" "${config##*:}") || continue
		echo "$ns" >>"$WORK/${config/:/-}"
		line="$line $config $ns"
	done
	echo "$line"
done

echo
printf '%-38s %10s %10s %10s %12s %12s\n' "ns per call (cpu, median)" "untraced" "at symbol" \
	"placed" "symbol/placed" "probe saved"
for t in "${TARGETS[@]}"; do
	declare -A med=()
	for m in "${MODES[@]}"; do
		med[$m]=$(median "$WORK/$t-$m" 2>/dev/null || echo "")
	done
	label="NVIDIA cuMemAlloc_v2 (rc 3)"
	[ "$t" = stub ] && label="stub mock cuMemAlloc_v2+cuMemFree_v2"
	awk -v l="$label" -v u="${med[untraced]}" -v s="${med[symbol]}" -v p="${med[placed]}" '
		function f(x) { return x == "" ? "-" : sprintf("%.1f", x) }
		BEGIN {
			r = (s != "" && p != "" && p - u > 0) ? sprintf("%.2fx", (s - u) / (p - u)) : "-"
			d = (s != "" && p != "") ? sprintf("%.0f", s - p) : "-"
			printf "%-38s %10s %10s %10s %12s %12s\n", l, f(u), f(s), f(p), r, d
		}'
	unset med
done
echo "symbol/placed: the probes' cost (traced minus untraced) at the symbol over past the cmpl"
