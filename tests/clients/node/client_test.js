#!/usr/bin/env node
// tests/clients/node/client_test.js — the packed @sandgate/client against a
// real host + gateway, the same scenario as tests/clients/test_python_client.py.
//
// Install as docs/clients.md says: `npm pack clients/node`, then a temp
// project gets the pinned @grpc/grpc-js and @grpc/proto-loader from this
// folder's package-lock.json (`npm ci`) and the tarball on top (`npm install
// <tgz>`); the client is required from there, never from clients/node.
// deploy/local/run.sh runs on ephemeral ports with its own run dir and a
// test policy (the local one with a 64 KiB file cap). Daemons are stopped
// and the temp dir removed on every exit path.
//
// Env: SANDGATE_BUILD (build dir with bin/, default <repo>/build),
//      SANDGATE_KEEP_TMP=1 keeps the temp dir.
'use strict';

const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, before, after } = require('node:test');

const here = __dirname;
const repo = path.resolve(here, '..', '..', '..');
const runSh = path.join(repo, 'deploy', 'local', 'run.sh');
const DEMO_KEY = 'sg-demo-key-0001';
const OTHER_KEY = 'sg-other-key-0002';
const DAEMON_SECRET = 'SANDGATE_TEST_DAEMON_SECRET';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sandgate-nodeclient-'));
const policy = path.join(tmp, 'policy.yaml');
fs.writeFileSync(policy, fs.readFileSync(path.join(repo, 'deploy', 'local', 'policy.yaml'), 'utf8')
  .replace('  limits:\n', '  limits:\n    file_bytes: 64KiB\n'));
// deploy/local/host.yaml for this run's driver (tests/drivers.py): its process
// template only, no gVisor pool warming beside it
const hostConfig = path.join(tmp, 'host.yaml');
fs.copyFileSync(path.join(repo, 'deploy', 'local', 'host.yaml'), hostConfig);
execFileSync('/usr/bin/python3', [path.join(repo, 'tests', 'drivers.py'), hostConfig], { timeout: 30000 });
const runEnv = {
  ...process.env, SANDGATE_HOST_CONFIG: hostConfig, SANDGATE_RUN_DIR: path.join(tmp, 'run'), SANDGATE_PORT: '0', SANDGATE_HOST_PORT: '0',
  SANDGATE_BUILD: process.env.SANDGATE_BUILD || path.join(repo, 'build'), SANDGATE_POLICY: policy,
  [DAEMON_SECRET]: 'daemon-only-value',
};
let started = false;
let sg; let addr; let demo; let other;
const extraRuns = new Set();  // env of every other daemon pair started, until stopped

function runShStop(env) {
  try {
    execFileSync(runSh, ['stop'], { env, stdio: ['ignore', 'ignore', 'inherit'], timeout: 30000 });
  } catch (e) { console.error(`run.sh stop failed: ${e.message}`); }
}

/** Another host + gateway in tmp/<name>; start() resolves the address. */
function daemons(name, env = {}) {
  const e = { ...runEnv, SANDGATE_RUN_DIR: path.join(tmp, name), ...env };
  return {
    env: e,
    start() {
      extraRuns.add(e);
      execFileSync(runSh, ['start'], { env: e, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60000 });
      return `127.0.0.1:${fs.readFileSync(path.join(e.SANDGATE_RUN_DIR, 'gateway.port'), 'utf8').trim()}`;
    },
    stop() { runShStop(e); extraRuns.delete(e); },
  };
}

function cleanup() {
  if (started) {
    started = false;
    runShStop(runEnv);
  }
  for (const e of extraRuns) runShStop(e);
  extraRuns.clear();
  if (!process.env.SANDGATE_KEEP_TMP) fs.rmSync(tmp, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => process.exit(128 + os.constants.signals[sig]));

function daemonLogs() {
  return ['host.log', 'gateway.log'].map((n) => {
    const p = path.join(tmp, 'run', n);
    return fs.existsSync(p) ? `--- ${n} (tail)\n${fs.readFileSync(p, 'utf8').slice(-4000)}` : '';
  }).join('\n');
}

function npm(args, cwd) {
  execFileSync('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline'],
    { cwd, stdio: ['ignore', 'ignore', 'inherit'], timeout: 180000 });
}

/** npm pack clients/node; a temp project with the pinned deps and the tarball. */
function installClient() {
  const proj = path.join(tmp, 'proj');
  fs.mkdirSync(proj);
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', tmp],
    { cwd: path.join(repo, 'clients', 'node'), encoding: 'utf8', timeout: 60000 }).trim().split('\n').pop();
  const tgz = path.join(tmp, out);
  assert.ok(fs.existsSync(tgz), `npm pack wrote no ${tgz}`);
  for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(here, f), path.join(proj, f));
  npm(['ci', '--ignore-scripts'], proj);
  npm(['install', '--no-save', '--ignore-scripts', tgz], proj);
  const main = require.resolve('@sandgate/client', { paths: [proj] });
  assert.ok(main.startsWith(path.join(proj, 'node_modules')), `client resolved outside the project: ${main}`);
  assert.ok(fs.existsSync(path.join(path.dirname(main), 'index.d.ts')), 'no index.d.ts in the package');
  assert.ok(fs.existsSync(path.join(path.dirname(main), 'proto', 'sandgate', 'v1', 'sandgate.proto')),
    'no proto/ in the package');
  return { sg: require(main), grpc: require(require.resolve('@grpc/grpc-js', { paths: [proj] })) };
}

