#!/bin/bash
# `make bench-exit` (and the end of `make bench`): how long gpumem takes to give the shell back
# once it is told to stop, with every CUDA file on this host attached. (a) A system-wide
# `snapshot`, sent SIGINT (top's q and Ctrl-C take the same path): from the signal to its exit,
# its report written. (b) `snapshot -c true`: from its "tracing:" line (the command starts
# then) to its exit, the command's end, report and detach in between. Each against its target
# (issue 26: 0.3 s, whatever the number of files). Afterwards no probe of gpumem's is left: the
# uprobes the kernel lists for this host's files come back to what they were.
#
# The host's own CUDA files are attached, and COPIES copies of the mock runtime and driver
# besides (2 x COPIES files, each its own inode), kept mapped by a Python process so that
# start-up attaches them all.
#
# Knobs: BENCH_EXIT_ROUNDS (default 3), BENCH_EXIT_COPIES (default 10).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C
. bench/common.sh

BUILD=${BUILD:-build}
GPUMEM=${GPUMEM:-$BUILD/gpumem}
ROUNDS=${BENCH_EXIT_ROUNDS:-3}
COPIES=${BENCH_EXIT_COPIES:-10}
MOCK_LIB=$(readlink -f "$BUILD/tests/lib")
PYTHON=${PYTHON:-/usr/bin/python3}
TARGET_S=0.3
WORK=$(mktemp -d /tmp/gpumem-exit.XXXXXX)
GPUMEM_PID=
HOLDER_PID=
cleanup() {
	[ -z "$GPUMEM_PID" ] || kill -KILL "$GPUMEM_PID" 2>/dev/null
	[ -z "$HOLDER_PID" ] || kill -KILL "$HOLDER_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "bench-exit: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (BPF): sudo make bench-exit"
[ -x "$GPUMEM" ] || die "$GPUMEM is missing: run 'make'"
[ -e "$MOCK_LIB/libcudart.so.13" ] || die "the mock runtime is missing: run 'make test-progs'"

now() { date +%s.%N; }


# uprobe_multi links of gpumem's programs the kernel holds now (bpftool's view; 0 without it).
links() {
	command -v bpftool >/dev/null || { echo 0; return; }
	bpftool link show 2>/dev/null | grep -c "uprobe_multi" || true
}

files_attached() {	# REPORT: tracer.files_attached, probes_attached
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["tracer"]
print(t["files_attached"], t["probes_attached"])' "$1" 2>/dev/null || echo "? ?"
}

# COPIES runtime and driver copies, each pair in a directory of its own, mapped until the end.
libs=()
for i in $(seq "$COPIES"); do
	mkdir -p "$WORK/copy$i"
	cp "$MOCK_LIB/libcudart.so.13" "$MOCK_LIB/libcuda.so.1" "$WORK/copy$i/"
	libs+=("$WORK/copy$i/libcuda.so.1" "$WORK/copy$i/libcudart.so.13")
done
"$PYTHON" -c 'import ctypes, sys, time
kept = [ctypes.CDLL(p) for p in sys.argv[1:]]
print("mapped", flush=True)
time.sleep(3600)' "${libs[@]}" >"$WORK/holder.out" 2>&1 </dev/null &
HOLDER_PID=$!
disown "$HOLDER_PID"
wait_for_line "$WORK/holder.out" mapped || die "the copies could not be mapped"

before=$(links)
sigint=() cmd=()
for r in $(seq "$ROUNDS"); do
	# (a) system-wide, SIGINT
	"$GPUMEM" snapshot --json --no-hold -o "$WORK/a.json" 2>"$WORK/a.err" &
	GPUMEM_PID=$!
	wait_for_line "$WORK/a.err" "gpumem: tracing:" || die "no tracing line: $(cat "$WORK/a.err")"
	t0=$(now)
	kill -INT "$GPUMEM_PID"
	wait "$GPUMEM_PID"
	t1=$(now)
	GPUMEM_PID=
	sigint+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
	read -r files probes < <(files_attached "$WORK/a.json")
	# (b) -c true: from the tracing line (the command runs) to the exit
	: >"$WORK/b.err"
	"$GPUMEM" snapshot --json -o "$WORK/b.json" -c true 2>"$WORK/b.err" &
	GPUMEM_PID=$!
	wait_for_line "$WORK/b.err" "gpumem: tracing:" || die "no tracing line: $(cat "$WORK/b.err")"
	t0=$(now)
	wait "$GPUMEM_PID"
	t1=$(now)
	GPUMEM_PID=
	cmd+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
done
after=$(links)

printf '%s\n' "${sigint[@]}" >"$WORK/sigint"
printf '%s\n' "${cmd[@]}" >"$WORK/cmd"

printf 'exit: %s CUDA files attached (%s probes) on this host\n' "$files" "$probes"
printf '  %-44s %6.2f s  (target <= %s s; rounds: %s)\n' "SIGINT to exit, system-wide snapshot" \
	"$(median "$WORK/sigint")" "$TARGET_S" "${sigint[*]}"
printf '  %-44s %6.2f s  (target <= %s s; rounds: %s)\n' "-c true: its start to gpumem's exit" \
	"$(median "$WORK/cmd")" "$TARGET_S" "${cmd[*]}"
printf '  %-44s %6s    (before: %s; every probe gone: %s)\n' "uprobe_multi links after" "$after" \
	"$before" "$([ "$after" -le "$before" ] && echo yes || echo NO)"
