// lib/sandbox.js — Sandbox, CodeContext, Commands, Files: the agent-facing
// API, in the shape of the Python client (and E2B's): Sandbox.create /
// connect / list / using, sb.runCode, sb.commands.run, sb.files.read/write,
// sb.setTimeout, sb.kill. Times are in seconds, as in the API.
'use strict';
const { Client } = require('./client');
const { SandboxNotFound, SandgateError } = require('./errors');
const { RunCodeAccumulator, ExecAccumulator, sandboxInfo } = require('./execution');

// The server enforces an action's timeout; the client deadline only bounds a stuck call.
const DEADLINE_SLACK = 60;
const DEFAULT_ACTION_DEADLINE = 600;

function actionDeadline(timeout, requestTimeout) {
  if (requestTimeout) return requestTimeout;
  return timeout ? timeout + DEADLINE_SLACK : DEFAULT_ACTION_DEADLINE;
}

function seconds(name, v) {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !(v >= 0)) throw new TypeError(`sandgate: ${name} must be a number of seconds >= 0, got ${v}`);
  return Math.ceil(v);
}

const CONN_KEYS = ['addr', 'apiKey', 'userId', 'tls', 'rootCertificates', 'clientCert', 'clientKey',
  'serverName', 'timeout', 'channelOptions'];

/** [client, owned]: opts.client, or a new Client from the connection options. */
function clientOf(opts) {
  if (opts.client) return [opts.client, false];
  const conn = {};
  for (const k of CONN_KEYS) if (opts[k] !== undefined) conn[k] = opts[k];
  return [new Client(conn), true];
}

function userOf(opts, client) {
  const u = opts.userId !== undefined ? opts.userId : client.userId;
  if (!u) throw new TypeError('sandgate: no userId (pass userId or set SANDGATE_USER)');
  return u;
}

function egressOf(list) {
  return (list || []).map((t) => {
    if (typeof t === 'string') return { host: t, port: 0 };
    if (Array.isArray(t)) return { host: t[0], port: t[1] || 0 };
    return { host: t.host, port: t.port || 0 };
  });
}

class CodeContext {
  constructor(sandbox, contextId, language) {
    this.sandbox = sandbox;  // borrowed
    this.contextId = contextId;
    this.id = contextId;
    this.language = language;
  }

  /** sandbox.runCode(code, {...opts, context: this}). */
  runCode(code, opts = {}) { return this.sandbox.runCode(code, { ...opts, context: this }); }
}

class Commands {
  constructor(sandbox) { this._sb = sandbox; }

  /** Run `/bin/sh -c cmd`; resolves to {exitCode, stdout, stderr, signal,
   * timedOut, truncated, outputBytesTotal, durationMs}. A non-zero exit is
   * not an error. opts: timeout (s), onStdout, onStderr, maxOutputBytes,
   * requestTimeout, signal (AbortSignal). */
  async run(cmd, opts = {}) {
    const sb = this._sb;
    const acc = new ExecAccumulator(opts);
    await sb.client.stream('Exec', {
      sandbox_id: sb.sandboxId, user_id: sb.userId, command: cmd,
      timeout_seconds: seconds('timeout', opts.timeout), max_output_bytes: opts.maxOutputBytes || 0,
    }, actionDeadline(opts.timeout, opts.requestTimeout), (ev) => acc.feed(ev), opts.signal);
    return acc.finish();
  }
}

class Files {
  constructor(sandbox) { this._sb = sandbox; }

  /** The file's contents (paths relative to /workspace): a string
   * (format 'text', the default) or a Buffer (format 'bytes'). */
  async read(path, opts = {}) {
    const sb = this._sb;
    const format = opts.format || 'text';
    if (format !== 'text' && format !== 'bytes') throw new TypeError(`sandgate: format must be 'text' or 'bytes', got ${format}`);
    const r = await sb.client.unary('ReadFile', { sandbox_id: sb.sandboxId, user_id: sb.userId, path },
      opts.requestTimeout);
    return format === 'bytes' ? Buffer.from(r.data) : Buffer.from(r.data).toString('utf8');
  }

  /** Write a string (UTF-8) or Buffer; resolves to the bytes written. */
  async write(path, data, opts = {}) {
    const sb = this._sb;
    const r = await sb.client.unary('WriteFile', {
      sandbox_id: sb.sandboxId, user_id: sb.userId, path,
      data: Buffer.isBuffer(data) ? data : Buffer.from(String(data), 'utf8'), mode: opts.mode || 0,
    }, opts.requestTimeout);
    return Number(r.bytes_written);
  }
}

class Sandbox {
  constructor(client, info, userId, ownsClient = false) {
    this.client = client;      // owned iff _ownsClient
    this._info = info;         // the last sandgate.v1.Sandbox message seen
    this.userId = userId;
    this._ownsClient = ownsClient;
    this._killed = false;
    this.commands = new Commands(this);
    this.files = new Files(this);
  }

