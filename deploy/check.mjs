// Validates Kubernetes manifests against the Kubernetes API schema, as deploy/check.sh runs it
// (from a directory holding kubernetes-models, yaml and typescript). Three passes:
//  1. schema: each object through kubernetes-models' validator, generated from the Kubernetes
//     OpenAPI spec (types, required fields, enums, formats such as quantities);
//  2. unknown fields: each object type-checked by tsc against the same models' interfaces
//     (excess-property checks), which the OpenAPI schema alone lets through;
//  3. rules the API server or kubelet enforce beyond the schema, which would otherwise only
//     fail at `kubectl apply` or on the node, and the references between objects that nothing
//     checks before a scrape comes back empty: a probe's port, the prometheus.io annotations,
//     a PodMonitor's selector and port.
// The files are checked together: an object may refer to one defined in another of them.
// Usage: node check.mjs FILE.yaml...
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";
import { Namespace, ServiceAccount } from "kubernetes-models/v1";
import { DaemonSet } from "kubernetes-models/apps/v1";
import { PodMonitor }
	from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";

const models = {
	"v1/Namespace": { cls: Namespace, module: "kubernetes-models/v1/Namespace", type: "INamespace" },
	"v1/ServiceAccount": { cls: ServiceAccount, module: "kubernetes-models/v1/ServiceAccount", type: "IServiceAccount" },
	"apps/v1/DaemonSet": { cls: DaemonSet, module: "kubernetes-models/apps/v1/DaemonSet", type: "IDaemonSet" },
	"monitoring.coreos.com/v1/PodMonitor": { cls: PodMonitor,
		module: "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor",
		type: "IPodMonitor" },
};

