"""join.py — a context forked from the zygote into a sandbox that already runs.

Owns: JOIN in the zygote (PROTOCOL.md section 1a): one fork into the
sandbox's pid namespace (J: sgc_pidns_join, fork, sgc_pidns_reset), which
joins the sandbox's cgroups and other namespaces (sgc_join), forks the
context (K) and exits, so K is reparented to the sandbox's pid 1
(sandgate-init, which reaps it once the host has told it K's pid with
ADOPT). K drops to the sandbox's uid, capabilities and seccomp filter
(sgc_enter_joined) and becomes a context (context.py; for `"language":
"javascript"` it execs Node instead, jscontext.py), which takes its
environment and workdir from the host's first frame (`A`). So a later
context shares the zygote's preloaded heap exactly as the default one does.
The zygote answers JOINED <job> <K's pid in the sandbox> or
JOINERR <job> <message>. Making a sandbox is create.py's.
"""

import json
import os
import select
import signal
import socket
import sys
import time

import context
import frames
import jscontext
import prctl
from contain import ContainError

# J and K report on a pipe; a join that says nothing in this long failed.
REPORT_TIMEOUT_S = 10.0


def handle(ctl, control_fd, payload, fds, contain):
    """JOIN <json> with fds [pidfd, ctx_sock, out_w, err_w]; answers on ctl.
    The fds are the zygote's to close; J and K have their own copies."""
    job = "-"
    try:
        if len(fds) != 4:
            raise ValueError("JOIN: 4 fds expected, got %d" % len(fds))
        req = json.loads(payload.decode("utf-8"))
        job = "%d" % int(req["job"])
        spec = req["spec"]
        if not isinstance(spec, str):
            raise ValueError("JOIN: spec must be a string")
        language = req.get("language", "python")
        if language not in ("python", "javascript"):
            raise ValueError("JOIN: unknown language")
        reply = "JOINED %s %d" % (job, _fork(control_fd, spec, fds, contain, language))
    except (ValueError, KeyError, TypeError, OSError, ContainError) as e:
        reply = "JOINERR %s %s" % (job, str(e).replace("\n", " "))
    finally:
        for fd in fds:
            os.close(fd)
    try:
        frames.send_message(ctl, reply)
    except frames.PeerGone:
        pass   # the host is gone; the zygote sees EOF next


def _fork(control_fd, spec, fds, contain, language):
    r, w = os.pipe()
    pid = -1
    try:
        contain.pidns_join(fds[0])
        pid = os.fork()
    finally:
        if pid != 0:
            _pidns_reset(contain)
    if pid == 0:
        os.close(r)
        _joiner(control_fd, w, spec, fds, contain, language)   # never returns
    os.close(w)
    try:
        text = _read_report(r)
    finally:
        os.close(r)
    if text.startswith("OK "):
        return int(text[3:])
    if text.startswith("ERR "):
        raise ContainError(text[4:])
    raise ContainError("the joining process ended without a word")


def _pidns_reset(contain):
    try:
        contain.pidns_reset()
    except ContainError as e:
        # Later children would land in the sandbox's pid namespace: never go on.
        print("zygote: %s" % e, file=sys.stderr, flush=True)
        os._exit(1)


def _read_report(r):
    """Everything J and K write, until both have closed the pipe."""
    chunks = []
    deadline = time.monotonic() + REPORT_TIMEOUT_S
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([r], [], [], max(left, 0))
        if not ready:
            raise ContainError("the joining process did not report in %.0f s"
                               % REPORT_TIMEOUT_S)
        data = os.read(r, 4096)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def _report(w, text):
    try:
        os.write(w, text.encode("utf-8", "replace")[:4000])
    except OSError:
        pass


def _joiner(control_fd, w, spec, fds, contain, language):
    """J: in the sandbox's pid namespace, still root. Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(control_fd)   # a sandbox must never hold the host's channel
        contain.join(spec, fds[0])
        os.close(fds[0])
        k = os.fork()
    except BaseException as e:
        _report(w, "ERR %s" % e)
        os._exit(1)
    if k == 0:
        _context(w, spec, fds[1:], contain, language)
    os._exit(0)   # K goes to the sandbox's pid 1


# J's exit closes its end of the report pipe before the kernel reparents K,
# so without this wait the host could hear JOINED (and send ADOPT) while K's
# parent is still J.
REPARENT_WAIT_S = 1.0


def _await_reparent():
    """Until K's parent is the sandbox's pid 1 (J has exited), at most
    REPARENT_WAIT_S; K goes on either way (pid 1 gets it as J ends)."""
    deadline = time.monotonic() + REPARENT_WAIT_S
    while os.getppid() != 1 and time.monotonic() < deadline:
        time.sleep(0.0005)


def _context(w, spec, ctx_fds, contain, language):
    """K: drop into the sandbox and become a context. Never returns."""
    ctx_fd, out_w, err_w = ctx_fds
    try:
        keep = "".join("fd_keep=%d\n" % fd for fd in (w, ctx_fd, out_w, err_w))
        contain.enter_joined(spec.rstrip("\n") + "\n" + keep)
        prctl.set_dumpable(False)
        os.setpgid(0, 0)
        _await_reparent()
        _report(w, "OK %d" % os.getpid())
        os.close(w)
    except BaseException as e:
        _report(w, "ERR %s" % e)
        os._exit(1)
    if language == "javascript":
        # Node takes its env and workdir from the same 'A' frame; the exec
        # gets only what Node needs to start.
        jscontext.exec_node(ctx_fd, out_w, err_w,
                            {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})   # never returns
    # No parent-death signal: J, our parent, is gone already or about to
    # be; the sandbox's pid namespace ends with its pid 1 anyway.
    context.start(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET,
                                fileno=ctx_fd), out_w, err_w, pdeathsig=False)
