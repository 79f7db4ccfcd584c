#!/bin/sh
# Regenerates vmlinux/vmlinux.h from the running kernel's BTF (CO-RE makes it portable).
set -e
here=$(dirname "$0")
bpftool btf dump file "${1:-/sys/kernel/btf/vmlinux}" format c > "$here/vmlinux.h.tmp"
mv "$here/vmlinux.h.tmp" "$here/vmlinux.h"
