"""agentmux.py — the shim's side of the gvisor mux, in Python, for tests.

Owns: starting the in-sandbox agent (host/drivers/gvisor/agent) either as a
plain process (no isolation: only the protocol) or as pid 1 of a real runsc
container (a minimal OCI bundle written here), speaking the mux of
host/drivers/gvisor/PROTOCOL.md to it, checking every frame the agent sends
against the protocol's limits and windows, and cleaning up every process,
state dir and bundle it made. Used by test_agent.py and bench/gvisor_agent.py.
It is a test driver, not the shim (host/drivers/gvisor/shim is).
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
AGENT_DIR = os.path.join(REPO, "host", "drivers", "gvisor", "agent")
RUNTIME_DIR = os.path.join(REPO, "host", "runtime")
PYTHON = "/usr/bin/python3"
RUNSC = os.environ.get("SANDGATE_RUNSC", "/usr/bin/runsc")

HEADER = struct.Struct(">IBI")
AFTER_LEN_MAX = 65536 + 5
WINDOW = 256 * 1024
EGRESS_FIRST = (1 << 31) + 1


class ProtocolViolation(AssertionError):
    pass


def frame(ftype, chan, payload=b""):
    if isinstance(ftype, str):
        ftype = ord(ftype)
    return HEADER.pack(5 + len(payload), ftype, chan) + payload


class Chan:
    """What the shim knows of one channel."""

    def __init__(self, num):
        self.num = num
        self.msgs = []          # M payloads received, in order
        self.closed = False     # the agent sent C
        self.unacked = 0        # received, not yet acknowledged by us
        self.max_unacked = 0
        self.hold = False       # don't acknowledge (a host not reading)
        self.inflight = 0       # we sent, the agent has not acknowledged

    def data(self):
        return b"".join(self.msgs)


class Shim:
    """One agent and the mux to it. start_* make one; close() ends it."""

    def __init__(self, proc, cleanup=None):
        self.proc = proc
        self._cleanup = cleanup
        self._lock = threading.Condition()
        self._wlock = threading.Lock()
        self.chans = {}
        self.control = []       # control messages received, in order
        self.violations = []    # protocol breaks seen in the agent's frames
        self.eof = False
        self.next_chan = 4
        self.t_ready = None     # monotonic time `ready` arrived
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- starting --
    @classmethod
    def start_direct(cls, preload="", egress_port=None, stderr=None):
        """The agent as a plain child process: no gVisor, no isolation."""
        argv = [PYTHON, "-I", os.path.join(AGENT_DIR, "agent.py"),
                "--runtime", RUNTIME_DIR, "--preload", preload]
        if egress_port is not None:
            argv += ["--egress-port", str(egress_port)]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr,
                                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                                start_new_session=True)
        return cls(proc)

    @classmethod
    def start_runsc(cls, preload="", stderr=None, platform="ptrace",
                    split_uid=False):
        """The agent as pid 1 of a runsc container: read-only binds of the
        system, tmpfs /tmp and /workspace, uid 65534, no capabilities,
        no_new_privs, --network=none; a state dir of its own. split_uid:
        the agent as root inside with CAP_SETUID/SETGID/KILL only, its
        children as 65534 (--child-uid)."""
        work = tempfile.mkdtemp(prefix="sg-gva-")
        # Fixed length: runsc matches container ids by prefix.
        cid = "sggva" + os.urandom(8).hex()
        state = os.path.join(work, "state")
        bundle = os.path.join(work, "bundle")
        os.makedirs(state)
        write_bundle(bundle, ["/usr/bin/python3", "-I",
                              "/sandgate/agent/agent.py",
                              "--runtime", "/sandgate/runtime",
                              "--preload", preload] +
                     (["--child-uid", "65534"] if split_uid else []),
                     uid=0 if split_uid else 65534,
                     caps=SPLIT_CAPS if split_uid else [])
        argv = [RUNSC, "--root", state, "--network=none",
                "--platform=%s" % platform, "--ignore-cgroups",
                "run", "--bundle", bundle, cid]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr,
                                start_new_session=True)

        def cleanup():
            try:
                subprocess.run([RUNSC, "--root", state, "delete", "--force", cid],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=20)
            except subprocess.TimeoutExpired:
                pass
            shutil.rmtree(work, ignore_errors=True)

        shim = cls(proc, cleanup)
        shim.container_id = cid
        shim.state_dir = state
        return shim

    def close(self, timeout=10.0):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # Ours, by pid (and its session, which start_* made for it).
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait(10)
        if self._cleanup:
            self._cleanup()
        self._reader.join(5)

    # -- reading the agent --
    def _read(self):
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while True:
            try:
                data = os.read(fd, 1 << 18)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            off = 0
            while len(buf) - off >= 9:
                n, ftype, chan = HEADER.unpack_from(buf, off)
                if n < 5 or n > AFTER_LEN_MAX:
                    self._violate("frame length %d" % n)
                    buf.clear()
                    off = 0
                    break
                if len(buf) - off < 4 + n:
                    break
                payload = bytes(buf[off + 9:off + 4 + n])
                off += 4 + n
                self._on_frame(chr(ftype), chan, payload)
            del buf[:off]
        with self._lock:
            self.eof = True
            self._lock.notify_all()

    def _violate(self, what):
        self.violations.append(what)

    def _chan(self, num):
        ch = self.chans.get(num)
        if ch is None:
            ch = self.chans[num] = Chan(num)
        return ch

    def _on_frame(self, ftype, chan, payload):
        ack = None
        with self._lock:
            if ftype == "J":
                if chan != 0:
                    self._violate("J on channel %d" % chan)
                try:
                    msg = json.loads(payload)
                except ValueError:
                    self._violate("bad JSON %r" % payload[:80])
                    return
                if msg.get("op") == "ready" and self.t_ready is None:
                    self.t_ready = time.monotonic()
                self.control.append(msg)
            elif chan == 0:
                self._violate("%s on channel 0" % ftype)
            elif ftype == "M":
                ch = self._chan(chan)
                if ch.closed:
                    self._violate("M on %d after C" % chan)
                if not payload:
                    self._violate("empty M on %d" % chan)
                ch.msgs.append(payload)
                ch.unacked += len(payload)
                ch.max_unacked = max(ch.max_unacked, ch.unacked)
                if ch.unacked > WINDOW:
                    self._violate("channel %d: %d bytes past the window"
                                  % (chan, ch.unacked))
                if not ch.hold:
                    ack = (chan, ch.unacked)
                    ch.unacked = 0
            elif ftype == "C":
                ch = self._chan(chan)
                if ch.closed:
                    self._violate("second C on %d" % chan)
                ch.closed = True
            elif ftype == "W":
                ch = self._chan(chan)
                (n,) = struct.unpack(">I", payload)
                if n > ch.inflight:
                    self._violate("W of %d on %d with %d in flight"
                                  % (n, chan, ch.inflight))
                ch.inflight -= n
            else:
                self._violate("frame type %r" % ftype)
            self._lock.notify_all()
        if ack:
            self.send_raw(frame("W", ack[0], struct.pack(">I", ack[1])))

    # -- writing to the agent --
    def send_raw(self, data):
        with self._wlock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def send_control(self, obj):
        self.send_raw(frame("J", 0, json.dumps(obj).encode()))

    def send_data(self, chan, data, timeout=30.0, stop_on_close=False):
        """M frames, within the channel's window (waits for W). With
        stop_on_close, the agent's C ends the wait (EOFError): a context
        that died acknowledges nothing more."""
        ch = None
        with self._lock:
            ch = self._chan(chan)
        for i in range(0, len(data), 65536):
            piece = data[i:i + 65536]
            with self._lock:
                if not self._lock.wait_for(
                        lambda: ch.inflight + len(piece) <= WINDOW or self.eof
                        or (stop_on_close and ch.closed), timeout):
                    raise TimeoutError("channel %d: no window" % chan)
                if stop_on_close and ch.closed:
                    raise EOFError("channel %d ended" % chan)
                ch.inflight += len(piece)
            self.send_raw(frame("M", chan, piece))

    def close_chan(self, chan):
        self.send_raw(frame("C", chan))

    def hold(self, chan, on=True):
        """Stop (or resume) acknowledging a channel: a host not reading it."""
        ack = None
        with self._lock:
            ch = self._chan(chan)
            ch.hold = on
            if not on and ch.unacked:
                ack = (chan, ch.unacked)
                ch.unacked = 0
        if ack:
            self.send_raw(frame("W", ack[0], struct.pack(">I", ack[1])))

    # -- waiting --
    def wait(self, pred, timeout=30.0, what="condition"):
        hit = []

        def check():
            if pred():
                hit.append(True)
                return True
            return self.eof
        with self._lock:
            if not self._lock.wait_for(check, timeout):
                raise TimeoutError("timed out waiting for %s" % what)
            if not hit:
                raise EOFError("the agent ended while waiting for %s (control: %r)"
                               % (what, self.control[-5:]))

    def wait_op(self, op, timeout=30.0, **fields):
        """The first control message with this op (and fields) not taken
        before; it is taken."""
        found = []

        def pred():
            for i, m in enumerate(self.control):
                if m.get("op") == op and all(m.get(k) == v for k, v in fields.items()):
                    found.append(self.control.pop(i))
                    return True
            return False
        self.wait(pred, timeout, "%s %r" % (op, fields))
        return found[0]

    def wait_eof(self, timeout=30.0):
        with self._lock:
            return self._lock.wait_for(lambda: self.eof, timeout)

    def chan_closed(self, chan, timeout=30.0):
        self.wait(lambda: self._chan(chan).closed, timeout, "C on %d" % chan)

    def new_chans(self, n):
        nums = list(range(self.next_chan, self.next_chan + n))
        self.next_chan += n
        return nums

    # -- the protocol's operations --
    def ready(self, timeout=120.0):
        return self.wait_op("ready", timeout)

    def activate(self, env=None, workdir="/tmp", egress=False, timeout=30.0):
        self.send_control({"op": "activate", "env": env or {},
                           "workdir": workdir, "egress": egress})
        self.wait_op("activated", timeout)
        return Ctx(self, "default", 1, 2, 3)

    def open_ctx(self, id_, timeout=60.0):
        s, o, e = self.new_chans(3)
        self.send_control({"op": "ctx", "id": id_, "sock": s, "out": o, "err": e})
        self.wait(lambda: any(m.get("id") == id_ and m.get("op") in ("ctx", "ctxerr")
                              for m in self.control), timeout, "ctx %s" % id_)
        for i, m in enumerate(self.control):
            if m.get("id") == id_ and m.get("op") in ("ctx", "ctxerr"):
                self.control.pop(i)
                if m["op"] == "ctxerr":
                    raise RuntimeError("ctxerr %s: %s" % (id_, m.get("msg")))
                break
        return Ctx(self, id_, s, o, e)

    def exec(self, id_, command, timeout=30.0):
        o, e = self.new_chans(2)
        self.send_control({"op": "exec", "id": id_, "command": command,
                           "out": o, "err": e})
        self.wait(lambda: any(m.get("id") == id_ and m.get("op") in ("exec", "execerr")
                              for m in self.control), timeout, "exec %s" % id_)
        for i, m in enumerate(self.control):
            if m.get("id") == id_ and m.get("op") in ("exec", "execerr"):
                self.control.pop(i)
                if m["op"] == "execerr":
                    raise RuntimeError("execerr %s: %s" % (id_, m.get("msg")))
                break
        return Exec(self, id_, o, e)


    def start_proc(self, id_, command, mode="p", rows=24, cols=80, timeout=30.0,
             **extra):
        """A background process (PROC): channels in, out[, err]. Returns a
        Proc, or raises RuntimeError with the procerr's msg."""
        nums = self.new_chans(3 if mode == "p" else 2)
        msg = {"op": "proc", "id": id_, "mode": mode, "rows": rows,
               "cols": cols, "command": command, "in": nums[0], "out": nums[1]}
        if mode == "p":
            msg["err"] = nums[2]
        msg.update(extra)
        self.send_control(msg)
        self.wait(lambda: any(m.get("id") == id_ and m.get("op") in ("proc", "procerr")
                              for m in self.control), timeout, "proc %s" % id_)
        for i, m in enumerate(self.control):
            if m.get("id") == id_ and m.get("op") in ("proc", "procerr"):
                self.control.pop(i)
                if m["op"] == "procerr":
                    raise RuntimeError("procerr %s: %s" % (id_, m.get("msg")))
                break
        return Proc(self, id_, nums)


