"""zygote.py — one per template: a warm interpreter that forks sandboxes.

Owns: the host ⇄ zygote channel (PROTOCOL.md section 1): argv, preloading
the template's modules (and the whole runtime) once, freezing the heap so
forked children share it, HELLO, and for each CREATE one fork into a new
pid namespace (the child is the sandbox's pid 1; create.py) — nothing
more, so a create costs the zygote one fork. It is a
child subreaper and reaps everything that ends up under it. EOF on the
control socket means the host died: the zygote exits.
"""

import os
import sys

# Run as `python3 -I zygote.py`: -I leaves the script's folder off sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402

# The whole runtime and what it uses, imported before the fork so no child
# pays for imports (time, and private memory).
import context  # noqa: E402,F401
import create  # noqa: E402
import frames  # noqa: E402
import prctl  # noqa: E402
import supervisor  # noqa: E402,F401
from contain import Contain, ContainError  # noqa: E402

# Modules user code almost always touches; cheap to share.
_RUNTIME_PRELOAD = ("json", "subprocess", "traceback", "linecache", "ast",
                    "io", "tempfile", "pickle", "uuid", "datetime")


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="zygote.py")
    p.add_argument("--control-fd", type=int, required=True)
    p.add_argument("--contain-lib")
    p.add_argument("--preload", default="")
    p.add_argument("--no-contain", action="store_true")
    args = p.parse_args(argv)
    if not args.no_contain and not args.contain_lib:
        p.error("--contain-lib is required unless --no-contain")
    return args


def _reap(signum, frame):
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        if pid == 0:
            return


def main(argv):
    args = _parse_args(argv)
    contain = Contain(None if args.no_contain else args.contain_lib)
    for name in _RUNTIME_PRELOAD + tuple(
            m.strip() for m in args.preload.split(",") if m.strip()):
        importlib.import_module(name)
    prctl.set_child_subreaper()
    ctl = socket.socket(fileno=args.control_fd)
    os.set_inheritable(args.control_fd, False)
    signal.signal(signal.SIGCHLD, _reap)
    # Everything allocated so far is shared with every sandbox; freezing
    # keeps the children's GC from writing to (and so copying) those pages.
    gc.collect()
    gc.freeze()
    sys.stdout.flush()
    sys.stderr.flush()
    frames.send_message(ctl, "HELLO %d" % os.getpid())
    _serve(ctl, args.control_fd, contain)


def _serve(ctl, control_fd, contain):
    while True:
        try:
            data, fds = frames.recv_message(ctl)
        except frames.PeerGone:
            os._exit(0)
        except ValueError as e:
            print("zygote: %s" % e, file=sys.stderr, flush=True)
            continue
        if not data.startswith(b"CREATE ") or len(fds) != 1:
            # No sandbox_sock: there is nobody to say ERR to.
            for fd in fds:
                os.close(fd)
            print("zygote: malformed message ignored", file=sys.stderr,
                  flush=True)
            continue
        _fork_sandbox(control_fd, socket.socket(fileno=fds[0]), data[7:],
                      contain)


def _fork_sandbox(control_fd, sock, payload, contain):
    """One fork per sandbox: the child is pid 1 of a new pid namespace
    (contain.h: sgc_pidns_next / fork / sgc_pidns_reset) and does the rest
    itself (create.child). We send its host pid and let it go."""
    try:
        gate_r, gate_w = os.pipe()
    except OSError as e:
        _err(sock, "pipe: %s" % e)
        return
    pid = -1
    try:
        contain.pidns_next()
        pid = os.fork()
    except (OSError, ContainError) as e:
        _err(sock, "fork: %s" % e)
    if pid == 0:
        os.close(gate_w)
        create.child(control_fd, sock, gate_r, payload, contain)
    try:
        contain.pidns_reset()
    except ContainError as e:
        # Later children would share one pid namespace: never go on.
        print("zygote: %s" % e, file=sys.stderr, flush=True)
        os._exit(1)
    if pid > 0:
        try:
            frames.send_message(sock, "PID %d" % pid)
        except frames.PeerGone:
            pass
    os.close(gate_w)  # releases the child
    os.close(gate_r)
    sock.close()


def _err(sock, msg):
    try:
        frames.send_message(sock, "ERR %s" % msg)
    except frames.PeerGone:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
