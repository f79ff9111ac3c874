"""agent.py — pid 1 inside a gVisor sandbox (host/drivers/gvisor/PROTOCOL.md).

Owns: start-up (the mux moved off fds 0/1, the template's modules
preloaded, the default context forked and warmed, `ready`), the one poll
loop over the mux, the channels, the children's exits and the egress
listener, and the control messages (activate, ctx, int, killctx, exec,
killexec, proc, sigproc, resize; ready, ctxexit, exit, egress, log). The frame format is mux.py's,
one channel's relaying and windows channel.py's, forking and reaping
children.py's; a context itself is host/runtime's (context.py), imported,
not copied.

Run as: /usr/bin/python3 -I agent.py [--runtime DIR] [--preload a,b]
                                    [--child-uid N [--child-gid N]]

It trusts the shim's framing to be right and treats a frame that is not
(unknown type or op, bad JSON, past a limit or a window) as the end: a
`log` saying why, then exit 2, which ends the sandbox. It trusts nothing
from inside the sandbox: contexts and exec children only fill their own
channels, within their windows.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import argparse  # noqa: E402
import errno  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

import mux  # noqa: E402
from channel import HUP, IN, PIPE, SOCK, STREAM, Channel  # noqa: E402
import children  # noqa: E402
from children import Children, Refused, check_id  # noqa: E402

EGRESS_PORT = 3128
EGRESS_CONN_MAX = 64        # live egress connections; more are closed at once
EGRESS_ACCEPT_BATCH = 16
OUT_HIGH = 256 * 1024       # queued for the shim: stop reading channels above
OUT_STOP_INPUT = 4 << 20    # ...and the shim's input too (it is not reading us)
ACK_DELAY_S = 0.001         # a W waits this long for a frame to ride along
ACK_EAGER = mux.WINDOW // 4
LOG_MAX = 1000
LOG_BURST, LOG_RATE = 50, 20.0   # log lines: a burst, then per second
FATAL_FLUSH_S = 1.0
READ_MAX = 256 * 1024

# Modules user code almost always touches (as host/runtime/zygote.py).
_RUNTIME_PRELOAD = ("json", "subprocess", "traceback", "linecache", "ast",
                    "io", "tempfile", "pickle", "uuid", "datetime")


class Fatal(Exception):
    """The agent cannot go on (bad activate, listener failed)."""


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="agent.py")
    p.add_argument("--runtime", default=os.path.normpath(
        os.path.join(HERE, "..", "..", "..", "runtime")))
    p.add_argument("--preload", default="")
    # Tests of the agent without gVisor share the machine's loopback.
    p.add_argument("--egress-port", type=int, default=EGRESS_PORT)
    # Run as root inside gVisor (CAP_SETUID, CAP_SETGID, CAP_KILL only) and
    # start every context and exec as this uid/gid: then code in the sandbox
    # cannot SIGKILL or SIGSTOP pid 1, which this runsc does not prevent.
    p.add_argument("--child-uid", type=int)
    p.add_argument("--child-gid", type=int)
    return p.parse_args(argv)


def _move_mux_fds():
    """The mux lives on high close-on-exec fds; 0 and 1 become /dev/null,
    so nothing that prints (a preloaded module, a forked child before it
    is set up) can write into the mux."""
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)
        os.set_blocking(fd, False)
    return in_fd, out_fd


class Agent:
    def __init__(self, in_fd, out_fd, args, prctl):
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.args = args
        self._prctl = prctl
        self.out = bytearray()          # frames for the shim, in order
        self.reader = mux.Reader()
        self.chans = {}                 # num -> Channel (owned)
        self.max_shim_chan = mux.DEFAULT_ERR
        self.next_egress = mux.EGRESS_FIRST
        drop = None
        if args.child_uid is not None:
            gid = args.child_gid if args.child_gid is not None else args.child_uid
            drop = (args.child_uid, gid)
        self.children = Children(drop)
        self.activated = False
        self.env = {}                   # the sandbox's, from activate
        self.held_dead = False          # the default context died before activate
        self.listener = None            # egress (owned)
        self.egress_conns = 0
        self.pty_out = {}               # proc id -> its PTY's output Channel (borrowed)
        self.proc_in = {}               # proc id -> its stdin Channel (borrowed)
        self._ack_deadline = None
        self._log_tokens = float(LOG_BURST)
        self._log_time = time.monotonic()
        self._log_dropped = 0
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.is_pid1 = os.getpid() == 1

    # -- output --
    def emit(self, frame):
        self.out += frame

    def send_control(self, obj):
        self.emit(mux.frame(mux.J, mux.CONTROL,
                            json.dumps(obj, separators=(",", ":")).encode()))

    def log(self, text):
        print("sandgate-agent: %s" % text, file=sys.stderr, flush=True)
        now = time.monotonic()
        self._log_tokens = min(LOG_BURST, self._log_tokens +
                               (now - self._log_time) * LOG_RATE)
        self._log_time = now
        if self._log_tokens < 1:
            self._log_dropped += 1
            return
        self._log_tokens -= 1
        if self._log_dropped:
            text = "(%d log lines dropped) %s" % (self._log_dropped, text)
            self._log_dropped = 0
        self.send_control({"op": "log", "msg": text[:LOG_MAX]})

    # -- start-up --
    def start_default(self):
        pid, sock, out_r, err_r = self.children.start_context("default", {})
        self._add_context_chans(mux.DEFAULT_SOCK, mux.DEFAULT_OUT,
                                mux.DEFAULT_ERR, sock, out_r, err_r)
        return pid

    def hold_default(self):
        for n in (mux.DEFAULT_SOCK, mux.DEFAULT_OUT, mux.DEFAULT_ERR):
            self.chans[n].held = True
        # Warm it now, while the sandbox is in the pool (context.py _warm_up).
        ch = self.chans[mux.DEFAULT_SOCK]
        ch.push(b"W", counted=False)
        ch.on_writable()

    def _add_context_chans(self, s, o, e, sock, out_r, err_r):
        self.chans[s] = Channel(s, SOCK, sock, self.emit, self.log)
        self.chans[o] = Channel(o, PIPE, out_r, self.emit, self.log)
        self.chans[e] = Channel(e, PIPE, err_r, self.emit, self.log)

    # -- the loop --
    def run(self):
        poller = select.poll()
        registered = {}
        while True:
            want = {self.wake_r: select.POLLIN}
            if len(self.out) < OUT_STOP_INPUT:
                want[self.in_fd] = select.POLLIN
            if self.out:
                want[self.out_fd] = select.POLLOUT
            read_ok = len(self.out) < OUT_HIGH
            by_fd = {}
            for ch in self.chans.values():
                ev = 0
                if read_ok and ch.want_read():
                    ev |= select.POLLIN | (select.POLLRDHUP if ch.kind != PIPE else 0)
                if ch.want_write():
                    ev |= select.POLLOUT
                if ev:
                    want[ch.fd] = ev
                    by_fd[ch.fd] = ch
            if self.listener is not None and read_ok and \
                    self.egress_conns < EGRESS_CONN_MAX:
                want[self.listener.fileno()] = select.POLLIN
            for fd in [fd for fd in registered if fd not in want]:
                poller.unregister(fd)
                del registered[fd]
            for fd, ev in want.items():
                if registered.get(fd) != ev:
                    poller.register(fd, ev)
                    registered[fd] = ev
            timeout = None
            if self._ack_deadline is not None:
                timeout = max(0.0, (self._ack_deadline - time.monotonic()) * 1000)
            events = poller.poll(timeout)
            for fd, rev in events:
                if fd == self.in_fd:
                    self._on_input()
                elif fd == self.out_fd:
                    pass   # written below
                elif fd == self.wake_r:
                    self._on_wake()
                elif self.listener is not None and fd == self.listener.fileno():
                    self._on_accept()
                else:
                    ch = by_fd.get(fd)
                    if ch is None or self.chans.get(ch.num) is not ch:
                        continue   # replaced or ended earlier in this batch
                    # POLLERR alone: a pipe with no reader left (a process
                    # that died with its stdin unread); the write says EPIPE.
                    if rev & (select.POLLOUT | select.POLLERR) and ch.want_write():
                        ch.on_writable()
                    if rev & (select.POLLIN | HUP) and ch.want_read():
                        ch.on_readable(rev)
            self._retire()
            self._acks()
            self._write_out()

    def _retire(self):
        for num in [n for n, ch in self.chans.items() if ch.done]:
            ch = self.chans.pop(num)
            if ch.ack_pending:
                self.emit(mux.window(num, ch.ack_pending))
            ch.close()
            if ch.kind == STREAM:
                self.egress_conns -= 1

    def _acks(self):
        pending = [ch for ch in self.chans.values() if ch.ack_pending]
        if not pending:
            self._ack_deadline = None
            return
        now = time.monotonic()
        if self._ack_deadline is None:
            self._ack_deadline = now + ACK_DELAY_S
        if self.out or now >= self._ack_deadline or \
                any(ch.ack_pending >= ACK_EAGER for ch in pending):
            for ch in pending:
                self.emit(mux.window(ch.num, ch.ack_pending))
                ch.ack_pending = 0
            self._ack_deadline = None

    def _write_out(self):
        while self.out:
            try:
                n = os.write(self.out_fd, self.out)
            except BlockingIOError:
                return
            except InterruptedError:
                continue
            except OSError:
                self.shutdown(0)   # the shim is gone
            del self.out[:n]

    def _on_wake(self):
        try:
            while os.read(self.wake_r, 256):
                pass
        except BlockingIOError:
            pass
        self.reap()

    def reap(self):
        for c, code, sig in self.children.reap():
            if c.kind == "ctx":
                if c.id == "default" and not self.activated:
                    # Held in the pool: nobody knows it yet. activate
                    # starts a new one on the same channels.
                    self.held_dead = True
                    continue
                self.send_control({"op": "ctxexit", "id": c.id,
                                   "code": code, "signal": sig})
            else:
                out = self.pty_out.pop(c.id, None)
                if out is not None and self.chans.get(out.num) is out:
                    out.hangup()
                inp = self.proc_in.pop(c.id, None)
                if inp is not None:
                    inp.end_input()
                self.send_control({"op": "exit", "id": c.id,
                                   "code": code, "signal": sig})

    # -- input from the shim --
    def _on_input(self):
        try:
            data = os.read(self.in_fd, READ_MAX)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.shutdown(0)
        self.reader.feed(data)
        try:
            for ftype, chan, payload in self.reader.frames():
                if ftype == mux.J:
                    self._on_control(payload)
                else:
                    self._on_chan_frame(ftype, chan, payload)
        except mux.MuxError as e:
            self.fatal("protocol error from the shim: %s" % e)
        except Fatal as e:
            self.fatal(str(e))

    def _finished(self, chan):
        """A channel that existed and is over: late frames are dropped."""
        if chan < mux.EGRESS_FIRST - 1:
            return chan <= self.max_shim_chan
        return chan % 2 == 1 and chan < self.next_egress

    def _on_chan_frame(self, ftype, chan, payload):
        ch = self.chans.get(chan)
        if ch is None:
            if self._finished(chan):
                return
            raise mux.MuxError("frame %c on channel %d, which was never opened"
                               % (ftype, chan))
        if ch.held:
            raise mux.MuxError("frame %c on channel %d before activate"
                               % (ftype, chan))
        if ftype == mux.M:
            ch.push(payload)
            ch.on_writable()
        elif ftype == mux.C:
            ch.shim_closed()
        else:
            ch.on_ack(struct.unpack(">I", payload)[0])

    def _on_control(self, payload):
        try:
            msg = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise mux.MuxError("control message is not JSON") from None
        if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
            raise mux.MuxError("control message without an op")
        op = msg["op"]
        handler = {"activate": self._op_activate, "ctx": self._op_ctx,
                   "int": self._op_int, "killctx": self._op_killctx,
                   "exec": self._op_exec, "killexec": self._op_killexec,
                   "proc": self._op_proc, "sigproc": self._op_sigproc,
                   "resize": self._op_resize}.get(op)
        if handler is None:
            raise mux.MuxError("unknown op %r" % op[:64])
        if op != "activate":
            if not check_id(msg.get("id")):
                raise mux.MuxError("%s: bad id" % op)
        handler(msg)

    # -- control ops --
    def _op_activate(self, msg):
        if self.activated:
            raise mux.MuxError("second activate")
        env = msg.get("env", {})
        if not isinstance(env, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k and "=" not in k
                and "\0" not in k + v for k, v in env.items()):
            raise Fatal("activate: env must map names to strings")
        workdir = msg.get("workdir", "/workspace")
        if not isinstance(workdir, str) or "\0" in workdir:
            raise Fatal("activate: workdir must be a string")
        try:
            os.chdir(workdir)
        except OSError as e:
            raise Fatal("activate: chdir(%s): %s" % (workdir, e.strerror)) from None
        if msg.get("egress") is True:
            self._listen()
        self.env = dict(env)
        self.activated = True
        self.reap()   # a held default context that died is known now
        if self.held_dead:
            for n in (mux.DEFAULT_SOCK, mux.DEFAULT_OUT, mux.DEFAULT_ERR):
                self.chans.pop(n).close()
            try:
                _, sock, out_r, err_r = self.children.start_context(
                    "default", self.env)
            except Refused as e:
                raise Fatal("activate: the default context: %s" % e) from None
            self._add_context_chans(mux.DEFAULT_SOCK, mux.DEFAULT_OUT,
                                    mux.DEFAULT_ERR, sock, out_r, err_r)
        else:
            # The same JSON the host would send a held context (runtime
            # PROTOCOL.md §2a): 'a' chunks, then 'A'; before any code.
            act = json.dumps({"workdir": workdir, "env": env}).encode()
            ch = self.chans[mux.DEFAULT_SOCK]
            step = mux.PAYLOAD_MAX - 1
            chunks = [act[i:i + step] for i in range(0, len(act), step)] or [b""]
            for i, chunk in enumerate(chunks):
                ch.push((b"A" if i == len(chunks) - 1 else b"a") + chunk,
                        counted=False)
            for n in (mux.DEFAULT_SOCK, mux.DEFAULT_OUT, mux.DEFAULT_ERR):
                self.chans[n].held = False
            ch.on_writable()
        self.send_control({"op": "activated"})

    def _listen(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", self.args.egress_port))
            s.listen(128)
            s.setblocking(False)
        except OSError as e:
            s.close()
            raise Fatal("egress listener on 127.0.0.1:%d: %s"
                        % (self.args.egress_port, e.strerror)) from None
        self.listener = s

    def _new_chans(self, msg, names):
        """The channel numbers a ctx / exec names: new, increasing, in the
        shim's range. Returns them, or None (and they are not taken)."""
        nums = [msg.get(k) for k in names]
        if not all(type(n) is int and self.max_shim_chan < n < mux.EGRESS_FIRST - 1
                   for n in nums) or len(set(nums)) != len(nums):
            return None
        self.max_shim_chan = max(nums)
        return nums

    def _op_ctx(self, msg):
        id_ = msg["id"]
        language = msg.get("language", "python")
        if language not in ("python", "javascript"):
            return self.send_control({"op": "ctxerr", "id": id_,
                                      "msg": "language: python or javascript expected"})
        nums = self._new_chans(msg, ("sock", "out", "err"))
        if nums is None:
            return self.send_control({"op": "ctxerr", "id": id_,
                                      "msg": "sock, out, err: new channel numbers expected"})
        if not self.activated:
            return self.send_control({"op": "ctxerr", "id": id_,
                                      "msg": "not activated"})
        try:
            _, sock, out_r, err_r = self.children.start_context(id_, self.env, language)
        except Refused as e:
            return self.send_control({"op": "ctxerr", "id": id_, "msg": str(e)})
        except OSError as e:
            return self.send_control({"op": "ctxerr", "id": id_,
                                      "msg": os.strerror(e.errno or errno.EIO)})
        self._add_context_chans(nums[0], nums[1], nums[2], sock, out_r, err_r)
        self.send_control({"op": "ctx", "id": id_})

    def _op_exec(self, msg):
        id_ = msg["id"]
        nums = self._new_chans(msg, ("out", "err"))
        command = msg.get("command")
        err = None
        if nums is None:
            err = "out, err: new channel numbers expected"
        elif not isinstance(command, str) or "\0" in command:
            err = "command: a string without NUL expected"
        elif not self.activated:
            err = "not activated"
        if err is None:
            try:
                _, out_r, err_r = self.children.start_exec(id_, command, self.env)
            except Refused as e:
                err = str(e)
            except OSError as e:
                err = os.strerror(e.errno or errno.EIO)
        if err is not None:
            return self.send_control({"op": "execerr", "id": id_, "msg": err})
        self.chans[nums[0]] = Channel(nums[0], PIPE, out_r, self.emit, self.log)
        self.chans[nums[1]] = Channel(nums[1], PIPE, err_r, self.emit, self.log)
        self.send_control({"op": "exec", "id": id_})

    def _op_proc(self, msg):
        """A background process (PROC): mode p (pipes: in, out, err
        channels) or t (a PTY: in, out). Every field is checked here too,
        whatever the shim checked: a bad one is a procerr naming it."""
        id_ = msg["id"]
        mode = msg.get("mode")
        names = ("in", "out", "err") if mode == "p" else ("in", "out")
        nums = self._new_chans(msg, names) if mode in ("p", "t") else None
        command = msg.get("command")
        rows, cols = msg.get("rows"), msg.get("cols")
        err = None
        if mode not in ("p", "t"):
            err = "mode: p or t expected"
        elif nums is None:
            err = "%s: new channel numbers expected" % ", ".join(names)
        elif mode == "t" and not all(type(v) is int and 1 <= v <= children.PTY_DIM_MAX
                                     for v in (rows, cols)):
            err = "rows, cols: 1..%d expected" % children.PTY_DIM_MAX
        elif not isinstance(command, str) or "\0" in command:
            err = "command: a string without NUL expected"
        elif not self.activated:
            err = "not activated"
        if err is None:
            try:
                _, fds = self.children.start_proc(id_, mode, rows, cols,
                                                  command, self.env)
            except Refused as e:
                err = str(e)
            except OSError as e:
                err = os.strerror(e.errno or errno.EIO)
        if err is not None:
            return self.send_control({"op": "procerr", "id": id_, "msg": err})
        self.chans[nums[0]] = Channel(nums[0], IN, fds[0], self.emit, self.log)
        for num, fd in zip(nums[1:], fds[1:]):
            self.chans[num] = Channel(num, PIPE, fd, self.emit, self.log)
        # Its stdin ends when it is reaped, not when the host gets round to
        # closing in_w: an exited process keeps no channel.
        self.proc_in[id_] = self.chans[nums[0]]
        if mode == "t":
            self.pty_out[id_] = self.chans[nums[1]]
        self.send_control({"op": "proc", "id": id_})

    def _op_sigproc(self, msg):
        sig = msg.get("signal")
        if type(sig) is not int or not 1 <= sig <= 64:
            self.log("sigproc %s: signal %r out of range; ignored" % (msg["id"], sig))
            return
        self.children.signal(self.children.exec, msg["id"], sig, True)

    def _op_resize(self, msg):
        rows, cols = msg.get("rows"), msg.get("cols")
        if not all(type(v) is int and 1 <= v <= children.PTY_DIM_MAX for v in (rows, cols)):
            self.log("resize %s: rows/cols out of range; ignored" % msg["id"])
            return
        self.children.resize(msg["id"], rows, cols)

    def _op_int(self, msg):
        self.children.signal(self.children.ctx, msg["id"], signal.SIGINT, False)

    def _op_killctx(self, msg):
        self.children.signal(self.children.ctx, msg["id"], signal.SIGKILL, True)

    def _op_killexec(self, msg):
        self.children.signal(self.children.exec, msg["id"], signal.SIGKILL, True)

    # -- egress --
    def _on_accept(self):
        for _ in range(EGRESS_ACCEPT_BATCH):
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return   # ECONNABORTED, EMFILE: again on the next wakeup
            if self.egress_conns >= EGRESS_CONN_MAX or \
                    self.next_egress > mux.CHAN_MAX:
                conn.close()
                continue
            num = self.next_egress
            self.next_egress += 2
            self.egress_conns += 1
            # The shim hears of the channel before any M on it (one queue).
            self.send_control({"op": "egress", "chan": num})
            self.chans[num] = Channel(num, STREAM, conn, self.emit, self.log)

    # -- the end --
    def fatal(self, text):
        self.log(text)
        deadline = time.monotonic() + FATAL_FLUSH_S
        while self.out and time.monotonic() < deadline:
            try:
                n = os.write(self.out_fd, self.out)
                del self.out[:n]
            except BlockingIOError:
                select.select([], [self.out_fd], [], 0.05)
            except OSError:
                break
        self.shutdown(2)

    def shutdown(self, code):
        """Every process of the sandbox goes with us. As pid 1 of gVisor's
        pid namespace, kill(-1) is exactly the sandbox; run as a plain
        process (tests without gVisor) the children and what they left
        behind (we are their subreaper) are killed by pid."""
        if self.is_pid1:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        else:
            for pid in self.children.all_pids():
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            _kill_descendants()
        os._exit(code)


