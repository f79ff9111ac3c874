#!/usr/bin/python3
"""gvisor_agent.py — the gVisor driver's in-sandbox agent, measured over its mux.

Owns: figures for the agent as pid 1 of a real runsc container, spoken to
directly over the container's stdin/stdout by tests/gvisor/agentmux.py —
WITHOUT the host-side shim and without sandgate-host, so these are the
agent's and gVisor's share of a request, not an end-to-end figure:

  - container start (runsc run) to `ready`, numpy and pandas preloaded;
  - activate to `activated`, and the default context's first RunCode
    after it (a pool sandbox's create path);
  - `x=1+1` RunCode round trip on the default context, p50 / p99;
  - a pandas groupby and an `import json, csv, re` action (a fresh context's
    first run, and again), median;
  - opening a later context (`ctx` to its reply);
  - idle PSS and RSS of one warmed sandbox: the Sentry, the gofer and the
    stub processes that hold the app's address spaces (the agent and its
    default context), from the host's /proc; the `runsc run` CLI that
    waits in front of it listed apart (the shim uses create/start, whose CLI
    exits).

    bench/gvisor_agent.py [--starts N] [--runs N] [--mode runsc|direct] [--json]

--mode direct runs the same against the agent as a plain process (no
isolation), for comparison. Needs root and /usr/bin/runsc for runsc mode.
On a shared machine timings are noisy; the load average is printed.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "gvisor"))
import agentmux as am  # noqa: E402

PRELOAD = "numpy,pandas"
GROUPBY = ("import pandas as pd\n"
           "df = pd.DataFrame({'k': [i % 10 for i in range(10000)], "
           "'v': range(10000)})\n"
           "df.groupby('k').v.sum().iloc[0]")
IMPORTS = "import json, csv, re"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def ms(s):
    return round(s * 1000.0, 3)


def start(mode):
    if mode == "runsc":
        return am.Shim.start_runsc(preload=PRELOAD, stderr=open(os.devnull, "w"))
    return am.Shim.start_direct(preload=PRELOAD, stderr=open(os.devnull, "w"))


def _tree(root):
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                s = f.read()
        except OSError:
            continue
        ppid = int(s[s.rfind(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def _mem(pid):
    """(name, pss KiB, rss KiB) from smaps_rollup."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
        with open("/proc/%d/smaps_rollup" % pid) as f:
            text = f.read()
    except OSError:
        return None
    vals = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("Pss:", "Rss:"):
            vals[parts[0]] = int(parts[1])
    name = os.path.basename(argv[0].decode(errors="replace")) if argv[0] else "?"
    # runsc re-execs itself as `runsc-sandbox boot` / `runsc-gofer gofer`.
    for role in ("boot", "gofer"):
        if role.encode() in argv[1:6]:
            name = "sentry" if role == "boot" else "gofer"
    return name, vals.get("Pss:", 0), vals.get("Rss:", 0)


def memory(shim, mode):
    """Per role: {role: [count, pss KiB, rss KiB]}, and the front CLI."""
    roles = {}
    front = _mem(shim.proc.pid)
    if mode == "direct" and front:
        # The agent itself is the process we started.
        roles["agent"] = [1, front[1], front[2]]
    for pid in _tree(shim.proc.pid):
        m = _mem(pid)
        if m is None:
            continue
        name, pss, rss = m
        role = name if name in ("sentry", "gofer") else (
            "stub" if mode == "runsc" else "context")
        r = roles.setdefault(role, [0, 0, 0])
        r[0] += 1
        r[1] += pss
        r[2] += rss
    return roles, front


