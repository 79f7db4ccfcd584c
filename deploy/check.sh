#!/bin/sh
# Validates deploy/*.yaml against the Kubernetes API schema, with no cluster: deploy/check.mjs
# runs the kubernetes-models validators (generated from the Kubernetes OpenAPI spec, and from
# the prometheus-operator's CRDs for the PodMonitor), a tsc type-check against the same models
# for unknown fields, the API server's rules that the schema does not carry, and the references
# between the objects (probe ports, prometheus.io annotations, the PodMonitor's selector and
# port). The npm packages, pinned, go to a cache directory on first use.
# Usage: deploy/check.sh [FILE.yaml...]     (default: every deploy/*.yaml, checked together)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUMEM_DEPLOY_CHECK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpumem/deploy-check}
# @kubernetes-models/prometheus-operator: the PodMonitor (monitoring.coreos.com/v1) schema and types
pkgs="kubernetes-models@5.1.0 yaml@2.9.1 typescript@5.9.3"
pkgs="$pkgs @kubernetes-models/prometheus-operator@6.0.0"

for tool in node npm; do
	if ! command -v "$tool" >/dev/null; then
		echo "deploy/check.sh: $tool not found (apt-get install nodejs npm)" >&2
		exit 2
	fi
done

if [ "$(cat "$cache/.installed" 2>/dev/null)" != "$pkgs" ]; then
	mkdir -p "$cache"
	echo "deploy/check.sh: installing $pkgs into $cache" >&2
	# shellcheck disable=SC2086 # $pkgs is a list of package@version words
	(cd "$cache" && { [ -f package.json ] || echo '{"private":true}' > package.json; } &&
		npm install --no-audit --no-fund --silent $pkgs) >&2
	echo "$pkgs" > "$cache/.installed"
fi

if [ $# -eq 0 ]; then
	set -- "$here"/*.yaml
fi
# check.mjs resolves its packages from its own directory: run a copy there
cp "$here/check.mjs" "$cache/check.mjs"
# absolute paths, since node runs in the cache directory
for f in "$@"; do
	shift
	set -- "$@" "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"
done
cd "$cache"
exec node check.mjs "$@"
