"""channel.py — one mux channel inside the sandbox and the fd behind it.

Owns: relaying bytes between one non-blocking fd and the mux, with the
flow control of PROTOCOL.md: what the agent reads from the fd goes out as
M frames only while fewer than WINDOW bytes are unacknowledged (so a
context that floods its stdout stops in its own write, and nothing else
waits for it); what the shim sends is queued here until the fd takes it,
at most WINDOW bytes, and acknowledged with W once the fd took it. Three
kinds of fd:

- SOCK: a context's SOCK_SEQPACKET socket, both ways; one M is one message.
- PIPE: the read end of a context's or exec's stdout / stderr pipe.
- STREAM: an accepted egress TCP connection, both ways.
- IN: the write end of a background process's stdin (a pipe, or a dup of
  its PTY's master): shim -> agent only. What the shim sends is written as
  it is; the shim's C closes the fd (EOF on a pipe; on a PTY it only stops
  the writing: ^D is the host's to send). The agent's C on an IN channel
  means "I take nothing more" (the fd is closed or broken: the process
  closed its stdin); it is sent once, when that happens.

The bytes are not interpreted: whatever a context writes, within one
message of at most PAYLOAD_MAX bytes, is forwarded as it is. A message
over that is not framable; the channel ends (C) and the socket is shut
down, which the context's runtime sees as the host gone. Which channels
exist, and what the control channel says, is agent.py's.
"""

import collections
import errno
import os
import select
import socket

import mux

SOCK, PIPE, STREAM, IN = "sock", "pipe", "stream", "in"

_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ESHUTDOWN,
         errno.ECONNABORTED, errno.ETIMEDOUT, errno.EBADF)
_AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)
HUP = select.POLLHUP | select.POLLERR | select.POLLRDHUP
_EMPTY_MAX = 64


