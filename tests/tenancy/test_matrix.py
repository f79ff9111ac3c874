#!/usr/bin/python3
"""Tenancy matrix (issue 5): every public RPC × {own sandbox, other tenant's,
same tenant other user's, no credentials, wrong key, expired user token},
asserting the exact gRPC status; ListSandboxes shows only the caller's own;
and end-user tokens (tenant with user_tokens: required).

Expected codes: own → OK; other tenant → NOT_FOUND with exactly the message a
random nonexistent id gets; other user → PERMISSION_DENIED; no credentials,
wrong key, expired token → UNAUTHENTICATED. CreateSandbox and ListSandboxes
name no sandbox: for them "other tenant's"/"other user's" means the same
(user, task) names from another tenant / another user, which must give a
*different* sandbox (OK, never the first one), and a list that does not
contain the first one.
"""
import os
import sys
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

KD, KO, KT = "tm-demo-key-1", "tm-other-key-2", "tm-tok-key-3"
WRONG = "tm-wrong-key-9"
HMAC_KEY = "tm-hmac-" + uuid.uuid4().hex
C = grpc.StatusCode

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
  - id: other
    api_keys: [%s]
    templates: [code-interpreter]
  - id: tok
    api_keys: [%s]
    templates: [code-interpreter]
    user_tokens:
      required: true
      hmac_key: {env: SG_TM_HMAC}
      max_ttl: 1h