const errors = [];
const fail = (where, msg) => errors.push(`${where}: ${msg}`);

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
// a label or annotation key's name part, and a label's value (empty allowed)
const qualifiedName = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const capabilities = new Set(["AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND",
	"BPF", "CHECKPOINT_RESTORE", "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER",
	"FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN",
	"MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_RAW",
	"PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYSLOG", "SYS_ADMIN", "SYS_BOOT",
	"SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "WAKE_ALARM", "ALL"]);

// A port's name as the API server takes it (IANA_SVC_NAME): at most 15 characters, lowercase
// letters, digits and single inner hyphens, at least one letter.
function isPortName(name) {
	return typeof name === "string" && name.length <= 15 &&
		/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name) && !name.includes("--") && /[a-z]/.test(name);
}

function checkKeys(where, what, map, isLabel) {
	for (const [k, v] of Object.entries(map ?? {})) {
		const slash = k.lastIndexOf("/");
		const prefix = slash >= 0 ? k.slice(0, slash) : null;
		const name = k.slice(slash + 1);
		if (prefix !== null && (prefix.length > 253 || !dns1123Subdomain.test(prefix)))
			fail(where, `${what} ${k}: the prefix is not a DNS-1123 subdomain`);
		if (name.length > 63 || !qualifiedName.test(name))
			fail(where, `${what} ${k}: the name is not a qualified name (63 characters at most)`);
		if (isLabel && typeof v === "string" && v && (v.length > 63 || !qualifiedName.test(v)))
			fail(where, `${what} ${k}: the value ${v} is not a valid label value`);
	}
}

// A label selector as the API server takes it; whether it selects anything at all.
function checkSelector(where, selector) {
	for (const e of selector?.matchExpressions ?? []) {
		const values = e.values ?? [];
		if ((e.operator === "In" || e.operator === "NotIn") && !values.length)
			fail(where, `selector ${e.key} ${e.operator} needs values`);
		if ((e.operator === "Exists" || e.operator === "DoesNotExist") && values.length)
			fail(where, `selector ${e.key} ${e.operator} takes no values`);
	}
	return Object.keys(selector?.matchLabels ?? {}).length > 0 ||
		(selector?.matchExpressions ?? []).length > 0;
}

function selects(selector, labels) {
	for (const [k, v] of Object.entries(selector?.matchLabels ?? {}))
		if (labels[k] !== v)
			return false;
	for (const e of selector?.matchExpressions ?? []) {
		const has = Object.hasOwn(labels, e.key);
		const listed = has && (e.values ?? []).includes(labels[e.key]);
		if ((e.operator === "In" && !listed) || (e.operator === "NotIn" && listed) ||
		    (e.operator === "Exists" && !has) || (e.operator === "DoesNotExist" && has))
			return false;
	}
	return true;
}

// Every port the pod's containers declare: name -> number, and the numbers.
function declaredPorts(podSpec) {
	const byName = new Map();
	const numbers = new Set();
	for (const c of podSpec?.containers ?? [])
		for (const p of c.ports ?? []) {
			numbers.add(p.containerPort);
			if (p.name)
				byName.set(p.name, p.containerPort);
		}
	return { byName, numbers };
}

function checkPorts(where, c, hostNetwork, podPorts) {
	for (const p of c.ports ?? []) {
		const pw = `${where} port ${p.name ?? p.containerPort}`;
		if (!Number.isInteger(p.containerPort) || p.containerPort < 1 || p.containerPort > 65535)
			fail(pw, "containerPort must be from 1 to 65535");
		if (p.name !== undefined && !isPortName(p.name))
			fail(pw, "the name is not an IANA service name (15 characters at most, lowercase " +
			     "letters, digits and single hyphens, one letter at least)");
		if (p.name !== undefined && podPorts.names.has(p.name))
			fail(pw, `port name ${p.name} used twice in the pod`);
		if (p.name !== undefined)
			podPorts.names.add(p.name);
		const key = `${p.containerPort}/${p.protocol ?? "TCP"}`;
		if (podPorts.numbers.has(key))
			fail(pw, `${key} declared twice in the pod`);
		podPorts.numbers.add(key);
		if (hostNetwork && p.hostPort !== undefined && p.hostPort !== p.containerPort)
			fail(pw, "with hostNetwork, hostPort must equal containerPort");
	}
}

// A probe: one handler, and a port the container declares (the kubelet resolves a named port
// in the probed container's own ports; a number nobody declares is most likely a typo).
function checkProbe(where, c, kind, probe) {
	if (!probe)
		return;
	const pw = `${where} ${kind}`;
	const handlers = ["exec", "httpGet", "tcpSocket", "grpc"].filter((h) => probe[h]);
	if (handlers.length !== 1)
		fail(pw, "must have exactly one handler (exec, httpGet, tcpSocket, grpc), " +
		     `not ${handlers.length}`);
	if (kind !== "readinessProbe" && (probe.successThreshold ?? 1) !== 1)
		fail(pw, "successThreshold must be 1 for liveness and startup probes");
	const port = (probe.httpGet ?? probe.tcpSocket ?? probe.grpc)?.port;
	const ports = c.ports ?? [];
	if (typeof port === "string" && !ports.some((p) => p.name === port))
		fail(pw, `port ${port} is not the name of a port of container ${c.name}`);
	if (typeof port === "number" && !ports.some((p) => p.containerPort === port))
		fail(pw, `port ${port} is not a containerPort of container ${c.name}`);
	const path = probe.httpGet?.path;
	if (path !== undefined && !path.startsWith("/"))
		fail(pw, `httpGet.path ${path} must begin with /`);
}

// The prometheus.io annotations that annotation-based scrape configurations read.
function checkScrapeAnnotations(where, annotations, podSpec) {
	const scrape = annotations?.["prometheus.io/scrape"];
	const port = annotations?.["prometheus.io/port"];
	const path = annotations?.["prometheus.io/path"];
	if (scrape !== undefined && scrape !== "true" && scrape !== "false")
		fail(where, `prometheus.io/scrape is "${scrape}": "true" or "false"`);
	const numbers = declaredPorts(podSpec).numbers;
	if (port !== undefined && !(/^[0-9]+$/.test(port) && numbers.has(Number(port))))
		fail(where, `prometheus.io/port "${port}" is not a containerPort of the pod`);
	if (path !== undefined && !path.startsWith("/"))
		fail(where, `prometheus.io/path ${path} must begin with /`);
	if (scrape === "true" && port === undefined && numbers.size !== 1)
		fail(where, "prometheus.io/scrape without prometheus.io/port: every port would be scraped");
}

function checkPodSpec(where, podSpec, objects) {
	const volumes = new Set();
	for (const v of podSpec.volumes ?? []) {
		if (volumes.has(v.name))
			fail(where, `volume ${v.name} defined twice`);
		volumes.add(v.name);
		if (!dns1123Label.test(v.name))
			fail(where, `volume name ${v.name} is not a DNS-1123 label`);
	}
	const used = new Set();
	const names = new Set();
	const podPorts = { names: new Set(), numbers: new Set() };
	for (const c of [...(podSpec.initContainers ?? []), ...(podSpec.containers ?? [])]) {
		const cw = `${where} container ${c.name}`;
		if (names.has(c.name))
			fail(where, `container name ${c.name} used twice`);
		names.add(c.name);
		if (!dns1123Label.test(c.name))
			fail(cw, "name is not a DNS-1123 label");
		if (!c.image)
			fail(cw, "no image (the API server requires one in a pod template)");
		const paths = new Set();
		for (const m of c.volumeMounts ?? []) {
			if (!volumes.has(m.name))
				fail(cw, `volumeMount ${m.name} names no volume of the pod`);
			if (paths.has(m.mountPath))
				fail(cw, `mountPath ${m.mountPath} mounted twice`);
			paths.add(m.mountPath);
			used.add(m.name);
		}
		checkPorts(cw, c, podSpec.hostNetwork, podPorts);
		for (const kind of ["readinessProbe", "livenessProbe", "startupProbe"])
			checkProbe(cw, c, kind, c[kind]);
		const sc = c.securityContext ?? {};
		for (const cap of [...(sc.capabilities?.add ?? []), ...(sc.capabilities?.drop ?? [])])
			if (!capabilities.has(cap.replace(/^CAP_/, "")))
				fail(cw, `unknown capability ${cap}`);
		const adds = (sc.capabilities?.add ?? []).map((x) => x.replace(/^CAP_/, ""));
		// the API server rejects these combinations
		if (sc.allowPrivilegeEscalation === false && (sc.privileged || adds.includes("SYS_ADMIN")))
			fail(cw, "allowPrivilegeEscalation: false with privileged or SYS_ADMIN is rejected");
		if (sc.appArmorProfile?.type === "Localhost" && !sc.appArmorProfile.localhostProfile)
			fail(cw, "appArmorProfile Localhost needs localhostProfile");
		if (sc.seccompProfile?.type === "Localhost" && !sc.seccompProfile.localhostProfile)
			fail(cw, "seccompProfile Localhost needs localhostProfile");
	}
	for (const v of volumes)
		if (!used.has(v))
			fail(where, `volume ${v} is mounted by no container`);
	if (podSpec.serviceAccountName && !objects.some((o) => o.kind === "ServiceAccount" &&
	    o.metadata?.name === podSpec.serviceAccountName))
		fail(where, `serviceAccountName ${podSpec.serviceAccountName} is not defined in the ` +
		     "files checked");
}

function checkDaemonSet(where, obj, objects) {
	const spec = obj.spec ?? {};
	const want = spec.selector?.matchLabels ?? {};
	const have = spec.template?.metadata?.labels ?? {};
	if (!checkSelector(where, spec.selector))
		fail(where, "spec.selector selects nothing (the API server requires a non-empty selector)");
	for (const [k, v] of Object.entries(want))
		if (have[k] !== v)
			fail(where, `spec.selector ${k}=${v} does not match the template's labels`);
	if (!selects(spec.selector, have))
		fail(where, "spec.selector does not select the template's labels");
	const policy = spec.template?.spec?.restartPolicy;
	if (policy && policy !== "Always")
		fail(where, "a DaemonSet's pods must have restartPolicy Always");
	const tmd = spec.template?.metadata ?? {};
	checkKeys(`${where} pod template`, "label", tmd.labels, true);
	checkKeys(`${where} pod template`, "annotation", tmd.annotations, false);
	if (spec.template?.spec) {
		checkPodSpec(`${where} pod template`, spec.template.spec, objects);
		checkScrapeAnnotations(`${where} pod template`, tmd.annotations, spec.template.spec);
	}
}

// A PodMonitor must select pods defined here, in the namespaces it looks in, and scrape a port
// they declare at the path their annotations name: else Prometheus finds no target, silently.
function checkPodMonitor(where, obj, objects) {
	const spec = obj.spec ?? {};
	if (!checkSelector(where, spec.selector))
		fail(where, "spec.selector is empty: it selects every pod of its namespaces");
	const ns = spec.namespaceSelector;
	const looksIn = (namespace) => ns?.any === true || (ns?.matchNames?.length ?
		ns.matchNames.includes(namespace) : namespace === obj.metadata?.namespace);
	const pods = objects.filter((o) => o.kind === "DaemonSet" && looksIn(o.metadata?.namespace) &&
		selects(spec.selector, o.spec?.template?.metadata?.labels ?? {}));
	if (!pods.length) {
		fail(where, "spec.selector selects the pods of no DaemonSet in the files checked " +
		     "(in the namespaces it looks in)");
		return;
	}
	const endpoints = spec.podMetricsEndpoints ?? [];
	if (!endpoints.length)
		fail(where, "no podMetricsEndpoints: nothing is scraped");
	endpoints.forEach((e, i) => {
		const ew = `${where} podMetricsEndpoints[${i}]`;
		const path = e.path ?? "/metrics";
		if (e.port === undefined && e.portNumber === undefined)
			fail(ew, "names no port (port: a container port's name)");
		if (!path.startsWith("/"))
			fail(ew, `path ${path} must begin with /`);
		for (const ds of pods) {
			const dw = `${ew} for DaemonSet ${ds.metadata.name}`;
			const podSpec = ds.spec.template.spec;
			const annotations = ds.spec.template.metadata?.annotations ?? {};
			const { byName, numbers } = declaredPorts(podSpec);
			const number = e.port !== undefined ? byName.get(e.port) : e.portNumber;
			if (e.port !== undefined && number === undefined)
				fail(dw, `port ${e.port} is not the name of a port of its pods`);
			if (e.portNumber !== undefined && !numbers.has(e.portNumber))
				fail(dw, `portNumber ${e.portNumber} is not a containerPort of its pods`);
			// two ways to scrape the same pods: they must agree
			const aport = annotations["prometheus.io/port"];
			const apath = annotations["prometheus.io/path"];
			if (aport !== undefined && number !== undefined && Number(aport) !== number)
				fail(dw, `port ${number} differs from the pods' prometheus.io/port "${aport}"`);
			if (apath !== undefined && apath !== path)
				fail(dw, `path ${path} differs from the pods' prometheus.io/path ${apath}`);
		}
	});
}

function checkRules(where, obj, objects) {
	const md = obj.metadata ?? {};
	if (!md.name)
		fail(where, "metadata.name is required");
	else if (!(obj.kind === "Namespace" ? dns1123Label : dns1123Subdomain).test(md.name))
		fail(where, `metadata.name ${md.name} is not a valid DNS-1123 name`);
	checkKeys(where, "label", md.labels, true);
	checkKeys(where, "annotation", md.annotations, false);
	if (obj.kind !== "Namespace") {
		if (!md.namespace)
			fail(where, "namespaced object without metadata.namespace");
		else if (!objects.some((o) => o.kind === "Namespace" && o.metadata?.name === md.namespace))
			fail(where, `namespace ${md.namespace} is not defined in the files checked`);
	}
	if (obj.kind === "DaemonSet")
		checkDaemonSet(where, obj, objects);
	else if (obj.kind === "PodMonitor")
		checkPodMonitor(where, obj, objects);
}

const objects = [];
for (const file of process.argv.slice(2)) {
	const docs = parseAllDocuments(readFileSync(file, "utf8"), { uniqueKeys: true });
	docs.forEach((doc, i) => {
		const where = `${file} document ${i + 1}`;
		for (const e of [...doc.errors, ...doc.warnings])
			fail(where, `YAML: ${e.message}`);
		const obj = doc.toJS();
		if (obj !== null)
			objects.push({ where, obj });
	});
}

const ts = [];
for (const { where, obj } of objects) {
	const key = `${obj.apiVersion}/${obj.kind}`;
	const model = models[key];
	if (!model) {
		fail(where, `no schema here for ${key}: add it to check.mjs`);
		continue;
	}
	try {
		new model.cls(obj).validate();
	} catch (e) {
		fail(where, `schema: ${e.message}`);
	}
	ts.push(`import type { ${model.type} as T${ts.length} } from "${model.module}";`,
		`// ${where}`, `export const o${ts.length}: T${ts.length} = ${JSON.stringify(obj, null, 1)};`);
	checkRules(`${where} (${obj.kind} ${obj.metadata?.name})`, obj, objects.map((o) => o.obj));
}

// unknown fields: tsc's excess-property check against the models' interfaces
const dir = mkdtempSync(join(process.cwd(), ".tscheck-"));
try {
	writeFileSync(join(dir, "manifests.ts"), ts.join("\n") + "\n");
	const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
	execFileSync(process.execPath, [tsc, "--noEmit", "--strict", "--skipLibCheck",
		"--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022",
		join(dir, "manifests.ts")], { stdio: "pipe" });
} catch (e) {
	const out = `${e.stdout ?? ""}${e.stderr ?? ""}`.trim() || e.message;
	fail("unknown or mistyped fields (tsc against the Kubernetes API types)", "\n" + out);
} finally {
	rmSync(dir, { recursive: true, force: true });
}

if (errors.length) {
	for (const e of errors)
		console.error(e);
	console.error(`FAILED: ${errors.length} problem(s)`);
	process.exit(1);
}
console.log(`ok: ${objects.length} object(s) (${objects.map((o) => o.obj.kind).join(", ")}): ` +
	"schema, no unknown fields, API server rules");
