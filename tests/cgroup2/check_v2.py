"""check_v2.py — sandboxes on a pure cgroup v2 host (run inside the VM that
tests/cgroup2/run.sh boots; the daemons are already up, SANDGATE_ADDR set).

Asserts, through the gateway, what tests/security asserts on cgroup v1:
the host detected v2; each sandbox has its own group under
/sys/fs/cgroup/sandgate with memory.max, memory.swap.max, pids.max and
cpu.max from the policy; a memory bomb is killed by the group's OOM killer
and reported as "out of memory" while the sandbox goes on; a fork bomb stops
at pids.max; kill empties and removes the group. Prints one line per check
and exits non-zero on the first failure.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "security"))
import sgsec  # noqa: E402

MIB = 1 << 20
POLICY_MEMORY = 96 * MIB      # tests/cgroup2/policy.yaml
POLICY_PIDS = 48
POLICY_CPU_MILLIS = 500


def read(path):
    with open(path) as f:
        return f.read().strip()


class CgroupV2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = sgsec.Client()

    def fresh(self):
        sid = self.c.create(ttl=600, retries=60)
        self.addCleanup(self.c.kill, sid)
        return sid

    def group(self, sid):
        d = os.path.join("/sys/fs/cgroup/sandgate", sid)
        self.assertTrue(os.path.isdir(d), "no v2 group %s" % d)
        return d

    def test_host_runs_on_v2(self):
        self.assertFalse(os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        ctl = read("/sys/fs/cgroup/sandgate/cgroup.subtree_control").split()
        for c in ("memory", "pids", "cpu"):
            self.assertIn(c, ctl, "sandgate/ does not delegate %s: %s" % (c, ctl))

    def test_limits_written(self):
        sid = self.fresh()
        d = self.group(sid)
        self.assertEqual(int(read(os.path.join(d, "memory.max"))), POLICY_MEMORY)
        if os.path.exists(os.path.join(d, "memory.swap.max")):
            self.assertEqual(read(os.path.join(d, "memory.swap.max")), "0")
        self.assertEqual(int(read(os.path.join(d, "pids.max"))), POLICY_PIDS)
        self.assertEqual(read(os.path.join(d, "cpu.max")),
                         "%d 100000" % (POLICY_CPU_MILLIS * 100))
        procs = sgsec.cgroup_procs(d)
        self.assertGreaterEqual(len(procs), 2, "supervisor and context in the group")
        r = self.c.run(sid, "import os\nprint(open('/proc/self/cgroup').read().strip())", timeout=60)
        self.assertIsNone(r.error, r)
        self.assertEqual(r.out.strip(), "0::/", "the sandbox sees its own group as / (cgroup ns)")

    def test_memory_bomb_is_out_of_memory(self):
        sid = self.fresh()
        r = self.c.run(sid, "keep = 1\n", timeout=60)
        self.assertIsNone(r.error, r)
        r = self.c.run(sid, 'a = []\nwhile True:\n    a.append(b"\\x01" * (16 << 20))\n',
                       timeout=120)
        self.assertIsNone(r.status, r)
        self.assertIsNotNone(r.error, r)
        self.assertEqual(r.error[0], "MemoryError", r)
        self.assertIn("out of memory", r.error[1], r)
        events = read(os.path.join(self.group(sid), "memory.events"))
        kills = dict(line.split() for line in events.splitlines()).get("oom_kill", "0")
        self.assertGreaterEqual(int(kills), 1, events)
        r = self.c.run(sid, "print(40 + 2)\n", timeout=120)
        self.assertIsNone(r.error, r)
        self.assertEqual(r.out, "42\n", "the context restarts after the OOM kill")

    def test_fork_bomb_stops_at_pids_max(self):
        sid = self.fresh()
        code = ("import os, time\nn = 0\n"
                "try:\n"
                "    while n < 500:\n"
                "        if os.fork() == 0:\n"
                "            time.sleep(30)\n"
                "            os._exit(0)\n"
                "        n += 1\n"
                "except OSError as e:\n"
                "    print('stopped', n, e.errno)\n")
        r = self.c.run(sid, code, timeout=120)
        self.assertIsNone(r.error, r)
        self.assertTrue(r.out.startswith("stopped"), r)
        self.assertLess(int(r.out.split()[1]), POLICY_PIDS, r)
        current = int(read(os.path.join(self.group(sid), "pids.current")))
        self.assertLessEqual(current, POLICY_PIDS)

    def test_later_context_joins_the_sandbox(self):
        # A context made after the sandbox is a zygote fork joined into it
        # (PROTOCOL.md 1a): same group, same root, same workdir as the
        # default context, even though these daemons run under the VM's
        # chroot (setns alone would give the initramfs's root here).
        sid = self.fresh()
        code = ("import os\nprint(open('/proc/self/cgroup').read().strip(), os.getcwd(), "
                "sorted(os.listdir('/')), os.getppid())\n")
        want = self.c.run(sid, code, timeout=60)
        self.assertIsNone(want.error, want)
        ctx = self.c.new_context(sid)
        got = self.c.run(sid, code, ctx=ctx, timeout=60)
        self.assertIsNone(got.error, got)
        self.assertEqual(got.out, want.out)
        self.assertIn("0::/ /workspace", got.out)

    def test_kill_removes_the_group(self):
        sid = self.c.create(ttl=600, retries=60)
        d = self.group(sid)
        self.c.run(sid, "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\n",
                   timeout=60)
        self.c.kill(sid)
        gone = sgsec.wait_for(lambda: not os.path.isdir(d), timeout=30, step=0.2)
        self.assertTrue(gone, "%s still there after kill" % d)


if __name__ == "__main__":
    unittest.main(verbosity=2)
