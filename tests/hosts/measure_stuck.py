"""measure_stuck.py — the figures for issue 13.3: CreateSandbox latency on a
healthy host, and ListSandboxes latency, while another host is SIGSTOPped.
Not a test (no assertions): run it against any build, old or new, to
compare:

  [SG_HOSTS_HOST_YAML=<old tree>/deploy/local/host.yaml] \
      tests/hosts/run_in_netns.sh <build dir> tests/hosts/measure_stuck.py [N]

Two hosts A, B and a gateway listing [A, B]. Tasks are chosen so the
gateway under test places them on A: by rendezvous (today) and by the old
FNV-1a % position (before 13.7); a sandbox id names its host, so each
create's host is checked. Prints one line per phase: n, median, p90, max.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sghosts  # noqa: E402
from sghosts import DEMO_KEY, host_of, task_key, timed  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10


def old_index(key, n):
    h = 1469598103934665603
    for c in key.encode():
        h = ((h ^ c) * 1099511628211) & ((1 << 64) - 1)
    return h % n


def tasks_on_a(names, prefix, n):
    """Tasks both placements send to names[0]."""
    out, i = [], 0
    while len(out) < n:
        t = "%s-%d" % (prefix, i)
        k = task_key("demo", "alice", t)
        if sghosts.winner(names, k) == names[0] and old_index(k, len(names)) == 0:
            out.append(t)
        i += 1
    return out


def line(what, s):
    s = sorted(s)
    p90 = s[min(len(s) - 1, int(0.9 * len(s)))]
    print("%-52s n=%-3d median %7.3f s  p90 %7.3f s  max %7.3f s"
          % (what, len(s), statistics.median(s), p90, s[-1]), flush=True)


def phase(api, pb, names, prefix, n=None):
    cs, ls = [], []
    for t in tasks_on_a(names, prefix, n or N):
        dt, s = timed(api.create, DEMO_KEY, "alice", t)
        if isinstance(s, Exception):
            print("  create %s failed: %s" % (t, s))
        elif host_of(s.sandbox_id) != names[0]:
            print("  create %s landed on %s" % (t, host_of(s.sandbox_id)))
        cs.append(dt)
        dt, r = timed(api.call, "ListSandboxes", pb.ListSandboxesRequest(user_id="alice"),
                      DEMO_KEY, timeout=30)
        if isinstance(r, Exception):
            print("  list failed: %s" % r)
        ls.append(dt)
    return cs, ls


def main():
    tmp = os.environ.get("SG_HOSTS_TMP") or sghosts.sgtenancy.new_tmp("sg-hosts-")
    c = sghosts.Cluster(tmp)
    try:
        a, b = c.host("ha"), c.host("hb")
        names = [a.name, b.name]
        gw = c.gateway(names)
        api = c.api(gw)
        pb = api.pb
        print("build %s" % sghosts.BUILD)
        cs, ls = phase(api, pb, names, "up")
        line("all up: CreateSandbox on A", cs)
        line("all up: ListSandboxes", ls)
        b.sigstop()
        cs, ls = phase(api, pb, names, "window", 1)
        line("B just SIGSTOPped (not yet noticed): CreateSandbox", cs)
        line("B just SIGSTOPped (not yet noticed): ListSandboxes", ls)
        time.sleep(1.5)   # past the health check's detection (~1.2 s)
        cs, ls = phase(api, pb, names, "stopped")
        line("B SIGSTOPped: CreateSandbox on A", cs)
        line("B SIGSTOPped: ListSandboxes", ls)
        b.sigcont()
        api.close()
    finally:
        c.stop_all()


if __name__ == "__main__":
    main()
