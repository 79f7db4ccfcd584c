#!/bin/bash
# gpumem's real-GPU check, run from its bundle (`make gpu-bundle` writes build/gpu-bundle/, which
# a bare GPU machine runs alone: NVIDIA's driver, nvcc and PyTorch are all it needs), as root:
#
#   build/gpu-bundle/run.sh [--preflight] [OUTDIR]      (OUTDIR default: the bundle's out/)
#   tests/gpu/run.sh ...                                 (a checkout: make gpu-bundle, then that)
#
# First what the machine offers (kernel, BTF, glibc, BPF and uprobes on the bundle's mock
# runtime, driver, CUDA, GPUs, PyTorch): a machine that cannot run gpumem gives that finding and
# stops. Then the CUDA programs of src/ (built here with nvcc) under `gpumem snapshot` and
# `gpumem trace`, PyTorch's training loop against the agent with three allocator settings, the
# seed scenario under `gpumem leaks`, the context overhead, and the cost on a training loop.
# Each check is one line of OUTDIR/summary.txt: PASS, DIFF (both numbers), SKIP (why), INFO
# (a measurement), FAIL (the check could not run). Every step has a timeout; the whole run
# stays within GPU_TEST_BUDGET seconds (default 420). Exit status 0 when nothing is DIFF or
# FAIL. OUTDIR.tgz (beside OUTDIR) holds every output but the built programs, for a machine
# that gives back a few files only.
#
# --preflight: the machine's part only (make test runs it on the bundle: no GPU needed).
# Environment: GPU_TEST_FORCE=1 (no GPU: a dry run, the CUDA calls fail and PyTorch's part runs
# on the mock runtime, labelled MOCK), GPU_TEST_BUDGET, NVCC, PYTHON (default python3),
# GPU_TEST_OOM_MAX (1 GiB chunks the failing program may take, default 400).
set -u

B=$(cd "$(dirname "$0")" && pwd)
if [ ! -e "$B/MANIFEST" ]; then # a checkout's tests/gpu: the bundle first
	make -C "$B/../.." --no-print-directory gpu-bundle >&2 || {
		echo "gpumem GPU check: make gpu-bundle failed" >&2
		exit 1
	}
	exec "$B/../../build/gpu-bundle/run.sh" "$@"
fi

PREFLIGHT_ONLY=0
if [ "${1:-}" = --preflight ]; then
	PREFLIGHT_ONLY=1
	shift
fi
OUT=${1:-$B/out}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
GPUMEM=$B/gpumem
SRC=$B/src
BIN=$OUT/bin
RESULTS=$OUT/results.jsonl
SUMMARY=$OUT/summary.txt
BUDGET=${GPU_TEST_BUDGET:-420}
OOM_MAX=${GPU_TEST_OOM_MAX:-400}
PY=${PYTHON:-python3}
FORCE=${GPU_TEST_FORCE:-0}
export GPU_TEST_FORCE=$FORCE # compare.py: a dry run's failed CUDA calls are expected
PIN=/sys/fs/bpf/gpumem-gpucheck
PORT=19473
START=$SECONDS
MACHINE=()
AGENT_PID=

rm -rf "$RESULTS" "$SUMMARY" "$BIN"
exec > >(tee "$OUT/run.log") 2>&1
TEE_PID=$!

fact() { MACHINE+=("$*"); echo ">>> $*"; }
left() { echo $((BUDGET - (SECONDS - START))); }
verdict() { "$PY" "$SRC/compare.py" note "$1" "$2" "$3" "$RESULTS"; }

# step NAME TIMEOUT OUTFILE CMD...: CMD with stdout and stderr in OUTFILE, its timeout cut to what
# is left of the budget. Returns CMD's status (124: timed out; 125: no time left).
step() {
	local name=$1 t=$2 out=$3 lim rc
	shift 3
	lim=$(($(left) - 30))
	if ((lim < 10)); then
		verdict SKIP "$name" "out of the time budget (${BUDGET}s)"
		return 125
	fi
	((t > lim)) && t=$lim
	echo "--- $name (timeout ${t}s, $(left)s left): $*"
	timeout -k 5 "$t" "$@" >"$out" 2>&1
	rc=$?
	((rc == 124 || rc == 137)) && verdict FAIL "$name" "timed out after ${t}s ($out)"
	return $rc
}

stop_agent() {
	if [ -n "$AGENT_PID" ]; then
		kill -TERM "$AGENT_PID" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$AGENT_PID" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$AGENT_PID" 2>/dev/null
		wait "$AGENT_PID" 2>/dev/null
		AGENT_PID=
	fi
	timeout 30 "$GPUMEM" serve --reset --pin-dir "$PIN" >/dev/null 2>&1
}

