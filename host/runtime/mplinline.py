"""mplinline.py — matplotlib in a context, as notebooks have it.

Owns: making pyplot use an inline backend (Agg canvases; `plt.show()` sends
every open figure as a result and closes it), rendering a figure to PNG, and
listing/closing the figures a cell left open. Nothing of matplotlib is
imported until the user's code (or the template's preload) imports it: an
import hook sets the backend when `matplotlib` itself is first imported.

Why a backend and not MPLBACKEND in the environment: the environment is the
sandbox owner's and is inherited by subprocesses, which cannot import a
backend that only exists inside this process. The sandbox's base environment
has MPLBACKEND=Agg (host/core/sandbox.c) for exec and subprocesses; the context
overrides that one value only. A user who sets another MPLBACKEND or calls
matplotlib.use() keeps that choice; figures left open are still sent at the
end of the cell.
"""

import importlib.machinery
import io
import sys

_MODULE = "sandgate_inline"
BACKEND = "module://" + _MODULE


class _Finder:
    """sys.meta_path entry: serves the backend module, and hooks the first
    import of matplotlib to select it."""

    def find_spec(self, name, path=None, target=None):
        if name == _MODULE:
            return importlib.machinery.ModuleSpec(name, _BackendLoader())
        if name != "matplotlib" or path is not None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # The loader instance is this spec's own (one per found module), so
        # wrapping its exec_module touches nothing else.
        inner = spec.loader.exec_module

        def exec_module(module):
            inner(module)
            _select_backend(module)
        spec.loader.exec_module = exec_module
        return spec


class _BackendLoader:
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        from matplotlib.backend_bases import FigureManagerBase
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        module.FigureCanvas = FigureCanvasAgg
        module.FigureManager = FigureManagerBase
        module.backend_version = "sandgate"
        module.show = _show


def _show(*args, **kwargs):
    import display
    pub = display.current
    if pub is not None:
        pub.figures()


def _select_backend(mpl):
    import os
    if os.environ.get("MPLBACKEND", "agg").lower() != "agg":
        return
    try:
        mpl.rcParams["backend"] = BACKEND
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None and getattr(plt, "_backend_mod", None) is not None:
            plt.switch_backend(BACKEND)
    except Exception:
        pass


def install():
    """Once per process (the zygote's import, or context_main's)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    mpl = sys.modules.get("matplotlib")
    if mpl is not None:
        _select_backend(mpl)


def is_figure(obj):
    fig_mod = sys.modules.get("matplotlib.figure")
    return fig_mod is not None and isinstance(obj, fig_mod.Figure)


def figure_png(fig):
    buf = io.BytesIO()
    # bbox_inches="tight": the figure as notebooks show it, without the
    # empty margin a fixed figure size leaves.
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def open_figures():
    """The figures pyplot has open, oldest first; [] if pyplot is not loaded."""
    if "matplotlib.pyplot" not in sys.modules:
        return []
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if helpers is None:
        return []
    managers = sorted(helpers.Gcf.get_all_fig_managers(), key=lambda m: m.num)
    return [m.canvas.figure for m in managers]


def close_all():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


install()
