"""display.py — rich results: what an object looks like in a notebook.

Owns: an object's representations by MIME type (`_repr_mimebundle_`, the
`_repr_*_` methods, matplotlib figures), the `display()` builtin, and sending
one result as frames (`b`, `k`…, `r`…, `f`; PROTOCOL.md section 4). It does
not decide when a cell's results are made (notebook.py: the last expression,
figures left open) nor how pyplot is hooked (mplinline.py).

Representations are sent in full, split across frames; the host applies the
run's output cap and tells the agent what it dropped (host/core/context.c), so
nothing here cuts data, except a representation too large for any cap the
host would grant (REP_MAX), which is reported on stderr and not sent.
"""

import base64
import builtins
import json
import sys

import frames

# The _repr_*_ methods IPython defines, in the order a result lists them
# (after text/plain, which is always first).
_REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
    ("application/pdf", "_repr_pdf_"),
)
# Binary types: a str for one of them is base64 (the IPython convention).
_BINARY = frozenset(("image/png", "image/jpeg", "image/gif", "application/pdf"))
_MIME_MAX = 127      # the host reads at most 128 bytes of a MIME type
REP_MAX = 32 << 20   # the host never forwards a result larger than 2 MiB

# The Publisher of the context's current run; display() and plt.show() send
# through it. Set by notebook.py at the start of every run (the zygote's and
# a pooled context's throwaway cells have their own).
current = None


class Publisher:
    """Sends results of one context through emit(ftype, payload)."""

    def __init__(self, emit):
        self._emit = emit
        # Figures already sent in this run, so the end of the cell and a
        # later plt.show() do not send them twice. Strong refs: an id() of
        # a collected figure could be reused.
        self.shown = {}

    def new_cell(self):
        self.shown = {}

    def publish(self, obj, main=False):
        reps = bundle(obj, self)
        if reps:
            self.send(reps, main)

    def send(self, reps, main=False):
        """reps: [(mime str, data bytes)], text/plain first when present."""
        self._emit("b", b"main" if main else b"")
        for mime, data in reps:
            if len(data) > REP_MAX:
                _warn("[%s result of %d bytes is too large to send; dropped]\n"
                      % (mime, len(data)))
                continue
            head = mime.encode("utf-8", "replace")[:_MIME_MAX] + b"\0"
            room = frames.PAYLOAD_MAX - len(head)
            view = memoryview(data)
            pos = 0
            while len(data) - pos > room:
                chunk = view[pos:pos + frames.PAYLOAD_MAX]
                self._emit("k", bytes(chunk))
                pos += len(chunk)
            self._emit("r", head + bytes(view[pos:]))
        self._emit("f", b"")

    def figures(self):
        """Send every figure pyplot has open that was not sent yet in this
        run, then close them all (what plt.show() does in a notebook)."""
        import mplinline
        for fig in mplinline.open_figures():
            if id(fig) not in self.shown:
                self.publish(fig)
        mplinline.close_all()


def display(*objs, raw=False, **_ignored):
    """Show each object as a result of the running cell, with every
    representation it has. raw=True: each object is already a
    {mime: data} dict. Keyword arguments IPython takes (include, exclude,
    metadata, display_id, ...) are accepted and ignored."""
    pub = current
    if pub is None:
        return
    for obj in objs:
        if raw and isinstance(obj, dict):
            reps = _from_mapping(obj)
            if reps:
                pub.send(reps)
        else:
            pub.publish(obj)


def bundle(obj, pub=None):
    """[(mime, bytes)] for obj: text/plain (repr) first, then what its
    _repr_mimebundle_ and _repr_*_ methods give, or a PNG for a figure."""
    import mplinline
    if mplinline.is_figure(obj):
        png = mplinline.figure_png(obj)
        if pub is not None:
            pub.shown[id(obj)] = obj
        return [("text/plain", _text(repr(obj))), ("image/png", png)]
    found = {}
    if _has_repr_methods(obj):
        found.update(_mimebundle(obj))
        for mime, name in _REPR_METHODS:
            if mime in found:
                continue
            method = getattr(obj, name, None)
            if not callable(method):
                continue
            data = _call(obj, name, method)
            if data is not None:
                data = _encode(mime, data, obj, name)
            if data is not None:
                found[mime] = data
    plain = found.pop("text/plain", None)
    if plain is None:
        plain = _text(repr(obj))
    return [("text/plain", plain)] + list(found.items())