def _kill_descendants():
    for _ in range(20):
        kids = []
        try:
            for tid in os.listdir("/proc/self/task"):
                with open("/proc/self/task/%s/children" % tid) as f:
                    kids += [int(p) for p in f.read().split()]
        except OSError:
            return
        if not kids:
            return
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(0.01)


def _warm(rounds=100):
    """Walk the paths every context walks (a notebook cell, its warm-up and
    activation frames, re-seeding) here, so Python has quickened that code
    once in the heap every fork shares (as host/runtime/zygote.py does).
    Nothing of it stays."""
    import context
    import notebook
    import reseed
    main = sys.modules.get("__main__")
    try:
        nb = notebook.Notebook(lambda ftype, payload: None)
        for _ in range(rounds):
            reseed.reseed()
            nb.run(b"_w = [i * 2 for i in range(8)]\n_w")
            context._warm_up()
            json.loads(json.dumps({"workdir": "/", "env": {"K": "v"}}))
    except Exception as e:
        print("sandgate-agent: warm-up: %s" % e, file=sys.stderr, flush=True)
    finally:
        sys.modules["__main__"] = main
        linecache = sys.modules.get("linecache")
        if linecache is not None:
            for k in [k for k in linecache.cache if k.startswith("<cell-")]:
                linecache.cache.pop(k, None)


