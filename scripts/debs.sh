#!/bin/sh
# Fetches pinned Debian 12 packages and unpacks them for the tests, nothing installed: the
# packages of bookworm's COMPONENTS named in DEBS ("package=version sha256" lines) are
# downloaded through a private sources list (lists and cache under DIR/apt: the host's apt
# state is not touched), each checked against its SHA256 (those of the Packages index) and
# unpacked with dpkg-deb -x into DIR. Sourced by scripts/nvidia.sh and scripts/amd.sh, which
# set NAME (the fetch's name in messages), DIR, COMPONENTS and DEBS, call fetch_debs, then
# check their files and call fetched.
# A complete unpack (DIR/unpacked) is left as it is; a fetch that fails leaves one
# `gpumem: NAME:` line saying why, and the reason in DIR/unavailable, which the tests print
# when they skip.
set -u
mirror=${GPUMEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
lib=usr/lib/x86_64-linux-gnu

fail() {
	mkdir -p "$DIR"
	echo "$*" >"$DIR/unavailable"
	echo "gpumem: $NAME: $*" >&2
	exit 1
}

fetch_debs() {
	[ -f "$DIR/unpacked" ] && exit 0
	[ "$(uname -m)" = x86_64 ] || fail "the Debian packages are fetched for x86_64 only"
	for tool in apt-get dpkg-deb sha256sum; do
		command -v $tool >/dev/null || fail "$tool not found (Debian's apt and dpkg are needed)"
	done
	keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	[ -f $keyring ] || fail "$keyring missing (package debian-archive-keyring)"
	apt=$DIR/apt
	rm -rf "$DIR" && mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" ||
		fail "cannot create $apt"
	apt=$(cd "$apt" && pwd)
	echo "deb [signed-by=$keyring] $mirror bookworm $COMPONENTS" >"$apt/sources.list"
	set -- -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Debug::NoLocking=1 \
		-o APT::Sandbox::User=root -qq
	# apt-get update may exit 0 having fetched nothing (a warning per index): each
	# component's index must be there.
	apt-get "$@" update >"$apt/update.log" 2>&1
	for c in $COMPONENTS; do
		ls "$apt"/lists/*_"$c"_*Packages* >/dev/null 2>&1 ||
			fail "apt-get update from $mirror fetched no $c index:" \
				"$(grep -m1 -E '^(E|W):' "$apt/update.log")"
	done
	names=$(echo "$DEBS" | cut -d' ' -f1)
	# shellcheck disable=SC2086 # one word a package
	(cd "$apt/debs" && apt-get "$@" download $names) >"$apt/download.log" 2>&1 ||
		fail "apt-get download $(echo $names) failed: $(grep -m1 '^E:' "$apt/download.log")"
	echo "$DEBS" | while read -r pkg sum; do
		name=${pkg%%=*}
		file=$(ls "$apt/debs/${name}"_*.deb 2>/dev/null | head -n1)
		[ -n "$file" ] || { echo "$pkg: no .deb downloaded"; exit 1; }
		got=$(sha256sum "$file" | cut -d' ' -f1)
		[ "$got" = "$sum" ] || { echo "$file: SHA256 $got, expected $sum"; exit 1; }
		dpkg-deb -x "$file" "$DIR" || { echo "dpkg-deb -x $file failed"; exit 1; }
	done >"$apt/verify.log" 2>&1 || fail "$(tail -n1 "$apt/verify.log")"
}

# Each of the files (relative to DIR) must be there; then the unpack is complete.
fetched() {
	for f in "$@"; do
		[ -e "$DIR/$f" ] || fail "$DIR/$f missing after unpacking"
	done
	echo "$DEBS" | cut -d' ' -f1 >"$DIR/unpacked"
	echo "gpumem: $NAME: $(echo "$DEBS" | cut -d' ' -f1 | tr '\n' ' ')unpacked into $DIR"
}
