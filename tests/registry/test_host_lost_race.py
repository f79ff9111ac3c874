#!/usr/bin/python3
"""HOST_LOST while sends to the clients are in flight (gateway/forward.c).

One etcd member, one gateway and one host on loopback (sgreg.Fleet). Many
Exec streams write megabytes to clients that do not read, so the gateway
always has a send to each client pending; then the host's registration is
deleted in etcd, and the gateway's registry watch (its etcd thread) cancels
every stream to that host (gw_forward_host_lost) while the host is still
streaming. The clients then read (or cancel) so the pending sends complete
after the cancel. Rounds repeat with different timings.

Checks: every stream ends, none later than a few seconds after the cancel;
those cancelled say UNAVAILABLE/HOST_LOST; the gateway is still alive and
serves a new call once the host registers again; in an ASan build (tests/
run.sh asan) no use-after-free of the forward's state is reported (the
pending send's completion used to find it freed by the cancel's on_done).

Env: SANDGATE_BUILD. Run with /usr/bin/python3 as root.
"""
import os
import sys
import tempfile
import threading
import time
import unittest
import uuid

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tenancy"))
from sgreg import Etcd, Fleet, wait  # noqa: E402
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KEY = "sg-race-demo-0001"
TTL = 2
STREAMS = 12      # per round
ROUNDS = 4
POLICY = """version: 1
defaults:
  limits: {output_bytes: 64MiB, action_timeout: 60s}
  quotas: {sandboxes_per_tenant: 100, sandboxes_per_user: 50, concurrent_actions: 256,
           rate_per_s: 10000, rate_burst: 10000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
""" % sg.key_hash(KEY)
S = {}


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-lostrace-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["etcd"] = Etcd(tmp)
    unittest.addModuleCleanup(S["etcd"].stop)
    S["etcd"].start()
    f = S["f"] = Fleet(tmp, S["etcd"], POLICY, lease_ttl=TTL, pool="2")
    unittest.addModuleCleanup(f.stop)
    S["h"] = "lr" + uuid.uuid4().hex[:5]
    f.host(S["h"])
    S["api"] = sg.Api(tmp, f.gateway("g1"),
                      options=[("grpc.max_receive_message_length", 64 << 20)])
    wait(lambda: ("registry: host %s" % S["h"]) in f.log("g1"), "the gateway to see the host", 15)


def registered():
    f = S["f"]
    return f.etcd.ctl("get", f.prefix + "hosts/" + S["h"]).stdout.strip() != ""


def wait_usable(api, sid):
    """Until a call to sid goes through (the host registered again)."""
    def ok():
        try:
            out, _, ex, _ = api.exec(KEY, "u1", sid, "echo back", timeout_s=5)
            return out.strip() == "back"
        except grpc.RpcError:
            return False
    wait(ok, "the host to be usable again", 20)


class HostLostRace(unittest.TestCase):
    def test_cancel_many_streams_with_sends_in_flight(self):
        api, f = S["api"], S["f"]
        sids = [api.create(KEY, "u1", "race-%d-%s" % (i, uuid.uuid4().hex[:4])).sandbox_id
                for i in range(2)]
        lost = 0
        for rnd in range(ROUNDS):
            wait(registered, "the host's registration", 20)
            for sid in sids:
                wait_usable(api, sid)
            calls = []
            for i in range(STREAMS):
                req = api.pb.ExecRequest(sandbox_id=sids[i % len(sids)], user_id="u1",
                                         command="head -c 50000000 /dev/zero",
                                         timeout_seconds=60)
                calls.append(api.stub.Exec(req, metadata=api.md(KEY), timeout=60))
            # the host streams until the clients' windows and the gateway's
            # pending sends are full; half read a little, to vary the state
            time.sleep(0.5 + 0.1 * rnd)
            for c in calls[::2]:
                next(c)
            t0 = time.monotonic()
            r = f.etcd.ctl("del", f.prefix + "hosts/" + S["h"])
            self.assertEqual(r.returncode, 0, r.stderr)
            time.sleep(0.05 * rnd)
            results = [None] * len(calls)

            def drain(i):
                c = calls[i]
                try:
                    if i % 3 == 2:
                        c.cancel()   # the client goes away instead
                    for _ in c:
                        pass
                    results[i] = (C.OK, None)
                except grpc.RpcError as e:
                    info = api.error_info(e)
                    results[i] = (e.code(), info and info.get("reason"))
            ts = [threading.Thread(target=drain, args=(i,)) for i in range(len(calls))]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
            took = time.monotonic() - t0
            self.assertFalse(any(t.is_alive() for t in ts), "a stream did not end")
            self.assertLess(took, 15.0)
            for i, (code, reason) in enumerate(results):
                if i % 3 == 2:
                    continue   # cancelled by its client
                # a stream may have finished before the cancel reached it
                self.assertIn((code, reason), ((C.OK, None), (C.UNAVAILABLE, "HOST_LOST")),
                              "stream %d" % i)
                lost += (code, reason) == (C.UNAVAILABLE, "HOST_LOST")
            self.assertIsNone(f.gateways["g1"].poll(), f.log("g1")[-3000:])
        print("%d streams cancelled HOST_LOST with sends in flight over %d rounds"
              % (lost, ROUNDS))
        self.assertGreater(lost, ROUNDS)
        # the gateway still serves once the host registers again
        wait(registered, "the host's registration", 20)
        wait_usable(api, sids[0])
        self.assertIsNone(f.gateways["g1"].poll(), f.log("g1")[-3000:])
        for sid in sids:
            api.kill(KEY, "u1", sid)


if __name__ == "__main__":
    unittest.main(verbosity=2)
