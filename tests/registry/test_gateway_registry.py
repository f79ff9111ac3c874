#!/usr/bin/python3
"""The gateway in registry mode: its hosts are the ones registered in etcd.

Starts an etcd member, a gateway whose config has `registry:` and no host
list, and hosts that register themselves (host config `registry:`), all on
loopback, stopped by PID. Checks: the gateway starts before any host and
places on the first host once it registers; a second host joins and new
tasks reach it within seconds (rendezvous hashing over the registered
names); a host killed with -9 drops out (lease expiry, logged by the
gateway) and every new create goes to the other; the killed host restarted
at a new port is used again. No static host list is involved anywhere.

Env: SANDGATE_BUILD. Run with /usr/bin/python3 as root.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgreg import Etcd, drivers, free_port, read, wait  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SANDGATE_BUILD", os.path.join(REPO, "build"))
KEY = "sg-demo-key-0001"
TTL = 2
S = {"hosts": {}}


def start_host(name):
    d = os.path.join(S["tmp"], name)
    os.makedirs(os.path.join(d, "rt"), exist_ok=True)
    pf = os.path.join(d, "port")
    if os.path.exists(pf):
        os.unlink(pf)
    log = open(os.path.join(d, "host.log"), "a")
    p = subprocess.Popen([os.path.join(BUILD, "bin", "sandgate-host"), "--config", S["host_yaml"],
                          "--listen", "127.0.0.1:%d" % free_port(), "--name", name,
                          "--runtime-dir", os.path.join(d, "rt"), "--port-file", pf],
                         stdout=log, stderr=subprocess.STDOUT,
                         env=dict(os.environ, SANDGATE_POOL_SIZE="1"))
    log.close()
    S["hosts"][name] = p
    wait(lambda: os.path.exists(pf) or p.poll() is not None, "host %s to start" % name, 30)
    assert p.poll() is None, open(os.path.join(d, "host.log")).read()[-3000:]
    return p


def stop_host(name, sig=signal.SIGTERM):
    p = S["hosts"].pop(name, None)
    if p and p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def gateway_log():
    with open(os.path.join(S["tmp"], "gateway.log")) as f:
        return f.read()


def create(task):
    env = dict(os.environ, SANDGATE_ADDR=S["addr"], SANDGATE_API_KEY=KEY, SANDGATE_USER="gr-user")
    r = subprocess.run([os.path.join(BUILD, "bin", "sandgate-cli"), "create", "--template",
                        "code-interpreter", "--task", task], env=env, capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def owner_host(sandbox_id):
    return sandbox_id.split("-", 1)[0]


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-gwreg-")
    unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    S["etcd"] = Etcd(tmp)
    unittest.addModuleCleanup(S["etcd"].stop)
    S["etcd"].start()
    prefix = "/sgtest-%s/" % uuid.uuid4().hex[:8]
    registry = "registry:\n  etcd: [\"%s\"]\n  prefix: %s\n  lease_ttl: %d\n" % (
        S["etcd"].ep, prefix, TTL)
    with open(os.path.join(REPO, "deploy", "local", "host.yaml")) as f:
        S["host_yaml"] = os.path.join(tmp, "host.yaml")
        with open(S["host_yaml"], "w") as out:
            out.write(drivers.host_config(f.read()) + registry)   # for this run's driver
    gw_yaml = os.path.join(tmp, "gateway.yaml")
    with open(gw_yaml, "w") as f:
        f.write("listen: \"127.0.0.1:1\"\npolicy: \"%s\"\naudit_log: \"%s\"\n%s" % (
            os.path.join(REPO, "deploy", "local", "policy.yaml"), os.path.join(tmp, "audit.log"),
            registry.replace("  lease_ttl: %d\n" % TTL, "")))
    pf = os.path.join(tmp, "gateway.port")
    log = open(os.path.join(tmp, "gateway.log"), "w")
    S["gw"] = subprocess.Popen([os.path.join(BUILD, "bin", "sandgate"), "--config", gw_yaml,
                                "--listen", "127.0.0.1:0", "--port-file", pf],
                               stdout=log, stderr=subprocess.STDOUT)
    log.close()

    def stop_all():
        for name in list(S["hosts"]):
            stop_host(name)
        if S["gw"].poll() is None:
            S["gw"].terminate()
            S["gw"].wait(timeout=30)
    unittest.addModuleCleanup(stop_all)
    wait(lambda: os.path.exists(pf), "the gateway to start", 15)
    S["addr"] = "127.0.0.1:" + read(pf)
    S["a"] = "ra" + uuid.uuid4().hex[:6]
    S["b"] = "rb" + uuid.uuid4().hex[:6]


class GatewayRegistry(unittest.TestCase):
    def test_1_no_host_yet_then_the_first_registers(self):
        rc, out, err = create("t-" + uuid.uuid4().hex[:8])
        self.assertNotEqual(rc, 0)
        self.assertIn("UNAVAILABLE", err)   # no host: retry later
        start_host(S["a"])
        t = wait(lambda: create("t-" + uuid.uuid4().hex[:8])[0] == 0, "a create to succeed", 15)
        print("first host usable %.2f s after it started serving" % t)
        rc, out, _ = create("t-" + uuid.uuid4().hex[:8])
        self.assertEqual(owner_host(out), S["a"])
        self.assertIn("registry: host %s at 127.0.0.1:" % S["a"], gateway_log())

    def test_2_a_second_host_joins_and_gets_new_tasks(self):
        start_host(S["b"])
        seen = set()

        def both():
            for _ in range(6):
                rc, out, _ = create("j-" + uuid.uuid4().hex[:8])
                if rc == 0:
                    seen.add(owner_host(out))
            return seen == {S["a"], S["b"]}
        t = wait(both, "tasks on both hosts", 30)
        print("second host received new tasks within %.2f s of serving" % t)

    def test_3_a_killed_host_drops_out(self):
        stop_host(S["a"], signal.SIGKILL)
        t = wait(lambda: ("registry: host %s left" % S["a"]) in gateway_log(),
                 "the gateway to see the host leave", TTL + 5)
        print("gateway saw the killed host leave %.2f s after kill -9 (lease ttl %d s)" % (t, TTL))
        hosts = set()
        for _ in range(10):
            rc, out, err = create("k-" + uuid.uuid4().hex[:8])
            self.assertEqual(rc, 0, err)
            hosts.add(owner_host(out))
        self.assertEqual(hosts, {S["b"]})

    def test_4_the_host_returns_at_a_new_port(self):
        start_host(S["a"])   # a new free port: the gateway's channel must follow
        seen = set()

        def back():
            rc, out, _ = create("r-" + uuid.uuid4().hex[:8])
            if rc == 0:
                seen.add(owner_host(out))
            return S["a"] in seen
        wait(back, "new tasks on the returned host", 30)
        log = gateway_log()
        self.assertTrue(("registry: host %s registered again" % S["a"]) in log or
                        ("registry: host %s at" % S["a"]) in log.split("left")[-1], log[-2000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
