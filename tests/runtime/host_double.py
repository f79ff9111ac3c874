"""host_double.py — the host daemon's side of PROTOCOL.md, in Python, for tests.

Owns: starting a zygote over a socketpair, CREATE, and the supervisor and
context channels as the C host speaks them; and killing every process it
started, by pid. Used by test_runtime.py and measure_runtime.py; it is a
test driver, not a reimplementation of the host.
"""

import json
import os
import select
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = os.environ.get(
    "SANDGATE_RUNTIME",
    os.path.normpath(os.path.join(HERE, "..", "..", "host", "runtime")))
INIT = os.environ.get(
    "SANDGATE_INIT",
    os.path.normpath(os.path.join(HERE, "..", "..", "build", "bin",
                                  "sandgate-init")))
PYTHON = "/usr/bin/python3"
RECV_MAX = 65536 + 16


def proc_stat(pid):
    """(state, ppid, pgid) of a pid, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[2])


def descendants(root):
    """Every pid below root, found through /proc ppid links."""
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st:
                kids.setdefault(st[1], []).append(int(name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def recv(sock, timeout=10.0):
    sock.settimeout(timeout)
    data, fds, _, _ = socket.recv_fds(sock, RECV_MAX, 8)
    return data, fds


class Zygote:
    def __init__(self, preload="numpy", env=None, contain=False):
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX,
                                             socket.SOCK_SEQPACKET)
        argv = [PYTHON, "-I", os.path.join(RUNTIME, "zygote.py"),
                "--control-fd", str(theirs.fileno()), "--init", INIT,
                "--preload", preload]
        if not contain:
            argv.append("--no-contain")
        self.proc = subprocess.Popen(argv, pass_fds=[theirs.fileno()],
                                     env=env if env is not None
                                     else dict(os.environ))
        theirs.close()
        self.sandboxes = []
        msg, _ = recv(self.ctl, 60)
        assert msg.startswith(b"HELLO "), msg
        self.pid = int(msg.split()[1])

    def create(self, env=None, workdir="/tmp", spec="id=test\nuid=1000\n",
               pool=False):
        """CREATE; pool=True makes a pool sandbox (PROTOCOL.md section 2a):
        env must then be empty, the real one comes with Sandbox.activate."""
        mine, theirs = socket.socketpair(socket.AF_UNIX,
                                         socket.SOCK_SEQPACKET)
        req = {"id": "sb", "spec": spec, "env": env or {}, "workdir": workdir}
        if pool:
            req["pool"] = True
        socket.send_fds(self.ctl, [b"CREATE " + json.dumps(req).encode()],
                        [theirs.fileno()])
        theirs.close()
        sb = Sandbox(mine)
        self.sandboxes.append(sb)
        return sb

    def close(self):
        for sb in self.sandboxes:
            sb.close()
        # Kill by pid: everything under the zygote, then the zygote.
        for pid in descendants(self.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc.kill()
        self.proc.wait()
        self.ctl.close()


class Sandbox:
    def __init__(self, sock):
        self.sock = sock
        self.pending = []  # messages received while waiting for another
        self.pid = None

    def handshake(self):
        """PID, READY, CTX default → the default Context."""
        msg, _ = self.expect(b"PID ")
        self.pid = int(msg.split()[1])
        self.expect(b"READY")
        msg, fds = self.expect(b"CTX default")
        assert len(fds) == 3, fds
        return Context(self, "default", fds)

    def pooled(self):
        """PID, POOLED: the pool sandbox is ready for ACTIVATE."""
        msg, _ = self.expect(b"PID ")
        self.pid = int(msg.split()[1])
        self.expect(b"POOLED")

    def activate(self, env, workdir="/tmp"):
        """ACTIVATE, then READY, CTX default → the default Context."""
        self.send("ACTIVATE " + json.dumps({"env": env, "workdir": workdir}))
        self.expect(b"READY")
        msg, fds = self.expect(b"CTX default")
        assert len(fds) == 3, fds
        return Context(self, "default", fds)

    def send(self, text):
        self.sock.send(text.encode())

    def expect(self, prefix, timeout=10.0):
        for i, (m, fds) in enumerate(self.pending):
            if m.startswith(prefix):
                del self.pending[i]
                return m, fds
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no %r; pending %r" % (prefix,
                                                          self.pending))
            m, fds = recv(self.sock, left)
            if not m and not fds:
                raise EOFError("sandbox_sock EOF waiting for %r" % prefix)
            if m.startswith(prefix):
                return m, fds
            self.pending.append((m, fds))

    def new_context(self, ctx_id):
        self.send("CTX %s" % ctx_id)
        m, fds = self.expect(b"CTX %s" % ctx_id.encode())
        assert m == b"CTX %s" % ctx_id.encode() and len(fds) == 3, (m, fds)
        return Context(self, ctx_id, fds)

    def exec(self, exec_id, command):
        self.send("EXEC %s %s" % (exec_id, command))
        m, fds = self.expect(b"EXEC %s" % exec_id.encode())
        assert m == b"EXEC %s" % exec_id.encode() and len(fds) == 2, (m, fds)
        return fds

    def close(self):
        self.sock.close()
        for _, fds in self.pending:
            for fd in fds:
                os.close(fd)
        self.pending = []


class Context:
    def __init__(self, sb, ctx_id, fds):
        self.sb = sb
        self.id = ctx_id
        self.sock = socket.socket(fileno=fds[0])
        self.out_r, self.err_r = fds[1], fds[2]

    def submit(self, code):
        data = code.encode()
        step = 65536
        chunks = [data[i:i + step] for i in range(0, len(data), step)] or [b""]
        for c in chunks[:-1]:
            self.sock.send(b"c" + c)
        self.sock.send(b"R" + chunks[-1])

    def collect(self, timeout=10.0):
        """Frames up to and including 'd', as (type, payload) pairs."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            m, _ = recv(self.sock, max(0.01, deadline - time.monotonic()))
            if not m:
                raise EOFError("ctx_sock EOF")
            assert len(m) <= 65536, len(m)
            out.append((m[:1].decode(), m[1:]))
            if m[:1] == b"d":
                return out

    def run(self, code, timeout=10.0):
        self.submit(code)
        return self.collect(timeout)

    def read_pipe(self, fd, want=None, timeout=5.0):
        """Bytes available on a pipe (until `want` is seen or timeout)."""
        buf = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (want is not None and want in buf):
                return buf
            r, _, _ = select.select([fd], [], [], left if want else 0.2)
            if not r:
                if want is None:
                    return buf
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return buf
            buf += chunk

    def close(self):
        self.sock.close()
        os.close(self.out_r)
        os.close(self.err_r)


def results(frames, ftype):
    return [p for t, p in frames if t == ftype]


def text_result(frames):
    rs = [p for t, p in frames if t == "r" and p.startswith(b"text/plain\0")]
    return rs[0].split(b"\0", 1)[1].decode() if rs else None


def rich_results(frames):
    """Results as the host assembles them from 'b', 'k', 'r', 'f' frames:
    [(main: bool, [(mime, data bytes)])]."""
    out, cur, chunks = [], None, []
    for t, p in frames:
        if t == "b":
            cur = (p == b"main", [])
        elif t == "k":
            chunks.append(p)
        elif t == "r":
            mime, data = p.split(b"\0", 1)
            rep = (mime.decode(), b"".join(chunks) + data)
            chunks = []
            if cur is None:
                out.append((False, [rep]))
            else:
                cur[1].append(rep)
        elif t == "f" and cur is not None:
            out.append(cur)
            cur = None
    return out
