#!/usr/bin/python3
"""Policy hot reload under traffic (issue 4): 100 reloads alternating a valid
and an invalid policy file (atomic write + SIGHUP to the gateway PID from the
run dir's gateway.pid) while threads run RunCode continuously.

- no RunCode fails (every call during the reloads must end OK);
- the valid versions alternate tenant demo's API key (A, then B): after each
  valid reload exactly the new key works; after each invalid one the previous
  key still works and the other does not (keep-last-good);
- the gateway logs each outcome, and the audit log lines written after each
  reload carry the hash of the policy then live (sha256 of the valid file).
"""
import hashlib
import json
import os
import signal
import sys
import threading
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KA, KB, KR = "rl-key-a", "rl-key-b", "rl-runner-key"
RELOADS = 100
THREADS = 3


def health_policy_hash(channel):
    """grpc.health.v1.Health/Check with an empty request (an empty
    HealthCheckRequest encodes to no bytes); the gateway puts the live
    policy's hash in the trailer sandgate-policy-sha256."""
    check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
    _, call = check.with_call(b"", timeout=10)
    return dict(call.trailing_metadata() or ()).get("sandgate-policy-sha256")


def policy(demo_key):
    return """version: 1
defaults:
  quotas: {rate_per_s: 100000, rate_burst: 100000, concurrent_actions: 64}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
  - id: runner
    api_keys: [%s]
    templates: [code-interpreter]
""" % (sg.key_hash(demo_key), sg.key_hash(KR))


def invalid(i):
    """Each invalid file is wrong in a different way; all would, if loaded,
    lock the runner out (so a wrongly loaded one also fails RunCode)."""
    bad = [
        "version: 1\ntenants:\n  - id: demo\n    api_keyz: []\n",          # unknown key
        "version: 1\ntenants: [\n",                                        # YAML syntax
        "version: 1\ntenants:\n  - id: demo\n    api_keys: [not-a-hash]\n",  # bad value
        "version: 2\n",                                                   # bad version
        "",                                                               # empty
    ]
    return bad[i % len(bad)]


S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-reload-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, policy(KA))
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(S["api"].close)


class Reload(unittest.TestCase):
    def test_100_reloads_under_runcode_traffic(self):
        api, d = S["api"], S["d"]
        pb = api.pb
        u = uuid.uuid4().hex[:6]
        sids = [api.create(KR, "r", "run-%d-%s" % (i, u)).sandbox_id for i in range(THREADS)]
        for s in sids:
            self.addCleanup(api.kill, KR, "r", s)
        demo_task = "audit-" + u
        demo_sid = api.create(KA, "da", demo_task).sandbox_id

        def kill_demo():
            for k in (KA, KB):
                if api.status("KillSandbox", pb.KillSandboxRequest(sandbox_id=demo_sid,
                                                                   user_id="da"), k)[0] == C.OK:
                    return
        self.addCleanup(kill_demo)
        stop = threading.Event()
        stats = {"ok": 0, "fail": []}
        lock = threading.Lock()

        def traffic(sid):
            ch = sg.Api(S["tmp"], d.addr)   # own channel per thread
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    out, _, err, end, _ = ch.run(KR, "r", sid, "x = %d\nprint(x + 1)" % n)
                    good = out == "%d\n" % (n + 1) and err is None and end is not None
                    with lock:
                        if good:
                            stats["ok"] += 1
                        else:
                            stats["fail"].append(("bad output", out, err))
                except grpc.RpcError as e:
                    with lock:
                        stats["fail"].append((e.code().name, e.details()))
            ch.close()

        threads = [threading.Thread(target=traffic, args=(s,)) for s in sids]
        for t in threads:
            t.start()
        time.sleep(0.5)
        pid = d.gateway_pid()
        live_key, live_hash = KA, hashlib.sha256(policy(KA).encode()).hexdigest()
        mismatches = []
        t0 = time.monotonic()
        try:
            for i in range(RELOADS):
                log_before = d.read("gateway.log")
                if i % 2 == 0:   # valid: swap demo's key
                    new_key = KB if live_key == KA else KA
                    text = policy(new_key)
                    want_line = "policy reloaded, sha256 " + hashlib.sha256(text.encode()).hexdigest()
                else:
                    text = invalid(i // 2)
                    want_line = "policy reload rejected; keeping sha256 " + live_hash
                sg.write_atomic(d.policy_path, text)
                os.kill(pid, signal.SIGHUP)
                seen = sg.wait_for(lambda: want_line in d.read("gateway.log")[len(log_before):],
                                   timeout=5, step=0.01)
                self.assertTrue(seen, "reload %d: no '%s' in the gateway log" % (i, want_line))
                if i % 2 == 0:
                    live_key = new_key
                    live_hash = hashlib.sha256(text.encode()).hexdigest()
                dead_key = KB if live_key == KA else KA
                # exactly the live policy's key works
                c_live = api.status("ListSandboxes", pb.ListSandboxesRequest(user_id="da"),
                                    live_key)[0]
                c_dead = api.status("ListSandboxes", pb.ListSandboxesRequest(user_id="da"),
                                    dead_key)[0]
                if (c_live, c_dead) != (C.OK, C.UNAUTHENTICATED):
                    mismatches.append((i, "valid" if i % 2 == 0 else "invalid",
                                       c_live.name, c_dead.name))
                # an audited decision now carries the live hash
                # RunCode traffic writes audit lines meanwhile: cut at whole lines
                before_text = d.read("audit.log")
                audit_len = before_text.rfind("\n") + 1
                api.create(live_key, "da", demo_task)
                fresh = d.read("audit.log")[audit_len:]
                fresh = fresh[:fresh.rfind("\n") + 1]   # a line still being written is not read
                lines = [json.loads(x) for x in fresh.splitlines() if x]
                creates = [x for x in lines if x.get("action") == "create" and x.get("user") == "da"]
                if not creates or creates[-1].get("policy") != live_hash:
                    mismatches.append((i, "audit", creates[-1:] if creates else "no line"))
                # health reports the live hash (trailing metadata of Check)
                shown = health_policy_hash(api.channel)
                if shown != live_hash:
                    mismatches.append((i, "health", shown))
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        elapsed = time.monotonic() - t0
        sys.stderr.write("\n%d reloads in %.1f s; %d RunCode OK during them, %d failed: %s\n"
                         % (RELOADS, elapsed, stats["ok"], len(stats["fail"]),
                            stats["fail"][:5]))
        self.assertEqual(mismatches, [], "key/audit behaviour after a reload was wrong")
        self.assertEqual(stats["fail"], [], "RunCode failed during reloads")
        self.assertGreater(stats["ok"], RELOADS, "too little traffic to mean anything")
        # the last state is as expected
        self.assertEqual(api.status("GetSandbox", pb.GetSandboxRequest(
            sandbox_id=demo_sid, user_id="da"), live_key)[0], C.OK)


if __name__ == "__main__":
    unittest.main(verbosity=2)
