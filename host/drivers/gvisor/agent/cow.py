"""cow.py — make the agent's preloaded heap copy-on-write page by page.

Owns: one step of the agent's start-up (`--page-cow`, which the shim
passes): after the preload, before the first fork, every private writable
anonymous mapping of the agent (the malloc heap, pymalloc's arenas, numpy's
and pandas' allocations) is mprotect()ed to read+write+execute.

Why: gVisor's Sentry (pkg/sentry/mm, getPMAsInternalLocked) breaks a
copy-on-write fault on a non-executable mapping by copying the whole
2 MiB-aligned chunk around the faulting page, and only the faulting pages
of an executable one. CPython writes a reference count into every object
it touches, so a forked context touches nearly every 2 MiB of the ~40 MiB
numpy+pandas heap: each context, the pooled default one included, cost
~36 MiB of the Sentry's memory file (gVisor's own /proc/meminfo AnonPages,
+35.7 MiB for one `x=1` in a new context), against ~2.3 MiB for a fork on
the host kernel. With the heap executable the same fork costs ~5 MiB
(docs/benchmarks.md, "gVisor idle memory").

What it gives up: W^X inside the sandbox for this memory. Code in a
context can already map executable memory of its own (it runs arbitrary
Python, ctypes included) and the isolation boundary is the Sentry, not the
page permissions of the sandbox's own processes, so nothing that was
refused to the sandbox's code becomes possible. Only the agent does this,
under gVisor (the shim asks for it); on the host kernel it would buy
nothing, copy-on-write there is per page anyway.
"""

import ctypes
import os

PROT_RWX = 0x1 | 0x2 | 0x4


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mprotect.restype = ctypes.c_int
    return libc


def _candidates(maps_text):
    """(start, end) of the private writable anonymous mappings in a
    /proc/PID/maps text: no path, or [heap]. The stack, vdso/vvar and
    file mappings are left alone (a file's private data pages are small;
    the stack grows down and is per process)."""
    out = []
    for line in maps_text.splitlines():
        parts = line.split()
        if len(parts) < 5:
            continue
        perms = parts[1]
        path = parts[5] if len(parts) > 5 else ""
        if perms[0:2] != "rw" or perms[3] != "p" or path not in ("", "[heap]"):
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        out.append((start, end))
    return out


def make_heap_executable():
    """mprotect every candidate mapping to RWX. Returns (bytes changed,
    failures); a failure leaves that mapping as it was (it only costs
    memory), so the agent goes on and logs it."""
    with open("/proc/self/maps") as f:
        ranges = _candidates(f.read())
    libc = _libc()
    done, failed = 0, []
    for start, end in ranges:
        if libc.mprotect(start, end - start, PROT_RWX) == 0:
            done += end - start
        else:
            failed.append("%x-%x: %s" % (start, end, os.strerror(ctypes.get_errno())))
    return done, failed
