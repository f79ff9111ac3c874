"""streams.py — sys.stdout / sys.stderr of a context, as frame writers.

Owns: turning Python-level writes into 'o' / 'e' frames on ctx_sock at once,
with no buffering, so the host sees stdout and stderr interleaved in the
order the code wrote them. Output of C code and subprocesses goes to fds 1/2
(pipes to the host) instead; context.py sets those up.
"""

import io
import os

import frames


class FrameWriter(io.TextIOBase):
    """A text stream whose every write() becomes frames of one type.

    TextIO-compatible enough for print(), logging, traceback and warnings;
    fileno() names the matching real fd so code that wants a file descriptor
    (subprocess, faulthandler) writes to the pipe of the same stream.
    """

    def __init__(self, sock, ftype, fd, name):
        super().__init__()
        self._sock = sock
        self._type = ftype
        self._fd = fd
        self._name = name

    # -- the text stream API --
    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "replace"

    @property
    def name(self):
        return self._name

    @property
    def line_buffering(self):
        return False

    @property
    def buffer(self):
        # Code that writes bytes to sys.stdout.buffer gets the real fd; the
        # bytes reach the host through the pipe.
        return _FdBuffer(self._fd)

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    def flush(self):
        # Every write already went out as a frame.
        pass

    def close(self):
        # Closing sys.stdout must not cut the host channel; ignore it.
        pass

    @property
    def closed(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s"
                            % type(s).__name__)
        if not s:
            return 0
        data = s.encode("utf-8", "replace")
        try:
            for chunk in frames.utf8_chunks(data):
                frames.send_frame(self._sock, self._type, chunk)
        except frames.PeerGone:
            # The host is gone (or the code broke the socket): nothing this
            # context does can reach anyone any more.
            os._exit(1)
        return len(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)


class _FdBuffer(io.RawIOBase):
    """sys.stdout.buffer: raw bytes straight to fd 1 / 2."""

    def __init__(self, fd):
        super().__init__()
        self._fd = fd

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def write(self, b):
        # Callers of .buffer.write expect everything written, as with a
        # BufferedWriter; a pipe may take less per call.
        view = memoryview(b).cast("B")
        done = 0
        while done < len(view):
            done += os.write(self._fd, view[done:])
        return done

    def close(self):
        pass
