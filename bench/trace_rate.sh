#!/bin/bash
# The event consumer: how many events a second `gpumem trace --json -o FILE` delivers, and how
# many it drops, at the default ring size, for a workload of two threads that allocate and free
# as fast as they can (each pair is two events). Prints the rate the file shows (events over
# the span of their timestamps) and the drops from the stream's final "lost" line. Then what
# a consumer costs an event, gpumem's own CPU time with one producing thread
# (bench/consumer_cpu.sh), for trace --json -o FILE and for record -o FILE.db: under the bare
# uprobe trap's ~850 ns here, one consumer core keeps up with one producing core.
# Knobs: TRACE_RATE_PAIRS (per thread, default 200000), TRACE_RATE_ROUNDS (default 3).
set -u
cd "$(dirname "$0")/.." || exit 1
. bench/common.sh
BUILD=${BUILD:-build}
PAIRS=${TRACE_RATE_PAIRS:-200000}
ROUNDS=${TRACE_RATE_ROUNDS:-3}
WORK=$(mktemp -d /tmp/gpumem-trace-rate.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "trace --json -o FILE: 2 threads x $PAIRS alloc/free pairs, default ring buffer ($ROUNDS rounds)"
for round in $(seq 1 "$ROUNDS"); do
	"$BUILD/gpumem" trace --json -o "$WORK/t.json" -c "$BUILD/tests/workload" threads 2 \
		"$PAIRS" 4096 >/dev/null 2>"$WORK/err" || { cat "$WORK/err"; exit 1; }
	"${PYTHON:-/usr/bin/python3}" - "$WORK/t.json" "$((4 * PAIRS))" "$round" <<'PY'
import json, sys
path, want, rnd = sys.argv[1], int(sys.argv[2]), sys.argv[3]
times, lost = [], None
for line in open(path):
    e = json.loads(line)
    if e["event"] in ("alloc", "free"):
        times.append(e["time_ns"])
    elif e["event"] == "lost":
        lost = e["lost"]
span = (max(times) - min(times)) / 1e9 if len(times) > 1 else 0
rate = len(times) / span if span else 0
print(f"  round {rnd}: {len(times)} of {want} call events delivered, "
      f"{lost['ringbuf_dropped'] if lost else '?'} dropped, {rate:,.0f} events/s "
      f"(target 300,000/s with 0 dropped)")
PY
done

echo "CPU per event of the consumer, 1 thread x $PAIRS pairs (median of $ROUNDS rounds)"
# The rounds above left ~2 GB of page cache to write back: out of the way first, or the first
# round here pays for it (2.5 us an event against 0.9).
rm -f "$WORK"/t.json
sync
for consumer in "trace --json -o $WORK/c.json" "record -o $WORK/c.db"; do
	: >"$WORK/cpu"
	: >"$WORK/first"
	: >"$WORK/producer"
	for round in $(seq 1 "$ROUNDS"); do
		rm -f "$WORK"/c.*
		sync
		# shellcheck disable=SC2086 # the consumer's words
		"$BUILD/gpumem" $consumer -c bench/consumer_cpu.sh "$WORK/one" "$PAIRS" \
			>/dev/null 2>"$WORK/err" || { cat "$WORK/err"; exit 1; }
		cat "$WORK/one" >>"$WORK/cpu"
		cat "$WORK/one.first" >>"$WORK/first"
		cat "$WORK/one.producer" >>"$WORK/producer"
	done
	printf '  %-28s %5s ns an event (rounds: %s; target < 850: the bare trap)\n' \
		"${consumer%% -o*} -o FILE:" "$(median "$WORK/cpu")" "$(paste -sd, "$WORK/cpu")"
	printf '  %-28s %5s ns an event, its traps and gpumem'"'"'s programs (rounds: %s)\n' \
		"the producing thread:" "$(median "$WORK/producer")" "$(paste -sd, "$WORK/producer")"
	printf '  %-28s %5s ms of gpumem'"'"'s CPU once, outside the figure above\n' \
		"first sight of the files:" "$(median "$WORK/first")"
done
