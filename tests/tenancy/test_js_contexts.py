#!/usr/bin/python3
"""JavaScript contexts through the gateway (issue 17.5), on the driver
tests/drivers.py selects: a `javascript` context (Node, host/runtime/js/)
keeps state across runs (let/const/function/class too, and a second `let`
of the same name), takes top-level await, gives the last expression's value
as a result (text/plain as util.inspect, application/json for plain data),
splits console.log/info (stdout) from console.error/warn (stderr), reports
an error's name, message and stack; a `while(true){}` times out, is
interrupted and the context goes on with its state; an infinite-output loop
is capped; two JS contexts and the Python default stay apart; ListContexts,
RestartContext keep the language; an unknown language is INVALID_ARGUMENT
naming `language`. Prints the first JS context's start time and `1+1`
latency (noisy: other tests share the machine).
"""
import json
import os
import sys
import time
import unittest
import uuid

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import drivers  # noqa: E402
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KD, KO = "js-demo-key-1", "js-other-key-2"
S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-js-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    # Daemons writes deploy/local/host.yaml for this run's driver (drivers.py)
    S["d"] = d = sg.Daemons(tmp, sg.two_tenant_policy(KD, KO))
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = api = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(api.close)
    S["sid"] = api.create(KD, "ju", "js-" + uuid.uuid4().hex[:6]).sandbox_id


class Run:
    def __init__(self, events):
        self.events = events
        kinds = lambda k: [e for e in events if e.WhichOneof("event") == k]  # noqa: E731
        self.out = b"".join(e.stdout.data for e in kinds("stdout")).decode()
        self.err_text = b"".join(e.stderr.data for e in kinds("stderr")).decode()
        self.error = next((e.error for e in kinds("error")), None)
        self.end = next((e.end for e in kinds("end")), None)
        self.results = [e.result for e in kinds("result")]

    def plain(self):
        d = self.data("text/plain")
        return None if d is None else d.decode()

    def mimes(self):
        return [d.mime_type for r in self.results for d in r.representations]

    def data(self, mime):
        for r in self.results:
            for d in r.representations:
                if d.mime_type == mime:
                    return d.data
        return None