def _has_repr_methods(obj):
    # A class's _repr_html_ is an unbound method of its instances; and an
    # object that answers every attribute (a mock, an RPC proxy) would claim
    # every representation: both only get text/plain, as in IPython.
    if isinstance(obj, type):
        return False
    try:
        return getattr(obj, "_sandgate_no_such_attribute_", None) is None
    except Exception:
        return False


def _mimebundle(obj):
    method = getattr(obj, "_repr_mimebundle_", None)
    if not callable(method):
        return {}
    try:
        got = method(include=None, exclude=None)
    except TypeError:
        got = _call(obj, "_repr_mimebundle_", method)
    except Exception as e:
        _warn_failed(obj, "_repr_mimebundle_", e)
        return {}
    if isinstance(got, tuple) and got:
        got = got[0]
    if not isinstance(got, dict):
        return {}
    out = {}
    for mime, data in got.items():
        if isinstance(mime, str) and data is not None:
            enc = _encode(mime, data, obj, "_repr_mimebundle_")
            if enc is not None:
                out[mime] = enc
    return out


def _from_mapping(d):
    reps = {}
    for mime, data in d.items():
        if isinstance(mime, str) and data is not None:
            enc = _encode(mime, data, d, "display(raw=True)")
            if enc is not None:
                reps[mime] = enc
    plain = reps.pop("text/plain", None)
    return ([("text/plain", plain)] if plain is not None else []) + list(reps.items())


def _call(obj, name, method):
    try:
        got = method()
    except Exception as e:
        _warn_failed(obj, name, e)
        return None
    # IPython allows (data, metadata).
    if isinstance(got, tuple) and len(got) == 2:
        got = got[0]
    return got


def _encode(mime, data, obj, name):
    """bytes for one representation, or None (with a warning) if it has no
    sensible byte form."""
    try:
        if mime in _BINARY:
            if isinstance(data, str):
                return base64.b64decode(data)
            return bytes(data)
        if mime == "application/json" or mime.endswith("+json"):
            if isinstance(data, (bytes, str)):
                return _text(data)
            return _text(json.dumps(data))
        return _text(data)
    except Exception as e:
        _warn_failed(obj, name, e)
        return None


def _text(data):
    if isinstance(data, bytes):
        return data
    if not isinstance(data, str):
        data = str(data)
    return data.encode("utf-8", "replace")


def _warn_failed(obj, name, e):
    _warn("[%s of a %s object raised %s: %s; that representation is left out]\n"
          % (name, type(obj).__name__, type(e).__name__, e))


def _warn(text):
    try:
        sys.stderr.write(text)
    except Exception:
        pass


class _IPythonFinder:
    """sys.meta_path entry: when IPython.core.display_functions is first
    imported, its display() becomes ours, so `from IPython.display import
    display, HTML` (as notebook code writes it) sends results instead of
    printing reprs (what IPython does without a running shell). Its HTML,
    SVG, JSON, Markdown, Image objects have _repr_*_ methods and need nothing
    more."""

    _NAME = "IPython.core.display_functions"

    def find_spec(self, name, path=None, target=None):
        if name != self._NAME:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        inner = spec.loader.exec_module

        def exec_module(module):
            inner(module)
            module.display = display
        spec.loader.exec_module = exec_module
        return spec


# Every cell can call display() without importing anything, as in Jupyter.
builtins.display = display
if not any(isinstance(f, _IPythonFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _IPythonFinder())
_ipd = sys.modules.get(_IPythonFinder._NAME)   # a template that preloads IPython
if _ipd is not None:
    _ipd.display = display
