#!/usr/bin/python3
"""bench/rotation.py — what zygote rotation costs (issue 13 point 10; host/drivers/process/zygote.c).

    bench/rotation.py [--build DIR] [-n 200] [--forks 16] [--pss 10] [--reps 2] [--out FILE]

Runs the same measurements, --reps times interleaved, on daemons from deploy/local/run.sh (own
run dir, ephemeral ports, the bench policy of bench/run.sh: quotas lifted):
with rotation off (rotate_forks 0, rotate_after 0) and with
rotate_forks = --forks, so a b2b run of -n creates rotates about n / forks
times. For each it reports:

- bench_create's create latency (back-to-back and paced 100 ms, -n each),
  and with rotation on split into creates that started while two zygotes
  coexisted (or up to 1 s after: the pool moves over) and the others;
- idle PSS with --pss sandboxes (bench_create --pss --host-pid: the host's
  whole process tree), which with rotation spans several generations;
- from a 20 ms sampler of the host's zygote children (smaps_rollup): how
  many zygotes coexisted at most and for how long, their summed PSS/RSS at
  the peak, and a single zygote's PSS/RSS/anonymous memory;
- the rotations the host logged, and how long a successor took to be ready.

Not a test. The machine is shared: figures are noisy; run it twice.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "tests"))
import drivers  # noqa: E402
KEY = "sg-demo-key-0001"
WINDOW_TAIL_S = 1.0   # after the last sample with two zygotes, still "during rotation"
POLICY = """# bench policy: deploy/local's tenant with the rate and sandbox quotas lifted
version: 1
defaults:
  limits: {action_timeout: 30s, ttl: 3600s, ttl_max: 3600s}
  quotas: {sandboxes_per_tenant: 1000000, sandboxes_per_user: 1000000,
           concurrent_actions: 1000000, rate_per_s: 1000000, rate_burst: 1000000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [5b9862fde34fbb0c04a2ce55ee9a4810454901c6a8ce9a1c1bf6ce28d3e77185]
    templates: [code-interpreter]
"""


def rollup(pid):
    """{Pss, Rss, Anonymous} in KiB from /proc/pid/smaps_rollup, or None."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            text = f.read()
    except OSError:
        return None
    out = {}
    for k in ("Pss", "Rss", "Anonymous"):
        m = re.search(r"^%s:\s+(\d+) kB" % k, text, re.M)
        out[k] = int(m.group(1)) if m else 0
    return out


def zygotes(host_pid):
    host_ns = os.readlink("/proc/%d/ns/pid" % host_pid)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != host_pid:
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
            if b"zygote.py" in cmd and os.readlink("/proc/%s/ns/pid" % d) == host_ns:
                out.append(int(d))
        except OSError:
            continue
    return out


class Sampler(threading.Thread):
    """Every 20 ms: (time.monotonic(), zygote count, their PSS, RSS)."""

    def __init__(self, host_pid):
        super().__init__(daemon=True)
        self.host_pid, self.stop = host_pid, threading.Event()
        self.samples, self.single = [], None

    def run(self):
        while not self.stop.is_set():
            rs = [r for r in (rollup(p) for p in zygotes(self.host_pid)) if r]
            if len(rs) == 1 and self.single is None:
                self.single = rs[0]
            self.samples.append((time.monotonic(), len(rs), sum(r["Pss"] for r in rs),
                                 sum(r["Rss"] for r in rs)))
            time.sleep(0.02)

    def windows(self, tail_s):
        """[start, end) spans with two or more zygotes, each extended by
        tail_s (the pool's move to the new generation follows)."""
        out, start = [], None
        for t, n, _, _ in self.samples:
            if n >= 2 and start is None:
                start = t
            elif n < 2 and start is not None:
                out.append((start, t + tail_s))
                start = None
        if start is not None:
            out.append((start, self.samples[-1][0] + tail_s))
        return out


def pct(v, p):
    v = sorted(v)
    if not v:
        return float("nan")
    k = max(0, min(len(v) - 1, int(p / 100.0 * len(v) + 0.999999) - 1))
    return v[k]


def run_one(build, label, rotate, n, pss, tmp):
    with open(os.path.join(REPO, "deploy", "local", "host.yaml")) as f:
        cfg = drivers.host_config(f.read(), "process")   # rotation is the zygote's
    cfg = re.sub(r"^ +(rotate_forks|rotate_after):.*\n", "", cfg, flags=re.M).rstrip("\n") + "\n"
    cfg += "    rotate_forks: %d\n    rotate_after: 0\n" % rotate
    d = os.path.join(tmp, label)
    os.makedirs(d)
    with open(os.path.join(d, "host.yaml"), "w") as f:
        f.write(cfg)
    with open(os.path.join(d, "policy.yaml"), "w") as f:
        f.write(POLICY)
    env = dict(os.environ, SANDGATE_BUILD=build, SANDGATE_RUN_DIR=os.path.join(d, "run"),
               SANDGATE_PORT="0", SANDGATE_HOST_PORT="0",
               SANDGATE_HOST_CONFIG=os.path.join(d, "host.yaml"),
               SANDGATE_POLICY=os.path.join(d, "policy.yaml"))
    env.pop("SANDGATE_HOST_NAME", None)
    env.pop("SANDGATE_POOL_SIZE", None)
    run_sh = os.path.join(REPO, "deploy", "local", "run.sh")
    subprocess.run([run_sh, "start"], env=env, check=True, capture_output=True, timeout=90)
    try:
        run = env["SANDGATE_RUN_DIR"]
        with open(os.path.join(run, "gateway.port")) as f:
            addr = "127.0.0.1:" + f.read().strip()
        with open(os.path.join(run, "host.pid")) as f:
            host_pid = int(f.read())
        time.sleep(1)
        s = Sampler(host_pid)
        s.start()
        csv = os.path.join(d, "creates.csv")
        r = subprocess.run([os.path.join(build, "bin", "bench_create"), "--addr", addr,
                            "--key", KEY, "-n", str(n), "--mode", "both", "--csv", csv,
                            "--pss", str(pss), "--host-pid", str(host_pid)],
                           capture_output=True, text=True, timeout=1800)
        s.stop.set()
        s.join()
        with open(os.path.join(run, "host.log"), errors="replace") as f:
            log = f.read()
    finally:
        subprocess.run([run_sh, "stop"], env=env, capture_output=True, timeout=60)
    served = sorted(int(x) for x in re.findall(r"retires after (\d+) sandboxes", log))
    ready = [float(x) for x in re.findall(r"ready \(generation (?:[2-9]|\d\d+), (\d+) ms\)", log)]
    wins = s.windows(WINDOW_TAIL_S)
    during, outside = {}, {}
    with open(csv) as f:
        for line in f:
            mode, t0, ms = line.strip().split(",")
            t0 = float(t0) / 1000.0
            hit = any(a <= t0 < b for a, b in wins)
            (during if hit else outside).setdefault(mode, []).append(float(ms))
    peak = max(s.samples, key=lambda x: (x[1], x[2])) if s.samples else None
    return {"label": label, "rotate": rotate, "bench": r.stdout + r.stderr, "rc": r.returncode,
            "rotations": len(re.findall(r"serves; generation", log)),
            "ready_ms": sorted(ready), "served": served, "peak": peak, "single": s.single,
            "during": during, "outside": outside,
            "overlap_s": sum(min(b - WINDOW_TAIL_S, s.samples[-1][0]) - a for a, b in wins)}


def mib(kib):
    return "%.1f MiB" % (kib / 1024.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--forks", type=int, default=16)
    ap.add_argument("--pss", type=int, default=10)
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=2, help="off/on pairs, interleaved")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sgrotbench.")
    lines = []
    try:
        for rep in range(a.reps):
            for label, rot in (("off", 0), ("on", a.forks)):
                res = run_one(os.path.abspath(a.build), "%s%d" % (label, rep), rot, a.n, a.pss,
                              tmp)
                lines.append("## rep %d, rotation %s (rotate_forks %d)" % (rep + 1, label, rot))
                lines.extend("    " + x for x in res["bench"].strip().splitlines())
                for mode in sorted(set(res["during"]) | set(res["outside"])):
                    for name, d in (("during rotation", res["during"]),
                                    ("outside rotation", res["outside"])):
                        v = d.get(mode, [])
                        if v:
                            lines.append("    create, %s, %s: n=%d p50 %.1f ms  p99 %.1f ms"
                                         % (mode, name, len(v), pct(v, 50), pct(v, 99)))
                rm = res["ready_ms"]
                lines.append("    rotations logged: %d; successor ready after (ms): %s"
                             % (res["rotations"], "-" if not rm else
                                "min %.0f, median %.0f, max %.0f" % (rm[0], pct(rm, 50), rm[-1])))
                if res["rotations"]:
                    lines.append("    two zygotes at once for %.1f s in all" % res["overlap_s"])
                    sv = res["served"]
                    lines.append("    sandboxes a retired generation served (bound %d): "
                                 "min %d, median %d, max %d" % (rot, sv[0], pct(sv, 50), sv[-1]))
                if res["single"]:
                    z = res["single"]
                    lines.append("    one zygote: PSS %s, RSS %s, anonymous %s"
                                 % (mib(z["Pss"]), mib(z["Rss"]), mib(z["Anonymous"])))
                if res["peak"]:
                    _, n, pss, rss = res["peak"]
                    lines.append("    peak: %d zygotes, their PSS %s, RSS %s"
                                 % (n, mib(pss), mib(rss)))
                if res["rc"]:
                    lines.append("    bench_create exited %d" % res["rc"])
                sys.stderr.write("\n".join(lines[-12:]) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "command: bench/rotation.py %s\n\n%s\n" % (" ".join(sys.argv[1:]), "\n".join(lines))
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
