// lib/errors.js — exceptions, chosen first by the ErrorInfo reason the
// gateway sends in the `grpc-status-details-bin` trailer (a google.rpc.Status
// holding a google.rpc.ErrorInfo), then by the gRPC status code; the same
// classes as the Python client. The trailer is decoded by hand (three tiny
// messages) so the package needs no protobuf runtime of its own.
'use strict';
const { status } = require('@grpc/grpc-js');

const DETAILS_KEY = 'grpc-status-details-bin';
const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';

class SandgateError extends Error {
  constructor(code, message, info = {}) {
    const name = Object.keys(status).find((k) => status[k] === code) || 'UNKNOWN';
    let text = `${name}: ${message || ''}`;
    if (info.reason) text += ` [${info.reason}${info.rule ? `, rule ${info.rule}` : ''}]`;
    super(text);
    this.name = new.target.name;
    this.code = code;              // grpc status number
    this.codeName = name;
    this.details = message || '';
    this.reason = info.reason || null;
    this.rule = info.rule || null;
    this.domain = info.domain || null;
    this.metadata = info.metadata || {};
  }

  /** True when the same call may succeed later (UNAVAILABLE). */
  get retryable() { return this.code === status.UNAVAILABLE; }
}
class Unauthenticated extends SandgateError {}
class PermissionDenied extends SandgateError {}
class PolicyDenied extends PermissionDenied {}
class NotFound extends SandgateError {}
class SandboxNotFound extends NotFound {}
// The sandbox was running when its host restarted: gone for good (reason
// SANDBOX_LOST, sent only to its owner). A SandboxNotFound; .lostAt is when.
class SandboxLost extends SandboxNotFound {
  get lostAt() { return this.metadata.lost_at || null; }
}
class QuotaExceeded extends SandgateError {}
class InvalidArgument extends SandgateError {}
class AlreadyExists extends SandgateError {}
class FailedPrecondition extends SandgateError {}
class Timeout extends SandgateError {}
class Unavailable extends SandgateError {}
class HostUnavailable extends Unavailable {}
class Cancelled extends SandgateError {}

const BY_REASON = {
  POLICY_DENIED: PolicyDenied, QUOTA_EXCEEDED: QuotaExceeded, SANDBOX_LOST: SandboxLost,
  SANDBOX_NOT_FOUND: SandboxNotFound, HOST_UNAVAILABLE: HostUnavailable,
  INVALID_ARGUMENT: InvalidArgument, UNAUTHENTICATED: Unauthenticated,
};
const BY_CODE = {
  [status.UNAUTHENTICATED]: Unauthenticated, [status.PERMISSION_DENIED]: PermissionDenied,
  [status.NOT_FOUND]: NotFound, [status.RESOURCE_EXHAUSTED]: QuotaExceeded,
  [status.INVALID_ARGUMENT]: InvalidArgument, [status.DEADLINE_EXCEEDED]: Timeout,
  [status.ALREADY_EXISTS]: AlreadyExists, [status.FAILED_PRECONDITION]: FailedPrecondition,
  [status.UNAVAILABLE]: Unavailable, [status.CANCELLED]: Cancelled,
};

// ---- protobuf wire format, only what the three messages need ---------------

function fields(buf) {
  const out = [];
  let i = 0;
  const varint = () => {
    let v = 0; let mul = 1;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated varint');
      const b = buf[i++];
      v += (b & 0x7f) * mul;
      if (!(b & 0x80)) return v;
      mul *= 128;
      if (mul > 2 ** 63) throw new Error('varint too long');
    }
  };
  while (i < buf.length) {
    const key = varint(); const no = Math.floor(key / 8); const wt = key & 7;
    if (wt === 0) out.push([no, varint()]);
    else if (wt === 2) {
      const n = varint();
      if (i + n > buf.length) throw new Error('truncated field');
      out.push([no, buf.subarray(i, i + n)]); i += n;
    } else if (wt === 1) i += 8;
    else if (wt === 5) i += 4;
    else throw new Error(`wire type ${wt}`);
  }
  return out;
}

/** {reason, domain, metadata, rule} from trailing metadata, or null when
 * absent or garbled (never fatal: the status code still tells). */
function errorInfo(md) {
  const raw = md && typeof md.get === 'function' ? md.get(DETAILS_KEY)[0] : null;
  if (!raw) return null;
  try {
    for (const [no, any] of fields(Buffer.from(raw))) {
      if (no !== 3) continue;
      let type = ''; let value = null;
      for (const [n, v] of fields(any)) {
        if (n === 1) type = v.toString('utf8');
        else if (n === 2) value = v;
      }
      if (type !== ERROR_INFO_TYPE || !value) continue;
      const info = { reason: '', domain: '', metadata: {} };
      for (const [n, v] of fields(value)) {
        if (n === 1) info.reason = v.toString('utf8');
        else if (n === 2) info.domain = v.toString('utf8');
        else if (n === 3) {
          let k = ''; let val = '';
          for (const [en, ev] of fields(v)) {
            if (en === 1) k = ev.toString('utf8'); else if (en === 2) val = ev.toString('utf8');
          }
          info.metadata[k] = val;
        }
      }
      info.rule = info.metadata.rule || null;
      return info;
    }
  } catch (_) {
    return null;
  }
  return null;
}

/** The SandgateError for a grpc-js ServiceError. */
function fromServiceError(err) {
  const code = typeof err.code === 'number' ? err.code : status.UNKNOWN;
  const message = err.details !== undefined ? err.details : err.message;
  const info = errorInfo(err.metadata) || {};
  let Cls = BY_REASON[info.reason] || BY_CODE[code] || SandgateError;
  if (Cls === NotFound && String(message).startsWith('no such sandbox')) Cls = SandboxNotFound;
  return new Cls(code, message, info);
}

module.exports = {
  SandgateError, Unauthenticated, PermissionDenied, PolicyDenied, NotFound, SandboxNotFound,
  SandboxLost, QuotaExceeded, InvalidArgument, Timeout, Unavailable, HostUnavailable, Cancelled,
  AlreadyExists, FailedPrecondition, fromServiceError, errorInfo,
};
