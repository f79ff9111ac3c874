"""test_file_fifo.py — a tenant must not be able to freeze its host through
the file API (issue 13, point 1).

Code in a sandbox makes a FIFO (and a Unix socket) in its workspace; the same
tenant then calls WriteFile and ReadFile on them. Before the fix the host
opened the FIFO for writing with H.mu held and blocked until someone opened
it for reading: every call of every tenant on the host, and its health
check, stalled. Now each such call answers INVALID_ARGUMENT at once, no byte
reaches the FIFO's reader, and while a flood of them runs the host's health
check and a neighbour sandbox's RunCode keep answering promptly.

Run by run_in_netns.sh (CTest: security_file_fifo).
"""

import os
import stat
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgsec  # noqa: E402

PROMPT_S = 3.0        # a refused file call; generous for a loaded 2-core box
HEALTH_MAX_S = 2.0    # the host's health check while file calls hit the FIFO


def unstick_fifos(uid_base):
    """Open /workspace/f of every sandbox of this host (its cgroups are
    "<host name>-<id>") for reading from outside, once: on the old code this
    is what lets a host blocked in open(O_WRONLY) go on, so a failing run
    still shuts down cleanly."""
    mine = "/" + os.environ["SG_SEC_HOST_NAME"] + "-"
    for pid, uid, _, _, _ in sgsec.procs():
        if uid < uid_base or mine not in sgsec.proc_cgroup(pid):
            continue
        p = "/proc/%d/root/workspace/f" % pid
        try:
            if stat.S_ISFIFO(os.lstat(p).st_mode):
                fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
                time.sleep(0.2)
                os.close(fd)
        except OSError:
            pass


