"""measure_runtime.py — create latency and idle memory of the runtime (not a test).

Owns: the two figures the runtime is held to (issue 3): time from CREATE
sent to `CTX default` received (--no-contain, so namespaces and cgroups are
not in it), and PSS of idle sandboxes (supervisor + default context) with
numpy and pandas preloaded. Run: /usr/bin/python3 tests/runtime/measure_runtime.py
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_double import Zygote, descendants  # noqa: E402


def rollup(pid):
    """(Pss, Private) in KiB from /proc/<pid>/smaps_rollup."""
    pss = priv = 0
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == "Pss":
                pss = int(v.split()[0])
            elif k in ("Private_Clean", "Private_Dirty"):
                priv += int(v.split()[0])
    return pss, priv


PAUSE = float(os.environ.get("PAUSE", "0.1"))


def main():
    n_create = int(os.environ.get("N_CREATE", "50"))
    z = Zygote(preload="numpy,pandas", env={"PATH": "/usr/bin:/bin",
                                            "LANG": "C.UTF-8"})
    try:
        times = []
        for _ in range(n_create):
            t0 = time.perf_counter()
            sb = z.create()
            ctx = sb.handshake()
            times.append((time.perf_counter() - t0) * 1000)
            ctx.close()
            sb.close()
            time.sleep(PAUSE)  # let the teardown finish off the clock
        times.sort()
        print("create → CTX default, %d creates: p50 %.1f ms, p90 %.1f ms, "
              "p99 %.1f ms, max %.1f ms" % (
                  n_create, statistics.median(times),
                  times[int(0.9 * len(times)) - 1],
                  times[max(0, int(0.99 * len(times)) - 1)], times[-1]))
        for n in (1, 10, 30):
            idle = []
            for _ in range(n):
                sb = z.create()
                idle.append((sb, sb.handshake()))
            time.sleep(0.5)
            per = []
            for sb, _ in idle:
                pids = [sb.pid] + descendants(sb.pid)
                vals = [rollup(p) for p in pids]
                per.append((sum(v[0] for v in vals), sum(v[1] for v in vals)))
            zp = rollup(z.pid)
            print("%2d idle sandboxes: PSS/sandbox %.1f MiB (private %.1f "
                  "MiB); zygote PSS %.1f MiB" % (
                      n, statistics.mean(p[0] for p in per) / 1024,
                      statistics.mean(p[1] for p in per) / 1024,
                      zp[0] / 1024))
            for sb, ctx in idle:
                ctx.close()
                sb.close()
            time.sleep(0.3)
    finally:
        z.close()


if __name__ == "__main__":
    main()
