#!/bin/sh
# Installs the Debian packages gpumem builds, tests and benchmarks with; only missing ones.
# Usage: scripts/deps.sh [build]    (build: only what building and running gpumem needs)
set -e
build_pkgs="make gcc clang llvm bpftool libbpf-dev libelf-dev libdw-dev zlib1g-dev pkg-config
      libncurses-dev libmicrohttpd-dev libjson-c-dev libsqlite3-dev"
# The tests' and benchmarks' own: real consumers of the outputs, test programs, tools.
test_pkgs="libclang-rt-14-dev libcmocka-dev python3 python3-pytest bpftrace util-linux procps
      binutils g++ tmux dwz strace
      prometheus
      mandoc
      nodejs npm
      golang-go
      chromium
      python3-numba
      systemtap-sdt-dev"
pkgs="$build_pkgs"
[ "${1:-}" = build ] || pkgs="$build_pkgs $test_pkgs"
missing=""
for p in $pkgs; do
	# Node.js and npm from elsewhere (NodeSource, nvm) will do: only the commands are used.
	case $p in
	nodejs) command -v node >/dev/null && continue ;;
	npm) command -v npm >/dev/null && continue ;;
	esac
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "gpumem: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "gpumem: installing$missing"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
