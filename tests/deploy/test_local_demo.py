#!/usr/bin/python3
"""README command (a) on both isolation drivers: deploy/local as shipped.

deploy/local/host.yaml ships `code-interpreter` (process driver) and
`code-interpreter-gvisor` (isolation: gvisor), deploy/local/policy.yaml lets
both tenants use both, runsc is in deploy/packages.txt, and demo.sh runs the
demo agent session (`sandgate-cli demo --template T`) on each. This starts
the daemons with run.sh on the shipped configs (own run dir, ephemeral
ports; SANDGATE_POOL_SIZE=1 keeps the warm pools small) and runs the demo's
session on each template as demo.sh does: each succeeds, reports its
isolation, and shows the kernel it ran under: the host's own for process,
gVisor's (uname -r 4.4.0, a /proc/version that is not the host's) for
gvisor."""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "host"))
from hostd import BUILD, REPO, Daemons  # noqa: E402

LOCAL = os.path.join(REPO, "deploy", "local")


def demo_templates():
    """The templates demo.sh runs the session on (its `for t in ...` loop)."""
    with open(os.path.join(LOCAL, "demo.sh")) as f:
        m = re.search(r"^for t in ([^;]+); do$", f.read(), re.M)
    assert m, "demo.sh has no `for t in ...; do` loop over templates"
    return m.group(1).split()


class LocalDemo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemons("sgdemo.", "alice", host_config=os.path.join(LOCAL, "host.yaml"),
                        pool_size=1)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_packages_name_runsc(self):
        with open(os.path.join(REPO, "deploy", "packages.txt")) as f:
            self.assertIn("runsc", f.read().split())

    def test_policy_allows_both_templates(self):
        r = subprocess.run([os.path.join(BUILD, "policy", "sandgate-policy"), "lint",
                            os.path.join(LOCAL, "policy.yaml")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(LOCAL, "policy.yaml")) as f:
            tenants = re.findall(r"^    templates: \[(.*)\]$", f.read(), re.M)
        self.assertEqual(len(tenants), 2)
        for t in tenants:
            self.assertEqual(sorted(x.strip() for x in t.split(",")),
                             ["code-interpreter", "code-interpreter-gvisor"])

    def demo(self, template):
        r = subprocess.run([os.path.join(BUILD, "bin", "sandgate-cli"), "demo",
                            "--template", template], env=self.d.env, capture_output=True,
                           text=True, timeout=180)
        self.assertEqual(r.returncode, 0, "demo on %s:\n%s%s" % (template, r.stdout, r.stderr))
        m = re.search(r"^created sandbox \S+ for task \S+ \(template (\S+), isolation (\w+)\)$",
                      r.stdout, re.M)
        self.assertTrue(m, r.stdout)
        kernel = re.search(r"^kernel: (\S+)$", r.stdout, re.M)
        self.assertTrue(kernel, r.stdout)
        version = re.search(r"^(Linux version .*)$", r.stdout, re.M)
        self.assertTrue(version, r.stdout)
        self.assertIn("[error]", r.stdout + r.stderr)        # action 4's traceback
        self.assertIn("killed sandbox", r.stdout)
        return m.group(2), kernel.group(1), version.group(1)

    def test_demo_runs_on_each_driver_and_shows_its_kernel(self):
        self.assertEqual(demo_templates(), ["code-interpreter", "code-interpreter-gvisor"])
        with open("/proc/version") as f:
            host_version = f.read().strip()
        isolation, kernel, version = self.demo("code-interpreter")
        self.assertEqual(isolation, "process")
        self.assertEqual(kernel, os.uname().release)        # the host's own kernel
        self.assertEqual(version, host_version)
        isolation, kernel, version = self.demo("code-interpreter-gvisor")
        self.assertEqual(isolation, "gvisor")
        self.assertEqual(kernel, "4.4.0")                   # gVisor's Sentry
        self.assertNotEqual(version, host_version)


if __name__ == "__main__":
    unittest.main(verbosity=2)
