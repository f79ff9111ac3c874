"""The gvisor driver through sandgate-host and the gateway (deploy/local/run.sh),
with the stand-in agent (tests/gvisor/fake_agent) so it checks the driver and
the shim, not the agent: pool and direct creates, Exec, files both ways, the
in-sandbox kernel is gVisor's, kill removes the runsc state and the cgroups,
the Sentry killed fails the sandbox fast, a hung agent is torn down at the
shim's deadline, and a host killed with sandboxes (and runsc state) left
behind sweeps them when it starts again.
"""
import os
import signal
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "host"))
import hostd  # noqa: E402

CONFIG = """\
listen: "127.0.0.1:7444"
name: gvtest
threads: 1
runtime_dir: /run/sandgate
cgroup_root: /sys/fs/cgroup
uid_base: 200000
max_sandboxes: 64
reserve:
  fds: 64
  memory: 256MiB
  pids: 256
templates:
  - name: code-interpreter
    python: /usr/bin/python3
    preload: [numpy, pandas]
    ro_binds: [/usr, /etc/alternatives, /etc/ssl, /etc/ld.so.cache, /etc/matplotlibrc,
               /etc/fonts]
    symlinks: ["usr/bin:/bin", "usr/lib:/lib", "usr/lib64:/lib64", "usr/sbin:/sbin"]
    contain: true
    pool: 2
    isolation: gvisor
"""
T = "code-interpreter"   # the template name deploy/local/policy.yaml allows


def state_root(d):
    run = d.env["SANDGATE_RUN_DIR"]
    with open(os.path.join(run, "host.name")) as f:
        name = f.read().strip()
    return os.path.join(run, "rt", "runsc", name), name


def cgroups_of(name):
    base = "/sys/fs/cgroup/pids/sandgate"
    return sorted(x for x in os.listdir(base) if x.startswith(name + "-")) if os.path.isdir(base) else []


def procs_in(cg):
    try:
        with open("/sys/fs/cgroup/pids/sandgate/%s/cgroup.procs" % cg) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def pool_ready(d):
    """Ready warm sandboxes of T, from the host's /metrics."""
    import urllib.request
    with open(os.path.join(d.env["SANDGATE_RUN_DIR"], "host-metrics.port")) as f:
        port = f.read().strip()
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("sandgate_host_warm_pool{") and 'template="%s"' % T in line:
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class Base(unittest.TestCase):
    pool = None

    @classmethod
    def setUpClass(cls):
        os.environ["SANDGATE_GVISOR_AGENT_DIR"] = os.path.join(HERE, "fake_agent")
        fd, cls.cfg = tempfile.mkstemp(prefix="sgtest-gvisor-", suffix=".yaml")
        with os.fdopen(fd, "w") as f:
            f.write(CONFIG)
        cls.d = hostd.Daemons("sgtest-gvisor-", "u1", host_config=cls.cfg, pool_size=cls.pool)

    @classmethod
    def tearDownClass(cls):
        root, name = state_root(cls.d)
        cls.d.stop()
        os.unlink(cls.cfg)
        # everything the host made is gone with it
        assert not cgroups_of(name), cgroups_of(name)
        assert not os.path.isdir(root) or not os.listdir(root), os.listdir(root)

    def create(self, task):
        if self.pool != 0:
            # a loaded machine warms a gvisor sandbox slowly: take one that is ready
            wait_for(lambda: pool_ready(self.d) >= 1, 120, "a warm sandbox")
        r = self.d.cli("create", "--template", T, "--task", task)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def exec(self, sid, cmd, timeout=None):
        args = ["exec", sid, cmd] + (["--timeout", str(timeout)] if timeout else [])
        return self.d.cli(*args)


