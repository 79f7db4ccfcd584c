#!/bin/bash
# `make bench-serve`: what the agent costs (issue 10, item 7), in one run.
# (1) CPU at rest: a system-wide `gpumem serve` (pinned in a directory of its own under
#     /sys/fs/bpf, reset at the end; on a free loopback port), SERVE_PROCS processes each
#     holding SERVE_ALLOCS live allocations over SERVE_SITES call sites (build/bench/holder, on
#     the benchmark's private copies of the mock libraries, which no other gpumem on the machine
#     attaches to), and /metrics scraped every SCRAPE_S seconds for WINDOW_S seconds: the
#     agent's utime+stime (every thread) over the window, as a share of one core. Target < 1%.
# (2) Scrape latency: median and max of a full GET /metrics over those scrapes, and the body.
# (3) RSS across short-lived processes: the agent's VmRSS after CHURN_BASE, CHURN_MID and
#     CHURN_N CUDA processes run one after another (bench/churn.sh's serve case, in an agent of
#     its own). The model keeps up to 1,000 ended processes (--keep-ended), so RSS grows while
#     it fills: the targets are churn.sh's from BASE to MID (a ratio under 2) and flat from
#     MID to N (a ratio under SERVE_RSS_TARGET).
# Also printed: the agent's RSS with the holders' allocations live, its CPU by thread, and the
# time and CPU it takes to see the holders end. With SERVE_PERF, a perf profile of the agent
# under the same scrapes after the measured window, then (strace) which maps its BPF syscalls
# walk. Numbers are printed; only --check turns a missed target into a failing exit status.
#
# Usage: bench/serve.sh [--check]
# Knobs: SERVE_PROCS (100), SERVE_ALLOCS (10000), SERVE_SITES (10), SERVE_SIZE (4096 bytes,
# times 1 to SITES by site), SERVE_WINDOW_S (60), SERVE_SCRAPE_S (5), SERVE_INTERVAL_S (the
# agent's -i; default its own, 1 s), SERVE_SETTLE_S (seconds at rest before the window, 5),
# SERVE_READY_S (the most seconds the holders may take, 600), SERVE_PERF (auto: profile when
# the CPU is over target, if perf is installed; 1 always; 0 never), SERVE_PERF_S (20),
# SERVE_CHURN (1; 0 skips part 3), SERVE_RSS_TARGET (1.1), CHURN_BASE (100), CHURN_MID (2000;
# empty: none, BASE to N against churn.sh's target), CHURN_N (4000),
# GPUMEM, BUILD, PYTHON.
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C

BUILD=${BUILD:-build}
GPUMEM=${GPUMEM:-$BUILD/gpumem}
HOLDER=$BUILD/bench/holder
PYTHON=${PYTHON:-/usr/bin/python3}
PROCS=${SERVE_PROCS:-100}
ALLOCS=${SERVE_ALLOCS:-10000}
SITES=${SERVE_SITES:-10}
SIZE=${SERVE_SIZE:-4096}
WINDOW=${SERVE_WINDOW_S:-60}
EVERY=${SERVE_SCRAPE_S:-5}
INTERVAL=${SERVE_INTERVAL_S:-}
SETTLE=${SERVE_SETTLE_S:-5}
READY_S=${SERVE_READY_S:-600}
PERF=${SERVE_PERF:-auto}
PERF_S=${SERVE_PERF_S:-20}
CHURN=${SERVE_CHURN:-1}
RSS_TARGET=${SERVE_RSS_TARGET:-1.1}
CPU_TARGET=1
CHURN_TARGET=2	# bench/churn.sh's
export CHURN_N=${CHURN_N:-4000} CHURN_BASE=${CHURN_BASE:-100} CHURN_MID=${CHURN_MID-2000}
# The private copies (bench/bench.mk), by their own names: the files the holders map.
LIBDIR=$(readlink -f "$BUILD/bench/lib")
CUDART=$(readlink -f "$LIBDIR/libcudart.so.13")
CUDA=$(readlink -f "$LIBDIR/libcuda.so.1")

