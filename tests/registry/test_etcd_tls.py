#!/usr/bin/python3
"""etcd mode over TLS: registry.tls in both daemons' configs.

One etcd member on loopback serving its client port over TLS with client
certificate auth on (--client-cert-auth: only a client whose certificate a
trusted CA signed gets in). Every certificate is made here with openssl: a
CA, etcd's server certificate (SAN etcd.sandgate.test and 127.0.0.1), a
client certificate for the daemons, and a second CA with a client
certificate of its own, which etcd does not trust. Checks:
  1. a host and a gateway with the right CA, client certificate and server
     name: the host registers, the gateway sees it, a create, a RunCode
     and a kill work end to end;
  2. fail closed: a gateway whose CA is not etcd's, one with no client
     certificate, one whose client certificate etcd does not trust, one
     whose server name the member's certificate does not carry, and one
     that speaks plaintext each start, log why etcd refuses them (a failed
     handshake, or a member closing the connection on a client certificate
     it does not trust), and answer creates UNAVAILABLE
     REGISTRY_UNAVAILABLE with no address in the message; a host with the
     wrong CA never registers and says so;
  3. --check-config reads the TLS files: a missing CA, or a key that is not
     the certificate's, is an error naming the file; the good config passes.

Env: SANDGATE_BUILD. Run with /usr/bin/python3 as root.
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tenancy"))
from sgreg import BUILD, Etcd, Fleet, wait  # noqa: E402
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KEY = "sg-etcdtls-key-0001"
POLICY = """version: 1
defaults:
  quotas: {sandboxes_per_tenant: 20, sandboxes_per_user: 20, concurrent_actions: 16,
           rate_per_s: 1000, rate_burst: 1000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
""" % sg.key_hash(KEY)
SERVER_NAME = "etcd.sandgate.test"
S = {}


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=60)


def make_pki(d):
    """Two CAs; etcd's server certificate and a client certificate from the
    first; a client certificate from the second. Returns paths."""
    p = lambda n: os.path.join(d, n)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def ca(name):
        openssl("req", "-x509", *ec, "-keyout", p(name + ".key"), "-out", p(name + ".pem"),
                "-days", "2", "-subj", "/CN=sandgate test " + name)

    def leaf(name, ca_name, subj, ext):
        openssl("req", *ec, "-keyout", p(name + ".key"), "-out", p(name + ".csr"), "-subj", subj)
        with open(p(name + ".ext"), "w") as f:
            f.write(ext)
        openssl("x509", "-req", "-in", p(name + ".csr"), "-CA", p(ca_name + ".pem"), "-CAkey",
                p(ca_name + ".key"), "-CAcreateserial", "-out", p(name + ".pem"), "-days", "2",
                "-extfile", p(name + ".ext"))
    ca("ca")
    ca("otherca")
    leaf("server", "ca", "/CN=" + SERVER_NAME,
         "subjectAltName=DNS:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
         % SERVER_NAME)
    leaf("client", "ca", "/CN=sandgate", "extendedKeyUsage=clientAuth\n")
    leaf("otherclient", "otherca", "/CN=sandgate", "extendedKeyUsage=clientAuth\n")
    return p


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-etcdtls-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    pki = os.path.join(tmp, "pki")
    os.makedirs(pki)
    p = S["p"] = make_pki(pki)
    S["etcd"] = Etcd(tmp, tls={"ca": p("ca.pem"), "cert": p("server.pem"),
                               "key": p("server.key"), "client_cert": p("client.pem"),
                               "client_key": p("client.key")})
    unittest.addModuleCleanup(S["etcd"].stop)
    S["etcd"].start()
    S["good"] = {"ca": p("ca.pem"), "cert": p("client.pem"), "key": p("client.key"),
                 "server_name": SERVER_NAME}
    f = S["f"] = Fleet(tmp, S["etcd"], POLICY, lease_ttl=2, registry_tls=S["good"])
    unittest.addModuleCleanup(f.stop)


def status(api, fn):
    try:
        return C.OK, fn(), None
    except grpc.RpcError as e:
        return e.code(), e.details(), api.error_info(e)


class EtcdTls(unittest.TestCase):
    def test_1_gateway_and_host_work_over_tls(self):
        f = S["f"]
        h = "tls" + uuid.uuid4().hex[:6]
        f.host(h)   # waits for its entry, read back over TLS by etcdctl
        self.assertIn('"address":"127.0.0.1:', f.etcd.ctl("get", f.prefix + "hosts/" + h).stdout)
        api = sg.Api(S["tmp"], f.gateway("g1"))
        wait(lambda: "registry: host %s" % h in f.log("g1"), "the gateway to see the host", 15)
        sid = api.create(KEY, "u1", "t-" + uuid.uuid4().hex[:6]).sandbox_id
        self.assertTrue(sid.startswith(h + "-"), sid)
        self.assertTrue([k for k in f.keys("sandboxes") if k.endswith(sid)])
        o, _, err, _, _ = api.run(KEY, "u1", sid, "print(6*7)")
        self.assertEqual(o.strip(), "42", err)
        api.kill(KEY, "u1", sid)
        wait(lambda: not [k for k in f.keys("sandboxes") if k.endswith(sid)],
             "the kill's release over TLS", 10)
        for bad in ("TLS handshake failed", "closed the TLS connection"):
            self.assertNotIn(bad, f.log("g1") + f.log(h))
        S["host"] = h

    def refused(self, name, tls, why):
        """A gateway with this registry.tls starts, cannot reach etcd, logs
        why, and answers creates REGISTRY_UNAVAILABLE."""
        f = S["f"]
        api = sg.Api(S["tmp"], f.gateway(name, f.config(name, tls)))
        t0 = time.monotonic()
        code, details, info = status(api, lambda: api.create(KEY, "u2", "t-" + uuid.uuid4().hex[:6]))
        took = time.monotonic() - t0
        self.assertEqual(code, C.UNAVAILABLE, details)
        self.assertEqual(info["reason"], "REGISTRY_UNAVAILABLE")
        self.assertNotIn("127.0.0.1", details)
        self.assertNotIn("SSL", details)
        self.assertLess(took, 5.0)
        log = f.log(name)
        self.assertIn("etcd: member %s" % f.etcd.ep, log)
        self.assertIn(why, log)
        self.assertNotIn("registry: watching", log)   # never read a thing
        # and it knows no host: not even the good one registered above
        self.assertNotIn("registry: host ", log)
        print("%s: create refused in %.2f s; log: %s" % (
            name, took, [ln for ln in log.splitlines() if "etcd: member" in ln][0][:300]))
        f.kill(name)

    def test_2_wrong_ca(self):
        self.refused("badca", dict(S["good"], ca=S["p"]("otherca.pem")), "TLS handshake failed")

    def test_3_no_client_certificate(self):
        t = dict(S["good"])
        del t["cert"], t["key"]
        self.refused("nocert", t, "refuses our client certificate")

    def test_4_untrusted_client_certificate(self):
        self.refused("othercert", dict(S["good"], cert=S["p"]("otherclient.pem"),
                                       key=S["p"]("otherclient.key")), "refuses our client certificate")

    def test_5_wrong_server_name(self):
        self.refused("badname", dict(S["good"], server_name="other.sandgate.test"), "TLS handshake failed")

    def test_6_plaintext(self):
        self.refused("plain", None, "does not answer")

    def test_7_host_with_wrong_ca_never_registers(self):
        f = S["f"]
        h = "tlsbad" + uuid.uuid4().hex[:4]
        cfg = f.config(h + "-host", dict(S["good"], ca=S["p"]("otherca.pem")), host=True)
        f.host(h, wait_registered=False, config=cfg)
        wait(lambda: "TLS handshake failed" in f.log(h), "the host to log the TLS failure", 10)
        time.sleep(2)
        self.assertEqual(f.etcd.ctl("get", f.prefix + "hosts/" + h).stdout.strip(), "")
        self.assertIsNone(f.hosts[h].poll())   # still up, still trying
        f.kill(h)

    def test_8_check_config_reads_the_tls_files(self):
        f = S["f"]
        gw = os.path.join(BUILD, "bin", "sandgate")
        host = os.path.join(BUILD, "bin", "sandgate-host")

        def check(binary, cfg):
            r = subprocess.run([binary, "--check-config", "--config", cfg],
                               capture_output=True, text=True, timeout=30)
            return r.returncode, r.stdout + r.stderr
        rc, out = check(gw, f.gw_yaml)
        self.assertEqual(rc, 0, out)
        self.assertIn("registry: etcd over TLS", out)
        rc, out = check(host, f.host_yaml)
        self.assertEqual(rc, 0, out)
        missing = os.path.join(S["tmp"], "no-such-ca.pem")
        rc, out = check(gw, f.config("ckca", dict(S["good"], ca=missing)))
        self.assertEqual(rc, 1, out)
        self.assertIn("registry.tls.ca: fopen(%s)" % missing, out)
        rc, out = check(host, f.config("ckkey", dict(S["good"], key=S["p"]("otherclient.key")),
                                       host=True))
        self.assertEqual(rc, 1, out)
        self.assertIn("is not the key of %s" % S["p"]("client.pem"), out)
        self.assertNotIn("PRIVATE KEY", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
