"""sgreg.py — what the registry tests share: an etcd member on loopback
(free ports, a temp data dir, stopped by PID), etcdctl, and polling."""
import os
import socket
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def read(path):
    with open(path) as f:
        return f.read().strip()


def wait(pred, what, timeout=10):
    """Seconds until pred() is true; AssertionError after timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))


class Etcd:
    """One etcd member; start() again reuses its data dir.

    tls: None (plaintext), or a dict of PEM paths {ca, cert, key} for the
    member's client port with client-certificate auth on (--client-cert-auth:
    a client needs a certificate signed by ca) and {client_cert, client_key}
    for etcdctl."""

    def __init__(self, tmp, tls=None):
        self.tmp = tmp
        self.tls = tls
        self.ep = "127.0.0.1:%d" % free_port()
        self.peer = free_port()
        self.proc = None

    def start(self):
        log = open(os.path.join(self.tmp, "etcd.log"), "a")
        scheme = "https://" if self.tls else "http://"
        tls = []
        if self.tls:
            tls = ["--cert-file", self.tls["cert"], "--key-file", self.tls["key"],
                   "--trusted-ca-file", self.tls["ca"], "--client-cert-auth"]
        self.proc = subprocess.Popen(
            ["etcd", "--name", "r0", "--data-dir", os.path.join(self.tmp, "etcd"),
             "--listen-client-urls", scheme + self.ep, "--advertise-client-urls",
             scheme + self.ep, "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer,
             "--initial-cluster", "r0=http://127.0.0.1:%d" % self.peer] + tls,
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait(lambda: self.ctl("put", "/ready", "1").returncode == 0, "etcd to start", 20)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def ctl(self, *args):
        tls = []
        if self.tls:
            tls = ["--cacert=" + self.tls["ca"], "--cert=" + self.tls["client_cert"],
                   "--key=" + self.tls["client_key"]]
        return subprocess.run(["etcdctl", "--endpoints=" + self.ep, "--command-timeout=2s"] +
                              tls + list(args), env=dict(os.environ, ETCDCTL_API="3"),
                              capture_output=True, text=True, timeout=10)


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SANDGATE_BUILD", os.path.join(REPO, "build"))
sys.path.insert(0, os.path.join(REPO, "tests"))
import drivers  # noqa: E402


class Fleet:
    """Gateways and hosts in etcd mode on loopback, all sharing one etcd
    member and a fresh key prefix; every process stopped by PID in stop().
    policy_text: the gateways' policy. Logs: <tmp>/<name>.log.

        f = Fleet(tmp, etcd, policy_text, lease_ttl=2)
        f.host("ha"); f.gateway("g1")   # -> "127.0.0.1:port"
    """

    def __init__(self, tmp, etcd, policy_text, lease_ttl=2, pool="1", registry_tls=None):
        import uuid
        self.tmp, self.etcd, self.pool = tmp, etcd, pool
        self.prefix = "/sgtest-%s/" % uuid.uuid4().hex[:8]
        self.hosts, self.gateways, self.addrs = {}, {}, {}
        self.killed = set()   # hosts killed -9: their sandboxes' cgroups outlive them
        reg = self.registry_yaml(registry_tls)
        self.policy = os.path.join(tmp, "policy.yaml")
        with open(self.policy, "w") as f:
            f.write(policy_text)
        with open(os.path.join(REPO, "deploy", "local", "host.yaml")) as f:
            self.host_yaml = os.path.join(tmp, "host.yaml")
            with open(self.host_yaml, "w") as out:
                out.write(drivers.host_config(f.read()) + reg + "  lease_ttl: %d\n" % lease_ttl)
        self.lease_ttl = lease_ttl
        self.gw_yaml = os.path.join(tmp, "gateway.yaml")
        with open(self.gw_yaml, "w") as f:
            f.write("listen: \"127.0.0.1:1\"\npolicy: \"%s\"\naudit_log: \"%s\"\n%s" % (
                self.policy, os.path.join(tmp, "audit.log"), reg))

    def registry_yaml(self, tls=None):
        """The `registry:` section every daemon of this fleet shares; tls: a
        dict for registry.tls (ca, cert, key, server_name), None = plaintext."""
        reg = "registry:\n  etcd: [\"%s\"]\n  prefix: %s\n" % (self.etcd.ep, self.prefix)
        if tls:
            reg += "  tls:\n" + "".join("    %s: \"%s\"\n" % kv for kv in sorted(tls.items()))
        return reg

    def config(self, name, registry_tls, host=False):
        """A config like the fleet's own but with its own registry.tls
        (a daemon that should fail to reach etcd); returns its path."""
        base = self.host_yaml if host else self.gw_yaml
        with open(base) as f:
            text = f.read()
        text = text[:text.index("registry:\n")] + self.registry_yaml(registry_tls)
        if host:
            text += "  lease_ttl: %d\n" % self.lease_ttl
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def log(self, name):
        with open(os.path.join(self.tmp, name + ".log")) as f:
            return f.read()

    def _spawn(self, name, argv, env=None):
        log = open(os.path.join(self.tmp, name + ".log"), "a")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                             env=dict(os.environ, **(env or {})))
        log.close()
        return p

    def host(self, name, wait_registered=True, config=None):
        d = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(d, "rt"), exist_ok=True)
        pf = os.path.join(d, "port")
        if os.path.exists(pf):
            os.unlink(pf)
        p = self._spawn(name, [os.path.join(BUILD, "bin", "sandgate-host"), "--config",
                               config or self.host_yaml, "--listen", "127.0.0.1:%d" % free_port(),
                               "--name", name, "--runtime-dir", os.path.join(d, "rt"),
                               "--state-dir", os.path.join(d, "state"), "--port-file", pf],
                        {"SANDGATE_POOL_SIZE": self.pool})
        self.hosts[name] = p
        self.killed.discard(name)   # a new life removes its last life's sandboxes
        wait(lambda: os.path.exists(pf) or p.poll() is not None, "host %s to start" % name, 30)
        assert p.poll() is None, self.log(name)[-3000:]
        if wait_registered:
            wait(lambda: self.etcd.ctl("get", self.prefix + "hosts/" + name).stdout.strip() != "",
                 "host %s to register" % name, 30)
        return p

    def gateway(self, name, config=None):
        pf = os.path.join(self.tmp, name + ".port")
        p = self._spawn(name, [os.path.join(BUILD, "bin", "sandgate"), "--config",
                               config or self.gw_yaml,
                               "--listen", "127.0.0.1:0", "--port-file", pf])
        self.gateways[name] = p
        wait(lambda: os.path.exists(pf) or p.poll() is not None, "gateway %s" % name, 15)
        assert p.poll() is None, self.log(name)[-3000:]
        self.addrs[name] = "127.0.0.1:" + read(pf)
        return self.addrs[name]

    def kill(self, name, sig=None):
        import signal
        p = self.hosts.pop(name, None) or self.gateways.pop(name, None)
        if sig == signal.SIGKILL:
            self.killed.add(name)
        if p and p.poll() is None:
            p.send_signal(signal.SIGCONT)   # a stopped process takes no SIGTERM
            p.send_signal(sig or signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def keys(self, what):
        """Keys under <prefix><what>/ (etcdctl, keys only)."""
        r = self.etcd.ctl("get", "--prefix", "--keys-only", self.prefix + what + "/")
        return [k for k in r.stdout.split("\n") if k.strip()]

    def stop(self):
        for name in list(self.hosts) + list(self.gateways):
            self.kill(name)
        for name in self.killed:
            reap_cgroups(name)


def reap_cgroups(host_name):
    """What a host killed -9 and never restarted leaves: its sandboxes'
    cgroups (<root>/sandgate/<host>-<id>) and their processes."""
    import glob
    import signal
    for d in glob.glob("/sys/fs/cgroup/*/sandgate/%s-*" % host_name) + \
            glob.glob("/sys/fs/cgroup/sandgate/%s-*" % host_name):
        for _ in range(50):
            pids = []
            for root, _dirs, files in os.walk(d):
                if "cgroup.procs" in files:
                    with open(os.path.join(root, "cgroup.procs")) as f:
                        pids += [int(x) for x in f.read().split()]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
        for root, dirs, _files in sorted(os.walk(d), key=lambda w: -len(w[0])):
            try:
                os.rmdir(root)
            except OSError:
                pass
