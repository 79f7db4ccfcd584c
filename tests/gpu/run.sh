#!/bin/bash
# The real-GPU check of gpumem (DESIGN.md, "On a GPU machine"). Run from anywhere, as root, on a
# machine with an NVIDIA GPU and its driver:
#
#   tests/gpu/run.sh [OUTDIR]        (default build/gpu)
#
# Builds gpumem (make all; make deps only if that fails) and the CUDA programs in tests/gpu/
# (into build/gpu/bin), runs each under `gpumem snapshot --json` and `gpumem trace --json`,
# and compares what each program says it holds with what gpumem reports (PASS/DIFF); answers
# the open questions (do driver probes fire inside runtime calls; do PyTorch wheels carry the
# pytorch:malloc/free USDT probes); if torch imports, runs torch_leak.py (a planted leak) and
# compares gpumem with torch.cuda.memory_reserved() and NVML. Everything lands in OUTDIR; the
# final summary block is also OUTDIR/summary.txt. Every step has a timeout, a failed step never
# stops the rest, and the whole run stays within GPU_TEST_BUDGET seconds (default 420).
#
# Environment: NVCC (nvcc to use), PYTHON (for torch, default python3), GPU_TEST_BUDGET,
# GPU_TEST_FORCE=1 (go on without a GPU: a dry run where every CUDA call fails),
# GPU_TEST_TORCH_STEPS (default 20), GPU_TEST_OOM_MAX (1 GiB chunks, default 400).
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build/gpu}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
cd "$ROOT" || exit 1
BIN=$ROOT/build/gpu/bin
GPUMEM=$ROOT/build/gpumem
RESULTS=$OUT/results.jsonl
SUMMARY=$OUT/summary.txt
BUDGET=${GPU_TEST_BUDGET:-420}
STEPS=${GPU_TEST_TORCH_STEPS:-20}
OOM_MAX=${GPU_TEST_OOM_MAX:-400}
PY=${PYTHON:-python3}
CMPPY=python3
command -v python3 >/dev/null || CMPPY=$PY
START=$SECONDS
NOTES=()

rm -f "$RESULTS" "$SUMMARY"
exec > >(tee "$OUT/run.log") 2>&1
TEE_PID=$!

note() { NOTES+=("$*"); echo ">>> $*"; }
left() { echo $((BUDGET - (SECONDS - START))); }

# step NAME TIMEOUT STDOUT_FILE STDERR_FILE CMD...: runs CMD with a timeout cut to what is left
# of the budget; "-" for a file means the terminal/log. Returns CMD's status (124: timed out).
step() {
	local name=$1 t=$2 so=$3 se=$4 rc lim
	shift 4
	lim=$(($(left) - 20))
	if ((lim < 10)); then
		note "SKIP $name: out of time budget"
		return 125
	fi
	((t > lim)) && t=$lim
	echo "--- $name (timeout ${t}s, $(($(left)))s left): $*"
	[ "$so" = - ] && so=/dev/stdout
	[ "$se" = - ] && se=/dev/stderr
	timeout -k 5 "$t" "$@" >"$so" 2>"$se"
	rc=$?
	if ((rc == 124 || rc == 137)); then
		note "TIMEOUT $name after ${t}s"
	elif ((rc != 0)); then
		echo "    $name: exit status $rc"
	fi
	return $rc
}

finish() {
	{
		echo "================ gpumem GPU check: summary ================"
		echo "date $(date -u +%FT%TZ)  kernel $(uname -r)  gpumem $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo +dirty)  elapsed $((SECONDS - START))s"
		local n
		for n in "${NOTES[@]}"; do echo "$n"; done
		if [ -s "$RESULTS" ]; then
			echo "verdicts (program's own numbers vs gpumem):"
			"$CMPPY" tests/gpu/compare.py summary "$RESULTS"
		fi
		echo "open question 2 (which device an allocation lands on): not measured - gpumem does not track contexts yet; all programs use device 0"
		echo "outputs: $OUT (NAME.out program stdout, NAME.json snapshot, NAME.trace trace, *.log stderr, run.log)"
		echo "============================================================"
	} | tee "$SUMMARY"
	exec >&- 2>&-
	wait "$TEE_PID" 2>/dev/null
	exit 0
}

