#!/bin/sh
# Tests make install and make uninstall, writing nothing outside a temporary directory: into a
# DESTDIR (as a package build does) with the default PREFIX, then into a PREFIX of its own, where
# systemd-analyze can verify the unit against the binary and man page it names.
# Usage: tests/install_check.sh     (make install-check: MAKE and BUILD come from make)
set -eu

make=${MAKE:-make}
build=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# make_in DESTDIR PREFIX TARGET: every directory spelled out, and none of the flags of the make
# that runs this test (make -n, make install-check SBINDIR=...), so that the files go where
# this test says and nowhere else.
make_in() {
	env -u MAKEFLAGS -u MFLAGS "$make" --no-print-directory "$3" BUILD="$build" \
		DESTDIR="$1" PREFIX="$2" SBINDIR="$2/sbin" SYSTEMDUNITDIR="$2/lib/systemd/system" \
		MANDIR="$2/share/man" >/dev/null
}

fail() {
	echo "install-check: FAIL: $*"
	failures=$((failures + 1))
}

# check_installed ROOT PREFIX: what make install put under ROOT for a gpumem in PREFIX.
check_installed() {
	bin=$1$2/sbin/gpumem
	unit=$1$2/lib/systemd/system/gpumem.service
	page=$1$2/share/man/man8/gpumem.8
	for f in "$bin:755" "$unit:644" "$page:644"; do
		path=${f%:*}
		if [ ! -f "$path" ]; then
			fail "$path was not installed"
		elif [ "$(stat -c %a "$path")" != "${f##*:}" ]; then
			fail "$path has mode $(stat -c %a "$path"), not ${f##*:}"
		fi
	done
	cmp -s "$bin" "$build/gpumem" || fail "$bin is not $build/gpumem"
	cmp -s "$page" docs/gpumem.8 || fail "$page is not docs/gpumem.8"
	grep -qxF "ExecStart=$2/sbin/gpumem serve \$GPUMEM_ARGS" "$unit" ||
		fail "$unit: ExecStart does not run $2/sbin/gpumem serve: $(grep '^ExecStart=' "$unit")"
	if grep -n '@[A-Z_]*@' "$unit"; then
		fail "$unit: a placeholder was left"
	fi
	"$bin" --help >/dev/null || fail "the installed $bin --help failed"
	tests/man_lint.sh "$page" || fail "the installed page does not lint"
}

# check_uninstalled ROOT: make uninstall left no file behind.
check_uninstalled() {
	left=$(find "$1" -type f)
	[ -z "$left" ] || fail "make uninstall left: $left"
}

# 1. DESTDIR, the default PREFIX: every file under DESTDIR/usr/local, and only those three.
dest=$tmp/dest
make_in "$dest" /usr/local install
check_installed "$dest" /usr/local
n=$(find "$dest" -type f | wc -l)
[ "$n" -eq 3 ] || fail "make install wrote $n files under DESTDIR, not 3: $(find "$dest" -type f)"
make_in "$dest" /usr/local uninstall
check_uninstalled "$dest"

# 2. A PREFIX of its own, no DESTDIR: the unit names a binary that exists, for systemd-analyze.
prefix=$tmp/prefix
make_in "" "$prefix" install
check_installed "" "$prefix"
if command -v systemd-analyze >/dev/null; then
	# Documentation=man:gpumem(8) is looked up with man: the page just installed
	if out=$(MANPATH=$prefix/share/man systemd-analyze verify \
		 "$prefix/lib/systemd/system/gpumem.service" 2>&1) && [ -z "$out" ]; then
		echo "install-check: ok: systemd-analyze verify"
	else
		fail "systemd-analyze verify: $out"
	fi
else
	echo "install-check: systemd-analyze verify skipped: systemd-analyze not installed"
fi
make_in "" "$prefix" uninstall
check_uninstalled "$prefix"

if [ "$failures" -ne 0 ]; then
	echo "install-check: $failures failure(s)"
	exit 1
fi
echo "install-check: ok: make install and uninstall, DESTDIR and PREFIX"