let grpc;
before(() => {
  const t0 = Date.now();
  ({ sg, grpc } = installClient());
  const t1 = Date.now();
  started = true;
  try {
    execFileSync(runSh, ['start'], { env: runEnv, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60000 });
  } catch (e) {
    throw new Error(`run.sh start failed: ${e.stderr || e.message}\n${daemonLogs()}`);
  }
  addr = `127.0.0.1:${fs.readFileSync(path.join(tmp, 'run', 'gateway.port'), 'utf8').trim()}`;
  demo = new sg.Client({ addr, apiKey: DEMO_KEY });
  other = new sg.Client({ addr, apiKey: OTHER_KEY });
  console.log(`# install ${t1 - t0} ms, daemons ${Date.now() - t1} ms`);
});
after(() => { demo.close(); other.close(); });

let n = 0;
const task = (name) => `node-${name}-${process.pid}-${n++}`;
const cleanups = [];
async function sandbox(name, opts = {}) {
  const sb = await sg.Sandbox.create({ userId: 'alice', taskId: task(name), ttlSeconds: 300, client: demo, ...opts });
  cleanups.push(sb);
  return sb;
}
after(async () => { for (const sb of cleanups) await sb.kill().catch(() => {}); });

async function rejectsWith(promise, Cls, what) {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.constructor, Cls, `${what}: want ${Cls.name}, got ${e.constructor.name}: ${e.message}`);
    return e;
  }
  assert.fail(`${what}: resolved, want ${Cls.name}`);
}
const clean = (ex) => { assert.equal(ex.error, null, JSON.stringify(ex.error)); assert.ok(ex.end); assert.equal(ex.timedOut, false); };

// ---- code -----------------------------------------------------------------------

test('state persists across calls; main result', async () => {
  const sb = await sandbox('state');
  clean(await sb.runCode('x = 20', { timeout: 10 }));
  clean(await sb.runCode('import math\ny = x + 1', { timeout: 10 }));
  const ex = await sb.runCode('print(x, y)\nmath.sqrt(x * 5)', { timeout: 10 });
  clean(ex);
  assert.equal(ex.logs.stdout, '20 21\n');
  assert.equal(ex.text, '10.0');
  assert.equal(ex.results[0].isMainResult, true);
  assert.ok(ex.durationMs > 0);
});

test('results by mime type', async () => {
  const sb = await sandbox('mime');
  await sb.files.write('matplotlibrc', 'backend: Agg\n');  // the sandbox root has no /etc/matplotlibrc
  const ex = await sb.runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n'done'", { timeout: 30 });
  clean(ex);
  const by = Object.fromEntries(ex.results.map((r) => [r.mimeType, r]));
  assert.equal(by['text/plain'].text, "'done'");
  assert.equal(by['text/plain'].png, null);
  assert.deepEqual([...by['image/png'].png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.match(by['image/png'].text, /Figure/);  // a figure also has its repr, as in a notebook
  assert.equal(by['image/png'].isMainResult, false);
  assert.equal(by['text/plain'].isMainResult, true);
  const df = await sb.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2]})", { timeout: 30 });
  assert.ok(df.results[0].formats().includes('text/html'), df.results[0].formats());
  assert.match(df.results[0].html, /<table/);
  assert.deepEqual((await sb.runCode('b = 1', { timeout: 10 })).results, []);
});

test('streaming callbacks', async () => {
  const sb = await sandbox('stream');
  const seen = [];
  const ex = await sb.runCode("import sys, time\nprint('out1', flush=True)\nprint('err1', file=sys.stderr, flush=True)\n"
    + "time.sleep(0.3)\nprint('out2')\n1 / 0\n", {
    timeout: 10,
    onStdout: (s) => seen.push(['out', s, Date.now()]),
    onStderr: (s) => seen.push(['err', s, Date.now()]),
    onError: (e) => seen.push(['exc', e.name, Date.now()]),
  });
  const done = Date.now();
  assert.equal(ex.logs.stdout, 'out1\nout2\n');
  assert.equal(ex.logs.stderr, 'err1\n');
  assert.equal(seen.filter((s) => s[0] === 'out').map((s) => s[1]).join(''), 'out1\nout2\n');
  assert.deepEqual(seen.filter((s) => s[0] === 'exc').map((s) => s[1]), ['ZeroDivisionError']);
  assert.ok(seen.find((s) => s[0] === 'out')[2] < done - 200, 'stdout was not streamed');
});

