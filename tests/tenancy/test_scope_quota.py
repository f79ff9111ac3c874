#!/usr/bin/python3
"""Scope and quotas (issue 5).

per_task: 20 CreateSandbox calls for one (user, task) racing in threads all
return the same sandbox_id, and exactly one sandbox exists afterwards (in
ListSandboxes and in /sys/fs/cgroup/pids/sandgate/). per_user: two tasks of a
user share a sandbox, two users never do.

Quotas: sandboxes_per_user 2 and sandboxes_per_tenant 2 (third create
RESOURCE_EXHAUSTED naming the limit; a retry of an existing task still gets
its sandbox), concurrent_actions 2 (a third RunCode while two sleep 2 s),
rate_per_s 5 / rate_burst 5 (20 fast calls). Every refusal carries
ErrorInfo reason QUOTA_EXCEEDED in grpc-status-details-bin.
"""
import concurrent.futures as cf
import os
import sys
import threading
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
K = {t: "sq-%s-key" % t for t in ("race", "peruser", "quser", "qtenant", "qact", "qrate")}

POLICY = """version: 1
defaults:
  quotas: {sandboxes_per_tenant: 100, sandboxes_per_user: 50, concurrent_actions: 64,
           rate_per_s: 10000, rate_burst: 10000}
templates:
  - name: code-interpreter
    tenants: ["*"]
tenants:
  - id: race
    api_keys: [%(race)s]
  - id: peruser
    api_keys: [%(peruser)s]
    scope: per_user
  - id: quser
    api_keys: [%(quser)s]
    quotas: {sandboxes_per_user: 2}
  - id: qtenant
    api_keys: [%(qtenant)s]
    quotas: {sandboxes_per_tenant: 2}
  - id: qact
    api_keys: [%(qact)s]
    quotas: {concurrent_actions: 2}
  - id: qrate
    api_keys: [%(qrate)s]
    quotas: {rate_per_s: 5, rate_burst: 5}
""" % {t: sg.key_hash(k) for t, k in K.items()}

S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-quota-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    # No warm pool here: a pool refill is a new cgroup too, and the race test
    # counts cgroups to prove only one sandbox was made. The pool path takes
    # the same dedupe check (host/core/sandbox.c) before it takes a pool sandbox.
    S["d"] = d = sg.Daemons(tmp, POLICY, env={"SANDGATE_POOL_SIZE": "0"})
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(S["api"].close)


class Base(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]
        self.u = uuid.uuid4().hex[:8]

    def create_status(self, tenant, user, task):
        return self.api.status("CreateSandbox", self.api.pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id=user, task_id=task, ttl_seconds=300), K[tenant])

    def cleanup_all(self, tenant, *users):
        def kill():
            for u in users:
                for s in self.api.list(K[tenant], u):
                    self.api.kill(K[tenant], u, s.sandbox_id)
        self.addCleanup(kill)

    def assertQuota(self, st, names):
        code, details, info, _ = st
        self.assertEqual(code, C.RESOURCE_EXHAUSTED, details)
        self.assertIsNotNone(info, "no grpc-status-details-bin trailer")
        self.assertEqual(info.get("reason"), "QUOTA_EXCEEDED", info)
        text = details + " " + info.get("metadata", {}).get("rule", "")
        self.assertTrue(any(n in text for n in names),
                        "the refusal does not name the limit %s: %r rule %r"
                        % (names, details, info.get("metadata")))


class Scope(Base):
    def test_20_racing_creates_for_one_task_give_one_sandbox(self):
        self.cleanup_all("race", "racer")
        task = "race-" + self.u
        before = S["d"].cgroups()
        barrier = threading.Barrier(20)

        def one(_):
            barrier.wait()
            return self.create_status("race", "racer", task)
        with cf.ThreadPoolExecutor(20) as ex:
            results = list(ex.map(one, range(20)))
        codes = [r[0] for r in results]
        bad = [(r[0].name, r[1]) for r in results if r[0] != C.OK]
        ids = {r[3].sandbox_id for r in results if r[0] == C.OK}
        sys.stderr.write("\n20 racing creates: %d OK, ids %s, failures %s\n"
                         % (codes.count(C.OK), sorted(ids), bad[:3]))
        self.assertEqual(len(ids), 1, ids)
        sid = ids.pop()
        listed = [s.sandbox_id for s in self.api.list(K["race"], "racer")]
        self.assertEqual(listed, [sid])
        if before is not None:
            after = S["d"].cgroups()
            self.assertEqual(sorted(set(after) - set(before)), [sid],
                             "cgroups under /sys/fs/cgroup/pids/sandgate")
        # a retry during creation must wait for (or return) the sandbox, never fail
        self.assertEqual(bad, [], "every racing create must succeed with the same sandbox")
        # and a later retry still returns it
        self.assertEqual(self.create_status("race", "racer", task)[3].sandbox_id, sid)

    def test_per_user_two_tasks_share_two_users_never(self):
        self.cleanup_all("peruser", "pa", "pb")
        a1 = self.create_status("peruser", "pa", "t1-" + self.u)
        a2 = self.create_status("peruser", "pa", "t2-" + self.u)
        b1 = self.create_status("peruser", "pb", "t1-" + self.u)
        for st in (a1, a2, b1):
            self.assertEqual(st[0], C.OK, st[1])
        self.assertEqual(a1[3].sandbox_id, a2[3].sandbox_id, "per_user: one sandbox per user")
        self.assertNotEqual(a1[3].sandbox_id, b1[3].sandbox_id, "a sandbox shared by two users")
        self.assertEqual(len(self.api.list(K["peruser"], "pa")), 1)
        self.assertEqual(len(self.api.list(K["peruser"], "pb")), 1)
        # the other user cannot act on it
        c, det, _, _ = self.api.status("RunCode", self.api.pb.RunCodeRequest(
            sandbox_id=a1[3].sandbox_id, user_id="pb", code="1"), K["peruser"])
        self.assertEqual(c, C.PERMISSION_DENIED, det)

    def test_per_task_two_tasks_two_sandboxes(self):
        self.cleanup_all("race", "pt")
        a = self.create_status("race", "pt", "a-" + self.u)
        b = self.create_status("race", "pt", "b-" + self.u)
        self.assertEqual((a[0], b[0]), (C.OK, C.OK), (a[1], b[1]))
        self.assertNotEqual(a[3].sandbox_id, b[3].sandbox_id)


