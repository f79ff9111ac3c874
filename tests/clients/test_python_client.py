#!/usr/bin/python3
"""The Python client (clients/python) against a real host + gateway.

Generates the stubs into a temp dir (clients/python/gen.sh), starts
deploy/local/run.sh on ephemeral loopback ports with its own run dir, and
runs the integration scenario through the gateway with the `sandgate`
package: state, results, streams, errors, timeout, truncation, exec, files,
kill, and the exact gRPC codes for auth and ownership. Daemons are stopped
and the temp dir removed even when setup or a test fails.

Env: SANDGATE_BUILD (build dir with bin/, default <repo>/build);
SANDGATE_KEEP_TMP=1 keeps the temp dir (daemon logs) after the run.
Run with Debian's /usr/bin/python3 (python3-grpcio, grpc_tools).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import grpc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_SH = os.path.join(REPO, "deploy", "local", "run.sh")
DEMO_KEY = "sg-demo-key-0001"
OTHER_KEY = "sg-other-key-0002"
# Set in the daemons' environment; must never be visible inside a sandbox.
DAEMON_SECRET = "SANDGATE_TEST_DAEMON_SECRET"

sys.path.insert(0, os.path.join(REPO, "clients", "python"))

S = {}  # module state: tmp, env, addr


def _run_sh(cmd, check=True):
    return subprocess.run([RUN_SH, cmd], env=S["env"], check=check, capture_output=True,
                          text=True, timeout=60)


def _logs():
    out = []
    for name in ("host.log", "gateway.log"):
        p = os.path.join(S["tmp"], "run", name)
        if os.path.exists(p):
            with open(p, errors="replace") as f:
                out.append("--- %s (tail)\n%s" % (name, f.read()[-4000:]))
    return "\n".join(out)


def _stop():
    r = _run_sh("stop", check=False)
    if r.returncode != 0:
        sys.stderr.write("run.sh stop failed: %s%s\n" % (r.stdout, r.stderr))


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-pyclient-")
    if not os.environ.get("SANDGATE_KEEP_TMP"):  # set it to keep logs for a post-mortem
        unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    stubs = os.path.join(tmp, "stubs")
    subprocess.run([os.path.join(REPO, "clients", "python", "gen.sh"), stubs], check=True,
                   timeout=60)
    os.environ["SANDGATE_PY_STUBS"] = stubs

    env = dict(os.environ)
    env.update(SANDGATE_RUN_DIR=os.path.join(tmp, "run"), SANDGATE_PORT="0",
               SANDGATE_HOST_PORT="0")
    env.setdefault("SANDGATE_BUILD", os.path.join(REPO, "build"))
    env[DAEMON_SECRET] = "daemon-only-value"
    S["env"] = env
    unittest.addModuleCleanup(_stop)  # registered first: runs even if start fails halfway
    r = _run_sh("start", check=False)
    if r.returncode != 0:
        raise RuntimeError("run.sh start failed (%d):\n%s%s\n%s"
                           % (r.returncode, r.stdout, r.stderr, _logs()))
    with open(os.path.join(tmp, "run", "gateway.port")) as f:
        S["addr"] = "127.0.0.1:" + f.read().strip()


class PythonClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import sandgate
        cls.sg = sandgate
        cls.demo = sandgate.Client(S["addr"], DEMO_KEY)
        cls.other = sandgate.Client(S["addr"], OTHER_KEY)
        cls.addClassCleanup(cls.demo.close)
        cls.addClassCleanup(cls.other.close)

    def sandbox(self, user="alice", **kw):
        """A fresh sandbox for this test, killed when it ends."""
        sb = self.sg.Sandbox.create(template="code-interpreter", user_id=user,
                                    task_id="py-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:6]),
                                    ttl_seconds=300, client=self.demo, **kw)
        self.addCleanup(sb.__exit__, None, None, None)
        return sb

    def assertCode(self, code, fn, *args, **kw):
        with self.assertRaises(self.sg.SandgateError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.code, code, str(cm.exception))
        return cm.exception

    def assertClean(self, ex):
        self.assertIsNone(ex.error, ex)
        self.assertIsNotNone(ex.end, ex)
        self.assertFalse(ex.end.timed_out, ex)

    # -- code ------------------------------------------------------------------

    def test_state_persists_across_three_calls(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("x = 20", timeout_seconds=10))
        self.assertClean(sb.run_code("import math\ny = x + 1", timeout_seconds=10))
        ex = sb.run_code("print(x, y)\nmath.sqrt(x * 5)", timeout_seconds=10)
        self.assertClean(ex)
        self.assertEqual(ex.logs["stdout"], "20 21\n")
        self.assertEqual(ex.text, "10.0")

    def test_final_expression_result(self):
        sb = self.sandbox()
        ex = sb.run_code("a = [3, 1, 2]\nsorted(a)", timeout_seconds=10)
        self.assertClean(ex)
        self.assertEqual(ex.results, [("text/plain", b"[1, 2, 3]")])
        # A statement last, or a final expression of None: no result.
        self.assertEqual(sb.run_code("b = 1", timeout_seconds=10).results, [])
        self.assertEqual(sb.run_code("None", timeout_seconds=10).results, [])

    def test_stdout_stderr_separated_and_streamed(self):
        sb = self.sandbox()
        seen = []
        ex = sb.run_code("import sys\n"
                         "print('out1')\n"
                         "print('err1', file=sys.stderr)\n"
                         "print('out2')\n"
                         "_ = sys.stderr.write('err2\\n')\n",
                         timeout_seconds=10, on_stdout=seen.append)
        self.assertClean(ex)
        self.assertEqual(ex.logs["stdout"], "out1\nout2\n")
        self.assertEqual(ex.logs["stderr"], "err1\nerr2\n")
        self.assertEqual("".join(seen), "out1\nout2\n")
        self.assertEqual(ex.end.output_bytes_total, len("out1\nout2\nerr1\nerr2\n"))

    def test_exception_with_traceback_and_context_survives(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("kept = 'still here'", timeout_seconds=10))
        ex = sb.run_code("def f():\n    return {}['missing']\nf()", timeout_seconds=10)
        self.assertIsNotNone(ex.error)
        self.assertEqual(ex.error.name, "KeyError")
        self.assertEqual(ex.error.value, "'missing'")
        self.assertIn("Traceback (most recent call last)", ex.error.traceback)
        self.assertIn("in f", ex.error.traceback)
        self.assertFalse(ex.end.context_restarted)
        ex = sb.run_code("kept", timeout_seconds=10)
        self.assertClean(ex)
        self.assertEqual(ex.text, "'still here'")

    def test_timeout_then_next_call_works(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("before = 7", timeout_seconds=10))
        t0 = time.monotonic()
        ex = sb.run_code("import time\ntime.sleep(30)", timeout_seconds=1)
        took = time.monotonic() - t0
        self.assertTrue(ex.end.timed_out, ex)
        self.assertFalse(ex.end.context_restarted, ex)  # the interrupt was enough
        self.assertIsNotNone(ex.error)
        self.assertLess(took, 10, "a 1 s timeout took %.1f s" % took)
        ex = sb.run_code("before * 6", timeout_seconds=10)
        self.assertClean(ex)
        self.assertEqual(ex.text, "42")

    def test_client_cancel_interrupts_the_code(self):
        """A client that gives up on a RunCode cancels it; the cancel must
        reach the host through the gateway and interrupt the code, so the
        next call runs at once, in the same context."""
        sb = self.sandbox()
        self.assertClean(sb.run_code("before = 7", timeout_seconds=10))
        req = self.demo.pb.RunCodeRequest(
            sandbox_id=sb.sandbox_id, user_id=sb.user_id, timeout_seconds=60,
            code="print('started', flush=True)\nimport time\ntime.sleep(30)\n")
        events = self.demo.stream("RunCode", req, timeout=90)
        first = next(events)
        self.assertEqual(first.WhichOneof("event"), "stdout", first)
        events.close()   # the client's call.cancel()
        t0 = time.monotonic()
        ex = sb.run_code("before * 6", timeout_seconds=40)
        took = time.monotonic() - t0
        self.assertClean(ex)
        self.assertEqual(ex.text, "42")
        self.assertLess(took, 10, "the next call waited %.1f s: the cancel did not reach "
                                  "the running code" % took)

    def test_timeout_ignoring_interrupt_restarts_context(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("lost = 1", timeout_seconds=10))
        ex = sb.run_code("import time\n"
                         "while True:\n"
                         "    try:\n"
                         "        time.sleep(5)\n"
                         "    except KeyboardInterrupt:\n"
                         "        pass\n", timeout_seconds=1)
        self.assertTrue(ex.end.timed_out, ex)
        self.assertTrue(ex.end.context_restarted, ex)
        self.assertIn("state", ex.error.value)  # the agent is told its state is lost
        ex = sb.run_code("'lost' in globals()", timeout_seconds=10)
        self.assertClean(ex)
        self.assertEqual(ex.text, "False")

    def test_truncation_flag_and_byte_total(self):
        sb = self.sandbox()
        ex = sb.run_code("print('x' * 99999)", timeout_seconds=10, max_output_bytes=1000)
        self.assertIsNone(ex.error)
        self.assertTrue(ex.end.truncated, ex.end)
        self.assertEqual(ex.end.output_bytes_total, 100000)
        self.assertLessEqual(len(ex.logs["stdout"].encode()), 1000)
        self.assertTrue(ex.logs["stdout"].startswith("x" * 100))
        ex = sb.run_code("print('small')", timeout_seconds=10, max_output_bytes=1000)
        self.assertFalse(ex.end.truncated)
        self.assertEqual(ex.end.output_bytes_total, 6)

    def test_code_context_is_separate(self):
        sb = self.sandbox()
        ctx = sb.create_code_context(language="python")
        self.assertTrue(ctx.context_id)
        self.assertClean(ctx.run_code("only_here = 5", timeout_seconds=10))
        self.assertEqual(ctx.run_code("only_here * 2", timeout_seconds=10).text, "10")
        ex = sb.run_code("'only_here' in globals()", timeout_seconds=10)
        self.assertEqual(ex.text, "False")
        self.assertCode(grpc.StatusCode.NOT_FOUND, sb.run_code, "1", context="no-such-ctx")

    def test_environment_is_only_what_create_sets(self):
        sb = self.sandbox(env={"TASK_TOKEN": "t0k"})
        ex = sb.run_code("import os\n(os.environ.get('TASK_TOKEN'), os.environ.get(%r))"
                         % DAEMON_SECRET, timeout_seconds=10)
        self.assertClean(ex)
        self.assertEqual(ex.text, "('t0k', None)")
        _, out, _ = sb.exec("env", timeout_seconds=10)
        self.assertNotIn(DAEMON_SECRET, out)

    # -- exec and files --------------------------------------------------------

    def test_exec_exit_code(self):
        sb = self.sandbox()
        code, out, err = sb.exec("echo hello; echo oops >&2; exit 3", timeout_seconds=10)
        self.assertEqual((code, out, err), (3, "hello\n", "oops\n"))
        res = sb.exec("true", timeout_seconds=10)
        self.assertEqual(res.exit_code, 0)
        self.assertFalse(res.info.timed_out)

    def test_file_round_trip(self):
        sb = self.sandbox()
        data = bytes(range(256)) * 40
        self.assertEqual(sb.write_file("dir/blob.bin", data), len(data))
        self.assertEqual(sb.read_file("dir/blob.bin"), data)
        # The same file from inside: code sees what the API wrote, and back.
        ex = sb.run_code("d = open('dir/blob.bin', 'rb').read()\n"
                         "open('made.txt', 'w').write('from code')\nlen(d)", timeout_seconds=10)
        self.assertEqual(ex.text, str(len(data)))
        self.assertEqual(sb.read_file("made.txt"), b"from code")
        self.assertCode(grpc.StatusCode.NOT_FOUND, sb.read_file, "does/not/exist")

    # -- lifecycle, auth, ownership --------------------------------------------

    def test_kill_then_not_found(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("1", timeout_seconds=10))
        sb.kill()
        self.assertCode(grpc.StatusCode.NOT_FOUND, sb.run_code, "1", timeout_seconds=10)
        self.assertCode(grpc.StatusCode.NOT_FOUND, sb.refresh)
        self.assertCode(grpc.StatusCode.NOT_FOUND, sb.kill)

    def test_context_manager_kills(self):
        with self.sg.Sandbox.create(user_id="alice", task_id="py-with", client=self.demo) as sb:
            self.assertEqual(sb.run_code("2 + 2", timeout_seconds=10).text, "4")
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.sg.Sandbox.connect, sb.sandbox_id,
                        "alice", self.demo)
        with self.assertRaises(ZeroDivisionError):
            with self.sg.Sandbox.create(user_id="alice", task_id="py-with2",
                                        client=self.demo) as sb2:
                1 / 0
        self.assertCode(grpc.StatusCode.NOT_FOUND, sb2.refresh)

    def test_wrong_key_unauthenticated(self):
        sb = self.sandbox()
        with self.sg.Client(S["addr"], "sg-wrong-key-9999") as bad:
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED, self.sg.Sandbox.create,
                            user_id="alice", task_id="py-badkey", client=bad)
            foreign = self.sg.Sandbox(bad, sb.info, "alice")
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED, foreign.run_code, "1")
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED, foreign.kill)
        self.assertEqual(sb.run_code("3", timeout_seconds=10).text, "3")  # untouched

    def test_other_tenant_gets_not_found(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("secret = 'demo data'", timeout_seconds=10))
        foreign = self.sg.Sandbox(self.other, sb.info, "alice")  # same id, same user name
        for fn, args in ((foreign.run_code, ("secret",)), (foreign.refresh, ()),
                         (foreign.read_file, ("x",)), (foreign.write_file, ("x", b"1")),
                         (foreign.exec, ("id",)), (foreign.create_code_context, ()),
                         (foreign.kill, ())):
            e = self.assertCode(grpc.StatusCode.NOT_FOUND, fn, *args)
            self.assertNotIn("demo", e.message)
        # Exactly as for an id that does not exist.
        info = type(sb.info)(sandbox_id="local-" + "0" * 32)
        missing = self.sg.Sandbox(self.demo, info, "alice")
        self.assertCode(grpc.StatusCode.NOT_FOUND, missing.run_code, "1")
        self.assertEqual(sb.run_code("secret", timeout_seconds=10).text, "'demo data'")

    def test_other_user_permission_denied(self):
        sb = self.sandbox(user="alice")
        bob = self.sg.Sandbox(self.demo, sb.info, "bob")
        for fn, args in ((bob.run_code, ("1",)), (bob.refresh, ()), (bob.read_file, ("x",)),
                         (bob.exec, ("id",)), (bob.kill, ())):
            self.assertCode(grpc.StatusCode.PERMISSION_DENIED, fn, *args)
        self.assertEqual(sb.run_code("5", timeout_seconds=10).text, "5")

    def test_list_is_own_sandboxes_only(self):
        sb = self.sandbox(user="alice")

        def ids(user, client):
            return [s.sandbox_id for s in self.sg.Sandbox.list(user, client, timeout=10)]
        self.assertIn(sb.sandbox_id, ids("alice", self.demo))
        self.assertNotIn(sb.sandbox_id, ids("bob", self.demo))      # another user
        self.assertNotIn(sb.sandbox_id, ids("alice", self.other))   # another tenant

    def test_policy_denial_carries_reason_and_rule(self):
        e = self.assertCode(grpc.StatusCode.PERMISSION_DENIED, self.sg.Sandbox.create,
                            user_id="alice", task_id="py-egress", egress=[("example.com", 443)],
                            client=self.demo)
        self.assertIsInstance(e, self.sg.PermissionDeniedError)
        self.assertEqual(e.reason, "POLICY_DENIED")
        self.assertEqual(e.domain, "sandgate")
        self.assertTrue(e.rule, "ErrorInfo has no rule: %r" % e.metadata)
        self.assertEqual(e.metadata.get("rule"), e.rule)


if __name__ == "__main__":
    unittest.main(verbosity=2)