def run_bench(args):
    out = {"mode": args.mode, "load_before": open("/proc/loadavg").read().split()[:3],
           "note": "over the mux, without the host-side shim or sandgate-host"}
    ready_s, activate_s = [], []
    shim = None
    for i in range(args.starts):
        t0 = time.monotonic()
        s = start(args.mode)
        s.ready(timeout=300)
        ready_s.append(s.t_ready - t0)
        if i < args.starts - 1:
            s.close()
        else:
            shim = s
    try:
        time.sleep(args.settle)
        roles, front = memory(shim, args.mode)
        out["idle_pool_sandbox_kib"] = {
            r: {"procs": v[0], "pss": v[1], "rss": v[2]} for r, v in roles.items()}
        out["idle_pool_sandbox_total_kib"] = {
            "pss": sum(v[1] for v in roles.values()),
            "rss": sum(v[2] for v in roles.values())}
        if front and args.mode == "runsc":
            out["runsc_run_cli_kib"] = {"pss": front[1], "rss": front[2]}
        t0 = time.monotonic()
        d = shim.activate(env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                          workdir="/workspace" if args.mode == "runsc" else "/tmp")
        activate_s.append(time.monotonic() - t0)
        # The create path of a pool sandbox: its warmed default context's
        # first run after activate.
        t0 = time.monotonic()
        d.run("x=1+1")
        out["first_runcode_after_activate_ms"] = ms(time.monotonic() - t0)
        # x=1+1 round trips on the default context.
        for _ in range(min(50, args.runs)):
            d.run("x=1+1")
        rt = []
        for _ in range(args.runs):
            t0 = time.monotonic()
            r = d.run("x=1+1")
            rt.append(time.monotonic() - t0)
            assert r.frames[-1][0] == "d"
        out["runcode_x_1_1_ms"] = {"p50": ms(pct(rt, 50)), "p99": ms(pct(rt, 99)),
                                   "n": len(rt)}
        # Actions: a fresh context's first run, then repeats.
        opens, first_g, first_i, again_g, again_i = [], [], [], [], []
        for k in range(args.contexts):
            t0 = time.monotonic()
            c = shim.open_ctx("bench%d" % k)
            opens.append(time.monotonic() - t0)
            t0 = time.monotonic()
            r = c.run(IMPORTS)
            first_i.append(time.monotonic() - t0)
            assert r.error is None, r.error
            t0 = time.monotonic()
            r = c.run(GROUPBY)
            first_g.append(time.monotonic() - t0)
            assert r.error is None, r.error
            for _ in range(5):
                t0 = time.monotonic()
                c.run(GROUPBY)
                again_g.append(time.monotonic() - t0)
                t0 = time.monotonic()
                c.run(IMPORTS)
                again_i.append(time.monotonic() - t0)
            c.kill()
            shim.wait_op("ctxexit", id="bench%d" % k)
        med = statistics.median
        out["ready_after_start_s"] = {"p50": round(med(ready_s), 3),
                                      "max": round(max(ready_s), 3),
                                      "n": len(ready_s)}
        out["activate_ms"] = ms(med(activate_s))
        out["ctx_open_ms"] = {"p50": ms(med(opens)), "n": len(opens)}
        out["pandas_groupby_ms"] = {"first_in_new_context": ms(med(first_g)),
                                    "again": ms(med(again_g))}
        out["import_json_csv_re_ms"] = {"first_in_new_context": ms(med(first_i)),
                                        "again": ms(med(again_i))}
        out["load_after"] = open("/proc/loadavg").read().split()[:3]
        if shim.violations:
            out["protocol_violations"] = shim.violations
    finally:
        shim.close()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=("runsc", "direct"), default="runsc")
    p.add_argument("--starts", type=int, default=3)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--contexts", type=int, default=3)
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds idle before reading memory")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.mode == "runsc":
        why = am.runsc_usable()
        if why:
            print("gvisor_agent: %s" % why, file=sys.stderr)
            sys.exit(77)
    res = run_bench(args)
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print("gvisor agent bench (%s; %s)" % (res["mode"], res["note"]))
    print("  load average before/after: %s / %s" % (" ".join(res["load_before"]),
                                                  " ".join(res["load_after"])))
    r = res["ready_after_start_s"]
    print("  start -> ready (numpy+pandas): p50 %.3f s, max %.3f s (n=%d)"
          % (r["p50"], r["max"], r["n"]))
    print("  activate -> activated:         %.3f ms" % res["activate_ms"])
    print("  first RunCode after activate:  %.3f ms"
          % res["first_runcode_after_activate_ms"])
    r = res["runcode_x_1_1_ms"]
    print("  RunCode x=1+1:                 p50 %.3f ms, p99 %.3f ms (n=%d)"
          % (r["p50"], r["p99"], r["n"]))
    print("  open a later context:          p50 %.3f ms" % res["ctx_open_ms"]["p50"])
    for k, label in (("pandas_groupby_ms", "pandas groupby"),
                     ("import_json_csv_re_ms", "import json, csv, re")):
        print("  %-30s first in a new context %.3f ms, again %.3f ms"
              % (label + ":", res[k]["first_in_new_context"], res[k]["again"]))
    t = res["idle_pool_sandbox_total_kib"]
    print("  idle warmed sandbox:           PSS %.1f MiB, RSS %.1f MiB"
          % (t["pss"] / 1024.0, t["rss"] / 1024.0))
    for role, v in sorted(res["idle_pool_sandbox_kib"].items()):
        print("    %-8s x%-2d PSS %7.1f MiB  RSS %7.1f MiB"
              % (role, v["procs"], v["pss"] / 1024.0, v["rss"] / 1024.0))
    if "runsc_run_cli_kib" in res:
        v = res["runsc_run_cli_kib"]
        print("    (runsc run CLI in front, not counted: PSS %.1f MiB)" % (v["pss"] / 1024.0))
    if res.get("protocol_violations"):
        print("  PROTOCOL VIOLATIONS: %r" % res["protocol_violations"])
        sys.exit(1)


if __name__ == "__main__":
    main()