""" % (sg.key_hash(KD), sg.key_hash(KO), sg.key_hash(KT))

S = {}
RPCS = ["CreateSandbox", "GetSandbox", "ListSandboxes", "KillSandbox", "ExtendSandbox",
        "CreateContext", "ListContexts", "RestartContext", "RunCode", "Exec", "WriteFile",
        "ReadFile"]


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-matrix-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY, env={"SG_TM_HMAC": HMAC_KEY})
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(S["api"].close)


def tok(user, task, ttl=600):
    return sg.sign_token(HMAC_KEY, user, task, int(time.time()) + ttl)


class Matrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        api = cls.api = S["api"]
        pb = cls.pb = api.pb
        u = uuid.uuid4().hex[:8]
        cls.task = "mx-" + u
        cls.ttask = "mxt-" + u
        cls.sid = api.create(KD, "alice", cls.task, ttl_seconds=300).sandbox_id
        cls.kill_sid = api.create(KD, "alice", cls.task + "-k", ttl_seconds=300).sandbox_id
        cls.tsid = api.create(KT, "tu", cls.ttask, token=tok("tu", cls.ttask),
                              ttl_seconds=300).sandbox_id
        cls.tkill_sid = api.create(KT, "tu", cls.ttask + "-k", token=tok("tu", cls.ttask + "-k"),
                                   ttl_seconds=300).sandbox_id
        api.call("WriteFile", pb.WriteFileRequest(sandbox_id=cls.sid, user_id="alice",
                                                  path="m.txt", data=b"hi"), KD)
        api.call("WriteFile", pb.WriteFileRequest(sandbox_id=cls.tsid, user_id="tu",
                                                  path="m.txt", data=b"hi"), KT,
                 tok("tu", cls.ttask))
        cls.table = {}

    @classmethod
    def tearDownClass(cls):
        rows = ["%-14s %s" % ("", " ".join("%-17s" % c for c in
                                           ("own", "other_tenant", "other_user", "no_creds",
                                            "wrong_key", "expired_token")))]
        for rpc in RPCS:
            cells = cls.table.get(rpc, {})
            rows.append("%-14s %s" % (rpc, " ".join(
                "%-17s" % cells.get(c, "-") for c in ("own", "other_tenant", "other_user",
                                                      "no_creds", "wrong_key",
                                                      "expired_token"))))
        sys.stderr.write("\nstatus matrix (got):\n" + "\n".join(rows) + "\n")

    def req(self, rpc, sid, user, task=None):
        pb = self.pb
        return {
            "CreateSandbox": lambda: pb.CreateSandboxRequest(template=sg.TEMPLATE, user_id=user,
                                                             task_id=task, ttl_seconds=300),
            "GetSandbox": lambda: pb.GetSandboxRequest(sandbox_id=sid, user_id=user),
            "ListSandboxes": lambda: pb.ListSandboxesRequest(user_id=user),
            "KillSandbox": lambda: pb.KillSandboxRequest(sandbox_id=sid, user_id=user),
            "ExtendSandbox": lambda: pb.ExtendSandboxRequest(sandbox_id=sid, user_id=user,
                                                             ttl_seconds=300),
            "CreateContext": lambda: pb.CreateContextRequest(sandbox_id=sid, user_id=user,
                                                             language="python"),
            "ListContexts": lambda: pb.ListContextsRequest(sandbox_id=sid, user_id=user),
            "RestartContext": lambda: pb.RestartContextRequest(sandbox_id=sid, user_id=user),
            "RunCode": lambda: pb.RunCodeRequest(sandbox_id=sid, user_id=user, code="1+1",
                                                 timeout_seconds=20),
            "Exec": lambda: pb.ExecRequest(sandbox_id=sid, user_id=user, command="true",
                                           timeout_seconds=20),
            "WriteFile": lambda: pb.WriteFileRequest(sandbox_id=sid, user_id=user, path="m.txt",
                                                     data=b"hi"),
            "ReadFile": lambda: pb.ReadFileRequest(sandbox_id=sid, user_id=user, path="m.txt"),
        }[rpc]()

    def cell(self, rpc, case, want, req, key, token=None, check=None):
        code, details, info, resp = self.api.status(rpc, req, key, token)
        self.table.setdefault(rpc, {})[case] = code.name
        with self.subTest(rpc=rpc, case=case):
            self.assertEqual(code, want, "%s %s: %s" % (rpc, case, details))
            if check:
                check(code, details, info, resp)

    def run_rpc(self, rpc):
        api = self.api
        kill = rpc == "KillSandbox"
        sid = self.kill_sid if kill else self.sid
        tsid = self.tkill_sid if kill else self.tsid
        task = self.task
        # NOT_FOUND wording for ids that never existed (a well-formed one on
        # our host, and a malformed one), asked by the other tenant
        never = "%s-%s" % (S["d"].host_name, uuid.uuid4().hex)
        nf = set()
        if rpc not in ("CreateSandbox", "ListSandboxes"):
            for bogus in (never, "zz-" + uuid.uuid4().hex, "not-an-id"):
                c, det, _, _ = api.status(rpc, self.req(rpc, bogus, "alice"), KO)
                self.assertEqual(c, C.NOT_FOUND, "%s on a random id: %s" % (rpc, det))
                nf.add(det)
            self.assertEqual(len(nf), 1, "NOT_FOUND wording differs by id shape: %s" % nf)

        def same_as_never(code, details, info, resp):
            self.assertEqual(details, next(iter(nf)),
                             "other tenant's sandbox is distinguishable from a missing one")
            self.assertIsNone(info)

        # -- the five refusals first (Kill's own case ends the sandbox) --
        if rpc == "CreateSandbox":
            def different(key):
                def check(code, details, info, resp):
                    self.assertNotEqual(resp.sandbox_id, self.sid, "one sandbox for two owners")
                    api.kill(key, resp.user_id, resp.sandbox_id)
                return check
            self.cell(rpc, "other_tenant", C.OK, self.req(rpc, None, "alice", task), KO,
                      check=different(KO))
            self.cell(rpc, "other_user", C.OK, self.req(rpc, None, "bob", task), KD,
                      check=different(KD))
        elif rpc == "ListSandboxes":
            def without(code, details, info, resp):
                ids = [s.sandbox_id for s in resp.sandboxes]
                self.assertNotIn(self.sid, ids)
                self.assertNotIn(self.kill_sid, ids)
            self.cell(rpc, "other_tenant", C.OK, self.req(rpc, None, "alice"), KO, check=without)
            self.cell(rpc, "other_user", C.OK, self.req(rpc, None, "bob"), KD, check=without)
        else:
            self.cell(rpc, "other_tenant", C.NOT_FOUND, self.req(rpc, sid, "alice"), KO,
                      check=same_as_never)
            self.cell(rpc, "other_user", C.PERMISSION_DENIED, self.req(rpc, sid, "bob"), KD)
            # the tenant with user tokens: another user of tok, with a valid token of its own
            self.cell(rpc, "other_user", C.PERMISSION_DENIED, self.req(rpc, tsid, "tv"), KT,
                      token=tok("tv", self.ttask))
        r = self.req(rpc, sid, "alice", task)
        self.cell(rpc, "no_creds", C.UNAUTHENTICATED, r, None)
        self.cell(rpc, "wrong_key", C.UNAUTHENTICATED, r, WRONG)
        expired = sg.sign_token(HMAC_KEY, "tu", self.ttask, int(time.time()) - 5)
        self.cell(rpc, "expired_token", C.UNAUTHENTICATED, self.req(rpc, tsid, "tu", self.ttask),
                  KT, token=expired)

        # -- own: OK, for the key tenant and for the token tenant --
        def own_check(code, details, info, resp):
            if rpc == "CreateSandbox":
                self.assertEqual(resp.sandbox_id, self.sid, "a retry must return the same sandbox")
            if rpc == "ListSandboxes":
                ids = sorted(s.sandbox_id for s in resp.sandboxes)
                self.assertIn(self.sid, ids)
                for s in resp.sandboxes:
                    self.assertEqual(s.user_id, "alice")
        self.cell(rpc, "own", C.OK, self.req(rpc, sid, "alice", task), KD, check=own_check)
        self.cell(rpc, "own", C.OK, self.req(rpc, tsid, "tu", self.ttask), KT,
                  token=tok("tu", self.ttask + ("-k" if kill else "")))
        if kill:   # killed: now NOT_FOUND for its owner too
            c, det, _, _ = api.status("GetSandbox", self.req("GetSandbox", sid, "alice"), KD)
            self.assertEqual(c, C.NOT_FOUND, det)

    def test_01_CreateSandbox(self): self.run_rpc("CreateSandbox")
    def test_02_GetSandbox(self): self.run_rpc("GetSandbox")
    def test_03_ListSandboxes(self): self.run_rpc("ListSandboxes")
    def test_04_ExtendSandbox(self): self.run_rpc("ExtendSandbox")
    def test_05_CreateContext(self): self.run_rpc("CreateContext")
    def test_05a_ListContexts(self): self.run_rpc("ListContexts")
    def test_05b_RestartContext(self): self.run_rpc("RestartContext")
    def test_06_RunCode(self): self.run_rpc("RunCode")
    def test_07_Exec(self): self.run_rpc("Exec")
    def test_08_WriteFile(self): self.run_rpc("WriteFile")
    def test_09_ReadFile(self): self.run_rpc("ReadFile")
    def test_10_KillSandbox(self): self.run_rpc("KillSandbox")


class ListOnlyOwn(unittest.TestCase):
    def test_list_shows_only_the_callers_own(self):
        api = S["api"]
        u = uuid.uuid4().hex[:6]
        mine = {api.create(KD, "carol", "l1-" + u).sandbox_id,
                api.create(KD, "carol", "l2-" + u).sandbox_id}
        daves = api.create(KD, "dave", "l1-" + u).sandbox_id
        others = api.create(KO, "carol", "l1-" + u).sandbox_id
        try:
            self.assertEqual({s.sandbox_id for s in api.list(KD, "carol")}, mine)
            self.assertEqual({s.sandbox_id for s in api.list(KD, "dave")}, {daves})
            self.assertEqual({s.sandbox_id for s in api.list(KO, "carol")}, {others})
            self.assertEqual(len(mine | {daves, others}), 4, "a sandbox shared between owners")
        finally:
            for s in mine:
                api.kill(KD, "carol", s)
            for s in api.list(KD, "dave"):
                api.kill(KD, "dave", s.sandbox_id)
            for s in api.list(KO, "carol"):
                api.kill(KO, "carol", s.sandbox_id)


class UserTokens(unittest.TestCase):
    """Tenant tok: user_tokens {required: true, hmac_key: {env}}; tokens signed here."""

    def setUp(self):
        self.api = S["api"]
        self.task = "ut-" + uuid.uuid4().hex[:8]

    def code(self, rpc, req, token, key=KT):
        c, det, info, resp = self.api.status(rpc, req, key, token)
        return c, det

    def test_valid_token_works_in_metadata_and_in_create_field(self):
        api, pb = self.api, self.api.pb
        sb = api.create(KT, "ua", self.task, token=tok("ua", self.task))
        self.addCleanup(api.kill, KT, "ua", sb.sandbox_id, tok("ua", self.task))
        out, _, err, end, _ = api.run(KT, "ua", sb.sandbox_id, "print(6*7)",
                                      token=tok("ua", self.task))
        self.assertEqual(out, "42\n")
        # the request's user_token field (create only), no metadata
        again = api.call("CreateSandbox", pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id="ua", task_id=self.task,
            user_token=tok("ua", self.task)), KT)
        self.assertEqual(again.sandbox_id, sb.sandbox_id)

    def test_token_for_another_user_is_unauthenticated(self):
        pb = self.api.pb
        sb = self.api.create(KT, "ua", self.task, token=tok("ua", self.task))
        self.addCleanup(self.api.kill, KT, "ua", sb.sandbox_id, tok("ua", self.task))
        c, det = self.code("CreateSandbox", pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id="ua", task_id=self.task), tok("ub", self.task))
        self.assertEqual(c, C.UNAUTHENTICATED, det)
        c, det = self.code("RunCode", pb.RunCodeRequest(sandbox_id=sb.sandbox_id, user_id="ua",
                                                        code="1"), tok("ub", self.task))
        self.assertEqual(c, C.UNAUTHENTICATED, det)

    def test_token_for_another_task_is_permission_denied(self):
        pb = self.api.pb
        y = self.api.create(KT, "ua", self.task + "-y", token=tok("ua", self.task + "-y"))
        self.addCleanup(self.api.kill, KT, "ua", y.sandbox_id, tok("ua", self.task + "-y"))
        tx = tok("ua", self.task + "-x")
        for rpc, req in (("RunCode", pb.RunCodeRequest(sandbox_id=y.sandbox_id, user_id="ua",
                                                       code="1")),
                         ("GetSandbox", pb.GetSandboxRequest(sandbox_id=y.sandbox_id,
                                                             user_id="ua")),
                         ("KillSandbox", pb.KillSandboxRequest(sandbox_id=y.sandbox_id,
                                                               user_id="ua")),
                         ("CreateSandbox", pb.CreateSandboxRequest(
                             template=sg.TEMPLATE, user_id="ua", task_id=self.task + "-y"))):
            c, det = self.code(rpc, req, tx)
            self.assertEqual(c, C.PERMISSION_DENIED, "%s: %s" % (rpc, det))

    def test_missing_or_bad_token_is_unauthenticated(self):
        pb = self.api.pb
        sb = self.api.create(KT, "ua", self.task, token=tok("ua", self.task))
        self.addCleanup(self.api.kill, KT, "ua", sb.sandbox_id, tok("ua", self.task))
        good = tok("ua", self.task)
        now = int(time.time())
        bad = {
            "missing": None,
            "empty": "",
            "other key": sg.sign_token("not-the-key", "ua", self.task, now + 60),
            "bad MAC": good[:-2] + ("A" if good[-2] != "A" else "B") + good[-1],
            "truncated": good[:-6],
            "expired": sg.sign_token(HMAC_KEY, "ua", self.task, now - 1),
            "beyond max_ttl (1h)": sg.sign_token(HMAC_KEY, "ua", self.task, now + 7200),
            "garbage": "!!!.???.x.###",
        }
        for name, t in bad.items():
            for rpc, req in (("CreateSandbox", pb.CreateSandboxRequest(
                    template=sg.TEMPLATE, user_id="ua", task_id=self.task)),
                    ("GetSandbox", pb.GetSandboxRequest(sandbox_id=sb.sandbox_id, user_id="ua"))):
                c, det = self.code(rpc, req, t)
                with self.subTest(token=name, rpc=rpc):
                    self.assertEqual(c, C.UNAUTHENTICATED, det)
        # a valid token without the API key is still unauthenticated
        c, det = self.code("GetSandbox", pb.GetSandboxRequest(sandbox_id=sb.sandbox_id,
                                                              user_id="ua"), good, key=None)
        self.assertEqual(c, C.UNAUTHENTICATED, det)
        # and a tenant without user_tokens ignores the header: demo works without one
        self.assertEqual(self.api.list(KD, "nobody"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
