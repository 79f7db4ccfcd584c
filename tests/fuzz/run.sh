#!/bin/sh
# Runs the libFuzzer harnesses (tests/fuzz/fuzz.mk calls it).
#   run.sh probe CC OUTDIR              whether CC builds fuzzers; if not, prints why, exits 1
#   run.sh fuzz SECONDS OUTDIR NAME...  fuzzes each harness on a copy of its corpus, in turn
# $FUZZ_ARGS goes to every fuzzer; with $FUZZ_CORPUS_OUT set (a folder outside the repository)
# each grown corpus is kept in it, to measure coverage or start the next run from. A crash is
# kept in OUTDIR/artifacts/NAME/, and fails the run once every harness has had its turn.
set -u
work=""
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

probe()
{
	cc=$1 out=$2
	# shellcheck disable=SC2086 # CC may carry options: "clang-14 -resource-dir=..."
	set -- $cc
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "$1 not found (Debian: apt-get install clang, or make deps)"
		return 1
	fi
	mkdir -p "$out" || return 1
	printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
		'{ (void)d; (void)n; return 0; }' >"$out/probe.c"
	# shellcheck disable=SC2086
	if ! $cc -fsanitize=fuzzer,address,undefined "$out/probe.c" -o "$out/probe" \
		>"$out/probe.log" 2>&1; then
		echo "$cc cannot link -fsanitize=fuzzer: $(head -n 1 "$out/probe.log")" \
			"(it takes clang and its libFuzzer runtime: Debian's libclang-rt-14-dev)"
		return 1
	fi
	rm -f "$out/probe" "$out/probe.c" "$out/probe.log"
}

# The last value of a libFuzzer "stat::NAME: value" line, or "-".
stat_of()
{
	sed -n "s/^stat::$1: *//p" "$2" | tail -n 1 | grep . || echo -
}

fuzz_one()
{
	name=$1 seconds=$2 out=$3
	bin=$out/fuzz_$name
	art=$out/artifacts/$name
	log=$out/$name.log
	work=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-fuzz-$name.XXXXXX") || return 1
	mkdir -p "$work/corpus" "$art"
	for dir in "tests/fuzz/corpus/$name" "$out/seeds/$name"; do
		[ -d "$dir" ] && cp "$dir"/* "$work/corpus/"
	done
	seeds=$(find "$work/corpus" -type f | wc -l)
	touch "$work/started"
	# shellcheck disable=SC2086 # FUZZ_ARGS holds several options
	"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$art/" ${FUZZ_ARGS:-} "$work/corpus" >"$log" 2>&1
	rc=$?
	corpus=$(find "$work/corpus" -type f | wc -l)
	crash=$(find "$art" -type f -newer "$work/started" | head -n 1)
	if [ -n "${FUZZ_CORPUS_OUT:-}" ]; then
		mkdir -p "$FUZZ_CORPUS_OUT/$name" && cp "$work/corpus"/* "$FUZZ_CORPUS_OUT/$name/"
	fi
	rm -rf "$work"
	work=""
	cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 |
		sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1, ft \2/p')
	echo "fuzz: $name: $(stat_of number_of_executed_units "$log") execs" \
		"($(stat_of average_exec_per_sec "$log")/s) in ${seconds}s, ${cov:-cov -}," \
		"corpus $seeds -> $corpus, peak RSS $(stat_of peak_rss_mb "$log") MB"
	[ "$rc" -eq 0 ] && return 0
	echo "fuzz: $name: FAILED (exit $rc):" \
		"$(grep -m1 -E 'ERROR:|contract broken|runtime error' "$log")"
	echo "fuzz: $name: log: $log"
	[ -n "$crash" ] && echo "fuzz: $name: reproduce: $bin $crash"
	return 1
}

case "${1:-}" in
probe)
	probe "$2" "$3"
	;;
fuzz)
	seconds=$2 out=$3
	shift 3
	failed=""
	for name in "$@"; do
		fuzz_one "$name" "$seconds" "$out" || failed="$failed $name"
	done
	if [ -n "$failed" ]; then
		echo "fuzz: FAILED:$failed"
		exit 1
	fi
	echo "fuzz: passed: $*"
	;;
*)
	echo "usage: $0 probe CC OUTDIR | fuzz SECONDS OUTDIR NAME..." >&2
	exit 2
	;;
esac
