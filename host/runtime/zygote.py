"""zygote.py — one per template: a warm interpreter that forks sandboxes.

Owns: the host ⇄ zygote channel (PROTOCOL.md section 1): argv, preloading
the template's modules (and the whole runtime) once, freezing the heap so
forked children share it, HELLO, for each CREATE one fork into a new pid
namespace (the child is the sandbox's pid 1; create.py), and for each JOIN
one fork into a running sandbox's (a later context; join.py) — nothing
more, so a create costs the zygote one fork. It is a
child subreaper and reaps everything that ends up under it. EOF on the
control socket means the host died: the zygote exits.

Layout: this file, create.py, join.py, pid1.py and contain.py are the
process driver's (host/drivers/process/); they stay here, beside the context
runtime they preload and fork (context.py, notebook.py, display.py,
frames.py, reseed.py ...), which every driver runs inside its sandboxes.
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
import join  # noqa: E402
import jscontext  # noqa: E402
import prctl  # noqa: E402
from contain import Contain, ContainError  # noqa: E402
from pid1 import Init  # noqa: E402

# Modules user code almost always touches; cheap to share.
_RUNTIME_PRELOAD = ("json", "subprocess", "traceback", "linecache", "ast",
                    "io", "tempfile", "pickle", "uuid", "datetime")


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="zygote.py")
    p.add_argument("--control-fd", type=int, required=True)
    p.add_argument("--contain-lib")
    p.add_argument("--init", required=True)
    p.add_argument("--preload", default="")
    p.add_argument("--no-contain", action="store_true")
    # A successor (host/drivers/process/zygote.c rotation) preloads while the zygote it
    # replaces serves: at a lower priority, so creates keep the CPU.
    p.add_argument("--preload-nice", type=int, default=0)
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
    # Only as root: lowering the niceness again before HELLO needs it, and a
    # zygote left niced would nice every sandbox it forks.
    nice = args.preload_nice if os.geteuid() == 0 else 0
    prio = os.getpriority(os.PRIO_PROCESS, 0)
    if nice > 0:
        os.setpriority(os.PRIO_PROCESS, 0, min(prio + nice, 19))
    contain = Contain(None if args.no_contain else args.contain_lib)
    init = Init(args.init)
    jscontext.load()   # a sandbox cannot see host/runtime: javascript contexts get it from here
    for name in _RUNTIME_PRELOAD + tuple(
            m.strip() for m in args.preload.split(",") if m.strip()):
        importlib.import_module(name)
    _warm()
    prctl.set_child_subreaper()
    ctl = socket.socket(fileno=args.control_fd)
    os.set_inheritable(args.control_fd, False)
    signal.signal(signal.SIGCHLD, _reap)
    # Everything allocated so far is shared with every sandbox; freezing
    # keeps the children's GC from writing to (and so copying) those pages.
    gc.collect()
    gc.freeze()
    # Twice: the first pass's own garbage leaves a few (clustered) holes.
    _plug_holes()
    _plug_holes()
    if nice > 0:
        os.setpriority(os.PRIO_PROCESS, 0, prio)   # sandboxes run as the host does
    sys.stdout.flush()
    sys.stderr.flush()
    frames.send_message(ctl, "HELLO %d" % os.getpid())
    _serve(ctl, args.control_fd, contain, init)


def _warm(rounds=100):
    """Walk, here, the runtime paths every sandbox walks (parsing CREATE,
    frames, re-seeding, a notebook cell, a context's warm-up and
    activation), often enough that Python 3.11 has quickened and
    specialised their code: those writes to code
    objects then happen once in the zygote instead of copying the pages in
    every sandbox process. Nothing of it stays: the scratch notebook, cells
    and sockets are dropped; children re-seed anyway."""
    import json
    import notebook
    import reseed
    import streams
    main = sys.modules.get("__main__")
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    try:
        act = json.dumps({"env": dict(os.environ),
                          "workdir": os.getcwd()}).encode()
        nb = notebook.Notebook(lambda ftype, payload: None)
        out = streams.FrameWriter(a, "o", 1, "<stdout>")
        for _ in range(rounds):
            create._parse(b'{"id": "w", "spec": "", "env": {"K": "v"}, '
                          b'"workdir": "/", "pool": true}')
            reseed.reseed()
            frames.send_message(a, "CTX default", [r])
            for fd in frames.recv_message(b)[1]:
                os.close(fd)
            frames.send_frame(b, "W")
            frames.recv_message(a, frames.FRAME_MAX + 16)
            out.write("x")
            frames.recv_message(b)
            nb.run(b"_w = [i * 2 for i in range(8)]\n_w")
            context._warm_up()
            context._activate(act)
            context._done(lambda ftype, payload: None)
    except Exception as e:
        # Only a missed saving; the children walk these paths themselves.
        print("zygote: warm-up: %s" % e, file=sys.stderr, flush=True)
    finally:
        sys.modules["__main__"] = main
        linecache = sys.modules.get("linecache")
        if linecache is not None:
            for k in [k for k in linecache.cache if k.startswith("<cell-")]:
                linecache.cache.pop(k, None)
        for s in (a, b):
            s.close()
        os.close(r)
        os.close(w)


# Objects that fill the zygote's free pymalloc blocks (_plug_holes); never
# touched again.
_PLUGS = []


def _avail_blocks():
    """Free blocks in pymalloc's used pools, {block size: count}, read from
    sys._debugmallocstats() (which prints to fd 2)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.memfd_create("mallocstats")
    try:
        os.dup2(fd, 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
        os.lseek(fd, 0, os.SEEK_SET)
        with open(fd, "rb", closefd=False) as f:
            text = f.read().decode("ascii", "replace")
    finally:
        os.close(fd)
        os.close(saved)
    avail = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 5 and all(p.isdigit() for p in parts):
            avail[int(parts[1])] = int(parts[4])
        elif avail and not parts:
            break   # the end of the size-class table
    return avail


def _plug_holes():
    """Fill every free block of pymalloc's partly used pools with an object
    kept for good. The freed blocks (gc.collect, import temporaries) lie
    scattered over the shared arenas; without this, a sandbox process's
    first few thousand small allocations land in them and copy a page per
    block or two. Plugged, they go to fresh pools, packed densely."""
    avail = _avail_blocks()
    plugs = [None] * sum(avail.values())
    k = 0
    for size, n in sorted(avail.items()):
        for _ in range(n):
            if size <= 16:
                o = object()            # 16 bytes
            elif size <= 32:
                o = (1 << 40) + k       # a two-digit int: 32 bytes
            else:
                o = bytes(size - 33)    # 33 + len bytes
            plugs[k] = o
            k += 1
    _PLUGS.append(plugs)


def _serve(ctl, control_fd, contain, init):
    while True:
        try:
            data, fds = frames.recv_message(ctl)
        except frames.PeerGone:
            os._exit(0)
        except ValueError as e:
            print("zygote: %s" % e, file=sys.stderr, flush=True)
            continue
        if data.startswith(b"JOIN "):
            join.handle(ctl, control_fd, data[5:], fds, contain)
            continue
        if not data.startswith(b"CREATE ") or len(fds) != 1:
            # No sandbox_sock: there is nobody to say ERR to.
            for fd in fds:
                os.close(fd)
            print("zygote: malformed message ignored", file=sys.stderr,
                  flush=True)
            continue
        _fork_sandbox(control_fd, socket.socket(fileno=fds[0]), data[7:],
                      contain, init)


def _fork_sandbox(control_fd, sock, payload, contain, init):
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
        create.child(control_fd, sock, gate_r, payload, contain, init)
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
