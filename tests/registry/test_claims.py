#!/usr/bin/python3
"""etcd mode across replicas: task claims, exact quotas, lost hosts.

One etcd member, two gateways and two hosts on loopback (sgreg.Fleet),
lease ttl 2 s. Checks, in order:
  1. 20 racing creates of one task through both gateways -> one sandbox,
     one claim, one record;
  2. a tenant with a 3-sandbox quota: 12 racing creates of different tasks
     through both gateways -> exactly 3 succeed, the rest RESOURCE_EXHAUSTED
     QUOTA_EXCEEDED; a kill frees a slot for the other gateway at once;
  3. a kill releases the task's claim, record and quota key;
  4. etcd stopped: running sandboxes answer through both gateways, creates
     refuse UNAVAILABLE/REGISTRY_UNAVAILABLE, a kill works; etcd back:
     creates work, the kill's keys are released, no sandbox was lost;
  5. a host cut off (SIGSTOP past its lease): calls to its sandbox fail fast
     UNAVAILABLE/HOST_LOST, the task is created again on the other host and
     says which sandbox was lost; when the host comes back it kills that
     orphan, so the task's sandbox is reachable once;
  6. a host killed -9: HOST_LOST, the task again elsewhere; the host
     restarted: the old id is SANDBOX_LOST, nothing of it left in etcd;
  7. placement by load: 12 new tasks through both gateways land on both
     hosts, neither taking more than 9;
  8. an Extend through one gateway rewrites the record's expiry (same
     lease, every other field as the create wrote it); a shorter one does
     not shorten it; a kill still removes the record;
  9. ListSandboxes reads the records, not the hosts: with every host
     stopped, pages of 2 walk all 5 of a user's sandboxes (created through
     both gateways) at once, with what the host reported at create, a label
     filter and another user's empty list answer too; an Extend shows in
     the list, a kill leaves it.

Env: SANDGATE_BUILD. Run with /usr/bin/python3 as root.
"""
import os
import signal
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
KD, KQ = "sg-claims-demo-0001", "sg-claims-quota-0001"
TTL = 2
POLICY = """version: 1
defaults:
  quotas: {sandboxes_per_tenant: 100, sandboxes_per_user: 50, concurrent_actions: 64,
           rate_per_s: 10000, rate_burst: 10000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
  - id: quota
    api_keys: [%s]
    templates: [code-interpreter]
    quotas: {sandboxes_per_tenant: 3, sandboxes_per_user: 3}
""" % (sg.key_hash(KD), sg.key_hash(KQ))
S = {}


def status(api, fn):
    try:
        return C.OK, fn(), None
    except grpc.RpcError as e:
        return e.code(), e.details(), api.error_info(e)


def host_of(sid):
    return sid.split("-", 1)[0]


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-claims-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["etcd"] = Etcd(tmp)
    unittest.addModuleCleanup(S["etcd"].stop)
    S["etcd"].start()
    f = S["f"] = Fleet(tmp, S["etcd"], POLICY, lease_ttl=TTL)
    unittest.addModuleCleanup(f.stop)
    S["ha"], S["hb"] = "ca" + uuid.uuid4().hex[:5], "cb" + uuid.uuid4().hex[:5]
    f.host(S["ha"])
    f.host(S["hb"])
    S["g1"] = sg.Api(tmp, f.gateway("g1"))
    S["g2"] = sg.Api(tmp, f.gateway("g2"))
    # both gateways see both hosts
    for g in ("g1", "g2"):
        wait(lambda: f.log(g).count("registry: host c") >= 2, "%s to see the hosts" % g, 15)