CHECK=0
for arg in "$@"; do
	case $arg in
	--check) CHECK=1 ;;
	-h | --help)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "usage: bench/serve.sh [--check]" >&2
		exit 2
		;;
	esac
done

WORK=$(mktemp -d /tmp/gpumem-serve.XXXXXX)
PIN_DIR=/sys/fs/bpf/gpumem-bench-$$
AGENT_PID=
HOLDER_PIDS=()
PERF_PID=
cleanup() {
	exec 3>&-
	[ -z "$PERF_PID" ] || kill -KILL "$PERF_PID" 2>/dev/null
	for pid in "${HOLDER_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
	if [ -n "$AGENT_PID" ]; then
		kill -KILL "$AGENT_PID" 2>/dev/null
		wait "$AGENT_PID" 2>/dev/null
	fi
	wait 2>/dev/null
	reset_pins
	rm -rf "$WORK"
}
reset_pins() {
	[ -e "$PIN_DIR" ] || return 0
	"$GPUMEM" serve --reset --pin-dir "$PIN_DIR" >/dev/null 2>"$WORK/reset.err" ||
		echo "bench-serve: 'gpumem serve --reset --pin-dir $PIN_DIR' failed:" \
			"$(head -3 "$WORK/reset.err")" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "bench-serve: $*" >&2
	[ ! -s "$WORK/agent.err" ] || sed 's/^/  agent: /' "$WORK/agent.err" | tail -5 >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (BPF): sudo make bench-serve"
for f in "$GPUMEM" "$HOLDER" "$CUDART" "$CUDA" "$BUILD/tests/workload"; do
	[ -e "$f" ] || die "$f is missing: run 'make bench-serve' (it builds it)"
done
case $PROCS$ALLOCS$SITES$SIZE$WINDOW$EVERY$SETTLE in
*[!0-9]*) die "SERVE_PROCS, _ALLOCS, _SITES, _SIZE, _WINDOW_S, _SCRAPE_S, _SETTLE_S: numbers" ;;
esac
{ [ "$SITES" -ge 1 ] && [ "$SITES" -le 10 ]; } || die "SERVE_SITES must be 1 to 10"
{ [ "$EVERY" -ge 1 ] && [ "$WINDOW" -ge "$EVERY" ]; } || die "need 1 <= SCRAPE_S <= WINDOW_S"

others=$(pgrep -x gpumem | tr '\n' ' ')
conditions="$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$others" ] || conditions="$conditions; other gpumem processes: $others"

# ---- the agent ----

agent_args=(serve --pin-dir "$PIN_DIR" --listen 127.0.0.1:0 --lib "$CUDART" --lib "$CUDA")
[ -z "$INTERVAL" ] || agent_args+=(-i "$INTERVAL")
"$GPUMEM" "${agent_args[@]}" >/dev/null 2>"$WORK/agent.err" &
AGENT_PID=$!
for _ in $(seq 600); do
	grep -q "gpumem: tracing:" "$WORK/agent.err" 2>/dev/null && break
	kill -0 "$AGENT_PID" 2>/dev/null || break
	sleep 0.05
done
grep -q "gpumem: tracing:" "$WORK/agent.err" || die "'gpumem ${agent_args[*]}' did not start"
PORT=$(sed -n 's/.*serving metrics on .*(port \([0-9]*\)).*/\1/p' "$WORK/agent.err" | head -1)
[ -n "$PORT" ] || die "no port in the agent's first line"
grep -qs "^path:[[:space:]]*$CUDART" "/proc/$AGENT_PID/fdinfo/"* ||
	die "the agent has no probes on $CUDART"

echo "gpumem serve: the agent's cost ($conditions)"
echo "  agent: gpumem ${agent_args[*]}"

# ---- (1) and (2): holders, scrapes ----