def main(argv):
    args = _parse_args(argv)
    in_fd, out_fd = _move_mux_fds()
    sys.path.insert(0, args.runtime)
    import prctl   # host/runtime
    agent = Agent(in_fd, out_fd, args, prctl)
    if args.child_uid is not None and (os.geteuid() != 0 or args.child_uid == 0):
        agent.fatal("--child-uid: the agent must run as root and the children not")
    # Contexts run as our uid: non-dumpable keeps them from ptrace and
    # /proc/1/mem of the agent (forks inherit it).
    prctl.set_dumpable(False)
    if not agent.is_pid1:
        prctl.set_child_subreaper()
    children.ignore_signals()
    try:
        for name in ("context", "notebook", "display", "frames", "reseed",
                     "streams", "mplinline", "jscontext") + _RUNTIME_PRELOAD + tuple(
                         m.strip() for m in args.preload.split(",") if m.strip()):
            importlib.import_module(name)
        sys.modules["jscontext"].load()   # before any context: read once, shared
    except Exception as e:
        agent.fatal("preload: %s: %s" % (type(e).__name__, e))
    _warm()
    gc.collect()
    gc.freeze()
    signal.set_wakeup_fd(agent.wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    try:
        agent.start_default()
    except Refused as e:
        agent.fatal("the default context: %s" % e)
    agent.hold_default()
    agent.send_control({"op": "ready"})
    agent.reap()
    agent.run()


if __name__ == "__main__":
    main(sys.argv[1:])