class JsContexts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.api, cls.sid = S["api"], S["sid"]
        cls.pb = cls.api.pb
        t0 = time.monotonic()
        cls.js = cls.new_ctx(warm=False)
        started = time.monotonic() - t0
        t1 = time.monotonic()
        first = cls.run_code(cls, "1+1", cls.js)
        first_run = time.monotonic() - t1
        lat = []
        for _ in range(10):
            t = time.monotonic()
            cls.run_code(cls, "1+1", cls.js)
            lat.append(time.monotonic() - t)
        lat.sort()
        print("\n[%s] first javascript context: CreateContext %.0f ms, first RunCode 1+1 %.0f ms, "
              "then median %.1f ms (max %.1f) over 10 (shared machine: noisy)"
              % (drivers.current(), started * 1000, first_run * 1000,
                 lat[len(lat) // 2] * 1000, lat[-1] * 1000), file=sys.stderr)
        assert first.plain() == "2", first.events

    @classmethod
    def new_ctx(cls, language="javascript", warm=True):
        c = cls.api.call("CreateContext", cls.pb.CreateContextRequest(
            sandbox_id=cls.sid, user_id="ju", language=language), KD, timeout=60).context_id
        if warm:   # Node's start is paid here, not in a run with a short timeout
            assert cls.run_code(cls, "1", c, timeout=90).plain() == "1"
        return c

    def run_code(self, code, ctx="", timeout=30):
        return Run(list(self.api.call("RunCode", self.pb.RunCodeRequest(
            sandbox_id=self.sid, user_id="ju", context_id=ctx, code=code,
            timeout_seconds=timeout), KD, timeout=timeout + 60)))

    def ok(self, code, ctx=None):
        r = self.run_code(code, ctx or self.js)
        self.assertIsNone(r.error, (code, r.error))
        return r

    def test_state_across_runs(self):
        c = self.new_ctx()
        self.ok("var v = 1; let l = 2; const k = 3; function f(x) { return x * 10 }\n"
                "class P { constructor(n) { this.n = n } }", c)
        r = self.ok("v + l + k + f(1) + new P(4).n", c)
        self.assertEqual(r.plain(), "20")
        # a cell may declare a let again, as in a notebook re-run
        self.ok("let l = 5", c)
        self.assertEqual(self.ok("l", c).plain(), "5")
        self.assertEqual(self.ok("globalThis.g = 7; g * 2", c).plain(), "14")

    def test_top_level_await(self):
        r = self.ok("const t0 = Date.now();\n"
                    "const v = await new Promise(r => setTimeout(() => r(42), 100));\n"
                    "[v, Date.now() - t0 >= 90]")
        self.assertEqual(r.plain(), "[ 42, true ]")
        r = self.ok("async function two() { await null; return 2 }\nawait two()")
        self.assertEqual(r.plain(), "2")

    def test_result_value(self):
        r = self.ok("({a: [1, 2], b: 'x', c: null})")
        self.assertEqual(r.plain(), "{ a: [ 1, 2 ], b: 'x', c: null }")
        self.assertEqual(json.loads(r.data("application/json")),
                         {"a": [1, 2], "b": "x", "c": None})
        self.assertEqual(self.ok("'s'").plain(), "'s'")
        self.assertEqual(self.ok("new Map([[1, 2]])").mimes(), ["text/plain"])
        self.assertEqual(self.ok("let nothing = 1").results, [])   # undefined: no result
        self.assertEqual(self.ok("undefined").results, [])

    def test_console_split(self):
        r = self.ok("console.log('out', 1); console.info('info'); console.error('err', {e: 1});\n"
                    "console.warn('warn'); process.stdout.write('raw\\n')")
        self.assertEqual(r.out, "out 1\ninfo\nraw\n")
        self.assertEqual(r.err_text, "err { e: 1 }\nwarn\n")

    def test_error_name_message_stack(self):
        r = self.run_code("function inner() { throw new RangeError('too far') }\n"
                          "function outer() { inner() }\nouter()", self.js)
        self.assertEqual(r.error.name, "RangeError")
        self.assertEqual(r.error.value, "too far")
        tb = r.error.traceback
        self.assertTrue(tb.startswith("RangeError: too far"), tb)
        self.assertIn("at inner (cell-", tb)
        self.assertIn("at outer (cell-", tb)
        self.assertNotIn("node:inspector", tb)   # the runtime's own frames are left out
        self.assertNotIn("context.js", tb)
        r = self.run_code("await Promise.reject(new TypeError('async bad'))", self.js)
        self.assertEqual((r.error.name, r.error.value), ("TypeError", "async bad"))
        r = self.run_code("this is not javascript", self.js)
        self.assertEqual(r.error.name, "SyntaxError")
        self.assertEqual(self.ok("1 + 1").plain(), "2")   # still usable

    def test_timeout_interrupts(self):
        c = self.new_ctx()
        self.ok("let kept = 'yes'", c)
        t = time.monotonic()
        r = self.run_code("while (true) {}", c, timeout=1)
        self.assertLess(time.monotonic() - t, 15)
        self.assertTrue(r.end.timed_out, r.events)
        self.assertIsNotNone(r.error)
        # SIGINT reached the loop (vm breakOnSigint): interrupted, not restarted
        self.assertEqual(r.error.name, "KeyboardInterrupt", r.error)
        self.assertFalse(r.end.context_restarted)
        self.assertEqual(self.ok("kept", c).plain(), "'yes'")
        # a pending promise is interrupted too
        r = self.run_code("await new Promise(() => {})", c, timeout=1)
        self.assertTrue(r.end.timed_out)
        self.assertEqual(r.error.name, "KeyboardInterrupt")
        self.assertEqual(self.ok("kept", c).plain(), "'yes'")

    def test_uninterruptible_loop_restarts(self):
        c = self.new_ctx()
        self.ok("let before = 1", c)
        # SIGINT ignored by the code: the host kills it after its grace period
        r = self.run_code("process.removeAllListeners('SIGINT'); process.on('SIGINT', () => {});\n"
                          "await null; while (true) {}", c, timeout=1)
        self.assertTrue(r.end.timed_out, r.events)
        self.assertTrue(r.end.context_restarted, r.events)
        self.assertEqual(r.error.name, "TimeoutError", r.error.value)
        self.assertIn("restarted", r.error.value)
        # the listener held: the host's grace-period kill ended it, not the SIGINT
        self.assertIn("did not stop within", r.error.value)
        r = self.ok("typeof before", c)   # usable again, fresh state
        self.assertEqual(r.plain(), "'undefined'")
        info = {x.context_id: x for x in self.ctxs()}[c]
        self.assertEqual((info.language, info.restarts), ("javascript", 1))

    def test_loop_killed_by_interrupt_is_timeout(self):
        # After the await no breakOnSigint holds SIGINT: with no listener
        # left Node dies of the host's timeout SIGINT. That is the timeout
        # (not a lost context), whichever the host hears first: the exit
        # or the channel's EOF.
        c = self.new_ctx()
        r = self.run_code("await null; process.removeAllListeners('SIGINT'); while (true) {}",
                          c, timeout=1)
        self.assertTrue(r.end.timed_out, r.events)
        self.assertTrue(r.end.context_restarted, r.events)
        self.assertEqual(r.error.name, "TimeoutError", r.error.value)
        self.assertIn("did not survive the interrupt", r.error.value)
        self.assertEqual(self.ok("1", c).plain(), "1")

    def test_output_capped(self):
        c = self.new_ctx()
        r = self.run_code("while (true) console.log('y'.repeat(1000))", c, timeout=3)
        self.assertTrue(r.end.truncated, r.end)
        self.assertLess(len(r.out), 4 << 20)
        self.assertGreater(len(r.out), 1000)
        self.assertTrue(r.end.timed_out)
        self.assertEqual(self.ok("1", c).plain(), "1")

    def ctxs(self):
        return list(self.api.call("ListContexts", self.pb.ListContextsRequest(
            sandbox_id=self.sid, user_id="ju"), KD).contexts)

    def test_contexts_apart(self):
        a, b = self.new_ctx(), self.new_ctx()
        self.ok("let who = 'a'; globalThis.gw = 'a'", a)
        self.ok("let who = 'b'", b)
        self.assertEqual(self.ok("who", a).plain(), "'a'")
        self.assertEqual(self.ok("who", b).plain(), "'b'")
        self.assertEqual(self.ok("typeof gw", b).plain(), "'undefined'")
        self.ok("who = 'python'", "default")   # Python name, JS contexts untouched
        r = self.run_code("print(who)", "default")
        self.assertEqual(r.out, "python\n")
        self.assertEqual(self.ok("who", a).plain(), "'a'")
        # separate processes
        pa = self.ok("process.pid", a).plain()
        pb_ = self.ok("process.pid", b).plain()
        self.assertNotEqual(pa, pb_)
        got = {x.context_id: x.language for x in self.ctxs()}
        self.assertEqual((got["default"], got[a], got[b]), ("python", "javascript", "javascript"))

    def test_restart_keeps_language(self):
        c = self.new_ctx()
        self.ok("let r1 = 1", c)
        code, details, _, resp = self.api.status("RestartContext", self.pb.RestartContextRequest(
            sandbox_id=self.sid, user_id="ju", context_id=c), KD)
        self.assertEqual(code, C.OK, details)
        self.assertEqual(resp.language, "javascript")
        self.assertEqual(self.ok("typeof r1", c).plain(), "'undefined'")
        self.assertEqual(self.ok("typeof require('fs').readFileSync", c).plain(), "'function'")
        code, details, _, _ = self.api.status("DeleteContext", self.pb.DeleteContextRequest(
            sandbox_id=self.sid, user_id="ju", context_id=c), KD)
        self.assertEqual(code, C.OK, details)

    def test_env_and_workdir(self):
        r = self.ok("[process.cwd(), typeof process.env.PATH]")
        self.assertEqual(r.plain(), "[ '/workspace', 'string' ]")
        self.ok("require('fs').writeFileSync('from-js.txt', 'hi')")
        self.assertEqual(self.run_code("print(open('/workspace/from-js.txt').read())",
                                       "default").out, "hi\n")

    def test_bad_language(self):
        for lang in ("ruby", "Python", "javascript2"):
            code, details, _, _ = self.api.status("CreateContext", self.pb.CreateContextRequest(
                sandbox_id=self.sid, user_id="ju", language=lang), KD)
            self.assertEqual(code, C.INVALID_ARGUMENT, (lang, details))
            self.assertIn("language", details)


if __name__ == "__main__":
    unittest.main(verbosity=2)
