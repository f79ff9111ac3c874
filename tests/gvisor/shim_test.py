"""sandgate-gvisor-shim against real runsc, with a stand-in agent.

Runs the shim as the host would (tests/gvisor/sgshim.py: its own cgroups,
fd 3) and checks what the shim owns: the bundle (uid, no capabilities,
gVisor's kernel, the read-only binds, the workspace), the supervisor
protocol (POOLED / ACTIVATE / READY / CTX / EXEC / EXIT / KILLCTX), relaying
with message boundaries and windows (1 MiB through one pipe read slowly),
files shared both ways between the host's /proc/<shim>/root/workspace and
gVisor, that runsc makes no cgroup of its own (the Sentry stays in ours),
and the failure paths: a malformed frame or one past the window ends the
shim, the Sentry killed ends it at once, an agent that stops answering ends
it at the kill deadline.
Usage: shim_test.py <build>/bin/sandgate-gvisor-shim
"""
import json
import os
import signal
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgshim  # noqa: E402

SHIM = None


def read_all(fd, timeout=30):
    out = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        b = os.read(fd, 65536)
        if not b:
            return out
        out += b
    raise AssertionError("no EOF")


def exec_cmd(s, eid, command):
    s.send("EXEC %s %s" % (eid, command))
    _, fds = s.expect("EXEC " + eid)
    out, err = read_all(fds[0]), read_all(fds[1])
    for fd in fds:
        os.close(fd)
    text, _ = s.expect("EXIT " + eid)
    return out, err, text


def wait_eof(s, timeout):
    t0 = time.time()
    text, _ = s.recv(timeout)
    while text:
        text, _ = s.recv(timeout)
    return time.time() - t0


def sandbox_pids(s):
    """Host pids of the shim's descendants, by name."""
    out = {}
    for p in sgshim.cgroup_pids(s.cg):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                out[p] = f.read().split(b"\0")
        except OSError:
            pass
    return out


