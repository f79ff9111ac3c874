#!/usr/bin/python3
"""cow_floor.py — how many pages a fork of the zygote copies before it does
any sandbox work (issue 3's idle-memory analysis, bench/NOTES.md). Not a test.

    sudo /usr/bin/python3 bench/cow_floor.py

Builds what the zygote builds (host/runtime/zygote.py: the runtime and its
preloads, numpy and pandas, _warm, gc.freeze, _plug_holes) in this process,
forks one child per step below, lets each settle, and reports each child's
private dirty memory (smaps_rollup) and its pages that differ from ours
(/proc/PID/pagemap: present in both at different physical frames, i.e.
copied on write), and how many of those hold the same bytes as ours again
(/proc/PID/mem). Needs root (page frame numbers are hidden from others).

Steps: idle (fork, then wait in poll), reseed (reseed.reseed(), which every
sandbox and context runs), notebook (one throwaway cell, as a pooled
context's warm-up does)."""
import gc
import os
import select
import struct
import sys
import time

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "runtime")
sys.path.insert(0, RUNTIME)

import zygote  # noqa: E402  (imports the runtime, as the zygote does)

PRESENT = 1 << 63
PFN_MASK = (1 << 55) - 1


def writable_maps(pid):
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            span, perms = line.split()[:2]
            if perms.startswith("rw"):
                a, b = span.split("-")
                out.append((int(a, 16), int(b, 16)))
    return out


def frames(pid, start, end):
    with open("/proc/%d/pagemap" % pid, "rb") as f:
        f.seek(start // 4096 * 8)
        data = f.read((end - start) // 4096 * 8)
    return struct.unpack("<%dQ" % (len(data) // 8), data)


def copied_pages(parent, child):
    """(copied, copied but equal to the parent's page again)"""
    ours = writable_maps(parent)
    copied = same = 0
    with open("/proc/%d/mem" % parent, "rb") as pm, open("/proc/%d/mem" % child, "rb") as cm:
        for s, e in writable_maps(child):
            if not any(a <= s and e <= b for a, b in ours):
                continue
            for i, (p, c) in enumerate(zip(frames(parent, s, e), frames(child, s, e))):
                if not (p & PRESENT and c & PRESENT) or (p & PFN_MASK) == (c & PFN_MASK):
                    continue
                copied += 1
                try:
                    pm.seek(s + i * 4096)
                    cm.seek(s + i * 4096)
                    same += pm.read(4096) == cm.read(4096)
                except OSError:
                    pass
    return copied, same


def private_dirty_kib(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1])
    return -1


def step(name):
    if name == "reseed":
        import reseed
        reseed.reseed()
    elif name == "notebook":
        import notebook
        notebook.Notebook(lambda ftype, payload: None).run(b"_w = [i * 2 for i in range(8)]\n_w")


def main():
    import importlib
    for m in zygote._RUNTIME_PRELOAD + ("numpy", "pandas"):
        importlib.import_module(m)
    zygote._warm()
    gc.collect()
    gc.freeze()
    zygote._plug_holes()
    zygote._plug_holes()
    r, w = os.pipe()
    kids = []
    for name in ("idle", "reseed", "notebook"):
        pid = os.fork()
        if pid == 0:
            os.close(w)   # EOF on r is the signal to go
            step(name)
            p = select.poll()
            p.register(r, select.POLLIN)
            p.poll()
            os._exit(0)
        kids.append((name, pid))
    os.close(r)
    # Measured from one more fork, while this process waits in waitpid():
    # a parent that went on running Python would copy pages itself and
    # blur the count.
    measurer = os.fork()
    if measurer == 0:
        time.sleep(1.5)
        for name, pid in kids:
            copied, same = copied_pages(os.getppid(), pid)
            print("%-8s private dirty %5d KiB; %4d pages differ from the parent's, "
                  "%4d of them hold the same bytes again"
                  % (name, private_dirty_kib(pid), copied, same), flush=True)
        os._exit(0)
    os.waitpid(measurer, 0)
    os.close(w)
    for _, pid in kids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
