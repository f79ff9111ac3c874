"""children.py — the processes the agent starts, signals and reaps.

Owns: forking a context (a fork of the preloaded agent that becomes
host/runtime/context.py on a SOCK_SEQPACKET socketpair and two pipes, in
its own process group, with the sandbox's environment), spawning an exec
child (/bin/sh -c in its own group, stdin /dev/null, the workdir, the
sandbox's environment), the id tables, INT / KILL by id, and reaping every
process that ends (the agent is pid 1: orphans come to it). What goes over
the mux is agent.py's; the fds handed back here become channels there.
"""

import os
import signal
import socket

ID_MAX = 128        # as host/init (INIT_ID_MAX)
SETPRIV = "/usr/bin/setpriv"
CTX_MAX = 64        # = HOST_MAX_CONTEXTS
EXEC_MAX = 256

# Faults stay fatal for the agent; SIGKILL and SIGSTOP cannot be changed.
_KEEP_DEFAULT = frozenset((signal.SIGKILL, signal.SIGSTOP, signal.SIGSEGV,
                           signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
                           signal.SIGABRT, signal.SIGTRAP, signal.SIGSYS))
# Every other signal the agent ignores (or, SIGCHLD, handles): gVisor (this
# runsc) does not shield pid 1 from signals its own sandbox sends it, as
# Linux does, and a context runs as the agent's uid. Children get them all
# back at their defaults.
AGENT_SIGNALS = tuple(s for s in sorted(signal.valid_signals())
                      if 0 < s < signal.NSIG and s not in _KEEP_DEFAULT)


def ignore_signals():
    for s in AGENT_SIGNALS:
        if s != signal.SIGCHLD:
            try:
                signal.signal(s, signal.SIG_IGN)
            except (OSError, ValueError):
                pass


class Refused(Exception):
    """A request that cannot be done; the message goes back to the shim."""


def check_id(v):
    if not isinstance(v, str) or not v or len(v.encode("utf-8", "replace")) > ID_MAX \
            or any(c.isspace() or ord(c) < 32 for c in v):
        return False
    return True


class Child:
    def __init__(self, kind, id_, pid):
        self.kind = kind   # "ctx" or "exec"
        self.id = id_
        self.pid = pid     # also its process group


class Children:
    def __init__(self, drop=None):
        # (uid, gid) children run as, when the agent runs as root inside
        # gVisor (--child-uid): then no child can signal or trace pid 1.
        self.drop = drop
        self.ctx = {}      # id -> Child
        self.exec = {}
        self._by_pid = {}  # pid -> Child

    def claim(self, table, limit, noun, id_):
        if id_ in table:
            raise Refused("%s still running" % noun)
        if len(table) >= limit:
            raise Refused("too many of them running (%d)" % limit)

    # -- contexts --
    def start_context(self, id_, env):
        """Fork a context. Returns (pid, host_sock, out_r, err_r); the
        caller owns the three fds. The child keeps no other fd of ours."""
        self.claim(self.ctx, CTX_MAX, "context", id_)
        host_end, ctx_end = socket.socketpair(socket.AF_UNIX,
                                              socket.SOCK_SEQPACKET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as e:
            for s in (host_end, ctx_end):
                s.close()
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise Refused("fork: %s" % os.strerror(e.errno)) from None
        if pid == 0:
            _become_context(ctx_end, out_w, err_w, env, self.drop)   # never returns
        # Also from here: the group exists before any KILLCTX can come.
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        ctx_end.close()
        os.close(out_w)
        os.close(err_w)
        self._add(Child("ctx", id_, pid), self.ctx)
        return pid, host_end, out_r, err_r

    # -- exec --
    def start_exec(self, id_, command, env):
        self.claim(self.exec, EXEC_MAX, "exec", id_)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        devnull = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        try:
            # posix_spawn (vfork-like): no copy of the agent's big heap.
            # Its cwd is the agent's, which is the workdir after activate.
            argv = ["/bin/sh", "-c", command]
            if self.drop:
                # posix_spawn cannot change uid; setpriv does, then execs.
                argv = [SETPRIV, "--reuid=%d" % self.drop[0],
                        "--regid=%d" % self.drop[1], "--clear-groups",
                        "--"] + argv
            pid = os.posix_spawn(
                argv[0], argv, env,
                file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                              (os.POSIX_SPAWN_DUP2, out_w, 1),
                              (os.POSIX_SPAWN_DUP2, err_w, 2)],
                setpgroup=0, setsigmask=(), setsigdef=AGENT_SIGNALS)
        except OSError as e:
            os.close(out_r)
            os.close(err_r)
            raise Refused("spawn /bin/sh: %s" % os.strerror(e.errno)) from None
        finally:
            os.close(out_w)
            os.close(err_w)
            os.close(devnull)
        self._add(Child("exec", id_, pid), self.exec)
        return pid, out_r, err_r

    # -- signals --
    def signal(self, table, id_, sig, group):
        c = table.get(id_)
        if c is None:
            return   # unknown or already reaped: nothing to do
        # The group catches what it forked; the pid itself in case the code
        # left the group (setsid). The id stays in the table until reaped,
        # so its pid cannot have been reused.
        if group:
            try:
                os.killpg(c.pid, sig)
            except OSError:
                pass
        try:
            os.kill(c.pid, sig)
        except OSError:
            pass

    # -- reaping --
    def reap(self):
        """Reap every child that ended. Returns [(Child, code, signal)] for
        ours (code -1 when signalled); orphans are reaped silently."""
        ended = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid == 0:
                break
            c = self._by_pid.pop(pid, None)
            if c is None:
                continue
            (self.ctx if c.kind == "ctx" else self.exec).pop(c.id, None)
            if os.WIFSIGNALED(status):
                ended.append((c, -1, os.WTERMSIG(status)))
            else:
                ended.append((c, os.waitstatus_to_exitcode(status), 0))
        return ended

    def all_pids(self):
        return list(self._by_pid)

    def _add(self, c, table):
        table[c.id] = c
        self._by_pid[c.pid] = c


def _become_context(ctx_end, out_w, err_w, env, drop):
    """In the forked child: keep only the context's own fds, take the
    sandbox's environment (and its uid), run the runtime's context. Never
    returns."""
    try:
        os.setpgid(0, 0)
        if drop:
            os.setgroups([])
            os.setresgid(drop[1], drop[1], drop[1])
            os.setresuid(drop[0], drop[0], drop[0])   # clears every capability
            import prctl
            prctl.set_dumpable(False)   # a uid change resets it
        signal.set_wakeup_fd(-1)
        for s in AGENT_SIGNALS:
            try:
                signal.signal(s, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        keep = {ctx_end.fileno(), out_w, err_w}
        _close_all_but(keep)
        os.environ.clear()
        os.environ.update(env)
        import context   # host/runtime; preloaded, so no import work here
    except BaseException:
        os._exit(127)
    context.start(ctx_end, out_w, err_w)   # never returns
    os._exit(1)


def _close_all_but(keep):
    """Close every fd above 2 not in keep (the agent's mux, other contexts'
    ends, the egress listener): a context must hold only its own."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
