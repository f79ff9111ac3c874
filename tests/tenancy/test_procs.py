#!/usr/bin/python3
"""Background processes and PTYs through the gateway (issue 17, point 2).

A background server process (python, reading stdin) is started with Exec
background: true, listed, attached twice at once (both attachers see the
same bytes at the same offsets), fed stdin, signalled (USR1 handled, TERM
ends it with its own exit code), waited for, and replayed from an offset
after it ended. A PTY running `sh` answers typed input (`stty size`, `tty`,
$TERM) and a ResizePty; a foreground PTY exec streams its terminal. A
timeout kills a process (timed_out); an output cap keeps the newest bytes
and an attach from 0 is told what was dropped; a stdin flood against a
process that never reads is refused with RESOURCE_EXHAUSTED while the
daemon answers other calls at once; the sandbox's death kills its
processes and ends their attach streams with the exit; the live-process
cap (policy limits.processes) holds. Bad input for every new field gets
INVALID_ARGUMENT naming it, an unknown process NOT_FOUND, and another
tenant's sandbox answers exactly as one that never existed.

Runs on either driver (tests/drivers.py): the host config passes through
drivers.host_config().
"""
import os
import sys
import threading
import time
import unittest
import uuid

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import drivers  # noqa: E402
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KA, KB = "pr-demo-key-1", "pr-other-key-2"
MAX_PROCS = 6

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
    limits: {processes: %d}
  - id: other
    api_keys: [%s]
    templates: [code-interpreter]
""" % (sg.key_hash(KA), MAX_PROCS, sg.key_hash(KB))

SERVER = r"""import signal, sys, os
def usr1(*a):
    sys.stdout.write("usr1\n"); sys.stdout.flush()
def term(*a):
    sys.stdout.write("bye\n"); sys.stdout.flush(); os._exit(3)
signal.signal(signal.SIGUSR1, usr1)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
for line in sys.stdin:
    sys.stdout.write("echo:" + line); sys.stdout.flush()
    sys.stderr.write("err:" + line); sys.stderr.flush()
