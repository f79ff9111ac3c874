#!/usr/bin/env node
// tests/clients/node/client_test.js — the sandgate gateway from Node, with
// @grpc/grpc-js and proto/ loaded at runtime by @grpc/proto-loader (no
// generated code). Installs the pinned packages (package-lock.json here) with
// `npm ci` into $SANDGATE_NODE_DEPS (default: the test's temp dir), starts
// deploy/local/run.sh on ephemeral ports with its own run dir, then: create a
// sandbox, run code twice with persistent state, read the result, check
// UNAUTHENTICATED for a bad key, kill, and check NOT_FOUND after the kill.
// The daemons are stopped and the temp dir removed on every exit path.
//
// Env: SANDGATE_BUILD (build dir with bin/, default <repo>/build),
//      SANDGATE_NODE_DEPS (where node_modules goes; reused while the lock matches).
'use strict';

const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const here = __dirname;
const repo = path.resolve(here, '..', '..', '..');
const runSh = path.join(repo, 'deploy', 'local', 'run.sh');
const DEMO_KEY = 'sg-demo-key-0001';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-nodeclient-'));
const runEnv = {
  ...process.env,
  SANDGATE_RUN_DIR: path.join(tmp, 'run'),
  SANDGATE_PORT: '0',
  SANDGATE_HOST_PORT: '0',
  SANDGATE_BUILD: process.env.SANDGATE_BUILD || path.join(repo, 'build'),
};
let started = false;

// ---- cleanup on every exit path -------------------------------------------