test('error with traceback; the context survives', async () => {
  const sb = await sandbox('error');
  clean(await sb.runCode("kept = 'still here'", { timeout: 10 }));
  const ex = await sb.runCode("def f():\n    return {}['missing']\nf()", { timeout: 10 });
  assert.equal(ex.error.name, 'KeyError');
  assert.equal(ex.error.value, "'missing'");
  assert.match(ex.error.traceback, /Traceback \(most recent call last\)/);
  assert.match(ex.error.traceback, /in f/);
  assert.equal(ex.contextRestarted, false);
  assert.equal((await sb.runCode('kept', { timeout: 10 })).text, "'still here'");
});

test('timeout, then the next call works; an interrupt-proof loop restarts the context', async () => {
  const sb = await sandbox('timeout');
  clean(await sb.runCode('before = 7', { timeout: 10 }));
  const t0 = Date.now();
  let ex = await sb.runCode('import time\ntime.sleep(30)', { timeout: 1 });
  assert.equal(ex.timedOut, true);
  assert.equal(ex.contextRestarted, false);
  assert.ok(ex.error);
  assert.ok(Date.now() - t0 < 10000);
  assert.equal((await sb.runCode('before * 6', { timeout: 10 })).text, '42');
  ex = await sb.runCode('import time\nwhile True:\n    try:\n        time.sleep(5)\n    except KeyboardInterrupt:\n        pass\n', { timeout: 1 });
  assert.ok(ex.timedOut && ex.contextRestarted);
  assert.equal((await sb.runCode("'before' in globals()", { timeout: 10 })).text, 'False');
});

test('a callback that throws cancels the run and interrupts the code', async () => {
  const sb = await sandbox('cancel');
  clean(await sb.runCode('before = 7', { timeout: 10 }));
  await assert.rejects(sb.runCode("print('started', flush=True)\nimport time\ntime.sleep(30)\ndone = True",
    { timeout: 60, onStdout: () => { throw new RangeError('stop'); } }), RangeError);
  const t0 = Date.now();
  const ex = await sb.runCode("(before * 6, 'done' in globals())", { timeout: 40 });
  assert.equal(ex.text, '(42, False)');
  assert.ok(Date.now() - t0 < 10000, `the next call waited ${Date.now() - t0} ms: the cancel did not reach the code`);
});

test('an AbortSignal cancels runCode and commands.run', async () => {
  const sb = await sandbox('abort');
  clean(await sb.runCode('before = 7', { timeout: 10 }));
  const ac = new AbortController();
  await assert.rejects(sb.runCode("print('started', flush=True)\nimport time\ntime.sleep(30)", {
    timeout: 60, signal: ac.signal, onStdout: () => ac.abort(new Error('user gave up')),
  }), /user gave up/);
  let t0 = Date.now();
  assert.equal((await sb.runCode('before * 6', { timeout: 40 })).text, '42');
  assert.ok(Date.now() - t0 < 10000, 'abort did not interrupt the code');
  const ac2 = new AbortController();
  setTimeout(() => ac2.abort(new Error('enough')), 300);
  t0 = Date.now();
  await assert.rejects(sb.commands.run('sleep 30', { timeout: 60, signal: ac2.signal }), /enough/);
  assert.ok(Date.now() - t0 < 10000);
  await assert.rejects(sb.runCode('1', { signal: AbortSignal.abort(new Error('already')) }), /already/);
});

test('truncation', async () => {
  const sb = await sandbox('trunc');
  let ex = await sb.runCode("print('x' * 99999)", { timeout: 10, maxOutputBytes: 1000 });
  assert.equal(ex.error, null);
  assert.equal(ex.truncated, true);
  assert.equal(ex.outputBytesTotal, 100000);
  assert.ok(Buffer.byteLength(ex.logs.stdout) <= 1000);
  ex = await sb.runCode("print('small')", { timeout: 10, maxOutputBytes: 1000 });
  assert.equal(ex.truncated, false);
});

test('a code context is separate', async () => {
  const sb = await sandbox('ctx');
  const ctx = await sb.createCodeContext();
  assert.ok(ctx.contextId);
  clean(await ctx.runCode('only_here = 5', { timeout: 10 }));
  assert.equal((await sb.runCode('only_here * 2', { context: ctx, timeout: 10 })).text, '10');
  assert.equal((await sb.runCode("'only_here' in globals()", { timeout: 10 })).text, 'False');
  await rejectsWith(sb.runCode('1', { context: 'no-such-ctx' }), sg.NotFound, 'unknown context');
});

