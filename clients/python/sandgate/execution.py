"""What one action returns: Execution (RunCode) and ExecResult (Exec), built
from the server's event streams. Output arrives as byte chunks that may split
a UTF-8 character; it is decoded incrementally (invalid bytes replaced).
"""
import codecs
import collections

Result = collections.namedtuple("Result", "mime_type data")
Result.__doc__ = """A rich result: ("text/plain", b"repr") or ("image/png", png_bytes)."""

ExecutionError = collections.namedtuple("ExecutionError", "name value traceback")
ExecutionError.__doc__ = """The exception the code raised; the context survives it."""

End = collections.namedtuple(
    "End", "duration_us truncated output_bytes_total timed_out context_restarted")
End.__doc__ = """The last event of a run: truncated means output past the cap
was cut (output_bytes_total is what the code produced); context_restarted
means the context was killed after a timeout and its state is lost."""


class _Text:
    """Incremental UTF-8 decoding of one output stream, with a callback."""

    def __init__(self, callback):
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        self._parts = []
        self._cb = callback

    def feed(self, data):
        s = self._dec.decode(data)
        if s:
            self._parts.append(s)
            if self._cb:
                self._cb(s)

    def finish(self):
        s = self._dec.decode(b"", final=True)
        if s:
            self._parts.append(s)
            if self._cb:
                self._cb(s)
        return "".join(self._parts)


class Execution:
    """The outcome of run_code.

    logs     {"stdout": str, "stderr": str}
    results  [Result(mime_type, data)] in the order produced
    error    ExecutionError(name, value, traceback) or None
    end      End(...) — None only if the stream ended without one
    """

    def __init__(self):
        self.logs = {"stdout": "", "stderr": ""}
        self.results = []
        self.error = None
        self.end = None

    @property
    def text(self):
        """The text/plain result (repr of the final expression), or None."""
        for r in self.results:
            if r.mime_type == "text/plain":
                return r.data.decode("utf-8", "replace")
        return None

    @property
    def truncated(self):
        return bool(self.end and self.end.truncated)

    @property
    def timed_out(self):
        return bool(self.end and self.end.timed_out)

    def __repr__(self):
        return "Execution(logs=%r, results=%r, error=%r, end=%r)" % (
            self.logs, self.results, self.error, self.end)

    @classmethod
    def from_events(cls, events, on_stdout=None, on_stderr=None, on_result=None,
                    on_error=None):
        ex = cls()
        out, err = _Text(on_stdout), _Text(on_stderr)
        for ev in events:
            kind = ev.WhichOneof("event")
            if kind == "stdout":
                out.feed(ev.stdout.data)
            elif kind == "stderr":
                err.feed(ev.stderr.data)
            elif kind == "result":
                r = Result(ev.result.mime_type, bytes(ev.result.data))
                ex.results.append(r)
                if on_result:
                    on_result(r)
            elif kind == "error":
                ex.error = ExecutionError(ev.error.name, ev.error.value, ev.error.traceback)
                if on_error:
                    on_error(ex.error)
            elif kind == "end":
                e = ev.end
                ex.end = End(e.duration_us, e.truncated, e.output_bytes_total, e.timed_out,
                             e.context_restarted)
        ex.logs = {"stdout": out.finish(), "stderr": err.finish()}
        return ex


ExitInfo = collections.namedtuple(
    "ExitInfo", "exit_code signal timed_out truncated output_bytes_total duration_us")


class ExecResult(collections.namedtuple("ExecResult", "exit_code stdout stderr")):
    """(exit_code, stdout, stderr) of a shell command; .info is the ExitInfo
    (signal, timed_out, truncated, ...), None if the stream had no exit."""

    info = None

    @classmethod
    def from_events(cls, events, on_stdout=None, on_stderr=None):
        out, err = _Text(on_stdout), _Text(on_stderr)
        info = None
        for ev in events:
            kind = ev.WhichOneof("event")
            if kind == "stdout":
                out.feed(ev.stdout.data)
            elif kind == "stderr":
                err.feed(ev.stderr.data)
            elif kind == "exit":
                x = ev.exit
                info = ExitInfo(x.exit_code, x.signal, x.timed_out, x.truncated,
                                x.output_bytes_total, x.duration_us)
        res = cls(info.exit_code if info else -1, out.finish(), err.finish())
        res.info = info
        return res
