// lib/sandbox.js — Sandbox, CodeContext, Commands, Files: the agent-facing
// API, in the shape of the Python client (and E2B's): Sandbox.create /
// connect / list / using, sb.runCode, sb.commands.run, sb.files.read/write,
// sb.setTimeout, sb.kill. Times are in seconds, as in the API.
'use strict';
const { Client } = require('./client');
const { NotFound, SandboxNotFound, SandgateError } = require('./errors');
const { RunCodeAccumulator, ExecAccumulator, sandboxInfo } = require('./execution');
const processes = require('./processes');

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
  constructor(sandbox, contextId, language, info = {}) {
    this.sandbox = sandbox;  // borrowed
    this.contextId = contextId;
    this.id = contextId;
    this.language = language;
    // as of listCodeContexts(): 'starting' | 'idle' | 'running' |
    // 'restarting'; createdAt in Unix ms; restarts = times its state was lost
    this.state = info.state || '';
    this.createdAt = info.createdAt || 0;
    this.restarts = info.restarts || 0;
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
    if (opts.background) return this.start(cmd, opts);
    const sb = this._sb;
    const acc = new ExecAccumulator(opts);
    await sb.client.stream('Exec', {
      sandbox_id: sb.sandboxId, user_id: sb.userId, command: cmd,
      timeout_seconds: seconds('timeout', opts.timeout), max_output_bytes: opts.maxOutputBytes || 0,
    }, actionDeadline(opts.timeout, opts.requestTimeout), (ev) => acc.feed(ev), opts.signal);
    return acc.finish();
  }
}

