"""supervisor.py — pid 1 of a sandbox: forks contexts and exec children, reaps all.

Owns: the message loop on sandbox_sock (PROTOCOL.md section 3): CTX, INT,
KILLCTX, EXEC, KILLEXEC in; CTX/CTXERR, EXEC/EXECERR, CTXEXIT, EXIT, EGRESS
out; the egress listener (127.0.0.1:3128, only when the sandbox was granted
egress: each accepted connection goes to the host's proxy as EGRESS + fd);
reaping every process of the sandbox; and killing them all when the host
goes away. Creating the sandbox is create.py's; what a context does is
context.py's.
"""

import os
import select
import signal
import socket
import time

import context
import frames

# Where sandboxed code finds the host's egress proxy (HTTP_PROXY etc.).
EGRESS_ADDR = ("127.0.0.1", 3128)

_SIGNALS_RESET = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                  signal.SIGPIPE, signal.SIGCHLD)


class Supervisor:
    def __init__(self, sock, contained):
        self._sock = sock            # owned: sandbox_sock
        self._contained = contained  # True: we are pid 1 of our own pid ns
        self._children = {}          # pid -> ("ctx"|"exec", id)
        self._ctx = {}               # ctx id -> pid (== its pgid)
        self._exec = {}              # exec id -> pid (== its pgid)
        self._held = None            # pooled: (ctx id, [host_end, out_r, err_r])
        self._egress = None          # owned: the 127.0.0.1:3128 listener, if granted
        # SIGCHLD only wakes the loop (through the self-pipe); reaping
        # happens in the loop, after the reply that announced the child.
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    # -- loop --
    def run(self):
        """Serve until the host goes away; never returns."""
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        egress_fd = -1
        if self._egress is not None:
            egress_fd = self._egress.fileno()
            poller.register(egress_fd, select.POLLIN)
        self._reap()
        while True:
            for fd, _ in poller.poll():
                if fd == self._wake_r:
                    self._drain_wakeup()
                    self._reap()
                elif fd == egress_fd:
                    self._on_egress()
                else:
                    self._on_message()

    def _drain_wakeup(self):
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass

    # -- egress --
    def start_egress(self):
        """Listen on 127.0.0.1:3128 in the sandbox's network namespace. Before
        READY, so no code of the sandbox can have taken the port."""
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(EGRESS_ADDR)
        ls.listen(128)
        ls.setblocking(False)
        self._egress = ls

    def _on_egress(self):
        """Hand each waiting connection to the host (EGRESS + fd); the proxy
        there reads and writes it. We keep no copy."""
        for _ in range(64):
            try:
                conn, _ = self._egress.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return   # ECONNABORTED, EMFILE: try again on the next wakeup
            try:
                self._send("EGRESS", [conn.fileno()])
            finally:
                conn.close()

    def _send(self, text, fds=()):
        try:
            frames.send_message(self._sock, text, fds)
        except frames.PeerGone:
            self._shutdown()

    def _on_message(self):
        try:
            data, fds = frames.recv_message(self._sock)
        except frames.PeerGone:
            self._shutdown()
        except ValueError:
            return
        for fd in fds:  # the host sends us no fds; don't keep any
            os.close(fd)
        text = data.decode("utf-8", "replace")
        cmd, _, rest = text.partition(" ")
        if cmd == "CTX":
            self.create_context(rest)
        elif cmd == "INT":
            self._signal(self._ctx.get(rest), signal.SIGINT, group=False)
        elif cmd == "KILLCTX":
            self._signal(self._ctx.get(rest), signal.SIGKILL, group=True)
        elif cmd == "EXEC":
            exec_id, _, command = rest.partition(" ")
            self._exec_start(exec_id, command)
        elif cmd == "KILLEXEC":
            self._signal(self._exec.get(rest), signal.SIGKILL, group=True)
        # Anything else: ignored; the host is trusted, just not infallible.

    @staticmethod
    def _signal(pid, sig, group):
        if pid is None:
            return
        targets = [pid]
        if group:
            # The group catches what the context forked; the pid itself in
            # case the code moved to another group (setsid).
            targets = [-pid, pid]
        for t in targets:
            try:
                os.kill(t, sig)
            except OSError:
                pass

    # -- contexts --
    def wait_activate(self):
        """Pooled sandbox: block until the host's ACTIVATE; its JSON payload.

        Nothing else is expected before it; anything else is dropped. EOF
        (the host gave up on this pool entry) tears the sandbox down."""
        while True:
            try:
                data, fds = frames.recv_message(self._sock)
            except frames.PeerGone:
                self._shutdown()
            except ValueError:
                continue
            for fd in fds:
                os.close(fd)
            if data.startswith(b"ACTIVATE "):
                return data[9:]

    def activate_held(self, payload):
        """Send the held default context its activation: 'a'.. then 'A'
        frames carrying the ACTIVATE JSON. They go first on the socket the
        host will get, so the context applies them before any code."""
        ctx_id, fds = self._held
        host_end = socket.socket(fileno=os.dup(fds[0]))
        try:
            step = frames.PAYLOAD_MAX
            chunks = [payload[i:i + step]
                      for i in range(0, len(payload), step)] or [b""]
            for c in chunks[:-1]:
                frames.send_frame(host_end, "a", c)
            frames.send_frame(host_end, "A", chunks[-1])
        except frames.PeerGone:
            pass  # it died: release_held starts a new one
        finally:
            host_end.close()

    def release_held(self):
        """Hand the held default context's fds to the host (CTX default)."""
        ctx_id, fds = self._held
        self._held = None
        self._reap()
        if ctx_id not in self._ctx:  # it died while pooled: start afresh
            for fd in fds:
                os.close(fd)
            self.create_context(ctx_id)
            return
        self._send("CTX %s" % ctx_id, fds)
        for fd in fds:
            os.close(fd)

    def create_context(self, ctx_id, hold=False):
        if not ctx_id or " " in ctx_id:
            self._send("CTXERR %s bad context id" % ctx_id)
            return
        if ctx_id in self._ctx:
            self._send("CTXERR %s context still running" % ctx_id)
            return
        fds = []
        try:
            host_end, ctx_end = socket.socketpair(socket.AF_UNIX,
                                                  socket.SOCK_SEQPACKET)
            fds += [host_end.detach(), ctx_end.detach()]
            out_r, out_w = os.pipe()
            fds += [out_r, out_w]
            err_r, err_w = os.pipe()
            fds += [err_r, err_w]
            pid = os.fork()
        except OSError as e:
            for fd in fds:
                os.close(fd)
            self._send("CTXERR %s %s" % (ctx_id, e))
            return
        if pid == 0:
            try:
                os.setpgid(0, 0)
                self._in_child()
                for fd in (fds[0], out_r, err_r):
                    os.close(fd)
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET,
                                     fileno=fds[1])
            except BaseException:
                os._exit(127)
            context.start(sock, out_w, err_w)  # never returns
        # Also from the parent: the group exists before anyone can KILLCTX.
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        self._children[pid] = ("ctx", ctx_id)
        self._ctx[ctx_id] = pid
        for fd in (fds[1], out_w, err_w):
            os.close(fd)
        if hold:
            self._held = (ctx_id, [fds[0], out_r, err_r])
            # Let the context warm itself up while it waits (context.py).
            warm = socket.socket(fileno=os.dup(fds[0]))
            try:
                frames.send_frame(warm, "W")
            except frames.PeerGone:
                pass
            finally:
                warm.close()
            return
        self._send("CTX %s" % ctx_id, [fds[0], out_r, err_r])
        for fd in (fds[0], out_r, err_r):
            os.close(fd)

    def _in_child(self):
        """In a forked child: drop everything that is the supervisor's."""
        signal.set_wakeup_fd(-1)
        for sig in _SIGNALS_RESET:
            signal.signal(sig, signal.SIG_DFL)
        os.close(self._wake_r)
        os.close(self._wake_w)
        self._sock.close()
        if self._egress is not None:
            self._egress.close()

    # -- exec --
    def _exec_start(self, exec_id, command):
        if not exec_id:
            self._send("EXECERR %s bad exec id" % exec_id)
            return
        if exec_id in self._exec:
            self._send("EXECERR %s exec id still running" % exec_id)
            return
        fds = []
        try:
            out_r, out_w = os.pipe()
            fds += [out_r, out_w]
            err_r, err_w = os.pipe()
            fds += [err_r, err_w]
            devnull = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
            fds.append(devnull)
            # posix_spawn (vfork-like) costs nothing next to forking this
            # big interpreter; every fd of ours is close-on-exec already, so
            # the shell gets only 0/1/2. The signals we ignore as pid 1 are
            # reset, or /bin/sh would inherit them ignored.
            pid = os.posix_spawn(
                "/bin/sh", ["/bin/sh", "-c", command], dict(os.environ),
                file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                              (os.POSIX_SPAWN_DUP2, out_w, 1),
                              (os.POSIX_SPAWN_DUP2, err_w, 2)],
                setpgroup=0, setsigdef=_SIGNALS_RESET, setsigmask=())
        except OSError as e:
            for fd in fds:
                os.close(fd)
            self._send("EXECERR %s %s" % (exec_id, e))
            return
        self._children[pid] = ("exec", exec_id)
        self._exec[exec_id] = pid
        for fd in (out_w, err_w, devnull):
            os.close(fd)
        self._send("EXEC %s" % exec_id, [out_r, err_r])
        os.close(out_r)
        os.close(err_r)

    # -- reaping --
    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            kind_id = self._children.pop(pid, None)
            if kind_id is None:
                continue  # an orphan that reparented to us
            kind, cid = kind_id
            if os.WIFSIGNALED(status):
                code, sig = -1, os.WTERMSIG(status)
            else:
                code, sig = os.waitstatus_to_exitcode(status), 0
            if kind == "ctx":
                self._ctx.pop(cid, None)
                self._send("CTXEXIT %s %d %d" % (cid, code, sig))
            else:
                self._exec.pop(cid, None)
                self._send("EXIT %s %d %d" % (cid, code, sig))

    # -- teardown --
    def _shutdown(self):
        """The host is gone: nothing in this sandbox may outlive us."""
        if self._contained and os.getpid() == 1:
            # Inside our own pid namespace -1 means exactly the sandbox.
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        else:
            self._kill_descendants()
        os._exit(0)

    def _kill_descendants(self):
        """--no-contain: kill what is ours, never kill(-1) on the host."""
        me = os.getpid()
        for pid in list(self._children):
            self._signal(pid, signal.SIGKILL, group=True)
        # We are a subreaper: grandchildren whose parents die come to us;
        # keep killing our children until none are left.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            kids = _children_of(me)
            for pid in kids:
                self._signal(pid, signal.SIGKILL, group=True)
            try:
                while os.waitpid(-1, os.WNOHANG)[0] != 0:
                    pass
            except ChildProcessError:
                if not kids:
                    return
            time.sleep(0.002)


def _children_of(ppid):
    kids = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return kids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the last ')' (comm may hold spaces): state ppid ...
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == ppid:
            kids.append(int(name))
    return kids


