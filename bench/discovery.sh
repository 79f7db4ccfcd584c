#!/bin/bash
# `make bench-discovery` (and the end of `make bench`): what discovery costs. (a) How long a
# process that maps a CUDA library gpumem has never seen waits for its probes: RUNS times a
# fresh copy of the mock runtime is dlopen'ed under a system-wide `gpumem -v`, whose "attached
# a new CUDA file" lines carry the latency; every allocation must still be seen. (b) gpumem's
# start-up (exec to its "gpumem: tracing:" line) and the CPU it used, on this host as it is
# and with IDLE extra processes, half of them with the runtime mapped. (c) gpumem's CPU for each
# program the host runs (BENCH_BASELINE: another binary's beside it). Numbers, not verdicts.
#
# Knobs: BENCH_DISCOVERY_RUNS (default 20), BENCH_IDLE_PROCS (default 1000),
# BENCH_STARTUP_ROUNDS (default 3), BENCH_EXECS (default 300).
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C
. bench/common.sh

BUILD=${BUILD:-build}
GPUMEM=${GPUMEM:-$BUILD/gpumem}
WORKLOAD_DL=$BUILD/tests/workload_dl
IDLE_PROCS=$BUILD/bench/idle_procs
MOCK_LIB=$(readlink -f "$BUILD/tests/lib")
RUNS=${BENCH_DISCOVERY_RUNS:-20}
IDLE=${BENCH_IDLE_PROCS:-1000}
ROUNDS=${BENCH_STARTUP_ROUNDS:-3}
SIZE=4096
PYTHON=${PYTHON:-python3}

