"""Issue 17.4: sandbox labels (CreateSandbox metadata) and ListSandboxes'
label filter and pages, across two hosts (the gateway merges their pages).

200 sandboxes of one user on two hosts (each host's max_sandboxes 150, a
warm pool of 1), half labelled team=a and half team=b: a walk through
ListSandboxes{metadata: {team: a}, page_size: 30} returns exactly the 100
team=a sandboxes, each once, in sandbox_id order, with both hosts' among
them; GetSandbox returns the labels. A walk while sandboxes come and go
lists every sandbox that lived through it exactly once. Bad page sizes,
tokens and labels are INVALID_ARGUMENT naming the field or the policy
limit; another tenant's filter sees nothing of this one's.
"""
import os
import sys
import time
import unittest
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sghosts  # noqa: E402
from sghosts import DEMO_KEY, OTHER_KEY, host_of  # noqa: E402

C = grpc.StatusCode
N = 200

POLICY = """version: 1
defaults:
  quotas: {sandboxes_per_tenant: 400, sandboxes_per_user: 400, concurrent_actions: 64,
           rate_per_s: 100000, rate_burst: 100000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
  - id: other
    api_keys: [%s]
    templates: [code-interpreter]
    limits: {metadata_entries: 4, metadata_bytes: 64}
""" % (sghosts.sgtenancy.key_hash(DEMO_KEY), sghosts.sgtenancy.key_hash(OTHER_KEY))


