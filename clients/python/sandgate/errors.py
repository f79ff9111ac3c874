"""Exceptions. Every failed call raises a SandgateError subclass chosen first
by the machine-readable reason the gateway puts in the
`grpc-status-details-bin` trailer (a google.rpc.Status holding a
google.rpc.ErrorInfo), then by the gRPC status code.

    try:
        sb = Sandbox.create(egress=[("example.com", 443)])
    except PolicyDenied as e:
        print(e.rule, e.reason, e.metadata.get("asked"))

An exception raised by the code in a sandbox is not one of these: it is
Execution.error and the context survives it.
"""
from typing import Any, Dict, Iterable, Optional, Tuple, Type

import grpc

_DETAILS_KEY = "grpc-status-details-bin"
_ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"


class SandgateError(Exception):
    """A failed sandgate call.

    Attributes:
        code: the grpc.StatusCode.
        message: the server's status message (never internal addresses).
        reason: ErrorInfo.reason, e.g. "POLICY_DENIED", or None.
        rule: the policy rule that decided (ErrorInfo.metadata["rule"]), or None.
        domain: ErrorInfo.domain ("sandgate"), or None.
        metadata: ErrorInfo.metadata ({} without an ErrorInfo).
    """

    def __init__(self, code: Optional[grpc.StatusCode], message: str = "",
                 reason: Optional[str] = None, rule: Optional[str] = None,
                 domain: Optional[str] = None, metadata: Optional[Dict[str, str]] = None):
        self.code = code
        self.message = message or ""
        self.reason = reason
        self.rule = rule
        self.domain = domain
        self.metadata: Dict[str, str] = dict(metadata or {})
        text = "%s: %s" % (code.name if code is not None else "UNKNOWN", self.message)
        if reason:
            text += " [%s%s]" % (reason, ", rule " + rule if rule else "")
        super().__init__(text)

    @property
    def retryable(self) -> bool:
        """True when the same call may succeed later (UNAVAILABLE)."""
        return self.code == grpc.StatusCode.UNAVAILABLE


class Unauthenticated(SandgateError):
    """UNAUTHENTICATED: no, wrong or revoked API key, or a bad client certificate."""


class PermissionDenied(SandgateError):
    """PERMISSION_DENIED: e.g. another user's sandbox of the same tenant."""


class PolicyDenied(PermissionDenied):
    """The security policy denied the request (reason "POLICY_DENIED"):
    .rule names the rule, .metadata["asked"] what was asked."""


class NotFound(SandgateError):
    """NOT_FOUND: no such context or file (see SandboxNotFound for sandboxes)."""


class SandboxNotFound(NotFound):
    """No such sandbox for this tenant: never existed, killed, expired — or
    another tenant's, which looks exactly the same."""




class SandboxLost(SandboxNotFound):
    """The sandbox was running when its host restarted, so its processes and
    state are gone for good (reason "SANDBOX_LOST", sent only to its owner):
    create a new one. A SandboxNotFound, so code that handles "gone" keeps
    working; .lost_at is when (RFC 3339, UTC), or None."""

    @property
    def lost_at(self) -> Optional[str]:
        return self.metadata.get("lost_at") or None


class QuotaExceeded(SandgateError):
    """RESOURCE_EXHAUSTED: a quota or rate limit (reason "QUOTA_EXCEEDED";
    .rule names the limit)."""


class InvalidArgument(SandgateError):
    """INVALID_ARGUMENT: the request itself is malformed; the message names the field."""


class AlreadyExists(SandgateError):
    """ALREADY_EXISTS: e.g. MakeDir of an existing directory, RenameFile onto
    an existing path without overwrite."""


class FailedPrecondition(SandgateError):
    """FAILED_PRECONDITION: the target is in the wrong state, e.g. removing
    a non-empty directory without recursive, a rename that would replace a
    directory with a file."""


class Timeout(SandgateError):
    """DEADLINE_EXCEEDED: the call's client-side deadline passed. (Code that
    runs past its own timeout is not this: see Execution.timed_out.)"""


class Unavailable(SandgateError):
    """UNAVAILABLE: the gateway cannot be reached right now; retryable."""


class HostUnavailable(Unavailable):
    """The host holding the sandbox cannot be reached right now (reason
    "HOST_UNAVAILABLE"); retryable, the sandbox may still be there."""


class Cancelled(SandgateError):
    """CANCELLED: the call was cancelled (by this client or the server)."""


# Backwards-compatible names (sandgate 0.1).
AuthenticationError = Unauthenticated
PermissionDeniedError = PermissionDenied
NotFoundError = NotFound
QuotaExceededError = QuotaExceeded
InvalidArgumentError = InvalidArgument
DeadlineExceededError = Timeout
UnavailableError = Unavailable

_BY_REASON: Dict[str, Type[SandgateError]] = {
    "POLICY_DENIED": PolicyDenied,
    "QUOTA_EXCEEDED": QuotaExceeded,
    "SANDBOX_LOST": SandboxLost,
    "SANDBOX_NOT_FOUND": SandboxNotFound,
    "HOST_UNAVAILABLE": HostUnavailable,
    "INVALID_ARGUMENT": InvalidArgument,
    "UNAUTHENTICATED": Unauthenticated,
}

_BY_CODE: Dict[grpc.StatusCode, Type[SandgateError]] = {
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.RESOURCE_EXHAUSTED: QuotaExceeded,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.DEADLINE_EXCEEDED: Timeout,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.CANCELLED: Cancelled,
}

# The gateway answers exactly this for a sandbox it will not show the caller.
_NO_SUCH_SANDBOX = "no such sandbox"


def _trailer(md: Any) -> Optional[bytes]:
    if md is None:
        return None
    if hasattr(md, "get_all"):  # grpc.aio.Metadata
        vals = md.get_all(_DETAILS_KEY)
        return vals[0] if vals else None
    for key, value in md:
        if key == _DETAILS_KEY:
            return value
    return None


def error_info(trailers: Optional[Iterable[Tuple[str, Any]]]
               ) -> Optional[Tuple[str, str, Dict[str, str]]]:
    """(reason, domain, metadata) from a call's trailing metadata, or None
    when absent or garbled (never fatal: the status code still tells)."""
    raw = _trailer(trailers)
    if not raw:
        return None
    from ._rpc import epb
    try:
        st = epb.RpcStatus.FromString(raw)
        for any_ in st.details:
            if any_.type_url == _ERROR_INFO_TYPE:
                info = epb.ErrorInfo.FromString(any_.value)
                return info.reason, info.domain, dict(info.metadata)
    except Exception:
        return None
    return None


def from_status(code: Optional[grpc.StatusCode], message: str,
                trailers: Any = None) -> SandgateError:
    """The SandgateError for a status code, message and trailing metadata."""
    info = error_info(trailers)
    reason, domain, md = info if info else (None, None, {})
    cls = _BY_REASON.get(reason or "") or _BY_CODE.get(code, SandgateError)  # type: ignore
    if cls is NotFound and (message or "").startswith(_NO_SUCH_SANDBOX):
        cls = SandboxNotFound
    return cls(code, message, reason=reason or None, rule=md.get("rule") or None,
               domain=domain or None, metadata=md)


def from_rpc_error(err: Any) -> SandgateError:
    """Map a grpc.RpcError / grpc.aio.AioRpcError to a SandgateError."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    return from_status(code, message or "", trailers)