# The holders read their stdin from a FIFO whose only writer is fd 3 here: closing it ends
# them all at once. Neither they nor the agent inherit fd 3.
mkfifo "$WORK/go"
exec 3<>"$WORK/go"
: >"$WORK/pids"
t_start=$(date +%s.%N)
for i in $(seq "$PROCS"); do
	"$HOLDER" "$ALLOCS" "$SITES" "$SIZE" <"$WORK/go" >"$WORK/holder.$i" 2>&1 3>&- &
	HOLDER_PIDS+=($!)
	echo $! >>"$WORK/pids"
done
"$PYTHON" bench/serve.py wait "$PORT" "$WORK/pids" "$ALLOCS" "$READY_S" 3>&- ||
	die "the holders did not all show $ALLOCS live allocations"
t_ready=$(date +%s.%N)
for i in $(seq "$PROCS"); do
	grep -q '^holding' "$WORK/holder.$i" || die "holder $i: $(head -3 "$WORK/holder.$i")"
done
awk -v a="$t_start" -v b="$t_ready" -v p="$PROCS" -v n="$ALLOCS" 'BEGIN {
	printf "  %d holders x %d allocations (%d live) seen in one scrape %.1f s after they" \
		" started\n", p, n, p * n, b - a }'
sleep "$SETTLE"
"$PYTHON" bench/serve.py measure "$PORT" "$AGENT_PID" "$WORK/pids" "$WINDOW" "$EVERY" \
	"$WORK/agent.err" "$WORK/measure.json" 3>&- || die "the measurement failed"