test('code contexts are listed, restarted and removed', async () => {
  const sb = await sandbox('ctxmgmt');
  const ctx = await sb.createCodeContext();
  let listed = await sb.listCodeContexts();
  assert.deepEqual(listed.map((c) => c.contextId), ['default', ctx.contextId]);
  assert.equal(listed[1].state, 'idle');
  assert.equal(listed[1].restarts, 0);
  assert.ok(listed[1].createdAt > 0);
  clean(await ctx.runCode('kept = 1', { timeout: 10 }));
  const again = await sb.restartCodeContext(ctx);
  assert.equal(again.contextId, ctx.contextId);
  assert.equal((await ctx.runCode("'kept' in globals()", { timeout: 10 })).text, 'False');
  assert.equal((await sb.listCodeContexts())[1].restarts, 1);
  await sb.removeCodeContext(ctx);
  listed = await sb.listCodeContexts();
  assert.deepEqual(listed.map((c) => c.contextId), ['default']);
  await rejectsWith(sb.runCode('1', { context: ctx }), sg.NotFound, 'deleted context');
  await rejectsWith(sb.removeCodeContext('default'), sg.FailedPrecondition, 'default context');
});

test('the environment is only what create sets', async () => {
  const sb = await sandbox('env', { env: { TASK_TOKEN: 't0k' } });
  const ex = await sb.runCode(`import os\n(os.environ.get('TASK_TOKEN'), os.environ.get('${DAEMON_SECRET}'))`, { timeout: 10 });
  assert.equal(ex.text, "('t0k', None)");
  assert.ok(!(await sb.commands.run('env', { timeout: 10 })).stdout.includes(DAEMON_SECRET));
});

// ---- commands and files ------------------------------------------------------------

test('commands.run', async () => {
  const sb = await sandbox('cmd');
  const got = [];
  let r = await sb.commands.run('echo hello; echo oops >&2; exit 3', { timeout: 10, onStdout: (s) => got.push(s) });
  assert.deepEqual([r.exitCode, r.stdout, r.stderr], [3, 'hello\n', 'oops\n']);
  assert.equal(got.join(''), 'hello\n');
  r = await sb.commands.run('sleep 30', { timeout: 1 });
  assert.equal(r.timedOut, true);
});

test('background processes and a PTY', async () => {
  const sb = await sandbox('procs');
  const p = await sb.commands.run('read line; echo got:$line; sleep 30', { background: true });
  assert.ok(p instanceof sg.Process);
  assert.deepStrictEqual((await sb.commands.list()).map((x) => x.process_id), [p.processId]);
  assert.strictEqual(await p.sendStdin('hi\n'), 0);
  const ac = new AbortController();
  let seen = '';
  await assert.rejects(p.attach((ev) => {
    if (ev.event === 'stdout') seen += Buffer.from(ev.stdout.data).toString();
    if (seen === 'got:hi\n') ac.abort(new Error('seen'));
  }, { signal: ac.signal }), /seen/);
  await p.signal('TERM');
  const info = await p.wait(20);
  assert.strictEqual(info.state, 'PROCESS_STATE_EXITED');
  assert.strictEqual(info.exit.signal, 15);
  const out = await sb.commands.connect(p.processId).output();
  assert.strictEqual(out.stdout.toString(), 'got:hi\n');
  await rejectsWith(p.sendStdin('late'), sg.FailedPrecondition, 'stdin after the exit');
  await rejectsWith(sb.commands.connect('bogus').kill(), sg.InvalidArgument, 'a bad process id');
  const t = await sb.pty.create({ rows: 10, cols: 50 });
  await t.sendStdin('stty size; exit 4\n');
  const o = await t.output();
  assert.ok(o.stdout.toString().includes('10 50'), o.stdout.toString());
  assert.strictEqual(o.exitCode, 4);
});

test('files round trip; out of the workspace; over the cap', async () => {
  const sb = await sandbox('files');
  const data = Buffer.alloc(256 * 40, 0).map((_, i) => i % 256);
  assert.equal(await sb.files.write('dir/blob.bin', data), data.length);
  assert.deepEqual(await sb.files.read('dir/blob.bin', { format: 'bytes' }), data);
  await sb.files.write('notes.txt', 'héllo');
  assert.equal(await sb.files.read('notes.txt'), 'héllo');
  const ex = await sb.runCode("open('made.txt', 'w').write('from code')\nlen(open('dir/blob.bin', 'rb').read())", { timeout: 10 });
  assert.equal(ex.text, String(data.length));
  assert.equal(await sb.files.read('made.txt'), 'from code');
  await rejectsWith(sb.files.read('does/not/exist'), sg.NotFound, 'missing file');
  await rejectsWith(sb.files.read('../../etc/passwd'), sg.InvalidArgument, 'path out of the workspace');
  const e = await rejectsWith(sb.files.write('big', Buffer.alloc(70000)), sg.QuotaExceeded, 'file over the cap');
  assert.equal(e.reason, 'QUOTA_EXCEEDED');
  assert.equal(e.rule, 'limits.file_bytes');
});

