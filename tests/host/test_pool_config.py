#!/usr/bin/python3
"""The warm pool's size comes from the template's `pool` in the host config,
and SANDGATE_POOL_SIZE overrides it (issue 3: templates named in the host's
config).

Starts a host + gateway with deploy/local/run.sh (own run dir, ephemeral
ports) on a copy of deploy/local/host.yaml whose template says `pool: 2`,
and counts the zygote's children: each sandbox's pid 1 is one, pooled or
not. The pool fills to 2 and stays there; a create takes one and the pool
refills, so 3. With SANDGATE_POOL_SIZE=1 in the environment the same config
keeps 1."""
import os
import re
import tempfile
import time
import unittest

from hostd import REPO, Daemons, children, drivers, zygotes


class PoolFromConfig(unittest.TestCase):
    def start(self, pool_size=None):
        with open(os.path.join(REPO, "deploy", "local", "host.yaml")) as f:
            cfg = drivers.host_config(f.read(), "process")   # the zygote's pool: process only
        # The template is the file's last block: drop its pool line, add ours.
        cfg = re.sub(r"^ +pool:.*\n", "", cfg, flags=re.M).rstrip("\n") + "\n    pool: 2\n"
        fd, self.cfg_path = tempfile.mkstemp(prefix="sgpool.", suffix=".yaml")
        with os.fdopen(fd, "w") as f:
            f.write(cfg)
        self.d = Daemons("sgpool.", "pool", host_config=self.cfg_path, pool_size=pool_size)
        self.host_pid = self.d.host_pid

    def tearDown(self):
        if hasattr(self, "d"):
            self.d.stop()
        if hasattr(self, "cfg_path"):
            os.unlink(self.cfg_path)

    def settled_sandboxes(self, want):
        """The zygote's children once the count has been `want` for 1 s
        (or whatever it is after 20 s): a pool that overshot would show."""
        seen, since = None, time.monotonic()
        deadline = since + 20
        while time.monotonic() < deadline:
            z = zygotes(self.host_pid)
            n = len(children(z[0])) if len(z) == 1 else -1
            if n != seen:
                seen, since = n, time.monotonic()
            elif n == want and time.monotonic() - since >= 1.0:
                return n
            time.sleep(0.1)
        return seen

    def test_template_pool_is_kept_and_refilled(self):
        self.start()
        self.assertEqual(self.settled_sandboxes(2), 2)
        r = self.d.cli("create", "--task", "t1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.settled_sandboxes(3), 3, "2 pooled + the one created")

    def test_environment_overrides_the_template(self):
        self.start(pool_size=1)
        self.assertEqual(self.settled_sandboxes(1), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
