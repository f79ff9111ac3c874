"""sgnet.py — the multihost test's machine-in-a-box: network namespaces
joined by veth pairs to a bridge that itself lives in a namespace of its
own, so nothing is added to the machine's namespace, and no namespace has a
route anywhere but the test's /24.

    net = Net("sgmh1234", ["c", "e1", ...]); net.up(); net.check_no_route_out()
    net.spawn("h1", argv, log)   # runs argv in h1's network namespace
    net.link("h1", up=False)      # partition h1 (its bridge port down)
    net.teardown()                # every recorded PID, then every namespace

Every process is started through nsenter --net (which execs it: the PID
Popen returns is the daemon's) and recorded in <tmp>/pids, so the outer
process can stop whatever an inner one left, by PID, even after a crash."""
import os
import signal
import subprocess
import time

SUBNET = "10.88.0"


def sh(*argv, check=True):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s%s" % (" ".join(argv), r.stdout, r.stderr))
    return r


def root_links():
    """The link names of the namespace this process runs in."""
    return {l.split(":")[1].strip().split("@")[0]
            for l in sh("ip", "-o", "link", "show").stdout.splitlines()}


class Net:
    def __init__(self, prefix, nodes, tmp):
        """nodes: {name: last octet}."""
        self.prefix = prefix
        self.nodes = dict(nodes)
        self.tmp = tmp
        self.br = prefix + "-br"
        self.pidfile = os.path.join(tmp, "pids")

    def ns(self, node):
        return "%s-%s" % (self.prefix, node)

    def addr(self, node):
        return "%s.%d" % (SUBNET, self.nodes[node])

    def up(self):
        sh("ip", "netns", "add", self.br)
        sh("ip", "-n", self.br, "link", "set", "lo", "up")
        sh("ip", "-n", self.br, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.br, "link", "set", "br0", "up")
        for node in self.nodes:
            ns = self.ns(node)
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            # made inside the bridge's namespace, the peer moved straight into
            # the node's: neither end ever exists in the machine's namespace
            sh("ip", "-n", self.br, "link", "add", "v-" + node, "type", "veth", "peer", "name",
               "eth0", "netns", ns)
            sh("ip", "-n", self.br, "link", "set", "v-" + node, "master", "br0", "up")
            sh("ip", "-n", ns, "addr", "add", self.addr(node) + "/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def check_no_route_out(self):
        """Raises unless every namespace routes only the test's /24 and the
        bridge's namespace has no address and no uplink."""
        for node in self.nodes:
            ns = self.ns(node)
            routes = sh("ip", "-n", ns, "-4", "route", "show").stdout.strip().splitlines()
            if len(routes) != 1 or not routes[0].startswith(SUBNET + ".0/24 dev eth0"):
                raise RuntimeError("%s: unexpected routes %r" % (ns, routes))
            r6 = [l for l in sh("ip", "-n", ns, "-6", "route", "show").stdout.splitlines()
                  if not l.startswith("fe80::") and not l.startswith("multicast")]
            if r6:
                raise RuntimeError("%s: IPv6 routes %r" % (ns, r6))
            if sh("ip", "-n", ns, "route", "get", "1.1.1.1", check=False).returncode == 0:
                raise RuntimeError("%s: a route to 1.1.1.1 exists" % ns)
        links = sh("ip", "-n", self.br, "-o", "link", "show").stdout.splitlines()
        names = sorted(l.split(":")[1].strip().split("@")[0] for l in links)
        want = sorted(["lo", "br0"] + ["v-" + n for n in self.nodes])
        if names != want:
            raise RuntimeError("bridge namespace links %r, expected %r" % (names, want))
        if sh("ip", "-n", self.br, "-4", "addr", "show", "scope", "global").stdout.strip():
            raise RuntimeError("the bridge namespace has an address")
        if sh("ip", "-n", self.br, "-4", "route", "show").stdout.strip():
            raise RuntimeError("the bridge namespace has a route")

    def link(self, node, up):
        sh("ip", "-n", self.br, "link", "set", "v-" + node, "up" if up else "down")

    def spawn(self, node, argv, log_path, env=None):
        log = open(log_path, "a")
        p = subprocess.Popen(["nsenter", "--net=/run/netns/" + self.ns(node), "--"] + argv,
                             stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        with open(self.pidfile, "a") as f:
            f.write("%d %s\n" % (p.pid, os.path.basename(argv[0])))
        return p

    def leftover_pids(self):
        out = []
        if not os.path.exists(self.pidfile):
            return out
        for line in open(self.pidfile):
            pid, name = line.split()
            try:
                with open("/proc/%s/comm" % pid) as f:
                    comm = f.read().strip()
                with open("/proc/%s/stat" % pid) as f:
                    zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
            except OSError:
                continue
            # the same program (comm is cut at 15 bytes), so a reused PID is left alone
            if not zombie and name.startswith(comm):
                out.append(int(pid))
        return out

    def teardown(self, host_names=()):
        """Stops what is left (SIGTERM, then SIGKILL after 15 s), removes the
        cgroups of hosts that died with sandboxes, deletes the namespaces.
        Returns what it had to clean, for the log."""
        cleaned = []
        pids = self.leftover_pids()
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        t0 = time.monotonic()
        while pids and time.monotonic() - t0 < 15:
            time.sleep(0.1)
            pids = self.leftover_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
            cleaned.append("SIGKILL %d" % pid)
        cleaned += kill_host_cgroups(host_names)
        for node in self.nodes:
            if sh("ip", "netns", "del", self.ns(node), check=False).returncode == 0:
                cleaned.append("netns " + node)
        if sh("ip", "netns", "del", self.br, check=False).returncode == 0:
            cleaned.append("netns bridge")
        return cleaned


def kill_host_cgroups(names):
    """The sandboxes of hosts that were killed and never restarted: their
    cgroups are <root>/<ctrl>/sandgate/<name>-<id> (v1) or
    <root>/sandgate/<name>-<id> (v2)."""
    done = []
    root = "/sys/fs/cgroup"
    bases = [os.path.join(root, c, "sandgate") for c in ("pids", "memory", "cpu", "freezer",
                                                         "cpuacct", "cpu,cpuacct")]
    bases.append(os.path.join(root, "sandgate"))
    for base in bases:
        if not os.path.isdir(base):
            continue
        for d in os.listdir(base):
            if not any(d.startswith(n + "-") for n in names):
                continue
            path = os.path.join(base, d)
            for _ in range(50):
                try:
                    procs = [int(x) for x in open(os.path.join(path, "cgroup.procs")).read().split()]
                except OSError:
                    procs = []
                if not procs:
                    break
                for pid in procs:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.05)
            try:
                os.rmdir(path)
                done.append("cgroup " + path)
            except OSError:
                pass
    return done
