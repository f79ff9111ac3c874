"""A stand-in agent for the shim's own tests (tests/gvisor/shim_test.py).

It speaks the mux of host/drivers/gvisor/PROTOCOL.md over its stdin/stdout
inside gVisor, as the real agent (host/drivers/gvisor/agent/) does, but runs
no Python contexts: a context here echoes each message it gets on its socket
channel back as b"echo:" + message and writes b"out:" + message to its stdout
channel, so the shim's relaying (boundaries, windows, close) can be checked
alone. Exec children are real (/bin/sh -c) with their output relayed. Some
commands make it misbehave on purpose: "__bad_frame__", "__past_window__",
"__hang__" (stop reading stdin).
"""
import json
import os
import select
import signal
import struct
import subprocess
import sys

WINDOW = 256 * 1024

inbuf = b""
outq = bytearray()
ctxs = {}      # id -> {"sock", "out", "err"}
execs = {}     # id -> (Popen, out_chan, err_chan)
fd_chan = {}   # exec pipe fd -> chan
sent = {}      # chan -> unacked bytes we sent
egress = False
lsock = None
next_egress = 2**31 + 1
hung = False
# --child-uid N: as the real agent, children run as N (the agent is root
# inside gVisor with CAP_SETUID/SETGID/KILL only)
child_uid = int(sys.argv[sys.argv.index("--child-uid") + 1]) if "--child-uid" in sys.argv else None


def frame(t, chan, payload=b""):
    outq.extend(struct.pack(">IBI", 5 + len(payload), ord(t), chan) + payload)


def control(**kv):
    frame("J", 0, json.dumps(kv).encode())


def data(chan, b):
    for i in range(0, len(b), 65536):
        frame("M", chan, b[i:i + 65536])
        sent[chan] = sent.get(chan, 0) + len(b[i:i + 65536])


def ack(chan, n):
    if n:
        frame("W", chan, struct.pack(">I", n))


def start_exec(m):
    if m["command"] == "__bad_frame__":
        outq.extend(struct.pack(">IBI", 5, ord("Z"), 1))
        return
    if m["command"] == "__past_window__":
        for _ in range(8):
            frame("M", m["out"], b"x" * 65536)
        return
    if m["command"] == "__hang__":
        global hung
        hung = True
        return
    p = subprocess.Popen(["/bin/sh", "-c", m["command"]], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/workspace",
                         start_new_session=True,
                         **({"user": child_uid, "group": child_uid, "extra_groups": []}
                            if child_uid is not None else {}))
    execs[m["id"]] = [p, m["out"], m["err"], 2]
    fd_chan[p.stdout.fileno()] = (m["id"], m["out"], p.stdout)
    fd_chan[p.stderr.fileno()] = (m["id"], m["err"], p.stderr)
    control(op="exec", id=m["id"])


def on_control(m):
    global egress, lsock
    op = m["op"]
    if op == "activate":
        egress = bool(m.get("egress"))
        if egress:
            import socket
            lsock = socket.socket()
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lsock.bind(("127.0.0.1", 3128))
            lsock.listen(16)
        control(op="activated")
    elif op == "ctx":
        ctxs[m["id"]] = {"sock": m["sock"], "out": m["out"], "err": m["err"]}
        control(op="ctx", id=m["id"])
    elif op == "killctx":
        c = ctxs.pop(m["id"], None)
        if c:
            for ch in (c["sock"], c["out"], c["err"]):
                frame("C", ch)
            control(op="ctxexit", id=m["id"], code=-1, signal=9)
    elif op == "int":
        pass
    elif op == "exec":
        start_exec(m)
    elif op == "killexec":
        e = execs.get(m["id"])
        if e:
            os.killpg(e[0].pid, signal.SIGKILL)


def sock_chan_of(chan):
    for cid, c in ctxs.items():
        if c["sock"] == chan:
            return cid, c
    return None, None


conns = {}   # chan -> socket (egress)


def on_frame(t, chan, p):
    if t == "J":
        on_control(json.loads(p))
    elif t == "M":
        if chan in conns:
            conns[chan].sendall(p)
            ack(chan, len(p))
            return
        cid, c = sock_chan_of(chan)
        if c is None:
            return
        ack(chan, len(p))
        data(c["sock"], b"echo:" + p)
        data(c["out"], b"out:" + p)
    elif t == "C":
        if chan in conns:
            conns.pop(chan).close()
            frame("C", chan)
    elif t == "W":
        sent[chan] = sent.get(chan, 0) - struct.unpack(">I", p)[0]


def main():
    global inbuf, next_egress
    os.set_blocking(1, False)
    ctxs["default"] = {"sock": 1, "out": 2, "err": 3}
    control(op="ready")
    while True:
        rl = [] if hung else [0]
        rl += [fd for fd, (_, ch, _) in fd_chan.items() if WINDOW - sent.get(ch, 0) >= 65536]
        if lsock:
            rl.append(lsock)
        rl += list(conns.values())
        wl = [1] if outq else []
        r, w, _ = select.select(rl, wl, [], 1.0)
        if 1 in w:
            try:
                n = os.write(1, outq)
                del outq[:n]
            except BlockingIOError:
                pass
        if 0 in r:
            b = os.read(0, 1 << 20)
            if not b:
                return
            inbuf += b
            while len(inbuf) >= 4:
                (n,) = struct.unpack(">I", inbuf[:4])
                if len(inbuf) < 4 + n:
                    break
                t, chan = struct.unpack(">BI", inbuf[4:9])
                on_frame(chr(t), chan, inbuf[9:4 + n])
                inbuf = inbuf[4 + n:]
        if lsock and lsock in r:
            s, _ = lsock.accept()
            ch = next_egress
            next_egress += 2
            conns[ch] = s
            control(op="egress", chan=ch)
        for ch, s in list(conns.items()):
            if s in r:
                b = s.recv(65536)
                if b:
                    data(ch, b)
                else:
                    frame("C", ch)
                    conns.pop(ch)
        for fd in [f for f in r if isinstance(f, int) and f in fd_chan]:
            eid, ch, f = fd_chan[fd]
            b = os.read(fd, 65536)
            if b:
                data(ch, b)
                continue
            frame("C", ch)
            del fd_chan[fd]
            e = execs[eid]
            e[3] -= 1
            if e[3] == 0:
                rc = e[0].wait()
                control(op="exit", id=eid, code=rc if rc >= 0 else -1,
                        signal=-rc if rc < 0 else 0)
                del execs[eid]


if __name__ == "__main__":
    main()
