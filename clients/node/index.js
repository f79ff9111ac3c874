// @sandgate/client — Node client for the sandgate gateway (sandgate.v1.Sandboxes).
//
//   const { Sandbox } = require('@sandgate/client');
//   await Sandbox.using({ userId: 'u1', taskId: 't1' }, async (sb) => {
//     const ex = await sb.runCode('x = 21 * 2\nx', { timeout: 30 });
//     console.log(ex.text, ex.logs.stdout);
//   });
//
// Connection settings: options (addr, apiKey, tls, ...; or a shared client)
// or SANDGATE_ADDR, SANDGATE_API_KEY, SANDGATE_USER and the TLS variables.
// Types: index.d.ts. Failed calls reject with SandgateError subclasses.
'use strict';
const errors = require('./lib/errors');
const { Client } = require('./lib/client');
const { Result, Execution } = require('./lib/execution');
const { Sandbox, CodeContext, Commands, Files } = require('./lib/sandbox');
const { Process, Pty } = require('./lib/processes');

module.exports = {
  Sandbox, CodeContext, Commands, Files, Client, Execution, Result, Process, Pty,
  SandgateError: errors.SandgateError, Unauthenticated: errors.Unauthenticated,
  PermissionDenied: errors.PermissionDenied, PolicyDenied: errors.PolicyDenied,
  NotFound: errors.NotFound, SandboxNotFound: errors.SandboxNotFound, SandboxLost: errors.SandboxLost,
  QuotaExceeded: errors.QuotaExceeded, InvalidArgument: errors.InvalidArgument,
  Timeout: errors.Timeout, Unavailable: errors.Unavailable, HostUnavailable: errors.HostUnavailable,
  Cancelled: errors.Cancelled, AlreadyExists: errors.AlreadyExists,
  FailedPrecondition: errors.FailedPrecondition,
};
