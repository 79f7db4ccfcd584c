#!/bin/sh
# Proves the real-GPU check's bundle stands alone (make gpu-bundle-check, in make test; no GPU):
# its size, its files, every library gpumem needs but glibc's found inside it by ldd with no
# LD_LIBRARY_PATH, and its run's machine part (BPF and uprobes on the bundled mock runtime) as
# root, from a copy in a folder of its own.
# Usage: tests/gpu/bundle_check.sh BUNDLE
set -eu

bundle=$1
failures=0
fail() {
	echo "gpu-bundle-check: FAIL: $*"
	failures=$((failures + 1))
}

size_kib=$(du -sk "$bundle" | cut -f1)
[ "$size_kib" -le $((60 * 1024)) ] || fail "$bundle is $((size_kib / 1024)) MiB, over 60 MiB"
for f in gpumem run.sh MANIFEST src/compare.py src/torch_check.py src/expect.h src/alloc.cu \
	src/vmm.cu src/oom.cu mock/workload mock/lib/libcudart.so.13 mock/lib/libcuda.so.1; do
	[ -s "$bundle/$f" ] || fail "$f missing"
done
[ -x "$bundle/run.sh" ] || fail "run.sh is not executable"

# Every library resolved, each from the bundle unless it is glibc's own.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -a "$bundle" "$tmp/b"
lib=$(cd "$tmp/b/lib" && pwd -P)
env -u LD_LIBRARY_PATH ldd "$tmp/b/gpumem" >"$tmp/ldd" 2>&1 || fail "ldd failed: $(cat "$tmp/ldd")"
n=0
while read -r name arrow path _; do
	[ "$arrow" = "=>" ] || continue
	case $name in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;;
	esac
	n=$((n + 1))
	case $path in
	"$lib"/*) ;;
	*) fail "$name resolves to $path, outside the bundle" ;;
	esac
done <"$tmp/ldd"
[ "$n" -gt 0 ] || fail "ldd named no library of the bundle's"
"$tmp/b/gpumem" --help >/dev/null || fail "the bundled gpumem does not start"

# The run's machine part: gpumem from the copy traces the copy's mock workload.
if [ "$(id -u)" != 0 ]; then
	echo "gpu-bundle-check: the run's machine part skipped: not root (BPF needs it)"
elif ! "$tmp/b/run.sh" --preflight "$tmp/out" >"$tmp/run.txt" 2>&1; then
	cat "$tmp/run.txt"
	fail "run.sh --preflight failed"
elif ! grep -q "^  PASS  *preflight:" "$tmp/out/summary.txt"; then
	cat "$tmp/out/summary.txt"
	fail "run.sh --preflight gave no PASS"
else
	grep "PASS  *preflight" "$tmp/out/summary.txt"
fi

if [ "$failures" -gt 0 ]; then
	echo "gpu-bundle-check: $failures failures"
	exit 1
fi
echo "gpu-bundle-check: ok: $((size_kib / 1024)) MiB, $n libraries from the bundle's lib/, the run's machine part passes"