class Proc:
    """A background process: in (shim -> agent), out, err (mode p)."""

    def __init__(self, shim, id_, nums):
        self.shim, self.id = shim, id_
        self.inp, self.out = nums[0], nums[1]
        self.err = nums[2] if len(nums) > 2 else None

    def write(self, data, timeout=30.0):
        self.shim.send_data(self.inp, data, timeout)

    def output(self):
        return self.shim._chan(self.out).data()

    def wait_output(self, needle, timeout=30.0):
        self.shim.wait(lambda: needle in self.output(), timeout,
                       "%r on %s's output" % (needle, self.id))

    def signal(self, signo):
        self.shim.send_control({"op": "sigproc", "id": self.id, "signal": signo})

    def resize(self, rows, cols):
        self.shim.send_control({"op": "resize", "id": self.id, "rows": rows,
                                "cols": cols})

    def wait(self, timeout=30.0):
        """(code, signal) once it exited and its output channels ended."""
        ex = self.shim.wait_op("exit", timeout, id=self.id)
        for c in (self.out, self.err):
            if c is not None:
                self.shim.chan_closed(c, timeout)
        return ex["code"], ex["signal"]


class Exec:
    def __init__(self, shim, id_, out, err):
        self.shim, self.id, self.out, self.err = shim, id_, out, err

    def wait(self, timeout=30.0):
        """(code, signal, stdout, stderr) once it exited and both pipes ended."""
        ex = self.shim.wait_op("exit", timeout, id=self.id)
        self.shim.chan_closed(self.out, timeout)
        self.shim.chan_closed(self.err, timeout)
        return (ex["code"], ex["signal"], self.shim.chans[self.out].data(),
                self.shim.chans[self.err].data())


