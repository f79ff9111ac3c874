#!/usr/bin/python3
"""Zygote rotation (issue 13 point 10): every sandbox forked from one zygote
shares its address-space layout and str hash secret, so a template's zygote
is replaced by a fresh exec after `rotate_forks` sandboxes or `rotate_after`
seconds (host/drivers/process/zygote.c, docs/security.md).

Each sandbox's default context prints a fingerprint of its layout: hash('x')
(the hash secret), the address of libc's printf (the mmap base), id(sys)
(the heap), the stack's base (/proc/self/maps) and id(None) (the python
binary, not PIE on Debian: the same everywhere, not compared). Then:

- rotate_forks 4, pool 2: two sandboxes of the first generation share the
  fingerprint (the residual risk, documented); after four, generation 2
  serves, and its sandboxes share a fingerprint that differs from the
  first's in every part; a context created afterwards in a first-generation
  sandbox is a fork of the serving zygote, not of its sandbox's; no create
  failed; the replaced zygote exits; the one left runs at the host's
  niceness (a successor preloads niced);
- rotate_after 2s: an idle zygote is not rotated (no tenant has seen it);
  2 s after its first sandbox it is, and the next sandbox differs.
"""
import os
import re
import sys
import tempfile
import time
import unittest

from hostd import REPO, Daemons, drivers, zygotes

FP_CODE = ("import ctypes, sys\n"
           "stack = [int(l.split('-')[0], 16) for l in open('/proc/self/maps')"
           " if l.rstrip().endswith('[stack]')]\n"
           "print('FP', hash('x'), ctypes.cast(ctypes.CDLL(None).printf, ctypes.c_void_p).value,"
           " id(sys), stack[0] if stack else 0, id(None))")
PARTS = ("hash('x')", "libc printf", "id(sys) (heap)", "stack")


def niceness(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def host_config(extra):
    with open(os.path.join(REPO, "deploy", "local", "host.yaml")) as f:
        cfg = drivers.host_config(f.read(), "process")   # rotation is the zygote's
    # The template is the file's last block: drop its pool and rotate_* lines, add ours.
    cfg = re.sub(r"^ +(pool|rotate_forks|rotate_after):.*\n", "", cfg, flags=re.M).rstrip("\n") + "\n"
    cfg += "".join("    %s\n" % line for line in extra)
    fd, path = tempfile.mkstemp(prefix="sgrot.", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(cfg)
    return path


class Rotation(unittest.TestCase):
    def start(self, extra):
        self.cfg_path = host_config(extra)
        self.addCleanup(os.unlink, self.cfg_path)
        self.d = Daemons("sgrot.", "rot", host_config=self.cfg_path)
        self.addCleanup(self.d.stop)
        self.addCleanup(self.show)
        self.n = 0

    def log(self):
        with open(os.path.join(self.d.env["SANDGATE_RUN_DIR"], "host.log"), errors="replace") as f:
            return f.read()

    def show(self):
        sys.stderr.write("\n" + "".join(l + "\n" for l in self.log().splitlines()
                                         if "zygote" in l))

    def wait_log(self, pattern, timeout=40):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, self.log())
            if m:
                return m
            time.sleep(0.05)
        self.fail("no /%s/ in the host log in %d s:\n%s" % (pattern, timeout, self.log()[-3000:]))

    def create(self):
        self.n += 1
        r = self.d.cli("create", "--task", "rot-%d" % self.n)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def fingerprint(self, sid, context=None):
        args = ["run", sid, FP_CODE] + (["--context", context] if context else [])
        r = self.d.cli(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"^FP (-?\d+) (\d+) (\d+) (\d+) (\d+)$", r.stdout, re.M)
        self.assertIsNotNone(m, r.stdout)
        return tuple(int(x) for x in m.groups())

    def assert_differs_everywhere(self, a, b):
        """Every part but id(None): Debian's python3 is not PIE (ET_EXEC), so
        its static objects sit at one address in every Python process on the
        machine, rotated or not (docs/security.md)."""
        for name, x, y in zip(PARTS, a, b):
            self.assertNotEqual(x, y, "%s is the same in two generations" % name)

    def test_after_n_sandboxes_a_new_generation_serves(self):
        self.start(["pool: 2", "rotate_forks: 4", "rotate_after: 0"])
        a = [self.create() for _ in range(2)]
        fa = [self.fingerprint(s) for s in a]
        self.assertEqual(fa[0], fa[1], "two sandboxes of one zygote generation share "
                         "its layout and hash secret (the residual risk)")
        a += [self.create() for _ in range(2)]   # the 4th: generation 1 is used up
        m = self.wait_log(r"zygote generation 2 \(pid (\d+)\) serves; generation 1 "
                          r"\(pid (\d+)\) retires after (\d+) sandboxes")
        gen1_pid = int(m.group(2))
        b = [self.create() for _ in range(2)]
        fb = [self.fingerprint(s) for s in b]
        sys.stderr.write("\ngeneration 1: %s\ngeneration 2: %s\n" % (fa, fb))
        self.assertEqual(fb[0], fb[1])
        self.assert_differs_everywhere(fa[0], fb[0])
        # a sandbox of generation 1 still answers, and its later contexts come
        # from the serving zygote (2, or 3 if generation 2 is rotating too)
        self.assertEqual(self.fingerprint(a[0]), fa[0])
        r = self.d.cli("context", a[0])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_differs_everywhere(fa[0], self.fingerprint(a[0], context=r.stdout.strip()))
        # the replaced zygote exits once its work is done; one zygote is left
        end = time.monotonic() + 30
        while time.monotonic() < end and (len(zygotes(self.d.host_pid)) != 1
                                          or gen1_pid in zygotes(self.d.host_pid)):
            time.sleep(0.1)
        left = zygotes(self.d.host_pid)
        self.assertEqual(len(left), 1, left)
        self.assertNotIn(gen1_pid, left)
        self.assertFalse(os.path.exists("/proc/%d" % gen1_pid), "the old zygote was not reaped")
        self.assertIn("zygote %d (generation 1) retired" % gen1_pid, self.log())
        # a successor preloads niced, and serves (and forks) at the host's niceness
        self.assertEqual(niceness(left[0]), niceness(self.d.host_pid))

    def test_after_t_seconds_of_use_a_new_generation_serves(self):
        self.start(["pool: 1", "rotate_forks: 0", "rotate_after: 2s"])
        time.sleep(3)
        self.assertNotIn("starting zygote generation", self.log(),
                         "a zygote nobody used was rotated")
        f1 = self.fingerprint(self.create())
        first = time.monotonic()
        self.wait_log(r"zygote generation 2 \(pid \d+\) serves")
        time.sleep(max(0, first + 2.2 - time.monotonic()))   # generation 1's time is up
        f2 = self.fingerprint(self.create())
        self.assert_differs_everywhere(f1, f2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
