#!/bin/sh
# Fetches NVIDIA's real driver (libcuda1), NVML (libnvidia-ml1) and CUDA 11.8's runtime
# (libcudart11.0) from Debian non-free, checks each .deb against the SHA256 below and unpacks
# them with dpkg-deb -x into build/nvidia/ for the tests: nothing is installed on the host, and
# the host's apt state is not touched (a private sources list, lists and cache under
# build/nvidia/apt). Idempotent: a complete unpack is left as it is.
# Usage: scripts/nvidia.sh [DIR]    (default build/nvidia)
# Exit status 0 when DIR holds the libraries; else one `gpumem: nvidia:` line saying why, and
# the reason in DIR/unavailable, which the tests print when they skip.
set -u
dir=${1:-build/nvidia}
lib=usr/lib/x86_64-linux-gnu
mirror=${GPUMEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Exact versions, so that every run tests the same binaries; the SHA256 are those of
# bookworm's non-free Packages index.
debs="libcuda1=535.261.03-1 de1e9ca34164a5983b3f752e6699cf1ad924790f1a843b7d582bab6f99206e1e
libnvidia-ml1=535.261.03-1 c729da6ab729309dc3f481fe4d38f04ea03b0793154b0962b60117d2f37d082e
libcudart11.0=11.8.89~11.8.0-5~deb12u1 6c0e4052f5cb7ffcd70989110ed51af7c506ff7dc60d49900ae316ac9abaee29"
stamp=$dir/unpacked

fail() {
	mkdir -p "$dir"
	echo "$*" >"$dir/unavailable"
	echo "gpumem: nvidia: $*" >&2
	exit 1
}

[ -f "$stamp" ] && exit 0
[ "$(uname -m)" = x86_64 ] || fail "NVIDIA's Debian packages are fetched for x86_64 only"
for tool in apt-get dpkg-deb sha256sum; do
	command -v $tool >/dev/null || fail "$tool not found (Debian's apt and dpkg are needed)"
done
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f $keyring ] || fail "$keyring missing (package debian-archive-keyring)"

apt=$dir/apt
rm -rf "$dir" && mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" ||
	fail "cannot create $apt"
apt=$(cd "$apt" && pwd)
echo "deb [signed-by=$keyring] $mirror bookworm main non-free" >"$apt/sources.list"
set -- -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
	-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Debug::NoLocking=1 \
	-o APT::Sandbox::User=root -qq
# apt-get update may exit 0 having fetched nothing (a warning per index): the non-free index
# must be there.
apt-get "$@" update >"$apt/update.log" 2>&1
ls "$apt"/lists/*non-free*Packages* >/dev/null 2>&1 ||
	fail "apt-get update from $mirror fetched no non-free index:" \
		"$(grep -m1 -E '^(E|W):' "$apt/update.log")"
names=$(echo "$debs" | cut -d' ' -f1)
# shellcheck disable=SC2086 # one word a package
(cd "$apt/debs" && apt-get "$@" download $names) >"$apt/download.log" 2>&1 ||
	fail "apt-get download $(echo $names) failed: $(grep -m1 '^E:' "$apt/download.log")"
echo "$debs" | while read -r pkg sum; do
	name=${pkg%%=*}
	file=$(ls "$apt/debs/${name}"_*.deb 2>/dev/null | head -n1)
	[ -n "$file" ] || { echo "$pkg: no .deb downloaded"; exit 1; }
	got=$(sha256sum "$file" | cut -d' ' -f1)
	[ "$got" = "$sum" ] || { echo "$file: SHA256 $got, expected $sum"; exit 1; }
	dpkg-deb -x "$file" "$dir" || { echo "dpkg-deb -x $file failed"; exit 1; }
done >"$apt/verify.log" 2>&1 || fail "$(tail -n1 "$apt/verify.log")"
# What update-alternatives makes on a host with the driver installed: the sonames in the
# library directory point into nvidia/current/.
ln -sf nvidia/current/libcuda.so.1 "$dir/$lib/libcuda.so.1"
ln -sf nvidia/current/libnvidia-ml.so.1 "$dir/$lib/libnvidia-ml.so.1"
for f in libcuda.so.1 libnvidia-ml.so.1 libcudart.so.11.0; do
	[ -e "$dir/$lib/$f" ] || fail "$dir/$lib/$f missing after unpacking"
done
echo "$debs" | cut -d' ' -f1 >"$stamp"
echo "gpumem: nvidia: $(echo $names) unpacked into $dir"
