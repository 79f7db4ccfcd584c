#!/bin/sh
# Fetches NVIDIA's real driver (libcuda1), NVML (libnvidia-ml1) and CUDA 11.8's runtime
# (libcudart11.0) from Debian non-free and unpacks them into build/nvidia/ for the tests,
# nothing installed (scripts/debs.sh). Idempotent.
# Usage: scripts/nvidia.sh [DIR]    (default build/nvidia)
# Exit status 0 when DIR holds the libraries; else one `gpumem: nvidia:` line saying why, and
# the reason in DIR/unavailable, which the tests print when they skip.
NAME=nvidia
DIR=${1:-build/nvidia}
COMPONENTS="main non-free"
# Exact versions, so that every run tests the same binaries; the SHA256 are those of
# bookworm's non-free Packages index.
DEBS="libcuda1=535.261.03-1 de1e9ca34164a5983b3f752e6699cf1ad924790f1a843b7d582bab6f99206e1e
libnvidia-ml1=535.261.03-1 c729da6ab729309dc3f481fe4d38f04ea03b0793154b0962b60117d2f37d082e
libcudart11.0=11.8.89~11.8.0-5~deb12u1 6c0e4052f5cb7ffcd70989110ed51af7c506ff7dc60d49900ae316ac9abaee29"
. "$(dirname "$0")/debs.sh"
fetch_debs
# What update-alternatives makes on a host with the driver installed: the sonames in the
# library directory point into nvidia/current/.
ln -sf nvidia/current/libcuda.so.1 "$DIR/$lib/libcuda.so.1"
ln -sf nvidia/current/libnvidia-ml.so.1 "$DIR/$lib/libnvidia-ml.so.1"
fetched "$lib/libcuda.so.1" "$lib/libnvidia-ml.so.1" "$lib/libcudart.so.11.0"
