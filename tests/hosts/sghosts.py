"""Multi-host gateway tests (tests/hosts/test_*.py): several sandgate-host
daemons and gateways on loopback, inside the network namespace
run_in_netns.sh made, started and stopped by PID from here.

Owns: each host's config (its own runtime dir, uid range, small warm pool),
gateway configs listing the hosts in a chosen order, SIGSTOP/SIGCONT of a
host, and stopping every process it started (a stopped one is continued
first, so it can clean up its sandboxes). Calls go through the tenancy
suite's Api (tests/tenancy/sgtenancy.py).

Env: SANDGATE_BUILD, SG_HOSTS_TMP, SG_HOSTS_NETNS (set by run_in_netns.sh);
SG_HOSTS_HOST_YAML: the host config to start from (default deploy/local/host.yaml).
"""
import os
import re
import signal
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "tenancy"))
sys.path.insert(0, os.path.join(REPO, "tests"))
import sgtenancy  # noqa: E402
import uid_range  # noqa: E402

BUILD = os.environ.get("SANDGATE_BUILD", os.path.join(REPO, "build"))
# The host config the hosts' configs start from; another tree's when running
# an older build (its parser refuses keys it does not know).
HOST_YAML = os.environ.get("SG_HOSTS_HOST_YAML",
                           os.path.join(REPO, "deploy", "local", "host.yaml"))
DEMO_KEY = "sg-demo-key-0001"
OTHER_KEY = "sg-other-key-0002"

# ---- the placement spec (gateway/placement.h), independently ----
_M = (1 << 64) - 1


def _fnv(h, data):
    for c in data:
        h = ((h ^ c) * 1099511628211) & _M
    return h


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & _M
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & _M
    return z ^ (z >> 31)


def score(name, key):
    return _mix(_fnv(_fnv(1469598103934665603, name.encode() + b"\0"), key.encode()))


def task_key(tenant, user, task):
    return "task\x1f%s\x1f%s\x1f%s" % (tenant, user, task)


def winner(names, key):
    return max(sorted(names), key=lambda n: score(n, key))


def task_for(names, want, tenant, user, prefix):
    """A task id whose sandbox rendezvous places on host `want`."""
    for i in range(10000):
        t = "%s-%d" % (prefix, i)
        if winner(names, task_key(tenant, user, t)) == want:
            return t
    raise RuntimeError("no task for %s" % want)


def host_of(sandbox_id):
    """Sandbox ids start with the host's name (tenancy/binding.c)."""
    return sandbox_id.split("-")[0] if "-" in sandbox_id else sandbox_id


# ---- daemons ----

def _netns_inode():
    ns = os.environ.get("SG_HOSTS_NETNS")
    return os.stat("/run/netns/" + ns).st_ino if ns else None


def _wait_file(path, p, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path) as f:
                return f.read().strip()
        if p.proc.poll() is not None:
            raise RuntimeError("%s %s exited (%d):\n%s" % (p.kind, p.name, p.proc.returncode,
                                                         p.read_log()[-3000:]))
        time.sleep(0.05)
    raise RuntimeError("%s %s did not start in %.0f s" % (p.kind, p.name, timeout))


class Proc:
    def __init__(self, kind, name, argv, log):
        self.kind, self.name, self.log = kind, name, log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.stopped = False
        ino = _netns_inode()
        if ino is not None and os.stat("/proc/%d/ns/net" % self.pid).st_ino != ino:
            self.proc.kill()
            raise RuntimeError("ABORT: %s %s is not in the test's netns" % (kind, name))

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def sigstop(self):
        os.kill(self.pid, signal.SIGSTOP)
        self.stopped = True

    def sigcont(self):
        os.kill(self.pid, signal.SIGCONT)
        self.stopped = False

    def terminate(self):
        if self.proc.poll() is not None:
            return
        if self.stopped:
            self.sigcont()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            sys.stderr.write("%s %s did not stop on SIGTERM; SIGKILL\n" % (self.kind, self.name))
            self.proc.kill()
            self.proc.wait(timeout=10)


