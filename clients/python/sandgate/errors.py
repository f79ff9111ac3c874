"""Exceptions: every failed call surfaces as a SandgateError (or a subclass
chosen by its gRPC status code). Policy denials carry the machine-readable
reason from the `grpc-status-details-bin` trailer (a google.rpc.Status whose
details hold a google.rpc.ErrorInfo): .reason, .rule, .domain, .metadata.
"""
import grpc

from . import _stubs

_DETAILS_KEY = "grpc-status-details-bin"
_ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"


class SandgateError(Exception):
    """A failed sandgate call.

    code     grpc.StatusCode
    message  the status message from the server
    reason   ErrorInfo.reason, e.g. "POLICY_DENIED", "QUOTA_EXCEEDED" (or None)
    rule     the policy rule that decided (ErrorInfo.metadata["rule"], or None)
    domain   ErrorInfo.domain ("sandgate"), or None
    metadata ErrorInfo.metadata as a dict ({} when there is no ErrorInfo)
    """

    def __init__(self, code, message, reason=None, rule=None, domain=None, metadata=None):
        self.code = code
        self.message = message or ""
        self.reason = reason
        self.rule = rule
        self.domain = domain
        self.metadata = dict(metadata or {})
        text = "%s: %s" % (code.name if code is not None else "UNKNOWN", self.message)
        if reason:
            text += " [%s%s]" % (reason, ", rule " + rule if rule else "")
        super().__init__(text)


class AuthenticationError(SandgateError):
    """UNAUTHENTICATED: missing or wrong API key."""


class NotFoundError(SandgateError):
    """NOT_FOUND: no such sandbox or context for this tenant (another
    tenant's sandbox looks exactly like one that does not exist)."""


class PermissionDeniedError(SandgateError):
    """PERMISSION_DENIED: another user's sandbox, or a policy denial
    (then .reason is "POLICY_DENIED" and .rule names the rule)."""


class QuotaExceededError(SandgateError):
    """RESOURCE_EXHAUSTED: a quota or rate limit (.reason "QUOTA_EXCEEDED")."""


class InvalidArgumentError(SandgateError):
    """INVALID_ARGUMENT: the request itself is malformed."""


class DeadlineExceededError(SandgateError):
    """DEADLINE_EXCEEDED: the client-side deadline passed before the reply."""


class UnavailableError(SandgateError):
    """UNAVAILABLE: the gateway or its host cannot be reached; retryable."""


_BY_CODE = {
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: QuotaExceededError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
}


def _error_info(trailers):
    """(reason, domain, metadata) from a grpc-status-details-bin trailer, or
    None when it is absent or does not parse (never fatal: the status code
    alone still says what happened)."""
    raw = None
    for key, value in trailers or ():
        if key == _DETAILS_KEY:
            raw = value
            break
    if not raw:
        return None
    epb = _stubs.errors_pb()
    try:
        st = epb.RpcStatus.FromString(raw)
        for any_ in st.details:
            if any_.type_url == _ERROR_INFO_TYPE:
                info = epb.ErrorInfo.FromString(any_.value)
                return info.reason, info.domain, dict(info.metadata)
    except Exception:  # a garbled trailer must not hide the real status
        return None
    return None


def from_rpc_error(err):
    """Map a grpc.RpcError (which is also a grpc.Call) to a SandgateError."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    info = _error_info(trailers)
    cls = _BY_CODE.get(code, SandgateError)
    if info is None:
        return cls(code, message)
    reason, domain, md = info
    return cls(code, message, reason=reason or None, rule=md.get("rule") or None,
               domain=domain or None, metadata=md)
