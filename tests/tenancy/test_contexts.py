#!/usr/bin/python3
"""Context management through the gateway (issue 17.5): ListContexts shows
the default context and the created ones (state, created time, restarts,
language); RestartContext wipes a context's globals and keeps its id, and
ends a run in progress with ContextRestarted; DeleteContext removes one (a
RunCode on it is NOT_FOUND, a run in progress on it ends CANCELLED); the
default context cannot be deleted; bad and unknown ids are refused; another
tenant's sandbox answers exactly as a never-existed id.
"""
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
KD, KO = "ctx-demo-key-1", "ctx-other-key-2"
S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-contexts-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, sg.two_tenant_policy(KD, KO))
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = api = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(api.close)
    S["sid"] = api.create(KD, "cu", "ctx-" + uuid.uuid4().hex[:6]).sandbox_id


class Contexts(unittest.TestCase):
    def setUp(self):
        self.api, self.sid = S["api"], S["sid"]
        self.pb = self.api.pb

    def ctxs(self, key=KD, sid=None):
        return list(self.api.call("ListContexts", self.pb.ListContextsRequest(
            sandbox_id=sid or self.sid, user_id="cu"), key).contexts)

    def new_ctx(self):
        return self.api.call("CreateContext", self.pb.CreateContextRequest(
            sandbox_id=self.sid, user_id="cu"), KD).context_id

    def run_code(self, code, ctx=""):
        ev = self.api.call("RunCode", self.pb.RunCodeRequest(
            sandbox_id=self.sid, user_id="cu", context_id=ctx, code=code, timeout_seconds=20),
            KD, timeout=60)
        out = b"".join(e.stdout.data for e in ev if e.WhichOneof("event") == "stdout")
        err = next((e.error for e in ev if e.WhichOneof("event") == "error"), None)
        end = next((e.end for e in ev if e.WhichOneof("event") == "end"), None)
        return out.decode(), err, end

    def restart(self, ctx, key=KD, sid=None):
        return self.api.status("RestartContext", self.pb.RestartContextRequest(
            sandbox_id=sid or self.sid, user_id="cu", context_id=ctx), key)

    def delete(self, ctx, key=KD, sid=None):
        return self.api.status("DeleteContext", self.pb.DeleteContextRequest(
            sandbox_id=sid or self.sid, user_id="cu", context_id=ctx), key)

    def test_list_shows_default_and_created(self):
        t0 = int(time.time() * 1000)
        a, b = self.new_ctx(), self.new_ctx()
        got = {c.context_id: c for c in self.ctxs()}
        self.assertEqual(self.ctxs()[0].context_id, "default")
        for i in ("default", a, b):
            self.assertIn(i, got)
            self.assertEqual(got[i].language, "python")
            self.assertEqual(got[i].state, self.pb.CONTEXT_STATE_IDLE)
            self.assertEqual(got[i].restarts, 0)
        self.assertGreaterEqual(got[a].created_at, t0 - 1000)
        self.assertLessEqual(got[a].created_at, int(time.time() * 1000) + 1000)
        self.assertLessEqual(got["default"].created_at, got[a].created_at)

    def test_restart_wipes_state_keeps_id(self):
        a = self.new_ctx()
        self.assertEqual(self.run_code("x = 41", a)[1], None)
        self.assertEqual(self.run_code("print(x + 1)", a)[0], "42\n")
        code, details, _, resp = self.restart(a)
        self.assertEqual(code, C.OK, details)
        self.assertEqual(resp.context_id, a)
        out, err, end = self.run_code("print('x' in globals())", a)
        self.assertEqual(out, "False\n")
        info = {c.context_id: c for c in self.ctxs()}[a]
        self.assertEqual(info.restarts, 1)
        self.assertEqual(info.state, self.pb.CONTEXT_STATE_IDLE)

    def test_restart_default(self):
        self.run_code("y_default = 1")
        code, details, _, resp = self.restart("")
        self.assertEqual(code, C.OK, details)
        self.assertEqual(resp.context_id, "default")
        self.assertEqual(self.run_code("print('y_default' in globals())")[0], "False\n")

    def test_restart_ends_run_in_progress(self):
        a = self.new_ctx()
        box = {}
        t = threading.Thread(target=lambda: box.update(r=self.run_code(
            "import time\nprint('started', flush=True)\ntime.sleep(30)", a)))
        t.start()
        sg.wait_for(lambda: any(c.context_id == a and c.state == self.pb.CONTEXT_STATE_RUNNING
                                for c in self.ctxs()), 10)
        time.sleep(0.3)
        code, details, _, _ = self.restart(a)
        self.assertEqual(code, C.OK, details)
        t.join(30)
        out, err, end = box["r"]
        self.assertEqual(err.name, "ContextRestarted")
        self.assertIn("RestartContext", err.value)
        self.assertTrue(end.context_restarted)
        self.assertEqual(self.run_code("print(1)", a)[0], "1\n")

    def test_delete_removes(self):
        a = self.new_ctx()
        code, details, _, _ = self.delete(a)
        self.assertEqual(code, C.OK, details)
        self.assertNotIn(a, [c.context_id for c in self.ctxs()])
        code, details, _, _ = self.api.status("RunCode", self.pb.RunCodeRequest(
            sandbox_id=self.sid, user_id="cu", context_id=a, code="1"), KD)
        self.assertEqual(code, C.NOT_FOUND, details)
        self.assertEqual(self.delete(a)[0], C.NOT_FOUND)
        self.assertEqual(self.restart(a)[0], C.NOT_FOUND)

    def test_delete_cancels_run_in_progress(self):
        a = self.new_ctx()
        box = {}

        def go():
            box["r"] = self.api.status("RunCode", self.pb.RunCodeRequest(
                sandbox_id=self.sid, user_id="cu", context_id=a,
                code="import time\ntime.sleep(30)", timeout_seconds=40), KD)
        t = threading.Thread(target=go)
        t.start()
        sg.wait_for(lambda: any(c.context_id == a and c.state == self.pb.CONTEXT_STATE_RUNNING
                                for c in self.ctxs()), 10)
        self.assertEqual(self.delete(a)[0], C.OK)
        t.join(30)
        code, details, _, _ = box["r"]
        self.assertEqual(code, C.CANCELLED)
        self.assertIn("deleted", details)

    def test_default_cannot_be_deleted(self):
        code, details, _, _ = self.delete("default")
        self.assertEqual(code, C.FAILED_PRECONDITION)
        self.assertIn("default context cannot be deleted", details)
        code, details, _, _ = self.delete("")
        self.assertEqual(code, C.INVALID_ARGUMENT)
        self.assertIn("context_id", details)
        self.assertEqual(self.run_code("print(2)")[0], "2\n")

    def test_bad_ids_refused(self):
        for bad in ("a b", "x\u200by", "z" * 128):
            for fn in (self.restart, self.delete):
                code, details, _, _ = fn(bad)
                self.assertEqual(code, C.INVALID_ARGUMENT, (bad, details))
                self.assertIn("context_id", details)
        for fn in (self.restart, self.delete):
            self.assertEqual(fn("ctx999999")[0], C.NOT_FOUND)

    def test_other_tenant_same_as_never_existed(self):
        never = self.sid[:-4] + "zzzz"
        for name, call in (
                ("list", lambda k, s: self.api.status("ListContexts", self.pb.ListContextsRequest(
                    sandbox_id=s, user_id="cu"), k)),
                ("restart", lambda k, s: self.restart("default", k, s)),
                ("delete", lambda k, s: self.delete("ctx1", k, s))):
            mine = call(KO, self.sid)
            none = call(KO, never)
            self.assertEqual(mine[0], C.NOT_FOUND, name)
            self.assertEqual(mine[:3], none[:3], name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