class Cluster:
    def __init__(self, tmp):
        self.tmp = tmp
        self.hosts = {}      # name -> Proc (with .port)
        self.gateways = []   # Proc (with .addr, .order)
        self.policy = os.path.join(REPO, "deploy", "local", "policy.yaml")
        # 1,000 uids per host started, from a range no other test holds
        # (tests/uid_range.py; released when this process exits)
        self._uid_next, self._uid_lock = uid_range.acquire()
        self._uid_end = self._uid_next + uid_range.SIZE
        self.max_sandboxes = 64   # per host (its config's max_sandboxes)

    def host(self, label, restart=None):
        """Start a host named label + a random suffix (sandbox ids and cgroups
        carry it, so runs never touch each other's). Returns its Proc.
        restart=<a stopped host's Proc>: start it again, same name and port."""
        if restart is not None:
            if restart.proc.poll() is None:
                raise RuntimeError("host %s is still running" % restart.name)
            name, listen = restart.name, "127.0.0.1:%d" % restart.port
        else:
            name, listen = "%s%s" % (label, uuid.uuid4().hex[:6]), "127.0.0.1:0"
        d = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(d, "rt"), exist_ok=True)
        with open(HOST_YAML) as f:
            y = sgtenancy.drivers.host_config(f.read())   # for this run's driver
        y = re.sub(r"(?m)^runtime_dir:.*$", "runtime_dir: %s/rt" % d, y)
        y = re.sub(r"(?m)^uid_base:.*$", "uid_base: %d" % self._uid_next, y)
        y = re.sub(r"(?m)^max_sandboxes:.*$", "max_sandboxes: %d" % self.max_sandboxes, y)
        y = re.sub(r"(?m)^(\s*)pool:.*$", r"\1pool: 1", y)
        y = re.sub(r"(?m)^(\s*)preload:.*$", r"\1preload: []", y)
        self._uid_next += 1000
        if self._uid_next > self._uid_end:
            raise RuntimeError("sghosts: more hosts than this cluster's uid range holds")
        cfg = os.path.join(d, "host.yaml")
        with open(cfg, "w") as f:
            f.write(y)
        port_file = os.path.join(d, "host.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        p = Proc("host", name, [os.path.join(BUILD, "bin", "sandgate-host"), "--config", cfg,
                                "--listen", listen, "--name", name, "--runtime-dir",
                                os.path.join(d, "rt"), "--audit-log",
                                os.path.join(d, "audit.log"), "--port-file", port_file],
                 os.path.join(d, "host.log"))
        self.hosts[name] = p
        p.port = int(_wait_file(port_file, p))
        end = time.monotonic() + 30
        while "ready" not in p.read_log() and time.monotonic() < end:
            time.sleep(0.05)
        return p

    def gateway(self, order):
        """A gateway whose config lists the hosts in `order` (names)."""
        d = os.path.join(self.tmp, "gw%d" % len(self.gateways))
        os.makedirs(d)
        cfg = os.path.join(d, "gateway.yaml")
        with open(cfg, "w") as f:
            f.write('listen: "127.0.0.1:7443"  # overridden by --listen\npolicy: "%s"\naudit_log: "%s/audit.log"\n'
                    'threads: 1\nhosts:\n' % (self.policy, d))
            for n in order:
                f.write('  - name: %s\n    address: "127.0.0.1:%d"\n' % (n, self.hosts[n].port))
        port_file = os.path.join(d, "gateway.port")
        p = Proc("gateway", d, [os.path.join(BUILD, "bin", "sandgate"), "--config", cfg,
                                "--listen", "127.0.0.1:0", "--port-file", port_file],
                 os.path.join(d, "gateway.log"))
        self.gateways.append(p)
        p.addr = "127.0.0.1:" + _wait_file(port_file, p)
        p.order = list(order)
        return p

    def api(self, gw):
        return sgtenancy.Api(self.tmp, gw.addr)

    def logs_tail(self):
        out = []
        for p in list(self.gateways) + list(self.hosts.values()):
            out.append("--- %s %s (tail)\n%s" % (p.kind, p.name, p.read_log()[-2500:]))
        return "\n".join(out)

    def stop_all(self):
        for p in self.gateways:
            p.terminate()
        for p in self.hosts.values():
            p.terminate()


def host_pb(tmp):
    """host.proto's messages (the internal gateway -> host API), generated
    into tmp with the system protoc as clients/python/gen.sh does."""
    out = os.path.join(tmp, "hoststubs")
    if not os.path.isdir(out):
        os.makedirs(out)
        proto = os.path.join(REPO, "proto")
        subprocess.run(["protoc", "-I", proto, "--python_out=" + out,
                        "sandgate/v1/host.proto", "sandgate/v1/sandgate.proto"],
                       check=True, timeout=60)
        sys.path.insert(0, out)
    import importlib
    return importlib.import_module("sandgate.v1.host_pb2")


def timed(fn, *a, **kw):
    """(seconds, result or grpc.RpcError)."""
    t0 = time.monotonic()
    try:
        r = fn(*a, **kw)
    except Exception as e:  # grpc.RpcError and friends: the caller asserts on it
        r = e
    return time.monotonic() - t0, r
