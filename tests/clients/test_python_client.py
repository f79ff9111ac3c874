#!/usr/bin/python3
"""The installed `sandgate` package against a real host + gateway.

Installs clients/python into a fresh venv as docs/clients.md says (pyvenv.py:
--system-site-packages, pip --no-index --no-build-isolation), re-runs itself
with the venv's interpreter, checks `sandgate` comes from site-packages, and
starts deploy/local/run.sh on ephemeral ports with a test policy (the local
one with a 64 KiB file cap). Then, through the gateway: state across calls,
results by mime type, streaming callbacks, errors with tracebacks, timeouts,
truncation, contexts, commands, files, set_timeout, list/connect, `with`
killing, the asyncio twin, configuration from the environment, and each
exception class decoded from the status and its ErrorInfo.

Env: SANDGATE_BUILD (build dir with bin/); SANDGATE_KEEP_TMP=1 keeps the
temp dir (daemon logs).
"""
import asyncio
import contextlib
import os
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyvenv  # noqa: E402

TMP = pyvenv.reexec_in_venv(__file__)

import sandgate  # noqa: E402

DEMO_KEY = "sg-demo-key-0001"
OTHER_KEY = "sg-other-key-0002"
DAEMON_SECRET = "SANDGATE_TEST_DAEMON_SECRET"  # in the daemons' env; never in a sandbox
D = pyvenv.Daemons(TMP, pyvenv.local_policy("    file_bytes: 64KiB\n"),
                   env={DAEMON_SECRET: "daemon-only-value"})
# The gvisor run (client_python_gvisor): the second and third daemon pairs
# (LostTest, TLSTest) create one or two sandboxes each, so they warm one
# gVisor sandbox per template instead of the shipped pools (each costs ~110
# MiB and 2 s+ of CPU under ptrace). The process run keeps the shipped pools.
SMALL_POOL = {"SANDGATE_POOL_SIZE": "1"} if pyvenv.drivers.is_gvisor() else {}


def setUpModule():
    pyvenv.assert_installed(sandgate)
    unittest.addModuleCleanup(D.stop)  # first: runs even if start fails halfway
    D.start()


