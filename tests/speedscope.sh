#!/bin/sh
# Installs speedscope (pinned) from npm into a cache directory on first use, as
# deploy/check.sh does its packages, and prints the directory of its built web app
# (dist/release: index.html and its scripts), which tests/integration/test_export.py serves
# to headless Chromium to load a folded export the way a user would.
# Usage: tests/speedscope.sh      (GPUMEM_SPEEDSCOPE_DIR: the cache, default
#                                   ~/.cache/gpumem/speedscope)
set -eu

cache=${GPUMEM_SPEEDSCOPE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpumem/speedscope}
pkgs="speedscope@1.25.0"

if ! command -v npm >/dev/null; then
	echo "tests/speedscope.sh: npm not found (apt-get install nodejs npm)" >&2
	exit 2
fi
if [ "$(cat "$cache/.installed" 2>/dev/null)" != "$pkgs" ]; then
	mkdir -p "$cache"
	echo "tests/speedscope.sh: installing $pkgs into $cache" >&2
	# shellcheck disable=SC2086 # $pkgs is a list of package@version words
	(cd "$cache" && { [ -f package.json ] || echo '{"private":true}' > package.json; } &&
		npm install --no-audit --no-fund --silent $pkgs) >&2
	echo "$pkgs" > "$cache/.installed"
fi
release="$cache/node_modules/speedscope/dist/release"
if [ ! -f "$release/index.html" ]; then
	echo "tests/speedscope.sh: $release/index.html is missing after the install" >&2
	exit 1
fi
echo "$release"
