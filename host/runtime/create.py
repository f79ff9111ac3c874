"""create.py — turning a fork of the zygote into a sandbox (children A and B).

Owns: PROTOCOL.md section 2: A (contain's unshare half, fork B, PID, exit)
and B (contain's enter half, fresh random state, the sandbox's environment
and workdir, signals, READY, the default context) up to handing B to the
supervisor loop. The zygote only forks A; everything per-sandbox costs the
child, never the zygote.
"""

import json
import os
import signal
import socket

import frames
import prctl
import reseed
from contain import ContainError
from supervisor import Supervisor

# Where sandbox_sock lives inside the sandbox: the slot the zygote's control
# socket held, which A closes first. contain's "close stray fds" step must
# keep it, so B adds fd_keep for it to the spec.
SANDBOX_FD = 3


def spare_a(control_fd, sock, contain):
    """A forked ahead of its CREATE: wait for it, then be child A."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(control_fd)
        # recv_message raises PeerGone when the zygote goes away.
        payload, fds = frames.recv_message(sock)
        sock.close()
        if len(fds) != 1:
            raise ValueError("spare: one fd expected")
    except BaseException:
        os._exit(1)
    child_a(None, fds[0], payload, contain)


def child_a(control_fd, sock_fd, payload, contain):
    """Run in the fork of the zygote; never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Sandboxes must never hold the zygote's channel to the host.
        if control_fd is not None:
            os.close(control_fd)
        if sock_fd != SANDBOX_FD:
            os.dup2(sock_fd, SANDBOX_FD, inheritable=False)
            os.close(sock_fd)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET,
                             fileno=SANDBOX_FD)
    except BaseException:
        os._exit(1)
    try:
        req = _parse(payload)
        contain.unshare(req["spec"])
        # B waits for A's PID message: it must reach the host before READY.
        gate_r, gate_w = os.pipe()
        pid = os.fork()
    except BaseException as e:
        _fail(sock, e)
    if pid == 0:
        os.close(gate_w)
        _child_b(sock, gate_r, req, contain)
    os.close(gate_r)
    try:
        frames.send_message(sock, "PID %d" % pid)
    except frames.PeerGone:
        pass
    # Release B now rather than through _exit: the kernel tears down A's
    # copy of the big address space before it closes A's files, which
    # would hold B back for as long as the fork took.
    os.close(gate_w)
    os._exit(0)


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
            "workdir": workdir}


def _fail(sock, e):
    msg = str(e) if isinstance(e, (ContainError, OSError)) else \
        "%s: %s" % (type(e).__name__, e)
    try:
        frames.send_message(sock, "ERR %s" % msg.replace("\n", " "))
    except frames.PeerGone:
        pass
    os._exit(1)


def _child_b(sock, gate_r, req, contain):
    try:
        while os.read(gate_r, 1):
            pass
        os.close(gate_r)
        spec = req["spec"]
        if contain.enabled:
            if spec and not spec.endswith("\n"):
                spec += "\n"
            spec += "fd_keep=%d\n" % SANDBOX_FD
        contain.enter(spec)
        if not contain.enabled:
            # Not pid 1 here: become the reaper of the sandbox's orphans
            # ourselves, as pid 1 would be.
            prctl.set_child_subreaper()
        reseed.reseed()
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["workdir"])
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                    signal.SIGPIPE):
            signal.signal(sig, signal.SIG_IGN)
        prctl.set_dumpable(False)
        sup = Supervisor(sock, contained=contain.enabled)
    except BaseException as e:
        _fail(sock, e)
    try:
        frames.send_message(sock, "READY")
        sup.create_context("default")
        sup.run()
    finally:
        os._exit(1)