WORK=$(mktemp -d /tmp/gpumem-discovery.XXXXXX)
GPUMEM_PID=
IDLE_PID=
cleanup() {
	[ -z "$GPUMEM_PID" ] || kill -KILL "$GPUMEM_PID" 2>/dev/null
	# idle_procs leads a process group of its own: it and its children, nothing else.
	[ -z "$IDLE_PID" ] || kill -KILL -- "-$IDLE_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "bench-discovery: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (BPF): sudo make bench-discovery"
for f in "$GPUMEM" "$WORKLOAD_DL" "$IDLE_PROCS" "$MOCK_LIB/libcudart.so.13" \
	"$MOCK_LIB/libcuda.so.1"; do
	[ -e "$f" ] || die "$f is missing: run 'make bench-discovery' (it builds it)"
done


# ---- (a) late attach: a new runtime file, mapped by a process gpumem must catch ----

echo "discovery: $RUNS processes each dlopen a CUDA runtime file gpumem has not seen"
"$GPUMEM" snapshot --json -v -o "$WORK/report.json" 2>"$WORK/gpumem.err" &
GPUMEM_PID=$!
wait_for_line "$WORK/gpumem.err" "gpumem: tracing:" || die "gpumem did not start: $(tail -3 "$WORK/gpumem.err")"
: >"$WORK/pids"
for i in $(seq "$RUNS"); do
	dir=$WORK/run$i
	mkdir "$dir"
	cp "$MOCK_LIB/libcudart.so.13" "$dir/"	# a new inode: a file gpumem never attached to
	ln -s "$MOCK_LIB/libcuda.so.1" "$dir/libcuda.so.1"	# the driver it already knows
	"$WORKLOAD_DL" dlopen "$dir/libcudart.so.13" "$SIZE" >"$dir/out" 2>&1 &
	pid=$!
	wait "$pid"
	echo "$pid $?" >>"$WORK/pids"
done
kill -INT "$GPUMEM_PID"
wait "$GPUMEM_PID"
GPUMEM_PID=
"$PYTHON" - "$WORK/gpumem.err" "$WORK/report.json" "$WORK/pids" "$SIZE" <<'EOF'
import json, re, statistics, sys
err, report, pids, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
runs = {int(p): int(rc) for p, rc in (l.split() for l in open(pids))}
lat = {}
for line in open(err):
    m = re.search(r"attached a new CUDA file ([0-9.]+) ms after the kernel saw it \(PID (\d+)", line)
    if m and int(m.group(2)) in runs:
        lat.setdefault(int(m.group(2)), []).append(float(m.group(1)))
procs = {p["pid"]: p for p in json.load(open(report))["processes"]}
seen = sum(1 for pid in runs if pid in procs and procs[pid]["alloc_count"] == 1
           and procs[pid]["alloc_bytes_total"] == size)
ms = sorted(max(v) for v in lat.values())
if ms:
    print("  attach latency (new file mapped -> probes on): min %.2f ms, median %.2f ms, "
          "max %.2f ms over %d processes" % (ms[0], statistics.median(ms), ms[-1], len(ms)))
else:
    print("  attach latency: no 'attached a new CUDA file' line for these processes")
print("  allocations seen: %d of %d (%d workloads failed)" %
      (seen, len(runs), sum(1 for rc in runs.values() if rc)))
EOF

# ---- (b) start-up on a host with many processes ----

# Starts gpumem -v, and prints the seconds from exec to its "tracing:" line, the CPU seconds
# (user+system, /proc/PID/stat) it had used by then, and the seconds its scan of every
# process's maps took (its own "scanned the maps" line).
startup() {
	"$PYTHON" - "$GPUMEM" <<'EOF'
import os, re, signal, subprocess, sys, time
tick = os.sysconf("SC_CLK_TCK")
scan = float("nan")
t0 = time.monotonic()
p = subprocess.Popen([sys.argv[1], "snapshot", "-v", "--json", "-o", "/dev/null"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                     errors="replace")
for line in p.stderr:
    m = re.search(r"scanned the maps of \d+ processes in ([0-9.]+) ms", line)
    if m:
        scan = float(m.group(1)) / 1e3
    if "gpumem: tracing:" in line:
        break
took = time.monotonic() - t0
fields = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(fields[11]) + int(fields[12])) / tick
p.send_signal(signal.SIGINT)
p.communicate(timeout=60)
print("%.4f %.2f %.4f" % (took, cpu, scan))
EOF
}

summary() {	# LABEL, then lines "seconds cpu" on stdin
	"$PYTHON" -c '
import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
t = [r[0] for r in rows]; c = [r[1] for r in rows]; s = [r[2] for r in rows]
print("  %-30s start-up median %.0f ms (min %.0f, max %.0f), CPU median %.0f ms,"
      " of which the process scan %.1f ms" % (sys.argv[1], statistics.median(t) * 1e3,
      min(t) * 1e3, max(t) * 1e3, statistics.median(c) * 1e3, statistics.median(s) * 1e3))' "$1"
}

nprocs() { ls -d /proc/[0-9]* | wc -l; }

echo
echo "discovery: gpumem start-up, $ROUNDS rounds each (CPU in clock ticks of 1/$(getconf CLK_TCK) s)"
base=$(nprocs)
for _ in $(seq "$ROUNDS"); do startup; done | summary "as is ($base processes)"

"$IDLE_PROCS" "$IDLE" "$MOCK_LIB/libcudart.so.13" >"$WORK/idle.out" &
IDLE_PID=$!
disown "$IDLE_PID"	# killed below on purpose: no "Killed" notice from the shell
wait_for_line "$WORK/idle.out" "^ready" || die "idle processes did not start"
busy=$(nprocs)
for _ in $(seq "$ROUNDS"); do startup; done | summary "+$IDLE idle ($busy processes)"
echo "  idle processes: $(sed 's/^ready //' "$WORK/idle.out")"
kill -KILL -- "-$IDLE_PID"
IDLE_PID=

# ---- (c) what each program the host runs costs gpumem ----

# A system-wide gpumem sees every exec: it reads the new process's maps, looks for a CUDA
# runtime in its executable, and examines a python it runs. Its CPU (every thread's, from
# /proc/PID/task/*/schedstat, in ns) over EXECS runs of a program, per run. Usage: exec_cost
# BINARY LABEL COMMAND...
EXECS=${BENCH_EXECS:-300}
gpumem_cpu_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ ns += $1 } END { printf "%.0f\n", ns }'
}
exec_cost() {
	local bin=$1 label=$2 pid before after
	shift 2
	"$bin" snapshot --json -o /dev/null 2>"$WORK/exec.err" &
	pid=$!
	GPUMEM_PID=$pid
	wait_for_line "$WORK/exec.err" "gpumem: tracing:" || die "gpumem did not start: $(tail -3 "$WORK/exec.err")"
	sleep 1		# its start-up's own work done
	before=$(gpumem_cpu_ns "$pid")
	for _ in $(seq "$EXECS"); do "$@" >/dev/null; done
	after=$(gpumem_cpu_ns "$pid")
	kill -INT "$pid"
	wait "$pid"
	GPUMEM_PID=
	printf "  %-8s %4d us of gpumem's CPU a run of '%s'\n" "$label" \
		$(( (after - before) / EXECS / 1000 )) "$*"
}

echo
echo "discovery: gpumem's CPU for each program the host runs, $EXECS runs each (system-wide)"
baseline_binary || die "BENCH_BASELINE=$BENCH_BASELINE is no executable file"
for prog in /bin/true "/usr/bin/python3 -c pass"; do
	# shellcheck disable=SC2086	# the program's own words
	exec_cost "$GPUMEM" "this" $prog
	# shellcheck disable=SC2086
	[ -z "$BASELINE" ] || exec_cost "$BASELINE" "baseline" $prog
done