  /**
   * Create the sandbox of (userId, taskId); creating again for the same task
   * returns the same one. opts: template (default 'code-interpreter'),
   * userId, taskId, ttlSeconds, env, egress ("host" | [host, port] |
   * {host, port}), secrets, userToken, requestTimeout, and client or the
   * connection options (addr, apiKey, tls, ...). Without client, a Client is
   * made and closed with the sandbox.
   */
  static async create(opts = {}) {
    const [client, owns] = clientOf(opts);
    try {
      const userId = userOf(opts, client);
      const info = await client.unary('CreateSandbox', {
        template: opts.template || 'code-interpreter', user_id: userId, task_id: opts.taskId || '',
        ttl_seconds: seconds('ttlSeconds', opts.ttlSeconds), env: { ...(opts.env || {}) },
        egress: egressOf(opts.egress), secrets: [...(opts.secrets || [])], user_token: opts.userToken || '',
      }, opts.requestTimeout);
      return new Sandbox(client, info, userId, owns);
    } catch (e) {
      if (owns) client.close();
      throw e;
    }
  }

  /** Attach to an existing sandbox; rejects with SandboxNotFound if there is none. */
  static async connect(sandboxId, opts = {}) {
    const [client, owns] = clientOf(opts);
    try {
      const userId = userOf(opts, client);
      const info = await client.unary('GetSandbox', { sandbox_id: sandboxId, user_id: userId },
        opts.requestTimeout);
      return new Sandbox(client, info, userId, owns);
    } catch (e) {
      if (owns) client.close();
      throw e;
    }
  }

  /** The caller's sandboxes for this user: an array of SandboxInfo with
   * .unreachableHosts (hosts not asked; empty when the answer is complete). */
  static async list(opts = {}) {
    const [client, owns] = clientOf(opts);
    try {
      const r = await client.unary('ListSandboxes', { user_id: userOf(opts, client) }, opts.requestTimeout);
      const out = (r.sandboxes || []).map(sandboxInfo);
      out.unreachableHosts = [...(r.unreachable_hosts || [])];
      return out;
    } finally {
      if (owns) client.close();
    }
  }

  /** Create a sandbox, run fn(sb), and kill it in a finally; resolves to fn's result. */
  static async using(opts, fn) {
    const sb = await Sandbox.create(opts);
    try {
      return await fn(sb);
    } finally {
      await sb.kill().catch(() => {});
    }
  }

  get sandboxId() { return this._info.sandbox_id; }
  get id() { return this._info.sandbox_id; }
  /** What the gateway last said (getInfo() asks again). */
  get info() { return sandboxInfo(this._info); }

  async getInfo(opts = {}) {
    this._info = await this.client.unary('GetSandbox', { sandbox_id: this.sandboxId, user_id: this.userId },
      opts.requestTimeout);
    return this.info;
  }

  async isRunning() {
    try {
      return (await this.getInfo()).state === 'running';
    } catch (e) {
      if (e instanceof SandboxNotFound) return false;
      throw e;
    }
  }

  /** New lifetime: `seconds` from now (capped by policy). */
  async setTimeout(secs, opts = {}) {
    this._info = await this.client.unary('ExtendSandbox', {
      sandbox_id: this.sandboxId, user_id: this.userId, ttl_seconds: seconds('timeout', secs),
    }, opts.requestTimeout);
    return this.info;
  }

  /** Kill the sandbox: true if this call killed it, false if it was already gone. */
  async kill(opts = {}) {
    try {
      await this.client.unary('KillSandbox', { sandbox_id: this.sandboxId, user_id: this.userId },
        opts.requestTimeout);
      return true;
    } catch (e) {
      if (e instanceof SandboxNotFound) return false;
      throw e;
    } finally {
      this._killed = true;
      this.close();
    }
  }

  /** Release a connection this sandbox made itself (without killing it). */
  close() {
    if (this._ownsClient) {
      this._ownsClient = false;
      this.client.close();
    }
  }

  /** A new persistent interpreter, separate from the default one. */
  async createCodeContext(opts = {}) {
    const language = opts.language || 'python';
    const c = await this.client.unary('CreateContext', {
      sandbox_id: this.sandboxId, user_id: this.userId, language,
    }, opts.requestTimeout);
    return new CodeContext(this, c.context_id, c.language || language);
  }

  /**
   * Run Python in a context (default: the sandbox's own); resolves to an
   * Execution. The code's own exception is execution.error (the context
   * survives), not a rejection. opts: context (CodeContext or id), timeout
   * (s; the server interrupts the code: .timedOut, .contextRestarted),
   * onStdout, onStderr (strings as they stream), onResult, onError,
   * maxOutputBytes (.truncated), requestTimeout (client deadline, s),
   * signal (an AbortSignal: aborting cancels the run and interrupts the
   * code; so does a callback that throws).
   */
  async runCode(code, opts = {}) {
    const ctx = opts.context && typeof opts.context === 'object' ? opts.context.contextId : (opts.context || '');
    const acc = new RunCodeAccumulator(opts);
    await this.client.stream('RunCode', {
      sandbox_id: this.sandboxId, user_id: this.userId, context_id: ctx, code,
      timeout_seconds: seconds('timeout', opts.timeout), max_output_bytes: opts.maxOutputBytes || 0,
    }, actionDeadline(opts.timeout, opts.requestTimeout), (ev) => acc.feed(ev), opts.signal);
    return acc.finish();
  }

  toString() { return `Sandbox(${this.sandboxId}, user=${this.userId})`; }
}

// `await using sb = await Sandbox.create(...)` where the runtime has it.
if (typeof Symbol.asyncDispose === 'symbol') {
  Sandbox.prototype[Symbol.asyncDispose] = async function dispose() {
    if (!this._killed) await this.kill().catch((e) => { if (!(e instanceof SandgateError)) throw e; });
  };
}

module.exports = { Sandbox, CodeContext, Commands, Files };