class Claims(unittest.TestCase):
    def api(self, i):
        return S["g1"] if i % 2 == 0 else S["g2"]

    def create(self, api, key, user, task):
        return status(api, lambda: api.create(key, user, task))

    def test_1_racing_creates_of_one_task_get_one_sandbox(self):
        task = "race-" + uuid.uuid4().hex[:6]
        out = [None] * 20
        go = threading.Event()

        def one(i):
            go.wait()
            out[i] = self.create(self.api(i), KD, "u1", task)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(20)]
        for t in ts:
            t.start()
        go.set()
        for t in ts:
            t.join()
        for code, resp, info in out:
            self.assertEqual(code, C.OK, (resp, info))
        ids = {resp.sandbox_id for _, resp, _ in out}
        self.assertEqual(len(ids), 1, ids)
        sid = ids.pop()
        f = S["f"]
        self.assertEqual(len([k for k in f.keys("sandboxes") if k.endswith(sid)]), 1)
        self.assertEqual(len([k for k in f.keys("live") if k.endswith(sid)]), 1)
        # both gateways route and act on it
        for api in (S["g1"], S["g2"]):
            o, _, err, _, _ = api.run(KD, "u1", sid, "print(6*7)")
            self.assertEqual(o.strip(), "42", err)
        S["race_sid"] = sid

    def test_2_quota_exact_across_gateways(self):
        out = [None] * 12
        go = threading.Event()

        def one(i):
            go.wait()
            out[i] = self.create(self.api(i), KQ, "qu", "q-%d-%s" % (i, uuid.uuid4().hex[:4]))
        ts = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in ts:
            t.start()
        go.set()
        for t in ts:
            t.join()
        ok = [r for c, r, _ in out if c == C.OK]
        refused = [(c, i) for c, _, i in out if c != C.OK]
        self.assertEqual(len(ok), 3, out)
        for c, info in refused:
            self.assertEqual(c, C.RESOURCE_EXHAUSTED, info)
            self.assertEqual(info["reason"], "QUOTA_EXCEEDED")
        # a kill through one gateway frees the slot for the other at once
        S["g1"].kill(KQ, "qu", ok[0].sandbox_id)
        code, resp, info = wait_create(S["g2"], KQ, "qu", "q-after-" + uuid.uuid4().hex[:4])
        self.assertEqual(code, C.OK, info)
        code, _, info = self.create(S["g1"], KQ, "qu", "q-over-" + uuid.uuid4().hex[:4])
        self.assertEqual(code, C.RESOURCE_EXHAUSTED, info)
        for r in ok[1:] + [resp]:
            S["g1"].kill(KQ, "qu", r.sandbox_id)

    def test_3_kill_releases_the_claim(self):
        f = S["f"]
        task = "kill-" + uuid.uuid4().hex[:6]
        sid = S["g1"].create(KD, "u3", task).sandbox_id
        before = len(f.keys("tasks"))
        S["g2"].kill(KD, "u3", sid)
        wait(lambda: not [k for k in f.keys("sandboxes") if k.endswith(sid)],
             "the record to go", 10)
        self.assertFalse([k for k in f.keys("live") if k.endswith(sid)])
        self.assertEqual(len(f.keys("tasks")), before - 1)
        code, resp, info = wait_create(S["g2"], KD, "u3", task)
        self.assertEqual(code, C.OK, info)
        self.assertNotEqual(resp.sandbox_id, sid)
        self.assertEqual(resp.lost_sandbox_id, "")   # killed by its owner, not lost
        S["g1"].kill(KD, "u3", resp.sandbox_id)

    def test_4_etcd_down_running_sandboxes_answer(self):
        f = S["f"]
        a = S["g1"].create(KD, "u4", "e-a-" + uuid.uuid4().hex[:4]).sandbox_id
        b = S["g1"].create(KD, "u4", "e-b-" + uuid.uuid4().hex[:4]).sandbox_id
        S["etcd"].stop()
        try:
            t0 = time.monotonic()
            code, _, info = self.create(S["g2"], KD, "u4", "e-new-" + uuid.uuid4().hex[:4])
            took = time.monotonic() - t0
            self.assertEqual(code, C.UNAVAILABLE, info)
            self.assertEqual(info["reason"], "REGISTRY_UNAVAILABLE")
            self.assertNotIn("127.0.0.1", info["message"])
            self.assertLess(took, 5.0)
            print("create refused %.2f s after etcd stopped" % took)
            time.sleep(TTL + 1)   # past every lease's ttl: hosts' keepers give up
            for api in (S["g1"], S["g2"]):
                o, _, err, _, _ = api.run(KD, "u4", a, "print('up')")
                self.assertEqual(o.strip(), "up", err)
            S["g2"].kill(KD, "u4", b)
        finally:
            S["etcd"].start()
        code, resp, info = wait_create(S["g2"], KD, "u4", "e-back-" + uuid.uuid4().hex[:4], 20)
        self.assertEqual(code, C.OK, info)
        wait(lambda: not [k for k in f.keys("sandboxes") if k.endswith(b)],
             "the kill done while etcd was down to be released", 15)
        self.assertTrue([k for k in f.keys("sandboxes") if k.endswith(a)])
        time.sleep(TTL + 1)   # nothing was taken for lost: a still lives and answers
        o, _, err, _, _ = S["g2"].run(KD, "u4", a, "print('still')")
        self.assertEqual(o.strip(), "still", err)
        for sid in (a, resp.sandbox_id):
            S["g1"].kill(KD, "u4", sid)

    def lose_host(self, how):
        """A sandbox on one host, that host lost (how: 'stop' or 'kill');
        returns (old id, its host, the new sandbox)."""
        f = S["f"]
        task = how + "-" + uuid.uuid4().hex[:6]
        old = S["g1"].create(KD, "u5", task).sandbox_id
        h = host_of(old)
        p = f.hosts[h]
        # a RunCode in flight when the host is lost ends with HOST_LOST as
        # soon as the gateway sees the lease go, not at its deadline
        flight = {}

        def long_run():
            t = time.monotonic()
            flight["r"] = status(S["g2"], lambda: S["g2"].run(KD, "u5", old,
                                                                "import time; time.sleep(60)",
                                                                timeout_s=60))
            flight["t"] = time.monotonic() - t
        th = threading.Thread(target=long_run)
        th.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        if how == "stop":
            os.kill(p.pid, signal.SIGSTOP)
        else:
            f.kill(h, signal.SIGKILL)
        # a unary call sent to the cut-off host before anyone knew (one the
        # gateway forwards: GetSandbox may answer from its cache): it too
        # ends HOST_LOST when the lease goes, not at its 30 s deadline
        unary = {}

        def long_get():
            t = time.monotonic()
            unary["r"] = status(S["g1"], lambda: S["g1"].call(
                "ListContexts", S["g1"].pb.ListContextsRequest(sandbox_id=old, user_id="u5"),
                KD, timeout=30))
            unary["t"] = time.monotonic() - t
        tu = threading.Thread(target=long_get)
        tu.start()

        def lost():
            # a short deadline: a call sent before the gateway knew may wait
            # on the stopped host (in-flight calls end at their deadline)
            c, _, info = status(S["g2"], lambda: get(S["g2"], old, 1))
            return c == C.UNAVAILABLE and info and info.get("reason") == "HOST_LOST"
        wait(lost, "HOST_LOST for the lost host's sandbox", TTL + 5)
        t = time.monotonic() - t0
        print("%s: HOST_LOST %.2f s after the host was lost (lease ttl %d s)" % (how, t, TTL))
        th.join(TTL + 10)
        self.assertFalse(th.is_alive(), "the RunCode in flight still waits")
        c, _, info = flight["r"]
        self.assertEqual(c, C.UNAVAILABLE, info)
        if how == "stop":   # no TCP reset: only the lease's end can end it
            self.assertEqual(info["reason"], "HOST_LOST")
        self.assertLess(flight["t"], TTL + 4.0)
        print("%s: the RunCode in flight ended %.2f s after it started (%s)"
              % (how, flight["t"], info["reason"]))
        tu.join(TTL + 10)
        self.assertFalse(tu.is_alive(), "the ListContexts in flight still waits")
        c, _, info = unary["r"]
        if how == "stop":
            self.assertEqual((c, info and info["reason"]), (C.UNAVAILABLE, "HOST_LOST"))
            self.assertLess(unary["t"], TTL + 4.0)
            print("stop: the ListContexts in flight ended %.2f s after it was sent (HOST_LOST)"
                  % unary["t"])
        t1 = time.monotonic()
        c, _, info = status(S["g1"], lambda: S["g1"].run(KD, "u5", old, "1"))
        self.assertEqual((c, info["reason"]), (C.UNAVAILABLE, "HOST_LOST"))
        self.assertLess(time.monotonic() - t1, 1.0)   # fast, not a deadline
        code, new, info = wait_create(S["g2"], KD, "u5", task, 10)
        self.assertEqual(code, C.OK, info)
        self.assertNotEqual(host_of(new.sandbox_id), h)
        self.assertEqual(new.lost_sandbox_id, old)
        return old, h, new

    def test_5_cut_off_host_orphans_are_killed(self):
        f = S["f"]
        try:
            old, h, new = self.lose_host("stop")
        finally:
            for p in f.hosts.values():
                os.kill(p.pid, signal.SIGCONT)
        wait(lambda: ("sandbox %s: its registry record ended" % old) in f.log(h),
             "the returned host to kill its orphan", 20)
        wait(lambda: S["f"].etcd.ctl("get", f.prefix + "hosts/" + h).stdout.strip() != "",
             "the host to register again", 10)
        wait(lambda: status(S["g1"], lambda: S["g1"].run(KD, "u5", old, "1"))[0] == C.NOT_FOUND,
             "the orphan's id to be gone", 10)
        o, _, err, _, _ = S["g1"].run(KD, "u5", new.sandbox_id, "print('one')")
        self.assertEqual(o.strip(), "one", err)
        S["g1"].kill(KD, "u5", new.sandbox_id)

    def test_6_killed_host_restarts(self):
        f = S["f"]
        old, h, new = self.lose_host("kill")
        f.host(h)
        last = []

        def lost_answer():
            c, d, info = status(S["g1"], lambda: get(S["g1"], old, 5))
            last[:] = [c, d, info]
            return c == C.NOT_FOUND and info and info.get("reason") == "SANDBOX_LOST"
        try:
            wait(lost_answer, "SANDBOX_LOST from the restarted host", 20)
        except AssertionError:
            raise AssertionError("last answer: %r" % last)
        self.assertFalse([k for k in f.keys("sandboxes") if old in k])
        self.assertFalse([k for k in f.keys("live") if old in k])
        S["g1"].kill(KD, "u5", new.sandbox_id)


