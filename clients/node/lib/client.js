// lib/client.js — Client: one gRPC channel to a sandgate gateway and the
// tenant's credentials. Owns the channel; turns every failed call into a
// SandgateError (lib/errors.js). Settings come from the options or the
// environment (the same variables as the Python client):
//   SANDGATE_ADDR, SANDGATE_API_KEY, SANDGATE_USER, SANDGATE_TLS,
//   SANDGATE_CA_FILE, SANDGATE_CERT_FILE, SANDGATE_KEY_FILE, SANDGATE_SERVER_NAME
'use strict';
const fs = require('node:fs');
const grpc = require('@grpc/grpc-js');
const { service } = require('./proto');
const { fromServiceError } = require('./errors');

const MB = 1024 * 1024;

function pem(v) {
  if (v === undefined || v === null || v === '') return null;
  return Buffer.isBuffer(v) ? v : fs.readFileSync(v);
}

function flag(v) { return ['1', 'true', 'yes', 'on'].includes(String(v || '').trim().toLowerCase()); }

/** Resolve options against the environment (options win). */
function resolveConfig(o = {}) {
  const env = process.env;
  const c = {
    addr: o.addr || env.SANDGATE_ADDR || '127.0.0.1:7443',
    apiKey: o.apiKey !== undefined ? o.apiKey : env.SANDGATE_API_KEY,
    userId: o.userId !== undefined ? o.userId : env.SANDGATE_USER,
    rootCertificates: o.rootCertificates || env.SANDGATE_CA_FILE || null,
    clientCert: o.clientCert || env.SANDGATE_CERT_FILE || null,
    clientKey: o.clientKey || env.SANDGATE_KEY_FILE || null,
    serverName: o.serverName || env.SANDGATE_SERVER_NAME || null,
    timeout: o.timeout !== undefined ? o.timeout : 30,
    channelOptions: o.channelOptions || {},
  };
  c.tls = o.tls !== undefined ? !!o.tls : (flag(env.SANDGATE_TLS) || !!c.rootCertificates || !!c.clientCert);
  if (!!c.clientCert !== !!c.clientKey) throw new TypeError('sandgate: clientCert and clientKey go together (mTLS)');
  if (!c.tls && c.clientCert) throw new TypeError('sandgate: a client certificate needs tls: true');
  if (!c.apiKey && !c.clientCert) {
    throw new TypeError('sandgate: no credentials: pass apiKey (or set SANDGATE_API_KEY), or a client certificate for mTLS');
  }
  return c;
}

function deadline(seconds) { return new Date(Date.now() + seconds * 1000); }

class Client {
  /**
   * @param {object} [options] addr, apiKey, userId, tls, rootCertificates,
   *   clientCert, clientKey (PEM Buffers or file paths), serverName, timeout
   *   (default deadline of unary calls, s), channelOptions.
   */
  constructor(options = {}) {
    this.config = resolveConfig(options);
    this.addr = this.config.addr;
    const creds = this.config.tls
      ? grpc.credentials.createSsl(pem(this.config.rootCertificates), pem(this.config.clientKey),
        pem(this.config.clientCert))
      : grpc.credentials.createInsecure();
    const opts = {
      'grpc.max_receive_message_length': 64 * MB, 'grpc.max_send_message_length': 64 * MB,
      ...this.config.channelOptions,
    };
    if (this.config.serverName) opts['grpc.ssl_target_name_override'] = this.config.serverName;
    const Svc = service();
    this._stub = new Svc(this.addr, creds, opts);
    this._md = new grpc.Metadata();
    if (this.config.apiKey) this._md.set('authorization', `Bearer ${this.config.apiKey}`);
  }

  get userId() { return this.config.userId; }

  /** Call a unary RPC by name; resolves to the reply or rejects with a SandgateError. */
  unary(method, request, timeout) {
    const t = timeout === undefined || timeout === null ? this.config.timeout : timeout;
    return new Promise((resolve, reject) => {
      this._stub[method](request, this._md, { deadline: deadline(t) }, (err, resp) => {
        if (err) reject(fromServiceError(err)); else resolve(resp);
      });
    });
  }

  /** Run a server-streaming RPC, calling onEvent(event) for each message;
   * resolves when the stream ends, rejects with a SandgateError. A throwing
   * onEvent, or an AbortSignal that fires, cancels the call and rejects with
   * what was thrown (the signal's reason). */
  stream(method, request, timeout, onEvent, signal) {
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) { reject(signal.reason); return; }
      const call = this._stub[method](request, this._md, { deadline: deadline(timeout) });
      let failed = null;
      const stop = (e) => { if (!failed) { failed = e; call.cancel(); } };
      const onAbort = () => stop(signal.reason);
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      const done = (fn) => { if (signal) signal.removeEventListener('abort', onAbort); fn(); };
      call.on('data', (ev) => {
        if (failed) return;
        try { onEvent(ev); } catch (e) { stop(e); }
      });
      call.on('error', (err) => done(() => reject(failed || fromServiceError(err))));
      call.on('end', () => done(() => (failed ? reject(failed) : resolve())));
    });
  }

  /** A client-streaming RPC by name: writes each message of `requests`
   * (an iterable or async iterable), waiting for the stream to drain, then
   * half-closes; resolves to the reply, rejects with a SandgateError. */
  clientStream(method, requests, timeout) {
    const t = timeout === undefined || timeout === null ? this.config.timeout : timeout;
    return new Promise((resolve, reject) => {
      let ended = false;
      const call = this._stub[method](this._md, { deadline: deadline(t) }, (err, resp) => {
        ended = true;
        if (err) reject(fromServiceError(err)); else resolve(resp);
      });
      (async () => {
        for await (const m of requests) {
          if (ended) return;
          if (!call.write(m)) await new Promise((r) => call.once('drain', r));
        }
        call.end();
      })().catch((e) => { call.cancel(); reject(e); });
    });
  }

  close() { this._stub.close(); }
}

module.exports = { Client, resolveConfig };