test('workspace files: streamed upload/download with resume, list/stat/mkdir/rename/remove, watch', async () => {
  const sb = await sandbox('wsfiles');
  const crypto = require('node:crypto');
  const data = crypto.randomBytes(5 * 1024 * 1024 + 77);
  const r = await sb.files.upload('up/big.bin', data);
  assert.deepEqual(r, { size: data.length, bytes_written: data.length });
  let chunks = 0;
  const back = await sb.files.download('up/big.bin', { chunkSize: 1024 * 1024, onChunk: () => { chunks++; } });
  assert.ok(back.equals(data));
  assert.equal(chunks, 6);
  assert.ok((await sb.files.download('up/big.bin', { offset: 4000000 })).equals(data.subarray(4000000)));
  // resume from an offset, the rest from an async iterable
  const cut = 3 * 1024 * 1024;
  await sb.files.upload('up/res.bin', data.subarray(0, cut));
  async function* rest() { yield data.subarray(cut, cut + 1000000); yield data.subarray(cut + 1000000); }
  const r2 = await sb.files.upload('up/res.bin', rest(), { offset: cut, size: data.length });
  assert.equal(r2.size, data.length);
  assert.ok((await sb.files.download('up/res.bin')).equals(data));
  // the rest of the file calls
  const d = await sb.files.makeDir('a/b', { parents: true });
  assert.equal(d.type, 'FILE_TYPE_DIRECTORY');
  await rejectsWith(sb.files.makeDir('a/b'), sg.AlreadyExists, 'mkdir of an existing directory');
  await sb.files.write('a/b/f.txt', 'hi');
  const ls = await sb.files.list('a', { recursive: true });
  assert.deepEqual(ls.entries.map((e) => [e.path, Number(e.size)]), [['a/b', 0], ['a/b/f.txt', 2]]);
  assert.equal(ls.truncated, false);
  assert.equal(Number((await sb.files.stat('a/b/f.txt')).size), 2);
  assert.equal((await sb.files.rename('a/b/f.txt', 'a/g.txt')).path, 'a/g.txt');
  assert.equal(await sb.files.exists('a/b/f.txt'), false);
  await rejectsWith(sb.files.remove('a'), sg.FailedPrecondition, 'remove of a non-empty directory');
  assert.equal(await sb.files.remove('a', { recursive: true }), 3);
  await rejectsWith(sb.files.list('../etc'), sg.InvalidArgument, 'list out of the workspace');
  // watch sees what the code writes and deletes
  const ac = new AbortController();
  const seen = [];
  let ready;
  const isReady = new Promise((res) => { ready = res; });
  const watching = sb.files.watch('', (ev) => {
    if (ev.type === 'FILE_EVENT_READY') { ready(); return; }
    seen.push([ev.type, ev.path]);
    if (ev.type === 'FILE_EVENT_DELETE') ac.abort(new Error('done'));
  }, { recursive: true, signal: ac.signal }).catch((e) => e);
  await isReady;
  await sb.runCode("open('w.txt', 'w').write('x')\nimport os; os.remove('w.txt')", { timeout: 10 });
  const end = await watching;
  assert.equal(end.message, 'done');
  assert.deepEqual(seen, [['FILE_EVENT_CREATE', 'w.txt'], ['FILE_EVENT_MODIFY', 'w.txt'], ['FILE_EVENT_DELETE', 'w.txt']]);
});

test('labels: metadata on create, list filtered in pages', async () => {
  const run = `r${process.pid}x${n}`;
  const made = [];
  for (let i = 0; i < 5; i++) made.push(await sandbox('labels', { metadata: { run, n: String(i), odd: String(i % 2) } }));
  assert.deepEqual(made[0].info.metadata, { run, n: '0', odd: '0' });
  assert.equal((await made[1].getInfo()).metadata.n, '1');
  const page = await sg.Sandbox.list({ userId: 'alice', metadata: { run }, pageSize: 2, client: demo });
  assert.equal(page.length, 2);
  assert.ok(page.nextPageToken);
  const all = await sg.Sandbox.listAll({ userId: 'alice', metadata: { run }, pageSize: 2, client: demo });
  assert.deepEqual(all.map((s) => s.sandboxId), made.map((s) => s.sandboxId).sort());
  const odd = await sg.Sandbox.listAll({ userId: 'alice', metadata: { run, odd: '1' }, client: demo });
  assert.deepEqual(odd.map((s) => s.metadata.n).sort(), ['1', '3']);
  await rejectsWith(sg.Sandbox.list({ userId: 'alice', pageToken: 'nope', client: demo }), sg.InvalidArgument, 'a bad page token');
});

// ---- lifecycle ----------------------------------------------------------------------

test('Sandbox.using kills in a finally, also when fn throws', async () => {
  let id;
  assert.equal(await sg.Sandbox.using({ userId: 'alice', taskId: task('using'), client: demo }, async (sb) => {
    id = sb.sandboxId;
    return (await sb.runCode('2 + 2', { timeout: 10 })).text;
  }), '4');
  await rejectsWith(sg.Sandbox.connect(id, { userId: 'alice', client: demo }), sg.SandboxNotFound, 'after using');
  await assert.rejects(sg.Sandbox.using({ userId: 'alice', taskId: task('using2'), client: demo }, async (sb) => {
    id = sb.sandboxId;
    throw new RangeError('boom');
  }), RangeError);
  await rejectsWith(sg.Sandbox.connect(id, { userId: 'alice', client: demo }), sg.SandboxNotFound, 'after a throw');
});

