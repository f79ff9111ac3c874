"""What one action returns, built from the server's event streams:
Execution (run_code), CommandResult (commands.run) and SandboxInfo.

Output arrives as byte chunks that may split a UTF-8 character; it is
decoded incrementally (invalid bytes replaced). The accumulators here are
shared by the blocking and the asyncio API: feed() returns the callbacks to
call, and the caller calls (or awaits) them.
"""
import base64
import codecs
import datetime
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

Callback = Optional[Callable[[Any], Any]]
Pending = List[Tuple[Callable[[Any], Any], Any]]


@dataclass(frozen=True)
class Result:
    """One rich result of a cell, as a notebook shows it: the value of its
    final expression (the main result), an object passed to display(), or a
    matplotlib figure — with every representation it has.

    The format properties return the data in that format or None:
    .text (str), .png / .jpeg (bytes), .svg / .html / .markdown / .latex (str),
    .json (parsed). .representations maps each MIME type to its bytes;
    .mime_type/.data is the one older servers sent (a figure's PNG, else the
    text). .dropped: the output cap dropped some of it (.notice says what).
    """

    mime_type: str
    data: bytes
    representations: Dict[str, bytes] = field(default_factory=dict)
    main: Optional[bool] = None      # None: a server without the flag
    dropped: bool = False
    notice: str = ""

    def _bytes(self, mime: str) -> Optional[bytes]:
        if mime in self.representations:
            return self.representations[mime]
        return self.data if self.mime_type == mime else None

    def _str(self, mime: str) -> Optional[str]:
        b = self._bytes(mime)
        return b.decode("utf-8", "replace") if b is not None else None

    @property
    def text(self) -> Optional[str]:
        return self._str("text/plain")

    @property
    def png(self) -> Optional[bytes]:
        return self._bytes("image/png")

    @property
    def jpeg(self) -> Optional[bytes]:
        return self._bytes("image/jpeg")

    @property
    def svg(self) -> Optional[str]:
        return self._str("image/svg+xml")

    @property
    def html(self) -> Optional[str]:
        return self._str("text/html")

    @property
    def markdown(self) -> Optional[str]:
        return self._str("text/markdown")

    @property
    def latex(self) -> Optional[str]:
        return self._str("text/latex")

    @property
    def json(self) -> Any:
        s = self._str("application/json")
        return json.loads(s) if s is not None else None

    @property
    def is_main_result(self) -> bool:
        """True for the value of the cell's final expression."""
        if self.main is not None:
            return self.main
        return self.mime_type == "text/plain"

    def base64(self) -> str:
        """The data base64-encoded (what E2B-style code expects for images)."""
        return base64.b64encode(self.data).decode("ascii")

    def formats(self) -> List[str]:
        return list(self.representations) or [self.mime_type]

    def __repr__(self) -> str:
        if self.mime_type.startswith("text/"):
            return "Result(%s: %r)" % (self.mime_type, self.data[:200].decode("utf-8", "replace"))
        return "Result(%s, %d bytes)" % (self.mime_type, len(self.data))


@dataclass(frozen=True)
class ExecutionError:
    """The exception the code raised (the context survives it)."""

    name: str        # exception class, e.g. "ZeroDivisionError"
    value: str       # str(exception)
    traceback: str   # formatted, starting in the user's cell


@dataclass
class Logs:
    """Everything the code printed, decoded."""

    stdout: str = ""
    stderr: str = ""

    # The 0.1 API returned logs as a dict.
    def __getitem__(self, key: str) -> str:
        if key not in ("stdout", "stderr"):
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default) if key in ("stdout", "stderr") else default


@dataclass(frozen=True)
class End:
    """The last event of a run."""

    duration_us: int
    truncated: bool           # output past the cap was cut
    output_bytes_total: int   # bytes the code produced, including what was cut
    timed_out: bool
    context_restarted: bool   # the context was killed and restarted: its state is lost
    results_dropped: int = 0  # results the output cap dropped representations of


