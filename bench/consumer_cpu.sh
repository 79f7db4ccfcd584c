#!/bin/bash
# What a stream's consumer costs an event: run as `gpumem trace|record ... -c bench/consumer_cpu.sh
# OUT PAIRS`, it reads its parent's (gpumem's) CPU time, the sum of its threads' schedstat run
# times, before and after `workload threads 1 PAIRS 4096` (one producing thread, so nothing is
# dropped) and a pause for the last poll, and writes the nanoseconds per call event to OUT; the
# producing process's own CPU an event (its traps and gpumem's programs included) to
# OUT.producer, the side of the stream the consumer must keep up with, measured in the same run.
# gpumem's start (the verifier) and exit fall outside what it measures, and so does its first
# sight of the workload's files: a short run of the workload goes first, and what gpumem spent
# on it, in ms, goes to OUT.first (the symbols and line tables read once: ~60 ms here, most of
# it inflating libc's compressed debug info, which would add ~150 ns to each event of a
# 200,000-pair run and nothing to the rate a consumer keeps up with).
set -u
out=$1 pairs=$2
workload=$(dirname "$0")/../${BUILD:-build}/tests/workload
cpu_ns() { cat /proc/$PPID/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
first=$(cpu_ns)
"$workload" threads 1 1000 4096 >/dev/null || exit 1
sleep 0.4
before=$(cpu_ns)
TIMEFORMAT='%3U %3S'
producer=$( { time "$workload" threads 1 "$pairs" 4096 >/dev/null 2>"$out.err" || exit 1; } 2>&1) ||
	{ cat "$out.err" >&2; exit 1; }
sleep 0.4
after=$(cpu_ns)
echo $(( (after - before) / (2 * pairs) )) >"$out"
awk -v p="$pairs" '{ printf "%.0f\n", ($1 + $2) * 1e9 / (2 * p) }' <<<"$producer" >"$out.producer"
echo $(( (before - first) / 1000000 )) >"$out.first"