finish() {
	stop_agent
	{
		echo "================ gpumem GPU check ================"
		[ "$FORCE" = 1 ] && echo "DRY RUN (GPU_TEST_FORCE=1): no GPU; PyTorch's part ran on the mock runtime"
		echo "bundle: $(head -1 "$B/MANIFEST")  date $(date -u +%FT%TZ)  elapsed $((SECONDS - START))s"
		echo "machine:"
		local m
		for m in "${MACHINE[@]}"; do echo "  $m"; done
		echo "checks:"
		[ -s "$RESULTS" ] && "$PY" "$SRC/compare.py" summary "$RESULTS" | sed 's/^/  /'
		echo "outputs: $OUT (run.log; NAME.out, NAME.json, NAME.trace per check), all but bin/ in $OUT.tgz"
		echo "=================================================="
	} | tee "$SUMMARY"
	tar czf "$OUT.tgz" --exclude=bin -C "$(dirname "$OUT")" "$(basename "$OUT")" 2>/dev/null
	exec >&- 2>&-
	wait "$TEE_PID" 2>/dev/null
	grep -q '^  \(DIFF\|FAIL\)' "$SUMMARY" && exit 1
	exit "${1:-0}"
}
trap 'finish 130' INT TERM

echo "gpumem GPU check: bundle $B, output in $OUT, budget ${BUDGET}s"

# --- 1. what the machine offers ---------------------------------------------------------------
command -v "$PY" >/dev/null || PY=python3
if ! command -v "$PY" >/dev/null; then
	echo "gpumem GPU check: no python3 here; it reads every result" >&2
	exit 1
fi
fact "kernel $(uname -r) $(uname -m); BTF $([ -r /sys/kernel/btf/vmlinux ] && echo yes || echo 'NO (/sys/kernel/btf/vmlinux missing)'); lockdown $(cat /sys/kernel/security/lockdown 2>/dev/null || echo n/a); $([ "$(id -u)" = 0 ] && echo root || echo "NOT root (uid $(id -u))")"
need=$(sed -n 's/^glibc_min //p' "$B/MANIFEST")
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
fact "glibc ${have:-?} (the bundle needs $need or later); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
missing=$(ldd "$GPUMEM" 2>&1 | grep "not found")
if [ -n "$missing" ] || [ "$(printf '%s\n%s\n' "$need" "${have:-0}" | sort -V | head -1)" != "$need" ]; then
	verdict FAIL "bundle" "gpumem cannot start here: glibc ${have:-?} < $need or a library is missing: $(echo $missing)"
	finish
fi
grep -q " /sys/fs/bpf bpf" /proc/mounts || mount -t bpf bpf /sys/fs/bpf 2>/dev/null
fact "bpffs $(grep -q " /sys/fs/bpf bpf" /proc/mounts && echo "/sys/fs/bpf" || echo "NOT mounted (serve will fail)")"

# BPF and uprobes, on the mock runtime: no GPU, no CUDA, the bundle alone.
stop_agent
step preflight 60 "$OUT/preflight.log" "$GPUMEM" snapshot --json --no-agent \
	-o "$OUT/preflight.json" -c "$B/mock/workload" leak 4 4096
"$PY" "$SRC/compare.py" preflight "$OUT/preflight.log" "$OUT/preflight.json" "$RESULTS"
if ! grep -q '"verdict": "PASS", "name": "preflight"' "$RESULTS"; then
	fact "gpumem cannot trace here: $(grep '^gpumem:' "$OUT/preflight.log" | grep -v 'tracing:' | tail -2 | tr '\n' ' ')"
	finish
fi
((PREFLIGHT_ONLY)) && finish

DRV_CUDA=
if command -v nvidia-smi >/dev/null && timeout 60 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1; then
	DRV_CUDA=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$OUT/nvidia-smi.txt" | head -1)
	fact "driver $(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), CUDA ${DRV_CUDA:-?} (driver)"
	while IFS= read -r g; do fact "GPU $g"; done < <(timeout 30 nvidia-smi \
		--query-gpu=index,name,memory.total,memory.used,mig.mode.current,compute_mode \
		--format=csv,noheader)
	others=$(timeout 30 nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader)
	[ -n "$others" ] && fact "other processes on the GPU (numbers may be off): $(echo $others)"
