#!/usr/bin/env node
// Offline validation of Drover's Kubernetes manifests (deploy/kubernetes).
//
//   node validate.mjs [FILE_OR_DIR ...]     default: the folder above this one
//
// Every *.yaml / *.yml file (directories: their top level only) is read as
// a multi-document YAML stream, parsed as YAML 1.1 like kubectl's parser
// (so 0440 is octal and `yes` is a boolean). Each object is checked as
// follows.
//
//  1. Schema. The object's apiVersion/kind picks the model class of the
//     npm package kubernetes-models (pinned in package-lock.json). Its
//     validator is the official Kubernetes OpenAPI schema, compiled with
//     ajv: types, required fields, enums, formats. An apiVersion/kind the
//     package does not know is an error.
//  2. Unknown fields. The OpenAPI schemas allow extra properties, but the
//     API server's strict field validation (kubectl apply's default)
//     rejects them. The validator runs on a Proxy that records which
//     properties it looks at. A property of an object the schema describes
//     that the validator never looked at is unknown. Maps such as labels or
//     resources.limits are enumerated by the validator, so their keys count
//     as looked at.
//  3. Consistency checks that the schema cannot express. Each one is a
//     mistake that the API server would reject, or that would go unnoticed
//     until a pod misbehaves:
//     - a workload's selector matches its pod template's labels;
//     - every volumeMount names a volume or a volumeClaimTemplate;
//     - every $(VAR) in a container's command, args or env values names an
//       env var of that container (Kubernetes leaves an unknown one as
//       literal text);
//     - a probe's named port is one of the container's ports;
//     - a Service's selector matches some pod template in the same files;
//     - keys used from a Secret (secretKeyRef, secret volume items, subPath
//       mounts of a secret volume) exist in that Secret, when the Secret
//       is among the files checked.
//  4. kustomization.yaml. Its resources must be files that were checked
//     here, and they must not define the same object twice.
//
// It prints one line per object ("ok  FILE#DOC apiVersion Kind ns/name")
// and one per problem ("FAIL FILE#DOC Kind/name: /json/path: message"). It
// exits with 1 if there was any problem, 2 on a usage error.
// Nothing is fetched: no cluster, no network, only node_modules (npm ci).

import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));

// ---------------------------------------------------------------- inputs

function yamlFilesOf(target) {
  const st = statSync(target);
  if (st.isFile()) return [target];
  return readdirSync(target)
    .filter((n) => /\.ya?ml$/.test(n))
    .sort()
    .map((n) => path.join(target, n));
}

const args = process.argv.slice(2);
if (args.some((a) => a.startsWith("-"))) {
  console.error("usage: node validate.mjs [FILE_OR_DIR ...]");
  process.exit(2);
}
const targets = args.length > 0 ? args : [path.resolve(here, "..")];
let files;
try {
  files = targets.flatMap(yamlFilesOf);
} catch (e) {
  console.error(`validate: ${e.message}`);
  process.exit(2);
}
if (files.length === 0) {
  console.error(`validate: no YAML files in ${targets.join(" ")}`);
  process.exit(2);
}

// Problems are kept per object (or per file, for what is not an object)
// and printed at the end, in file order.
const problems = []; // {where, label, msg}
function fail(at, msg) {
  if (typeof at === "string") {
    problems.push({ where: at, label: "", msg });
  } else {
    at.problems.push(msg);
  }
}

// Objects: {file, doc, obj, where}
const objects = [];
const kustomizations = [];
for (const file of files) {
  const fromCwd = path.relative(process.cwd(), file);
  const rel = fromCwd && !fromCwd.startsWith("..") ? fromCwd : path.resolve(file);
  let docs;
  try {
    docs = parseAllDocuments(readFileSync(file, "utf8"), { version: "1.1", prettyErrors: true });
  } catch (e) {
    fail(rel, `cannot read: ${e.message}`);
    continue;
  }
  docs = Array.from(docs); // an empty file gives an empty stream
  docs.forEach((d, i) => {
    const where = `${rel}#${i}`;
    if (d.errors.length > 0) {
      for (const e of d.errors) fail(where, `YAML: ${e.message.split("\n")[0]}`);
      return;
    }
    const obj = d.toJS({ maxAliasCount: 100 });
    if (obj === null || obj === undefined) return; // an empty document ("---" at the end)
    if (typeof obj !== "object" || Array.isArray(obj)) {
      fail(where, "a document must be a mapping (a Kubernetes object)");
      return;
    }
    if (obj.apiVersion === "kustomize.config.k8s.io/v1beta1" && obj.kind === "Kustomization") {
      kustomizations.push({ file, rel, where, obj, problems: [] });
    } else {
      objects.push({ file, rel, doc: i, where, obj, problems: [] });
    }
  });
}

