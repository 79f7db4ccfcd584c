#!/bin/sh
# check_prologues.sh LIB...: fails, naming each one, when an exported function of LIB does not
# begin with `push %rbp; mov %rsp,%rbp` as NVIDIA's libraries do (an entry instruction the
# kernel must single-step makes a uprobe ~3x dearer, so the mocks must not differ there).
# check_prologues.sh --stubs PATTERN LIB...: the stub-shaped mock driver (tests/mock/cuda_stubs.S)
# instead: the exports that do not begin with push %rbp must begin with PATTERN (a shell
# pattern over "first ; second" instruction), and there must be some.
set -eu

stubs=""
if [ "${1:-}" = "--stubs" ] && [ $# -ge 2 ]; then
	stubs=$2
	shift 2
fi
if [ $# -eq 0 ]; then
	echo "usage: $0 [--stubs PATTERN] LIB..." >&2
	exit 2
fi

status=0
for lib in "$@"; do
	if [ ! -f "$lib" ]; then
		echo "check_prologues: $lib: no such file" >&2
		status=1
		continue
	fi
	# "name first-instruction ; second-instruction" for every function label in the file.
	entries=$(objdump -d --no-show-raw-insn "$lib" | awk '
		/^[0-9a-f]+ <[^>]+>:$/ {
			name = $2; sub(/^</, "", name); sub(/>:$/, "", name); sub(/@.*/, "", name)
			n = 0; next
		}
		name != "" && n < 2 && /^ +[0-9a-f]+:\t/ {
			split($0, part, "\t"); insn[n++] = part[2]
			if (n == 2) { gsub(/ +/, " ", insn[0]); gsub(/ +/, " ", insn[1])
				print name "\t" insn[0] " ; " insn[1]; name = "" }
		}')
	exports=$(objdump -T "$lib" | awk '/ DF \.text/ { print $NF }' | sort -u)
	if [ -z "$exports" ]; then
		echo "check_prologues: $lib: exports no functions" >&2
		status=1
		continue
	fi
	checked=0
	stubbed=0
	lib_status=0
	for func in $exports; do
		prologue=$(printf '%s\n' "$entries" | awk -F'\t' -v f="$func" '$1 == f { print $2; exit }')
		checked=$((checked + 1))
		if [ -n "$stubs" ] && [ -n "$prologue" ]; then
			# shellcheck disable=SC2254 # the pattern is the point
			case "$prologue" in
			$stubs)
				stubbed=$((stubbed + 1))
				continue
				;;
			esac
		fi
		case "$prologue" in
		"push %rbp ; mov %rsp,%rbp")
			;;
		"")
			echo "check_prologues: $lib: $func: not found in the disassembly" \
				"(aliased to another function?)" >&2
			lib_status=1
			;;
		*)
			echo "check_prologues: $lib: $func begins with '$prologue'," \
				"not 'push %rbp ; mov %rsp,%rbp'" >&2
			lib_status=1
			;;
		esac
	done
	if [ -n "$stubs" ] && [ $stubbed -eq 0 ]; then
		echo "check_prologues: $lib: no exported function begins '$stubs'" >&2
		lib_status=1
	fi
	if [ $lib_status -eq 0 ] && [ -n "$stubs" ]; then
		echo "check_prologues: $lib: $stubbed exported functions begin '$stubs'," \
			"the other $((checked - stubbed)) with push %rbp"
	elif [ $lib_status -eq 0 ]; then
		echo "check_prologues: $lib: all $checked exported functions begin with push %rbp"
	else
		status=1
	fi
done
exit $status