echo "gpumem GPU check: output in $OUT, budget ${BUDGET}s"
[ "$(id -u)" = 0 ] || note "WARNING: not root; gpumem needs root to load BPF"

# --- 1. the GPU and its driver ------------------------------------------------------------
DRV_CUDA=
if command -v nvidia-smi >/dev/null && timeout 60 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1; then
	cat "$OUT/nvidia-smi.txt"
	timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,persistence_mode,mig.mode.current,compute_mode \
		--format=csv 2>&1 | tee "$OUT/gpus.csv"
	DRV_CUDA=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$OUT/nvidia-smi.txt" | head -1)
	note "GPU: $(sed -n 2p "$OUT/gpus.csv" | cut -d, -f2-4)  driver CUDA version ${DRV_CUDA:-?}"
	[ -r /proc/driver/nvidia/version ] && head -1 /proc/driver/nvidia/version
	if timeout 30 nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | grep -q .; then
		note "WARNING: other processes use the GPU (memory numbers may be off; oom fails sooner):"
		timeout 30 nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
	fi
else
	cat "$OUT/nvidia-smi.txt" 2>/dev/null
	if [ "${GPU_TEST_FORCE:-0}" != 1 ]; then
		note "NO GPU: nvidia-smi $(command -v nvidia-smi >/dev/null && echo failed || echo 'not found'); /dev/nvidia0 $([ -e /dev/nvidia0 ] && echo present || echo absent). Nothing to check here (GPU_TEST_FORCE=1 for a dry run)."
		finish
	fi
	note "NO GPU, going on because GPU_TEST_FORCE=1: a dry run, every CUDA call will fail"
fi

# --- 2. gpumem ------------------------------------------------------------------------------
JOBS=$(nproc 2>/dev/null || echo 4)
made=0
if step make_all 150 "$OUT/make.log" "$OUT/make.log" make -j"$JOBS" all; then
	made=1
else
	step make_deps 100 "$OUT/deps.log" "$OUT/deps.log" make deps || note "make deps failed (no network?), see deps.log"
	step make_all_again 150 "$OUT/make.log" "$OUT/make.log" make -j"$JOBS" all && made=1
fi
if ((made)); then
	note "gpumem built: $GPUMEM"
elif [ -x "$GPUMEM" ]; then
	tail -5 "$OUT/make.log"
	note "WARNING: make all failed (make.log); using the build/gpumem already there, which may be stale"
else
	tail -20 "$OUT/make.log"
	note "FAIL: build/gpumem not built (make.log); the programs run untraced"
fi

# --- 3. CUDA programs -----------------------------------------------------------------------
NVCC=${NVCC:-}
if [ -z "$NVCC" ]; then
	for c in /usr/local/cuda/bin/nvcc "$(command -v nvcc 2>/dev/null)"; do
		[ -n "$c" ] && [ -x "$c" ] && NVCC=$c && break
	done
fi
ver_of() { "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p'; }
if [ -n "$NVCC" ] && [ -n "$DRV_CUDA" ]; then
	# A runtime of a newer major version than the driver's cannot run (error 35): prefer an
	# installed toolkit whose major version the driver supports.
	if [ "$(ver_of "$NVCC" | cut -d. -f1)" -gt "${DRV_CUDA%%.*}" ] 2>/dev/null; then
		best=
		for c in /usr/local/cuda-*/bin/nvcc; do
			[ -x "$c" ] || continue
			v=$(ver_of "$c")
			[ "${v%%.*}" -le "${DRV_CUDA%%.*}" ] 2>/dev/null || continue
			if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$(ver_of "$best")" "$v" | sort -V | tail -1)" = "$v" ]; then best=$c; fi
		done
		if [ -n "$best" ]; then
			note "toolkit $(ver_of "$NVCC") is newer than the driver's CUDA $DRV_CUDA: using $best ($(ver_of "$best"))"
			NVCC=$best
		else
			note "WARNING: toolkit $(ver_of "$NVCC") is newer than the driver's CUDA $DRV_CUDA and no older toolkit is installed: runtime programs may fail with error 35"
		fi
	fi
