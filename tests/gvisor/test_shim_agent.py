"""test_shim_agent.py — the two halves of the gvisor driver together.

Owns: the real sandgate-gvisor-shim (C, outside gVisor) with the real agent
(host/drivers/gvisor/agent, pid 1 inside runsc), spoken to as the host
speaks to a sandbox (runtime PROTOCOL.md sections 2a, 3, 4) through
tests/gvisor/sgshim.py: POOLED, ACTIVATE, READY, CTX default, runs, EXEC,
a later CTX, KILLCTX. The shim's own suite (shim_test.py) uses a stand-in
agent and this file's counterpart test_agent.py a stand-in shim; this one
fails when the two drift apart. Exit 77 (skipped) without root or runsc.

    test_shim_agent.py <path to sandgate-gvisor-shim>
"""

import os
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agentmux  # noqa: E402
import sgshim  # noqa: E402

SHIM = None


def run(sock, code, timeout=60):
    """Frames [(type, payload)] of one run, up to 'd'."""
    sock.settimeout(timeout)
    sock.send(b"R" + code.encode())
    out = []
    while True:
        m = sock.recv(70000)
        if not m:
            raise EOFError("context socket closed")
        out.append((chr(m[0]), m[1:]))
        if m[:1] == b"d":
            return out


def text(frames):
    for t, p in frames:
        if t == "r" and p.startswith(b"text/plain\0"):
            return p.split(b"\0", 1)[1].decode()
    return None


def read_all(fd, timeout=30):
    deadline = time.monotonic() + timeout
    data = b""
    os.set_blocking(fd, True)
    while time.monotonic() < deadline:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data
        data += chunk
    raise TimeoutError("pipe did not end")


class ShimWithAgent(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sb = sgshim.Shim(SHIM, agent_dir=agentmux.AGENT_DIR,
                             extra=["--preload", "numpy,pandas"])
        try:
            fds = cls.sb.start(env={"FOO": "bar", "PATH": "/usr/bin:/bin",
                                    "LANG": "C.UTF-8"})
        except BaseException:
            cls.sb.close()
            raise
        cls.ctx = socket.socket(fileno=fds[0])
        cls.out_r, cls.err_r = fds[1], fds[2]

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()
        for fd in (cls.out_r, cls.err_r):
            os.close(fd)
        cls.sb.close()

    def test_default_context_runs_with_the_owners_env(self):
        f = run(self.ctx, "import os, sys\n(os.environ['FOO'], os.getcwd(), "
                          "'pandas' in sys.modules, os.uname().release, os.getppid())")
        self.assertEqual(text(f), "('bar', '/workspace', True, '4.4.0', 1)")
        self.assertEqual(text(run(self.ctx, "x = 20\nx * 2 + 2")), "42")

    def test_exec(self):
        self.sb.send("EXEC e1 echo hi; echo $FOO >&2; exit 4")
        _, fds = self.sb.expect("EXEC e1")
        self.assertEqual(len(fds), 2)
        try:
            self.assertEqual(read_all(fds[0]), b"hi\n")
            self.assertEqual(read_all(fds[1]), b"bar\n")
        finally:
            for fd in fds:
                os.close(fd)
        self.assertEqual(self.sb.expect("EXIT e1")[0], "EXIT e1 4 0")

    def test_later_context_and_kill(self):
        self.sb.send("CTX c2")
        _, fds = self.sb.expect("CTX c2", timeout=60)
        self.assertEqual(len(fds), 3)
        c2 = socket.socket(fileno=fds[0])
        try:
            f = run(c2, "import os\n(os.environ['FOO'], 'x' in globals())")
            self.assertEqual(text(f), "('bar', False)")
            c2.send(b"Rimport time\ntime.sleep(60)")
            self.sb.send("KILLCTX c2")
            self.assertEqual(self.sb.expect("CTXEXIT c2", timeout=30)[0],
                             "CTXEXIT c2 -1 9")
        finally:
            c2.close()
            os.close(fds[1])
            os.close(fds[2])

    def test_interrupt(self):
        self.ctx.send(b"Rimport time\nwhile True: time.sleep(0.01)")
        time.sleep(0.5)
        self.sb.send("INT default")
        self.ctx.settimeout(30)
        frames = []
        while True:
            m = self.ctx.recv(70000)
            frames.append(m)
            if m[:1] == b"d":
                break
        self.assertTrue(any(m.startswith(b"xKeyboardInterrupt") for m in frames))
        self.assertEqual(text(run(self.ctx, "'ok'")), "'ok'")


class DefaultReopened(unittest.TestCase):
    def test_default_context_opened_again_after_it_died(self):
        """The host's timeout ladder and RestartContext: KILLCTX default,
        CTXEXIT, then CTX default. The shim hands the new default over like
        any later context (it once took the agent's answer for it as out of
        turn and ended the sandbox)."""
        sb = sgshim.Shim(SHIM, agent_dir=agentmux.AGENT_DIR)
        fds = []
        try:
            fds = sb.start(env={"FOO": "bar", "PATH": "/usr/bin:/bin"})
            ctx = socket.socket(fileno=fds.pop(0))
            fds.insert(0, ctx)
            self.assertEqual(text(run(ctx, "x = 1\nx")), "1")
            sb.send("KILLCTX default")
            self.assertEqual(sb.expect("CTXEXIT default", timeout=30)[0], "CTXEXIT default -1 9")
            sb.send("CTX default")
            _, new = sb.expect("CTX default", timeout=60)
            self.assertEqual(len(new), 3)
            c2 = socket.socket(fileno=new[0])
            fds += [c2] + new[1:]
            self.assertEqual(text(run(c2, "import os\n('x' in globals(), os.environ['FOO'])")),
                             "(False, 'bar')")
        finally:
            for f in fds:
                f.close() if isinstance(f, socket.socket) else os.close(f)
            sb.close()


def main():
    global SHIM
    if len(sys.argv) < 2:
        print("usage: test_shim_agent.py SHIM", file=sys.stderr)
        sys.exit(2)
    SHIM = sys.argv[1]
    why = agentmux.runsc_usable()
    if why is None and not os.path.exists(SHIM):
        why = "%s not built" % SHIM
    if why:
        print("skipped: %s" % why)
        sys.exit(77)
    r = unittest.main(argv=sys.argv[:1], exit=False, verbosity=2).result
    sys.exit(0 if r.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