class Ctx:
    """One context: its socket channel carries runtime PROTOCOL.md §4 frames."""

    def __init__(self, shim, id_, sock, out, err):
        self.shim, self.id = shim, id_
        self.sock, self.out, self.err = sock, out, err
        self._seen = 0   # messages of the socket channel already returned

    def send_code(self, code):
        data = code.encode() if isinstance(code, str) else code
        step = 65535
        chunks = [data[i:i + step] for i in range(0, len(data), step)] or [b""]
        for i, c in enumerate(chunks):
            self.shim.send_data(self.sock, (b"R" if i == len(chunks) - 1 else b"c") + c)

    def collect(self, timeout=30.0):
        """Frames [(type, payload)] up to and including the next 'd'."""
        ch = self.shim._chan(self.sock)
        self.shim.wait(lambda: any(m[:1] == b"d" for m in ch.msgs[self._seen:]),
                       timeout, "'d' from context %s" % self.id)
        out = []
        with self.shim._lock:
            while True:
                m = ch.msgs[self._seen]
                self._seen += 1
                out.append((chr(m[0]), m[1:]))
                if m[:1] == b"d":
                    return out

    def run(self, code, timeout=30.0):
        self.send_code(code)
        return Run(self.collect(timeout))

    def interrupt(self):
        self.shim.send_control({"op": "int", "id": self.id})

    def kill(self):
        self.shim.send_control({"op": "killctx", "id": self.id})


