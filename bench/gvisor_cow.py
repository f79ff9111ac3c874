#!/usr/bin/python3
"""gvisor_cow.py — what a forked context costs inside gVisor, and why.

Owns: one measurement behind docs/benchmarks.md's gVisor idle-memory
profile. gVisor's Sentry breaks a copy-on-write fault on a non-executable
private mapping by copying the whole 2 MiB-aligned chunk around the page
(pkg/sentry/mm getPMAsInternalLocked: privateAllocUnit), and only the
faulting page on an executable one. CPython writes reference counts all
over the numpy+pandas heap, so a forked context copies nearly all of it.

In one runsc sandbox (the real agent, started as tests/gvisor/agentmux.py
does, without the shim), the default context forks children that run
`x=1+1`, `import json, csv, re` and a pandas groupby twice, and reports the
app memory each added (gVisor's own /proc/meminfo AnonPages) and the times;
first as the heap is, then after mprotect()ing the context's private
anonymous mappings read+write+execute, so that the Sentry copies per page.
Children of both kinds alternate in time, so the machine's load hits them
alike.

    sudo bench/gvisor_cow.py [--trials N]

Needs root and /usr/bin/runsc (exit 77 otherwise).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "gvisor"))
import agentmux as am  # noqa: E402

CELL = r'''
import ctypes, gc, os, time
import pandas as pd

def anon_kib():
    for l in open("/proc/meminfo"):
        if l.startswith("AnonPages:"):
            return int(l.split()[1])

def rwx():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = 0
    for line in open("/proc/self/maps").read().splitlines():
        p = line.split()
        path = p[5] if len(p) > 5 else ""
        if p[1][:2] == "rw" and p[1][3] == "p" and path in ("", "[heap]"):
            a, b = (int(x, 16) for x in p[0].split("-"))
            if libc.mprotect(a, b - a, 7) == 0:
                done += b - a
    return done

def groupby():
    df = pd.DataFrame({"k": [i % 10 for i in range(10000)], "v": range(10000)})
    return df.groupby("k").v.sum().iloc[0]

def child(label):
    gc.collect()
    a0 = anon_kib()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        t = [time.perf_counter()]
        x = 1 + 1; t.append(time.perf_counter())
        import json, csv, re; t.append(time.perf_counter())
        groupby(); t.append(time.perf_counter())
        groupby(); t.append(time.perf_counter())
        os.write(w, " ".join("%.1f" % ((b - a) * 1e3) for a, b in zip(t, t[1:])).encode())
        time.sleep(0.5)
        os._exit(0)
    times = os.read(r, 200).decode().split()
    added = (anon_kib() - a0) / 1024.0
    os.waitpid(pid, 0)
    print("RESULT heap=%s added_mib=%.1f x_ms=%s import_ms=%s groupby_first_ms=%s groupby_again_ms=%s"
          % (label, added, *times), flush=True)
'''


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=3)
    args = p.parse_args()
    why = am.runsc_usable()
    if why:
        print("gvisor_cow: %s" % why, file=sys.stderr)
        sys.exit(77)
    print("load average before: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    s = am.Shim.start_runsc(preload="numpy,pandas", stderr=open(os.devnull, "w"))
    try:
        s.ready(timeout=300)
        d = s.activate(env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, workdir="/workspace")
        # One cell per child: the plain ones first, then rwx() in this
        # context and the rest (mprotect cannot be undone per page here).
        cells = [CELL]
        cells += ["child('as-is')"] * args.trials
        cells += ["print('made RWX: %d MiB' % (rwx() >> 20))"]
        cells += ["child('rwx')"] * args.trials
        for c in cells:
            r = d.run(c, timeout=600)
            for f in r.frames:
                if f[0] in ("o", "e"):
                    txt = f[1].decode(errors="replace") if isinstance(f[1], bytes) else str(f[1])
                    sys.stdout.write(txt)
            if r.error:
                print("error: %s" % (r.error,))
                sys.exit(1)
    finally:
        s.close()
    print("load average after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
