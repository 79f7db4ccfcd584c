#!/bin/bash
# What a stream's consumer costs an event: run as `gpumem trace|record ... -c bench/consumer_cpu.sh
# OUT PAIRS`, it reads its parent's (gpumem's) CPU time, the sum of its threads' schedstat run
# times, before and after `workload threads 1 PAIRS 4096` (one producing thread, so nothing is
# dropped) and a pause for the last poll, and writes the nanoseconds per call event to OUT.
# gpumem's start (the verifier) and exit fall outside what it measures.
set -u
out=$1 pairs=$2
cpu_ns() { cat /proc/$PPID/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
before=$(cpu_ns)
"$(dirname "$0")/../${BUILD:-build}/tests/workload" threads 1 "$pairs" 4096 >/dev/null || exit 1
sleep 0.4
after=$(cpu_ns)
echo $(( (after - before) / (2 * pairs) )) >"$out"
