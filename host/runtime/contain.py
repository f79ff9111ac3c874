"""contain.py — the ctypes face of libsandgate_contain.so (host/contain/contain.h).

Owns: loading the library once in the zygote and calling sgc_unshare /
sgc_enter with an error buffer. What the steps do is the library's business;
when to call them is create.py's.
"""

import ctypes

ERRLEN = 1024


class ContainError(Exception):
    pass


class Contain:
    """The two halves of the isolation, or no-ops when --no-contain."""

    def __init__(self, lib_path):
        self.enabled = lib_path is not None
        if not self.enabled:
            return
        # Loaded in the zygote before forking, so no sandbox has to open the
        # .so from inside its new root.
        lib = ctypes.CDLL(lib_path, use_errno=True)
        proto = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        for name in ("sgc_unshare", "sgc_enter"):
            f = getattr(lib, name)
            f.argtypes = proto
            f.restype = ctypes.c_int
        self._unshare = lib.sgc_unshare
        self._enter = lib.sgc_enter

    def _call(self, fn, name, spec):
        err = ctypes.create_string_buffer(ERRLEN)
        if fn(spec.encode("utf-8"), err, ERRLEN) != 0:
            msg = err.value.decode("utf-8", "replace") or "failed"
            raise ContainError("%s: %s" % (name, msg))

    def unshare(self, spec):
        if self.enabled:
            self._call(self._unshare, "sgc_unshare", spec)

    def enter(self, spec):
        if self.enabled:
            self._call(self._enter, "sgc_enter", spec)
