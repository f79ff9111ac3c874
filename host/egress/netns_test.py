"""netns_test.py — the egress proxy (egress-testd) against test servers on
addresses of this network namespace's lo. Run by netns_test.sh, which made
the namespace (only lo, no route out) and checked it.

Hosts (the proxy's hosts-file resolver; it never asks DNS here):
  allowed.test  198.51.100.10  "public" (TEST-NET-2 on lo), the allowed host
  denied.test   198.51.100.10  no rule names it
  loop.test     127.0.0.1      allowed by name, resolves to loopback
  priv.test     10.0.0.5       allowed by name, resolves to a private address
  meta.test     169.254.169.254 allowed by name, resolves to metadata
  mixed.test    10.0.0.5 and 198.51.100.10
  unknown.test  (absent)       allowed by name, does not resolve
Servers on every one of those addresses count their hits, so a denial is
proven by the server never seeing the connection, not only by the 403.
"""
import http.server
import json
import os
import socket
import socketserver
import ssl
import subprocess
import threading
import time
import unittest

TESTD = os.environ["EGRESS_TESTD"]
TMP = os.environ["EGRESS_TMP"]
CERT, KEY = os.path.join(TMP, "cert.pem"), os.path.join(TMP, "key.pem")
PUBLIC, PRIVATE, META, LOOP = "198.51.100.10", "10.0.0.5", "169.254.169.254", "127.0.0.1"

HITS = {}            # address -> list of request paths / raw first bytes
HITS_MU = threading.Lock()


def hit(addr, what):
    with HITS_MU:
        HITS.setdefault(addr, []).append(what)


