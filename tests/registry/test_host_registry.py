#!/usr/bin/python3
"""A host's entry in etcd (config `registry:`), against a real etcd member.

Starts etcd on loopback (free ports, a temp data dir) and a host + gateway
with deploy/local/run.sh whose host config adds a `registry:` block, then
checks with etcdctl: the host registers under <prefix>hosts/<name> with its
real address, templates, isolation, warm pool and capacity; the report
follows a create; an orderly stop removes the entry at once (lease
revoked); a kill -9 removes it within the lease TTL; a second host started
under the same name does not take the entry over; with etcd stopped the
host still runs code, and when etcd returns the host registers again.
Every process started here is stopped by PID.

Env: SANDGATE_BUILD. Run with /usr/bin/python3 as root.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgreg import Etcd, drivers, free_port, read, wait  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_SH = os.path.join(REPO, "deploy", "local", "run.sh")
KEY = "sg-demo-key-0001"
TTL = 2
S = {}


def start_etcd():
    S["etcd"].start()


def stop_etcd():
    S["etcd"].stop()


def ctl(*args):
    return S["etcd"].ctl(*args)


def entry():
    r = ctl("get", S["key"], "--print-value-only")
    return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None


def run_sh(cmd, check=True):
    return subprocess.run([RUN_SH, cmd], env=S["env"], check=check, capture_output=True,
                          text=True, timeout=90)


def cli(*args, check=True):
    env = dict(S["env"], SANDGATE_API_KEY=KEY, SANDGATE_USER="reg-user",
               SANDGATE_ADDR="127.0.0.1:" + read(os.path.join(S["run"], "gateway.port")))
    r = subprocess.run([os.path.join(S["env"]["SANDGATE_BUILD"], "bin", "sandgate-cli")] + list(args),
                       env=env, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("sandgate-cli %s: %s%s" % (args, r.stdout, r.stderr))
    return r


def lease_of():
    r = ctl("get", S["key"], "-w", "json")
    kvs = json.loads(r.stdout).get("kvs") if r.returncode == 0 else None
    return kvs[0].get("lease") if kvs else None


def host_log():
    with open(os.path.join(S["run"], "host.log")) as f:
        return f.read()


def host_pid():
    return int(read(os.path.join(S["run"], "host.pid")))


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-registry-")
    unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    S["etcd"] = Etcd(tmp)
    S["ep"] = S["etcd"].ep
    unittest.addModuleCleanup(stop_etcd)
    start_etcd()
    prefix = "/sgtest-%s/" % uuid.uuid4().hex[:8]
    with open(os.path.join(REPO, "deploy", "local", "host.yaml")) as f:
        cfg = drivers.host_config(f.read())   # for this run's driver
    cfg += ("registry:\n  etcd: [\"%s\"]\n  prefix: %s\n  lease_ttl: %d\n" % (S["ep"], prefix, TTL))
    S["host_yaml"] = os.path.join(tmp, "host.yaml")
    with open(S["host_yaml"], "w") as f:
        f.write(cfg)
    S["run"] = os.path.join(tmp, "run")
    S["name"] = "r" + uuid.uuid4().hex[:8]
    env = dict(os.environ, SANDGATE_RUN_DIR=S["run"], SANDGATE_PORT="0", SANDGATE_HOST_PORT="0",
               SANDGATE_HOST_CONFIG=S["host_yaml"], SANDGATE_HOST_NAME=S["name"])
    env.setdefault("SANDGATE_BUILD", os.path.join(REPO, "build"))
    S["env"] = env
    S["key"] = prefix + "hosts/" + S["name"]
    unittest.addModuleCleanup(lambda: run_sh("stop", check=False))
    run_sh("start")


class HostRegistry(unittest.TestCase):
    def test_1_registered_with_its_report(self):
        wait(entry, "the host's entry")
        e = entry()
        port = read(os.path.join(S["run"], "host.port"))
        self.assertEqual(e["name"], S["name"])
        self.assertEqual(e["address"], "127.0.0.1:" + port)
        self.assertEqual(e["capacity"], 1024)
        self.assertEqual([t["name"] for t in e["templates"]], ["code-interpreter"])
        self.assertEqual(e["templates"][0]["isolation"], "process")
        self.assertGreater(e["free_memory"], 0)
        lease = ctl("get", S["key"], "-w", "json")
        self.assertNotEqual(json.loads(lease.stdout)["kvs"][0].get("lease", 0), 0)
        live0 = e["live"]
        sb = cli("create", "--template", "code-interpreter", "--task",
                 "reg-" + uuid.uuid4().hex[:6]).stdout.strip()
        took = wait(lambda: (entry() or {}).get("live") == live0 + 1, "the report to count it", 6)
        print("report followed a create in %.2f s" % took)
        cli("kill", sb)

    def test_2_a_second_host_of_the_same_name_does_not_take_over(self):
        wait(entry, "the host's entry")
        before = entry()["address"]
        port = free_port()
        log = os.path.join(S["tmp"], "dup.log")
        rt = os.path.join(S["tmp"], "dup-rt")
        os.makedirs(rt, exist_ok=True)
        p = subprocess.Popen([os.path.join(S["env"]["SANDGATE_BUILD"], "bin", "sandgate-host"),
                              "--config", S["host_yaml"], "--listen", "127.0.0.1:%d" % port,
                              "--name", S["name"], "--runtime-dir", rt],
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
        try:
            # it refuses at once (the instance lock) or waits for the entry; either way
            # the entry stays the first host's
            time.sleep(3)
            self.assertEqual(entry()["address"], before)
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)

    def test_3_orderly_stop_removes_it_at_once(self):
        wait(entry, "the host's entry")
        run_sh("stop")
        self.assertIsNone(entry())   # revoked before the host exited
        run_sh("start")
        wait(entry, "the entry after a restart", 10)

    def test_4_kill_9_removes_it_within_the_ttl(self):
        wait(entry, "the host's entry")
        os.kill(host_pid(), signal.SIGKILL)
        took = wait(lambda: entry() is None, "the entry to expire", TTL + 5)
        print("entry gone %.2f s after kill -9 (lease ttl %d s)" % (took, TTL))
        self.assertLess(took, TTL + 2)
        run_sh("stop", check=False)
        # the new life registers once the old entry is gone (it already is)
        run_sh("start")
        wait(entry, "the entry after a restart", 10)

    def test_5_etcd_down_the_host_serves_and_registers_again(self):
        wait(entry, "the host's entry")
        old_lease = lease_of()
        # the report names its lease: gateways bind the host's claims to it
        self.assertEqual(entry().get("lease"), int(old_lease))
        sb = cli("create", "--template", "code-interpreter", "--task",
                 "reg-" + uuid.uuid4().hex[:6]).stdout.strip()
        stop_etcd()
        time.sleep(TTL + 1)
        out = cli("run", sb, "print(6 * 7)").stdout
        self.assertIn("42", out)   # no etcd on the action path
        start_etcd()   # same data dir: etcd renews the old lease on its return
        # The host probes the lease its keeper gave up on and keeps it: the
        # task claims and records gateways bound to it must survive an etcd
        # outage (a new lease would release them all).
        took = wait(lambda: "is still alive; kept" in host_log(), "the lease to be kept", 15)
        print("kept its lease %.2f s after etcd returned" % took)
        time.sleep(2 * TTL)
        self.assertEqual(lease_of(), old_lease)
        self.assertIn("42", cli("run", sb, "print(6 * 7)").stdout)
        cli("kill", sb)


if __name__ == "__main__":
    unittest.main(verbosity=2)
