#!/usr/bin/python3
"""Every streaming call the host answers ends with a status, also when its
client goes away mid-stream.

A host call dropped without a status keeps its rpc_call, its grpc_call and
through them the grpc server alive (rpc/call.c holds a ref on every
dispatched call until its status batch completes): the host then never
finishes a SIGTERM (rpc_server_shutdown waits for the server's shutdown
tag) and LeakSanitizer reports the call at exit. Each stream the host
serves is cancelled by its client mid-stream here, a few times over, then
the host is stopped with SIGTERM and must exit within seconds:

  - DownloadFile, small chunks, cancelled after the first (file_jobs.c: a
    failed chunk send freed the job without a status);
  - WatchFiles, cancelled while events flow (watch.c, fixed earlier);
  - Exec and RunCode streaming output, cancelled after the first event.

Observable without sanitizers: the host's sandgate_host_calls_total counts
a call when its status is queued, so every cancelled stream must show there.

Env: SANDGATE_BUILD. Run with /usr/bin/python3 as root.
"""
import os
import signal
import sys
import threading
import time
import unittest
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KA = "se-demo-key-1"
POLICY = """version: 1
defaults:
  limits: {output_bytes: 16MiB}
  quotas: {sandboxes_per_tenant: 100, sandboxes_per_user: 50, concurrent_actions: 64,
           rate_per_s: 10000, rate_burst: 10000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
""" % sg.key_hash(KA)
S = {}
ROUNDS = 3


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-stream-ends-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY)
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = sg.Api(tmp, d.addr)


def first_then_cancel(call):
    """Read one message of a stream, then cancel it; the code it ended with."""
    next(call)
    time.sleep(0.2)   # the host keeps sending until flow control stops it
    call.cancel()
    try:
        for _ in call:
            pass
    except grpc.RpcError as e:
        return e.code()
    return C.OK


def host_calls(method):
    """sandgate_host_calls_total of method, summed over status codes: a call
    counts once its status is queued (the rpc observer)."""
    port = S["d"].read("host-metrics.port").strip()
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    n = 0
    for line in text.splitlines():
        if line.startswith("sandgate_host_calls_total{") and \
                ('grpc_method="%s"' % method) in line:
            n += float(line.rpartition(" ")[2])
    return int(n)


def running(pid):
    """Not gone and not a zombie (run.sh's children are reparented)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class StreamEnds(unittest.TestCase):
    def test_cancelled_streams_still_end_and_the_host_stops(self):
        api, d, pb = S["api"], S["d"], S["api"].pb
        sid = api.create(KA, "u1", "stream-ends").sandbox_id
        out, err, ex, _ = api.exec(KA, "u1", sid, "head -c 8000000 /dev/urandom > big.bin; "
                                   "mkdir -p w; echo ok")
        self.assertEqual(out.strip(), "ok", err)
        md = api.md(KA)
        for _ in range(ROUNDS):
            dl = api.stub.DownloadFile(pb.DownloadFileRequest(
                sandbox_id=sid, user_id="u1", path="big.bin", chunk_bytes=4096),
                metadata=md, timeout=60)
            self.assertEqual(first_then_cancel(dl), C.CANCELLED)
            ex = api.stub.Exec(pb.ExecRequest(sandbox_id=sid, user_id="u1",
                                              command="cat big.bin big.bin", timeout_seconds=30),
                               metadata=md, timeout=60)
            self.assertEqual(first_then_cancel(ex), C.CANCELLED)
            rc = api.stub.RunCode(pb.RunCodeRequest(
                sandbox_id=sid, user_id="u1", timeout_seconds=30,
                code="import sys\nfor i in range(200000): print('x' * 80)"),
                metadata=md, timeout=60)
            self.assertEqual(first_then_cancel(rc), C.CANCELLED)
            wt = api.stub.WatchFiles(pb.WatchFilesRequest(sandbox_id=sid, user_id="u1",
                                                          path="w"), metadata=md, timeout=60)
            stop = threading.Event()

            def touch():
                i = 0
                while not stop.is_set() and i < 200:
                    try:
                        api.exec(KA, "u1", sid, "touch w/f%d" % i, timeout_s=5)
                    except grpc.RpcError:
                        pass
                    i += 1
            th = threading.Thread(target=touch)
            th.start()
            try:
                self.assertEqual(first_then_cancel(wt), C.CANCELLED)
            finally:
                stop.set()
                th.join(30)
        # the host still serves
        out, _, _, _ = api.exec(KA, "u1", sid, "echo alive")
        self.assertEqual(out.strip(), "alive")
        # every cancelled stream got its status on the host
        want = {"DownloadFile": ROUNDS, "RunCode": ROUNDS, "WatchFiles": ROUNDS}
        got = {}

        def all_ended():
            got.update((m, host_calls(m)) for m in want)
            return got == want
        sg.wait_for(all_ended, 10, step=0.2)
        self.assertEqual(got, want, "streams the host never answered with a status")
        with open(d.path("host.pid")) as f:
            pid = int(f.read().strip())
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        while time.monotonic() - t0 < 20 and running(pid):
            time.sleep(0.05)
        took = time.monotonic() - t0
        alive = running(pid)
        if alive:
            os.kill(pid, signal.SIGKILL)
        print("host stopped %.2f s after SIGTERM" % took)
        self.assertFalse(alive, "the host did not stop within 20 s of SIGTERM: a call without a "
                         "status holds its server\n" + d.logs_tail())
        self.assertLess(took, 10.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