class Base(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.demo = sandgate.Client(D.addr, DEMO_KEY)
        cls.other = sandgate.Client(D.addr, OTHER_KEY)
        cls.addClassCleanup(cls.demo.close)
        cls.addClassCleanup(cls.other.close)

    def task(self):
        return "py-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:6])

    def sandbox(self, user="alice", **kw):
        """A fresh sandbox for this test, killed when it ends."""
        sb = sandgate.Sandbox.create(template="code-interpreter", user_id=user,
                                     task_id=self.task(), ttl_seconds=300, client=self.demo, **kw)
        self.addCleanup(sb.__exit__, None, None, None)
        return sb

    def assertRaisesSg(self, cls, fn, *args, **kw):
        with self.assertRaises(sandgate.SandgateError) as cm:
            fn(*args, **kw)
        self.assertIs(type(cm.exception), cls, "%r (want %s)" % (cm.exception, cls.__name__))
        return cm.exception

    def assertClean(self, ex):
        self.assertIsNone(ex.error, ex)
        self.assertIsNotNone(ex.end, ex)
        self.assertFalse(ex.timed_out, ex)


class CodeTest(Base):

    def test_state_persists_across_calls(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("x = 20", timeout=10))
        self.assertClean(sb.run_code("import math\ny = x + 1", timeout=10))
        ex = sb.run_code("print(x, y)\nmath.sqrt(x * 5)", timeout=10)
        self.assertClean(ex)
        self.assertEqual(ex.logs.stdout, "20 21\n")
        self.assertEqual(ex.text, "10.0")
        self.assertEqual([r.mime_type for r in ex.results], ["text/plain"])
        self.assertTrue(ex.results[0].is_main_result)
        self.assertGreater(ex.duration_ms, 0)

    def test_results_by_mime_type(self):
        sb = self.sandbox()
        # The sandbox root has no /etc/matplotlibrc (Debian's matplotlib looks
        # there); one in the working directory is found first.
        sb.files.write("matplotlibrc", "backend: Agg\n")
        ex = sb.run_code("import matplotlib\n"
                         "import matplotlib.pyplot as plt\n"
                         "plt.plot([1, 2, 3])\n'done'", timeout=30)
        self.assertClean(ex)
        by = {r.mime_type: r for r in ex.results}
        self.assertEqual(by["text/plain"].text, "'done'")
        self.assertIsNone(by["text/plain"].png)
        png = by["image/png"].png
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"), png[:16])
        # A figure's result also has its repr (as in a notebook).
        self.assertIn("Figure", by["image/png"].text)
        self.assertEqual(ex.text, "'done'")
        self.assertEqual(sb.run_code("b = 1", timeout=10).results, [])

    def test_streaming_callbacks(self):
        sb = self.sandbox()
        seen = []
        ex = sb.run_code("import sys, time\n"
                         "print('out1', flush=True)\n"
                         "print('err1', file=sys.stderr, flush=True)\n"
                         "time.sleep(0.3)\n"
                         "print('out2')\n"
                         "1 / 0\n",
                         timeout=10,
                         on_stdout=lambda s: seen.append(("out", s, time.monotonic())),
                         on_stderr=lambda s: seen.append(("err", s, time.monotonic())),
                         on_result=lambda r: seen.append(("res", r, time.monotonic())),
                         on_error=lambda e: seen.append(("exc", e.name, time.monotonic())))
        done = time.monotonic()
        self.assertEqual(ex.logs.stdout, "out1\nout2\n")
        self.assertEqual(ex.logs.stderr, "err1\n")
        self.assertEqual("".join(s for k, s, _ in seen if k == "out"), "out1\nout2\n")
        self.assertEqual([s for k, s, _ in seen if k == "exc"], ["ZeroDivisionError"])
        # out1 arrived while the code still ran (before the 0.3 s sleep ended).
        first = next(t for k, s, t in seen if k == "out")
        self.assertLess(first, done - 0.2, "stdout was not streamed")

    def test_error_with_traceback_and_context_survives(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("kept = 'still here'", timeout=10))
        ex = sb.run_code("def f():\n    return {}['missing']\nf()", timeout=10)
        self.assertEqual(ex.error.name, "KeyError")
        self.assertEqual(ex.error.value, "'missing'")
        self.assertIn("Traceback (most recent call last)", ex.error.traceback)
        self.assertIn("in f", ex.error.traceback)
        self.assertFalse(ex.context_restarted)
        self.assertEqual(sb.run_code("kept", timeout=10).text, "'still here'")

    def test_timeout_then_next_call_works(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("before = 7", timeout=10))
        t0 = time.monotonic()
        ex = sb.run_code("import time\ntime.sleep(30)", timeout=1)
        self.assertTrue(ex.timed_out, ex)
        self.assertFalse(ex.context_restarted, ex)
        self.assertIsNotNone(ex.error)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(sb.run_code("before * 6", timeout=10).text, "42")

    def test_raising_callback_cancels_and_interrupts_the_code(self):
        """A callback that raises ends run_code: the cancel must reach the
        host through the gateway and interrupt the code, so the next call in
        the same context runs at once."""
        sb = self.sandbox()
        self.assertClean(sb.run_code("before = 7", timeout=10))

        class Stop(Exception):
            pass

        def on_out(s):
            raise Stop(s)
        with self.assertRaises(Stop):
            sb.run_code("print('started', flush=True)\nimport time\ntime.sleep(30)\n"
                        "done = True", timeout=60, on_stdout=on_out)
        t0 = time.monotonic()
        ex = sb.run_code("(before * 6, 'done' in globals())", timeout=40)
        took = time.monotonic() - t0
        self.assertEqual(ex.text, "(42, False)")
        self.assertLess(took, 10, "the next call waited %.1f s: the cancel did not reach "
                                  "the running code" % took)

    def test_timeout_ignoring_interrupt_restarts_context(self):
        sb = self.sandbox()
        self.assertClean(sb.run_code("lost = 1", timeout=10))
        ex = sb.run_code("import time\nwhile True:\n    try:\n        time.sleep(5)\n"
                         "    except KeyboardInterrupt:\n        pass\n", timeout=1)
        self.assertTrue(ex.timed_out and ex.context_restarted, ex)
        self.assertEqual(sb.run_code("'lost' in globals()", timeout=10).text, "False")

    def test_truncation(self):
        sb = self.sandbox()
        ex = sb.run_code("print('x' * 99999)", timeout=10, max_output_bytes=1000)
        self.assertIsNone(ex.error)
        self.assertTrue(ex.truncated)
        self.assertEqual(ex.output_bytes_total, 100000)
        self.assertLessEqual(len(ex.logs.stdout.encode()), 1000)
        ex = sb.run_code("print('small')", timeout=10, max_output_bytes=1000)
        self.assertFalse(ex.truncated)

    def test_code_context_is_separate(self):
        sb = self.sandbox()
        ctx = sb.create_code_context()
        self.assertTrue(ctx.context_id)
        self.assertClean(ctx.run_code("only_here = 5", timeout=10))
        self.assertEqual(sb.run_code("only_here * 2", context=ctx, timeout=10).text, "10")
        self.assertEqual(sb.run_code("'only_here' in globals()", timeout=10).text, "False")
        e = self.assertRaisesSg(sandgate.NotFound, sb.run_code, "1", context="no-such-ctx")
        self.assertNotIsInstance(e, sandgate.SandboxNotFound)

    def test_code_context_list_restart_remove(self):
        sb = self.sandbox()
        ctx = sb.create_code_context()
        listed = sb.list_code_contexts()
        self.assertEqual([c.context_id for c in listed], ["default", ctx.context_id])
        self.assertEqual((listed[1].state, listed[1].language, listed[1].restarts),
                         ("idle", "python", 0))
        self.assertGreater(listed[1].created_at, 0)
        self.assertClean(ctx.run_code("kept = 1", timeout=10))
        again = sb.restart_code_context(ctx)
        self.assertEqual(again.context_id, ctx.context_id)
        self.assertEqual(ctx.run_code("'kept' in globals()", timeout=10).text, "False")
        self.assertEqual(sb.list_code_contexts()[1].restarts, 1)
        sb.remove_code_context(ctx)
        self.assertEqual([c.context_id for c in sb.list_code_contexts()], ["default"])
        self.assertRaisesSg(sandgate.NotFound, sb.run_code, "1", context=ctx)
        self.assertRaisesSg(sandgate.FailedPrecondition, sb.remove_code_context, "default")

    def test_environment_is_only_what_create_sets(self):
        sb = self.sandbox(env={"TASK_TOKEN": "t0k"})
        ex = sb.run_code("import os\n(os.environ.get('TASK_TOKEN'), os.environ.get(%r))"
                         % DAEMON_SECRET, timeout=10)
        self.assertEqual(ex.text, "('t0k', None)")
        self.assertNotIn(DAEMON_SECRET, sb.commands.run("env", timeout=10).stdout)


class CommandsFilesTest(Base):

    def test_commands_run(self):
        sb = self.sandbox()
        got = []
        res = sb.commands.run("echo hello; echo oops >&2; exit 3", timeout=10,
                              on_stdout=got.append)
        self.assertEqual((res.exit_code, res.stdout, res.stderr), (3, "hello\n", "oops\n"))
        self.assertFalse(res.ok)
        self.assertEqual("".join(got), "hello\n")
        code, out, _ = sb.commands.run("true", timeout=10)
        self.assertEqual((code, out), (0, ""))
        res = sb.commands.run("sleep 30", timeout=1)
        self.assertTrue(res.timed_out, res)

    def test_files_round_trip(self):
        sb = self.sandbox()
        data = bytes(range(256)) * 40
        self.assertEqual(sb.files.write("dir/blob.bin", data), len(data))
        self.assertEqual(sb.files.read("dir/blob.bin", format="bytes"), data)
        sb.files.write("notes.txt", "héllo")
        self.assertEqual(sb.files.read("notes.txt"), "héllo")
        ex = sb.run_code("open('made.txt', 'w').write('from code')\n"
                         "len(open('dir/blob.bin', 'rb').read())", timeout=10)
        self.assertEqual(ex.text, str(len(data)))
        self.assertEqual(sb.files.read("made.txt"), "from code")
        self.assertRaisesSg(sandgate.NotFound, sb.files.read, "does/not/exist")

    def test_path_out_of_workspace_is_invalid_argument(self):
        sb = self.sandbox()
        e = self.assertRaisesSg(sandgate.InvalidArgument, sb.files.read, "../../etc/passwd")
        self.assertNotIn("/workspace/", e.message.replace("/workspace", "", 1))
        self.assertRaisesSg(sandgate.InvalidArgument, sb.files.write, "/etc/x", b"1")

    def test_file_over_the_cap_is_quota_exceeded(self):
        sb = self.sandbox()
        e = self.assertRaisesSg(sandgate.QuotaExceeded, sb.files.write, "big", b"x" * 70000)
        self.assertEqual(e.reason, "QUOTA_EXCEEDED")
        self.assertEqual(e.rule, "limits.file_bytes")
        self.assertEqual(sb.files.write("small", b"x" * 1000), 1000)


class WorkspaceFilesTest(Base):

    def test_streamed_upload_download_resume(self):
        sb = self.sandbox()
        data = os.urandom(5 * 1024 * 1024 + 333)
        r = sb.files.upload("up/big.bin", data, chunk_size=1 << 20)
        self.assertEqual((r.size, r.bytes_written), (len(data), len(data)))
        self.assertEqual(sb.files.download("up/big.bin", chunk_size=1 << 20), data)
        self.assertEqual(sb.files.download("up/big.bin", offset=4000000), data[4000000:])
        # resume: keep the first 3 MiB, send the rest; a file object works too
        cut = 3 << 20
        sb.files.upload("up/res.bin", data[:cut])
        import io
        r = sb.files.upload("up/res.bin", io.BytesIO(data[cut:]), offset=cut,
                            size=len(data))
        self.assertEqual((r.size, r.bytes_written), (len(data), len(data) - cut))
        self.assertEqual(sb.files.download("up/res.bin"), data)
        chunks = list(sb.files.download_chunks("up/res.bin", chunk_size=1 << 20))
        self.assertEqual(len(chunks), 6)
        self.assertTrue(chunks[-1].last)

    def test_list_stat_mkdir_rename_remove(self):
        sb = self.sandbox()
        pb = self.demo.pb
        info = sb.files.make_dir("a/b", parents=True)
        self.assertEqual((info.path, info.type), ("a/b", pb.FILE_TYPE_DIRECTORY))
        self.assertRaisesSg(sandgate.AlreadyExists, sb.files.make_dir, "a/b")
        sb.files.write("a/b/f.txt", "hi")
        ls = sb.files.list("a", recursive=True)
        self.assertEqual([(e.path, e.size) for e in ls.entries], [("a/b", 0), ("a/b/f.txt", 2)])
        self.assertFalse(ls.truncated)
        self.assertEqual(sb.files.stat("a/b/f.txt").size, 2)
        self.assertTrue(sb.files.exists("a/b/f.txt"))
        self.assertEqual(sb.files.rename("a/b/f.txt", "a/g.txt").path, "a/g.txt")
        self.assertFalse(sb.files.exists("a/b/f.txt"))
        self.assertRaisesSg(sandgate.FailedPrecondition, sb.files.rename, "a/g.txt", "a/b",
                            overwrite=True)
        self.assertRaisesSg(sandgate.FailedPrecondition, sb.files.remove, "a")
        self.assertEqual(sb.files.remove("a", recursive=True), 3)
        self.assertRaisesSg(sandgate.NotFound, sb.files.stat, "a")
        self.assertRaisesSg(sandgate.InvalidArgument, sb.files.list, "../etc")

    def test_watch_sees_what_code_writes(self):
        sb = self.sandbox()
        pb = self.demo.pb
        events = sb.files.watch(recursive=True, request_timeout=60)
        self.assertEqual(next(events).type, pb.FILE_EVENT_READY)
        sb.run_code("open('w.txt', 'w').write('x')\nimport os; os.remove('w.txt')", timeout=10)
        seen = []
        for ev in events:
            seen.append((ev.type, ev.path))
            if ev.type == pb.FILE_EVENT_DELETE:
                break
        events.close()
        self.assertEqual(seen, [(pb.FILE_EVENT_CREATE, "w.txt"), (pb.FILE_EVENT_MODIFY, "w.txt"),
                                (pb.FILE_EVENT_DELETE, "w.txt")])


class ProcessesTest(Base):

    def test_background_process_and_pty(self):
        sb = self.sandbox()
        p = sb.commands.run("read line; echo got:$line; sleep 30", background=True)
        self.assertIsInstance(p, sandgate.Process)
        self.assertEqual([x.process_id for x in sb.commands.list()], [p.process_id])
        self.assertEqual(p.send_stdin("hi\n"), 0)
        first = []
        with contextlib.closing(p.attach()) as evs:
            for ev in evs:
                if ev.WhichOneof("event") == "stdout":
                    first.append(ev.stdout.data)
                    if b"".join(first) == b"got:hi\n":
                        break
        p.signal("TERM")
        info = p.wait(timeout=20)
        self.assertEqual(info.state, sb.client.pb.PROCESS_STATE_EXITED)
        self.assertEqual(info.exit.signal, 15)
        out = sb.commands.connect(p.process_id).output()
        self.assertEqual(out.stdout, b"got:hi\n")
        self.assertEqual(out.exit.signal, 15)
        with self.assertRaises(sandgate.FailedPrecondition):
            p.send_stdin("late")
        with self.assertRaises(sandgate.InvalidArgument) as cm:
            sb.commands.connect("bogus").kill()
        self.assertIn("process_id", str(cm.exception))
        t = sb.pty.create(rows=10, cols=50)
        t.send_stdin("stty size\n")
        seen = b""
        with contextlib.closing(t.attach()) as evs:
            for ev in evs:
                seen += ev.stdout.data if ev.WhichOneof("event") == "stdout" else b""
                if b"10 50" in seen:
                    break
        t.resize(33, 77)
        t.send_stdin("stty size; exit 4\n")
        out = t.output()
        self.assertIn(b"10 50", out.stdout)
        self.assertIn(b"33 77", out.stdout)
        self.assertEqual(out.exit_code, 4)


class LabelsTest(Base):

    def test_metadata_and_pages(self):
        run = uuid.uuid4().hex[:6]
        made = [self.sandbox(metadata={"run": run, "n": str(i), "odd": str(i % 2)})
                for i in range(5)]
        self.assertEqual(made[0].info.metadata, {"run": run, "n": "0", "odd": "0"})
        self.assertEqual(made[1].get_info().metadata["n"], "1")
        page = sandgate.Sandbox.list(user_id="alice", metadata={"run": run}, page_size=2,
                                     client=self.demo)
        self.assertEqual(len(page), 2)
        self.assertTrue(page.next_page_token)
        every = sandgate.Sandbox.list_all(user_id="alice", metadata={"run": run}, page_size=2,
                                          client=self.demo)
        self.assertEqual([s.sandbox_id for s in every], sorted(s.sandbox_id for s in made))
        odd = sandgate.Sandbox.list_all(user_id="alice", metadata={"run": run, "odd": "1"},
                                        client=self.demo)
        self.assertEqual(sorted(s.metadata["n"] for s in odd), ["1", "3"])
        self.assertRaisesSg(sandgate.InvalidArgument, sandgate.Sandbox.list, user_id="alice",
                            page_token="nope", client=self.demo)


class LifecycleTest(Base):

    def test_with_kills_in_finally(self):
        with sandgate.Sandbox.create(user_id="alice", task_id=self.task(), client=self.demo) as sb:
            self.assertEqual(sb.run_code("2 + 2", timeout=10).text, "4")
        self.assertRaisesSg(sandgate.SandboxNotFound, sandgate.Sandbox.connect, sb.sandbox_id,
                            user_id="alice", client=self.demo)
        with self.assertRaises(ZeroDivisionError):
            with sandgate.Sandbox.create(user_id="alice", task_id=self.task(),
                                         client=self.demo) as sb2:
                1 / 0
        self.assertFalse(sb2.is_running())

    def test_kill_then_sandbox_not_found(self):
        sb = self.sandbox()
        self.assertTrue(sb.kill())
        self.assertRaisesSg(sandgate.SandboxNotFound, sb.run_code, "1", timeout=10)
        self.assertRaisesSg(sandgate.SandboxNotFound, sb.get_info)
        self.assertRaisesSg(sandgate.SandboxNotFound, sb.commands.run, "true")
        self.assertFalse(sb.kill())  # already gone: False, no exception

    def test_connect_list_set_timeout(self):
        sb = self.sandbox()
        sb.run_code("v = 'shared'", timeout=10)
        again = sandgate.Sandbox.connect(sb.sandbox_id, user_id="alice", client=self.demo)
        self.assertEqual(again.run_code("v", timeout=10).text, "'shared'")
        info = again.info
        self.assertEqual((info.sandbox_id, info.user_id, info.state),
                         (sb.sandbox_id, "alice", "running"))
        before = info.expires_at
        new = sb.set_timeout(1200)
        self.assertGreater(new.expires_at, before)
        self.assertAlmostEqual(new.expires_at.timestamp() - time.time(), 1200, delta=30)
        listed = sandgate.Sandbox.list(user_id="alice", client=self.demo)
        self.assertIn(sb.sandbox_id, [s.sandbox_id for s in listed])
        self.assertEqual(listed.unreachable_hosts, [])
        self.assertNotIn(sb.sandbox_id, [s.sandbox_id for s in
                                         sandgate.Sandbox.list(user_id="bob", client=self.demo)])
        self.assertNotIn(sb.sandbox_id, [s.sandbox_id for s in
                                         sandgate.Sandbox.list(user_id="alice",
                                                               client=self.other)])

    def test_same_task_returns_same_sandbox(self):
        t = self.task()
        a = sandgate.Sandbox.create(user_id="alice", task_id=t, client=self.demo)
        self.addCleanup(a.kill)
        b = sandgate.Sandbox.create(user_id="alice", task_id=t, client=self.demo)
        self.assertEqual(a.sandbox_id, b.sandbox_id)

    def test_config_from_environment(self):
        env = {"SANDGATE_ADDR": D.addr, "SANDGATE_API_KEY": DEMO_KEY, "SANDGATE_USER": "carol"}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            with sandgate.Sandbox.create(task_id=self.task()) as sb:  # owns its client
                self.assertEqual(sb.user_id, "carol")
                self.assertEqual(sb.info.user_id, "carol")
                self.assertEqual(sb.run_code("6 * 7").text, "42")
            os.environ["SANDGATE_API_KEY"] = ""
            with self.assertRaises(ValueError):
                sandgate.Sandbox.create(task_id="no-key")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class ErrorsTest(Base):

    def test_wrong_key_unauthenticated(self):
        sb = self.sandbox()
        with sandgate.Client(D.addr, "sg-wrong-key-9999") as bad:
            self.assertRaisesSg(sandgate.Unauthenticated, sandgate.Sandbox.create,
                                user_id="alice", task_id="py-badkey", client=bad)
            foreign = sandgate.Sandbox(bad, sb._info, "alice")
            self.assertRaisesSg(sandgate.Unauthenticated, foreign.run_code, "1")
            self.assertRaisesSg(sandgate.Unauthenticated, foreign.kill)
        self.assertEqual(sb.run_code("3", timeout=10).text, "3")

    def test_other_tenant_sandbox_not_found(self):
        sb = self.sandbox()
        foreign = sandgate.Sandbox(self.other, sb._info, "alice")
        for fn, args in ((foreign.run_code, ("1",)), (foreign.get_info, ()),
                         (foreign.files.read, ("x",)), (foreign.commands.run, ("id",)),
                         (foreign.create_code_context, ()), (foreign.set_timeout, (60,))):
            self.assertRaisesSg(sandgate.SandboxNotFound, fn, *args)
        self.assertFalse(foreign.kill())
        missing = sandgate.Sandbox(self.demo, type(sb._info)(sandbox_id="local-" + "0" * 32),
                                   "alice")
        self.assertRaisesSg(sandgate.SandboxNotFound, missing.run_code, "1")
        self.assertTrue(sb.is_running())

    def test_other_user_permission_denied(self):
        sb = self.sandbox(user="alice")
        bob = sandgate.Sandbox(self.demo, sb._info, "bob")
        for fn, args in ((bob.run_code, ("1",)), (bob.get_info, ()), (bob.kill, ())):
            e = self.assertRaisesSg(sandgate.PermissionDenied, fn, *args)
            self.assertNotIsInstance(e, sandgate.PolicyDenied)

    def test_policy_denial_carries_reason_and_rule(self):
        e = self.assertRaisesSg(sandgate.PolicyDenied, sandgate.Sandbox.create, user_id="alice",
                                task_id="py-egress", egress=[("example.com", 443)],
                                client=self.demo)
        self.assertIsInstance(e, sandgate.PermissionDenied)
        self.assertEqual(e.reason, "POLICY_DENIED")
        self.assertEqual(e.domain, "sandgate")
        self.assertTrue(e.rule)
        self.assertEqual(e.metadata.get("rule"), e.rule)
        self.assertIn(e.rule, str(e))
        self.assertRaisesSg(sandgate.PolicyDenied, sandgate.Sandbox.create, user_id="alice",
                            task_id="py-tmpl", template="no-such-template", client=self.demo)

    def test_bad_strings_are_invalid_argument_naming_the_field(self):
        e = self.assertRaisesSg(sandgate.InvalidArgument, sandgate.Sandbox.create,
                                user_id="bad user", task_id="py-bad", client=self.demo)
        self.assertIn("user_id", e.message)
        e = self.assertRaisesSg(sandgate.InvalidArgument, sandgate.Sandbox.create,
                                user_id="alice", task_id="t\x00", client=self.demo)
        self.assertIn("task_id", e.message)

    def test_client_deadline_is_timeout(self):
        sb = self.sandbox()
        e = self.assertRaisesSg(sandgate.Timeout, sb.run_code, "import time\ntime.sleep(20)",
                                timeout=20, request_timeout=0.5)
        self.assertFalse(e.retryable)
        self.assertEqual(sb.run_code("'alive'", timeout=20).text, "'alive'")

    def test_gateway_down_is_unavailable(self):
        with sandgate.Client("127.0.0.1:1", DEMO_KEY, timeout=2) as c:
            e = self.assertRaisesSg(sandgate.Unavailable, sandgate.Sandbox.list,
                                    user_id="alice", client=c)
            self.assertTrue(e.retryable)


class ErrorInfoMappingTest(unittest.TestCase):
    """Reasons the gateway sends in ErrorInfo pick the exception class, also
    ones (SANDBOX_LOST, HOST_UNAVAILABLE) this test's daemons cannot be made
    to produce on demand: an in-process server answers with each."""

    CASES = [  # (status, reason, rule, want)
        ("NOT_FOUND", "SANDBOX_LOST", "", sandgate.SandboxLost),
        ("UNAVAILABLE", "SANDBOX_LOST", "", sandgate.SandboxLost),
        ("UNAVAILABLE", "HOST_UNAVAILABLE", "", sandgate.HostUnavailable),
        ("UNAVAILABLE", "", "", sandgate.Unavailable),
        ("INVALID_ARGUMENT", "INVALID_ARGUMENT", "", sandgate.InvalidArgument),
        ("PERMISSION_DENIED", "POLICY_DENIED", "tenants.demo.network[0]", sandgate.PolicyDenied),
        ("PERMISSION_DENIED", "", "", sandgate.PermissionDenied),
        ("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "quotas.sandboxes_per_user",
         sandgate.QuotaExceeded),
        ("NOT_FOUND", "", "", sandgate.NotFound),
        ("DEADLINE_EXCEEDED", "", "", sandgate.Timeout),
        ("UNAUTHENTICATED", "", "", sandgate.Unauthenticated),
        ("INTERNAL", "", "", sandgate.SandgateError),
    ]

    def test_reasons_pick_the_class(self):
        import grpc
        from concurrent import futures
        from sandgate._rpc import epb, pb
        case = {}

        def answer(request, context):
            code, reason, rule, _ = case["now"]
            md = {"rule": rule} if rule else {}
            if reason == "SANDBOX_LOST":
                md["lost_at"] = "2026-12-01T10:00:00Z"
            st = epb.RpcStatus(code=getattr(grpc.StatusCode, code).value[0], message="m")
            if reason:
                info = epb.ErrorInfo(reason=reason, domain="sandgate", metadata=md)
                st.details.add(type_url="type.googleapis.com/google.rpc.ErrorInfo",
                               value=info.SerializeToString())
            context.set_trailing_metadata((("grpc-status-details-bin",
                                            st.SerializeToString()),))
            context.abort(getattr(grpc.StatusCode, code), "no such sandbox" if code ==
                          "NOT_FOUND" else "m")

        handler = grpc.method_handlers_generic_handler("sandgate.v1.Sandboxes", {
            "GetSandbox": grpc.unary_unary_rpc_method_handler(
                answer, request_deserializer=pb.GetSandboxRequest.FromString,
                response_serializer=pb.Sandbox.SerializeToString)})
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        with sandgate.Client("127.0.0.1:%d" % port, DEMO_KEY, timeout=5) as c:
            for row in self.CASES:
                case["now"] = row
                with self.subTest(row=row[:2]):
                    with self.assertRaises(sandgate.SandgateError) as cm:
                        sandgate.Sandbox.connect("local-x", user_id="u", client=c)
                    e = cm.exception
                    want = row[3]
                    if want is sandgate.NotFound:  # "no such sandbox" without a reason
                        want = sandgate.SandboxNotFound
                    self.assertIs(type(e), want, repr(e))
                    self.assertEqual(e.code.name, row[0])
                    self.assertEqual(e.reason, row[1] or None)
                    self.assertEqual(e.rule, row[2] or None)
                    if want is sandgate.SandboxLost:  # still "gone" to code that only knows that
                        self.assertIsInstance(e, sandgate.SandboxNotFound)
                        self.assertEqual(e.lost_at, "2026-12-01T10:00:00Z")


class LostTest(unittest.TestCase):
    """A real SANDBOX_LOST: its own daemons, stopped (SIGTERM: the host's
    sandboxes end with it) and started again with the same host name and
    state dir; the owner's next call raises SandboxLost."""

    def test_host_restart_loses_the_sandbox(self):
        d = pyvenv.Daemons(TMP, name="lost",
                           env=dict(SMALL_POOL, SANDGATE_HOST_NAME="lost" + uuid.uuid4().hex[:6]))
        self.addCleanup(d.stop)
        d.start()
        with sandgate.Client(d.addr, DEMO_KEY) as c:
            sb = sandgate.Sandbox.create(user_id="alice", task_id="py-lost", client=c)
            self.assertEqual(sb.run_code("1 + 1", timeout=10).text, "2")
        d.stop()
        d.start()  # new ports, same host name and journal
        with sandgate.Client(d.addr, DEMO_KEY) as c:
            lost = sandgate.Sandbox(c, sb._info, "alice")
            self.assertRaises(sandgate.SandboxLost, lost.run_code, "1", timeout=10)
            with self.assertRaises(sandgate.SandboxLost) as cm:
                lost.get_info()
            self.assertIsInstance(cm.exception, sandgate.SandboxNotFound)
            self.assertEqual(cm.exception.reason, "SANDBOX_LOST")
            self.assertTrue(cm.exception.lost_at, cm.exception.metadata)
            self.assertFalse(lost.kill())  # gone: False, as for any vanished sandbox
            # Another user of the tenant sees the plain never-existed answer.
            with self.assertRaises(sandgate.SandgateError) as cm:
                sandgate.Sandbox(c, sb._info, "bob").get_info()
            self.assertNotIsInstance(cm.exception, sandgate.SandboxLost)


def _openssl(d, *args):
    import subprocess
    subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True, timeout=60)