def hits(addr):
    with HITS_MU:
        return list(HITS.get(addr, []))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        addr = self.server.server_address[0]
        hit(addr, self.path)
        if self.path.startswith("/big"):
            n = int(self.path.split("=", 1)[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                k = min(n, len(chunk))
                try:
                    self.wfile.write(chunk[:k])
                except OSError:
                    return
                n -= k
            return
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://meta.test:8080/latest/meta-data")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"server": addr, "path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        hit(self.server.server_address[0], "POST " + self.path)
        body = json.dumps({"len": len(data)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HTTPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def tls_server(addr, port):
    """Peeks the first bytes of every connection (recorded as a hit), then
    serves one HTTPS response if they were a TLS ClientHello."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)

    def serve(c):
        try:
            c.settimeout(5)
            first = c.recv(64, socket.MSG_PEEK)
            if not first:
                return          # a connection that carried no bytes
            hit(addr, ("tls:" if first[:1] == b"\x16" else "raw:") + repr(first[:40]))
            if first[:1] != b"\x16":
                return
            s = ctx.wrap_socket(c, server_side=True)
            req = b""
            while b"\r\n\r\n" not in req:
                d = s.recv(4096)
                if not d:
                    return
                req += d
            body = b"hello over tls from " + addr.encode()
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (len(body), body))
            s.close()
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    def loop():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()


def start_servers():
    for addr in (PUBLIC, PRIVATE, META, LOOP):
        srv = HTTPServer((addr, 8080), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        tls_server(addr, 8443)


HOSTS = """# test resolver
198.51.100.10 allowed.test denied.test
127.0.0.1 loop.test
10.0.0.5 priv.test mixed.test
198.51.100.10 mixed.test
169.254.169.254 meta.test
"""

NAMES = ["allowed.test", "loop.test", "priv.test", "meta.test", "mixed.test", "unknown.test"]


class Proxy:
    def __init__(self, name, rules, cap=0):
        self.sock = os.path.join(TMP, name + ".sock")
        self.audit = os.path.join(TMP, name + ".audit")
        args = [TESTD, "--sock", self.sock, "--hosts", os.path.join(TMP, "hosts"),
                "--audit", self.audit, "--id", "sb-" + name, "--cap", str(cap)]
        for r in rules:
            args += ["--rule", r]
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.strip() == "ready", line

    def stop(self):
        self.p.terminate()
        out = self.p.stdout.read()
        self.p.stdout.close()
        rc = self.p.wait(10)
        assert rc == 0, "testd exit %d (socket left behind?)" % rc
        return out

    def audit_lines(self):
        with open(self.audit) as f:
            return [json.loads(l) for l in f if l.strip()]

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.sock)
        return s


def read_all(s):
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not d:
            break
        out += d
    return out


def parse(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and lines[0].startswith("HTTP/") else 0
    return status, lines[0] if lines else "", body


def http(px, raw):
    s = px.connect()
    s.sendall(raw)
    r = read_all(s)
    s.close()
    return parse(r)


def get(px, url, host=None):
    hp = url.split("/")[2]
    return http(px, ("GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Connection: keep-alive\r\n"
                     "Proxy-Authorization: Basic c2VjcmV0\r\n\r\n" % (url, host or hp)).encode())


def connect(px, target):
    """CONNECT; returns (status, status line, body, socket or None)."""
    s = px.connect()
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    st, line, _ = parse(head)
    if st != 200:
        body = read_all(s)
        s.close()
        return st, line, body, None
    return st, line, b"", s


def tls_get(s, sni):
    ctx = ssl.create_default_context(cafile=CERT)
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % sni.encode())
    r = read_all(t)
    t.close()
    return parse(r)


RULES = ["web,host,%s,8080+8443" % n for n in NAMES] + ["lan,cidr,198.51.100.0/24,9999"]


class EgressProxy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.px = Proxy("main", RULES)

    @classmethod
    def tearDownClass(cls):
        out = cls.px.stop()
        print(out.strip())

    def assertDenied(self, st, line, body, rule, why=""):
        self.assertEqual(st, 403, (line, body))
        self.assertIn(b"rule: " + rule.encode(), body)
        self.assertIn(b"reason: ", body)
        self.assertIn(rule, line)   # the status line names the rule: what pip prints
        if why:
            self.assertIn(why.encode(), body)

    # ---- allowed ----
    def test_allowed_http(self):
        st, line, body = get(self.px, "http://allowed.test:8080/hello?x=1")
        self.assertEqual(st, 200, (line, body))
        seen = json.loads(body)
        self.assertEqual(seen["server"], PUBLIC)
        self.assertEqual(seen["path"], "/hello?x=1")       # origin-form upstream
        self.assertNotIn("proxy-authorization", seen["headers"])
        self.assertEqual(seen["headers"]["connection"], "close")

    def test_allowed_http_post_body(self):
        body = b"y" * 100000
        st, line, resp = http(self.px, b"POST http://allowed.test:8080/up HTTP/1.1\r\nHost: allowed.test:8080\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.assertEqual(st, 200, line)
        self.assertEqual(json.loads(resp)["len"], len(body))

    def test_allowed_connect_tls(self):
        st, line, _, s = connect(self.px, "allowed.test:8443")
        self.assertEqual(st, 200, line)
        st, line, body = tls_get(s, "allowed.test")
        self.assertEqual(st, 200)
        self.assertEqual(body, b"hello over tls from " + PUBLIC.encode())

    def test_mixed_resolution_uses_only_allowed_address(self):
        st, line, body = get(self.px, "http://mixed.test:8080/mixed")
        self.assertEqual(st, 200, line)
        self.assertEqual(json.loads(body)["server"], PUBLIC)
        self.assertNotIn("/mixed", hits(PRIVATE))

    # ---- denied ----
    def test_denied_host_connect(self):
        st, line, body, _ = connect(self.px, "denied.test:8443")
        self.assertDenied(st, line, body, "default.deny-egress", "denied.test:8443")

    def test_denied_host_http(self):
        st, line, body = get(self.px, "http://denied.test:8080/nope")
        self.assertDenied(st, line, body, "default.deny-egress")
        self.assertNotIn("/nope", hits(PUBLIC))

    def test_denied_port(self):
        st, line, body, _ = connect(self.px, "allowed.test:22")
        self.assertDenied(st, line, body, "default.deny-egress")

    def test_ip_literals(self):
        # each spelling, through CONNECT and through absolute-URI HTTP
        forms = ["127.0.0.1", "2130706433", "0177.0.0.1", "0x7f000001", "0x7f.1", "127.1",
                 "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::1]", "169.254.169.254",
                 "2852039166", "0xa9.0xfe.0xa9fe", "[::ffff:169.254.169.254]", "10.0.0.5",
                 "012.0.0.5", "[::ffff:a00:5]", "0", "0.0.0.0"]
        for f in forms:
            with self.subTest(form=f):
                st, line, body, _ = connect(self.px, f + ":8443")
                self.assertDenied(st, line, body, "default.deny-special-address")
                st, line, body = get(self.px, "http://%s:8080/literal" % f)
                self.assertDenied(st, line, body, "default.deny-special-address")
        # a public literal matches only CIDR rules: the allowed name's own
        # address is still denied on the name rule's ports
        for f in [PUBLIC, "3325256714", "[::ffff:198.51.100.10]", "0xc6.0x33.0x64.0xa"]:
            with self.subTest(form=f):
                st, line, body, _ = connect(self.px, f + ":8443")
                self.assertDenied(st, line, body, "default.deny-egress", "only CIDR rules")
        for addr in (PUBLIC, PRIVATE, META, LOOP):
            self.assertNotIn("/literal", hits(addr))

    def test_cidr_rule_allows_literal(self):
        # lan: 198.51.100.0/24 port 9999 (nothing listens: allowed, then 502)
        st, line, body, _ = connect(self.px, PUBLIC + ":9999")
        self.assertEqual(st, 502, (line, body))
        self.assertIn(b"default.connect-failed", body)

    def test_names_resolving_to_special_addresses(self):
        for name, addr, kind in [("loop.test", LOOP, "loopback"), ("priv.test", PRIVATE, "private"),
                                 ("meta.test", META, "link-local")]:
            with self.subTest(name=name):
                st, line, body, _ = connect(self.px, name + ":8443")
                self.assertDenied(st, line, body, "default.deny-special-address", kind)
                st, line, body = get(self.px, "http://%s:8080/special" % name)
                self.assertDenied(st, line, body, "default.deny-special-address", addr)
                self.assertEqual([h for h in hits(addr) if "special" in h or h.startswith("tls")], [])

    def test_unresolvable_name(self):
        st, line, body, _ = connect(self.px, "unknown.test:8443")
        self.assertEqual(st, 502, line)
        self.assertIn(b"default.resolve-failed", body)

    def test_sni_must_equal_connect_host(self):
        before = len(hits(PUBLIC))
        st, line, _, s = connect(self.px, "allowed.test:8443")
        self.assertEqual(st, 200, line)
        with self.assertRaises((ssl.SSLError, OSError)):
            tls_get(s, "evil.test")    # the cert even covers evil.test: only the proxy stops it
        time.sleep(0.2)
        self.assertEqual(len(hits(PUBLIC)), before, "the server saw bytes of a refused tunnel")
        last = self.px.audit_lines()[-1]
        self.assertEqual(last["decision"], "deny")
        self.assertEqual(last["rule"], "default.deny-sni")

    def test_second_connect_inside_tunnel(self):
        before = len(hits(PUBLIC))
        st, line, _, s = connect(self.px, "allowed.test:8443")
        self.assertEqual(st, 200, line)
        s.sendall(b"CONNECT denied.test:8443 HTTP/1.1\r\nHost: denied.test:8443\r\n\r\n")
        r = read_all(s)
        s.close()
        self.assertEqual(r, b"\x15\x03\x01\x00\x02\x02\x31")   # TLS alert access_denied, then close
        time.sleep(0.2)
        self.assertEqual(len(hits(PUBLIC)), before)
        self.assertEqual(self.px.audit_lines()[-1]["rule"], "default.deny-tunnel")

    def test_host_header_names_another_host(self):
        st, line, body = get(self.px, "http://allowed.test:8080/hh", host="denied.test")
        self.assertEqual(st, 400, line)
        self.assertIn(b"Host header names another host", body)
        self.assertNotIn("/hh", hits(PUBLIC))

    def test_userinfo_trick(self):
        st, line, body = get(self.px, "http://allowed.test@denied.test:8080/ui", host="denied.test:8080")
        self.assertEqual(st, 400, line)

    def test_pipelined_second_request_refused(self):
        st, line, body = http(self.px, b"GET http://allowed.test:8080/one HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"
                              b"GET http://denied.test:8080/two HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")
        self.assertEqual(st, 400, line)
        self.assertNotIn("/two", hits(PUBLIC))

    def test_redirect_not_followed(self):
        st, line, body = get(self.px, "http://allowed.test:8080/redirect")
        self.assertEqual(st, 302, line)      # relayed as is, never followed
        time.sleep(0.2)
        self.assertFalse([h for h in hits(META) if "meta-data" in h])
        st, line, body = get(self.px, "http://meta.test:8080/latest/meta-data")
        self.assertDenied(st, line, body, "default.deny-special-address", "169.254.169.254")
        self.assertFalse([h for h in hits(META) if "meta-data" in h])

    def test_not_a_proxy_request(self):
        st, line, body = http(self.px, b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        self.assertEqual(st, 400, line)

    def test_audit_lines(self):
        get(self.px, "http://allowed.test:8080/audit")
        connect(self.px, "denied.test:443")
        time.sleep(0.2)
        lines = self.px.audit_lines()
        allow = [l for l in lines if l["decision"] == "allow" and l["host"] == "allowed.test"]
        deny = [l for l in lines if l["host"] == "denied.test" and l["port"] == 443]
        self.assertTrue(allow and deny)
        a = allow[-1]
        for k in ("sandbox", "host", "port", "ip", "decision", "rule", "bytes", "bytes_up", "bytes_down"):
            self.assertIn(k, a)
        self.assertEqual(a["sandbox"], "sb-main")
        self.assertEqual(a["ip"], PUBLIC)
        self.assertEqual(a["rule"], "web")
        self.assertGreater(a["bytes_down"], 0)
        self.assertEqual(deny[-1]["rule"], "default.deny-egress")
        with open(self.px.audit) as f:
            self.assertNotIn("c2VjcmV0", f.read())    # the proxy credentials never logged


class ByteCap(unittest.TestCase):
    def test_cap(self):
        px = Proxy("cap", RULES, cap=200000)
        try:
            st, line, body = get(px, "http://allowed.test:8080/big?n=1000000")
            self.assertEqual(st, 200, line)
            self.assertLess(len(body), 200000)        # cut at the cap
            st, line, body = get(px, "http://allowed.test:8080/hello")
            self.assertEqual(st, 403, line)
            self.assertIn(b"rule: limits.egress_bytes", body)
            st, line, body, _ = connect(px, "allowed.test:8443")
            self.assertEqual(st, 403, line)
        finally:
            out = px.stop()
        up = int(out.split("up=")[1].split()[0])
        down = int(out.split("down=")[1].split()[0])
        self.assertLessEqual(up + down, 200000)
        self.assertGreater(up + down, 150000)
        lines = px.audit_lines()
        self.assertIn("byte cap", lines[0]["reason"])
        self.assertEqual(lines[-1]["rule"], "limits.egress_bytes")


class NoGrant(unittest.TestCase):
    def test_no_rules_denies_everything(self):
        px = Proxy("none", [])
        try:
            for t in ("allowed.test:8443", PUBLIC + ":8443", "loop.test:8443"):
                st, line, body, _ = connect(px, t)
                self.assertEqual(st, 403, (t, line))
        finally:
            px.stop()
        self.assertFalse(os.path.exists(px.sock), "destroy must remove the socket")


if __name__ == "__main__":
    with open(os.path.join(TMP, "hosts"), "w") as f:
        f.write(HOSTS)
    start_servers()
    unittest.main(verbosity=2)
