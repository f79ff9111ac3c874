#!/usr/bin/python3
"""mTLS on the gateway's listener (issue 5), with certificates this test makes
with the openssl CLI in its temp dir: a CA, a server cert for 127.0.0.1 (IP
SAN), client certs with a SPIFFE URI SAN. The gateway gets a tls: block via
run.sh's SANDGATE_GATEWAY_TLS_DIR; the policy maps the SPIFFE id to tenant
`spiffe` (tenants[].mtls).

- right client cert → works without an API key (the tenant from the cert);
- no client cert and no key → UNAUTHENTICATED; no client cert but an API key
  of an API-key tenant → OK (a TLS listener serves both kinds of tenant);
- a cert from the same CA whose identity is not in the policy → UNAUTHENTICATED;
- a cert from an unknown CA → UNAUTHENTICATED (the listener asks for a
  certificate and the gateway verifies it, so a bad one is refused like a
  bad key, with no hint which part failed);
- the cert's tenant plus another tenant's API key → UNAUTHENTICATED.
"""
import os
import subprocess
import sys
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
SPIFFE = "spiffe://sandgate.test/agent/demo"
UNKNOWN_SPIFFE = "spiffe://sandgate.test/agent/stranger"
KK = "mt-keyed-key-1"

POLICY = """version: 1
templates:
  - name: code-interpreter
    tenants: ["*"]
tenants:
  - id: spiffe
    mtls: ["%s"]
  - id: keyed
    api_keys: [%s]
""" % (SPIFFE, sg.key_hash(KK))

S = {}


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True,
                   timeout=60)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".crt", "-days", "2",
            "-subj", "/CN=%s" % name, "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_leaf(d, name, ca, san, usage):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=%s" % name, cwd=d)
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n"
                % (san, usage))
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext",
            cwd=d)


def read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-mtls-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    d = S["pki"] = os.path.join(tmp, "pki")
    os.makedirs(d)
    make_ca(d, "ca")
    make_ca(d, "rogue_ca")
    make_leaf(d, "server", "ca", "IP:127.0.0.1", "serverAuth")
    make_leaf(d, "client", "ca", "URI:" + SPIFFE, "clientAuth")
    make_leaf(d, "stranger", "ca", "URI:" + UNKNOWN_SPIFFE, "clientAuth")
    make_leaf(d, "rogue", "rogue_ca", "URI:" + SPIFFE, "clientAuth")
    os.symlink("ca.crt", os.path.join(d, "client_ca.crt"))
    S["d"] = dm = sg.Daemons(tmp, POLICY, env={"SANDGATE_GATEWAY_TLS_DIR": d})
    unittest.addModuleCleanup(dm.stop)
    dm.start()
    if "(mTLS)" not in dm.read("gateway.log"):
        raise RuntimeError("gateway is not serving mTLS:\n" + dm.logs_tail())


def api_with(cert=None):
    d = S["pki"]
    kw = {"root_certificates": read(d, "ca.crt")}
    if cert:
        kw["private_key"] = read(d, cert + ".key")
        kw["certificate_chain"] = read(d, cert + ".crt")
    creds = grpc.ssl_channel_credentials(**kw)
    return sg.Api(S["tmp"], S["d"].addr, credentials=creds)


class MTLS(unittest.TestCase):
    def status(self, api, key=None, rpc="ListSandboxes"):
        pb = api.pb
        try:
            return api.status(rpc, pb.ListSandboxesRequest(user_id="m"), key, timeout=10)
        finally:
            api.close()

    def test_right_cert_is_the_tenant_without_a_key(self):
        api = api_with("client")
        try:
            sb = api.create(None, "m", "mt-" + uuid.uuid4().hex[:6])
            out, _, err, _, _ = api.run(None, "m", sb.sandbox_id, "print(2+3)")
            self.assertEqual(out, "5\n")
            self.assertEqual([s.sandbox_id for s in api.list(None, "m")], [sb.sandbox_id])
            api.kill(None, "m", sb.sandbox_id)
        finally:
            api.close()
        # audit names the tenant from the certificate
        self.assertIn('"tenant":"spiffe"', S["d"].read("audit.log"))

    def test_no_client_cert_needs_a_key(self):
        code, det, _, _ = self.status(api_with(None))
        self.assertEqual(code, C.UNAUTHENTICATED, det)
        code, det, _, _ = self.status(api_with(None), key=KK)   # an API-key tenant over TLS
        self.assertEqual(code, C.OK, det)

    def test_identity_not_in_policy_is_unauthenticated(self):
        code, det, _, _ = self.status(api_with("stranger"))
        self.assertEqual(code, C.UNAUTHENTICATED, det)

    def test_unknown_ca_is_unauthenticated(self):
        code, det, _, _ = self.status(api_with("rogue"))
        self.assertEqual(code, C.UNAUTHENTICATED, det)
        # a valid key does not rescue an unverifiable certificate
        code, det, _, _ = self.status(api_with("rogue"), key=KK)
        self.assertEqual(code, C.UNAUTHENTICATED, det)

    def test_cert_and_another_tenants_key_disagree(self):
        code, det, _, _ = self.status(api_with("client"), key=KK)
        self.assertEqual(code, C.UNAUTHENTICATED, det)
        # the keyed tenant through an unmapped cert + its key: the key decides
        code, det, _, _ = self.status(api_with("stranger"), key=KK)
        sys.stderr.write("\nunmapped cert + valid key of tenant keyed: %s %s\n" % (code.name, det))
        self.assertIn(code, (C.OK, C.UNAUTHENTICATED))


if __name__ == "__main__":
    unittest.main(verbosity=2)
