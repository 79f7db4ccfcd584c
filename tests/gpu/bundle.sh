#!/bin/sh
# Packs the real-GPU check into one folder that runs on a bare GPU machine (NVIDIA's driver,
# nvcc, PyTorch; no package registry, no libbpf, no clang): `make gpu-bundle` calls it.
#
#   tests/gpu/bundle.sh GPUMEM MOCKDIR OUT
#
# GPUMEM: gpumem linked with an RPATH of $ORIGIN/lib; MOCKDIR: build/tests (the mock runtime
# and driver and the workload, for the run's first finding: can BPF and uprobes work here).
# OUT gets gpumem, lib/ (every shared library it needs but glibc's own, found by ldd here),
# mock/, src/ (the CUDA programs, the PyTorch scripts, compare.py), run.sh and MANIFEST.
set -eu

gpumem=$1 mockdir=$2 out=$3
src=$(dirname "$0")
max_mib=60

# glibc's own: every machine has them, and a copy of another glibc would not load there.
is_glibc() {
	case $(basename "$1") in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*.so.* | \
		libresolv.so.* | libutil.so.* | linux-vdso.so.*) return 0 ;;
	esac
	return 1
}

rm -rf "$out"
mkdir -p "$out/lib" "$out/mock/lib" "$out/src"
cp "$gpumem" "$out/gpumem"

# Every library ldd names, but glibc's; the RPATH ($ORIGIN/lib, DT_RPATH) is searched for the
# libraries they need in turn too, so one flat lib/ serves the whole tree.
ldd "$gpumem" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
	is_glibc "$lib" && continue
	cp -L "$lib" "$out/lib/$(basename "$lib")"
done
if ldd "$gpumem" | grep -q "not found"; then
	echo "gpu-bundle: $gpumem has libraries ldd cannot find here:" >&2
	ldd "$gpumem" | grep "not found" >&2
	exit 1
fi

# The mock runtime and driver and one workload: the run's first finding (BPF loads, uprobes
# fire, the bytes add up) needs no GPU. The workload's RUNPATH is $ORIGIN/lib.
cp "$mockdir/workload" "$out/mock/"
cp -L "$mockdir/lib/libcudart.so.13" "$mockdir/lib/libcuda.so.1" "$out/mock/lib/"

cp "$src"/*.cu "$src"/expect.h "$src"/compare.py "$src"/torch_check.py "$out/src/"
cp "$src/run.sh" "$out/run.sh"
chmod +x "$out/run.sh" "$out/src/compare.py" "$out/src/torch_check.py"

# The newest glibc symbol version anything in the bundle needs: the run compares it with the
# machine's before it starts gpumem.
glibc_min=$(for f in "$out/gpumem" "$out"/lib/* "$out"/mock/workload "$out"/mock/lib/*; do
	objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' || true
done | sed 's/GLIBC_//' | sort -uV | tail -1)
root=$(cd "$src/../.." && pwd)
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || rev="$rev+dirty"
{
	echo "gpumem $rev"
	echo "built $(date -u +%FT%TZ) on $(uname -m) $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
	echo "glibc_min $glibc_min"
	echo "files:"
	(cd "$out" && find . -type f ! -name MANIFEST | sort | xargs stat -c '  %s %n')
} >"$out/MANIFEST"

size_kib=$(du -sk "$out" | cut -f1)
if [ "$size_kib" -gt $((max_mib * 1024)) ]; then
	echo "gpu-bundle: $out is $((size_kib / 1024)) MiB, over the $max_mib MiB limit" >&2
	exit 1
fi
echo "gpu-bundle: $out ($((size_kib / 1024)).$(((size_kib % 1024) * 10 / 1024)) MiB, $(ls "$out/lib" | wc -l) libraries, needs glibc $glibc_min or later)"
