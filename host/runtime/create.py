"""create.py — turning a fork of the zygote into a sandbox.

Owns: PROTOCOL.md section 2 in the child: the rest of the namespaces and
the cgroups (sgc_unshare_pid1), contain's enter half, fresh random state,
the sandbox's environment and workdir, signals, READY and the default
context — or, for a pool sandbox, POOLED, the wait for ACTIVATE and then
the same — up to handing the process to the supervisor loop. The zygote
only forks (zygote.py); everything per-sandbox costs the child.
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
# socket held, which the child closes first. contain's "close stray fds" step must
# keep it, so B adds fd_keep for it to the spec.
SANDBOX_FD = 3


def child(control_fd, sock, gate_r, payload, contain):
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
    _child_b(sock, req, contain)


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


def parse_activate(payload):
    """ACTIVATE's JSON: the per-sandbox parts a pooled sandbox gets last."""
    req = _parse(payload)
    return req["env"], req["workdir"], req["egress"]


def _fail(sock, e):
    msg = str(e) if isinstance(e, (ContainError, OSError)) else \
        "%s: %s" % (type(e).__name__, e)
    try:
        frames.send_message(sock, "ERR %s" % msg.replace("\n", " "))
    except frames.PeerGone:
        pass
    os._exit(1)


def _child_b(sock, req, contain):
    try:
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
        if req["pool"]:
            _pooled(sock, sup)
        else:
            if req["egress"]:
                sup.start_egress()
            frames.send_message(sock, "READY")
            sup.create_context("default")
        sup.run()
    finally:
        os._exit(1)


def _pooled(sock, sup):
    """A pool sandbox: fully contained, its default context forked and held,
    but nothing of its owner yet (the CREATE env was empty). Say POOLED, wait
    for ACTIVATE, then take on the owner's env and workdir and fresh random
    state, in the supervisor and in the held context, and go on as a fresh
    sandbox would: READY, CTX default."""
    sup.create_context("default", hold=True)
    # Walk the activation path once with nothing in it, so its page faults
    # are paid here (see context._warm_up).
    try:
        parse_activate(b'{"env": {"K": "v"}, "workdir": "/"}')
        reseed.reseed()
    except BaseException:
        pass
    frames.send_message(sock, "POOLED")
    payload = sup.wait_activate()
    try:
        env, workdir, egress = parse_activate(payload)
    except BaseException as e:
        _fail(sock, e)
    # The held context first: it applies the same JSON on the other CPU
    # while we apply it here.
    sup.activate_held(payload)
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(workdir)
        reseed.reseed()
        if egress:
            sup.start_egress()
    except BaseException as e:
        _fail(sock, e)
    frames.send_message(sock, "READY")
    sup.release_held()