@dataclass
class Execution:
    """The outcome of run_code.

    logs     Logs(stdout, stderr)
    results  [Result] in the order produced; .text is the main result's text
    error    ExecutionError or None (the code's own exception)
    end      End, or None if the stream ended without one
    truncated, timed_out, context_restarted, output_bytes_total, duration_ms
             shortcuts into end (False/0 without one)
    """

    logs: Logs = field(default_factory=Logs)
    results: List[Result] = field(default_factory=list)
    error: Optional[ExecutionError] = None
    end: Optional[End] = None

    @property
    def text(self) -> Optional[str]:
        """The text/plain result (repr of the final expression), or None."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @property
    def truncated(self) -> bool:
        return bool(self.end and self.end.truncated)

    @property
    def timed_out(self) -> bool:
        return bool(self.end and self.end.timed_out)

    @property
    def context_restarted(self) -> bool:
        return bool(self.end and self.end.context_restarted)

    @property
    def output_bytes_total(self) -> int:
        return self.end.output_bytes_total if self.end else 0

    @property
    def duration_ms(self) -> float:
        return self.end.duration_us / 1000.0 if self.end else 0.0


class _Text:
    """Incremental UTF-8 decoding of one output stream."""

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        self._parts: List[str] = []

    def feed(self, data: bytes, final: bool = False) -> str:
        s = self._dec.decode(data, final=final)
        if s:
            self._parts.append(s)
        return s

    def text(self) -> str:
        return "".join(self._parts)


class RunCodeAccumulator:
    """Builds an Execution from RunCodeEvent messages."""

    def __init__(self, on_stdout: Callback = None, on_stderr: Callback = None,
                 on_result: Callback = None, on_error: Callback = None):
        self.ex = Execution()
        self._out, self._err = _Text(), _Text()
        self._cb = {"stdout": on_stdout, "stderr": on_stderr, "result": on_result,
                    "error": on_error}

    def _call(self, kind: str, arg: Any, pending: Pending) -> None:
        cb = self._cb[kind]
        if cb is not None and arg:
            pending.append((cb, arg))

    def feed(self, ev: Any) -> Pending:
        pending: Pending = []
        kind = ev.WhichOneof("event")
        if kind == "stdout":
            self._call("stdout", self._out.feed(ev.stdout.data), pending)
        elif kind == "stderr":
            self._call("stderr", self._err.feed(ev.stderr.data), pending)
        elif kind == "result":
            x = ev.result
            reps = {p.mime_type: bytes(p.data) for p in x.representations}
            # A server that sets neither has no is_main_result: fall back.
            main = x.is_main_result if (reps or x.dropped) else None
            r = Result(x.mime_type, bytes(x.data), reps, main, x.dropped, x.notice)
            self.ex.results.append(r)
            self._call("result", r, pending)
        elif kind == "error":
            self.ex.error = ExecutionError(ev.error.name, ev.error.value, ev.error.traceback)
            self._call("error", self.ex.error, pending)
        elif kind == "end":
            e = ev.end
            self.ex.end = End(e.duration_us, e.truncated, e.output_bytes_total, e.timed_out,
                              e.context_restarted, e.results_dropped)
        return pending

    def finish(self) -> Pending:
        pending: Pending = []
        self._call("stdout", self._out.feed(b"", True), pending)
        self._call("stderr", self._err.feed(b"", True), pending)
        self.ex.logs = Logs(self._out.text(), self._err.text())
        return pending


@dataclass
class CommandResult:
    """A shell command's outcome (commands.run)."""

    exit_code: int            # -1 when killed by a signal, or no exit event
    stdout: str
    stderr: str
    signal: int = 0
    timed_out: bool = False
    truncated: bool = False
    output_bytes_total: int = 0
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def __iter__(self) -> Any:  # exit_code, stdout, stderr = sb.commands.run(...)
        return iter((self.exit_code, self.stdout, self.stderr))


class ExecAccumulator:
    """Builds a CommandResult from ExecEvent messages."""

    def __init__(self, on_stdout: Callback = None, on_stderr: Callback = None):
        self._out, self._err = _Text(), _Text()
        self._on = {"stdout": on_stdout, "stderr": on_stderr}
        self._exit: Any = None

    def feed(self, ev: Any) -> Pending:
        kind = ev.WhichOneof("event")
        if kind in ("stdout", "stderr"):
            s = (self._out if kind == "stdout" else self._err).feed(getattr(ev, kind).data)
            cb = self._on[kind]
            return [(cb, s)] if cb and s else []
        if kind == "exit":
            self._exit = ev.exit
        return []

    def finish(self) -> Tuple[CommandResult, Pending]:
        pending: Pending = []
        for kind, t in (("stdout", self._out), ("stderr", self._err)):
            s = t.feed(b"", True)
            if s and self._on[kind]:
                pending.append((self._on[kind], s))  # type: ignore
        x = self._exit
        if x is None:
            return CommandResult(-1, self._out.text(), self._err.text()), pending
        return CommandResult(x.exit_code, self._out.text(), self._err.text(), x.signal,
                             x.timed_out, x.truncated, x.output_bytes_total,
                             x.duration_us / 1000.0), pending


def _ms(v: int) -> Optional[datetime.datetime]:
    return datetime.datetime.fromtimestamp(v / 1000.0, datetime.timezone.utc) if v else None


@dataclass(frozen=True)
class SandboxInfo:
    """What the gateway says about one sandbox."""

    sandbox_id: str
    template: str
    user_id: str
    task_id: str
    created_at: Optional[datetime.datetime]
    expires_at: Optional[datetime.datetime]
    state: str  # "running" or "terminated"
    metadata: Dict[str, str] = field(default_factory=dict)  # labels

    @classmethod
    def from_pb(cls, m: Any) -> "SandboxInfo":
        from ._rpc import pb
        state = pb.SandboxState.Name(m.state).replace("SANDBOX_STATE_", "").lower()
        md = dict(m.metadata) if "metadata" in m.DESCRIPTOR.fields_by_name else {}
        return cls(m.sandbox_id, m.template, m.user_id, m.task_id, _ms(m.created_at),
                   _ms(m.expires_at), state, md)


class SandboxList(List[SandboxInfo]):
    """Sandbox.list()'s answer: a list of SandboxInfo, plus
    .unreachable_hosts, the hosts the gateway could not ask (their sandboxes
    are missing from the list; empty when the answer is complete)."""

    unreachable_hosts: List[str]
    next_page_token: str   # "" = the last page; pass as page_token for the next

    def __init__(self, items: Any = (), unreachable_hosts: Any = (), next_page_token: str = ""):
        super().__init__(items)
        self.unreachable_hosts = list(unreachable_hosts)
        self.next_page_token = next_page_token
