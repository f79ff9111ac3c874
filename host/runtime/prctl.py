"""prctl.py — the few prctl(2) calls the runtime needs, through ctypes.

Owns: child subreaper (zygote), non-dumpable (sandbox), parent-death
signal (contexts). Loaded in the zygote so children
never open libc again.
"""

import ctypes
import os

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int


def prctl(option, arg2=0):
    if _prctl(option, arg2, 0, 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "prctl(%d, %d): %s" % (option, arg2, os.strerror(e)))


def set_child_subreaper():
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_dumpable(on):
    prctl(PR_SET_DUMPABLE, 1 if on else 0)


def set_pdeathsig(sig):
    prctl(PR_SET_PDEATHSIG, sig)
