"""pid1.py — handing a made sandbox's pid 1 over to sandgate-init.

Owns: the fd of the sandgate-init binary (opened once, in the zygote,
before any sandbox exists, so a sandbox can exec it without a view of the
host's files) and the exec itself: which fds survive it, and the argv
(host/init/init.h). What pid 1 does from then on is host/init's.
"""

import fcntl
import os
import sys

class Init:
    def __init__(self, path):
        # Owned by the zygote; every sandbox's pid 1 inherits it until exec.
        # Kept above the low fds a sandbox moves its own sockets to.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            self.fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        finally:
            os.close(fd)
        self._runtime = os.path.dirname(os.path.abspath(__file__))

    def execute(self, contain, held, pool, egress, env, fail):
        """Exec sandgate-init with sandbox_sock (fd 3) and the held default
        context (pid, [host_end, out_r, err_r]); never returns."""
        pid, fds = held
        # CTX (a fresh interpreter) serves --no-contain only; a contained
        # sandbox's later contexts are zygote forks (join.py).
        argv = ["sandgate-init", "--sock", "3",
                "--held", "default:%d:%d:%d:%d" % (pid, fds[0], fds[1], fds[2]),
                "--python", sys.executable,
                "--context-main", os.path.join(self._runtime, "context_main.py")]
        if pool:
            argv.append("--pooled")
        if egress:
            argv.append("--egress")
        if not contain.enabled:
            argv.append("--no-contain")
        try:
            for fd in [3] + fds:
                os.set_inheritable(fd, True)
            os.execve(self.fd, argv, env)
        except BaseException as e:
            fail(e)
        os._exit(1)
