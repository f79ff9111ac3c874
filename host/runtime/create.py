"""create.py — turning a fork of the zygote into a sandbox.

Owns: PROTOCOL.md section 2 in the child: the rest of the namespaces and
the cgroups (sgc_unshare_pid1), contain's enter half, the sandbox's
environment and workdir, forking the default context (and, for a pool
sandbox, its W and POOLED), up to exec'ing sandgate-init (pid1.py), which
is pid 1 from then on. The zygote only forks (zygote.py); everything
per-sandbox costs the child.
"""

import json
import os
import signal
import socket

import context
import frames
import prctl
from contain import ContainError

# Where sandbox_sock lives inside the sandbox: the slot the zygote's control
# socket held, which the child closes first. contain's "close stray fds" step must
# keep it, so B adds fd_keep for it to the spec.
SANDBOX_FD = 3


def child(control_fd, sock, gate_r, payload, contain, init):
    """Run in the zygote's fork (pid 1 of a new pid namespace); never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Sandboxes must never hold the zygote's channel to the host.
        os.close(control_fd)
        fd = sock.detach()
        if fd != SANDBOX_FD:
            os.dup2(fd, SANDBOX_FD, inheritable=False)
            os.close(fd)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET,
                             fileno=SANDBOX_FD)
    except BaseException:
        os._exit(1)
    try:
        # The zygote's PID message must reach the host before ours.
        while os.read(gate_r, 1):
            pass
        os.close(gate_r)
        req = _parse(payload)
        contain.unshare_pid1(req["spec"])
    except BaseException as e:
        _fail(sock, e)
    _child_b(sock, req, contain, init)


def _parse(payload):
    req = json.loads(payload.decode("utf-8"))
    if not isinstance(req, dict):
        raise ValueError("CREATE: JSON object expected")
    env = req.get("env", {})
    if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and "=" not in k
            and "\0" not in k + v for k, v in env.items()):
        raise ValueError("CREATE: env must map names to strings")
    spec = req.get("spec", "")
    workdir = req.get("workdir", "/workspace")
    if not isinstance(spec, str) or not isinstance(workdir, str):
        raise ValueError("CREATE: spec and workdir must be strings")
    return {"id": str(req.get("id", "")), "spec": spec, "env": env,
            "workdir": workdir, "pool": req.get("pool") is True,
            "egress": req.get("egress") is True}


def _fail(sock, e):
    msg = str(e) if isinstance(e, (ContainError, OSError)) else \
        "%s: %s" % (type(e).__name__, e)
    try:
        frames.send_message(sock, "ERR %s" % msg.replace("\n", " "))
    except frames.PeerGone:
        pass
    os._exit(1)


def _child_b(sock, req, contain, init):
    try:
        spec = req["spec"]
        if contain.enabled:
            if spec and not spec.endswith("\n"):
                spec += "\n"
            spec += "fd_keep=%d\nfd_keep=%d\n" % (SANDBOX_FD, init.fd)
        contain.enter(spec)
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["workdir"])
        prctl.set_dumpable(False)
        held = _fork_context(sock, init)
        if req["pool"]:
            # Let the context warm itself up while it waits (context.py).
            _send_frame_dup(held[1][0], "W")
            frames.send_message(sock, "POOLED")
    except BaseException as e:
        _fail(sock, e)
    init.execute(contain, held, pool=req["pool"], egress=req["egress"],
                 env=req["env"], fail=lambda e: _fail(sock, e))


def _fork_context(sock, init):
    """Fork the default context (context.start). Returns (pid, [host_end,
    out_r, err_r]): sandgate-init gets them and hands them to the host."""
    host_end, ctx_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            for fd in (sock.fileno(), host_end.fileno(), out_r, err_r, init.fd):
                os.close(fd)
        except BaseException:
            os._exit(127)
        context.start(ctx_end, out_w, err_w)  # never returns
    # Also from the parent: the group exists before anyone can KILLCTX.
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    fds = [host_end.detach(), out_r, err_r]
    ctx_end.close()
    os.close(out_w)
    os.close(err_w)
    return pid, fds


def _send_frame_dup(fd, ftype):
    s = socket.socket(fileno=os.dup(fd))
    try:
        frames.send_frame(s, ftype)
    except frames.PeerGone:
        pass  # it died: sandgate-init starts a new one at READY
    finally:
        s.close()
