"""frames.py — the wire format every runtime process speaks (PROTOCOL.md).

Owns: sending and receiving one SOCK_SEQPACKET message (text commands with
SCM_RIGHTS fds, and the 1-type-byte binary frames of a context), and the
size limits of both. It knows nothing of what a message means; zygote.py,
create.py and context.py own that (and host/init, in C, on pid 1's side).
"""

import os
import socket

# Every frame (type byte + payload) fits in 64 KiB. PROTOCOL.md only promises
# payloads <= 64 KiB; staying one byte under keeps us safe against a host that
# sized its receive buffer for the whole frame at exactly 64 KiB.
FRAME_MAX = 64 * 1024
PAYLOAD_MAX = FRAME_MAX - 1

# Commands from the host are short, except CREATE (env can be large).
COMMAND_MAX = 1024 * 1024
FDS_MAX = 8


class PeerGone(Exception):
    """The other end of a socket closed or broke."""


def recv_message(sock, bufsize=COMMAND_MAX):
    """Receive one message. Returns (bytes, [fds]); raises PeerGone at EOF.

    Received fds are close-on-exec at once (MSG_CMSG_CLOEXEC) so nothing we
    did not mean to hand on leaks into an exec'd child.
    """
    try:
        data, fds, flags, _ = socket.recv_fds(sock, bufsize, FDS_MAX,
                                              socket.MSG_CMSG_CLOEXEC)
    except (ConnectionError, OSError) as e:
        raise PeerGone(str(e)) from None
    if not data and not fds:
        raise PeerGone("EOF")
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        # A cut message can't be interpreted; drop its fds and say so.
        for fd in fds:
            os.close(fd)
        raise ValueError("truncated message")
    return data, fds


def send_message(sock, data, fds=()):
    """Send one message (bytes or str), optionally with fds. PeerGone on failure."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    try:
        if fds:
            socket.send_fds(sock, [data], list(fds))
        else:
            # SEQPACKET send is all-or-nothing: one call, one message.
            sock.send(data)
    except (ConnectionError, OSError) as e:
        raise PeerGone(str(e)) from None


def send_frame(sock, ftype, payload=b""):
    """Send one context frame: ftype is a 1-char str, payload <= PAYLOAD_MAX."""
    send_message(sock, ftype.encode("ascii") + payload)


def utf8_chunks(data, limit=PAYLOAD_MAX):
    """Split UTF-8 bytes into pieces <= limit, never inside a character.

    The host may forward each frame as a protobuf string, which must be valid
    UTF-8 on its own.
    """
    start, n = 0, len(data)
    while n - start > limit:
        end = start + limit
        # Back off over continuation bytes (10xxxxxx) to a character start;
        # give up after 3 (invalid input) and cut where we are.
        back = 0
        while back < 3 and (data[end - back] & 0xC0) == 0x80:
            back += 1
        if (data[end - back] & 0xC0) != 0x80:
            end -= back
        yield data[start:end]
        start = end
    yield data[start:]
