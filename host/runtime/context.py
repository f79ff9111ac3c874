"""context.py — one persistent Python interpreter (a forked child of the supervisor).

Owns: the process side of a context: its stdio (fds 0/1/2, sys.stdout and
sys.stderr as frame writers), its signals, and the frame loop on ctx_sock
('c'/'R' in; 'd' after every run). Running the code itself is notebook.py's.
Forking and the fds it is handed are supervisor.py's.
"""

import os
import signal
import sys

import frames
import prctl
import reseed
from notebook import Notebook
from streams import FrameWriter


def start(ctx_sock, out_w, err_w):
    """Turn the freshly forked child into a context; never returns."""
    try:
        _setup(out_w, err_w)
        _serve(ctx_sock)
    finally:
        os._exit(0)


def _setup(out_w, err_w):
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (devnull, out_w, err_w):
        if fd > 2:
            os.close(fd)
    # The supervisor ignores these (it is pid 1); user code and its
    # subprocesses get the ordinary defaults. SIGPIPE stays ignored as
    # Python itself sets it (EPIPE errors instead of death).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # Die with the supervisor even when it isn't pid 1 (--no-contain).
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