def make_pki(d, spiffe):
    """A CA, a server cert for 127.0.0.1 and a client cert for spiffe."""
    os.makedirs(d)
    _openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for name, san, usage in (("server", "IP:127.0.0.1", "serverAuth"),
                             ("client", "URI:" + spiffe, "clientAuth")):
        _openssl(d, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write("subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n"
                    % (san, usage))
        _openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext")
    os.symlink("ca.crt", os.path.join(d, "client_ca.crt"))


class TLSTest(unittest.TestCase):
    """The gateway on TLS with client certificates (run.sh's
    SANDGATE_GATEWAY_TLS_DIR): an API key over TLS, an mTLS tenant with no
    key, both from arguments (paths or PEM bytes) and from the environment."""

    SPIFFE = "spiffe://sandgate.test/agent/py"

    @classmethod
    def setUpClass(cls):
        pki = cls.pki = os.path.join(TMP, "pki")
        make_pki(pki, cls.SPIFFE)
        policy = pyvenv.local_policy() + ("  - id: spiffe\n    mtls: [\"%s\"]\n"
                                          "    templates: [code-interpreter]\n" % cls.SPIFFE)
        cls.d = pyvenv.Daemons(TMP, policy, env=dict(SMALL_POOL, SANDGATE_GATEWAY_TLS_DIR=pki),
                               name="tls")
        cls.addClassCleanup(cls.d.stop)
        cls.d.start()

    def f(self, name):
        return os.path.join(self.pki, name)

    def test_api_key_over_tls(self):
        with sandgate.Sandbox.create(user_id="alice", task_id="py-tls-key", addr=self.d.addr,
                                     api_key=DEMO_KEY, root_certificates=self.f("ca.crt")) as sb:
            self.assertEqual(sb.run_code("40 + 2", timeout=10).text, "42")

    def test_mtls_without_a_key(self):
        with open(self.f("client.key"), "rb") as k, open(self.f("client.crt"), "rb") as c:
            key, cert = k.read(), c.read()
        client = sandgate.Client(self.d.addr, root_certificates=self.f("ca.crt"),
                                 client_cert=cert, client_key=key)
        self.addCleanup(client.close)
        with sandgate.Sandbox.create(user_id="m", task_id="py-mtls", client=client) as sb:
            self.assertEqual(sb.run_code("'mtls'", timeout=10).text, "'mtls'")
            # The spiffe tenant's sandbox is not the demo tenant's.
            with sandgate.Client(self.d.addr, DEMO_KEY, root_certificates=self.f("ca.crt")) as demo:
                with self.assertRaises(sandgate.SandboxNotFound):
                    sandgate.Sandbox.connect(sb.sandbox_id, user_id="m", client=demo)

    def test_mtls_from_the_environment_sync_and_async(self):
        env = {"SANDGATE_ADDR": self.d.addr, "SANDGATE_CA_FILE": self.f("ca.crt"),
               "SANDGATE_CERT_FILE": self.f("client.crt"), "SANDGATE_KEY_FILE": self.f("client.key"),
               "SANDGATE_USER": "m", "SANDGATE_API_KEY": ""}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            self.assertEqual(sandgate.Sandbox.list().unreachable_hosts, [])

            async def go():
                async with sandgate.AsyncSandbox.create(task_id="py-mtls-env") as sb:
                    return (await sb.run_code("7 * 6", timeout=10)).text
            self.assertEqual(asyncio.run(go()), "42")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_wrong_trust_fails(self):
        # System roots do not know the test CA; plaintext to a TLS port fails too.
        with sandgate.Client(self.d.addr, DEMO_KEY, tls=True, timeout=5) as c:
            with self.assertRaises(sandgate.Unavailable):
                sandgate.Sandbox.list(user_id="alice", client=c)
        with sandgate.Client(self.d.addr, DEMO_KEY, timeout=5) as c:
            with self.assertRaises(sandgate.Unavailable):
                sandgate.Sandbox.list(user_id="alice", client=c)


class AsyncTest(Base):

    def test_async_files_and_labels(self):
        """The asyncio twins of Files' workspace calls and of labels/pages."""
        pbm = self.demo.pb

        async def scenario():
            async with sandgate.AsyncClient(D.addr, DEMO_KEY) as c:
                run = uuid.uuid4().hex[:6]
                made = []
                try:
                    for i in range(3):
                        made.append(await sandgate.AsyncSandbox.create(
                            user_id="alice", task_id=self.task() + str(i), client=c,
                            metadata={"arun": run, "n": str(i)}))
                    sb = made[0]
                    self.assertEqual(sb.info.metadata, {"arun": run, "n": "0"})
                    page = await sandgate.AsyncSandbox.list(user_id="alice", client=c,
                                                            metadata={"arun": run}, page_size=2)
                    self.assertEqual(len(page), 2)
                    self.assertTrue(page.next_page_token)
                    every = await sandgate.AsyncSandbox.list_all(
                        user_id="alice", client=c, metadata={"arun": run}, page_size=2)
                    self.assertEqual([s.sandbox_id for s in every],
                                     sorted(s.sandbox_id for s in made))
                    one = await sandgate.AsyncSandbox.list(user_id="alice", client=c,
                                                           metadata={"arun": run, "n": "2"})
                    self.assertEqual([s.sandbox_id for s in one], [made[2].sandbox_id])
                    with self.assertRaises(sandgate.InvalidArgument):
                        await sandgate.AsyncSandbox.list(user_id="alice", client=c,
                                                         page_token="nope")
                    f = sb.files
                    data = os.urandom(3 * (1 << 20) + 7)
                    up = await f.upload("d/big.bin", data, chunk_size=1 << 20)
                    self.assertEqual((up.size, up.bytes_written), (len(data), len(data)))
                    self.assertEqual(await f.download("d/big.bin"), data)
                    self.assertEqual(await f.download("d/big.bin", offset=10, length=20),
                                     data[10:30])
                    up = await f.upload("d/big.bin", data[:5], offset=len(data))
                    self.assertEqual(up.size, len(data) + 5)
                    info = await f.make_dir("x/y", parents=True)
                    self.assertEqual(info.type, pbm.FILE_TYPE_DIRECTORY)
                    self.assertTrue(await f.exists("x/y"))
                    self.assertFalse(await f.exists("x/nope"))
                    st = await f.stat("d/big.bin")
                    self.assertEqual((st.type, st.size), (pbm.FILE_TYPE_FILE, len(data) + 5))
                    ls = await f.list("", recursive=True)
                    self.assertIn("d/big.bin", [e.path for e in ls.entries])
                    r = await f.rename("d/big.bin", "x/y/moved.bin")
                    self.assertEqual(r.path, "x/y/moved.bin")
                    with self.assertRaises(sandgate.NotFound):
                        await f.stat("d/big.bin")
                    with self.assertRaises(sandgate.InvalidArgument):
                        await f.stat("../etc")
                    self.assertEqual(await f.remove("x", recursive=True), 3)
                    await f.make_dir("w")
                    events = f.watch("w")
                    first = await events.__anext__()
                    self.assertEqual(first.type, pbm.FILE_EVENT_READY)
                    await f.write("w/new.txt", "n")
                    seen = await asyncio.wait_for(events.__anext__(), 10)
                    self.assertEqual((seen.type, seen.path), (pbm.FILE_EVENT_CREATE, "w/new.txt"))
                    await events.aclose()
                finally:
                    for m in made:
                        await m.kill()
        asyncio.run(scenario())

    def test_async_twin(self):
        async def scenario():
            async with sandgate.AsyncClient(D.addr, DEMO_KEY) as c:
                chunks = []

                async def on_out(s):
                    chunks.append(s)
                async with sandgate.AsyncSandbox.create(user_id="alice", task_id=self.task(),
                                                        client=c) as sb:
                    await sb.run_code("z = 41", timeout=10)
                    ex = await sb.run_code("print('hi')\nz + 1", timeout=10, on_stdout=on_out)
                    self.assertEqual((ex.text, ex.logs.stdout, "".join(chunks)), ("42", "hi\n", "hi\n"))
                    ex = await sb.run_code("1/0", timeout=10)
                    self.assertEqual(ex.error.name, "ZeroDivisionError")
                    ctx = await sb.create_code_context()
                    self.assertEqual((await ctx.run_code("'z' in globals()")).text, "False")
                    self.assertEqual([x.context_id for x in await sb.list_code_contexts()],
                                     ["default", ctx.context_id])
                    await sb.restart_code_context()
                    self.assertEqual((await sb.run_code("'z' in globals()")).text, "False")
                    await sb.remove_code_context(ctx)
                    self.assertEqual(len(await sb.list_code_contexts()), 1)
                    res = await sb.commands.run("echo a; exit 2", timeout=10)
                    self.assertEqual((res.exit_code, res.stdout), (2, "a\n"))
                    await sb.files.write("f.txt", "async")
                    self.assertEqual(await sb.files.read("f.txt"), "async")
                    info = await sb.set_timeout(900)
                    self.assertEqual(info.state, "running")
                    listed = await sandgate.AsyncSandbox.list(user_id="alice", client=c)
                    self.assertIn(sb.sandbox_id, [s.sandbox_id for s in listed])
                    sid = sb.sandbox_id
                with self.assertRaises(sandgate.SandboxNotFound):
                    await sandgate.AsyncSandbox.connect(sid, user_id="alice", client=c)
                with self.assertRaises(sandgate.PolicyDenied):
                    await sandgate.AsyncSandbox.create(user_id="alice", task_id="a-egress",
                                                       egress=["example.com"], client=c)
                sb = await sandgate.AsyncSandbox.create(user_id="alice", task_id=self.task(),
                                                        client=c)

                async def stop(s):
                    raise KeyError("stop")
                with self.assertRaises(KeyError):
                    await sb.run_code("print('go', flush=True)\nimport time\ntime.sleep(30)",
                                      timeout=60, on_stdout=stop)
                t0 = time.monotonic()
                self.assertEqual((await sb.run_code("'next'", timeout=40)).text, "'next'")
                self.assertLess(time.monotonic() - t0, 10, "async cancel did not interrupt")
                self.assertTrue(await sb.kill())
                self.assertFalse(await sb.kill())
            async with sandgate.AsyncClient(D.addr, "sg-wrong-key-9999") as bad:
                with self.assertRaises(sandgate.Unauthenticated):
                    await sandgate.AsyncSandbox.list(user_id="alice", client=bad)
        asyncio.run(scenario())


if __name__ == "__main__":
    unittest.main(verbosity=2)