test('kill, then SandboxNotFound; a second kill is false', async () => {
  const sb = await sandbox('kill');
  assert.equal(await sb.kill(), true);
  await rejectsWith(sb.runCode('1', { timeout: 10 }), sg.SandboxNotFound, 'runCode after kill');
  await rejectsWith(sb.getInfo(), sg.SandboxNotFound, 'getInfo after kill');
  await rejectsWith(sb.commands.run('true'), sg.SandboxNotFound, 'commands after kill');
  assert.equal(await sb.kill(), false);
  assert.equal(await sb.isRunning(), false);
});

test('connect, list, setTimeout; same task, same sandbox', async () => {
  const sb = await sandbox('connect');
  await sb.runCode("v = 'shared'", { timeout: 10 });
  const again = await sg.Sandbox.connect(sb.sandboxId, { userId: 'alice', client: demo });
  assert.equal((await again.runCode('v', { timeout: 10 })).text, "'shared'");
  assert.equal(again.info.state, 'running');
  const before = again.info.expiresAt;
  const info = await sb.setTimeout(1200);
  assert.ok(info.expiresAt > before);
  assert.ok(Math.abs((info.expiresAt - Date.now()) / 1000 - 1200) < 30);
  const listed = await sg.Sandbox.list({ userId: 'alice', client: demo });
  assert.ok(listed.map((s) => s.sandboxId).includes(sb.sandboxId));
  assert.deepEqual(listed.unreachableHosts, []);
  assert.ok(!(await sg.Sandbox.list({ userId: 'bob', client: demo })).map((s) => s.sandboxId).includes(sb.sandboxId));
  assert.ok(!(await sg.Sandbox.list({ userId: 'alice', client: other })).map((s) => s.sandboxId).includes(sb.sandboxId));
  const same = await sg.Sandbox.create({ userId: 'alice', taskId: sb.info.taskId, client: demo });
  assert.equal(same.sandboxId, sb.sandboxId);
});

test('configuration from the environment', async () => {
  const saved = { ...process.env };
  Object.assign(process.env, { SANDGATE_ADDR: addr, SANDGATE_API_KEY: DEMO_KEY, SANDGATE_USER: 'carol' });
  try {
    const sb = await sg.Sandbox.create({ taskId: task('envconf') });  // owns its client
    assert.equal(sb.userId, 'carol');
    assert.equal(sb.info.userId, 'carol');
    assert.equal((await sb.runCode('6 * 7')).text, '42');
    assert.equal(await sb.kill(), true);
    process.env.SANDGATE_API_KEY = '';
    await assert.rejects(sg.Sandbox.create({ taskId: 'no-key' }), TypeError);
  } finally {
    for (const k of ['SANDGATE_ADDR', 'SANDGATE_API_KEY', 'SANDGATE_USER']) {
      if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k];
    }
  }
});

// ---- errors ----------------------------------------------------------------------------

test('a wrong key is Unauthenticated', async () => {
  const sb = await sandbox('badkey');
  const bad = new sg.Client({ addr, apiKey: 'sg-wrong-key-9999' });
  try {
    await rejectsWith(sg.Sandbox.create({ userId: 'alice', taskId: 'node-badkey', client: bad }), sg.Unauthenticated, 'create');
    await rejectsWith(sg.Sandbox.connect(sb.sandboxId, { userId: 'alice', client: bad }), sg.Unauthenticated, 'connect');
  } finally { bad.close(); }
  assert.equal((await sb.runCode('3', { timeout: 10 })).text, '3');
});

test("another tenant's sandbox is SandboxNotFound; another user's is PermissionDenied", async () => {
  const sb = await sandbox('owner');
  await rejectsWith(sg.Sandbox.connect(sb.sandboxId, { userId: 'alice', client: other }), sg.SandboxNotFound, 'other tenant');
  await rejectsWith(sg.Sandbox.connect(`local-${'0'.repeat(32)}`, { userId: 'alice', client: demo }), sg.SandboxNotFound, 'no such id');
  const e = await rejectsWith(sg.Sandbox.connect(sb.sandboxId, { userId: 'bob', client: demo }), sg.PermissionDenied, 'other user');
  assert.ok(!(e instanceof sg.PolicyDenied));
  assert.equal(await sb.isRunning(), true);
});

test('a policy denial carries reason and rule', async () => {
  const e = await rejectsWith(sg.Sandbox.create({ userId: 'alice', taskId: 'node-egress', egress: [['example.com', 443]], client: demo }),
    sg.PolicyDenied, 'egress');
  assert.ok(e instanceof sg.PermissionDenied && e instanceof sg.SandgateError);
  assert.equal(e.reason, 'POLICY_DENIED');
  assert.equal(e.domain, 'sandgate');
  assert.ok(e.rule);
  assert.equal(e.metadata.rule, e.rule);
  assert.ok(e.message.includes(e.rule));
});

