"""Request building shared by the blocking (sandbox.py) and asyncio (aio.py)
APIs, so the two cannot drift: every public argument is checked and turned
into its proto message here, once."""
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

from ._rpc import pb

# Extra client-side deadline on top of an action's own timeout: the server
# enforces the timeout (and its grace period); this only bounds a stuck call.
DEADLINE_SLACK = 60.0
DEFAULT_ACTION_DEADLINE = 600.0

Egress = Iterable[Union[str, Tuple[str, int], Mapping[str, Any]]]


def action_deadline(timeout: Optional[float], request_timeout: Optional[float]) -> float:
    if request_timeout:
        return float(request_timeout)
    return float(timeout) + DEADLINE_SLACK if timeout else DEFAULT_ACTION_DEADLINE


def _seconds(name: str, v: Optional[float]) -> int:
    if v is None:
        return 0
    if v < 0:
        raise ValueError("sandgate: %s must be >= 0 seconds, got %r" % (name, v))
    # The server counts whole seconds; a fraction rounds up, never to "default".
    return int(-(-v // 1))


def user(user_id: Optional[str], default: Optional[str]) -> str:
    u = user_id if user_id is not None else default
    if not u:
        raise ValueError("sandgate: no user_id (pass user_id= or set SANDGATE_USER)")
    return u


def create(template: str, user_id: str, task_id: str, ttl_seconds: Optional[float],
           env: Optional[Mapping[str, str]], egress: Egress, secrets: Iterable[str],
           user_token: str, metadata: Optional[Mapping[str, str]] = None) -> Any:
    req = pb.CreateSandboxRequest(template=template, user_id=user_id, task_id=task_id,
                                  ttl_seconds=_seconds("ttl_seconds", ttl_seconds),
                                  secrets=list(secrets or ()), user_token=user_token or "")
    req.env.update(dict(env or {}))
    req.metadata.update(dict(metadata or {}))
    for t in egress or ():
        if isinstance(t, str):
            host, port = t, 0
        elif isinstance(t, Mapping):
            host, port = t["host"], t.get("port", 0)
        else:
            host, port = t
        req.egress.add(host=host, port=int(port or 0))
    return req


def ref(cls: Any, sandbox_id: str, user_id: str, **kw: Any) -> Any:
    return cls(sandbox_id=sandbox_id, user_id=user_id, **kw)


def run_code(sandbox_id: str, user_id: str, code: str, context: Any,
             timeout: Optional[float], max_output_bytes: Optional[int]) -> Any:
    ctx = getattr(context, "context_id", context) or ""
    return pb.RunCodeRequest(sandbox_id=sandbox_id, user_id=user_id, context_id=ctx, code=code,
                             timeout_seconds=_seconds("timeout", timeout),
                             max_output_bytes=int(max_output_bytes or 0))


def exec_(sandbox_id: str, user_id: str, cmd: str, timeout: Optional[float],
          max_output_bytes: Optional[int]) -> Any:
    return pb.ExecRequest(sandbox_id=sandbox_id, user_id=user_id, command=cmd,
                          timeout_seconds=_seconds("timeout", timeout),
                          max_output_bytes=int(max_output_bytes or 0))


def process(sandbox_id: str, user_id: str, cmd: str, timeout: Optional[float],
            max_output_bytes: Optional[int], pty: bool, rows: int, cols: int,
            background: bool = True) -> Any:
    """Exec as a process: background (started, then the call ends) or a PTY."""
    return pb.ExecRequest(sandbox_id=sandbox_id, user_id=user_id, command=cmd,
                          timeout_seconds=_seconds("timeout", timeout),
                          max_output_bytes=int(max_output_bytes or 0), background=background,
                          pty=bool(pty), pty_rows=int(rows or 0), pty_cols=int(cols or 0))


def signal_fields(sig: Union[int, str, None]) -> Dict[str, Any]:
    """SignalProcessRequest fields: a number (signal=) or a name (signal_name=)."""
    if sig is None:
        return {}
    if isinstance(sig, int):
        return {"signal": int(sig)}
    return {"signal_name": str(sig)}


def extend(sandbox_id: str, user_id: str, seconds: float) -> Any:
    return pb.ExtendSandboxRequest(sandbox_id=sandbox_id, user_id=user_id,
                                   ttl_seconds=_seconds("timeout", seconds))


def write(sandbox_id: str, user_id: str, path: str, data: Union[str, bytes], mode: int) -> Any:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return pb.WriteFileRequest(sandbox_id=sandbox_id, user_id=user_id, path=path,
                               data=bytes(data), mode=int(mode or 0))


def decode_read(data: bytes, format: str) -> Union[str, bytes]:
    if format == "bytes":
        return bytes(data)
    if format == "text":
        return bytes(data).decode("utf-8", "replace")
    raise ValueError("sandgate: format must be 'text' or 'bytes', got %r" % (format,))


def list_answer(resp: Any) -> Tuple[list, list]:
    """(sandboxes, unreachable hosts) from a ListSandboxesResponse; the
    second is read only if this proto has such a field."""
    unreachable: list = []
    for name in ("unreachable_hosts", "unreachable"):
        if name in resp.DESCRIPTOR.fields_by_name:
            unreachable = list(getattr(resp, name))
            break
    return list(resp.sandboxes), unreachable


def upload_requests(sandbox_id: str, user_id: str, path: str, data: Any, offset: int,
                    chunk_size: int, mode: int, size: int) -> Iterable[Any]:
    """UploadFile's stream: the first message names the file, the rest carry
    data only. data: bytes/str, or a binary file-like object (read in chunks)."""
    if isinstance(data, str):
        data = data.encode()
    if chunk_size <= 0 or chunk_size > 4 << 20:
        raise ValueError("chunk_size must be 1..4194304 bytes")
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        pieces = (bytes(view[i:i + chunk_size]) for i in range(0, len(view), chunk_size))
    else:
        pieces = iter(lambda: data.read(chunk_size), b"")
    first = pb.UploadFileRequest(sandbox_id=sandbox_id, user_id=user_id, path=path,
                                 offset=int(offset), mode=int(mode), size=int(size))
    piece = next(pieces, b"")
    first.data = piece
    yield first
    for piece in pieces:
        yield pb.UploadFileRequest(data=piece)

_CTX_STATES = {1: "starting", 2: "idle", 3: "running", 4: "restarting"}


def ctx_fields(info: Any) -> Dict[str, Any]:
    """ContextInfo -> CodeContext keyword arguments."""
    return {"language": info.language or "python",
            "state": _CTX_STATES.get(info.state, "unknown"),
            "created_at": info.created_at, "restarts": info.restarts}
