"""test_shim_agent.py — the two halves of the gvisor driver together.

Owns: the real sandgate-gvisor-shim (C, outside gVisor) with the real agent
(host/drivers/gvisor/agent, pid 1 inside runsc), spoken to as the host
speaks to a sandbox (runtime PROTOCOL.md sections 2a, 3, 4) through
tests/gvisor/sgshim.py: POOLED, ACTIVATE, READY, CTX default, runs, EXEC,
a later CTX, KILLCTX, background processes (PROC with pipes and with a
PTY, SIGPROC, RESIZE, PROCERR, a stdin flood that must not stall the
shim). The shim's own suite (shim_test.py) uses a stand-in
agent and this file's counterpart test_agent.py a stand-in shim; this one
fails when the two drift apart. Exit 77 (skipped) without root or runsc.

    test_shim_agent.py <path to sandgate-gvisor-shim>
"""

import errno
import os
import socket
import sys
import threading
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

    # -- background processes --
    def read_until(self, fd, needle, timeout=30):
        deadline = time.monotonic() + timeout
        data = b""
        os.set_blocking(fd, False)
        while needle not in data:
            if time.monotonic() > deadline:
                raise TimeoutError("%r not in %r" % (needle, data[-300:]))
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                time.sleep(0.02)
                continue
            if not chunk:
                raise EOFError("%r not in %r" % (needle, data[-300:]))
            data += chunk
        return data

    def test_proc_pipes_stdin_and_term(self):
        self.sb.send("PROC p1 p 0 0 echo $FOO >&2; while read l; do echo got:$l; done")
        _, fds = self.sb.expect("PROC p1")
        self.assertEqual(len(fds), 3)
        in_w, out_r, err_r = fds
        try:
            os.write(in_w, b"one\ntwo\n")
            self.read_until(out_r, b"got:one\ngot:two\n")
            self.assertEqual(self.read_until(err_r, b"\n"), b"bar\n")
            self.sb.send("SIGPROC p1 15")
            self.assertEqual(self.sb.expect("EXIT p1")[0], "EXIT p1 -1 15")
            os.set_blocking(out_r, True)
            self.assertEqual(os.read(out_r, 100), b"")
            # Its stdin went with it: the host's writes fail, in_w open or not.
            self.assertRaises(BrokenPipeError, os.write, in_w, b"late\n")
        finally:
            for fd in fds:
                os.close(fd)
        # Closing in_w is EOF on stdin.
        self.sb.send("PROC p1b p 24 80 cat; exit 5")
        _, fds = self.sb.expect("PROC p1b")
        try:
            os.write(fds[0], b"x" * 200000)
            os.close(fds[0])
            fds[0] = -1
            self.assertEqual(read_all(fds[1]), b"x" * 200000)
            self.assertEqual(self.sb.expect("EXIT p1b")[0], "EXIT p1b 5 0")
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)

    def test_pty_sh_typed_input_and_resize(self):
        self.sb.send("PROC p2 t 24 80 sh")
        _, fds = self.sb.expect("PROC p2")
        self.assertEqual(len(fds), 2)
        in_w, out_r = fds
        try:
            os.write(in_w, b"stty size; echo T=$TERM\n")
            self.read_until(out_r, b"T=xterm-256color")
            self.sb.send("RESIZE p2 40 120")
            time.sleep(0.2)
            os.write(in_w, b"stty size\n")
            self.read_until(out_r, b"40 120")
            os.write(in_w, b"exit 6\n")
            self.assertEqual(self.sb.expect("EXIT p2")[0], "EXIT p2 6 0")
            # The output ends once the process is gone (gVisor's master
            # never says EIO; the agent ends the channel at the reap).
            os.set_blocking(out_r, True)
            while os.read(out_r, 65536):
                pass
        finally:
            for fd in fds:
                os.close(fd)

    def test_procerr_for_bad_input(self):
        for msg, word in (("PROC p3 t 0 80 sh", "rows"), ("PROC p4 t 24 1001 sh", "cols"),
                          ("PROC p5 x 24 80 sh", "mode"), ("PROC p6 t -1 80 sh", "rows"),
                          ("PROC p7 t 24", "cols")):
            with self.subTest(msg):
                self.sb.send(msg)
                text_, fds = self.sb.expect("PROCERR " + msg.split()[1])
                self.assertEqual(fds, [])
                self.assertIn(word, text_)
        # A running id; bad SIGPROC / RESIZE values and unknown ids are
        # ignored; the sandbox goes on.
        self.sb.send("PROC p8 p 0 0 read x; echo got $x")
        _, fds = self.sb.expect("PROC p8")
        try:
            self.sb.send("PROC p8 p 0 0 true")
            self.assertIn("still running", self.sb.expect("PROCERR p8")[0])
            for m in ("SIGPROC p8 0", "SIGPROC p8 65", "SIGPROC p8 x", "SIGPROC nobody 9",
                      "RESIZE p8 0 10", "RESIZE p8 10 10", "RESIZE nobody 10 10"):
                self.sb.send(m)
            os.write(fds[0], b"fine\n")
            self.assertEqual(read_all(fds[1]), b"got fine\n")
            self.assertEqual(self.sb.expect("EXIT p8")[0], "EXIT p8 0 0")
        finally:
            for fd in fds:
                os.close(fd)
        self.assertEqual(text(run(self.ctx, "'alive'")), "'alive'")

    def test_stdin_flood_to_a_process_that_never_reads(self):
        self.sb.send("PROC p9 p 0 0 sleep 600")
        _, fds = self.sb.expect("PROC p9")
        in_w = fds[0]
        try:
            os.set_blocking(in_w, False)
            total = 0
            chunk = b"i" * 65536
            deadline = time.monotonic() + 20
            # The host's writes stop with EAGAIN (never block): the
            # process's pipe, the agent's window and the shim's pipe fill.
            while time.monotonic() < deadline:
                try:
                    total += os.write(in_w, chunk)
                except BlockingIOError:
                    time.sleep(0.2)
                    try:
                        total += os.write(in_w, chunk)
                    except BlockingIOError:
                        break
            self.assertLess(time.monotonic(), deadline, "the writes never stopped")
            self.assertLess(total, 4 << 20)
            # Everything else still answers at once.
            t0 = time.monotonic()
            self.assertEqual(text(run(self.ctx, "6 * 7")), "42")
            self.sb.send("EXEC e9 echo fine")
            _, efds = self.sb.expect("EXEC e9")
            self.assertEqual(read_all(efds[0]), b"fine\n")
            for fd in efds:
                os.close(fd)
            self.assertEqual(self.sb.expect("EXIT e9")[0], "EXIT e9 0 0")
            self.assertLess(time.monotonic() - t0, 10)
            self.sb.send("KILLEXEC p9")
            self.assertEqual(self.sb.expect("EXIT p9")[0], "EXIT p9 -1 9")
            # Nobody reads that stdin any more: the host's writes fail.
            deadline = time.monotonic() + 10
            while True:
                try:
                    os.write(in_w, chunk)
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    break
                self.assertLess(time.monotonic(), deadline, "in_w never broke")
                time.sleep(0.05)
        finally:
            for fd in fds:
                os.close(fd)


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
