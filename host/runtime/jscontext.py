"""jscontext.py — turn a forked child into a `javascript` context (Node).

Owns: the exec of /usr/bin/node on js/context.js with the context's fds
(0 /dev/null, 1 out_w, 2 err_w, 3 the context socket) and its flags. What
the context does once Node runs (frames, cells, results) is js/context.js's;
forking the child into the sandbox is join.py's (process driver) and the
gVisor agent's (children.py).

A contained sandbox sees none of the host's files but its ro_binds, so the
source of context.js is read once by the zygote (or the agent) before any
sandbox exists (`load()`), and handed to Node on a pipe (fd 4) that a
two-line bootstrap (`-e`) reads and closes: nothing of host/runtime has to
be bound into the sandbox. Node is the Debian one under /usr, which every
template binds.
"""

import os
import resource
import signal

NODE = "/usr/bin/node"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js", "context.js")
PIPE_MAX = 60 * 1024   # the source must fit a pipe's buffer: it is written before the exec

# The source as a function of `require`, so it has Node's module loader
# though it is not a file Node loaded.
# No top-level declaration: it would be a global binding, and a cell could
# not declare the same name.
BOOT = ("(function(){var f=require('fs'),s=f.readFileSync(4,'utf8');f.closeSync(4);"
        "require('vm').runInThisContext('(function(require){'+s+'\\n})',"
        "{filename:'context.js'})(require)})()")

# V8 reserves ~700 MiB of address space with its JIT (code range, thread
# stacks); under an RLIMIT_AS below this (the gVisor driver sets it to the
# sandbox's memory limit) it cannot start, and runs --jitless instead.
JIT_AS_MIN = 1 << 30

_source = None


def load():
    """Read context.js now (before any sandbox exists). Idempotent."""
    global _source
    if _source is None:
        with open(SOURCE, "rb") as f:
            data = f.read()
        if len(data) > PIPE_MAX:
            raise ValueError("%s: %d bytes, more than a pipe holds" % (SOURCE, len(data)))
        _source = data
    return _source


def node_flags():
    flags = ["--disable-proto=delete", "--stack-trace-limit=50"]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft < JIT_AS_MIN:
        flags.append("--jitless")
    return flags


def exec_node(ctx_fd, out_w, err_w, env):
    """In the child: exec Node as the context. Never returns (exits 127 if
    the exec fails: the host sees the context end and says so)."""
    try:
        src = load()
        r, w = os.pipe()
        os.write(w, src)
        os.close(w)
        devnull = os.open("/dev/null", os.O_RDONLY)
        # Out of 0..4 first, so no dup2 below overwrites a source.
        high = [os.dup2(fd, 100 + i, inheritable=False)
                for i, fd in enumerate((devnull, out_w, err_w, ctx_fd, r))]
        for fd in {devnull, out_w, err_w, ctx_fd, r}:
            if fd not in high:
                os.close(fd)
        for target, fd in enumerate(high):
            os.dup2(fd, target)
            os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE,
                    signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        # Ignored through the exec: a timeout's SIGINT that comes while Node
        # still starts must not kill it (context.js installs its handler;
        # libuv gives Node's own children the defaults back).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.execve(NODE, [NODE] + node_flags() + ["-e", BOOT], env)
    except BaseException:
        pass
    os._exit(127)