Commands.prototype.start = function start(cmd, opts = {}) {
  /** A background process (lib/processes.js): resolves to a Process once it
   * runs. opts: pty, rows, cols, timeout, maxOutputBytes, requestTimeout. */
  return processes.start(this._sb, cmd, opts);
};
/** sandgate.v1.ProcessInfo of every process (running and recently exited). */
Commands.prototype.list = function list(opts = {}) { return processes.list(this._sb, opts); };
/** A handle on a process started earlier (by this client or another). */
Commands.prototype.connect = function connect(processId) { return new processes.Process(this._sb, processId); };
Commands.prototype.sendStdin = function sendStdin(processId, data, opts) { return this.connect(processId).sendStdin(data, opts); };
Commands.prototype.kill = function kill(processId, opts) { return this.connect(processId).kill(opts); };

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

  // The calls below resolve to the API's messages as they are (snake_case
  // fields, enums as names: FileInfo {path, name, type: 'FILE_TYPE_FILE',
  // size, mode, mtime (ms)}, FileEvent {type: 'FILE_EVENT_CREATE', path,
  // from_path, is_dir, dropped}).

  _req(extra) { return { sandbox_id: this._sb.sandboxId, user_id: this._sb.userId, ...extra }; }

  /** {entries: FileInfo[], truncated}; opts: recursive, maxEntries (0 = 1000, at most 10000). */
  async list(path = '', opts = {}) {
    return this._sb.client.unary('ListFiles', this._req({
      path, recursive: !!opts.recursive, max_entries: opts.maxEntries || 0,
    }), opts.requestTimeout);
  }

  /** FileInfo ('' = the workspace); a FIFO, socket or device is InvalidArgument. */
  async stat(path = '', opts = {}) {
    return this._sb.client.unary('StatFile', this._req({ path }), opts.requestTimeout);
  }

  async exists(path) {
    try { await this.stat(path); return true; } catch (e) { if (e instanceof NotFound) return false; throw e; }
  }

  /** mkdir; opts.parents (mkdir -p), opts.mode (0 = 0755). Resolves to FileInfo. */
  async makeDir(path, opts = {}) {
    return this._sb.client.unary('MakeDir', this._req({ path, parents: !!opts.parents, mode: opts.mode || 0 }),
      opts.requestTimeout);
  }

  /** Remove a file or directory (opts.recursive for one with entries); resolves to the entries removed. */
  async remove(path, opts = {}) {
    const r = await this._sb.client.unary('RemoveFile', this._req({ path, recursive: !!opts.recursive }),
      opts.requestTimeout);
    return Number(r.removed);
  }

  /** Rename within the workspace (opts.overwrite to replace); resolves to the FileInfo of dst. */
  async rename(src, dst, opts = {}) {
    return this._sb.client.unary('RenameFile', this._req({
      from_path: src, to_path: dst, overwrite: !!opts.overwrite,
    }), opts.requestTimeout);
  }

  /** Stream a Buffer, string or (async) iterable of Buffers to path in
   * chunks (up to the workspace quota). opts: offset (resume: keep that
   * many bytes, write after them), chunkSize (default 1 MiB, at most 4 MiB),
   * mode, size (checked against the quota first; default the data's length
   * when known), requestTimeout. Resolves to {size, bytes_written}. */
  async upload(path, data, opts = {}) {
    const chunk = opts.chunkSize || 1024 * 1024;
    if (!(chunk > 0 && chunk <= 4 * 1024 * 1024)) throw new TypeError('sandgate: chunkSize must be 1..4194304');
    const offset = opts.offset || 0;
    if (typeof data === 'string') data = Buffer.from(data, 'utf8');
    let size = opts.size;
    if (size === undefined && Buffer.isBuffer(data)) size = offset + data.length;
    const sb = this._sb;
    async function* pieces() {
      if (Buffer.isBuffer(data)) {
        for (let i = 0; i < data.length; i += chunk) yield data.subarray(i, i + chunk);
      } else {
        for await (const b of data) {
          for (let i = 0; i < b.length; i += chunk) yield b.subarray(i, i + chunk);
        }
      }
    }
    async function* messages() {
      let first = true;
      for await (const p of pieces()) {
        if (first) {
          first = false;
          yield { sandbox_id: sb.sandboxId, user_id: sb.userId, path, offset, mode: opts.mode || 0,
            size: size || 0, data: p };
        } else {
          yield { data: p };
        }
      }
      if (first) yield { sandbox_id: sb.sandboxId, user_id: sb.userId, path, offset, mode: opts.mode || 0, size: size || 0 };
    }
    const r = await sb.client.clientStream('UploadFile', messages(), opts.requestTimeout || 600);
    return { size: Number(r.size), bytes_written: Number(r.bytes_written) };
  }

  /** The file's bytes as a Buffer, streamed in chunks. opts: offset,
   * length (0 = to the end), chunkSize (0 = 1 MiB), onChunk(FileChunk), requestTimeout. */
  async download(path, opts = {}) {
    const parts = [];
    await this._sb.client.stream('DownloadFile', this._req({
      path, offset: opts.offset || 0, length: opts.length || 0, chunk_bytes: opts.chunkSize || 0,
    }), opts.requestTimeout || 600, (c) => {
      parts.push(Buffer.from(c.data));
      if (opts.onChunk) opts.onChunk(c);
    }, opts.signal);
    return Buffer.concat(parts);
  }

  /** Watch path ('' = the workspace): onEvent(FileEvent) for each event,
   * first FILE_EVENT_READY. Resolves when the sandbox ends; abort
   * opts.signal to stop (the promise then rejects with its reason).
   * opts: recursive, requestTimeout (s, default a day). */
  watch(path, onEvent, opts = {}) {
    return this._sb.client.stream('WatchFiles', this._req({ path: path || '', recursive: !!opts.recursive }),
      opts.requestTimeout || 86400, onEvent, opts.signal);
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
    this.pty = new processes.Pty(this);
  }

  /**
   * Create the sandbox of (userId, taskId); creating again for the same task
   * returns the same one. opts: template (default 'code-interpreter'),
   * userId, taskId, ttlSeconds, env, egress ("host" | [host, port] |
   * {host, port}), secrets, userToken, metadata (labels: key -> value),
   * requestTimeout, and client or the
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
        metadata: { ...(opts.metadata || {}) },
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

  /** One page of the caller's sandboxes for this user, in sandbox id
   * order: an array of SandboxInfo with .unreachableHosts (hosts not
   * asked; empty when the answer is complete) and .nextPageToken ('' = the
   * last page). opts: metadata (only sandboxes with all these labels),
   * pageSize (0 = 100, at most 1000), pageToken. listAll() walks every page. */
  static async list(opts = {}) {
    const [client, owns] = clientOf(opts);
    try {
      const r = await client.unary('ListSandboxes', {
        user_id: userOf(opts, client), metadata: { ...(opts.metadata || {}) },
        page_size: opts.pageSize || 0, page_token: opts.pageToken || '',
      }, opts.requestTimeout);
      const out = (r.sandboxes || []).map(sandboxInfo);
      out.unreachableHosts = [...(r.unreachable_hosts || [])];
      out.nextPageToken = r.next_page_token || '';
      return out;
    } finally {
      if (owns) client.close();
    }
  }

  /** Every page of list(opts), joined. */
  static async listAll(opts = {}) {
    const all = [];
    const unreachable = new Set();
    let token = '';
    for (;;) {
      const page = await Sandbox.list({ ...opts, pageToken: token });
      all.push(...page);
      for (const h of page.unreachableHosts) unreachable.add(h);
      token = page.nextPageToken;
      if (!token) break;
    }
    all.unreachableHosts = [...unreachable];
    all.nextPageToken = '';
    return all;
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

  /** The sandbox's contexts: 'default' first, then the created ones. */
  async listCodeContexts(opts = {}) {
    const r = await this.client.unary('ListContexts', {
      sandbox_id: this.sandboxId, user_id: this.userId,
    }, opts.requestTimeout);
    return (r.contexts || []).map((c) => new CodeContext(this, c.context_id, c.language || 'python', {
      state: String(c.state || '').replace(/^CONTEXT_STATE_/, '').toLowerCase(),
      createdAt: Number(c.created_at || 0), restarts: c.restarts || 0,
    }));
  }

  /** Kill a context's interpreter and start a fresh one under the same id
   * (default: the sandbox's own); resolves once it is ready. A run in
   * progress ends with error ContextRestarted. */
  async restartCodeContext(context, opts = {}) {
    const id = (context && context.contextId) || context || '';
    const c = await this.client.unary('RestartContext', {
      sandbox_id: this.sandboxId, user_id: this.userId, context_id: id,
    }, opts.requestTimeout);
    return new CodeContext(this, c.context_id, c.language || 'python');
  }

  /** Delete a created context (the default one cannot be deleted:
   * FailedPrecondition). A run in progress on it ends Cancelled. */
  async removeCodeContext(context, opts = {}) {
    const id = (context && context.contextId) || context || '';
    await this.client.unary('DeleteContext', {
      sandbox_id: this.sandboxId, user_id: this.userId, context_id: id,
    }, opts.requestTimeout);
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