class Labels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = os.environ.get("SG_HOSTS_TMP") or sghosts.sgtenancy.new_tmp("sg-hosts-")
        c = cls.c = sghosts.Cluster(cls.tmp)
        c.max_sandboxes = 150
        c.policy = os.path.join(cls.tmp, "labels-policy.yaml")
        with open(c.policy, "w") as f:
            f.write(POLICY)
        try:
            cls.a = c.host("la")
            cls.b = c.host("lb")
            cls.g = c.gateway([cls.a.name, cls.b.name])
            cls.api = c.api(cls.g)
            cls.pb = cls.api.pb
            cls.run_id = uuid.uuid4().hex[:6]
            cls.made = {}   # sandbox_id -> metadata
            t0 = time.monotonic()
            with ThreadPoolExecutor(8) as ex:
                for sb in ex.map(cls.make, range(N)):
                    cls.made[sb.sandbox_id] = dict(sb.metadata)
            sys.stderr.write("\n%d sandboxes created in %.1f s (8 at a time, 2 hosts)\n"
                             % (N, time.monotonic() - t0))
        except Exception:
            c.stop_all()
            raise

    @classmethod
    def make(cls, i):
        md = {"team": "a" if i % 2 else "b", "idx": str(i), "run": cls.run_id}
        for attempt in range(20):
            try:
                return cls.api.create(DEMO_KEY, "alice", "lab-%s-%d" % (cls.run_id, i),
                                      metadata=md)
            except grpc.RpcError as e:
                if e.code() != C.UNAVAILABLE or attempt == 19:
                    raise
                time.sleep(0.2)

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        cls.c.stop_all()

    def run(self, result=None):
        r = super().run(result)
        if result and (result.failures or result.errors):
            sys.stderr.write(self.c.logs_tail() + "\n")
        return r

    def page(self, labels, size, token="", key=DEMO_KEY, user="alice"):
        return self.api.call("ListSandboxes", self.pb.ListSandboxesRequest(
            user_id=user, metadata=labels, page_size=size, page_token=token), key)

    def walk(self, labels, size, between=None):
        ids, token, pages = [], "", 0
        while True:
            r = self.page(labels, size, token)
            self.assertEqual(list(r.unreachable_hosts), [])
            self.assertLessEqual(len(r.sandboxes), size)
            ids.extend(s.sandbox_id for s in r.sandboxes)
            for s in r.sandboxes:
                for k, v in labels.items():
                    self.assertEqual(s.metadata[k], v)
            pages += 1
            if between:
                between(pages)
            token = r.next_page_token
            if not token:
                return ids, pages
            self.assertLess(pages, 1000)

    def test_1_filter_in_pages(self):
        ids, pages = self.walk({"team": "a", "run": self.run_id}, 30)
        want = sorted(i for i, m in self.made.items() if m["team"] == "a")
        self.assertEqual(len(want), N // 2)
        self.assertEqual(ids, want)            # each once, in id order
        self.assertEqual(pages, 4)             # 30 + 30 + 30 + 10
        self.assertEqual({host_of(i) for i in ids}, {self.a.name, self.b.name})
        # two labels: exactly one
        r = self.page({"team": "a", "idx": "7", "run": self.run_id}, 10)
        self.assertEqual([s.sandbox_id for s in r.sandboxes],
                         [i for i, m in self.made.items() if m["idx"] == "7"])
        self.assertEqual(r.next_page_token, "")
        # no filter: everything of alice's, the default page size 100
        r = self.page({"run": self.run_id}, 0)
        self.assertEqual(len(r.sandboxes), 100)
        self.assertTrue(r.next_page_token)
        # a label nobody has
        r = self.page({"team": "c"}, 10)
        self.assertEqual((list(r.sandboxes), r.next_page_token), ([], ""))

    def test_2_get_returns_labels(self):
        sid, md = next(iter(self.made.items()))
        s = self.api.call("GetSandbox", self.pb.GetSandboxRequest(sandbox_id=sid,
                                                                  user_id="alice"), DEMO_KEY)
        self.assertEqual(dict(s.metadata), md)

    def test_3_walk_while_sandboxes_come_and_go(self):
        labels = {"team": "b", "run": self.run_id}
        before = sorted(i for i, m in self.made.items() if m["team"] == "b")
        victim = before[-3]          # on a later page: killed before the walk gets there
        extra = []

        def churn(page):
            if page == 1:
                self.api.kill(DEMO_KEY, "alice", victim)
                sb = self.api.create(DEMO_KEY, "alice", "lab-extra-" + self.run_id,
                                     metadata=labels)
                extra.append(sb.sandbox_id)
        ids, _ = self.walk(labels, 25, churn)
        self.assertEqual(len(ids), len(set(ids)), "a sandbox listed twice")
        self.assertEqual(ids, sorted(ids))
        survivors = [i for i in before if i != victim]
        self.assertEqual([i for i in ids if i in set(before)], survivors)
        self.assertNotIn(victim, ids)
        # the new one appears iff its id sorts after the first page
        self.api.kill(DEMO_KEY, "alice", extra[0])
        del self.made[victim]

    def test_4_other_tenant_sees_nothing(self):
        r = self.page({"run": self.run_id}, 100, key=OTHER_KEY)
        self.assertEqual(list(r.sandboxes), [])
        r = self.page({"run": self.run_id}, 100, user="bob")
        self.assertEqual(list(r.sandboxes), [])

    def test_5_bad_input(self):
        pb = self.pb
        cases = [
            ("ListSandboxes", pb.ListSandboxesRequest(user_id="alice", page_size=1001), DEMO_KEY,
             "page_size: 1001; at most 1000"),
            ("ListSandboxes", pb.ListSandboxesRequest(user_id="alice", page_token="garbage"),
             DEMO_KEY, "page_token: not a token this API issued"),
            ("ListSandboxes", pb.ListSandboxesRequest(user_id="alice", page_token="sgp1.Zm9vIGJhcg"),
             DEMO_KEY, "page_token: not a token this API issued"),
            ("ListSandboxes", pb.ListSandboxesRequest(
                user_id="alice", metadata={"k%d" % i: "v" for i in range(17)}), DEMO_KEY,
             "metadata: 17 labels to match; at most 16"),
            ("CreateSandbox", pb.CreateSandboxRequest(
                template="code-interpreter", user_id="u", task_id="t1",
                metadata={"k%d" % i: "v" for i in range(5)}), OTHER_KEY,
             "metadata: 5 labels; the policy limit is 4 (limits.metadata_entries)"),
            ("CreateSandbox", pb.CreateSandboxRequest(
                template="code-interpreter", user_id="u", task_id="t2",
                metadata={"k": "v" * 64}), OTHER_KEY,
             "metadata: 65 bytes (keys and values); the policy limit is 64 "
             "(limits.metadata_bytes)"),
            ("CreateSandbox", pb.CreateSandboxRequest(
                template="code-interpreter", user_id="u", task_id="t3",
                metadata={"bad key": "v"}), DEMO_KEY,
             "metadata key #0: may hold only A-Z, a-z, 0-9, '.', '_', '/' and '-'"),
            ("CreateSandbox", pb.CreateSandboxRequest(
                template="code-interpreter", user_id="u", task_id="t4",
                metadata={"": "v"}), DEMO_KEY, "metadata key #0: is empty; a label key is required"),
            ("CreateSandbox", pb.CreateSandboxRequest(
                template="code-interpreter", user_id="u", task_id="t5",
                metadata={"k" * 64: "v"}), DEMO_KEY, "metadata key #0: is 64 bytes; the limit is 63"),
            ("CreateSandbox", pb.CreateSandboxRequest(
                template="code-interpreter", user_id="u", task_id="t6",
                metadata={"k": "v" * 256}), DEMO_KEY, 'metadata["k"]: is 256 bytes; the limit is 255'),
        ]
        for method, req, key, want in cases:
            with self.subTest(want=want):
                code, details, _, _ = self.api.status(method, req, key)
                self.assertEqual((code, details), (C.INVALID_ARGUMENT, want))
        # and nothing was created for those
        self.assertEqual(self.api.list(OTHER_KEY, "u"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