// ---------------------------------------------------------------- schema

// Records, per object reached through the Proxy, the property names the
// validator read, tested or enumerated.
function tracked(root) {
  const seen = new WeakMap();
  const proxies = new WeakMap();
  const wrap = (v) => {
    if (v === null || typeof v !== "object") return v;
    if (proxies.has(v)) return proxies.get(v);
    const keys = new Set();
    seen.set(v, keys);
    const p = new Proxy(v, {
      get(t, k, r) {
        if (typeof k === "string") keys.add(k);
        return wrap(Reflect.get(t, k, r));
      },
      has(t, k) {
        if (typeof k === "string") keys.add(k);
        return Reflect.has(t, k);
      },
      ownKeys(t) {
        for (const k of Reflect.ownKeys(t)) if (typeof k === "string") keys.add(k);
        return Reflect.ownKeys(t);
      },
      getOwnPropertyDescriptor(t, k) {
        if (typeof k === "string") keys.add(k);
        return Reflect.getOwnPropertyDescriptor(t, k);
      },
    });
    proxies.set(v, p);
    return p;
  };
  return { proxy: wrap(root), seen };
}

// One JSON Pointer segment (RFC 6901): "a/b" is "a~1b".
function pointer(key) {
  return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

function unknownFields(value, seen, at = "") {
  if (value === null || typeof value !== "object") return [];
  if (Array.isArray(value)) return value.flatMap((v, i) => unknownFields(v, seen, `${at}/${i}`));
  const read = seen.get(value);
  const out = [];
  for (const k of Object.keys(value)) {
    const p = `${at}/${pointer(k)}`;
    // Objects the validator never entered (under a free-form field) are
    // not judged.
    if (read && !read.has(k)) out.push(p);
    else out.push(...unknownFields(value[k], seen, p));
  }
  return out;
}

function describeError(e) {
  const p = e.instancePath || "/";
  if (e.keyword === "enum") return `${p}: must be one of ${e.params.allowedValues.join(", ")}`;
  if (e.keyword === "required") return `${p}: missing required field "${e.params.missingProperty}"`;
  return `${p}: ${e.message || e.keyword}`;
}

const modelCache = new Map();
async function modelFor(apiVersion, kind) {
  const key = `${apiVersion} ${kind}`;
  if (modelCache.has(key)) return modelCache.get(key);
  let model = null;
  // Only names that are an API group/version and a Kind reach import().
  if (/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion) && /^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    try {
      const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
      const cls = mod[kind];
      if (cls && cls.apiVersion === apiVersion && cls.kind === kind) model = cls;
    } catch {
      model = null;
    }
  }
  modelCache.set(key, model);
  return model;
}

function nameOf(obj) {
  const m = obj.metadata || {};
  return `${m.namespace ? `${m.namespace}/` : ""}${m.name ?? "(no name)"}`;
}

for (const o of objects) {
  const { obj } = o;
  o.label = `${obj.kind ?? "(no kind)"}/${obj.metadata?.name ?? "(no name)"}`;
  if (typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
    fail(o, "no apiVersion or kind");
    continue;
  }
  const model = await modelFor(obj.apiVersion, obj.kind);
  if (!model) {
    fail(o, `unknown kind ${obj.kind} in ${obj.apiVersion} (not in the Kubernetes schemas of kubernetes-models)`);
    continue;
  }
  const { proxy, seen } = tracked(obj);
  try {
    model.prototype.validate.call(proxy);
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    for (const err of e.errors) fail(o, describeError(err));
  }
  for (const p of unknownFields(obj, seen)) fail(o, `${p}: unknown field`);
  if (!obj.metadata?.name) fail(o, "/metadata/name: missing");
  o.schemaOk = o.problems.length === 0;
}

