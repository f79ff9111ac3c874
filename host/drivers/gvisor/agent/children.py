"""children.py — the processes the agent starts, signals and reaps.

Owns: forking a context (a fork of the preloaded agent that becomes
host/runtime/context.py on a SOCK_SEQPACKET socketpair and two pipes, in
its own process group, with the sandbox's environment), spawning an exec
child (/bin/sh -c in its own group, stdin /dev/null, the workdir, the
sandbox's environment), starting a background process (PROC: stdin a
pipe, or a PTY that is the process's controlling terminal), the id tables, INT / KILL by id, and reaping every
process that ends (the agent is pid 1: orphans come to it). What goes over
the mux is agent.py's; the fds handed back here become channels there.
"""

import fcntl
import os
import signal
import socket
import struct
import termios

ID_MAX = 128        # as host/init (INIT_ID_MAX)
SETPRIV = "/usr/bin/setpriv"
CTX_MAX = 64        # = HOST_MAX_CONTEXTS
EXEC_MAX = 256      # execs and background processes together (one id space)
PTY_DIM_MAX = 1000  # rows, cols: 1..1000 (PROCS_SPEC.md)
TERM_DEFAULT = "xterm-256color"

# Faults stay fatal for the agent; SIGKILL and SIGSTOP cannot be changed.
_KEEP_DEFAULT = frozenset((signal.SIGKILL, signal.SIGSTOP, signal.SIGSEGV,
                           signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
                           signal.SIGABRT, signal.SIGTRAP, signal.SIGSYS))
# Every other signal the agent ignores (or, SIGCHLD, handles): gVisor (this
# runsc) does not shield pid 1 from signals its own sandbox sends it, as
# Linux does, and a context runs as the agent's uid. Children get them all
# back at their defaults.
_PY_IGNORED = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFZ", "SIGXFSZ")
                    if hasattr(signal, n))
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
    def __init__(self, kind, id_, pid, master=None):
        self.kind = kind   # "ctx" or "exec" (a background process is one too)
        self.id = id_
        self.pid = pid     # also its process group
        self.master = master   # owned: a PTY's master (for RESIZE); None for pipes


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
    def start_context(self, id_, env, language="python"):
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
            _become_context(ctx_end, out_w, err_w, env, self.drop, language)   # never returns
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
        devnull = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        try:
            pid, out_r, err_r = self._spawn(command, env, devnull)
        finally:
            os.close(devnull)
        self._add(Child("exec", id_, pid), self.exec)
        return pid, out_r, err_r

    # -- background processes --
    def start_proc(self, id_, mode, rows, cols, command, env):
        """A background process: /bin/sh -c command in its own group, the
        workdir, the sandbox's env. mode "p": stdin, stdout, stderr pipes;
        returns (pid, [in_w, out_r, err_r]). mode "t": a rows x cols PTY as
        its controlling terminal (own session), TERM defaulted; returns
        (pid, [in_w, out_r]), both on the master (in_w a dup). The caller
        owns the fds it gets."""
        self.claim(self.exec, EXEC_MAX, "process", id_)
        if mode == "p":
            in_r, in_w = os.pipe()
            try:
                pid, out_r, err_r = self._spawn(command, env, in_r, session=True)
            except BaseException:
                os.close(in_w)
                raise
            finally:
                os.close(in_r)
            self._add(Child("exec", id_, pid), self.exec)
            return pid, [in_w, out_r, err_r]
        env = dict(env)
        env.setdefault("TERM", TERM_DEFAULT)
        master, slave = os.openpty()
        fds = [master]
        try:
            os.set_inheritable(master, False)
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            fds += [os.dup(master), os.dup(master)]   # in_w; the one kept for RESIZE
            pid = self._fork_on_tty(slave, command, env)
        except OSError as e:
            for fd in fds:
                os.close(fd)
            raise Refused("pty: %s" % os.strerror(e.errno or 5)) from None
        finally:
            os.close(slave)
        self._add(Child("exec", id_, pid, master=fds[2]), self.exec)
        return pid, [fds[1], fds[0]]

    def _spawn(self, command, env, stdin_fd, session=False):
        """posix_spawn /bin/sh -c command (as the child uid) with stdin_fd,
        new stdout/stderr pipes, in its own process group (session: its own
        session, whose group it leads). Returns (pid, out_r, err_r)."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
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
                file_actions=[(os.POSIX_SPAWN_DUP2, stdin_fd, 0),
                              (os.POSIX_SPAWN_DUP2, out_w, 1),
                              (os.POSIX_SPAWN_DUP2, err_w, 2)],
                setsigmask=(), setsigdef=AGENT_SIGNALS,
                **({"setsid": True} if session else {"setpgroup": 0}))
        except OSError as e:
            os.close(out_r)
            os.close(err_r)
            raise Refused("spawn /bin/sh: %s" % os.strerror(e.errno)) from None
        finally:
            os.close(out_w)
            os.close(err_w)
        return pid, out_r, err_r

    def _fork_on_tty(self, slave, command, env):
        """fork (posix_spawn cannot make a controlling terminal): the child
        becomes a session leader, takes the slave as its terminal and
        stdio, drops to the child uid and execs /bin/sh -c command. Only
        async-signal-safe-ish calls between fork and exec; any failure is
        exit 127, which the host sees as the process's exit."""
        pid = os.fork()
        if pid != 0:
            return pid
        try:
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            for fd in (0, 1, 2):
                os.dup2(slave, fd)
            if self.drop:
                os.setgroups([])
                os.setresgid(self.drop[1], self.drop[1], self.drop[1])
                os.setresuid(self.drop[0], self.drop[0], self.drop[0])
            signal.set_wakeup_fd(-1)
            for s in AGENT_SIGNALS:
                try:
                    signal.signal(s, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
            signal.pthread_sigmask(signal.SIG_SETMASK, ())
            _close_all_but(set())
            os.execve("/bin/sh", ["/bin/sh", "-c", command], env)
        except BaseException:
            pass
        os._exit(127)

    def resize(self, id_, rows, cols):
        c = self.exec.get(id_)
        if c is None or c.master is None:
            return   # unknown, ended, or pipes: nothing to resize
        try:
            # The kernel (gVisor's) sends the foreground group SIGWINCH.
            fcntl.ioctl(c.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        except OSError:
            pass

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
            if c.master is not None:
                os.close(c.master)
                c.master = None
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


def _become_context(ctx_end, out_w, err_w, env, drop, language="python"):
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
        # ... but as a fresh CPython has them (a context is a Python, as the
        # process driver's are): SIGPIPE and SIGXFSZ ignored, so a write
        # past RLIMIT_FSIZE (the disk limit) is an OSError (EFBIG), not a
        # SIGXFSZ that kills the interpreter and loses its state.
        for s in _PY_IGNORED:
            signal.signal(s, signal.SIG_IGN)
        keep = {ctx_end.fileno(), out_w, err_w}
        _close_all_but(keep)
        os.environ.clear()
        os.environ.update(env)
        import context   # host/runtime; preloaded, so no import work here
        if language == "javascript":
            import jscontext   # host/runtime: execs Node (js/context.js)
            jscontext.exec_node(ctx_end.fileno(), out_w, err_w, env)   # never returns
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
