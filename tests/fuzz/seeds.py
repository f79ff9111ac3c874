#!/usr/bin/python3
"""seeds.py — writes the seed inputs of tests/fuzz/corpus/{egress_request,
egress_sni,token}_fuzz/ (run from anywhere; it overwrites only the seed-*
files, never an input kept from a crash). Kept so the seeds can be remade
when a format changes: real ClientHellos come from Python's ssl module, the
tokens are signed with token_fuzz.c's key and clock."""
import base64
import hashlib
import hmac
import os
import ssl
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


REQUESTS = {
    "connect": "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    "connect-v6": "CONNECT [::1]:8443 HTTP/1.1\r\n\r\n",
    "connect-decimal-ip": "CONNECT 2130706433:80 HTTP/1.1\r\n\r\n",
    "connect-hex-ip": "CONNECT 0x7f.1:443 HTTP/1.1\r\nProxy-Authorization: Basic eA==\r\n\r\n",
    "absolute-uri": "GET http://Example.com/a/b?c=1 HTTP/1.1\r\nHost: example.com\r\n"
                    "User-Agent: t\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n",
    "port": "GET http://example.com:8000 HTTP/1.0\r\nHost: example.com:8000\r\n\r\n",
    "query": "GET http://example.com?x HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "no-host": "GET http://example.com/ HTTP/1.0\r\n\r\n",
    "v6-uri": "GET http://[fe80::1]:81/x HTTP/1.1\r\nHost: [fe80::1]:81\r\n\r\n",
    "post-body": "POST http://a.test/upload HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n"
                 "Content-Type: text/plain\r\n\r\nhello",
    "two-cl": "POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    "chunked": "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "pipelined": "GET http://a.test/1 HTTP/1.1\r\nHost: a.test\r\n\r\nGET http://b.test/ HTTP/1.1\r\n\r\n",
    "incomplete": "CONNECT example.com:443 HTTP/1.1\r\nHost: x",
    "userinfo": "GET http://allowed.test@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
    "obs-fold": "GET http://a.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
    "pip": "GET http://pypi.org/simple/requests/ HTTP/1.1\r\nHost: pypi.org\r\n"
           "Accept: text/html\r\nAccept-Encoding: gzip\r\nUser-Agent: pip/23.0\r\n\r\n",
    # exactly EG_HEAD_MAX (16384) bytes: one more is 431, however it is split
    "head-16384": "GET http://a.test/ HTTP/1.1\r\nX-Pad: " + "a" * 16344 + "\r\n\r\n",
}


def client_hello(server_name):
    """The first flight of a real TLS client (Python's ssl, TLS 1.2/1.3)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=server_name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def hello_body(names, pad=0, no_ext=False):
    body = b"\x03\x03" + b"\x11" * 32 + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    if no_ext:
        return body
    ext = b""
    if names:
        lst = b"".join(b"\x00" + struct.pack(">H", len(n)) + n for n in names)
        sn = struct.pack(">H", len(lst)) + lst
        ext += b"\x00\x00" + struct.pack(">H", len(sn)) + sn
    if pad:
        ext += b"\x00\x15" + struct.pack(">H", pad) + b"\x00" * pad
    return body + struct.pack(">H", len(ext)) + ext


def records(body, size):
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"".join(b"\x16\x03\x01" + struct.pack(">H", len(hs[i:i + size])) + hs[i:i + size]
                    for i in range(0, len(hs), size))


KEY = b"fuzz-user-token-key-0123456789ab"   # token_fuzz.c
NOW = 1700000000


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def token(user, task, expiry):
    msg = ("sandgate-user-token-v1\n%s\n%s\n%d" % (user, task, expiry)).encode()
    mac = hmac.new(KEY, msg, hashlib.sha256).digest()
    return "%s.%s.%d.%s" % (b64url(user.encode()), b64url(task.encode()), expiry, b64url(mac))


def main():
    for name, req in REQUESTS.items():
        write("egress_request_fuzz", name, req)
    write("egress_sni_fuzz", "python-ssl", client_hello("files.pythonhosted.org"))
    write("egress_sni_fuzz", "python-ssl-no-sni", client_hello(None))
    write("egress_sni_fuzz", "one-record", records(hello_body([b"a.example"]), 16384))
    write("egress_sni_fuzz", "split-50", records(hello_body([b"pypi.org"]), 50))
    write("egress_sni_fuzz", "split-1", records(hello_body([b"x.test"]), 1))
    write("egress_sni_fuzz", "padded", records(hello_body([b"a.example"], pad=9000), 4000))
    write("egress_sni_fuzz", "two-names", records(hello_body([b"a.example", b"b.example"]), 16384))
    write("egress_sni_fuzz", "no-sni", records(hello_body(None), 16384))
    write("egress_sni_fuzz", "no-extensions", records(hello_body(None, no_ext=True), 16384))
    write("egress_sni_fuzz", "trailing-app-data",
          records(hello_body([b"a.example"]), 16384) + b"\x17\x03\x03\x00\x01\x00")
    write("egress_sni_fuzz", "plain-connect", b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n")
    for name, (user, task, exp) in {
            "alice": ("alice", "task-1", NOW + 60),
            "email": ("user@example.com", "a/b:c", NOW + 3600),
            "utf8": ("x", "\u00e9t\u00e9", NOW + 86400),
            "tails": ("ab", "abcd", NOW + 1),
            "long": ("u" * 127, "t" * 127, NOW + 600),
            "expired": ("alice", "task-1", NOW - 1),
            "too-long-lived": ("alice", "task-1", NOW + 86401)}.items():
        write("token_fuzz", name, token(user, task, exp))
    write("token_fuzz", "names-for-signing", b"alice\x00task-1")
    write("token_fuzz", "garbage", "YW*pY2U.dGFzay0x.1700000060.AAAA")


main()
