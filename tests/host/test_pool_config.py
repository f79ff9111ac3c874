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
import shutil
import subprocess
import tempfile
import time
import unittest

from test_zygote_restart import BUILD, CLI, REPO, RUN_SH, zygotes


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except OSError:
            continue
    return out


class PoolFromConfig(unittest.TestCase):
    def start(self, **env):
        self.tmp = tempfile.mkdtemp(prefix="sgpool.")
        with open(os.path.join(REPO, "deploy", "local", "host.yaml")) as f:
            cfg = f.read()
        # The template is the file's last block: drop its pool line, add ours.
        cfg = re.sub(r"^ +pool:.*\n", "", cfg, flags=re.M).rstrip("\n") + "\n    pool: 2\n"
        host_yaml = os.path.join(self.tmp, "host.yaml")
        with open(host_yaml, "w") as f:
            f.write(cfg)
        self.env = dict(os.environ, SANDGATE_RUN_DIR=os.path.join(self.tmp, "run"),
                        SANDGATE_PORT="0", SANDGATE_HOST_PORT="0", SANDGATE_BUILD=BUILD,
                        SANDGATE_HOST_CONFIG=host_yaml, **env)
        self.env.pop("SANDGATE_HOST_NAME", None)
        if "SANDGATE_POOL_SIZE" not in env:
            self.env.pop("SANDGATE_POOL_SIZE", None)
        subprocess.run([RUN_SH, "start"], env=self.env, check=True, capture_output=True)
        run = self.env["SANDGATE_RUN_DIR"]
        with open(os.path.join(run, "gateway.port")) as f:
            self.env["SANDGATE_ADDR"] = "127.0.0.1:" + f.read().strip()
        with open(os.path.join(run, "host.pid")) as f:
            self.host_pid = int(f.read())
        self.env.update(SANDGATE_API_KEY="sg-demo-key-0001", SANDGATE_USER="pool")

    def tearDown(self):
        subprocess.run([RUN_SH, "stop"], env=self.env, capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

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
        r = subprocess.run([CLI, "create", "--task", "t1"], env=self.env, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.settled_sandboxes(3), 3, "2 pooled + the one created")

    def test_environment_overrides_the_template(self):
        self.start(SANDGATE_POOL_SIZE="1")
        self.assertEqual(self.settled_sandboxes(1), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