fi
mkdir -p "$BIN"
if [ -n "$NVCC" ]; then
	CUDA_DIR=$(cd "$(dirname "$NVCC")/.." && pwd)
	note "nvcc: $NVCC (CUDA $(ver_of "$NVCC"))"
	# Frame pointers and no tail calls: each named function stays a frame of its calls' stacks.
	NVFLAGS=(-O2 -g -arch=sm_90 -Xcompiler -fno-omit-frame-pointer -Xcompiler -fno-optimize-sibling-calls -Itests/gpu)
	build() { # build OUTNAME SOURCE EXTRA...
		local o=$1 s=$2
		shift 2
		rm -f "$BIN/$o"
		timeout -k 5 180 "$NVCC" "${NVFLAGS[@]}" -o "$BIN/$o" "tests/gpu/$s" "$@" >"$OUT/build_$o.log" 2>&1 ||
			echo "build of $o failed: $(tail -3 "$OUT/build_$o.log")"
	}
	echo "--- building CUDA programs into $BIN ($(($(left)))s left)"
	pids=()
	build probe probe.cu & pids+=($!)
	build alloc_static alloc.cu & pids+=($!)
	build alloc_shared alloc.cu -cudart shared -Xlinker -rpath -Xlinker "$CUDA_DIR/lib64" & pids+=($!)
	build async async.cu & pids+=($!)
	build managed managed.cu & pids+=($!)
	build oom oom.cu & pids+=($!)
	build vmm vmm.cu -L"$CUDA_DIR/lib64/stubs" -lcuda & pids+=($!)
	wait "${pids[@]}" # not a bare wait: that would also wait for the tee behind the log
else
	note "WARNING: no nvcc; using programs already in $BIN if any"
fi
ls -la "$BIN"

# Can a program of this toolkit run here? (not traced)
if [ -x "$BIN/probe" ]; then
	step probe 60 "$OUT/probe.out" "$OUT/probe.log" "$BIN/probe"
	prc=$?
	cat "$OUT/probe.out"
	if ((prc != 0)) && [ -e "${CUDA_DIR:-/nonexistent}/compat/libcuda.so.1" ]; then
		echo "probe failed; trying the forward-compatibility driver in $CUDA_DIR/compat"
		if LD_LIBRARY_PATH=$CUDA_DIR/compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 "$BIN/probe" >"$OUT/probe_compat.out" 2>&1; then
			export LD_LIBRARY_PATH=$CUDA_DIR/compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
			note "runtime programs run with LD_LIBRARY_PATH=$LD_LIBRARY_PATH (forward compatibility)"
			prc=0
		fi
	fi
	if ((prc == 0)); then
		note "probe: CUDA runtime works: $(cat "$OUT/probe.out")"
	else
		note "probe: CUDA runtime does NOT work: $(cat "$OUT/probe.out")"
	fi
fi

# --- 4. each program under snapshot and trace -------------------------------------------------
run_prog() { # run_prog NAME BINARY [ARGS...]
	local n=$1 b=$BIN/$2
	shift 2
	if [ ! -x "$b" ]; then
		note "SKIP $n: $b not built"
		return
	fi
	if [ ! -x "$GPUMEM" ]; then
		step "$n" 120 "$OUT/$n.out" "$OUT/$n.log" "$b" "$n" "$@"
		return
	fi
	rm -f "$OUT/$n.json" "$OUT/$n.trace"
	step "snapshot_$n" 120 "$OUT/$n.out" "$OUT/$n.snapshot.log" \
		"$GPUMEM" snapshot --json -o "$OUT/$n.json" -v -c "$b" "$n" "$@"
	step "trace_$n" 120 "$OUT/$n.trace.out" "$OUT/$n.trace.log" \
		"$GPUMEM" trace --json -o "$OUT/$n.trace" -c "$b" "$n" "$@"
	grep -h "^gpumem:" "$OUT/$n.snapshot.log" | grep -v "^gpumem: \(attach\|probe\)" | tail -5
	timeout 30 "$CMPPY" tests/gpu/compare.py prog "$n" "$OUT/$n.out" "$OUT/$n.json" \
		"$OUT/$n.trace" "$RESULTS"
}

