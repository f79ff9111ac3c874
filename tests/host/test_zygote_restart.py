#!/usr/bin/python3
"""A zygote that dies is restarted, and creates work again (issue 3).

Starts a host + gateway with deploy/local/run.sh (own run dir, ephemeral
ports, warm pool off so every create goes through the zygote), creates a
sandbox, SIGKILLs the template's zygote (a child of the host whose cmdline
names zygote.py), then checks: a new zygote with another pid appears, a
create succeeds and runs code, and the sandbox made before the crash still
answers (sandboxes do not depend on the zygote once made)."""
import os
import signal
import time
import unittest

from hostd import Daemons, zygotes


class ZygoteRestart(unittest.TestCase):
    def setUp(self):
        # Warm pool off: every create goes through the zygote.
        self.d = Daemons("sgzyg.", "zy", pool_size=0)
        self.host_pid = self.d.host_pid
        self.cli = self.d.cli

    def tearDown(self):
        self.d.stop()

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
