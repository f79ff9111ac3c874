"""mux.py — the frames of the shim ⇄ agent mux (host/drivers/gvisor/PROTOCOL.md).

Owns: encoding one frame and cutting the shim's byte stream into frames,
with every limit the protocol sets (length, type, which channel a type may
use, the size of a W or C payload). A frame that breaks one is a MuxError:
the stream cannot be trusted past it. What a frame means (windows,
channels, control messages) is agent.py's and channel.py's.
"""

import struct

HEADER = struct.Struct(">IBI")   # len (of what follows it), type, chan
HEADER_LEN = 4                   # the len field itself
AFTER_LEN_MIN = 5                # type + chan
PAYLOAD_MAX = 65536
AFTER_LEN_MAX = PAYLOAD_MAX + 5
JSON_MAX = 64 * 1024             # a J frame the agent sends
# A J frame from the shim may be larger: `activate` carries the owner's env
# (up to the 128 KiB env ceiling, escaped), `exec` its command; the shim's
# bound is what it takes from the host (shim.h SHIM_JSON_TO_AGENT_MAX).
JSON_IN_MAX = 1024 * 1024 + 64 + 4096
J_AFTER_LEN_MAX = JSON_IN_MAX + 5
WINDOW = 256 * 1024              # bytes per channel sent and not yet acknowledged
CONTROL = 0
DEFAULT_SOCK, DEFAULT_OUT, DEFAULT_ERR = 1, 2, 3
EGRESS_FIRST = (1 << 31) + 1     # agent-opened channels: odd, from here up
CHAN_MAX = (1 << 32) - 1

J, M, C, W = b"J"[0], b"M"[0], b"C"[0], b"W"[0]
_TYPES = frozenset((J, M, C, W))


class MuxError(Exception):
    """The peer broke the framing rules; nothing after this can be read."""


def frame(ftype, chan, payload=b""):
    """One frame as bytes. ftype is one of J, M, C, W (an int)."""
    return HEADER.pack(AFTER_LEN_MIN + len(payload), ftype, chan) + payload


def window(chan, n):
    return frame(W, chan, struct.pack(">I", n))


class Reader:
    """Bytes in, whole validated frames out."""

    def __init__(self):
        self._buf = bytearray()

    def feed(self, data):
        self._buf += data

    def frames(self):
        """Yield (type, chan, payload) for every whole frame buffered."""
        buf = self._buf
        off = 0
        try:
            while len(buf) - off >= HEADER_LEN:
                # The length alone is checked as soon as it is here.
                n = int.from_bytes(buf[off:off + HEADER_LEN], "big")
                if n < AFTER_LEN_MIN or n > J_AFTER_LEN_MAX:
                    raise MuxError("frame length %d out of range" % n)
                if n > AFTER_LEN_MAX:
                    # only a control message may be this long: its type
                    # is checked as soon as it is here
                    if len(buf) - off <= HEADER_LEN:
                        break
                    if buf[off + HEADER_LEN] != J:
                        raise MuxError("frame length %d out of range" % n)
                if len(buf) - off < HEADER_LEN + n:
                    break
                _, ftype, chan = HEADER.unpack_from(buf, off)
                payload = bytes(buf[off + HEADER.size:off + HEADER_LEN + n])
                off += HEADER_LEN + n
                _check(ftype, chan, payload)
                yield ftype, chan, payload
        finally:
            del buf[:off]


def _check(ftype, chan, payload):
    if ftype not in _TYPES:
        raise MuxError("unknown frame type 0x%02x" % ftype)
    if (ftype == J) != (chan == CONTROL):
        raise MuxError("frame type %c on channel %d" % (ftype, chan))
    if ftype == W and len(payload) != 4:
        raise MuxError("W frame of %d bytes on channel %d" % (len(payload), chan))
    if ftype == C and payload:
        raise MuxError("C frame with a payload on channel %d" % chan)
    if ftype == M and not payload:
        raise MuxError("empty M frame on channel %d" % chan)