print("eof", flush=True)
"""

S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-procs-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    with open(os.path.join(sg.REPO, "deploy", "local", "host.yaml")) as f:
        hc = os.path.join(tmp, "host.yaml")
        with open(hc, "w") as g:
            g.write(drivers.host_config(f.read()))
    S["d"] = d = sg.Daemons(tmp, POLICY, env={"SANDGATE_HOST_CONFIG": hc,
                                              "SANDGATE_POOL_SIZE": "2"})
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = api = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(api.close)
    S["sb"] = api.create(KA, "u1", "procs-" + uuid.uuid4().hex[:6])
    S["other"] = api.create(KB, "u9", "procs-other-" + uuid.uuid4().hex[:6])
    for sid, key, user in ((S["sb"].sandbox_id, KA, "u1"), (S["other"].sandbox_id, KB, "u9")):
        unittest.addModuleCleanup(lambda s=sid, k=key, u=user: api.status(
            "KillSandbox", api.pb.KillSandboxRequest(sandbox_id=s, user_id=u), k))


class Attacher(threading.Thread):
    """One AttachProcess stream read on its own thread."""

    def __init__(self, api, sid, pid, key=KA, user="u1", **offsets):
        super().__init__(daemon=True)
        self.events, self.error, self.done = [], None, threading.Event()
        req = api.pb.AttachProcessRequest(sandbox_id=sid, user_id=user, process_id=pid,
                                          **offsets)
        self.stream = api.stub.AttachProcess(req, metadata=api.md(key), timeout=120)
        self.start()

    def run(self):
        try:
            for ev in self.stream:
                self.events.append(ev)
        except grpc.RpcError as e:
            self.error = e
        self.done.set()

    def data(self, which="stdout"):
        return b"".join(getattr(e, which).data for e in list(self.events)
                        if e.WhichOneof("event") == which)

    def chunks(self, which="stdout"):
        return [(getattr(e, which).offset, getattr(e, which).data) for e in list(self.events)
                if e.WhichOneof("event") == which]

    def exit(self):
        return next((e.exit for e in self.events if e.WhichOneof("event") == "exit"), None)

    def wait_for(self, text, which="stdout", timeout=20):
        return sg.wait_for(lambda: text in self.data(which), timeout=timeout)


class Procs(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]
        self.pb = self.api.pb
        self.sid = S["sb"].sandbox_id

    # -- helpers --

    def start(self, command, sid=None, key=KA, user="u1", **kw):
        ev = self.api.call("Exec", self.pb.ExecRequest(sandbox_id=sid or self.sid, user_id=user,
                                                       command=command, background=True, **kw),
                           key, timeout=30)
        self.assertEqual([e.WhichOneof("event") for e in ev], ["started"], ev)
        pid = ev[0].started.process_id
        self.assertRegex(pid, r"^p[1-9][0-9]*$")
        return pid

    def call(self, method, req_type, key=KA, timeout=30, **kw):
        kw.setdefault("sandbox_id", self.sid)
        kw.setdefault("user_id", "u1")
        return self.api.call(method, getattr(self.pb, req_type)(**kw), key, timeout=timeout)

    def status(self, method, req_type, key=KA, **kw):
        kw.setdefault("sandbox_id", self.sid)
        kw.setdefault("user_id", "u1")
        return self.api.status(method, getattr(self.pb, req_type)(**kw), key, timeout=30)

    def send(self, pid, data, **kw):
        return self.call("SendInput", "SendInputRequest", process_id=pid, data=data, **kw)

    def wait(self, pid, timeout=30):
        return self.call("WaitProcess", "WaitProcessRequest", process_id=pid,
                         timeout_seconds=timeout, timeout=timeout + 15)

    def info(self, pid):
        ps = self.call("ListProcesses", "ListProcessesRequest").processes
        return next(p for p in ps if p.process_id == pid)

    def kill(self, pid):
        self.status("SignalProcess", "SignalProcessRequest", process_id=pid, signal_name="KILL")

    # -- tests --

    def test_background_server_listed_attached_twice_fed_and_signalled(self):
        self.call("WriteFile", "WriteFileRequest", path="server.py", data=SERVER.encode())
        pid = self.start("exec python3 -u server.py")
        a1 = Attacher(self.api, self.sid, pid)
        a2 = Attacher(self.api, self.sid, pid)
        self.assertTrue(a1.wait_for(b"ready"), a1.events)
        self.assertTrue(a2.wait_for(b"ready"), a2.events)
        p = self.info(pid)
        self.assertEqual(p.state, self.pb.PROCESS_STATE_RUNNING)
        self.assertEqual(p.command, "exec python3 -u server.py")
        self.assertFalse(p.pty)
        self.assertGreater(p.started_at, 0)
        r = self.send(pid, b"hello\n")
        self.assertEqual(r.pending_bytes, 0)
        self.assertTrue(a1.wait_for(b"echo:hello\n"), a1.events)
        self.assertTrue(a2.wait_for(b"echo:hello\n"), a2.events)
        self.assertTrue(a1.wait_for(b"err:hello\n", "stderr"), a1.events)
        self.call("SignalProcess", "SignalProcessRequest", process_id=pid, signal_name="USR1")
        self.assertTrue(a1.wait_for(b"usr1\n"), a1.events)
        # a third attacher from the current end sees only new output
        mid = self.info(pid).stdout_bytes
        a3 = Attacher(self.api, self.sid, pid, stdout_offset=mid,
                      stderr_offset=self.info(pid).stderr_bytes)
        self.send(pid, b"second\n")
        self.assertTrue(a3.wait_for(b"echo:second\n"), a3.events)
        self.call("SignalProcess", "SignalProcessRequest", process_id=pid, signal=15)
        w = self.wait(pid)
        self.assertEqual(w.state, self.pb.PROCESS_STATE_EXITED, w)
        self.assertEqual(w.exit.exit_code, 3, w)
        self.assertGreater(w.ended_at, 0)
        for a in (a1, a2, a3):
            self.assertTrue(a.done.wait(20), "attach stream did not end")
            self.assertIsNone(a.error, a.error)
            self.assertEqual(a.events[-1].WhichOneof("event"), "exit")
            self.assertEqual(a.exit().exit_code, 3)
        want = b"ready\necho:hello\nusr1\necho:second\nbye\n"
        self.assertEqual(a1.data(), want)
        self.assertEqual(a2.data(), want)
        # both attachers saw the same bytes at the same offsets
        self.assertEqual(a1.chunks()[0][0], 0)
        self.assertEqual(b"".join(d for _, d in a1.chunks()), b"".join(d for _, d in a2.chunks()))
        self.assertEqual(a3.chunks()[0][0], mid)
        self.assertEqual(a3.data(), want[mid:])
        # after the end: replay from an offset, and the exit at once
        r = Attacher(self.api, self.sid, pid, stdout_offset=6)
        self.assertTrue(r.done.wait(20))
        self.assertEqual(r.data(), want[6:])
        self.assertEqual(r.chunks()[0][0], 6)
        self.assertEqual(self.info(pid).state, self.pb.PROCESS_STATE_EXITED)
        # input and signals after the end
        code, det, _, _ = self.status("SendInput", "SendInputRequest", process_id=pid, data=b"x")
        self.assertEqual(code, C.FAILED_PRECONDITION, det)
        code, det, _, _ = self.status("SignalProcess", "SignalProcessRequest", process_id=pid)
        self.assertEqual(code, C.FAILED_PRECONDITION, det)

    def test_close_stdin_is_eof(self):
        self.call("WriteFile", "WriteFileRequest", path="server.py", data=SERVER.encode())
        pid = self.start("exec python3 -u server.py")
        self.send(pid, b"last\n", close_stdin=True)
        w = self.wait(pid)
        self.assertEqual(w.exit.exit_code, 0, w)
        self.assertTrue(w.stdin_closed)
        a = Attacher(self.api, self.sid, pid)
        self.assertTrue(a.done.wait(20))
        self.assertEqual(a.data(), b"ready\necho:last\neof\n")
        code, det, _, _ = self.status("SendInput", "SendInputRequest", process_id=pid, data=b"x")
        self.assertEqual(code, C.FAILED_PRECONDITION, det)

    def test_pty_shell_answers_typed_input_and_a_resize(self):
        pid = self.start("exec sh -i", pty=True, pty_rows=24, pty_cols=80)
        p = self.info(pid)
        self.assertTrue(p.pty)
        self.assertEqual((p.pty_rows, p.pty_cols), (24, 80))
        a = Attacher(self.api, self.sid, pid)
        self.send(pid, b"stty size; tty; echo T=$TERM; echo $((6*7))x\n")
        self.assertTrue(a.wait_for(b"24 80"), a.data())
        self.assertTrue(a.wait_for(b"42x"), a.data())
        self.assertIn(b"/dev/pts/", a.data())
        self.assertIn(b"T=xterm-256color", a.data())
        self.call("ResizePty", "ResizePtyRequest", process_id=pid, rows=40, cols=120)
        self.assertEqual((self.info(pid).pty_rows, self.info(pid).pty_cols), (40, 120))
        self.send(pid, b"stty size\n")
        self.assertTrue(a.wait_for(b"40 120"), a.data())
        # a PTY has no separate stderr: everything is on stdout
        self.send(pid, b"echo oops >&2\n")
        self.assertTrue(a.wait_for(b"oops\r\n"), a.data())
        self.assertEqual(a.data("stderr"), b"")
        self.send(pid, b"exit 5\n")
        self.assertTrue(a.done.wait(20))
        self.assertEqual(a.exit().exit_code, 5)

    @unittest.skipIf(drivers.is_gvisor(), "this runsc's PTY line discipline never hands a "
                     "canonical reader VEOF (^D): a blocked cat sees no end-of-file "
                     "(host/drivers/gvisor/PROTOCOL.md, Background processes)")
    def test_pty_close_stdin_sends_eof(self):
        pid = self.start("cat; echo done-cat", pty=True)
        self.send(pid, b"abc\n", close_stdin=True)
        w = self.wait(pid)
        self.assertEqual(w.exit.exit_code, 0, w)
        a = Attacher(self.api, self.sid, pid)
        self.assertTrue(a.done.wait(20))
        self.assertIn(b"done-cat", a.data())

    def test_foreground_pty_exec_streams_its_terminal(self):
        ev = self.api.call("Exec", self.pb.ExecRequest(
            sandbox_id=self.sid, user_id="u1", command="stty size; test -t 0 && echo is-a-tty",
            pty=True, pty_rows=30, pty_cols=100), KA, timeout=30)
        kinds = [e.WhichOneof("event") for e in ev]
        self.assertEqual(kinds[0], "started")
        self.assertEqual(kinds[-1], "exit")
        out = b"".join(e.stdout.data for e in ev if e.WhichOneof("event") == "stdout")
        self.assertIn(b"30 100", out)
        self.assertIn(b"is-a-tty", out)
        self.assertEqual(ev[-1].exit.exit_code, 0)

    def test_timeout_kills_the_process(self):
        t0 = time.monotonic()
        pid = self.start("sleep 60", timeout_seconds=1)
        w = self.wait(pid, timeout=20)
        self.assertEqual(w.state, self.pb.PROCESS_STATE_EXITED, w)
        self.assertTrue(w.exit.timed_out, w)
        self.assertEqual(w.exit.signal, 9, w)
        self.assertLess(time.monotonic() - t0, 10)

    def test_wait_times_out_with_the_process_running(self):
        pid = self.start("sleep 30")
        t0 = time.monotonic()
        w = self.wait(pid, timeout=1)
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertEqual(w.state, self.pb.PROCESS_STATE_RUNNING)
        self.kill(pid)
        self.assertEqual(self.wait(pid).exit.signal, 9)

    def test_output_cap_keeps_the_newest_and_reports_what_was_dropped(self):
        pid = self.start("head -c 300000 /dev/zero | tr '\\0' a; echo END",
                         max_output_bytes=65536)
        w = self.wait(pid)
        self.assertEqual(w.exit.exit_code, 0, w)
        self.assertEqual(w.stdout_bytes, 300004)
        self.assertTrue(w.exit.truncated)
        a = Attacher(self.api, self.sid, pid)
        self.assertTrue(a.done.wait(20))
        first = a.events[0]
        self.assertEqual(first.WhichOneof("event"), "dropped", first)
        self.assertEqual((first.dropped.stderr, first.dropped.offset, first.dropped.bytes),
                         (False, 0, 300004 - 65536))
        data = a.data()
        self.assertEqual(len(data), 65536)
        self.assertTrue(data.endswith(b"aaaaEND\n"))
        self.assertEqual(a.chunks()[0][0], 300004 - 65536)
        code, det, _, _ = self.status("AttachProcess", "AttachProcessRequest", process_id=pid,
                                      stdout_offset=300005)
        # a stream's status comes when it is read
        self.assertEqual(code, C.INVALID_ARGUMENT, det)
        self.assertIn("stdout_offset", det)

    def test_stdin_flood_against_a_process_that_never_reads(self):
        pid = self.start("sleep 60")
        chunk = b"x" * (512 << 10)
        refused = None
        for i in range(8):
            code, det, _, resp = self.status("SendInput", "SendInputRequest", process_id=pid,
                                             data=chunk)
            if code != C.OK:
                refused = (code, det)
                break
        self.assertIsNotNone(refused, "1 MiB past the pipe was accepted")
        self.assertEqual(refused[0], C.RESOURCE_EXHAUSTED, refused)
        self.assertIn("stdin", refused[1])
        # the daemon answers everything else at once
        t0 = time.monotonic()
        out, _, ex, _ = self.api.exec(KA, "u1", self.sid, "echo still-here")
        self.assertEqual(out, "still-here\n")
        self.assertEqual(self.info(pid).state, self.pb.PROCESS_STATE_RUNNING)
        self.assertLess(time.monotonic() - t0, 5)
        self.kill(pid)
        self.assertEqual(self.wait(pid).exit.signal, 9)

    def test_live_process_cap(self):
        sb = self.api.create(KA, "u1", "procs-cap-" + uuid.uuid4().hex[:6])
        try:
            for _ in range(MAX_PROCS):
                self.start("sleep 60", sid=sb.sandbox_id)
            code, det, _, _ = self.api.status("Exec", self.pb.ExecRequest(
                sandbox_id=sb.sandbox_id, user_id="u1", command="sleep 1", background=True), KA)
            self.assertEqual(code, C.RESOURCE_EXHAUSTED, det)
            self.assertIn("processes", det)
            # a foreground exec is not a background process
            out, _, _, _ = self.api.exec(KA, "u1", sb.sandbox_id, "echo fg")
            self.assertEqual(out, "fg\n")
        finally:
            self.api.kill(KA, "u1", sb.sandbox_id)

    def test_processes_die_with_their_sandbox(self):
        sb = self.api.create(KA, "u1", "procs-death-" + uuid.uuid4().hex[:6])
        pid = self.start("sleep 3171", sid=sb.sandbox_id)
        a = Attacher(self.api, sb.sandbox_id, pid)
        w = threading.Thread(target=lambda: S.__setitem__("death_wait", self.api.status(
            "WaitProcess", self.pb.WaitProcessRequest(sandbox_id=sb.sandbox_id, user_id="u1",
                                                      process_id=pid, timeout_seconds=60), KA)))
        w.start()
        time.sleep(0.3)
        self.api.kill(KA, "u1", sb.sandbox_id)
        self.assertTrue(a.done.wait(20), "attach stream did not end with the sandbox")
        self.assertIsNone(a.error, a.error)
        self.assertEqual(a.exit().signal, 9)
        w.join(20)
        code, _, _, info = S["death_wait"]
        self.assertEqual(code, C.OK)
        self.assertEqual(info.state, self.pb.PROCESS_STATE_EXITED)
        # nothing of it is left on this machine (the process driver runs it here)
        left = []
        for d in os.listdir("/proc"):
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if f.read() == b"sleep\x003171\x00":
                        left.append(d)
            except OSError:
                pass
        self.assertEqual(left, [])
        code, _, _, _ = self.status("ListProcesses", "ListProcessesRequest",
                                    sandbox_id=sb.sandbox_id)
        self.assertEqual(code, C.NOT_FOUND)

    def test_bad_input_names_the_field(self):
        pid = self.start("sleep 30")
        try:
            cases = [
                ("Exec", "ExecRequest", dict(command="sh", pty=True, pty_rows=1001), "pty_rows"),
                ("Exec", "ExecRequest", dict(command="sh", pty=True, pty_cols=100000), "pty_cols"),
                ("Exec", "ExecRequest", dict(command="sh", background=True, pty_cols=80),
                 "pty_cols"),
                ("Exec", "ExecRequest", dict(command="ls", pty_rows=24), "pty_rows"),
                ("SignalProcess", "SignalProcessRequest", dict(process_id=pid, signal=65), "signal"),
                ("SignalProcess", "SignalProcessRequest", dict(process_id=pid, signal_name="FOO"),
                 "signal_name"),
                ("SignalProcess", "SignalProcessRequest",
                 dict(process_id=pid, signal=9, signal_name="KILL"), "signal"),
                ("ResizePty", "ResizePtyRequest", dict(process_id=pid, rows=0, cols=80), "rows"),
                ("ResizePty", "ResizePtyRequest", dict(process_id=pid, rows=24, cols=1001), "cols"),
                ("SendInput", "SendInputRequest", dict(process_id=pid, data=b"x" * ((1 << 20) + 1)),
                 "data"),
                ("WaitProcess", "WaitProcessRequest", dict(process_id=pid, timeout_seconds=3601),
                 "timeout_seconds"),
                ("AttachProcess", "AttachProcessRequest", dict(process_id=pid, stderr_offset=1),
                 "stderr_offset"),
            ]
            for bad in ("", "x1", "p", "p0", "p01", "p1 ", "p-1", "p12345678901", "P1", "p1\u200b"):
                for m, t in (("AttachProcess", "AttachProcessRequest"),
                             ("SendInput", "SendInputRequest"),
                             ("SignalProcess", "SignalProcessRequest"),
                             ("WaitProcess", "WaitProcessRequest"),
                             ("ResizePty", "ResizePtyRequest")):
                    kw = dict(process_id=bad)
                    if m == "ResizePty":
                        kw.update(rows=24, cols=80)
                    cases.append((m, t, kw, "process_id"))
            for m, t, kw, field in cases:
                with self.subTest(method=m, args={k: v for k, v in kw.items() if k != "data"}):
                    code, det, _, _ = self.status(m, t, **kw)
                    self.assertEqual(code, C.INVALID_ARGUMENT, det)
                    self.assertIn(field, det)
            # an id of the right shape that was never started
            for m, t, kw in (("AttachProcess", "AttachProcessRequest", {}),
                             ("SendInput", "SendInputRequest", {}),
                             ("SignalProcess", "SignalProcessRequest", {}),
                             ("WaitProcess", "WaitProcessRequest", {}),
                             ("ResizePty", "ResizePtyRequest", dict(rows=24, cols=80))):
                code, det, _, _ = self.status(m, t, process_id="p9999", **kw)
                self.assertEqual(code, C.NOT_FOUND, (m, det))
            # a process without a PTY cannot be resized
            code, det, _, _ = self.status("ResizePty", "ResizePtyRequest", process_id=pid, rows=24,
                                          cols=80)
            self.assertEqual(code, C.FAILED_PRECONDITION, det)
        finally:
            self.kill(pid)

    def test_another_tenants_sandbox_is_never_found(self):
        pid = self.start("sleep 30", sid=S["other"].sandbox_id, key=KB, user="u9")
        try:
            ghost = S["other"].sandbox_id[:-4] + "zzzz"
            for sid in (S["other"].sandbox_id, ghost):
                for m, t, kw in (("ListProcesses", "ListProcessesRequest", {}),
                                 ("AttachProcess", "AttachProcessRequest", dict(process_id=pid)),
                                 ("SendInput", "SendInputRequest", dict(process_id=pid)),
                                 ("SignalProcess", "SignalProcessRequest", dict(process_id=pid)),
                                 ("WaitProcess", "WaitProcessRequest", dict(process_id=pid)),
                                 ("ResizePty", "ResizePtyRequest",
                                  dict(process_id=pid, rows=2, cols=2))):
                    code, det, _, _ = self.status(m, t, sandbox_id=sid, **kw)
                    self.assertEqual(code, C.NOT_FOUND, (m, sid, det))
                    self.assertNotIn(S["other"].sandbox_id, det)
            # still running: nothing reached it
            ps = self.call("ListProcesses", "ListProcessesRequest", key=KB, user_id="u9",
                           sandbox_id=S["other"].sandbox_id).processes
            self.assertEqual([p.state for p in ps if p.process_id == pid],
                             [self.pb.PROCESS_STATE_RUNNING])
        finally:
            self.status("SignalProcess", "SignalProcessRequest", key=KB, user_id="u9",
                        sandbox_id=S["other"].sandbox_id, process_id=pid, signal_name="KILL")


if __name__ == "__main__":
    unittest.main(verbosity=2)
