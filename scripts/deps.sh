#!/bin/sh
# Installs the Debian packages gpumem builds, tests and benchmarks with; only missing ones.
set -e
pkgs="make gcc clang llvm libclang-rt-14-dev bpftool libbpf-dev libelf-dev libdw-dev zlib1g-dev pkg-config
      libcmocka-dev python3 python3-pytest bpftrace util-linux procps binutils g++
      libncurses-dev tmux
      libmicrohttpd-dev prometheus
      mandoc
      libjson-c-dev
      nodejs npm
      golang-go
      chromium
      libsqlite3-dev
      python3-numba
      systemtap-sdt-dev"
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
