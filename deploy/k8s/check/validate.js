#!/usr/bin/env node
// validate.js RENDERED.yaml OUTDIR — every object `kubectl kustomize` made,
// checked offline against the Kubernetes API schema of one named version
// (npm kubernetes-models, pinned in package-lock.json; KUBERNETES_VERSION
// below is the version its schemas were generated from):
//   - the schema itself (types, required fields, enums, formats);
//   - no unknown field: the schemas leave additionalProperties open, as the
//     API server's non-strict decoding does, so a typo ("replics") would
//     pass them and be dropped silently. Every object is handed to the
//     validator behind a proxy that records which fields it looked at; a
//     field it never read, in an object whose keys it did not enumerate
//     (a map such as labels), is not in the schema.
// Then, for the sandgate workloads, writes what the pods would see: each
// container's ConfigMap volumes as files under OUTDIR/<workload>/<mountPath>,
// a list of Secret mounts, and the container's command line, so the daemons'
// own --check-config can read the configs at the paths the manifests give.
'use strict';
const fs = require('fs');
const path = require('path');
const yaml = require('js-yaml');

const KUBERNETES_VERSION = '1.33.0';   // kubernetes-models 4.5.1

function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : [null, apiVersion];
  const mod = `kubernetes-models/${group ? group + '/' : ''}${version}/${kind}`;
  let file;
  try { file = require.resolve(mod); } catch (e) { return null; }
  const exp = require(mod);
  const name = Object.keys(exp).find((k) => k.startsWith('IoK8s'));
  let dir = path.dirname(file);
  while (!fs.existsSync(path.join(dir, '_schemas'))) dir = path.dirname(dir);
  return require(path.join(dir, '_schemas', name + '.js')).validate;
}

// Wrap obj so reads and key enumerations are recorded per object path.
function tracked(obj, at, seen) {
  if (obj === null || typeof obj !== 'object') return obj;
  const rec = { read: new Set(), enumerated: false, obj };
  seen.set(at, rec);
  const kids = new Map();
  return new Proxy(obj, {
    get(t, k, r) {
      if (typeof k !== 'string') return Reflect.get(t, k, r);
      rec.read.add(k);
      const v = Reflect.get(t, k, r);
      if (v === null || typeof v !== 'object' || !Object.prototype.hasOwnProperty.call(t, k)) return v;
      if (!kids.has(k)) kids.set(k, tracked(v, `${at}/${k}`, seen));
      return kids.get(k);
    },
    ownKeys(t) { rec.enumerated = true; return Reflect.ownKeys(t); },
    has(t, k) { if (typeof k === 'string') rec.read.add(k); return Reflect.has(t, k); },
  });
}

function check(doc) {
  const problems = [];
  const validate = modelFor(doc.apiVersion, doc.kind);
  if (!validate) return [`no schema for ${doc.apiVersion} ${doc.kind} in Kubernetes ${KUBERNETES_VERSION}`];
  const seen = new Map();
  const ok = validate(tracked(doc, '', seen));
  if (!ok)
    for (const e of validate.errors || [])
      problems.push(`${e.instancePath || '/'}: ${e.message || e.keyword} ${JSON.stringify(e.params || {})}`);
  for (const [at, rec] of seen) {
    if (rec.enumerated || Array.isArray(rec.obj)) continue;
    for (const k of Object.keys(rec.obj))
      if (!rec.read.has(k)) problems.push(`${at}/${k}: unknown field`);
  }
  return problems;
}

function podSpec(doc) {
  if (['Deployment', 'DaemonSet', 'StatefulSet'].includes(doc.kind)) return doc.spec.template.spec;
  return null;
}

function layout(docs, outdir) {
  const cms = new Map(docs.filter((d) => d.kind === 'ConfigMap').map((d) => [d.metadata.name, d]));
  for (const d of docs) {
    const ps = podSpec(d);
    if (!ps) continue;
    for (const c of ps.containers) {
      const root = path.join(outdir, `${d.metadata.name}.${c.name}`);
      const secrets = [];
      for (const m of c.volumeMounts || []) {
        const v = (ps.volumes || []).find((x) => x.name === m.name);
        const claims = (d.spec.volumeClaimTemplates || []).map((t) => t.metadata.name);
        if (!v && claims.includes(m.name)) continue;
        if (!v) throw new Error(`${d.kind}/${d.metadata.name}: volumeMount ${m.name} has no volume`);
        if (v.configMap) {
          const cm = cms.get(v.configMap.name);
          if (!cm) throw new Error(`${d.kind}/${d.metadata.name}: ConfigMap ${v.configMap.name} is not in the output`);
          const dir = path.join(root, m.mountPath);
          fs.mkdirSync(dir, { recursive: true });
          for (const [k, val] of Object.entries(cm.data || {})) fs.writeFileSync(path.join(dir, k), val);
        } else if (v.secret) {
          secrets.push(`${m.mountPath} ${v.secret.secretName}`);
        }
      }
      fs.mkdirSync(root, { recursive: true });
      fs.writeFileSync(path.join(root, 'secrets'), secrets.map((s) => s + '\n').join(''));
      fs.writeFileSync(path.join(root, 'argv'), [...(c.command || []), ...(c.args || [])].map((s) => s + '\n').join(''));
      fs.writeFileSync(path.join(root, 'image'), c.image + '\n');
    }
  }
}

const [file, outdir] = process.argv.slice(2);
const docs = yaml.loadAll(fs.readFileSync(file, 'utf8')).filter((d) => d);
let bad = 0;
for (const d of docs) {
  const what = `${d.kind}/${d.metadata && d.metadata.name}`;
  for (const p of check(d)) { console.log(`${what}: ${p}`); bad++; }
}
if (outdir) layout(docs, outdir);
console.log(`${path.basename(file, '.yaml')}: ${docs.length} objects against Kubernetes ${KUBERNETES_VERSION}: ${bad ? bad + ' problem(s)' : 'valid'}`);
process.exit(bad ? 1 : 0);