class Run:
    """A run's frames, read as the host would."""

    def __init__(self, frames):
        self.frames = frames

    def stream(self, t):
        return b"".join(p for ft, p in self.frames if ft == t).decode()

    @property
    def stdout(self):
        return self.stream("o")

    @property
    def stderr(self):
        return self.stream("e")

    @property
    def error(self):
        for ft, p in self.frames:
            if ft == "x":
                name, value, tb = p.split(b"\0", 2)
                return name.decode(), value.decode(), tb.decode()
        return None

    def results(self):
        """[{mime: data}] in order."""
        out, cur, chunks = [], None, []
        for ft, p in self.frames:
            if ft == "b":
                cur = {}
            elif ft == "k":
                chunks.append(p)
            elif ft == "r":
                mime, data = (b"".join(chunks) + p).split(b"\0", 1)
                chunks = []
                if cur is None:
                    out.append({mime.decode(): data})
                else:
                    cur[mime.decode()] = data
            elif ft == "f" and cur is not None:
                out.append(cur)
                cur = None
        return out

    @property
    def text(self):
        r = self.results()
        return r[-1]["text/plain"].decode() if r else None


SPLIT_CAPS = ["CAP_SETUID", "CAP_SETGID", "CAP_KILL"]


def write_bundle(bundle, args, uid=65534, caps=()):
    """A minimal OCI bundle for the agent: the system read-only, the
    runtime and agent read-only, tmpfs /tmp and /workspace, no capabilities,
    no_new_privs, nobody."""
    rootfs = os.path.join(bundle, "rootfs")
    dirs = ["usr", "lib", "lib64", "bin", "etc", "tmp", "proc", "dev",
            "workspace", "sandgate/agent", "sandgate/runtime"]
    for d in dirs:
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)

    def bind(src, dst):
        return {"destination": dst, "type": "bind", "source": src,
                "options": ["rbind", "ro", "nosuid", "nodev"]}
    mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "mode=755"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "nodev", "size=64m", "mode=1777"]},
        {"destination": "/workspace", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "nodev", "size=64m", "mode=1777"]},
        bind("/usr", "/usr"), bind("/lib", "/lib"), bind("/lib64", "/lib64"),
        bind("/bin", "/bin"),
        # The interpreter needs ld.so's cache and (numpy's BLAS) alternatives.
        bind("/etc/ld.so.cache", "/etc/ld.so.cache"),
        bind("/etc/alternatives", "/etc/alternatives"),
        bind(AGENT_DIR, "/sandgate/agent"),
        bind(RUNTIME_DIR, "/sandgate/runtime"),
    ]
    for f in ("ld.so.cache",):
        open(os.path.join(rootfs, "etc", f), "a").close()
    os.makedirs(os.path.join(rootfs, "etc", "alternatives"), exist_ok=True)
    none = list(caps)
    spec = {
        "ociVersion": "1.0.0",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": uid},
            "args": args,
            "env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/workspace", "TMPDIR=/tmp", "MPLBACKEND=Agg"],
            "cwd": "/workspace",
            "capabilities": {"bounding": none, "effective": none,
                             "inheritable": [], "permitted": none,
                             "ambient": []},
            "noNewPrivileges": True,
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "sandbox",
        "mounts": mounts,
        "linux": {"namespaces": [{"type": t} for t in
                                 ("pid", "network", "ipc", "uts", "mount")]},
    }
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(spec, f)


def runsc_usable():
    """Why the runsc suite cannot run here, or None."""
    if not os.path.exists(RUNSC):
        return "%s not installed" % RUNSC
    if os.geteuid() != 0:
        return "runsc needs root here"
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
