/* context.js — one persistent JavaScript (Node) context in a sandbox.
 *
 * Owns: the Node side of a `javascript` context: the frame loop on the
 * context socket (fd 3; PROTOCOL.md section 4: 'a'/'A' activation, 'c'/'R'
 * code in; 'o' 'e' 'b' 'r' 'f' 'x' 'd' out), running a cell, its console,
 * its result and its error. Starting the process (which fds, which flags, how
 * this file gets in when the sandbox cannot see it) is jscontext.py's.
 *
 * A cell runs through the V8 inspector's Runtime.evaluate in REPL mode, the
 * mode a browser console uses: top-level `await`, top-level let/const/class
 * that persist into later cells (and may be declared again), and the last
 * expression's value as the completion value. The in-process inspector
 * session speaks to this isolate only; no port is opened. The evaluation is
 * called from inside a vm script with `breakOnSigint`, so the host's SIGINT
 * (a timeout) terminates synchronous code (`while(true){}`); a cell waiting
 * on a promise is interrupted by the SIGINT listener instead (the promise is
 * abandoned, not cancelled). Code that blocks the thread where neither can
 * reach it is killed by the host after its grace period and restarted.
 *
 * Between runs the thread blocks reading fd 3, so the event loop is paused:
 * timers and callbacks a cell left behind run during the next run (output
 * outside a run would break the channel). No npm dependencies: Node's own
 * modules only. */
'use strict';

const fs = require('fs');
const util = require('util');
const vm = require('vm');
const inspector = require('inspector');
const { Console } = require('console');
const { Writable } = require('stream');

const CTX_FD = 3;
const FRAME_MAX = 65536;
const PAYLOAD_MAX = FRAME_MAX - 1;
const NAME_MAX = 256;
const VALUE_MAX = 8 * 1024;
const TB_MAX = 48 * 1024;
const REPR_MAX = 32 << 20;

/* ---- frames ---- */

const sleeper = new Int32Array(new SharedArrayBuffer(4));

function writeAll(buf) {
  for (;;) {
    try {
      if (fs.writeSync(CTX_FD, buf) !== buf.length) process.reallyExit(1);
      return;
    } catch (e) {
      if (e.code === 'EAGAIN') { Atomics.wait(sleeper, 0, 0, 1); continue; }
      if (e.code === 'EINTR') continue;
      process.reallyExit(1);   // the host is gone
    }
  }
}

function sendFrame(type, payload) {
  const p = payload === undefined ? Buffer.alloc(0)
    : Buffer.isBuffer(payload) ? payload : Buffer.from(String(payload), 'utf8');
  const b = Buffer.allocUnsafe(p.length + 1);
  b[0] = type.charCodeAt(0);
  p.copy(b, 1);
  writeAll(b);
}

/* Text split at UTF-8 character boundaries, so each frame is valid alone. */
function sendText(type, s) {
  const data = Buffer.from(s, 'utf8');
  let off = 0;
  while (off < data.length) {
    let end = Math.min(off + PAYLOAD_MAX, data.length);
    if (end < data.length)
      while (end > off && (data[end] & 0xc0) === 0x80) end--;
    sendFrame(type, data.subarray(off, end));
    off = end;
  }
}

let running = false;   // frames only inside a run; outside one they break the channel

function readFrame() {
  const buf = Buffer.allocUnsafe(FRAME_MAX + 16);
  for (;;) {
    let n;
    try {
      n = fs.readSync(CTX_FD, buf, 0, buf.length, null);
    } catch (e) {
      if (e.code === 'EAGAIN') { Atomics.wait(sleeper, 0, 0, 2); continue; }
      if (e.code === 'EINTR') continue;
      process.reallyExit(0);
    }
    if (n === 0) process.reallyExit(0);   // the host closed the channel
    return buf.subarray(0, n);
  }
}

/* ---- console and stdio ---- */

function emitText(type, chunk) {
  const s = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  if (running) sendText(type, s);
  else fs.writeSync(type === 'o' ? 1 : 2, s);   // a pipe the host drops outside a run
}

/* A Writable whose write is synchronous (the callback runs at once), so
 * console output keeps its order across the two streams. */
function writer(type) {
  return new Writable({
    decodeStrings: false,
    write(chunk, encoding, cb) { emitText(type, chunk); cb(); },
  });
}

function rawWrite(type) {
  return function write(chunk, encoding, cb) {
    emitText(type, chunk);
    if (typeof encoding === 'function') encoding();
    else if (typeof cb === 'function') cb();
    return true;
  };
}

process.stdout.write = rawWrite('o');
process.stderr.write = rawWrite('e');
globalThis.console = new Console({ stdout: writer('o'), stderr: writer('e'), colorMode: false });
globalThis.require = require;   // as in Node's own REPL