// ---------------------------------------------------------------- consistency

const valid = objects.filter((o) => o.schemaOk);

const podSpecs = []; // {o, base, template (a PodTemplateSpec), claims}
for (const o of valid) {
  const { obj } = o;
  const spec = obj.spec || {};
  if (["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"].includes(obj.kind) && spec.template) {
    const claims = new Set((spec.volumeClaimTemplates || []).map((c) => c.metadata?.name));
    podSpecs.push({ o, base: "/spec/template/spec", template: spec.template, claims });
    const want = spec.selector?.matchLabels || {};
    const have = spec.template.metadata?.labels || {};
    for (const [k, v] of Object.entries(want)) {
      if (have[k] !== v) fail(o, `/spec/selector/matchLabels/${pointer(k)}: the pod template's labels lack ${k}: ${v}`);
    }
  } else if (obj.kind === "Pod") {
    podSpecs.push({ o, base: "/spec", template: { metadata: obj.metadata, spec }, claims: new Set() });
  }
}

const secrets = new Map(); // "namespace/name" -> its keys
for (const o of valid) {
  if (o.obj.kind !== "Secret") continue;
  const keys = new Set([...Object.keys(o.obj.data || {}), ...Object.keys(o.obj.stringData || {})]);
  secrets.set(`${o.obj.metadata.namespace ?? ""}/${o.obj.metadata.name}`, keys);
}
function checkSecretKey(o, secretName, key, p) {
  const keys = secrets.get(`${o.obj.metadata.namespace ?? ""}/${secretName}`);
  if (keys && !keys.has(key)) fail(o, `${p}: Secret ${secretName} has no key "${key}"`);
}

for (const { o, base, template, claims } of podSpecs) {
  const spec = template.spec || {};
  const volumes = new Map((spec.volumes || []).map((v) => [v.name, v]));
  (spec.volumes || []).forEach((v, vi) => {
    if (!v.secret?.secretName) return;
    (v.secret.items || []).forEach((it, ii) =>
      checkSecretKey(o, v.secret.secretName, it.key, `${base}/volumes/${vi}/secret/items/${ii}/key`));
  });
  const containers = [
    ...(spec.initContainers || []).map((c, i) => [c, `${base}/initContainers/${i}`]),
    ...(spec.containers || []).map((c, i) => [c, `${base}/containers/${i}`]),
  ];
  for (const [c, cp] of containers) {
    (c.volumeMounts || []).forEach((m, mi) => {
      const mp = `${cp}/volumeMounts/${mi}`;
      const v = volumes.get(m.name);
      if (!v && !claims.has(m.name)) {
        fail(o, `${mp}/name: no volume or volumeClaimTemplate named "${m.name}"`);
        return;
      }
      if (v?.secret?.secretName && m.subPath) {
        if (v.secret.items) {
          if (!v.secret.items.some((it) => it.path === m.subPath)) {
            fail(o, `${mp}/subPath: volume ${m.name} has no item with path "${m.subPath}"`);
          }
        } else {
          checkSecretKey(o, v.secret.secretName, m.subPath, `${mp}/subPath`);
        }
      }
    });
    // $(VAR): Kubernetes expands the container's env vars (in an env value,
    // only those defined before it) and leaves any other reference as
    // literal text. $$ escapes.
    const envNames = [];
    const refs = (text, p, known, before) => {
      if (typeof text !== "string") return;
      for (const m of text.replace(/\$\$/g, "").matchAll(/\$\(([^)]*)\)/g)) {
        if (!known.includes(m[1])) {
          fail(o, `${p}: $(${m[1]}) is not an env var of container ${c.name}${before ? " defined before it" : ""}`);
        }
      }
    };
    (c.env || []).forEach((e, ei) => {
      refs(e.value, `${cp}/env/${ei}/value`, envNames, true);
      envNames.push(e.name);
      const ref = e.valueFrom?.secretKeyRef;
      if (ref?.name && ref.key) checkSecretKey(o, ref.name, ref.key, `${cp}/env/${ei}/valueFrom/secretKeyRef/key`);
    });
    (c.command || []).forEach((a, i) => refs(a, `${cp}/command/${i}`, envNames, false));
    (c.args || []).forEach((a, i) => refs(a, `${cp}/args/${i}`, envNames, false));
    const portNames = new Set((c.ports || []).map((p) => p.name).filter(Boolean));
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      for (const how of ["httpGet", "tcpSocket"]) {
        const port = c[probe]?.[how]?.port;
        if (typeof port === "string" && !/^[0-9]+$/.test(port) && !portNames.has(port)) {
          fail(o, `${cp}/${probe}/${how}/port: container ${c.name} has no port named "${port}"`);
        }
      }
    }
  }
}

