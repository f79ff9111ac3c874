#!/usr/bin/python3
"""Isolation chosen by configuration and policy (issue 14, point 3).

One host + gateway (deploy/local/run.sh) on a host config with two process
templates, code-interpreter and code-interpreter-claimed (which the test
policy claims is gvisor), and a gvisor one, code-interpreter-gvisor (the
gvisor driver: runsc, root). Checks, through the gateway:
  - a tenant that requires gvisor creates on the gvisor template; the
    create answer, GetSandbox and ListSandboxes report "gvisor", and the
    kernel its code sees is gVisor's;
  - a tenant that requires gvisor is refused a process template with
    PERMISSION_DENIED naming the rule (tenants.secure.isolation) and both
    isolations; nothing is created;
  - an unconstrained tenant's sandbox reports isolation "process" in the
    create answer, GetSandbox and ListSandboxes;
  - a policy that calls a process template gvisor does not get a weaker
    sandbox: the host, checking its own config, refuses FAILED_PRECONDITION;
and directly on the host (its API is internal, but it may be called
directly): min_isolation gvisor on a process template is FAILED_PRECONDITION,
an unknown min_isolation is INVALID_ARGUMENT naming the field, and "process"
or "" creates a sandbox that reports "process".
"""
import os
import re
import subprocess
import sys
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KEY_OPEN, KEY_SECURE = "iso-open-key-1", "iso-secure-key-2"
CLAIMED = "code-interpreter-claimed"
GVISOR = "code-interpreter-gvisor"

POLICY = """version: 1
defaults:
  quotas: {sandboxes_per_tenant: 20, sandboxes_per_user: 20, rate_per_s: 1000, rate_burst: 1000}
templates:
  - name: code-interpreter            # says nothing: process
    tenants: ["*"]
  - name: %s     # a lie the host must catch
    isolation: gvisor
    tenants: ["*"]
  - name: %s
    isolation: gvisor
    tenants: ["*"]
tenants:
  - id: open
    api_keys: [%s]
  - id: secure
    api_keys: [%s]
    isolation: gvisor
""" % (CLAIMED, GVISOR, sg.key_hash(KEY_OPEN), sg.key_hash(KEY_SECURE))

S = {}


def host_config(tmp):
    """deploy/local/host.yaml's process template, a second process template
    and a gvisor one, pools of 1."""
    with open(os.path.join(sg.REPO, "deploy", "local", "host.yaml")) as f:
        cfg = f.read()
    # only the process templates: this suite's host must start whatever
    # deploy/local ships beside them
    head, _, rest = cfg.partition("templates:\n")
    first = re.split(r"\n(?=  - name: )", rest)[0].rstrip("\n") + "\n"
    assert "name: code-interpreter\n" in first, first
    first = re.sub(r"^( +pool:).*$", r"\1 1", first, flags=re.M)
    claimed = first.replace("name: code-interpreter\n", "name: %s\n" % CLAIMED)
    gvisor = (first.replace("name: code-interpreter\n", "name: %s\n" % GVISOR)
              .rstrip("\n") + "\n    isolation: gvisor\n")
    path = os.path.join(tmp, "host.yaml")
    with open(path, "w") as f:
        f.write(head + "templates:\n" + first + claimed + gvisor)
    return path


def host_pb(tmp):
    out = os.path.join(tmp, "hoststubs")
    if not os.path.isdir(out):
        os.makedirs(out)
        proto = os.path.join(sg.REPO, "proto")
        subprocess.run(["protoc", "-I", proto, "--python_out=" + out,
                        "sandgate/v1/host.proto", "sandgate/v1/sandgate.proto",
                        "sandgate/v1/errors.proto"], check=True, timeout=60)
        sys.path.insert(0, out)
    import importlib
    return importlib.import_module("sandgate.v1.host_pb2")


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-isolation-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    d = sg.Daemons(tmp, POLICY, env={"SANDGATE_HOST_CONFIG": host_config(tmp),
                                     "SANDGATE_POOL_SIZE": "1"})
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["d"] = d
    S["api"] = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(S["api"].close)
    S["hpb"] = host_pb(tmp)
    with open(d.path("host.port")) as f:
        S["host_addr"] = "127.0.0.1:" + f.read().strip()


def task():
    return "iso-" + uuid.uuid4().hex[:8]


