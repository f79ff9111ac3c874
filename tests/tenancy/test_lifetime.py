#!/usr/bin/python3
"""Sandbox lifetime (issue 5): TTL capped by the policy's ttl_max (ask 999999
→ expires_at - created_at ≤ ttl_max); ExtendSandbox within the cap;
idle_timeout 2s → the sandbox is killed after ~3 s without a call and later
calls get NOT_FOUND; a sandbox past its TTL → NOT_FOUND.
"""
import os
import sys
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KL, KI = "lt-capped-key-1", "lt-idle-key-2"
TTL_MAX = 120

POLICY = """version: 1
templates:
  - name: code-interpreter
tenants:
  - id: capped
    api_keys: [%s]
    templates: [code-interpreter]
    limits: {ttl: 60s, ttl_max: %ds, idle_timeout: 300s}
  - id: idle
    api_keys: [%s]
    templates: [code-interpreter]
    limits: {idle_timeout: 2s}
""" % (sg.key_hash(KL), TTL_MAX, sg.key_hash(KI))

S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-lifetime-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY)
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(S["api"].close)


class Lifetime(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]
        self.pb = self.api.pb
        self.u = uuid.uuid4().hex[:6]

    def get(self, key, sid):
        return self.api.status("GetSandbox", self.pb.GetSandboxRequest(sandbox_id=sid,
                                                                      user_id="lu"), key)

    def test_ttl_capped_by_ttl_max(self):
        sb = self.api.create(KL, "lu", "cap-" + self.u, ttl_seconds=999999)
        self.addCleanup(self.api.kill, KL, "lu", sb.sandbox_id)
        life = (sb.expires_at - sb.created_at) / 1000.0
        sys.stderr.write("\nasked ttl 999999 s, got %.1f s (ttl_max %d s)\n" % (life, TTL_MAX))
        self.assertLessEqual(life, TTL_MAX + 1)
        self.assertGreaterEqual(life, TTL_MAX - 2)
        # no ask: the policy's ttl (60 s)
        d = self.api.create(KL, "lu", "dflt-" + self.u)
        self.addCleanup(self.api.kill, KL, "lu", d.sandbox_id)
        self.assertAlmostEqual((d.expires_at - d.created_at) / 1000.0, 60, delta=2)
        # a smaller ask is honoured
        s = self.api.create(KL, "lu", "small-" + self.u, ttl_seconds=30)
        self.addCleanup(self.api.kill, KL, "lu", s.sandbox_id)
        self.assertAlmostEqual((s.expires_at - s.created_at) / 1000.0, 30, delta=2)

    def test_extend_within_the_cap(self):
        sb = self.api.create(KL, "lu", "ext-" + self.u, ttl_seconds=20)
        self.addCleanup(self.api.kill, KL, "lu", sb.sandbox_id)
        now_ms = time.time() * 1000
        e = self.api.call("ExtendSandbox", self.pb.ExtendSandboxRequest(
            sandbox_id=sb.sandbox_id, user_id="lu", ttl_seconds=100), KL)
        self.assertAlmostEqual((e.expires_at - now_ms) / 1000.0, 100, delta=3)
        now_ms = time.time() * 1000
        e = self.api.call("ExtendSandbox", self.pb.ExtendSandboxRequest(
            sandbox_id=sb.sandbox_id, user_id="lu", ttl_seconds=999999), KL)
        got = (e.expires_at - now_ms) / 1000.0
        sys.stderr.write("\nextend asked 999999 s, got %.1f s from now (ttl_max %d s)\n"
                         % (got, TTL_MAX))
        self.assertLessEqual(got, TTL_MAX + 2)
        self.assertGreaterEqual(got, TTL_MAX - 3)
        # Get agrees with the extension
        g = self.get(KL, sb.sandbox_id)[3]
        self.assertEqual(g.expires_at, e.expires_at)

    def test_idle_timeout_kills(self):
        sb = self.api.create(KI, "lu", "idle-" + self.u)
        sid = sb.sandbox_id
        # calls keep it alive: 4 s of activity, a call every 0.5 s
        t_end = time.monotonic() + 4
        while time.monotonic() < t_end:
            out, _, err, _, _ = self.api.run(KI, "lu", sid, "print(1)")
            self.assertEqual(out, "1\n", "killed while in use")
            t0 = time.monotonic()   # the last call ended here
            time.sleep(0.5)
        # then idle: gone after ~3 s (idle_timeout 2 s + the host's sweep)
        gone = sg.wait_for(lambda: self.get(KI, sid)[0] == C.NOT_FOUND, timeout=8, step=0.25)
        waited = time.monotonic() - t0
        sys.stderr.write("\nidle_timeout 2 s: NOT_FOUND after %.1f s idle\n" % waited)
        self.assertTrue(gone, "sandbox still there %.1f s after its idle timeout" % waited)
        self.assertGreaterEqual(waited, 1.5, "killed before its idle timeout")
        for rpc, req in (("RunCode", self.pb.RunCodeRequest(sandbox_id=sid, user_id="lu",
                                                            code="1")),
                         ("Exec", self.pb.ExecRequest(sandbox_id=sid, user_id="lu",
                                                      command="true")),
                         ("ExtendSandbox", self.pb.ExtendSandboxRequest(sandbox_id=sid,
                                                                        user_id="lu"))):
            c, det, _, _ = self.api.status(rpc, req, KI)
            self.assertEqual(c, C.NOT_FOUND, "%s: %s" % (rpc, det))
        self.assertNotIn(sid, [s.sandbox_id for s in self.api.list(KI, "lu")])
        # Teardown goes on after the sandbox leaves the table (the host's
        # tick removes the cgroup once its processes are gone): promptly.
        if S["d"].cgroups() is not None:
            gone_cg = sg.wait_for(lambda: sid not in S["d"].cgroups(), timeout=5, step=0.1)
            self.assertTrue(gone_cg, "its cgroup is still there 5 s after NOT_FOUND")

    def test_expired_is_not_found(self):
        sb = self.api.create(KL, "lu", "exp-" + self.u, ttl_seconds=2)
        sid = sb.sandbox_id
        self.assertEqual(self.get(KL, sid)[0], C.OK)
        t0 = time.monotonic()
        gone = sg.wait_for(lambda: self.get(KL, sid)[0] == C.NOT_FOUND, timeout=8, step=0.25)
        sys.stderr.write("\nttl 2 s: NOT_FOUND %.1f s after create\n" % (time.monotonic() - t0))
        self.assertTrue(gone, "sandbox alive past its TTL")
        c, det, _, _ = self.api.status("RunCode", self.pb.RunCodeRequest(
            sandbox_id=sid, user_id="lu", code="1"), KL)
        self.assertEqual(c, C.NOT_FOUND, det)
        # a create for the same task now makes a new sandbox
        again = self.api.create(KL, "lu", "exp-" + self.u)
        self.addCleanup(self.api.kill, KL, "lu", again.sandbox_id)
        self.assertNotEqual(again.sandbox_id, sid)


if __name__ == "__main__":
    unittest.main(verbosity=2)