elif [ "$FORCE" = 1 ]; then
	fact "no GPU (nvidia-smi $(command -v nvidia-smi >/dev/null && echo failed || echo absent)): a dry run, GPU_TEST_FORCE=1"
else
	fact "no GPU: nvidia-smi $(command -v nvidia-smi >/dev/null && echo failed || echo 'not found'), /dev/nvidia0 $([ -e /dev/nvidia0 ] && echo present || echo absent); GPU_TEST_FORCE=1 for a dry run"
	finish
fi
NVCC=${NVCC:-}
for c in "$NVCC" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc; do
	[ -n "$c" ] && [ -x "$c" ] && NVCC=$c && break
done
nvcc_ver() { "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p'; }
[ -n "$NVCC" ] && fact "nvcc $NVCC (CUDA $(nvcc_ver "$NVCC"))" || fact "nvcc: not found"
TORCH=$(timeout 120 "$PY" -c 'import sys, torch
print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())' 2>"$OUT/torch_import.log")
if [ -n "$TORCH" ]; then
	set -- $TORCH
	fact "python $1; PyTorch $2 (CUDA $3), cuda available $4, $5 devices"
	[ "$4" = True ] || TORCH=
else
	fact "python $("$PY" -c 'import sys; print(sys.version.split()[0])'); PyTorch: $(tail -1 "$OUT/torch_import.log")"
fi
C10=$([ -n "$TORCH" ] && "$PY" -c 'import importlib.util as u, os
print(os.path.join(list(u.find_spec("torch").submodule_search_locations)[0], "lib", "libc10_cuda.so"))' 2>/dev/null)
if [ -n "$C10" ] && [ -e "$C10" ] && ! command -v readelf >/dev/null; then
	fact "USDT notes in $C10: unknown (no readelf here)"
elif [ -n "$C10" ] && [ -e "$C10" ]; then
	readelf -n --wide "$C10" >"$OUT/libc10_cuda.notes" 2>&1
	usdt=$(awk '/Provider:/ {p = $2} /Name:/ && p != "" {print p ":" $2; p = ""}' "$OUT/libc10_cuda.notes" | sort | uniq -c | awk '{printf "%s%s(x%s)", NR > 1 ? " " : "", $2, $1}')
	fact "USDT notes in $C10: ${usdt:-none} (readelf -n: libc10_cuda.notes)"
fi

# --- 2. the CUDA programs ---------------------------------------------------------------------
mkdir -p "$BIN"
if [ -n "$NVCC" ]; then
	CUDA_DIR=$(cd "$(dirname "$NVCC")/.." && pwd)
	# Frame pointers and no tail calls: each named function stays a frame of its calls' stacks.
	# -arch=native asks the device; a dry run has none, so it builds for the H200's sm_90.
	ARCH=native
	[ -z "$DRV_CUDA" ] && ARCH=sm_90
	NVFLAGS=(-O2 -g -arch=$ARCH -Xcompiler -fno-omit-frame-pointer
		-Xcompiler -fno-optimize-sibling-calls -I"$SRC")
	build() { # build OUTNAME SOURCE EXTRA...
		local o=$1 s=$2
		shift 2
		timeout -k 5 240 "$NVCC" "${NVFLAGS[@]}" -o "$BIN/$o" "$SRC/$s" "$@" >"$OUT/build_$o.log" 2>&1 ||
			echo "build of $o failed: $(tail -3 "$OUT/build_$o.log")"
	}
	echo "--- building the CUDA programs into $BIN ($(left)s left)"
	pids=()
	build alloc_static alloc.cu & pids+=($!)
	build alloc_shared alloc.cu -cudart shared -Xlinker -rpath -Xlinker "$CUDA_DIR/lib64" & pids+=($!)
	build async async.cu & pids+=($!)
	build managed managed.cu & pids+=($!)
	build oom oom.cu & pids+=($!)
	build vmm vmm.cu -L"$CUDA_DIR/lib64/stubs" -lcuda & pids+=($!)
	wait "${pids[@]}" # not a bare wait: that would wait for the tee too
fi

run_prog() { # run_prog NAME BINARY [ARGS...]
	local n=$1 b=$BIN/$2
	shift 2
	if [ ! -x "$b" ]; then
		verdict SKIP "$n" "not built ($([ -n "$NVCC" ] && echo "build_$(basename "$b").log" || echo "no nvcc"))"
		return
	fi
	# gpumem's report goes to NAME.json; the program's own lines, to NAME.out with gpumem's
	# messages (compare.py reads the lines that are JSON).
	step "$n: snapshot" 120 "$OUT/$n.out" "$GPUMEM" snapshot --json --no-agent \
		-o "$OUT/$n.json" -c "$b" "$n" "$@"
	step "$n: trace" 120 "$OUT/$n.trace.log" "$GPUMEM" trace --json -o "$OUT/$n.trace" \
		-c "$b" "$n" "$@"
	"$PY" "$SRC/compare.py" prog "$n" "$OUT/$n.out" "$OUT/$n.json" "$OUT/$n.trace" "$RESULTS"
}
run_prog alloc_static alloc_static
run_prog alloc_shared alloc_shared
run_prog managed managed
run_prog async async
run_prog vmm vmm
run_prog oom oom "$OOM_MAX"

# --- 3. PyTorch -------------------------------------------------------------------------------
TC=("$PY" "$SRC/torch_check.py")
if [ -z "$TORCH" ] && [ "$FORCE" = 1 ]; then
	TC+=(--mock "$B/mock/lib/libcudart.so.13")
elif [ -z "$TORCH" ]; then
	for c in "torch default" "torch expandable_segments" "torch cudaMallocAsync" "seed" "cost"; do
		verdict SKIP "$c" "PyTorch with CUDA is not usable here (torch_import.log)"
	done
	finish
fi

# The seed scenario under `gpumem leaks`, its own probes.
step "seed" 90 "$OUT/seed.log" "$GPUMEM" leaks --json --no-agent -o "$OUT/seed.leaks.json" \
	-c "${TC[@]}" seed --seconds 12
"$PY" "$SRC/compare.py" seed "$OUT/seed.log" "$OUT/seed.leaks.json" "$RESULTS"

# start_agent [OPTIONS]: `gpumem serve` in the background, back when its probes are on.
start_agent() {
	local from
	stop_agent
	from=$(($(cat "$OUT/agent.log" 2>/dev/null | wc -l) + 1))
	"$GPUMEM" serve --pin-dir "$PIN" --listen "127.0.0.1:$PORT" "$@" >>"$OUT/agent.log" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 100); do
		tail -n +"$from" "$OUT/agent.log" | grep -q "gpumem: tracing:" && return 0
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.2
	done
	verdict FAIL "agent" "gpumem serve $* did not start: $(tail -n +"$from" "$OUT/agent.log" | tail -2 | tr '\n' ' ')"
	stop_agent
	return 1
}

# The training loop: gpumem's numbers read from the agent at each checkpoint.
if start_agent; then
	GPUMEM_QUERY=$(printf '%q ' "$GPUMEM" snapshot --json --pin-dir "$PIN" -d 0.01)
	export GPUMEM_QUERY
	# The first process to map PyTorch's CUDA libraries after the agent started: the agent
	# attaches them as they are mapped, and what the process allocates before that is missed.
	for mode in first_contact default expandable_segments cudaMallocAsync; do
		conf=
		[ "$mode" = expandable_segments ] && conf=expandable_segments:True
		[ "$mode" = cudaMallocAsync ] && conf=backend:cudaMallocAsync
		steps=5
		[ "$mode" = first_contact ] && steps=1
		# Only this run's setting: none the machine's environment may hold.
		step "torch $mode" 120 "$OUT/loop_$mode.out" env -u PYTORCH_ALLOC_CONF \
			-u PYTORCH_CUDA_ALLOC_CONF ${conf:+PYTORCH_CUDA_ALLOC_CONF=$conf} \
			"${TC[@]}" loop --steps $steps ||
			verdict FAIL "torch $mode" "the loop exited with status $? (loop_$mode.out)"
		"$PY" "$SRC/compare.py" loop "$mode" "$OUT/loop_$mode.out" "$RESULTS"
	done
	unset GPUMEM_QUERY
fi

# Cost: steps per second untraced, under the agent, under the agent without tensor probes;
# two rounds, interleaved, when the budget allows.
pairs=()
for round in 1 2; do
	((round == 2 && $(left) < 150)) && break
	for cfg in untraced serve serve_no_tensors; do
		case $cfg in
		untraced) stop_agent ;;
		serve) start_agent || continue ;;
		serve_no_tensors) start_agent --no-tensors || continue ;;
		esac
		step "cost $cfg" 60 "$OUT/cost_${cfg}_$round.out" "${TC[@]}" cost --seconds 6 &&
			pairs+=("$cfg=$OUT/cost_${cfg}_$round.out")
	done
done
stop_agent
"$PY" "$SRC/compare.py" cost "$RESULTS" "${pairs[@]}"
finish