class ThroughGateway(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]

    def test_gvisor_tenant_refused_process_template(self):
        pb = self.api.pb
        code, details, info, _ = self.api.status(
            "CreateSandbox", pb.CreateSandboxRequest(template="code-interpreter", user_id="u1",
                                                     task_id=task()), KEY_SECURE)
        self.assertEqual(code, C.PERMISSION_DENIED, details)
        self.assertIn("tenant 'secure' requires isolation gvisor; template 'code-interpreter' "
                      "is process", details)
        self.assertIsNotNone(info, details)
        self.assertEqual(info.get("metadata", {}).get("rule"), "tenants.secure.isolation", info)
        self.assertEqual(self.api.list(KEY_SECURE, "u1"), [])

    def test_unconstrained_tenant_reports_process(self):
        sb = self.api.create(KEY_OPEN, "u2", task())
        self.assertEqual(sb.isolation, "process")
        got = self.api.call("GetSandbox", self.api.pb.GetSandboxRequest(
            sandbox_id=sb.sandbox_id, user_id="u2"), KEY_OPEN)
        self.assertEqual(got.isolation, "process")
        listed = {s.sandbox_id: s.isolation for s in self.api.list(KEY_OPEN, "u2")}
        self.assertEqual(listed.get(sb.sandbox_id), "process", listed)
        self.api.kill(KEY_OPEN, "u2", sb.sandbox_id)

    def test_gvisor_tenant_gets_gvisor(self):
        sb = self.api.create(KEY_SECURE, "u4", task(), template=GVISOR)
        self.addCleanup(self.api.kill, KEY_SECURE, "u4", sb.sandbox_id)
        self.assertEqual(sb.isolation, "gvisor")
        got = self.api.call("GetSandbox", self.api.pb.GetSandboxRequest(
            sandbox_id=sb.sandbox_id, user_id="u4"), KEY_SECURE)
        self.assertEqual(got.isolation, "gvisor")
        listed = {s.sandbox_id: s.isolation for s in self.api.list(KEY_SECURE, "u4")}
        self.assertEqual(listed, {sb.sandbox_id: "gvisor"})
        out, err, error, _, _ = self.api.run(KEY_SECURE, "u4", sb.sandbox_id,
                                             "print(open('/proc/version').read())")
        self.assertIsNone(error, (out, err))
        # gVisor's Sentry reports this fixed kernel, never the host's
        self.assertIn("Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016", out)
        with open("/proc/version") as f:
            self.assertNotIn(f.read().strip(), out)

    def test_policy_claim_checked_by_host(self):
        """The policy says gvisor; the host's own config says process: refused."""
        pb = self.api.pb
        code, details, _, _ = self.api.status(
            "CreateSandbox", pb.CreateSandboxRequest(template=CLAIMED, user_id="u3",
                                                     task_id=task()), KEY_SECURE)
        self.assertEqual(code, C.FAILED_PRECONDITION, details)
        self.assertIn("template '%s' runs under isolation process on this host; the create "
                      "requires at least gvisor" % CLAIMED, details)
        self.assertEqual(self.api.list(KEY_SECURE, "u3"), [])
        # the unconstrained tenant's create on it is sent with min gvisor too
        # (the policy's word for the template): refused the same way
        code, details, _, _ = self.api.status(
            "CreateSandbox", pb.CreateSandboxRequest(template=CLAIMED, user_id="u3",
                                                     task_id=task()), KEY_OPEN)
        self.assertEqual(code, C.FAILED_PRECONDITION, details)


class DirectHostCall(unittest.TestCase):
    def setUp(self):
        self.hpb = S["hpb"]
        self.ch = grpc.insecure_channel(S["host_addr"])
        self.create = self.ch.unary_unary(
            "/sandgate.v1.Host/CreateSandbox",
            request_serializer=self.hpb.HostCreateRequest.SerializeToString,
            response_deserializer=self.hpb.HostSandbox.FromString)
        self.kill = self.ch.unary_unary(
            "/sandgate.v1.Host/KillSandbox",
            request_serializer=self.hpb.HostSandboxRef.SerializeToString,
            response_deserializer=lambda b: b)

    def tearDown(self):
        self.ch.close()

    def req(self, min_isolation, template="code-interpreter"):
        from sandgate.v1 import sandgate_pb2 as spb
        t = task()
        return self.hpb.HostCreateRequest(
            request=spb.CreateSandboxRequest(template=template, user_id="hu", task_id=t),
            owner=self.hpb.Owner(tenant_id="open", user_id="hu", task_id=t),
            limits=self.hpb.Limits(memory_bytes=256 << 20, cpu_millis=1000, pids=64,
                                   disk_bytes=64 << 20, idle_timeout_seconds=60,
                                   max_file_bytes=1 << 20),
            min_isolation=min_isolation)

    def status(self, req):
        try:
            return C.OK, "", self.create(req, timeout=60)
        except grpc.RpcError as e:
            return e.code(), e.details(), None

    def test_gvisor_on_process_template_refused(self):
        code, details, _ = self.status(self.req("gvisor"))
        self.assertEqual(code, C.FAILED_PRECONDITION, details)
        self.assertIn("template 'code-interpreter' runs under isolation process on this host; "
                      "the create requires at least gvisor", details)

    def test_unknown_min_isolation_invalid(self):
        for bad in ("vm", "GVISOR", "gvisor\u00e9"):
            code, details, _ = self.status(self.req(bad))
            self.assertEqual(code, C.INVALID_ARGUMENT, (bad, details))
            self.assertIn("min_isolation", details)

    def test_process_or_unset_creates(self):
        for ok in ("process", ""):
            code, details, hs = self.status(self.req(ok))
            self.assertEqual(code, C.OK, (ok, details))
            self.assertEqual(hs.sandbox.isolation, "process")
            self.kill(self.hpb.HostSandboxRef(sandbox_id=hs.sandbox.sandbox_id), timeout=30)


if __name__ == "__main__":
    unittest.main(verbosity=2)
