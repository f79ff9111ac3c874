"""zygote.py — one per template: a warm interpreter that forks sandboxes.

Owns: the host ⇄ zygote channel (PROTOCOL.md section 1): argv, preloading
the template's modules (and the whole runtime) once, freezing the heap so
forked children share it, HELLO, and for each CREATE one fork (child A,
create.py) — nothing more, so a create costs the zygote one fork. It is a
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
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402

# The whole runtime and what it uses, imported before the fork so no child
# pays for imports (time, and private memory).
import context  # noqa: E402,F401
import create  # noqa: E402
import frames  # noqa: E402
import prctl  # noqa: E402
import supervisor  # noqa: E402,F401
from contain import Contain  # noqa: E402

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


# A fork's child spends most of its first ~20 ms on this kind of VM taking
# copy-on-write and text page faults (a few hundred of them) before it runs
# a line of ours. So the zygote keeps one child A forked ahead of time,
# already past that, waiting for its CREATE; a create hands it over
# (one send_fds) and the zygote forks the next spare only once it has been
# idle for SPARE_DELAY, so the refill never competes with a create for the
# CPU. Without a spare (a burst of creates) it forks A directly.
SPARE_DELAY_MS = 50


def _serve(ctl, control_fd, contain):
    spare = None  # (pid, socket to it) of the waiting child A, owned
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    while True:
        if spare is None and not poller.poll(SPARE_DELAY_MS):
            spare = _fork_spare(control_fd, contain)
            continue
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
        if spare is not None:
            handed = _hand_to_spare(spare[1], data[7:], fds[0])
            spare[1].close()
            spare = None
            if handed:
                os.close(fds[0])
                continue
        _fork_a(control_fd, fds[0], data[7:], contain)


def _hand_to_spare(sock, payload, fd):
    try:
        frames.send_message(sock, payload, [fd])
        return True
    except frames.PeerGone:
        return False  # the spare died, or the message is too big for it


def _fork_spare(control_fd, contain):
    try:
        mine, theirs = socket.socketpair(socket.AF_UNIX,
                                         socket.SOCK_SEQPACKET)
        # Room for a CREATE as large as the host may send.
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                        frames.COMMAND_MAX)
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        mine.close()
        create.spare_a(control_fd, theirs, contain)  # never returns
    theirs.close()
    return pid, mine


def _fork_a(control_fd, sock_fd, payload, contain):
    try:
        pid = os.fork()
    except OSError as e:
        try:
            frames.send_message(socket.socket(fileno=os.dup(sock_fd)),
                                "ERR fork: %s" % e)
        except frames.PeerGone:
            pass
        os.close(sock_fd)
        return
    if pid == 0:
        create.child_a(control_fd, sock_fd, payload, contain)
    os.close(sock_fd)


if __name__ == "__main__":
    main(sys.argv[1:])