class Quotas(Base):
    def test_sandboxes_per_user(self):
        self.cleanup_all("quser", "qu", "qv")
        s1 = self.create_status("quser", "qu", "t1-" + self.u)
        s2 = self.create_status("quser", "qu", "t2-" + self.u)
        self.assertEqual((s1[0], s2[0]), (C.OK, C.OK), (s1[1], s2[1]))
        third = self.create_status("quser", "qu", "t3-" + self.u)
        self.assertQuota(third, ["sandboxes_per_user"])
        sys.stderr.write("\nper-user refusal: %s | %s\n" % (third[1], third[2]))
        retry = self.create_status("quser", "qu", "t1-" + self.u)
        self.assertEqual(retry[0], C.OK, "a retry of an existing task must not hit the quota: "
                         + retry[1])
        self.assertEqual(retry[3].sandbox_id, s1[3].sandbox_id)
        # another user of the tenant is not affected
        self.assertEqual(self.create_status("quser", "qv", "t1-" + self.u)[0], C.OK)
        # freeing one makes room again
        self.api.kill(K["quser"], "qu", s2[3].sandbox_id)
        self.assertEqual(self.create_status("quser", "qu", "t3-" + self.u)[0], C.OK)

    def test_sandboxes_per_tenant(self):
        self.cleanup_all("qtenant", "x1", "x2", "x3")
        s1 = self.create_status("qtenant", "x1", "t-" + self.u)
        s2 = self.create_status("qtenant", "x2", "t-" + self.u)
        self.assertEqual((s1[0], s2[0]), (C.OK, C.OK), (s1[1], s2[1]))
        third = self.create_status("qtenant", "x3", "t-" + self.u)
        self.assertQuota(third, ["sandboxes_per_tenant"])
        sys.stderr.write("\nper-tenant refusal: %s | %s\n" % (third[1], third[2]))
        retry = self.create_status("qtenant", "x2", "t-" + self.u)
        self.assertEqual(retry[0], C.OK, retry[1])
        self.assertEqual(retry[3].sandbox_id, s2[3].sandbox_id)

    def test_concurrent_actions(self):
        self.cleanup_all("qact", "qa")
        sids = [self.create_status("qact", "qa", "t%d-%s" % (i, self.u))[3].sandbox_id
                for i in range(3)]
        results = {}

        def slow(i):
            results[i] = self.api.run(K["qact"], "qa", sids[i], "import time\ntime.sleep(2)\n1")
        ts = [threading.Thread(target=slow, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        time.sleep(0.8)   # both are in flight (2 s sleeps)
        t0 = time.monotonic()
        st = self.api.status("RunCode", self.api.pb.RunCodeRequest(
            sandbox_id=sids[2], user_id="qa", code="1"), K["qact"])
        elapsed = time.monotonic() - t0
        for t in ts:
            t.join()
        self.assertQuota(st, ["concurrent_actions", "concurrent actions"])
        self.assertLess(elapsed, 1.0, "the refusal should be immediate")
        for i in range(2):
            self.assertIsNone(results[i][2], "a slow call failed: %s" % (results[i][2],))
        # afterwards the slots are free again
        out, _, err, _, _ = self.api.run(K["qact"], "qa", sids[2], "print('ok')")
        self.assertEqual(out, "ok\n")

    def test_rate_limit(self):
        pb = self.api.pb
        time.sleep(1.2)   # a full bucket
        res = [self.api.status("ListSandboxes", pb.ListSandboxesRequest(user_id="r"), K["qrate"])
               for _ in range(20)]
        codes = [r[0] for r in res]
        n_ok = codes.count(C.OK)
        n_ex = codes.count(C.RESOURCE_EXHAUSTED)
        sys.stderr.write("\n20 fast calls at 5/s burst 5: %d OK, %d RESOURCE_EXHAUSTED\n"
                         % (n_ok, n_ex))
        self.assertEqual(n_ok + n_ex, 20, [c.name for c in codes])
        self.assertGreaterEqual(n_ok, 5)
        self.assertLessEqual(n_ok, 8)   # burst 5 plus what 5/s refills meanwhile
        self.assertGreater(n_ex, 0)
        for r in res:
            if r[0] == C.RESOURCE_EXHAUSTED:
                self.assertQuota(r, ["rate"])
        # the other tenants are not limited by qrate's bucket
        self.assertEqual(self.api.status("ListSandboxes", pb.ListSandboxesRequest(user_id="r"),
                                         K["race"])[0], C.OK)
        time.sleep(0.5)   # refills 2.5 tokens
        self.assertEqual(self.api.status("ListSandboxes", pb.ListSandboxesRequest(user_id="r"),
                                         K["qrate"])[0], C.OK)


if __name__ == "__main__":
    unittest.main(verbosity=2)