/* ---- results and errors ---- */

function inspectText(v) {
  return util.inspect(v, { colors: false, depth: 4, maxArrayLength: 200, maxStringLength: 100000,
                           breakLength: 80 });
}

function isPlainJson(v) {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return Array.isArray(v) ? proto === Array.prototype : proto === Object.prototype || proto === null;
}

function sendRepr(mime, data) {
  if (data.length > REPR_MAX) {
    sendText('e', `[sandgate: a ${mime} representation of ${data.length} bytes was not sent]\n`);
    return;
  }
  const head = Buffer.from(mime + '\0', 'utf8');
  let off = 0;
  while (data.length - off + head.length > PAYLOAD_MAX) {
    sendFrame('k', data.subarray(off, off + PAYLOAD_MAX));
    off += PAYLOAD_MAX;
  }
  sendFrame('r', Buffer.concat([head, data.subarray(off)]));
}

function sendResult(v) {
  sendFrame('b', 'main');
  let text;
  try { text = inspectText(v); } catch (e) { text = Object.prototype.toString.call(v); }
  sendRepr('text/plain', Buffer.from(text, 'utf8'));
  if (isPlainJson(v)) {
    let json;
    try { json = JSON.stringify(v); } catch (e) { json = undefined; }   // cycles, BigInt
    if (typeof json === 'string') sendRepr('application/json', Buffer.from(json, 'utf8'));
  }
  sendFrame('f');
}

function clip(s, max, tail) {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= max) return b;
  return tail ? b.subarray(b.length - max) : b.subarray(0, max);
}

/* The runtime's own frames are left out of a stack: it starts at the cell. */
function userStack(stack) {
  const lines = String(stack).split('\n');
  const i = lines.findIndex((l) => /^\s+at /.test(l) && INTERNAL.test(l));
  return (i < 0 ? lines : lines.slice(0, i)).join('\n');
}
const INTERNAL = /node:inspector|node:vm|sandgate-context|\[eval\]|\bcontext\.js:/;

function sendError(name, value, traceback) {
  const z = Buffer.from([0]);
  sendFrame('x', Buffer.concat([clip(name, NAME_MAX, false), z, clip(value, VALUE_MAX, false), z,
                                clip(traceback, TB_MAX, true)]));
}

function sendThrown(e) {
  if (e instanceof Error || (e && typeof e === 'object' && typeof e.stack === 'string')) {
    let name = 'Error';
    try { name = String(e.name || (e.constructor && e.constructor.name) || 'Error'); } catch (_) {}
    let message = '';
    try { message = String(e.message === undefined ? '' : e.message); } catch (_) {}
    let stack = '';
    try { stack = userStack(e.stack); } catch (_) {}
    sendError(name, message, stack);
  } else {
    let text;
    try { text = inspectText(e); } catch (_) { text = String(e); }
    sendError('Uncaught', text, 'Uncaught ' + text);
  }
}

/* ---- evaluation ---- */

const session = new inspector.Session();
session.connect();

/* Remote object -> the value itself: primitives come by value; objects
 * are handed to a function that stores them where this file can take them. */

function post(method, params) {
  return new Promise((resolve, reject) => {
    session.post(method, params, (e, r) => (e ? reject(e) : resolve(r)));
  });
}

async function realValue(ro) {
  if (!ro) return undefined;
  if (ro.objectId) {
    await post('Runtime.callFunctionOn', {
      objectId: ro.objectId,
      functionDeclaration: 'function () { globalThis[Symbol.for("sandgate.stash")] = this; }',
      arguments: [],
    });
    const v = globalThis[Symbol.for('sandgate.stash')];
    globalThis[Symbol.for('sandgate.stash')] = undefined;
    await post('Runtime.releaseObject', { objectId: ro.objectId }).catch(() => {});
    return v;
  }
  if (ro.type === 'undefined') return undefined;
  if ('unserializableValue' in ro) {
    const u = ro.unserializableValue;
    return u.endsWith('n') ? BigInt(u.slice(0, -1)) : Number(u);
  }
  return ro.value;
}

let cellNo = 0;
let interruptRun = null;   // rejects the run in progress on SIGINT

function interruptedError() {
  const e = new Error('execution was interrupted (SIGINT: the run timed out or was cancelled)');
  e.name = 'KeyboardInterrupt';
  e.stack = 'KeyboardInterrupt: ' + e.message;
  return e;
}