run_prog alloc_static alloc_static
run_prog alloc_shared alloc_shared
run_prog vmm vmm
run_prog async async
run_prog managed managed
run_prog oom oom "$OOM_MAX"

# --- 5. PyTorch: USDT probes in the wheel, and the planted leak ---------------------------------
if command -v "$PY" >/dev/null; then
	TORCH_DIR=$(timeout 60 "$PY" -c 'import importlib.util as u, os
s = u.find_spec("torch")
print(os.path.join(list(s.submodule_search_locations)[0], "lib") if s else "")' 2>/dev/null)
else
	TORCH_DIR=
fi
if [ -n "$TORCH_DIR" ] && [ -d "$TORCH_DIR" ]; then
	echo "--- USDT probes in $TORCH_DIR"
	usdt_all=
	for lib in "$TORCH_DIR"/libc10_cuda.so "$TORCH_DIR"/libtorch_cuda.so "$TORCH_DIR"/libc10.so; do
		[ -e "$lib" ] || continue
		if ! command -v readelf >/dev/null; then
			note "USDT: readelf missing, cannot check $lib"
			continue
		fi
		p=$(timeout 60 readelf -n --wide "$lib" 2>/dev/null | awk '/Provider:/{pr=$2} /Name:/{if (pr!="") print pr":"$2; pr=""}' | sort | uniq -c | awk '{printf "%s%s(x%s)", (NR>1?" ":""), $2, $1}')
		echo "    $(basename "$lib"): ${p:-no stapsdt notes}"
		usdt_all="$usdt_all $p"
	done
	if echo "$usdt_all" | grep -q "pytorch:malloc" && echo "$usdt_all" | grep -q "pytorch:free"; then
		note "open question 3 (USDT in the torch wheel): YES - pytorch:malloc and pytorch:free present:$usdt_all"
	else
		note "open question 3 (USDT in the torch wheel): NO - no pytorch:malloc/free stapsdt notes in libc10_cuda.so/libtorch_cuda.so${usdt_all:+ (found:$usdt_all)}"
	fi
else
	note "open question 3 (USDT in the torch wheel): unknown - torch is not installed for $PY"
fi

if [ -n "$TORCH_DIR" ] && step torch_import 90 "$OUT/torch_import.out" "$OUT/torch_import.log" \
	"$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())'; then
	note "torch: $(cat "$OUT/torch_import.out")"
	if [ -x "$GPUMEM" ]; then
		step snapshot_torch_leak 150 "$OUT/torch_leak.out" "$OUT/torch_leak.snapshot.log" \
			"$GPUMEM" snapshot --json -o "$OUT/torch_leak.json" -v -c "$PY" tests/gpu/torch_leak.py "$STEPS"
		step trace_torch_leak 150 "$OUT/torch_leak.trace.out" "$OUT/torch_leak.trace.log" \
			"$GPUMEM" trace --json -o "$OUT/torch_leak.trace" -c "$PY" tests/gpu/torch_leak.py "$STEPS"
		tail -3 "$OUT/torch_leak.snapshot.log"
		timeout 30 "$CMPPY" tests/gpu/compare.py torch "$OUT/torch_leak.out" "$OUT/torch_leak.json" \
			"$OUT/torch_leak.trace" "$OUT/torch_leak.trace.out" "$RESULTS"
	else
		step torch_leak 150 "$OUT/torch_leak.out" "$OUT/torch_leak.log" "$PY" tests/gpu/torch_leak.py "$STEPS"
		cat "$OUT/torch_leak.out"
	fi
elif [ -n "$TORCH_DIR" ]; then
	note "torch does not import: $(tail -1 "$OUT/torch_import.log")"
else
	note "SKIP torch_leak: torch not installed"
fi

finish