for (const o of valid) {
  if (o.obj.kind !== "Service") continue;
  const sel = o.obj.spec?.selector;
  if (!sel || Object.keys(sel).length === 0 || podSpecs.length === 0) continue;
  const ns = o.obj.metadata?.namespace;
  const matches = podSpecs.filter(({ o: w, template }) => {
    const labels = template.metadata?.labels || {};
    return w.obj.metadata?.namespace === ns && Object.entries(sel).every(([k, v]) => labels[k] === v);
  });
  if (matches.length === 0) {
    fail(o, "/spec/selector: matches no pod template in the files checked");
    continue;
  }
  (o.obj.spec.ports || []).forEach((port, i) => {
    const tp = port.targetPort;
    if (typeof tp !== "string" || /^[0-9]+$/.test(tp)) return;
    const named = matches.some(({ template }) =>
      (template.spec?.containers || []).some((c) => (c.ports || []).some((p) => p.name === tp)));
    if (!named) fail(o, `/spec/ports/${i}/targetPort: no selected pod has a port named "${tp}"`);
  });
}

// ---------------------------------------------------------------- kustomization

for (const k of kustomizations) {
  k.label = "Kustomization";
  const known = new Set(["apiVersion", "kind", "metadata", "resources", "namespace", "labels", "commonLabels", "images"]);
  for (const key of Object.keys(k.obj)) {
    if (!known.has(key)) fail(k, `/${key}: a field this check does not know (extend validate.mjs if it is meant)`);
  }
  const listed = Array.isArray(k.obj.resources) ? k.obj.resources : [];
  if (listed.length === 0) fail(k, "/resources: empty");
  const ids = new Map();
  listed.forEach((r, i) => {
    const file = path.resolve(path.dirname(k.file), String(r));
    const mine = objects.filter((o) => path.resolve(o.file) === file);
    if (mine.length === 0) {
      fail(k, `/resources/${i}: ${r} is not a file checked here (missing, or no objects in it)`);
      return;
    }
    for (const o of mine) {
      const id = `${o.obj.apiVersion} ${o.obj.kind} ${nameOf(o.obj)}`;
      if (ids.has(id)) fail(k, `/resources/${i}: ${id} is in both ${ids.get(id)} and ${r}`);
      else ids.set(id, r);
    }
  });
  k.summary = `${listed.length} files, ${ids.size} objects`;
}

// ---------------------------------------------------------------- report

let count = 0;
for (const p of problems) {
  count++;
  console.log(`FAIL ${p.where}: ${p.msg}`);
}
const all = [...objects, ...kustomizations].sort((a, b) =>
  a.rel === b.rel ? Number(a.where.split("#")[1]) - Number(b.where.split("#")[1]) : a.rel < b.rel ? -1 : 1);
for (const o of all) {
  if (o.problems.length === 0) {
    const what = o.summary ? `${o.obj.apiVersion} Kustomization (${o.summary})` : `${o.obj.apiVersion} ${o.obj.kind} ${nameOf(o.obj)}`;
    console.log(`ok   ${o.where} ${what}`);
  }
  for (const msg of o.problems) {
    count++;
    console.log(`FAIL ${o.where} ${o.label}: ${msg}`);
  }
}
console.log(`validate: ${objects.length + kustomizations.length} objects in ${files.length} files, ${count} problem${count === 1 ? "" : "s"}`);
process.exit(count > 0 ? 1 : 0);
