#!/bin/bash
# The flight recorder's cost: how many events a second `gpumem record -o FILE.db` writes with
# nothing dropped (2 threads allocating and freeing as fast as they can: `workload threads`),
# the bytes each event takes on disk, and the size of an hour of a training-like loop
# (`workload steps`: 2 scratch buffers allocated and freed and one kept, every PERIOD ms),
# extrapolated from the sizes of two finished recordings of it, one twice as long as the
# other (what a second adds, times the hour).
# Knobs: RECORD_PAIRS (per thread, default 200000), RECORD_ROUNDS (default 3),
# RECORD_LOOP_S (seconds of the loop, default 20), RECORD_LOOP_PERIOD_MS (default 10).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
PAIRS=${RECORD_PAIRS:-200000}
ROUNDS=${RECORD_ROUNDS:-3}
LOOP_S=${RECORD_LOOP_S:-20}
PERIOD_MS=${RECORD_LOOP_PERIOD_MS:-10}
WORK=$(mktemp -d /tmp/gpumem-record-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

size_of() {
	local total=0 f
	for f in "$1" "$1-wal"; do
		[ -f "$f" ] && total=$((total + $(stat -c %s "$f")))
	done
	echo "$total"
}

echo "record -o FILE.db: 2 threads x $PAIRS alloc/free pairs, default ring buffer ($ROUNDS rounds)"
for round in $(seq 1 "$ROUNDS"); do
	rm -f "$WORK"/t.db*
	"$BUILD/gpumem" record -o "$WORK/t.db" -c "$BUILD/tests/workload" threads 2 "$PAIRS" 4096 \
		>/dev/null 2>"$WORK/err" || { cat "$WORK/err"; exit 1; }
	"$PYTHON" - "$WORK/t.db" "$((4 * PAIRS + 2))" "$round" "$(size_of "$WORK/t.db")" <<'PY'
import sqlite3, sys
path, want, rnd, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
db = sqlite3.connect(path)
n, lo, hi = db.execute("SELECT count(*), min(time_ns), max(time_ns) FROM events"
                       " WHERE type IN (1, 2)").fetchone()
dropped = db.execute("SELECT value FROM losses WHERE name = 'ringbuf_dropped'"
                     " ORDER BY time_ns DESC LIMIT 1").fetchone()
span = (hi - lo) / 1e9 if n > 1 else 0
print(f"  round {rnd}: {n} of {want} call events recorded, {dropped[0] if dropped else '?'}"
      f" dropped, {n / span if span else 0:,.0f} events/s (target 200,000/s with 0 dropped),"
      f" {size / max(n, 1):.1f} bytes an event on disk ({size / 2**20:.1f} MiB)")
PY
done

# The size of a finished recording of the loop after S seconds (closed: its WAL checkpointed
# into the file), with GPUMEM_ARGS; prints "BYTES EVENTS".
loop_run() {
	local secs=$1 steps=$((($1 * 1000 / PERIOD_MS) * 2))
	shift
	rm -f "$WORK"/loop.db*
	# -d ends the loop with SIGTERM: gpumem then exits with its status, 143.
	"$BUILD/gpumem" record -o "$WORK/loop.db" -d "$secs" "$@" -c "$BUILD/tests/workload" \
		steps "$steps" "$PERIOD_MS" 1000 >/dev/null 2>"$WORK/err"
	[ $? = 143 ] || { cat "$WORK/err" >&2; exit 1; }
	echo "$(size_of "$WORK/loop.db") $("$PYTHON" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM events").fetchone()[0])' \
		"$WORK/loop.db")"
}

loop_size() {	# LABEL GPUMEM_ARGS...: the growth between a run of LOOP_S/2 s and one of LOOP_S s
	local label=$1 half full
	shift
	half=$(loop_run $((LOOP_S / 2)) "$@")
	full=$(loop_run "$LOOP_S" "$@")
	"$PYTHON" - "$label" "$LOOP_S" $half $full <<'PY'
import sys
label, secs, half, half_n, full, full_n = sys.argv[1], *map(int, sys.argv[2:])
per_s = (full - half) / (secs / 2)
events = (full_n - half_n) / (secs / 2)
print(f"  {label}: {events:,.0f} events/s recorded, {per_s / 1024:.2f} KiB/s"
      f" ({per_s / max(events, 1):.0f} bytes an event, samples included): an hour is about"
      f" {(full + per_s * (3600 - secs)) / 2**20:.1f} MiB")
PY
}

echo "a training-like loop (workload steps, a step every $PERIOD_MS ms), $LOOP_S s, extrapolated to 1 hour"
loop_size "every event"
loop_size "--sample-events 100" --sample-events 100

# Exports from a recording read it once (the states move forward from one sample to the next
# by the events between): the time is linear in events plus samples. The day: the loop's
# recording, then a day with nothing to record (a sample tick a second, as an agent writes).
export_time() {	# OUT FILE.db: seconds of `export --format chrome`
	"$PYTHON" - "$BUILD/gpumem" export --format chrome -o "$1" "$2" 2>"$WORK/err" <<'PY' ||
import subprocess, sys, time
start = time.monotonic()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
print(f"{time.monotonic() - start:.3f}")
sys.exit(done.returncode)
PY
		{ cat "$WORK/err" >&2; exit 1; }
}
echo "export --format chrome from a recording: one pass over its events and samples"
loop_run "$LOOP_S" >/dev/null
busy=$(export_time "$WORK/loop.json" "$WORK/loop.db")
"$PYTHON" - "$WORK/loop.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE sessions SET end_ns = end_ns + 86400 * 1000000000")
db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 86400)"
           " INSERT OR IGNORE INTO samples SELECT (SELECT max(time_ns) FROM samples)"
           " + i * 1000000000, 1 FROM n")
db.commit()
PY
day=$(export_time "$WORK/day.json" "$WORK/loop.db")
"$PYTHON" - "$WORK/loop.db" "$busy" "$day" "$LOOP_S" <<'PY'
import sqlite3, sys
path, busy, day, secs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
db = sqlite3.connect(path)
events = db.execute("SELECT count(*) FROM events").fetchone()[0]
samples = db.execute("SELECT count(*) FROM samples").fetchone()[0]
print(f"  the loop's {secs} s ({events:,} events): {busy:.2f} s,"
      f" {busy / events * 1e6:.1f} us an event (target: linear, about 10 us an event)")
print(f"  the same, then an idle day ({samples:,} samples): {day:.2f} s"
      f" (target under 1 s; reading the state again at every sample took 21 s)")
PY
