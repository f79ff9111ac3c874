// lib/execution.js — what one action returns: Execution (runCode),
// CommandResult (commands.run), SandboxInfo; built from the event streams.
// Output chunks may split a UTF-8 character: decoded with a StringDecoder.
'use strict';
const { StringDecoder } = require('node:string_decoder');

class Result {
  // A notebook-style rich result: the value of the final expression (the
  // main result), an object passed to display(), or a figure, with every
  // representation it has. mimeType/data is the one older servers sent.
  constructor(mimeType, data, representations = {}, main = null, dropped = false, notice = '') {
    this.mimeType = mimeType;
    this.data = Buffer.from(data);      // raw bytes
    this.representations = representations;  // {mime: Buffer}
    this._main = main;                  // null: a server without the flag
    this.dropped = dropped;             // the output cap dropped some representations
    this.notice = notice;               // ...and this says which
  }

  static fromPb(x) {
    const reps = {};
    for (const p of x.representations || []) reps[p.mime_type] = Buffer.from(p.data);
    // A server that sets neither has no is_main_result: fall back to the mime type.
    const main = Object.keys(reps).length || x.dropped ? !!x.is_main_result : null;
    return new Result(x.mime_type, x.data, reps, main, !!x.dropped, x.notice || '');
  }

  _bytes(mime) {
    if (mime in this.representations) return this.representations[mime];
    return this.mimeType === mime ? this.data : null;
  }

  _str(mime) { const b = this._bytes(mime); return b === null ? null : b.toString('utf8'); }
  /** The text/plain representation (the repr), else null. */
  get text() { return this._str('text/plain'); }
  get png() { return this._bytes('image/png'); }
  get jpeg() { return this._bytes('image/jpeg'); }
  get svg() { return this._str('image/svg+xml'); }
  get html() { return this._str('text/html'); }
  get markdown() { return this._str('text/markdown'); }
  get latex() { return this._str('text/latex'); }
  get json() { const s = this._str('application/json'); return s === null ? null : JSON.parse(s); }
  /** True for the value of the cell's final expression. */
  get isMainResult() { return this._main !== null ? this._main : this.mimeType === 'text/plain'; }
  formats() { const k = Object.keys(this.representations); return k.length ? k : [this.mimeType]; }
}

class Execution {
  constructor() {
    this.logs = { stdout: '', stderr: '' };
    this.results = [];
    this.error = null;   // {name, value, traceback}: the code's own exception
    this.end = null;     // {durationUs, truncated, outputBytesTotal, timedOut, contextRestarted}
  }

  get text() { const r = this.results.find((x) => x.isMainResult); return r ? r.text : null; }
  get truncated() { return !!(this.end && this.end.truncated); }
  get timedOut() { return !!(this.end && this.end.timedOut); }
  get contextRestarted() { return !!(this.end && this.end.contextRestarted); }
  get outputBytesTotal() { return this.end ? this.end.outputBytesTotal : 0; }
  get durationMs() { return this.end ? this.end.durationUs / 1000 : 0; }
}

function callbacksOf(o) {
  return { stdout: o.onStdout, stderr: o.onStderr, result: o.onResult, error: o.onError };
}

/** Accumulates RunCodeEvents; callbacks are called in stream order. */
class RunCodeAccumulator {
  constructor(opts = {}) {
    this.ex = new Execution();
    this._dec = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    this._cb = callbacksOf(opts);
  }

  _text(kind, s) {
    if (!s) return;
    this.ex.logs[kind] += s;
    if (this._cb[kind]) this._cb[kind](s);
  }

  feed(ev) {
    switch (ev.event) {
      case 'stdout': case 'stderr':
        this._text(ev.event, this._dec[ev.event].write(ev[ev.event].data)); break;
      case 'result': {
        const r = Result.fromPb(ev.result);
        this.ex.results.push(r);
        if (this._cb.result) this._cb.result(r);
        break;
      }
      case 'error':
        this.ex.error = { name: ev.error.name, value: ev.error.value, traceback: ev.error.traceback };
        if (this._cb.error) this._cb.error(this.ex.error);
        break;
      case 'end': {
        const e = ev.end;
        this.ex.end = {
          durationUs: Number(e.duration_us), truncated: e.truncated,
          outputBytesTotal: Number(e.output_bytes_total), timedOut: e.timed_out,
          contextRestarted: e.context_restarted, resultsDropped: Number(e.results_dropped || 0),
        };
        break;
      }
      default: break;
    }
  }

  finish() {
    this._text('stdout', this._dec.stdout.end());
    this._text('stderr', this._dec.stderr.end());
    return this.ex;
  }
}

class ExecAccumulator {
  constructor(opts = {}) {
    this.res = { exitCode: -1, stdout: '', stderr: '', signal: 0, timedOut: false, truncated: false,
      outputBytesTotal: 0, durationMs: 0 };
    this._dec = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    this._cb = { stdout: opts.onStdout, stderr: opts.onStderr };
  }

  _text(kind, s) {
    if (!s) return;
    this.res[kind] += s;
    if (this._cb[kind]) this._cb[kind](s);
  }

  feed(ev) {
    if (ev.event === 'stdout' || ev.event === 'stderr') {
      this._text(ev.event, this._dec[ev.event].write(ev[ev.event].data));
    } else if (ev.event === 'exit') {
      const x = ev.exit;
      Object.assign(this.res, { exitCode: x.exit_code, signal: x.signal, timedOut: x.timed_out,
        truncated: x.truncated, outputBytesTotal: Number(x.output_bytes_total),
        durationMs: Number(x.duration_us) / 1000 });
    }
  }

  finish() {
    this._text('stdout', this._dec.stdout.end());
    this._text('stderr', this._dec.stderr.end());
    return this.res;
  }
}

function sandboxInfo(m) {
  return {
    sandboxId: m.sandbox_id, template: m.template, userId: m.user_id, taskId: m.task_id,
    createdAt: m.created_at ? new Date(Number(m.created_at)) : null,
    expiresAt: m.expires_at ? new Date(Number(m.expires_at)) : null,
    state: String(m.state).replace('SANDBOX_STATE_', '').toLowerCase(),
    metadata: { ...(m.metadata || {}) },
  };
}

module.exports = { Result, Execution, RunCodeAccumulator, ExecAccumulator, sandboxInfo };
