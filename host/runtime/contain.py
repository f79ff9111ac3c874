"""contain.py — the ctypes face of libsandgate_contain.so (host/contain/contain.h).

Owns: loading the library once in the zygote and calling its steps
(making a sandbox: sgc_pidns_*, sgc_unshare_pid1, sgc_enter; joining one:
sgc_pidns_join, sgc_join, sgc_enter_joined) with an error buffer. What the steps do is the library's business;
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
        for name in ("sgc_unshare", "sgc_enter", "sgc_unshare_pid1",
                     "sgc_enter_joined"):
            f = getattr(lib, name)
            f.argtypes = proto
            f.restype = ctypes.c_int
        for name in ("sgc_pidns_next", "sgc_pidns_reset"):
            f = getattr(lib, name)
            f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            f.restype = ctypes.c_int
        self._unshare = lib.sgc_unshare
        self._enter = lib.sgc_enter
        self._unshare_pid1 = lib.sgc_unshare_pid1
        self._pidns_next = lib.sgc_pidns_next
        self._pidns_reset = lib.sgc_pidns_reset
        lib.sgc_pidns_join.argtypes = [ctypes.c_int, ctypes.c_char_p,
                                       ctypes.c_size_t]
        lib.sgc_pidns_join.restype = ctypes.c_int
        lib.sgc_join.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                 ctypes.c_char_p, ctypes.c_size_t]
        lib.sgc_join.restype = ctypes.c_int
        self._pidns_join = lib.sgc_pidns_join
        self._join = lib.sgc_join
        self._enter_joined = lib.sgc_enter_joined

    def _call(self, fn, name, spec):
        err = ctypes.create_string_buffer(ERRLEN)
        if fn(spec.encode("utf-8"), err, ERRLEN) != 0:
            msg = err.value.decode("utf-8", "replace") or "failed"
            raise ContainError("%s: %s" % (name, msg))

    def _call0(self, fn, name):
        err = ctypes.create_string_buffer(ERRLEN)
        if fn(err, ERRLEN) != 0:
            msg = err.value.decode("utf-8", "replace") or "failed"
            raise ContainError("%s: %s" % (name, msg))

    def pidns_next(self):
        """The caller's next child is pid 1 of a new pid namespace."""
        if self.enabled:
            self._call0(self._pidns_next, "sgc_pidns_next")

    def pidns_reset(self):
        """Back to our own pid namespace for later children."""
        if self.enabled:
            self._call0(self._pidns_reset, "sgc_pidns_reset")

    def pidns_join(self, pidfd):
        """The caller's next child is in the pid namespace of pidfd's process."""
        if self.enabled:
            err = ctypes.create_string_buffer(ERRLEN)
            if self._pidns_join(pidfd, err, ERRLEN) != 0:
                raise ContainError("sgc_pidns_join: %s" % err.value.decode(
                    "utf-8", "replace"))

    def join(self, spec, pidfd):
        """In that child: the sandbox's cgroups, then its other namespaces."""
        if self.enabled:
            err = ctypes.create_string_buffer(ERRLEN)
            if self._join(spec.encode("utf-8"), pidfd, err, ERRLEN) != 0:
                raise ContainError("sgc_join: %s" % err.value.decode(
                    "utf-8", "replace"))

    def enter_joined(self, spec):
        if self.enabled:
            self._call(self._enter_joined, "sgc_enter_joined", spec)

    def unshare_pid1(self, spec):
        """In the forked pid 1: cgroups, then the other namespaces."""
        if self.enabled:
            self._call(self._unshare_pid1, "sgc_unshare_pid1", spec)

    def unshare(self, spec):
        if self.enabled:
            self._call(self._unshare, "sgc_unshare", spec)

    def enter(self, spec):
        if self.enabled:
            self._call(self._enter, "sgc_enter", spec)