function cleanup() {
  if (started) {
    started = false;
    try {
      execFileSync(runSh, ['stop'], { env: runEnv, stdio: ['ignore', 'ignore', 'inherit'], timeout: 30000 });
    } catch (e) {
      console.error(`run.sh stop failed: ${e.message}`);
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => process.exit(128 + os.constants.signals[sig]));

function daemonLogs() {
  return ['host.log', 'gateway.log'].map((n) => {
    const p = path.join(tmp, 'run', n);
    return fs.existsSync(p) ? `--- ${n} (tail)\n${fs.readFileSync(p, 'utf8').slice(-4000)}` : '';
  }).join('\n');
}

// ---- dependencies -----------------------------------------------------------

function installDeps() {
  const dir = process.env.SANDGATE_NODE_DEPS || path.join(tmp, 'deps');
  const lock = fs.readFileSync(path.join(here, 'package-lock.json'), 'utf8');
  const stamp = path.join(dir, '.installed-lock.json');
  const fresh = fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === lock &&
      fs.existsSync(path.join(dir, 'node_modules', '@grpc', 'grpc-js'));
  if (!fresh) {
    fs.mkdirSync(dir, { recursive: true });
    fs.rmSync(stamp, { force: true });
    fs.copyFileSync(path.join(here, 'package.json'), path.join(dir, 'package.json'));
    fs.writeFileSync(path.join(dir, 'package-lock.json'), lock);
    execFileSync('npm', ['ci', '--prefix', dir, '--ignore-scripts', '--no-audit', '--no-fund'],
        { stdio: ['ignore', 'ignore', 'inherit'], timeout: 120000 });
    fs.writeFileSync(stamp, lock);
  }
  const req = (name) => require(path.join(dir, 'node_modules', name));
  return { grpc: req('@grpc/grpc-js'), protoLoader: req('@grpc/proto-loader') };
}

// ---- small promise wrappers over the generic client ------------------------

function makeClient(grpc, protoLoader, addr) {
  const def = protoLoader.loadSync('sandgate/v1/sandgate.proto', {
    includeDirs: [path.join(repo, 'proto')],
    keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def);
  return new pkg.sandgate.v1.Sandboxes(addr, grpc.credentials.createInsecure());
}

function auth(grpc, key) {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${key}`);
  return md;
}

const deadline = (s) => new Date(Date.now() + s * 1000);

function unary(client, method, req, md) {
  return new Promise((resolve, reject) => {
    client[method](req, md, { deadline: deadline(30) }, (err, resp) => (err ? reject(err) : resolve(resp)));
  });
}

// RunCode: collect the event stream into {stdout, stderr, results, error, end}.
function runCode(client, req, md) {
  return new Promise((resolve, reject) => {
    const out = { stdout: '', stderr: '', results: [], error: null, end: null };
    const call = client.RunCode(req, md, { deadline: deadline(60) });
    call.on('data', (ev) => {
      switch (ev.event) {
        case 'stdout': out.stdout += ev.stdout.data.toString('utf8'); break;
        case 'stderr': out.stderr += ev.stderr.data.toString('utf8'); break;
        case 'result': out.results.push({ mime: ev.result.mime_type, data: ev.result.data }); break;
        case 'error': out.error = ev.error; break;
        case 'end': out.end = ev.end; break;
        default: break;
      }
    });
    call.on('error', reject);
    call.on('end', () => resolve(out));
  });
}

async function expectCode(grpc, promise, code, what) {
  await assert.rejects(promise, (err) => {
    assert.equal(err.code, code,
        `${what}: want ${grpc.status[code]}, got ${grpc.status[err.code]} (${err.details})`);
    return true;
  });
}

// ---- the scenario -------------------------------------------------------------

async function main() {
  const t0 = Date.now();
  const { grpc, protoLoader } = installDeps();
  const tDeps = Date.now();

  started = true;   // from here on, stop even if start fails halfway
  try {
    execFileSync(runSh, ['start'], { env: runEnv, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60000 });
  } catch (e) {
    throw new Error(`run.sh start failed: ${e.stderr || e.message}\n${daemonLogs()}`);
  }
  const addr = `127.0.0.1:${fs.readFileSync(path.join(tmp, 'run', 'gateway.port'), 'utf8').trim()}`;
  const client = makeClient(grpc, protoLoader, addr);
  const md = auth(grpc, DEMO_KEY);
  const user = 'node-user';

  const sb = await unary(client, 'CreateSandbox',
      { template: 'code-interpreter', user_id: user, task_id: 'node-task', ttl_seconds: 300 }, md);
  assert.ok(sb.sandbox_id, 'CreateSandbox returned no sandbox_id');
  assert.equal(sb.state, 'SANDBOX_STATE_RUNNING');
  assert.equal(sb.user_id, user);
  let killed = false;
  try {
    const ref = { sandbox_id: sb.sandbox_id, user_id: user };

    // State persists from one RunCode to the next; the final expression is the result.
    const r1 = await runCode(client, { ...ref, code: "x = 40\nprint('set x')", timeout_seconds: 10 }, md);
    assert.equal(r1.error, null, `first run failed: ${JSON.stringify(r1.error)}`);
    assert.equal(r1.stdout, 'set x\n');
    assert.deepEqual(r1.results, []);
    assert.ok(r1.end, 'no end event');

    const r2 = await runCode(client, { ...ref, code: 'x + 2', timeout_seconds: 10 }, md);
    assert.equal(r2.error, null, `second run failed: ${JSON.stringify(r2.error)}`);
    assert.equal(r2.results.length, 1);
    assert.equal(r2.results[0].mime, 'text/plain');
    assert.equal(r2.results[0].data.toString('utf8'), '42');
    assert.equal(r2.end.truncated, false);

    // A wrong key: UNAUTHENTICATED, on create and on a call to this sandbox.
    const bad = auth(grpc, 'sg-wrong-key-9999');
    await expectCode(grpc, unary(client, 'CreateSandbox',
        { template: 'code-interpreter', user_id: user, task_id: 'node-bad' }, bad),
    grpc.status.UNAUTHENTICATED, 'CreateSandbox with a bad key');
    await expectCode(grpc, runCode(client, { ...ref, code: 'x' }, bad),
        grpc.status.UNAUTHENTICATED, 'RunCode with a bad key');

    // Kill; the sandbox is gone afterwards.
    await unary(client, 'KillSandbox', ref, md);
    killed = true;
    await expectCode(grpc, runCode(client, { ...ref, code: 'x' }, md),
        grpc.status.NOT_FOUND, 'RunCode after kill');
    await expectCode(grpc, unary(client, 'GetSandbox', ref, md),
        grpc.status.NOT_FOUND, 'GetSandbox after kill');
  } finally {
    if (!killed) {
      await unary(client, 'KillSandbox', { sandbox_id: sb.sandbox_id, user_id: user }, md)
          .catch((e) => console.error(`cleanup kill: ${e.message}`));
    }
    client.close();
  }
  const t1 = Date.now();
  console.log(`node client test: OK (deps ${tDeps - t0} ms, scenario ${t1 - tDeps} ms)`);
}

main().then(() => process.exit(0), (err) => {
  console.error(`node client test: FAIL\n${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