/* One cell: resolves with {value} / {thrown} / {interrupted}. */
function evaluate(code) {
  cellNo++;
  const source = code + '\n//# sourceURL=cell-' + cellNo;
  return new Promise((resolve) => {
    let settled = false;
    // A pending promise holds no handle: without this timer Node would exit.
    const keepAlive = setInterval(() => {}, 1 << 30);
    const done = (r) => {
      if (settled) return;
      settled = true;
      interruptRun = null;
      clearInterval(keepAlive);
      resolve(r);
    };
    interruptRun = () => done({ interrupted: true });
    globalThis[Symbol.for('sandgate.post')] = () => session.post('Runtime.evaluate', {
      expression: source, replMode: true, awaitPromise: true, silent: false,
      includeCommandLineAPI: false, objectGroup: 'cell',
    }, (e, r) => {
      if (e) return done({ thrown: e });
      if (r.exceptionDetails) {
        const d = r.exceptionDetails;
        realValue(d.exception).then((v) => {
          if (v === undefined && d.exception === undefined)
            v = new Error(d.text || 'Uncaught');
          done({ thrown: v });
        }, (e2) => done({ thrown: e2 }));
        return;
      }
      realValue(r.result).then((v) => done({ value: v }), (e2) => done({ thrown: e2 }));
    });
    const sigintBefore = process.rawListeners('SIGINT');
    try {
      runner.runInThisContext({ breakOnSigint: true, displayErrors: false });
    } catch (e) {
      if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') done({ interrupted: true });
      else done({ thrown: e });
    } finally {
      rearmSigint(sigintBefore);
    }
  });
}

/* Node's breakOnSigint takes the SIGINT listeners off for the script and
 * its C++ watchdog owns SIGINT meanwhile; when the watchdog stops it leaves
 * Node's exiting handler installed, and putting the listeners back only
 * re-installs libuv's handler if no SIGINT handle is running. A cell that
 * added a SIGINT listener in its synchronous part (`process.on('SIGINT',
 * ...)`) has started that handle, so from then on the host's timeout SIGINT
 * would kill Node instead of reaching the listeners (the host would see an
 * interpreter dead of a signal, not a timeout). If the cell changed the
 * listeners, cycle them: the last one off stops the handle, the first one
 * back starts it and libuv takes SIGINT again. A SIGINT within that cycle
 * meets the default action; the host reports that death as the interrupt
 * ending the run (host_ctx_exited). */
function rearmSigint(before) {
  const now = process.rawListeners('SIGINT');
  if (now.length === before.length && now.every((l, i) => l === before[i])) return;
  process.removeAllListeners('SIGINT');
  for (const l of now) process.on('SIGINT', l);
}

const runner = new vm.Script('globalThis[Symbol.for("sandgate.post")]()',
                             { filename: 'sandgate-context' });

process.on('SIGINT', () => { if (interruptRun) interruptRun(); });   // idle: ignored
process.on('uncaughtException', (e) => {
  if (running) sendText('e', 'Uncaught ' + (e && e.stack ? userStack(e.stack) : inspectText(e)) + '\n');
});
process.on('unhandledRejection', (e) => {
  if (running) sendText('e', 'Unhandled promise rejection: ' +
                        (e && e.stack ? userStack(e.stack) : inspectText(e)) + '\n');
});

/* ---- the frame loop ---- */

function activate(buf) {
  try {
    const req = JSON.parse(buf.toString('utf8'));
    for (const k of Object.keys(process.env)) delete process.env[k];
    for (const [k, v] of Object.entries(req.env || {})) process.env[k] = String(v);
    process.chdir(req.workdir || '/workspace');
  } catch (e) {
    process.reallyExit(1);   // the host sees the context die and restarts it
  }
}

async function runCell(code) {
  running = true;
  try {
    const r = await evaluate(code);
    if (r.interrupted) sendThrown(interruptedError());
    else if ('thrown' in r) sendThrown(r.thrown);
    else if (r.value !== undefined) sendResult(r.value);
  } catch (e) {
    try { sendThrown(e); } catch (_) {}
  }
  sendFrame('d');
  running = false;
}

async function serve() {
  let chunks = [];
  let activation = [];
  let activatable = true;
  for (;;) {
    const f = readFrame();
    const type = String.fromCharCode(f[0]);
    const payload = f.subarray(1);
    if ((type === 'a' || type === 'A') && activatable) {
      activation.push(Buffer.from(payload));
      if (type === 'A') { activatable = false; activate(Buffer.concat(activation)); activation = []; }
      continue;
    }
    if (type === 'W' && activatable) continue;
    activatable = false;
    if (type === 'c') { chunks.push(Buffer.from(payload)); continue; }
    if (type !== 'R') continue;
    chunks.push(Buffer.from(payload));
    const code = Buffer.concat(chunks).toString('utf8');
    chunks = [];
    await runCell(code);
  }
}

serve();