test('bad strings are InvalidArgument naming the field', async () => {
  let e = await rejectsWith(sg.Sandbox.create({ userId: 'bad user', taskId: 'node-bad', client: demo }), sg.InvalidArgument, 'space in user_id');
  assert.match(e.details, /user_id/);
  e = await rejectsWith(sg.Sandbox.create({ userId: 'alice', taskId: 't\u0000', client: demo }), sg.InvalidArgument, 'NUL in task_id');
  assert.match(e.details, /task_id/);
});

test('a client deadline is Timeout; a dead gateway is Unavailable', async () => {
  const sb = await sandbox('deadline');
  const e = await rejectsWith(sb.runCode('import time\ntime.sleep(20)', { timeout: 20, requestTimeout: 0.5 }), sg.Timeout, 'deadline');
  assert.equal(e.retryable, false);
  assert.equal((await sb.runCode("'alive'", { timeout: 20 })).text, "'alive'");
  const down = new sg.Client({ addr: '127.0.0.1:1', apiKey: DEMO_KEY, timeout: 2 });
  try {
    const u = await rejectsWith(sg.Sandbox.list({ userId: 'alice', client: down }), sg.Unavailable, 'dead gateway');
    assert.equal(u.retryable, true);
  } finally { down.close(); }
});

test('a host restart loses the sandbox: SandboxLost for its owner', async () => {
  const d = daemons('lost', { SANDGATE_HOST_NAME: `nlost${process.pid}` });
  try {
    let a = d.start();
    let c = new sg.Client({ addr: a, apiKey: DEMO_KEY });
    const sb = await sg.Sandbox.create({ userId: 'alice', taskId: 'node-lost', client: c });
    assert.equal((await sb.runCode('1 + 1', { timeout: 10 })).text, '2');
    c.close();
    d.stop();
    a = d.start();  // new ports, same host name and journal
    c = new sg.Client({ addr: a, apiKey: DEMO_KEY });
    try {
      const e = await rejectsWith(sg.Sandbox.connect(sb.sandboxId, { userId: 'alice', client: c }), sg.SandboxLost, 'after restart');
      assert.ok(e instanceof sg.SandboxNotFound);
      assert.equal(e.reason, 'SANDBOX_LOST');
      assert.ok(e.lostAt, JSON.stringify(e.metadata));
      const bob = await sg.Sandbox.connect(sb.sandboxId, { userId: 'bob', client: c }).catch((x) => x);
      assert.ok(bob instanceof sg.SandgateError && !(bob instanceof sg.SandboxLost), `bob got ${bob}`);
    } finally { c.close(); }
  } finally { d.stop(); }
});

