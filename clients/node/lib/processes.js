// lib/processes.js — background processes and PTYs, as in the Python
// client: sb.commands.start(cmd, opts) / run(cmd, {background: true}) /
// list / connect, sb.pty.create(opts), and the Process handle: sendStdin,
// closeStdin, signal, kill, resize, wait, attach, output. A Process only
// names a process (its processId, "p<N>"); the host keeps its output (the
// newest maxOutputBytes per stream), so attach() can start at any offset
// and any number of attachers may read at once.
'use strict';

const WAIT_STEP = 60;   // WaitProcess answers after at most this; wait() asks again

function secondsOf(v) {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !(v >= 0)) throw new TypeError(`sandgate: timeout must be a number of seconds >= 0, got ${v}`);
  return Math.ceil(v);
}

class Process {
  constructor(sandbox, processId, pty = false) {
    this.sandbox = sandbox;   // borrowed
    this.processId = processId;
    this.pid = processId;
    this.pty = pty;
  }

  _req(extra = {}) {
    return { sandbox_id: this.sandbox.sandboxId, user_id: this.sandbox.userId, process_id: this.processId, ...extra };
  }

  /** Its sandgate.v1.ProcessInfo now (state, stdout_bytes, exit, ...). */
  async info(opts = {}) {
    const all = await this.sandbox.commands.list(opts);
    const p = all.find((x) => x.process_id === this.processId);
    if (!p) throw new Error(`sandgate: process ${this.processId} is no longer listed`);
    return p;
  }

  /** Write to its stdin (a PTY: typed input); opts.close ends the input
   * (EOF; ^D on a PTY). Resolves to the bytes still waiting to be read; past
   * 1 MiB held for a process that does not read, rejects with QuotaExceeded. */
  async sendStdin(data, opts = {}) {
    const r = await this.sandbox.client.unary('SendInput', this._req({
      data: Buffer.isBuffer(data) ? data : Buffer.from(String(data), 'utf8'), close_stdin: !!opts.close,
    }), opts.requestTimeout);
    return Number(r.pending_bytes);
  }

  closeStdin(opts = {}) { return this.sendStdin(Buffer.alloc(0), { ...opts, close: true }); }

  /** A signal by number or name (TERM, KILL, INT, HUP, QUIT, USR1, USR2,
   * STOP, CONT, WINCH) to its process group. */
  async signal(sig = 'TERM', opts = {}) {
    const f = typeof sig === 'number' ? { signal: sig } : { signal_name: String(sig) };
    await this.sandbox.client.unary('SignalProcess', this._req(f), opts.requestTimeout);
  }

  kill(opts = {}) { return this.signal('KILL', opts); }

  /** A PTY's window size (1..1000 each); the process gets SIGWINCH. */
  async resize(rows, cols, opts = {}) {
    await this.sandbox.client.unary('ResizePty', this._req({ rows, cols }), opts.requestTimeout);
  }

  /** Until it exits (no timeout) or timeout seconds pass: its ProcessInfo either way. */
  async wait(timeout) {
    let left = timeout === undefined || timeout === null ? null : timeout;
    for (;;) {
      const step = left === null ? WAIT_STEP : Math.max(1, Math.min(WAIT_STEP, Math.ceil(left)));
      const info = await this.sandbox.client.unary('WaitProcess', this._req({ timeout_seconds: step }), step + 30);
      if (info.state === 'PROCESS_STATE_EXITED') return info;
      if (left !== null) {
        left -= step;
        if (left <= 0) return info;
      }
    }
  }

  /** onEvent(ProcessEvent) for each event: stdout/stderr {offset, data},
   * dropped {stderr, offset, bytes} for output no longer held, exit last.
   * Resolves when the process has ended and everything was sent; abort
   * opts.signal to detach (the process runs on). opts: stdoutOffset,
   * stderrOffset, requestTimeout (s, default a day). */
  attach(onEvent, opts = {}) {
    return this.sandbox.client.stream('AttachProcess', this._req({
      stdout_offset: opts.stdoutOffset || 0, stderr_offset: opts.stderrOffset || 0,
    }), opts.requestTimeout || 86400, onEvent, opts.signal);
  }

  /** Attach from the start until it exits: {stdout, stderr (Buffers),
   * dropped (bytes), exit (ExecExit), exitCode}. opts: onStdout, onStderr. */
  async output(opts = {}) {
    const out = { stdout: [], stderr: [], dropped: 0, exit: null };
    await this.attach((ev) => {
      if (ev.event === 'stdout') { out.stdout.push(Buffer.from(ev.stdout.data)); if (opts.onStdout) opts.onStdout(ev.stdout.data); }
      else if (ev.event === 'stderr') { out.stderr.push(Buffer.from(ev.stderr.data)); if (opts.onStderr) opts.onStderr(ev.stderr.data); }
      else if (ev.event === 'dropped') out.dropped += Number(ev.dropped.bytes);
      else if (ev.event === 'exit') out.exit = ev.exit;
    }, opts);
    return {
      stdout: Buffer.concat(out.stdout), stderr: Buffer.concat(out.stderr), dropped: out.dropped,
      exit: out.exit, exitCode: out.exit ? out.exit.exit_code : null,
    };
  }
}

/** Exec with background: a Process once it runs. opts: pty, rows, cols,
 * timeout (s; none = until it ends or the sandbox does), maxOutputBytes
 * (kept per stream; 0 = 1 MiB), requestTimeout. */
async function start(sandbox, cmd, opts = {}) {
  let pid = '';
  await sandbox.client.stream('Exec', {
    sandbox_id: sandbox.sandboxId, user_id: sandbox.userId, command: cmd, background: true,
    timeout_seconds: secondsOf(opts.timeout), max_output_bytes: opts.maxOutputBytes || 0,
    pty: !!opts.pty, pty_rows: opts.rows || 0, pty_cols: opts.cols || 0,
  }, opts.requestTimeout || 30, (ev) => { if (ev.event === 'started') pid = ev.started.process_id; });
  if (!pid) throw new Error('sandgate: Exec ended without a process id');
  return new Process(sandbox, pid, !!opts.pty);
}

async function list(sandbox, opts = {}) {
  const r = await sandbox.client.unary('ListProcesses', { sandbox_id: sandbox.sandboxId, user_id: sandbox.userId },
    opts.requestTimeout);
  return r.processes;
}

/** sb.pty: terminals. create({rows, cols, cmd}) starts a shell on a PTY. */
class Pty {
  constructor(sandbox) { this._sb = sandbox; }

  create(opts = {}) {
    return start(this._sb, opts.cmd || 'exec sh -i', { ...opts, pty: true, rows: opts.rows || 24, cols: opts.cols || 80 });
  }
}

module.exports = { Process, Pty, start, list };
