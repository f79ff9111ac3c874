"""notebook.py — running one cell of code with notebook semantics.

Owns: compiling a cell (ast split of a final expression; a trailing `;`
hides its value, as in Jupyter), exec/eval in the context's persistent
globals, when the cell's results are made (the final value, then the
matplotlib figures it left open) and the error frame ('x', with the
traceback cut down to the user's frames). What a result contains and how it
is sent is display.py's (display() and plt.show() send during the run); the
socket loop and the 'd' frame are context.py's, stdout/stderr streams.py's.

An 'x' frame has no continuation marker, so a long traceback is cut with a
notice; results are split across frames (PROTOCOL.md section 4).
"""

import ast
import builtins
import linecache
import sys
import traceback
import types

import display
import frames
import mplinline  # noqa: F401  (installs the pyplot hook)

# The runtime's frames (running the cell, formatting its results) come from
# these files; they are cut off the start of tracebacks.
_RUNTIME_FILES = frozenset((__file__, display.__file__, mplinline.__file__))

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
        self._pub = display.Publisher(emit)

    def run(self, source):
        self.count += 1
        filename = "<cell-%d>" % self.count
        text = source.decode("utf-8", "replace")
        # Tracebacks read source lines from linecache; mtime None keeps
        # checkcache() from dropping the entry.
        linecache.cache[filename] = (len(text), None,
                                     text.splitlines(True), filename)
        self._pub.new_cell()
        display.current = self._pub
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
                # Formatting runs user code (_repr_*_), so it is part of the
                # run: a timeout interrupts it and its errors are the cell's.
                if value is not None:
                    self._pub.publish(value, main=True)
            finally:
                self.running = False
        except BaseException as e:
            self._error(e)
        self._figures()

    @staticmethod
    def _compile(text, filename):
        tree = ast.parse(text, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            expr = tree.body.pop()
            if not _semicolon_after(text, expr):
                last = compile(ast.Expression(expr.value), filename, "eval",
                               dont_inherit=True)
            else:
                tree.body.append(expr)
        body = compile(tree, filename, "exec", dont_inherit=True)
        return body, last

    def _error(self, e, user_frames=True):
        tb = e.__traceback__ if user_frames else None
        # Drop the runtime's own frames (run -> exec) so the traceback starts
        # in <cell-N>.
        while tb is not None and tb.tb_frame.f_code.co_filename in _RUNTIME_FILES:
            tb = tb.tb_next
        try:
            te = traceback.TracebackException(type(e), e, tb)
            _drop_runtime_frames(te)
            text = "".join(te.format())
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
        # Figures the cell left open (pyplot), as a notebook shows them after
        # the cell; sent ones are skipped. Rendering is part of the run.
        try:
            self.running = True
            try:
                self._pub.figures()
            finally:
                self.running = False
        except BaseException as e:
            self._error(e)
            try:
                mplinline.close_all()
            except BaseException:
                pass


def _drop_runtime_frames(te, seen=None):
    """Take the runtime's frames out of a traceback and of the exceptions
    chained to it: display() and plt.show() called from a cell run runtime
    code between the user's frames, and its file paths are the host's."""
    seen = set() if seen is None else seen
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if f.filename not in _RUNTIME_FILES])
        if te.__cause__ is not None:
            _drop_runtime_frames(te.__cause__, seen)
        te = te.__context__


def _semicolon_after(text, expr):
    """True when the final expression is followed by `;` (Jupyter: do not
    show its value). Column offsets are in UTF-8 bytes."""
    lines = text.splitlines()
    try:
        tail = lines[expr.end_lineno - 1].encode("utf-8")[expr.end_col_offset:]
    except (IndexError, TypeError):
        return False
    return tail.decode("utf-8", "replace").lstrip().startswith(";")
