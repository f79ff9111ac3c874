"""notebook.py — running one cell of code with notebook semantics.

Owns: compiling a cell (ast split of a final expression), exec/eval in the
context's persistent globals, the result frames ('r': repr of the final
value, PNGs of open matplotlib figures) and the error frame ('x', with the
traceback cut down to the user's frames). It does not own the socket loop or
the 'd' frame (context.py), nor stdout/stderr (streams.py).

Every frame it emits fits in one message: PROTOCOL.md has no continuation
marker for 'r' and 'x', so long reprs and tracebacks are cut with a notice
and figures are re-rendered at a lower dpi until they fit.
"""

import ast
import builtins
import io
import linecache
import sys
import traceback
import types

import frames

# Only the runtime's frames come from this file; cut them off tracebacks.
_THIS_FILE = __file__

_NAME_MAX = 256
_VALUE_MAX = 8 * 1024


def _cut(data, limit, keep_tail=False):
    """Shorten UTF-8 bytes to <= limit, saying how much was cut."""
    if len(data) <= limit:
        return data
    note = ("\n[... %d bytes cut ...]\n" % (len(data) - limit)).encode()
    room = max(0, limit - len(note))
    if keep_tail:
        # The end of a traceback (innermost frame, the error) matters most.
        return note + data[len(data) - room:].decode("utf-8", "ignore").encode()
    return data[:room].decode("utf-8", "ignore").encode() + note


class Notebook:
    """The persistent state of one context: globals and the cell counter."""

    def __init__(self, emit):
        self._emit = emit  # emit(ftype: str, payload: bytes)
        # A real module as __main__, so pickle finds classes defined in cells.
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.globals = main.__dict__
        self.count = 0
        # True only while user code runs: the SIGINT handler raises
        # KeyboardInterrupt only then, so a late interrupt never hits the
        # runtime between runs.
        self.running = False

    def run(self, source):
        self.count += 1
        filename = "<cell-%d>" % self.count
        text = source.decode("utf-8", "replace")
        # Tracebacks read source lines from linecache; mtime None keeps
        # checkcache() from dropping the entry.
        linecache.cache[filename] = (len(text), None,
                                     text.splitlines(True), filename)
        try:
            body, last = self._compile(text, filename)
        except BaseException as e:
            self._error(e, user_frames=False)
            return
        try:
            self.running = True
            try:
                exec(body, self.globals)
                value = eval(last, self.globals) if last is not None else None
                text_result = repr(value) if value is not None else None
            finally:
                self.running = False
        except BaseException as e:
            self._error(e)
            return
        self._figures()
        if text_result is not None:
            self._result("text/plain",
                         text_result.encode("utf-8", "replace"))

    @staticmethod
    def _compile(text, filename):
        tree = ast.parse(text, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            expr = tree.body.pop()
            last = compile(ast.Expression(expr.value), filename, "eval",
                           dont_inherit=True)
        body = compile(tree, filename, "exec", dont_inherit=True)
        return body, last

    def _result(self, mime, data):
        head = mime.encode() + b"\0"
        self._emit("r", head + _cut(data, frames.PAYLOAD_MAX - len(head)))

    def _error(self, e, user_frames=True):
        tb = e.__traceback__ if user_frames else None
        # Drop the runtime's own frames (run -> exec) so the traceback starts
        # in <cell-N>.
        while tb is not None and tb.tb_frame.f_code.co_filename == _THIS_FILE:
            tb = tb.tb_next
        try:
            text = "".join(traceback.format_exception(type(e), e, tb))
        except BaseException:
            text = "%s\n" % type(e).__name__
        try:
            value = str(e)
        except BaseException:
            value = "<str() of the exception failed>"
        name = type(e).__name__.encode("utf-8", "replace")[:_NAME_MAX]
        value = _cut(value.encode("utf-8", "replace"), _VALUE_MAX)
        room = frames.PAYLOAD_MAX - len(name) - len(value) - 2
        text = _cut(text.encode("utf-8", "replace"), room, keep_tail=True)
        self._emit("x", name + b"\0" + value + b"\0" + text)

    def _figures(self):
        # Only when the user's code imported pyplot: importing matplotlib
        # ourselves would cost every context time and memory.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            nums = list(plt.get_fignums())
        except BaseException:
            return
        head = b"image/png\0"
        room = frames.PAYLOAD_MAX - len(head)
        for num in nums:
            try:
                self.running = True
                try:
                    fig = plt.figure(num)
                    dpi = fig.dpi
                    while True:
                        buf = io.BytesIO()
                        fig.savefig(buf, format="png", dpi=dpi)
                        png = buf.getvalue()
                        if len(png) <= room or dpi < 10:
                            break
                        dpi *= 0.7
                finally:
                    self.running = False
            except BaseException as e:
                self._error(e)
                continue
            if len(png) <= room:
                self._emit("r", head + png)
            else:
                self._emit("e", b"[figure %d too large for one frame; "
                                b"not sent]\n" % num)
        try:
            plt.close("all")
        except BaseException:
            pass
