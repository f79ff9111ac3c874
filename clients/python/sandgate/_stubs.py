"""Loading the generated stubs (see gen.sh): the only module that knows where
they live. Everything else asks for `pb()`, `errors_pb()` or `grpc_pb()`.

The stubs are searched, in order, in $SANDGATE_PY_STUBS and in `_gen/` next
to this file. They are loaded as the subpackage `sandgate._gen` whatever
directory they came from, so they never shadow other modules on sys.path.
"""
import importlib
import importlib.util
import os
import sys

_PKG = __name__.rsplit(".", 1)[0] + "._gen"
_loaded = None


def _candidates():
    env = os.environ.get("SANDGATE_PY_STUBS")
    if env:
        yield env
    yield os.path.join(os.path.dirname(os.path.abspath(__file__)), "_gen")


def _load():
    global _loaded
    if _loaded is not None:
        return _loaded
    tried = []
    for d in _candidates():
        if os.path.isfile(os.path.join(d, "sandgate_pb2.py")):
            break
        tried.append(d)
    else:
        raise ImportError(
            "sandgate: generated stubs not found (tried %s); run "
            "clients/python/gen.sh DIR and set SANDGATE_PY_STUBS=DIR" % ", ".join(tried))
    spec = importlib.util.spec_from_file_location(
        _PKG, os.path.join(d, "__init__.py"), submodule_search_locations=[d])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[_PKG] = pkg
    try:
        spec.loader.exec_module(pkg)
        mods = (importlib.import_module(_PKG + ".sandgate_pb2"),
                importlib.import_module(_PKG + ".errors_pb2"),
                importlib.import_module(_PKG + ".sandgate_pb2_grpc"))
    except BaseException:
        for name in [m for m in sys.modules if m == _PKG or m.startswith(_PKG + ".")]:
            del sys.modules[name]
        raise
    _loaded = mods
    return mods


def pb():
    """sandgate/v1/sandgate.proto messages."""
    return _load()[0]


def errors_pb():
    """sandgate/v1/errors.proto (google.rpc.Status wire copies)."""
    return _load()[1]


def grpc_pb():
    """The sandgate.v1.Sandboxes service stub."""
    return _load()[2]
