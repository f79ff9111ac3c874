#!/usr/bin/python3
"""Request ids, traceparent and JSON logs through a real gateway and host.

Starts a host + gateway with deploy/local/run.sh at --log-level debug
(SANDGATE_LOG_LEVEL), makes calls with and without `x-request-id` and a W3C
`traceparent`, and checks: the id comes back in the `x-request-id` trailer of
successes and failures alike; a client's acceptable id is kept, a bad one is
replaced by 32 hex digits; the same id is in the gateway's audit line, in the
gateway's log and in the host's access log (so it crossed to the host in
metadata), with the traceparent passed through; every line either daemon
logged is one JSON object with a time, a level and a message.

Env: SANDGATE_BUILD (build dir with bin/). Run with /usr/bin/python3.
"""
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tenancy"))
import sgtenancy as sg  # noqa: E402

REPO = sg.REPO
KEY = "sg-demo-key-0001"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
S = {}


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-reqid-")
    unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    with open(os.path.join(REPO, "deploy", "local", "policy.yaml")) as f:
        d = sg.Daemons(tmp, f.read(), env={"SANDGATE_LOG_LEVEL": "debug"})
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["d"] = d
    S["addr"] = d.addr
    S["pb"] = sg.stubs(tmp)[0]
    S["channel"] = grpc.insecure_channel(S["addr"])


def unary(method, req, resp_cls, md):
    fn = S["channel"].unary_unary("/sandgate.v1.Sandboxes/" + method,
                                  request_serializer=req.SerializeToString,
                                  response_deserializer=resp_cls.FromString)
    return fn.with_call(req, metadata=md, timeout=30)


def trailer_id(call_or_err):
    md = dict(call_or_err.trailing_metadata() or ())
    return md.get("x-request-id")


def log_lines(name):
    return S["d"].read(name).splitlines()


def wait_for(pred, what, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


class RequestIds(unittest.TestCase):
    def test_client_id_kept_and_crosses_to_the_host(self):
        pb = S["pb"]
        rid = "req-" + uuid.uuid4().hex[:12]
        md = (("authorization", "Bearer " + KEY), ("x-request-id", rid),
              ("traceparent", TRACEPARENT))
        sb, call = unary("CreateSandbox", pb.CreateSandboxRequest(
            template="code-interpreter", user_id="rid-user", task_id="t-" + rid), pb.Sandbox, md)
        self.assertEqual(trailer_id(call), rid)
        unary("KillSandbox", pb.KillSandboxRequest(sandbox_id=sb.sandbox_id, user_id="rid-user"),
              pb.KillSandboxResponse, md)

        def audited():
            return any(json.loads(l).get("request_id") == rid for l in log_lines("audit.log"))
        wait_for(audited, "the audit line with the request id")

        def in_log(name):
            for l in log_lines(name):
                if not l.startswith("{"):
                    continue
                j = json.loads(l)
                if j.get("request_id") == rid and j.get("traceparent") == TRACEPARENT:
                    return True
            return False
        wait_for(lambda: in_log("gateway.log"), "the gateway's log line")
        wait_for(lambda: in_log("host.log"), "the host's access log line")
        host_calls = [json.loads(l)["msg"] for l in log_lines("host.log")
                      if l.startswith("{") and json.loads(l).get("request_id") == rid]
        self.assertTrue(any("/sandgate.v1.Host/CreateSandbox OK" in m for m in host_calls),
                        host_calls)

    def test_id_made_when_absent_or_bad_and_sent_on_errors(self):
        pb = S["pb"]
        for md in ((("authorization", "Bearer " + KEY),),
                   (("authorization", "Bearer " + KEY), ("x-request-id", "has spaces in it")),
                   (("authorization", "Bearer " + KEY), ("x-request-id", "x" * 65))):
            _, call = unary("ListSandboxes", pb.ListSandboxesRequest(user_id="rid-user"),
                            pb.ListSandboxesResponse, md)
            self.assertRegex(trailer_id(call), r"^[0-9a-f]{32}$", md)
        # a failure carries it too, the client's own kept
        with self.assertRaises(grpc.RpcError) as cm:
            unary("ListSandboxes", pb.ListSandboxesRequest(user_id="rid-user"),
                  pb.ListSandboxesResponse, (("authorization", "Bearer wrong"),
                                             ("x-request-id", "fail-1")))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(trailer_id(cm.exception), "fail-1")
        # two calls never share a made-up id
        ids = {trailer_id(unary("ListSandboxes", pb.ListSandboxesRequest(user_id="rid-user"),
                                pb.ListSandboxesResponse,
                                (("authorization", "Bearer " + KEY),))[1]) for _ in range(20)}
        self.assertEqual(len(ids), 20)

    def test_bad_traceparent_is_not_passed_on(self):
        pb = S["pb"]
        rid = "badtp-" + uuid.uuid4().hex[:8]
        md = (("authorization", "Bearer " + KEY), ("x-request-id", rid),
              ("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"))
        unary("ListSandboxes", pb.ListSandboxesRequest(user_id="rid-user"),
              pb.ListSandboxesResponse, md)
        wait_for(lambda: any(l.startswith("{") and json.loads(l).get("request_id") == rid
                             for l in log_lines("host.log")), "the host's line")
        for name in ("gateway.log", "host.log"):
            for l in log_lines(name):
                if l.startswith("{") and json.loads(l).get("request_id") == rid:
                    self.assertNotIn("traceparent", json.loads(l))


class JsonLogs(unittest.TestCase):
    def test_every_line_is_json_with_a_level(self):
        for name in ("gateway.log", "host.log"):
            lines = log_lines(name)
            self.assertGreater(len(lines), 0, name)
            for l in lines:
                j = json.loads(l)   # raises on a line that is not JSON
                self.assertIn(j["level"], ("debug", "info", "warn", "error"), l)
                self.assertRegex(j["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
                self.assertTrue(j["msg"], l)
                self.assertIn(j["daemon"], ("sandgate", "sandgate-host"))



if __name__ == "__main__":
    unittest.main(verbosity=2)
