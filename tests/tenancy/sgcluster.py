"""sgcluster.py — a gateway in front of several hosts, for tests that stop or
restart one host by its PID (deploy/local/run.sh runs exactly one host).

Each host runs deploy/local/host.yaml (or host_config), rewritten for the
driver this run selects (tests/drivers.py), with its own name,
runtime dir, state dir (the sandbox journal), port file and log under the
test's temp dir; the gateway gets a generated config naming every host.
Every process is one this class started, stopped by its PID: SIGTERM, then
SIGKILL after 5 s. A restarted host keeps its name, state dir and port, so
the gateway's channel finds it again.
"""
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid

import sgtenancy as sg


def _wait_file(path, proc, what, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path) as f:
                return f.read().strip()
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s" % (what, proc.returncode))
        time.sleep(0.05)
    raise RuntimeError("%s did not write %s in %.0f s" % (what, path, timeout))


class Host:
    def __init__(self, cluster, name):
        self.cluster = cluster
        self.name = name
        self.dir = os.path.join(cluster.tmp, "host-" + name)
        self.state_dir = os.path.join(self.dir, "state")
        self.port = 0
        self.proc = None
        self.lives = 0
        os.makedirs(self.dir, exist_ok=True)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def log_path(self):
        return os.path.join(self.dir, "host-%d.log" % self.lives)

    def start(self):
        self.lives += 1
        port_file = os.path.join(self.dir, "host.port")
        metrics_file = os.path.join(self.dir, "host-metrics.port")
        for f in (port_file, metrics_file):
            if os.path.exists(f):
                os.unlink(f)
        log = open(self.log_path(), "w")
        self.proc = subprocess.Popen(
            [os.path.join(sg.BUILD, "bin", "sandgate-host"), "--config", self.cluster.host_config,
             "--listen", "127.0.0.1:%d" % self.port, "--name", self.name,
             "--runtime-dir", os.path.join(self.dir, "rt"), "--state-dir", self.state_dir,
             "--audit-log", os.path.join(self.dir, "egress-audit.log"),
             "--port-file", port_file, "--metrics-listen", "127.0.0.1:0",
             "--metrics-port-file", metrics_file],
            stdout=log, stderr=subprocess.STDOUT, env=self.cluster.env)
        log.close()
        self.port = int(_wait_file(port_file, self.proc, "host " + self.name))
        if sg.drivers.is_gvisor():
            self._wait_warm_sandbox(metrics_file)
            return self
        # the first create waits for the zygote's preload; wait for it here
        end = time.monotonic() + 30
        while time.monotonic() < end:
            with open(self.log_path(), errors="replace") as f:
                if re.search(r"zygote .* ready", f.read()):
                    break
            time.sleep(0.05)
        return self

    def _wait_warm_sandbox(self, metrics_file, timeout=60.0):
        """gvisor has no zygote: wait (bounded) until the host's /metrics
        shows a warm sandbox, or at once with no pool."""
        if self.cluster.env.get("SANDGATE_POOL_SIZE") == "0":
            return
        port = _wait_file(metrics_file, self.proc, "host " + self.name + " metrics")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5) as r:
                    for line in r.read().decode().splitlines():
                        if line.startswith("sandgate_host_warm_pool{") and \
                                float(line.rsplit(" ", 1)[1]) >= 1:
                            return
            except OSError:
                pass
            time.sleep(0.1)

    def stop(self, sig=signal.SIGTERM):
        """Stop this host by its PID; returns its exit status."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=5 if sig != signal.SIGKILL else 10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=10)

    def log(self):
        out = []
        for i in range(1, self.lives + 1):
            p = os.path.join(self.dir, "host-%d.log" % i)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.append("--- host %s life %d\n%s" % (self.name, i, f.read()[-3000:]))
        return "\n".join(out)


class Cluster:
    """n hosts and one gateway. Names are random ([a-z0-9], as host config
    requires) so parallel runs never share cgroups or journals."""

    def __init__(self, tmp, policy_text, n_hosts=2, pool_size=1, host_config=None):
        self.tmp = tmp
        self.policy_path = os.path.join(tmp, "policy.yaml")
        with open(self.policy_path, "w") as f:
            f.write(policy_text)
        # deploy/local/host.yaml for this run's driver (drivers.py), not as shipped
        self.host_config = host_config or sg.local_host_config(tmp)
        self.env = dict(os.environ, SANDGATE_POOL_SIZE=str(pool_size))
        tag = uuid.uuid4().hex[:6]
        self.hosts = [Host(self, "c%s%d" % (tag, i)) for i in range(n_hosts)]
        self.gw = None
        self.addr = None

    def start(self):
        try:
            for h in self.hosts:
                h.start()
            self._start_gateway()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_gateway(self):
        cfg = os.path.join(self.tmp, "gateway.yaml")
        with open(cfg, "w") as f:
            f.write('listen: "127.0.0.1:7443"   # overridden by --listen\npolicy: "%s"\naudit_log: "%s"\nthreads: 1\nhosts:\n'
                    % (self.policy_path, os.path.join(self.tmp, "audit.log")))
            for h in self.hosts:
                f.write('  - name: %s\n    address: "127.0.0.1:%d"\n' % (h.name, h.port))
        port_file = os.path.join(self.tmp, "gateway.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.gw_log = os.path.join(self.tmp, "gateway.log")
        log = open(self.gw_log, "w")
        self.gw = subprocess.Popen([os.path.join(sg.BUILD, "bin", "sandgate"), "--config", cfg,
                                    "--listen", "127.0.0.1:0", "--port-file", port_file],
                                   stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        self.addr = "127.0.0.1:" + _wait_file(port_file, self.gw, "gateway")

    def host(self, name):
        return next(h for h in self.hosts if h.name == name)

    def gateway_log(self):
        with open(self.gw_log, errors="replace") as f:
            return f.read()

    def logs(self):
        return "\n".join([h.log() for h in self.hosts] +
                         ["--- gateway\n" + self.gateway_log()[-3000:]])

    def stop(self):
        if self.gw and self.gw.poll() is None:
            self.gw.terminate()
            try:
                self.gw.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.gw.kill()
                self.gw.wait(timeout=10)
        for h in self.hosts:
            h.stop()