class ShimTest(unittest.TestCase):
    def setUp(self):
        self.s = sgshim.Shim(SHIM)

    def tearDown(self):
        self.s.close()
        self.assertFalse(sgshim.cgroup_pids(self.s.cg))

    def test_contexts_relay_and_close(self):
        s = self.s
        fds = s.start()
        sk = socket.socket(fileno=fds[0])
        # boundaries kept, both directions
        for msg in (b"c" + b"a" * 1000, b"R", b"c" + b"z" * 65000):
            sk.send(msg)
            self.assertEqual(sk.recv(70000), b"echo:" + msg)
            self.assertEqual(os.read(fds[1], 70000), b"out:" + msg)
        s.send("CTX second")
        _, f2 = s.expect("CTX second")
        self.assertEqual(len(f2), 3)
        s.send("CTX second")
        s.expect("CTXERR second context still running")
        s2 = socket.socket(fileno=f2[0])
        s2.send(b"Rx")
        self.assertEqual(s2.recv(100), b"echo:Rx")
        s.send("KILLCTX second")
        s.expect("CTXEXIT second -1 9")
        self.assertEqual(s2.recv(100), b"")          # the host sees EOF on its end
        self.assertEqual(read_all(f2[1]), b"out:Rx")
        # still serving the default context
        sk.send(b"Rok")
        self.assertEqual(sk.recv(100), b"echo:Rok")

    def test_exec_kernel_identity_and_bundle(self):
        s = self.s
        s.start()
        out, err, text = exec_cmd(s, "e1", "uname -r; cat /proc/version; id -u; "
                                           "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; "
                                           "grep NoNewPrivs /proc/self/status; "
                                           "grep -c ' /usr [a-z0-9]* ro,' /proc/mounts; echo w > /tmp/t && cat /tmp/t")
        self.assertEqual(text, "EXIT e1 0 0", err)
        lines = out.decode().splitlines()
        host_release = os.uname().release
        self.assertEqual(lines[0], "4.4.0")                    # gVisor's, not the host's
        self.assertNotIn(host_release, out.decode())
        self.assertTrue(lines[1].startswith("Linux version 4.4.0"))
        self.assertEqual(lines[2], "200999")
        self.assertIn("CapEff:\t0000000000000000", lines)
        # the agent's three (SETUID, SETGID, KILL) bound, none held
        self.assertIn("CapBnd:\t00000000000000e0", lines)
        self.assertEqual(lines[-2], "1")                       # /usr is bound read-only
        self.assertEqual(lines[-1], "w")
        # the agent is root with CAP_KILL; its children cannot signal it
        out, _, _ = exec_cmd(s, "e3", "kill -9 1; echo rc=$?; kill -STOP 1; echo rc=$?")
        self.assertEqual(out.split(), [b"rc=1", b"rc=1"])
        # network: loopback only
        out, _, _ = exec_cmd(s, "e2", "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
        self.assertEqual(out.split(), [b"lo"])

    def test_workspace_shared_both_ways(self):
        s = self.s
        s.start()
        ws = s.workspace()
        st = os.stat(ws)
        self.assertEqual(st.st_uid, 200999)
        with open(os.path.join(ws, "from_host.txt"), "w") as f:
            f.write("hello from the host")
        os.chown(os.path.join(ws, "from_host.txt"), 200999, 200999)
        out, _, _ = exec_cmd(s, "e1", "cat /workspace/from_host.txt; "
                                      "echo inside > /workspace/from_inside.txt")
        self.assertEqual(out, b"hello from the host")
        with open(os.path.join(ws, "from_inside.txt")) as f:
            self.assertEqual(f.read(), "inside\n")
        # changed again on the host: seen at once (shared file access)
        with open(os.path.join(ws, "from_host.txt"), "w") as f:
            f.write("v2")
        out, _, _ = exec_cmd(s, "e2", "cat /workspace/from_host.txt")
        self.assertEqual(out, b"v2")
        # the workspace is not on the host's mount table, nor under the state dir
        self.assertEqual(os.listdir(os.path.join(s.state, s.name, "view", "workspace")), [])

    def test_window_big_output_read_slowly(self):
        s = self.s
        s.start()
        s.send("EXEC big head -c 1048576 /dev/zero")
        _, fds = s.expect("EXEC big")
        time.sleep(1.0)   # nobody reads: the shim must hold no more than its window
        got = 0
        while True:
            b = os.read(fds[0], 4096)
            if not b:
                break
            got += len(b)
        self.assertEqual(got, 1 << 20)
        s.expect("EXIT big 0 0")

    def test_no_cgroup_of_runsc_own(self):
        s = self.s
        s.start()
        pids = sandbox_pids(s)
        names = [c[0].decode() for c in pids.values() if c and c[0]]
        self.assertTrue(any("runsc" in n for n in names), names)
        self.assertGreaterEqual(len(pids), 3)   # shim, gofer, sandbox (+ stubs)
        for c in sgshim.CONTROLLERS:
            base = os.path.join(sgshim.CG_ROOT, c)
            if os.path.isdir(base):
                self.assertFalse([d for d in os.listdir(base) if s.name in d])

    def test_malformed_frame_ends_the_shim(self):
        s = self.s
        s.start()
        s.send("EXEC bad __bad_frame__")
        self.assertLess(wait_eof(s, 10), 5)
        self.assertIn("unknown frame type", s.logtext())

    def test_past_window_ends_the_shim(self):
        s = self.s
        fds = s.start()
        s.send("EXEC w __past_window__")
        self.assertLess(wait_eof(s, 10), 5)
        self.assertIn("past its window", s.logtext())
        os.close(fds[1])

    def test_sentry_killed_fails_fast(self):
        s = self.s
        s.start()
        sentry = [p for p, c in sandbox_pids(s).items() if b"boot" in c]
        self.assertTrue(sentry)
        for p in sentry:
            os.kill(p, signal.SIGKILL)
        self.assertLess(wait_eof(s, 10), 3)

    def test_hung_agent_ends_at_the_kill_deadline(self):
        s = self.s
        s.start()
        s.send("EXEC h __hang__")   # the agent stops reading its stdin
        time.sleep(0.3)
        s.send("KILLCTX default")
        took = wait_eof(s, 30)
        self.assertLess(took, 15)
        self.assertIn("did not answer", s.logtext())

    def test_egress_connection_relayed(self):
        s = self.s
        s.start(egress=True)
        s.send("EXEC e1 python3 -c \"import socket; c = socket.create_connection(('127.0.0.1', "
               "3128)); c.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print(c.recv(100).decode())\"")
        _, efds = s.expect("EXEC e1")
        text, fds = s.expect("EGRESS")
        self.assertEqual(len(fds), 1)
        conn = socket.socket(fileno=fds[0])
        got = b""
        while not got.endswith(b"\r\n\r\n"):
            got += conn.recv(100)
        self.assertEqual(got, b"GET / HTTP/1.0\r\n\r\n")
        conn.sendall(b"HTTP/1.0 200 OK")
        conn.close()
        self.assertEqual(read_all(efds[0]), b"HTTP/1.0 200 OK\n")
        s.expect("EXIT e1 0 0")

    def test_activate_before_ready_and_bad_activate(self):
        s = self.s
        # ACTIVATE may come before the agent is up (a direct create): it is kept
        s.send("ACTIVATE " + json.dumps({"workdir": "/workspace", "env": {"K": "v"}}))
        s.expect("POOLED", timeout=60)
        s.expect("READY")
        s.expect("CTX default")
        s.close()
        self.s = sgshim.Shim(SHIM)
        self.s.expect("POOLED", timeout=60)
        self.s.send('ACTIVATE {"env": {"K": 1}}')
        text, _ = self.s.recv()
        self.assertTrue(text.startswith("ERR "), text)
        self.assertNotIn("K", text.split("ERR ", 1)[1][:0])


if __name__ == "__main__":
    SHIM = sys.argv.pop(1)
    unittest.main()
