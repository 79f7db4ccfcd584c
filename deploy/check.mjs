// Validates Kubernetes manifests against the Kubernetes API schema, as deploy/check.sh runs it
// (from a directory holding kubernetes-models, yaml and typescript). Three passes:
//  1. schema: each object through kubernetes-models' validator, generated from the Kubernetes
//     OpenAPI spec (types, required fields, enums, formats such as quantities);
//  2. unknown fields: each object type-checked by tsc against the same models' interfaces
//     (excess-property checks), which the OpenAPI schema alone lets through;
//  3. rules the API server or kubelet enforce beyond the schema, which would otherwise only
//     fail at `kubectl apply` or on the node.
// Usage: node check.mjs FILE.yaml...
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";
import { Namespace, ServiceAccount } from "kubernetes-models/v1";
import { DaemonSet } from "kubernetes-models/apps/v1";

const models = {
	"v1/Namespace": { cls: Namespace, module: "kubernetes-models/v1/Namespace", type: "INamespace" },
	"v1/ServiceAccount": { cls: ServiceAccount, module: "kubernetes-models/v1/ServiceAccount", type: "IServiceAccount" },
	"apps/v1/DaemonSet": { cls: DaemonSet, module: "kubernetes-models/apps/v1/DaemonSet", type: "IDaemonSet" },
};

const errors = [];
const fail = (where, msg) => errors.push(`${where}: ${msg}`);

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const capabilities = new Set(["AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND",
	"BPF", "CHECKPOINT_RESTORE", "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER",
	"FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN",
	"MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_RAW",
	"PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYSLOG", "SYS_ADMIN", "SYS_BOOT",
	"SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "WAKE_ALARM", "ALL"]);

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
	for (const c of [...(podSpec.initContainers ?? []), ...podSpec.containers]) {
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
		fail(where, `serviceAccountName ${podSpec.serviceAccountName} is not defined in this file`);
}

function checkRules(where, obj, objects) {
	const md = obj.metadata ?? {};
	if (!md.name)
		fail(where, "metadata.name is required");
	else if (!(obj.kind === "Namespace" ? dns1123Label : dns1123Subdomain).test(md.name))
		fail(where, `metadata.name ${md.name} is not a valid DNS-1123 name`);
	if (obj.kind !== "Namespace") {
		if (!md.namespace)
			fail(where, "namespaced object without metadata.namespace");
		else if (!objects.some((o) => o.kind === "Namespace" && o.metadata?.name === md.namespace))
			fail(where, `namespace ${md.namespace} is not defined in this file`);
	}
	if (obj.kind !== "DaemonSet")
		return;
	const spec = obj.spec;
	const want = spec.selector?.matchLabels ?? {};
	const have = spec.template?.metadata?.labels ?? {};
	if (!Object.keys(want).length && !(spec.selector?.matchExpressions ?? []).length)
		fail(where, "spec.selector selects nothing (the API server requires a non-empty selector)");
	for (const [k, v] of Object.entries(want))
		if (have[k] !== v)
			fail(where, `spec.selector ${k}=${v} does not match the template's labels`);
	const policy = spec.template?.spec?.restartPolicy;
	if (policy && policy !== "Always")
		fail(where, "a DaemonSet's pods must have restartPolicy Always");
	if (spec.template?.spec)
		checkPodSpec(`${where} pod template`, spec.template.spec, objects);
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