class Placement(unittest.TestCase):
    def test_7_new_tasks_spread_by_load(self):
        per = {}
        made = []
        for i in range(12):
            api = S["g1"] if i % 2 else S["g2"]
            sid = api.create(KD, "u7", "spread-%d-%s" % (i, uuid.uuid4().hex[:4])).sandbox_id
            made.append((api, sid))
            per[host_of(sid)] = per.get(host_of(sid), 0) + 1
        print("12 tasks over the hosts: %s" % per)
        self.assertEqual(set(per), {S["ha"], S["hb"]})
        self.assertLessEqual(max(per.values()), 9)
        for api, sid in made:
            api.kill(KD, "u7", sid)


def record(f, sid):
    """The sandbox's record in etcd: (decoded JSON, lease id), or (None, 0)."""
    import base64
    import json
    r = f.etcd.ctl("get", f.prefix + "sandboxes/" + sid, "-w", "json")
    kvs = json.loads(r.stdout).get("kvs") or []
    if not kvs:
        return None, 0
    return json.loads(base64.b64decode(kvs[0]["value"])), kvs[0].get("lease", 0)


class Records(unittest.TestCase):
    def test_8_extend_rewrites_the_records_expiry(self):
        f = S["f"]
        sid = S["g1"].create(KD, "u8", "ext-" + uuid.uuid4().hex[:6], ttl_seconds=60).sandbox_id
        rec, lease = record(f, sid)
        self.assertIsNotNone(rec)
        self.assertNotEqual(lease, 0)
        # through the other gateway: the record follows whoever extended
        resp = S["g2"].call("ExtendSandbox", S["g2"].pb.ExtendSandboxRequest(
            sandbox_id=sid, user_id="u8", ttl_seconds=1800), KD)
        self.assertGreater(resp.expires_at, rec["expires_at"] + 1000 * 1000)
        t = wait(lambda: record(f, sid)[0]["expires_at"] == resp.expires_at,
                 "the record's expiry to follow the extend", 5)
        print("record's expiry rewritten %.2f s after the extend" % t)
        rec2, lease2 = record(f, sid)
        self.assertEqual(lease2, lease)   # still bound to the host's lease
        self.assertEqual({k: v for k, v in rec2.items() if k != "expires_at"},
                         {k: v for k, v in rec.items() if k != "expires_at"})
        got = S["g1"].call("GetSandbox", S["g1"].pb.GetSandboxRequest(sandbox_id=sid,
                                                                      user_id="u8"), KD)
        self.assertEqual(got.expires_at, rec2["expires_at"])
        # a shorter extend never shortens (the host keeps the later expiry)
        S["g1"].call("ExtendSandbox", S["g1"].pb.ExtendSandboxRequest(
            sandbox_id=sid, user_id="u8", ttl_seconds=30), KD)
        time.sleep(0.5)
        self.assertEqual(record(f, sid)[0]["expires_at"], resp.expires_at)
        S["g1"].kill(KD, "u8", sid)
        wait(lambda: record(f, sid)[0] is None, "the kill's release", 10)
        time.sleep(0.5)
        self.assertIsNone(record(f, sid)[0])   # the extend did not bring it back


    def test_9_list_comes_from_the_records_not_the_hosts(self):
        f, user = S["f"], "u9"
        made = {}
        for i in range(5):
            api = S["g1"] if i % 2 else S["g2"]
            sb = api.create(KD, user, "lst-%d-%s" % (i, uuid.uuid4().hex[:4]),
                            metadata={"team": "a" if i < 3 else "b", "n": str(i)})
            made[sb.sandbox_id] = sb
        ids = sorted(made)
        team_a = sorted(k for k, v in made.items() if v.metadata["team"] == "a")
        # every host stopped: a list that asked them would wait out their
        # 1 s deadline and fail; one read from etcd answers at once
        stopped = list(f.hosts.values())
        for p in stopped:
            os.kill(p.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            got, token, pages = [], "", 0
            while True:
                resp = S["g2"].call("ListSandboxes", S["g2"].pb.ListSandboxesRequest(
                    user_id=user, page_size=2, page_token=token), KD, timeout=5)
                got += list(resp.sandboxes)
                pages += 1
                self.assertEqual(list(resp.unreachable_hosts), [])
                token = resp.next_page_token
                if not token:
                    break
            filt = S["g1"].call("ListSandboxes", S["g1"].pb.ListSandboxesRequest(
                user_id=user, metadata={"team": "a"}), KD, timeout=5)
            other = S["g1"].call("ListSandboxes", S["g1"].pb.ListSandboxesRequest(
                user_id="u9-other"), KD, timeout=5)
            took = time.monotonic() - t0
        finally:
            for p in stopped:
                os.kill(p.pid, signal.SIGCONT)
        print("5 pages and 2 lists from etcd with every host stopped: %.3f s" % took)
        self.assertLess(took, 0.9)
        self.assertEqual([x.sandbox_id for x in got], ids)
        self.assertEqual(pages, 3)
        for x in got:   # what the host said at create, as the list says it
            want = made[x.sandbox_id]
            for field in ("template", "user_id", "task_id", "isolation", "state"):
                self.assertEqual(getattr(x, field), getattr(want, field), field)
            self.assertEqual(dict(x.metadata), dict(want.metadata))
            # the listing's created_at is the claim's, a moment before the
            # host made it (seconds, on a loaded machine with no warm pool)
            self.assertLessEqual(x.created_at, want.created_at + 50)
            self.assertLess(want.created_at - x.created_at, 15000)
            self.assertLess(abs(x.expires_at - want.expires_at), 15000)
        self.assertEqual([x.sandbox_id for x in filt.sandboxes], team_a)
        self.assertEqual(list(other.sandboxes), [])
        # an Extend shows in the list; a kill leaves it
        sid = ids[0]
        ext = S["g1"].call("ExtendSandbox", S["g1"].pb.ExtendSandboxRequest(
            sandbox_id=sid, user_id=user, ttl_seconds=1800), KD)

        def listed():
            resp = S["g2"].call("ListSandboxes", S["g2"].pb.ListSandboxesRequest(user_id=user), KD)
            return {x.sandbox_id: x for x in resp.sandboxes}
        wait(lambda: listed()[sid].expires_at == ext.expires_at, "the list to show the extend", 5)
        S["g2"].kill(KD, user, sid)
        wait(lambda: sid not in listed(), "the killed sandbox to leave the list", 5)
        self.assertEqual(sorted(listed()), ids[1:])
        for x in ids[1:]:
            S["g1"].kill(KD, user, x)


def get(api, sid, timeout=30):
    return api.call("GetSandbox", api.pb.GetSandboxRequest(sandbox_id=sid, user_id="u5"), KD,
                    timeout=timeout)


def wait_create(api, key, user, task, timeout=10):
    """Create, retrying UNAVAILABLE (a release or a watch a moment behind)."""
    end = time.monotonic() + timeout
    while True:
        r = status(api, lambda: api.create(key, user, task))
        if r[0] != C.UNAVAILABLE or time.monotonic() > end:
            return r
        time.sleep(0.1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
