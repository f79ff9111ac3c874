#!/usr/bin/python3
"""docs/api.md cannot drift from the API: docs/gen_api.py --check passes on
the tree as committed, and fails, saying why, on a copy whose proto gained a
field, whose generated part was edited by hand, or whose error table lost a
reason the code sends."""
import os
import shutil
import subprocess
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def check(root):
    return subprocess.run(["/usr/bin/python3", os.path.join(root, "docs", "gen_api.py"), "--check"],
                          capture_output=True, text=True, timeout=60)


class ApiDoc(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sandgate-apidoc-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        for d in ("docs", "proto", "gateway", "host", "rpc", "tenancy"):
            shutil.copytree(os.path.join(REPO, d), os.path.join(self.tmp, d))

    def edit(self, rel, old, new):
        p = os.path.join(self.tmp, rel)
        with open(p) as f:
            s = f.read()
        self.assertIn(old, s)
        with open(p, "w") as f:
            f.write(s.replace(old, new, 1))

    def test_committed_tree_is_in_sync(self):
        r = check(REPO)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_new_proto_field_is_noticed(self):
        self.edit("proto/sandgate/v1/sandgate.proto", "message KillSandboxResponse {}",
                  "message KillSandboxResponse {\n  bool was_running = 1;  // new\n}")
        r = check(self.tmp)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("out of date with proto/", r.stderr)

    def test_a_hand_edit_of_the_generated_part_is_noticed(self):
        self.edit("docs/api.md", "| `ttl_seconds` | 4 |", "| `ttl_seconds` | 5 |")
        r = check(self.tmp)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("out of date", r.stderr)

    def test_an_undocumented_reason_is_noticed(self):
        self.edit("docs/api.md", "| `SANDBOX_LOST` | `NOT_FOUND` |", "| lost | `NOT_FOUND` |")
        r = check(self.tmp)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("SANDBOX_LOST", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