class Channel:
    def __init__(self, num, kind, fileobj, emit, log):
        self.num = num
        self.kind = kind
        # Owned: a socket object (SOCK, STREAM) or an int fd (PIPE).
        self._obj = fileobj
        if isinstance(fileobj, int):
            self.fd = fileobj
            os.set_blocking(fileobj, False)
        else:
            self.fd = fileobj.fileno()
            fileobj.setblocking(False)
        self._emit = emit   # borrowed: emit(frame bytes) queues for the shim
        self._log = log     # borrowed: log(text) for the host's log
        self.held = False   # the default context before activate: not read
        self._hup = False    # PTY: the process is gone; what is queued is the last
        # agent -> shim
        self.reading = kind != IN
        self._sent_close = False   # IN: our C (nothing more taken) went out
        self.inflight = 0   # bytes sent in M and not yet acknowledged by W
        # shim -> agent
        self.writing = kind != PIPE
        self._wq = collections.deque()   # (bytes, counted)
        self._queued = 0                 # counted bytes in _wq
        self.ack_pending = 0             # delivered, W not sent yet
        self._shim_closed = False
        self._buf = bytearray(mux.PAYLOAD_MAX + 1) if kind == SOCK else None
        self._empties = 0   # empty messages read in a row (SOCK)

    # -- what the poll loop asks --
    def want_read(self):
        if self.kind == IN:
            return False
        if not self.reading or self.held:
            return False
        # A socket message is read whole: leave room for the largest.
        need = mux.PAYLOAD_MAX if self.kind == SOCK else 1
        return self.inflight + need <= mux.WINDOW

    def want_write(self):
        return self.writing and bool(self._wq)

    @property
    def done(self):
        return not self.reading and not self.writing

    # -- shim -> agent --
    def push(self, data, counted=True):
        """Data from an M frame (counted) or the agent's own (W, a/A frames)."""
        if self.kind == PIPE:
            raise mux.MuxError("M frame on read-only channel %d" % self.num)
        if self._shim_closed:
            raise mux.MuxError("M frame on channel %d after its C" % self.num)
        if counted:
            if self._queued + self.ack_pending + len(data) > mux.WINDOW:
                raise mux.MuxError("channel %d: shim sent past its window"
                                   % self.num)
            self._queued += len(data)
        if not self.writing:
            # The fd is gone (the context died): drop, but free the window.
            if counted:
                self._queued -= len(data)
                self.ack_pending += len(data)
            return
        self._wq.append((data, counted))

    def shim_closed(self):
        """C from the shim: it sends nothing more here."""
        if self._shim_closed:
            raise mux.MuxError("second C frame on channel %d" % self.num)
        self._shim_closed = True
        if self.kind == PIPE:
            # The host closed its read end: stop reading, as the pipe's
            # writer would see it closed too.
            self._end_read()
            self._close_fd()
        elif not self._wq:
            self._shutdown_write()

    def end_input(self):
        """IN: the process was reaped: take nothing more (what is queued
        is dropped and acknowledged)."""
        if self.kind == IN and self.writing:
            self._drop_writes()
            self._in_done()

    def on_ack(self, n):
        if n > self.inflight:
            raise mux.MuxError("channel %d: W of %d with %d in flight"
                               % (self.num, n, self.inflight))
        self.inflight -= n
        if self._hup:
            self._drain_hup()

    def hangup(self):
        """PIPE on a PTY master: its process was reaped. Linux says EIO
        once every slave fd is closed; gVisor's master never does (it
        reads EAGAIN forever). So what the master holds now is read out,
        as the window allows, and then the channel ends."""
        self._hup = True
        self._drain_hup()

    def _drain_hup(self):
        while self.reading and self.want_read():
            if self._read_bytes() == "again":
                self._end_read()
                self._close_fd()
                return

    def on_writable(self):
        """Write queued data until the fd would block."""
        while self._wq and self.writing:
            data, counted = self._wq[0]
            try:
                if self.kind == SOCK:
                    self._obj.send(data)
                    n = len(data)
                elif self.kind == IN:
                    n = os.write(self.fd, data)
                else:
                    n = self._obj.send(data)
            except OSError as e:
                if e.errno in _AGAIN:
                    return
                self._write_failed()
                return
            if n < len(data):
                self._wq[0] = (data[n:], counted)
            else:
                self._wq.popleft()
            if counted:
                self._queued -= n
                self.ack_pending += n
        if not self._wq and self._shim_closed and self.writing:
            self._shutdown_write()

    # -- agent -> shim --
    def on_readable(self, revents):
        """Read once (the loop comes back while there is more)."""
        if self.kind == SOCK:
            self._read_message(revents)
        else:
            self._read_bytes()

    def _read_message(self, revents):
        try:
            n = self._obj.recv_into(self._buf)
        except OSError as e:
            if e.errno in _AGAIN:
                return
            self._end_read()
            return
        if n == 0:
            # An empty message cannot be carried (an M has a byte or more);
            # with the peer gone (or shut down for writing) it is the end.
            # Past a run of empty ones it is too, whatever poll says: a
            # context that sends nothing but empty messages only ends its
            # own channel, and the loop never spins on it.
            self._empties += 1
            if revents & HUP or self._empties >= _EMPTY_MAX:
                self._end_read()
            return
        self._empties = 0
        if n > mux.PAYLOAD_MAX:
            self._log("channel %d: a message over %d bytes from the context; "
                      "channel closed" % (self.num, mux.PAYLOAD_MAX))
            self._end_read()
            try:
                self._obj.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._drop_writes()
            return
        self._send(bytes(self._buf[:n]))

    def _read_bytes(self):
        room = min(mux.WINDOW - self.inflight, mux.PAYLOAD_MAX)
        try:
            if self.kind == PIPE:
                data = os.read(self.fd, room)
            else:
                data = self._obj.recv(room)
        except OSError as e:
            if e.errno in _AGAIN:
                return "again"
            data = b""
            if self.kind == STREAM:
                # A reset connection: nothing more either way.
                self._drop_writes()
        if not data:
            self._end_read()
            if self.kind == PIPE:
                self._close_fd()
            return
        self._send(data)

    def _send(self, data):
        self.inflight += len(data)
        self._emit(mux.frame(mux.M, self.num, data))

    def _end_read(self):
        if self.reading:
            self.reading = False
            self._emit(mux.frame(mux.C, self.num))

    # -- ending --
    def _shutdown_write(self):
        self.writing = False
        if self.kind == IN:
            self._in_done()
            return
        try:
            self._obj.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _write_failed(self):
        self._drop_writes()
        if self.kind == STREAM:
            self._end_read()
        elif self.kind == IN:
            self._in_done()   # EPIPE: nobody reads the process's stdin

    def _in_done(self):
        """IN: close the fd (EOF for the process) and say so, once."""
        self._close_fd()
        if not self._sent_close:
            self._sent_close = True
            self._emit(mux.frame(mux.C, self.num))

    def _drop_writes(self):
        """The fd takes nothing more: acknowledge what is queued (the shim
        must not wait for it) and drop it."""
        self.writing = False
        self.ack_pending += self._queued
        self._queued = 0
        self._wq.clear()

    def _close_fd(self):
        if self._obj is None:
            return
        if isinstance(self._obj, int):
            os.close(self._obj)
        else:
            self._obj.close()
        self._obj = None

    def close(self):
        self._close_fd()
