#!/bin/sh
# Tests deploy/check.sh's own rules: the manifests as they are pass, and each copy broken in one
# way fails with the message that names the break. Usage: deploy/check-test.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect NAME FILE SED-SCRIPT MESSAGE: FILE edited by SED-SCRIPT must fail with MESSAGE.
expect() {
	rm -f "$work"/*.yaml
	cp "$here"/*.yaml "$work"/
	before=$(cksum < "$work/$2")
	sed -i "$3" "$work/$2"
	if [ "$(cksum < "$work/$2")" = "$before" ]; then
		echo "FAIL $1: the edit changed nothing in $2 (fix the test)"
		failures=$((failures + 1))
		return
	fi
	if out=$("$here/check.sh" "$work"/*.yaml 2>&1); then
		echo "FAIL $1: check.sh passed"
		failures=$((failures + 1))
	elif printf '%s\n' "$out" | grep -qF -- "$4"; then
		echo "ok   $1"
	else
		echo "FAIL $1: no '$4' in:"
		printf '%s\n' "$out" | sed 's/^/    /'
		failures=$((failures + 1))
	fi
}

if "$here/check.sh" >/dev/null; then
	echo "ok   the manifests as they are"
else
	echo "FAIL the manifests as they are"
	failures=$((failures + 1))
fi
ds=gpumem-daemonset.yaml
pm=gpumem-podmonitor.yaml
expect annotation_port_is_the_container_port $ds \
	's|prometheus.io/port: "9473"|prometheus.io/port: "9474"|' \
	'prometheus.io/port "9474" is not a containerPort of the pod'
expect annotation_port_is_a_string $ds \
	's|prometheus.io/port: "9473"|prometheus.io/port: 9473|' \
	'must be string'
expect annotation_scrape_is_true_or_false $ds \
	's|prometheus.io/scrape: "true"|prometheus.io/scrape: "yes"|' \
	'prometheus.io/scrape is "yes"'
expect annotation_path_begins_with_slash $ds \
	's|prometheus.io/path: /metrics|prometheus.io/path: metrics|' \
	'prometheus.io/path metrics must begin with /'
expect probe_port_names_a_port $ds \
	'0,/port: metrics/s//port: metric/' \
	'readinessProbe: port metric is not the name of a port of container gpumem'
expect probe_port_number_is_declared $ds \
	'0,/port: metrics/s//port: 9474/' \
	'readinessProbe: port 9474 is not a containerPort of container gpumem'
expect probe_path_begins_with_slash $ds \
	's|path: /healthz|path: healthz|' \
	'httpGet.path healthz must begin with /'
expect liveness_success_threshold_is_1 $ds \
	's|failureThreshold: 5|failureThreshold: 5\n            successThreshold: 2|' \
	'successThreshold must be 1'
expect port_name_is_an_iana_name $ds \
	's|- name: metrics|- name: gpumem-metrics-port|' \
	'is not an IANA service name'
expect podmonitor_port_is_declared $pm \
	's|- port: metrics|- port: http|' \
	'port http is not the name of a port of its pods'
expect podmonitor_selects_the_daemonset $pm \
	'/matchLabels:/{n;s|name: gpumem|name: gpu|}' \
	'selects the pods of no DaemonSet'
expect podmonitor_looks_in_the_daemonsets_namespace $pm \
	's|^spec:|spec:\n  namespaceSelector:\n    matchNames: [default]|' \
	'selects the pods of no DaemonSet'
expect podmonitor_path_is_the_annotations $pm \
	's|path: /metrics|path: /metric|' \
	"path /metric differs from the pods' prometheus.io/path /metrics"
expect podmonitor_unknown_field $pm \
	's|interval: 30s|intervall: 30s|' \
	"'\"intervall\"' does not exist"
expect podmonitor_namespace_is_defined $pm \
	's|namespace: gpumem-system|namespace: monitoring|' \
	'namespace monitoring is not defined in the files checked'

if [ "$failures" -ne 0 ]; then
	echo "deploy/check-test.sh: $failures failure(s)"
	exit 1
fi
echo "deploy/check-test.sh: every rule fired"