# The profile: after the window, so that perf's own cost is in no measured number.
over_cpu=$("$PYTHON" -c 'import json, sys
print(int(json.load(open(sys.argv[1]))["cpu_pct"] >= float(sys.argv[2])))' \
	"$WORK/measure.json" "$CPU_TARGET")
if [ "$PERF" = 1 ] || { [ "$PERF" = auto ] && [ "$over_cpu" = 1 ]; }; then
	if command -v perf >/dev/null; then
		perf record -q -F 4999 -p "$AGENT_PID" -o "$WORK/perf.data" -- sleep "$PERF_S" \
			>/dev/null 2>"$WORK/perf.err" 3>&- &
		PERF_PID=$!
		"$PYTHON" bench/serve.py measure "$PORT" "$AGENT_PID" "$WORK/pids" "$PERF_S" \
			"$EVERY" "$WORK/agent.err" "$WORK/perf-window.json" >/dev/null 3>&-
		wait "$PERF_PID"
		PERF_PID=
		perf report -i "$WORK/perf.data" --stdio --no-children --sort comm,dso,sym \
			--percent-limit 1.5 -g none 2>/dev/null | grep -v '^#' | grep -v '^$' |
			head -25 >"$WORK/perf.txt"
	else
		echo "perf is not installed: no profile" >"$WORK/perf.txt"
	fi
	# Which maps its BPF syscalls walk, for as long again: strace, after perf (it slows them).
	if command -v strace >/dev/null; then
		ended0=$(grep -c ' ended, ' "$WORK/agent.err")
		timeout "$PERF_S" strace -qq -f -e trace=bpf -p "$AGENT_PID" -o "$WORK/strace.txt" \
			3>&- 2>/dev/null
		ended=$(($(grep -c ' ended, ' "$WORK/agent.err") - ended0))
		"$PYTHON" - "$AGENT_PID" "$WORK/strace.txt" "$PERF_S" "$ended" \
			>"$WORK/walks.txt" <<'PY'
import collections, os, re, subprocess, sys
agent, trace, secs, ended = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
names = {}
for fd in os.listdir(f"/proc/{agent}/fdinfo"):
    try:
        m = re.search(r"^map_id:\s*(\d+)", open(f"/proc/{agent}/fdinfo/{fd}").read(), re.M)
    except OSError:
        continue
    if m:
        out = subprocess.run(["bpftool", "map", "show", "id", m.group(1)], text=True,
                             capture_output=True).stdout
        n = re.search(r"name (\S+)", out)
        names[fd] = n.group(1) if n else "id " + m.group(1)
calls, walks = collections.Counter(), collections.Counter()
for line in open(trace):
    m = re.search(r"BPF_MAP_LOOKUP_BATCH, \{batch=\{in_batch=(\S+), .*map_fd=(\d+)", line)
    if m:
        calls[m.group(2)] += 1
        walks[m.group(2)] += m.group(1) == "NULL"
print(f"batch look-ups in {secs} s (strace), {ended} other processes ended meanwhile:")
for fd, n in calls.most_common():
    print(f"  map {names.get(fd, 'fd ' + fd)!r}: {walks[fd]} walks, {n} batches of 4096")
PY
	fi
fi

# One holder ends (a line on the FIFO: one of them reads it), then all the others together;
# the agent reaps them, and deletes their allocations' entries.
echo >&3
"$PYTHON" bench/serve.py gone "$PORT" "$AGENT_PID" "$WORK/pids" $((PROCS - 1)) 300 \
	"$WORK/gone1.json" 3>&- ||
	echo "bench-serve: the agent still showed the holder 300 s after it ended" >&2
exec 3>&-
"$PYTHON" bench/serve.py gone "$PORT" "$AGENT_PID" "$WORK/pids" 0 300 "$WORK/gone.json" ||
	echo "bench-serve: the agent still showed holders 300 s after they ended" >&2
failed=0
for pid in "${HOLDER_PIDS[@]}"; do wait "$pid" || failed=$((failed + 1)); done
HOLDER_PIDS=()
[ "$failed" = 0 ] || echo "bench-serve: $failed holders exited with a failure" >&2

kill -INT "$AGENT_PID"
wait "$AGENT_PID" || echo "bench-serve: the agent exited with status $?" >&2
AGENT_PID=
reset_pins

# ---- (3): RSS across short-lived processes ----

if [ "$CHURN" = 1 ]; then
	bench/churn.sh serve >"$WORK/churn.out" 2>"$WORK/churn.err" ||
		{ cat "$WORK/churn.out" "$WORK/churn.err" >&2; die "bench/churn.sh serve failed"; }
fi

# ---- the table ----

"$PYTHON" - "$WORK" "$PROCS" "$ALLOCS" "$SITES" "$EVERY" "${INTERVAL:-1 (default)}" \
	"$CPU_TARGET" "$RSS_TARGET" "$CHURN_TARGET" "$CHURN" "$CHECK" <<'PY'
import json, os, re, sys
work, procs, allocs, sites, every, interval, cpu_t, rss_t, churn_t, churn, check = sys.argv[1:]
m = json.load(open(f"{work}/measure.json"))
g = json.load(open(f"{work}/gone.json"))
g1 = json.load(open(f"{work}/gone1.json"))
mb = lambda kb: kb / 1024
missed = []
print(f"  window: {m['wall_s']:.0f} s at rest, {m['scrapes']} scrapes (every {every} s, "
      f"{m['failed']} failed), agent -i {interval}; last scrape: {m['holders']} of {procs} "
      f"holders ({m['live']} live allocations), {m['site_series_min']}-{m['site_series_max']} "
      f"site series each, {m['others']} other processes")
print()
print("%-58s %-26s %s" % ("", "measured", "target"))
cpu = m["cpu_pct"]
print("%-58s %-26s %s" % (f"agent CPU, {procs} x {allocs} held, scraped every {every} s",
                          f"{cpu:.2f}% of one core", f"< {cpu_t}%"))
if cpu >= float(cpu_t):
    missed.append("cpu")
print("%-58s %-26s" % ("  user / system", f"{m['user_s']:.2f} s / {m['sys_s']:.2f} s"))
for name, s in sorted(m["threads_s"].items(), key=lambda kv: -kv[1]):
    print("%-58s %-26s" % (f"  thread {name!r}", f"{s:.3f} s ({100 * s / m['wall_s']:.2f}%)"))
print("%-58s %-26s" % ("  by second: min / median / max",
                       f"{m['second_min_pct']:.2f}% / {m['second_median_pct']:.2f}% / "
                       f"{m['second_max_pct']:.1f}%"))
print("%-58s %-26s" % ("  other processes that ended meanwhile (agent's log)",
                       f"{m['others_ended']}"))
print("%-58s %-26s" % ("  per scrape (the agent's threads)",
                       f"{m['scrape_cpu_median_ms']:.1f} ms CPU (median)"))
print("%-58s %-26s %s" % ("scrape GET /metrics, median / max",
                          f"{m['lat_median_ms']:.1f} / {m['lat_max_ms']:.1f} ms", "-"))
print("%-58s %-26s" % ("  body", f"{m['bytes'] / 1024:.0f} KiB, {m['series']} series"))
print("%-58s %-26s" % (f"agent RSS with {int(procs) * int(allocs)} live allocations",
                       f"{mb(m['rss_kb']):.1f} MB (anon {mb(m['anon_kb']):.1f})"))
lost = ", ".join(f"{k} {v}" for k, v in m["lost"].items() if v) or "none"
print("%-58s %s" % ("losses (gpumem_lost_total, at the window's end)", lost))
lost = ", ".join(f"{k} {v}" for k, v in m["lost_in_window"].items() if v) or "none"
print("%-58s %s" % ("  of which during the window", lost))
print("%-58s %-26s" % ("one holder's end seen, the others held",
                       f"{g1['seconds']:.2f} s, {g1['cpu_s']:.2f} s CPU"))
print("%-58s %-26s" % (f"the other {int(procs) - 1} holders' end seen (at once)",
                       f"{g['seconds']:.1f} s, {g['cpu_s']:.2f} s CPU"))
if churn == "1":
    out = open(f"{work}/churn.out").read()
    r = re.search(r"rss after (\d+) = ([0-9.]+) MB, after (\d+) = ([0-9.]+) MB, "
                  r"ratio Y/X = ([0-9.]+)", out)
    if not r:
        print("bench-serve: no reading in churn.sh's output:\n" + out, file=sys.stderr)
        sys.exit(1)
    base_n, base_mb, end_n, end_mb = r.group(1), float(r.group(2)), r.group(3), float(r.group(4))
    mid = re.search(r"after (\d+) = ([0-9.]+) MB; after \d+ / after \d+ = ([0-9.]+)", out)
    # With a reading between: BASE to MID against churn.sh's target, MID to N flat.
    first_n, first_mb = (mid.group(1), float(mid.group(2))) if mid else (end_n, end_mb)
    ratio = first_mb / base_mb
    print("%-58s %-26s %s" % (f"RSS after {base_n} / {first_n} short-lived processes",
                              f"{base_mb:.1f} / {first_mb:.1f} MB, {ratio:.2f}x",
                              f"< {churn_t}x"))
    if ratio >= float(churn_t):
        missed.append("rss")
    if mid:
        flat = end_mb / first_mb
        print("%-58s %-26s %s" % (f"  then after {end_n} (flat)", f"{end_mb:.1f} MB, "
                                  f"{flat:.2f}x", f"< {rss_t}x"))
        if flat >= float(rss_t):
            missed.append("rss flat")
    for line in out.splitlines()[2:]:
        if not line.startswith("  after %s = " % (mid.group(1) if mid else "")):
            print("    " + line.strip())
if os.path.exists(f"{work}/perf.txt"):
    p = json.load(open(f"{work}/perf-window.json")) if os.path.exists(
        f"{work}/perf-window.json") else None
    print()
    print("where the agent's CPU goes (perf, a separate window"
          + (f" at {p['cpu_pct']:.2f}% of a core" if p else "") + "; self time, >= 1.5%):")
    for line in open(f"{work}/perf.txt"):
        print("  " + line.rstrip())
if os.path.exists(f"{work}/walks.txt"):
    print()
    print(open(f"{work}/walks.txt").read().rstrip())
if missed:
    print(f"\nmissed: {', '.join(missed)}")
sys.exit(1 if missed and check == "1" else 0)
PY
