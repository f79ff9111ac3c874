#!/usr/bin/python3
"""Fairness (issue 5): a noisy tenant hammering at its quota does not push a
quiet tenant's RunCode p99 above 2× its quiet value.

The quiet tenant runs `x=1+1` sequentially (N calls) alone, then again while
a separate process (its own GIL, so the client side does not skew the
figures) hammers with several threads for the noisy tenant, whose quotas
(rate 50/s, burst 50, 2 concurrent actions) turn most of its calls into
RESOURCE_EXHAUSTED. Asserted: p99 under noise ≤ 2 × quiet p99 + 2 ms (the
2 ms absolute floor absorbs timer and scheduler noise at sub-10-ms
latencies). Both figures are printed.
"""
import json
import os
import subprocess
import sys
import threading
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KQ, KN = "fair-quiet-key", "fair-noisy-key"
N = 200
NOISE_THREADS = 6
FLOOR_MS = 2.0

POLICY = """version: 1
templates:
  - name: code-interpreter
    tenants: ["*"]
tenants:
  - id: quiet
    api_keys: [%s]
    quotas: {rate_per_s: 10000, rate_burst: 10000}
  - id: noisy
    api_keys: [%s]
    quotas: {rate_per_s: 50, rate_burst: 50, concurrent_actions: 2}
""" % (sg.key_hash(KQ), sg.key_hash(KN))

S = {}


def noise_main(tmp, addr, sids, seconds):
    """Child process: NOISE_THREADS threads of RunCode for the noisy tenant."""
    sg.stubs(tmp)   # once, before the threads
    counts = {}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def hammer(i):
        api = sg.Api(tmp, addr)
        sid = sids[i % len(sids)]
        while time.monotonic() < end:
            c, _, _, _ = api.status("RunCode", api.pb.RunCodeRequest(
                sandbox_id=sid, user_id="n", code="x=1+1"), KN)
            with lock:
                counts[c.name] = counts.get(c.name, 0) + 1
        api.close()
    ts = [threading.Thread(target=hammer, args=(i,)) for i in range(NOISE_THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps(counts))


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-fair-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY)
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(S["api"].close)


class Fairness(unittest.TestCase):
    def measure(self, api, sid):
        lat = []
        for _ in range(N):
            t0 = time.perf_counter()
            out, _, err, end, _ = api.run(KQ, "q", sid, "x=1+1")
            lat.append((time.perf_counter() - t0) * 1000)
            self.assertIsNone(err)
        return lat

    @staticmethod
    def as_noisy(fn, *args):
        """A call as the noisy tenant: its rate bucket may still be empty from
        the noise of another test, so wait for tokens instead of failing."""
        for _ in range(50):
            try:
                return fn(*args)
            except Exception as e:   # grpc.RpcError: RESOURCE_EXHAUSTED while the bucket refills
                if "rate limit" not in str(e):
                    raise
                time.sleep(0.1)
        raise AssertionError("%s%r: still rate-limited after 5 s" % (fn.__name__, args[1:]))

    def test_noisy_tenant_does_not_double_quiet_p99(self):
        api = S["api"]
        u = uuid.uuid4().hex[:6]
        qsid = api.create(KQ, "q", "quiet-" + u).sandbox_id
        nsids = [self.as_noisy(api.create, KN, "n", "noisy-%d-%s" % (i, u)).sandbox_id
                 for i in range(2)]
        self.addCleanup(api.kill, KQ, "q", qsid)
        for s in nsids:
            self.addCleanup(self.as_noisy, api.kill, KN, "n", s)
        for _ in range(20):   # warm up
            api.run(KQ, "q", qsid, "x=1+1")
        quiet = self.measure(api, qsid)
        noise = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--noise",
                                  S["tmp"], S["d"].addr, ",".join(nsids), "60"],
                                 stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)   # the noise is at full tilt
            noisy = self.measure(api, qsid)
        finally:
            noise.terminate()
            out, _ = noise.communicate(timeout=30)
        qp50, qp99 = sg.percentile(quiet, 50), sg.percentile(quiet, 99)
        np50, np99 = sg.percentile(noisy, 50), sg.percentile(noisy, 99)
        sys.stderr.write(
            "\nquiet tenant RunCode x=1+1, %d sequential calls:\n"
            "  alone:       p50 %.2f ms  p99 %.2f ms  max %.2f ms\n"
            "  under noise: p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%d noisy threads)\n"
            "  bound: p99 ≤ 2 × %.2f + %.1f ms floor = %.2f ms\n"
            % (N, qp50, qp99, max(quiet), np50, np99, max(noisy), NOISE_THREADS, qp99, FLOOR_MS,
               2 * qp99 + FLOOR_MS))
        self.assertLessEqual(np99, 2 * qp99 + FLOOR_MS,
                             "quiet p99 %.2f ms alone, %.2f ms under noise" % (qp99, np99))

    def test_noise_really_hits_the_quota(self):
        """The noise generator (same code, 3 s) gets RESOURCE_EXHAUSTED a lot."""
        api = S["api"]
        u = uuid.uuid4().hex[:6]
        nsids = [api.create(KN, "n", "probe-%d-%s" % (i, u)).sandbox_id for i in range(2)]
        for s in nsids:
            self.addCleanup(self.as_noisy, api.kill, KN, "n", s)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--noise", S["tmp"],
                            S["d"].addr, ",".join(nsids), "3"], capture_output=True, text=True,
                           timeout=60)
        counts = json.loads(r.stdout.strip().splitlines()[-1])
        sys.stderr.write("\nnoisy tenant, 3 s of %d threads: %s\n" % (NOISE_THREADS, counts))
        self.assertGreater(counts.get("RESOURCE_EXHAUSTED", 0), counts.get("OK", 0))
        self.assertGreater(counts.get("OK", 0), 0)
        self.assertEqual(set(counts) - {"OK", "RESOURCE_EXHAUSTED"}, set(), counts)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--noise":
        noise_main(sys.argv[2], sys.argv[3], sys.argv[4].split(","), float(sys.argv[5]))
    else:
        unittest.main(verbosity=2)