class FileFifo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = sgsec.Client()
        cls.grpc = cls.c.grpc
        cls.uid_base = int(os.environ["SG_SEC_UID_BASE"])
        cls.sb = cls.c.create(user="sec-user")
        # the neighbour is another tenant's: every tenant on the host must go on
        cls.other = sgsec.Client(key=sgsec.OTHER_KEY)
        cls.neighbour = cls.other.create(user="sec-neighbour")
        r = cls.c.run(cls.sb, "import os, socket\n"
                              "os.mkfifo('/workspace/f')\n"
                              "os.mkdir('/workspace/d')\n"
                              "os.mkfifo('/workspace/d/g')\n"
                              "s = socket.socket(socket.AF_UNIX)\n"
                              "s.bind('/workspace/s')\n"
                              "print('made')\n")
        assert "made" in r.out, r

    @classmethod
    def tearDownClass(cls):
        unstick_fifos(cls.uid_base)
        for c, sid, user in ((cls.c, cls.sb, "sec-user"),
                             (cls.other, cls.neighbour, "sec-neighbour")):
            try:
                c.kill(sid, user=user)
            except Exception:
                pass
            c.close()

    def assert_refused(self, res, what):
        code, details, took = res
        self.assertEqual(code, self.grpc.StatusCode.INVALID_ARGUMENT, "%s: %r" % (what, res))
        self.assertIn("not a regular file", details, what)
        self.assertLess(took, PROMPT_S, "%s took %.2f s" % (what, took))

    def test_1_fifo_and_socket_refused_promptly(self):
        self.assert_refused(self.c.write_file(self.sb, "f", b"x"), "WriteFile on a FIFO")
        self.assert_refused(self.c.write_file(self.sb, "/workspace/d/g", b"x"),
                            "WriteFile on a FIFO in a directory")
        self.assert_refused(self.c.read_file(self.sb, "f"), "ReadFile on a FIFO")
        self.assert_refused(self.c.write_file(self.sb, "s", b"x"), "WriteFile on a socket")
        self.assert_refused(self.c.read_file(self.sb, "s"), "ReadFile on a socket")
        # a directory is not a file either, and says so
        code, details, _ = self.c.write_file(self.sb, "d", b"x")
        self.assertEqual(code, self.grpc.StatusCode.INVALID_ARGUMENT, details)
        self.assertIn("directory", details)

    def test_2_fifo_with_a_reader_gets_nothing(self):
        """With a reader inside, the open would succeed: the fstat check
        must still refuse, and no byte may reach the reader."""
        ctx = self.c.new_context(self.sb)
        r = self.c.run(self.sb, "import os\n"
                                "rfd = os.open('/workspace/f', os.O_RDONLY | os.O_NONBLOCK)\n"
                                "print('open')\n", ctx=ctx)
        self.assertIn("open", r.out, r)
        self.assert_refused(self.c.write_file(self.sb, "f", b"secret-bytes"),
                            "WriteFile on a FIFO with a reader")
        r = self.c.run(self.sb, "try:\n"
                                "    got = os.read(rfd, 100)\n"
                                "except BlockingIOError:\n"
                                "    got = b''\n"
                                "print('got=%r' % got)\n", ctx=ctx)
        self.assertIn("got=b''", r.out, r)

    def test_3_flood_does_not_stall_the_host(self):
        """8 threads send WriteFile/ReadFile at the FIFO for 3 s; meanwhile
        the host's health check and a neighbour's RunCode must answer."""
        stop = time.monotonic() + 3.0
        results, lock = [], threading.Lock()

        def flood(i):
            while time.monotonic() < stop:
                res = (self.c.write_file if i % 2 == 0 else self.c.read_file)(
                    self.sb, "f", *([b"x" * 1024] if i % 2 == 0 else []))
                with lock:
                    results.append(res)

        threads = [threading.Thread(target=flood, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        health, runs = [], []
        time.sleep(0.2)
        while time.monotonic() < stop:
            health.append(sgsec.host_health(timeout=HEALTH_MAX_S + 3))
            t0 = time.monotonic()
            r = self.other.run(self.neighbour, "1 + 1", timeout=10, rpc_timeout=15,
                               user="sec-neighbour")
            runs.append((r.value, time.monotonic() - t0, r.status, r.details, r.out))
        for t in threads:
            t.join(30)
        worst_health = max(h[1] for h in health)
        worst_run = max(x[1] for x in runs)
        print("flood: %d file calls; health checks %d, worst %.1f ms; neighbour RunCode %d, "
              "worst %.1f ms" % (len(results), len(health), worst_health * 1000, len(runs),
                                 worst_run * 1000), file=sys.stderr)
        self.assertTrue(all(h[0] == "OK" for h in health), health)
        self.assertLess(worst_health, HEALTH_MAX_S, health)
        self.assertTrue(all(x[0] == "2" for x in runs), [x for x in runs if x[0] != "2"][:3])
        self.assertLess(worst_run, 5.0, runs)
        self.assertTrue(results)
        for res in results:
            # refused as not a file, or turned away while the queue is full
            self.assertIn(res[0], (self.grpc.StatusCode.INVALID_ARGUMENT,
                                   self.grpc.StatusCode.UNAVAILABLE), res)
            self.assertLess(res[2], PROMPT_S, res)

    def test_4_regular_files_still_work(self):
        data = os.urandom(3 << 20)   # more than one chunk of the copy loop
        got, details, _ = self.c.write_file(self.sb, "/workspace/sub/dir/blob.bin", data)
        self.assertIsNone(got, details)
        got, details, _ = self.c.read_file(self.sb, "sub//dir/./blob.bin")
        self.assertEqual(got, data, details)
        # overwritten, not appended: the truncate happens after the checks
        self.c.write_file(self.sb, "sub/dir/blob.bin", b"short")
        got, _, _ = self.c.read_file(self.sb, "sub/dir/blob.bin")
        self.assertEqual(got, b"short")
        r = self.c.run(self.sb, "import os\nst = os.stat('/workspace/sub/dir/blob.bin')\n"
                                "print(st.st_uid == os.getuid(), oct(st.st_mode & 0o777))\n")
        self.assertIn("True 0o644", r.out, r)
        code, details, _ = self.c.write_file(self.sb, "../escape", b"x")
        self.assertEqual(code, self.grpc.StatusCode.INVALID_ARGUMENT, details)


if __name__ == "__main__":
    unittest.main(verbosity=2)