test('TLS: an API key over TLS, and mTLS without a key (options and environment)', async () => {
  const pki = path.join(tmp, 'pki');
  const spiffe = 'spiffe://sandgate.test/agent/node';
  fs.mkdirSync(pki);
  const ossl = (...args) => execFileSync('openssl', args, { cwd: pki, stdio: 'ignore', timeout: 60000 });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  ossl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  for (const [name, san, usage] of [['server', 'IP:127.0.0.1', 'serverAuth'], ['client', `URI:${spiffe}`, 'clientAuth']]) {
    ossl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    fs.writeFileSync(path.join(pki, `${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=${usage}\nbasicConstraints=CA:FALSE\n`);
    ossl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`);
  }
  fs.symlinkSync('ca.crt', path.join(pki, 'client_ca.crt'));
  const tlsPolicy = path.join(tmp, 'tls-policy.yaml');
  fs.writeFileSync(tlsPolicy, `${fs.readFileSync(policy, 'utf8')}  - id: spiffe\n    mtls: ["${spiffe}"]\n    templates: [code-interpreter]\n`);
  const d = daemons('tls', { SANDGATE_GATEWAY_TLS_DIR: pki, SANDGATE_POLICY: tlsPolicy });
  const saved = { ...process.env };
  try {
    const a = d.start();
    const ca = path.join(pki, 'ca.crt');
    assert.equal(await sg.Sandbox.using({ userId: 'alice', taskId: 'node-tls', addr: a, apiKey: DEMO_KEY, rootCertificates: ca },
      async (sb) => (await sb.runCode('40 + 2', { timeout: 10 })).text), '42');
    const mtls = new sg.Client({ addr: a, rootCertificates: fs.readFileSync(ca),
      clientCert: fs.readFileSync(path.join(pki, 'client.crt')), clientKey: path.join(pki, 'client.key') });
    try {
      const sb = await sg.Sandbox.create({ userId: 'm', taskId: 'node-mtls', client: mtls });
      cleanups.push(sb);
      assert.equal((await sb.runCode("'mtls'", { timeout: 10 })).text, "'mtls'");
      await rejectsWith(sg.Sandbox.connect(sb.sandboxId, { userId: 'm', addr: a, apiKey: DEMO_KEY, rootCertificates: ca }),
        sg.SandboxNotFound, "the demo tenant and the mTLS tenant's sandbox");
      Object.assign(process.env, { SANDGATE_ADDR: a, SANDGATE_CA_FILE: ca, SANDGATE_CERT_FILE: path.join(pki, 'client.crt'),
        SANDGATE_KEY_FILE: path.join(pki, 'client.key'), SANDGATE_USER: 'm', SANDGATE_API_KEY: '' });
      assert.ok((await sg.Sandbox.list()).map((s) => s.sandboxId).includes(sb.sandboxId));
      assert.equal(await sb.kill(), true);
    } finally { mtls.close(); }
    for (const k of ['SANDGATE_CA_FILE', 'SANDGATE_CERT_FILE', 'SANDGATE_KEY_FILE']) delete process.env[k];
    await rejectsWith(sg.Sandbox.list({ addr: a, apiKey: DEMO_KEY, userId: 'alice', tls: true, timeout: 5 }),
      sg.Unavailable, 'system roots do not know the test CA');
    await rejectsWith(sg.Sandbox.list({ addr: a, apiKey: DEMO_KEY, userId: 'alice', timeout: 5 }),
      sg.Unavailable, 'plaintext to a TLS port');
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
    d.stop();
  }
});

test('ErrorInfo reasons pick the class (an in-process server sends each)', async () => {
  // status.proto / errors.proto wire format by hand: RpcStatus{3: Any{1: type, 2: ErrorInfo}}.
  const lenField = (no, buf) => Buffer.concat([Buffer.from([(no << 3) | 2, buf.length]), buf]);
  const s = (t) => Buffer.from(t, 'utf8');
  const details = (reason, rule) => {
    let info = Buffer.concat([lenField(1, s(reason)), lenField(2, s('sandgate'))]);
    const entry = (k, v) => lenField(3, Buffer.concat([lenField(1, s(k)), lenField(2, s(v))]));
    if (rule) info = Buffer.concat([info, entry('rule', rule)]);
    if (reason === 'SANDBOX_LOST') info = Buffer.concat([info, entry('lost_at', '2026-12-01T10:00:00Z')]);
    const any = Buffer.concat([lenField(1, s('type.googleapis.com/google.rpc.ErrorInfo')), lenField(2, info)]);
    return lenField(3, any);
  };
  const cases = [
    ['NOT_FOUND', 'SANDBOX_LOST', '', sg.SandboxLost],
    ['UNAVAILABLE', 'SANDBOX_LOST', '', sg.SandboxLost],
    ['UNAVAILABLE', 'HOST_UNAVAILABLE', '', sg.HostUnavailable],
    ['UNAVAILABLE', '', '', sg.Unavailable],
    ['INVALID_ARGUMENT', 'INVALID_ARGUMENT', '', sg.InvalidArgument],
    ['PERMISSION_DENIED', 'POLICY_DENIED', 'tenants.demo.network[0]', sg.PolicyDenied],
    ['PERMISSION_DENIED', '', '', sg.PermissionDenied],
    ['RESOURCE_EXHAUSTED', 'QUOTA_EXCEEDED', 'quotas.sandboxes_per_user', sg.QuotaExceeded],
    ['NOT_FOUND', '', '', sg.SandboxNotFound],
    ['DEADLINE_EXCEEDED', '', '', sg.Timeout],
    ['UNAUTHENTICATED', '', '', sg.Unauthenticated],
    ['INTERNAL', '', '', sg.SandgateError],
  ];
  let now;
  const server = new grpc.Server();
  const svc = {
    GetSandbox: {
      path: '/sandgate.v1.Sandboxes/GetSandbox', requestStream: false, responseStream: false,
      requestDeserialize: (b) => b, responseSerialize: (b) => b,
    },
  };
  server.addService(svc, {
    GetSandbox: (call, cb) => {
      const md = new grpc.Metadata();
      if (now[1]) md.set('grpc-status-details-bin', details(now[1], now[2]));
      cb({ code: grpc.status[now[0]], details: now[0] === 'NOT_FOUND' ? 'no such sandbox' : 'm', metadata: md });
    },
  });
  const port = await new Promise((res, rej) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(),
    (err, p) => (err ? rej(err) : res(p))));
  const c = new sg.Client({ addr: `127.0.0.1:${port}`, apiKey: DEMO_KEY, timeout: 5 });
  try {
    for (const row of cases) {
      now = row;
      const e = await rejectsWith(sg.Sandbox.connect('local-x', { userId: 'u', client: c }), row[3], row.slice(0, 2).join('/'));
      assert.equal(e.codeName, row[0]);
      assert.equal(e.reason, row[1] || null);
      assert.equal(e.rule, row[2] || null);
      if (row[3] === sg.SandboxLost) {
        assert.ok(e instanceof sg.SandboxNotFound);
        assert.equal(e.lostAt, '2026-12-01T10:00:00Z');
      }
    }
  } finally {
    c.close();
    server.forceShutdown();
  }
});
