#!/usr/bin/python3
"""A zygote that dies is restarted, and creates work again (issue 3).

Starts a host + gateway with deploy/local/run.sh (own run dir, ephemeral
ports, warm pool off so every create goes through the zygote), creates a
sandbox, SIGKILLs the template's zygote (a child of the host whose cmdline
names zygote.py), then checks: a new zygote with another pid appears, a
create succeeds and runs code, and the sandbox made before the crash still
answers (sandboxes do not depend on the zygote once made)."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SANDGATE_BUILD", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "sandgate-cli")
RUN_SH = os.path.join(REPO, "deploy", "local", "run.sh")


def zygotes(host_pid):
    """Children of the host running zygote.py in the host's own pid namespace
    (a dead zygote's sandboxes are reparented to the host too, but each is
    pid 1 of a namespace of its own)."""
    host_ns = os.readlink("/proc/%d/ns/pid" % host_pid)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
            ns = os.readlink("/proc/%s/ns/pid" % d)
        except OSError:
            continue
        if ppid == host_pid and b"zygote.py" in cmd and ns == host_ns:
            out.append(int(d))
    return out


class ZygoteRestart(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sgzyg.")
        self.env = dict(os.environ, SANDGATE_RUN_DIR=os.path.join(self.tmp, "run"),
                        SANDGATE_PORT="0", SANDGATE_HOST_PORT="0", SANDGATE_BUILD=BUILD,
                        SANDGATE_POOL_SIZE="0")
        self.env.pop("SANDGATE_HOST_NAME", None)
        subprocess.run([RUN_SH, "start"], env=self.env, check=True, capture_output=True)
        run = self.env["SANDGATE_RUN_DIR"]
        with open(os.path.join(run, "gateway.port")) as f:
            self.env["SANDGATE_ADDR"] = "127.0.0.1:" + f.read().strip()
        with open(os.path.join(run, "host.pid")) as f:
            self.host_pid = int(f.read())
        self.env.update(SANDGATE_API_KEY="sg-demo-key-0001", SANDGATE_USER="zy")

    def tearDown(self):
        subprocess.run([RUN_SH, "stop"], env=self.env, capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli(self, *args):
        return subprocess.run([CLI] + list(args), env=self.env, capture_output=True, text=True,
                              timeout=60)

    def test_dead_zygote_is_restarted_and_creates_work(self):
        before = self.cli("create", "--task", "before")
        self.assertEqual(before.returncode, 0, before.stderr)
        old = zygotes(self.host_pid)
        self.assertEqual(len(old), 1, old)
        os.kill(old[0], signal.SIGKILL)
        new = []
        for _ in range(100):
            new = [p for p in zygotes(self.host_pid) if p != old[0]]
            if new:
                break
            time.sleep(0.1)
        self.assertEqual(len(new), 1, "no new zygote within 10 s")
        r = None
        for _ in range(60):   # the new zygote preloads numpy and pandas first
            r = self.cli("create", "--task", "after")
            if r.returncode == 0:
                break
            time.sleep(0.5)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.strip()
        out = self.cli("run", sid, "import pandas; 6*7")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("[result] 42", out.stdout)
        # the old zygote was reaped by the host (no zombie left)
        self.assertFalse(os.path.exists("/proc/%d" % old[0]), "old zygote not reaped")
        # the sandbox made before the crash still answers
        out = self.cli("run", before.stdout.strip(), "1+1")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("[result] 2", out.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
