#!/bin/sh
# Lints man pages: `mandoc -T lint -W warning` must print nothing; without mandoc, groff's
# warnings through `man --warnings`; without either, skipped with the reason.
# Usage: tests/man_lint.sh PAGE...
set -eu

status=0
for page in "$@"; do
	if command -v mandoc >/dev/null; then
		tool="mandoc -T lint -W warning"
		out=$(mandoc -T lint -W warning "$page" 2>&1) && rc=0 || rc=$?
	elif command -v man >/dev/null && command -v groff >/dev/null; then
		tool="man --warnings"
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) && rc=0 ||
			rc=$?
	else
		echo "man-lint: skipped: neither mandoc nor man with groff is installed (apt-get install mandoc)"
		exit 0
	fi
	if [ -n "$out" ] || [ "$rc" -ne 0 ]; then
		printf '%s\n' "$out"
		echo "man-lint: FAIL: $tool has something to say about $page (exit status $rc)"
		status=1
	else
		echo "man-lint: ok: $page ($tool)"
	fi
done
exit $status
