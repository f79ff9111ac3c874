"""context.py — one persistent Python interpreter in a sandbox.

Owns: the process side of a context: its stdio (fds 0/1/2, sys.stdout and
sys.stderr as frame writers), its signals, and the frame loop on ctx_sock
('c'/'R' in; 'd' after every run). Running the code itself is notebook.py's.
Making the process and the fds it is handed are create.py's (the default
context, a zygote fork) and sandgate-init's (later ones, context_main.py).
"""

import json
import linecache
import os
import signal
import sys

import frames
import prctl
import reseed
from notebook import Notebook
from streams import FrameWriter


def start(ctx_sock, out_w, err_w, pdeathsig=True):
    """Turn the freshly forked child into a context; never returns."""
    try:
        _setup(out_w, err_w, pdeathsig)
        _serve(ctx_sock)
    finally:
        os._exit(0)


def _setup(out_w, err_w, pdeathsig):
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (devnull, out_w, err_w):
        if fd > 2:
            os.close(fd)
    # pid 1 ignores these; user code and its
    # subprocesses get the ordinary defaults. SIGPIPE stays ignored as
    # Python itself sets it (EPIPE errors instead of death).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # Die with pid 1 even when it isn't pid 1 of a namespace (--no-contain).
    if pdeathsig:
        try:
            prctl.set_pdeathsig(signal.SIGKILL)
        except OSError:
            pass
    reseed.reseed()


def _serve(ctx_sock):
    def emit(ftype, payload):
        try:
            frames.send_frame(ctx_sock, ftype, payload)
        except frames.PeerGone:
            os._exit(1)

    nb = Notebook(emit)

    def on_sigint(signum, frame):
        if nb.running:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    sys.stdout = FrameWriter(ctx_sock, "o", 1, "<stdout>")
    sys.stderr = FrameWriter(ctx_sock, "e", 2, "<stderr>")

    chunks = []
    activation = []   # 'a'/'A' chunks: a pooled sandbox's ACTIVATE JSON
    activatable = True
    while True:
        try:
            data, fds = frames.recv_message(ctx_sock, frames.FRAME_MAX + 16)
        except frames.PeerGone:
            return
        except ValueError:
            continue
        except KeyboardInterrupt:
            # Only if the user installed a raising SIGINT handler.
            continue
        for fd in fds:
            os.close(fd)
        ftype, payload = data[:1], data[1:]
        if ftype == b"W" and activatable:
            _warm_up()
            continue
        if ftype in (b"a", b"A") and activatable:
            activation.append(payload)
            if ftype == b"A":
                activatable = False
                _activate(b"".join(activation))
                activation = []
            continue
        activatable = False  # only before the first code
        if ftype == b"c":
            chunks.append(payload)
        elif ftype == b"R":
            chunks.append(payload)
            source = b"".join(chunks)
            chunks = []
            try:
                nb.run(source)
            except KeyboardInterrupt:
                pass
            _done(emit)


def _warm_up():
    """A pooled sandbox's context, before it has an owner: walk the paths
    the first run takes (a throwaway notebook cell, json, re-seeding) so
    their copy-on-write and text page faults are paid in the pool, not on
    the create. Nothing of it stays: the scratch notebook's module and cell
    source are dropped, and activation re-seeds again."""
    main = sys.modules.get("__main__")
    try:
        scratch = Notebook(lambda ftype, payload: None)
        scratch.run(b"_w = [i * 2 for i in range(8)]\n_w")
        linecache.cache.pop("<cell-1>", None)
        json.loads('{"env": {"K": "v"}, "workdir": "/"}')
        reseed.reseed()
        _flush_all()
    except BaseException:
        pass
    sys.modules["__main__"] = main


def _activate(payload):
    """A pooled sandbox was assigned: take its env and workdir, re-seed."""
    try:
        req = json.loads(payload.decode("utf-8"))
        env = req.get("env", {})
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        os.chdir(req.get("workdir", "/workspace"))
    except BaseException:
        os._exit(1)  # the host sees the context die and restarts it
    reseed.reseed()


def _flush_all():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            pass


def _done(emit):
    # 'd' must go out even if a stray interrupt lands here.
    while True:
        try:
            _flush_all()
            emit("d", b"")
            return
        except KeyboardInterrupt:
            continue
