#!/bin/sh
# Fetches AMD's real HIP runtime (libamdhip64-5, ROCm 5.2.3) with the HSA runtime and the
# kernel thunk it links from Debian main and unpacks them into build/amd/ for the tests, nothing
# installed (scripts/debs.sh). With no AMD GPU, its hipGetDeviceCount returns 100
# (hipErrorNoDevice) and its allocations 101 (hipErrorInvalidDevice): traced for real. The code
# object manager (libamd-comgr2, 13 MB, with LLVM) is loaded only for a device: not fetched.
# Usage: scripts/amd.sh [DIR]    (default build/amd)
# Exit status 0 when DIR holds the libraries; else one `gpumem: amd:` line saying why, and the
# reason in DIR/unavailable, which the tests print when they skip.
NAME=amd
DIR=${1:-build/amd}
COMPONENTS=main
# Exact versions and the SHA256 of bookworm's main Packages index.
DEBS="libamdhip64-5=5.2.3-8 e89c3757b6ca16b7a03374a0a42402ab19e9e7000251d47379838be965330ebd
libhsa-runtime64-1=5.2.3-3 9b633756945b16124376b274dbc681e4022c2b9704b8bdfa04637b09c7bfad93
libhsakmt1=5.2.3+dfsg-1 8e57a5762878b520d1e81a424b63fb592ce78167a9f7259e8ae91178a02e2e58"
. "$(dirname "$0")/debs.sh"
fetch_debs
fetched "$lib/libamdhip64.so.5" "$lib/libhsa-runtime64.so.1" "$lib/libhsakmt.so.1"
