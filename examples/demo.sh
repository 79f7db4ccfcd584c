#!/bin/sh
# make demo: what gpumem shows, on the seed scenarios, with no GPU: the examples run on gpumem's
# mock CUDA runtime (tests/mock), which gpumem traces exactly as it traces NVIDIA's. As root.
set -eu
cd "$(dirname "$0")/.."
gpumem=build/gpumem
py=/usr/bin/python3
export GPUMEM_DEMO_LIB="$PWD/build/tests/lib"

scenario() { # scenario TITLE COMMAND...
	title=$1
	shift
	printf '\n\033[1m=== %s\033[0m\n$ gpumem %s\n' "$title" "$*" | sed "s|$py|python3|"
	"$gpumem" "$@" 2>&1 | grep -v '^gpumem: tracing:'
}

scenario "My training loop grows every step: which line keeps the memory?" \
	leaks -c "$py" examples/train_leak.py
scenario "Out of memory while the device has memory free: who holds it?" \
	oom -c "$py" examples/infer_oom.py
scenario "Which of my tensors are kept, which freed? (reserved beside allocated)" \
	snapshot -c "$py" examples/tensors.py