class PoolTest(Base):
    def test_create_exec_files_kill(self):
        root, name = state_root(self.d)
        sid = self.create("files")
        r = self.exec(sid, "uname -r; cat /proc/version; id -u")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "4.4.0")
        self.assertNotEqual(lines[0], os.uname().release)
        self.assertTrue(lines[1].startswith("Linux version 4.4.0"))
        self.assertGreaterEqual(int(lines[2]), 200000)
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("from the host")
        try:
            r = self.d.cli("write", sid, "dir/in.txt", f.name)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            os.unlink(f.name)
        r = self.exec(sid, "cat /workspace/dir/in.txt; printf inside > /workspace/out.txt")
        self.assertEqual(r.stdout, "from the host")
        r = self.d.cli("read", sid, "out.txt")
        self.assertEqual(r.stdout, "inside")
        dirs_before = set(os.listdir(root))
        self.assertGreaterEqual(len(dirs_before), 1)
        self.assertIn(sid, cgroups_of(name))
        r = self.d.cli("kill", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        # answered once the cgroups are empty: its runsc state is gone too
        wait_for(lambda: sid not in " ".join(cgroups_of(name)), 5, "its cgroup removed")
        # its dir went (pool refills may have added others meanwhile)
        gone = dirs_before - set(os.listdir(root))
        self.assertGreaterEqual(len(gone), 1, (dirs_before, os.listdir(root)))

    def test_sentry_killed_fails_fast(self):
        _, name = state_root(self.d)
        sid = self.create("sentry")
        cg = [c for c in cgroups_of(name) if c == sid][0]
        sentry = [p for p in procs_in(cg) if b"boot" in cmdline(p)]
        self.assertTrue(sentry)
        t0 = time.time()
        for p in sentry:
            os.kill(p, signal.SIGKILL)
        wait_for(lambda: sid not in cgroups_of(name), 5, "the sandbox torn down")
        self.assertLess(time.time() - t0, 5)
        r = self.exec(sid, "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr, "NOT_FOUND|UNAVAILABLE|lost|not found")

    def test_hung_agent_torn_down(self):
        _, name = state_root(self.d)
        sid = self.create("hung")
        t0 = time.time()
        r = self.exec(sid, "__hang__", timeout=30)   # the agent stops reading its stdin
        took = time.time() - t0
        self.assertNotEqual(r.returncode, 0)
        self.assertLess(took, 20)
        wait_for(lambda: sid not in cgroups_of(name), 5, "the sandbox torn down")


class DirectCreateTest(Base):
    pool = 0

    def test_direct_create(self):
        sid = self.create("direct")
        r = self.exec(sid, "echo $A; uname -r")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[-1], "4.4.0")
        self.assertEqual(self.d.cli("kill", sid).returncode, 0)


class SweepTest(Base):
    def test_leftovers_swept_on_restart(self):
        root, name = state_root(self.d)
        sid = self.create("leak")
        wait_for(lambda: pool_ready(self.d) >= 1, 120, "pool refilled")
        # a runsc create killed midway: its state dir with a lock, no process
        leak = os.path.join(root, "f" * 32)
        os.makedirs(os.path.join(leak, "root"))
        with open(os.path.join(leak, "root", "f" * 32 + "_sandbox:" + "f" * 32 + ".lock"), "w"):
            pass
        before = set(os.listdir(root))
        cgs = cgroups_of(name)
        self.assertIn(sid, cgs)
        os.kill(self.d.host_pid, signal.SIGKILL)   # no cleanup at all
        wait_for(lambda: not os.path.exists("/proc/%d" % self.d.host_pid) or
                 b"" == b"".join(cmdline(self.d.host_pid)), 5, "the host gone")
        time.sleep(0.5)
        run_sh = hostd.RUN_SH
        import subprocess
        subprocess.run([run_sh, "stop"], env=self.d.env, capture_output=True)
        subprocess.run([run_sh, "start"], env=self.d.env, check=True, capture_output=True)
        with open(os.path.join(self.d.env["SANDGATE_RUN_DIR"], "host.pid")) as f:
            self.d.host_pid = int(f.read())
        after = set(os.listdir(root))
        self.assertFalse(before & after, (before, after))     # every old dir removed
        for cg in cgs:
            self.assertNotIn(cg, cgroups_of(name))
        r = self.exec(sid, "true")
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main()
