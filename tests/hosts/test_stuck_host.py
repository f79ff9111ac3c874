"""Issue 13.3: one stuck host must not stall creates and lists for everyone.

Two hosts, one gateway. Host B is SIGSTOPped: the gateway's health check
(gateway/health.c) sees it NOT_SERVING, CreateSandbox on the healthy host A
and ListSandboxes answer at once (before: every one waited the 10 s quota
fan-out deadline), ListSandboxes names B in unreachable_hosts, the quota
still counts B's sandboxes, even one another gateway replica created (from
B's last load report, gateway/counts.c), and a
task whose live sandbox is on B gets UNAVAILABLE instead of a second
sandbox. After SIGCONT everything is back, the task keeps its sandbox.

Figures (printed as FIGURE lines): CreateSandbox and ListSandboxes latency
with all hosts up, in the first second after the SIGSTOP, and once the
health check has noticed (2 cores shared with other work: noisy).
"""
import os
import statistics
import sys
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sghosts  # noqa: E402
from sghosts import DEMO_KEY, OTHER_KEY, task_for, host_of, timed  # noqa: E402

FAST_S = 2.5   # far under the old 10 s, far over a healthy create on a busy 2-core box
POLICY_EXTRA_QUOTA = 2


def fig(what, samples):
    print("FIGURE %s: n=%d median %.3f s max %.3f s" % (what, len(samples),
                                                        statistics.median(samples), max(samples)))


class StuckHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = os.environ.get("SG_HOSTS_TMP") or sghosts.sgtenancy.new_tmp("sg-hosts-")
        c = cls.c = sghosts.Cluster(cls.tmp)
        # tenant "other" gets a quota of 2 to see B's sandboxes counted while B is stopped
        with open(os.path.join(sghosts.REPO, "deploy", "local", "policy.yaml")) as f:
            pol = f.read()
        marker = "  - id: other\n"
        assert marker in pol
        pol = pol.replace(marker, marker + "    quotas: {sandboxes_per_tenant: %d}\n"
                          % POLICY_EXTRA_QUOTA)
        c.policy = os.path.join(cls.tmp, "policy.yaml")
        with open(c.policy, "w") as f:
            f.write(pol)
        try:
            cls.a = c.host("ha")
            cls.b = c.host("hb")
            cls.gw = c.gateway([cls.a.name, cls.b.name])
            cls.api = c.api(cls.gw)
            # a second replica: what it creates, the first learns only from
            # the hosts' load reports
            cls.gw2 = c.gateway([cls.b.name, cls.a.name])
            cls.api2 = c.api(cls.gw2)
        except Exception:
            c.stop_all()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        cls.api2.close()
        cls.c.stop_all()

    def names(self):
        return [self.a.name, self.b.name]

    def task(self, want, prefix, tenant="demo", user="alice"):
        return task_for(self.names(), want.name, tenant, user, prefix)

    def create(self, task, key=DEMO_KEY, user="alice"):
        return timed(self.api.create, key, user, task)

    def list(self, key=DEMO_KEY, user="alice"):
        pb = self.api.pb
        return timed(self.api.call, "ListSandboxes", pb.ListSandboxesRequest(user_id=user), key)

    def wait_down(self, name, timeout=5.0):
        """The gateway logged host `name` NOT_SERVING."""
        return sghosts.sgtenancy.wait_for(
            lambda: any(("host %s " % name) in ln and "NOT_SERVING" in ln
                        for ln in self.gw.read_log().splitlines()), timeout, 0.05)

    def test_load_report_is_owners_of_every_tenant_and_only_on_request(self):
        """The host side of the load report (HostListRequest.all_tenants):
        every tenant's owners and nothing else; an empty tenant alone lists
        nothing; all_tenants with a tenant or user is refused."""
        hpb = sghosts.host_pb(self.tmp)
        dt, s1 = self.create(self.task(self.a, "rep-demo"))
        self.assertNotIsInstance(s1, Exception, s1)
        dt, s2 = self.create(self.task(self.a, "rep-other", tenant="other", user="ot"),
                             OTHER_KEY, "ot")
        self.assertNotIsInstance(s2, Exception, s2)
        ch = grpc.insecure_channel("127.0.0.1:%d" % self.a.port)
        try:
            call = ch.unary_unary("/sandgate.v1.Host/ListSandboxes",
                                  request_serializer=hpb.HostListRequest.SerializeToString,
                                  response_deserializer=hpb.HostListResponse.FromString)
            r = call(hpb.HostListRequest(all_tenants=True), timeout=10)
            owners = {(x.owner.tenant_id, x.owner.task_id) for x in r.sandboxes}
            self.assertIn(("demo", s1.task_id), owners)
            self.assertIn(("other", s2.task_id), owners)
            self.assertFalse(any(x.HasField("sandbox") for x in r.sandboxes), "owners only")
            self.assertEqual(list(call(hpb.HostListRequest(), timeout=10).sandboxes), [])
            for bad in (hpb.HostListRequest(all_tenants=True, tenant_id="demo"),
                        hpb.HostListRequest(all_tenants=True, user_id="alice")):
                with self.assertRaises(grpc.RpcError) as cm:
                    call(bad, timeout=10)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        finally:
            ch.close()
        self.api.kill(DEMO_KEY, "alice", s1.sandbox_id)
        self.api.kill(OTHER_KEY, "ot", s2.sandbox_id)

    def test_stuck_host(self):
        a, b = self.a, self.b
        try:
            self._run(a, b)
        except Exception:
            sys.stderr.write(self.c.logs_tail() + "\n")
            raise

    def _run(self, a, b):
        # ---- all up: one sandbox of alice's on each host, one of tenant other's on each
        t_on_a, t_on_b = self.task(a, "keep-a"), self.task(b, "keep-b")
        dt, sa = self.create(t_on_a)
        self.assertNotIsInstance(sa, Exception, sa)
        dt, sb = self.create(t_on_b)
        self.assertNotIsInstance(sb, Exception, sb)
        self.assertEqual(host_of(sa.sandbox_id), a.name)
        self.assertEqual(host_of(sb.sandbox_id), b.name)
        # tenant other: one on A through this gateway, one on B through the other
        dt, s = self.create(self.task(a, "oa", tenant="other", user="ot"), OTHER_KEY, "ot")
        self.assertNotIsInstance(s, Exception, s)
        dt, s = timed(self.api2.create, OTHER_KEY, "ot",
                      self.task(b, "ob", tenant="other", user="ot"))
        self.assertNotIsInstance(s, Exception, s)
        self.assertEqual(host_of(s.sandbox_id), b.name)
        base_c, base_l = [], []
        for i in range(3):
            dt, s = self.create(self.task(a, "base%d" % i))
            self.assertNotIsInstance(s, Exception, s)
            base_c.append(dt)
            dt, lr = self.list()
            self.assertNotIsInstance(lr, Exception, lr)
            self.assertEqual(list(lr.unreachable_hosts), [])
            base_l.append(dt)
        fig("all hosts up: CreateSandbox", base_c)
        fig("all hosts up: ListSandboxes", base_l)

        # ---- B stopped, after one load report (1 s) told this gateway about
        # the sandbox the other replica made there
        time.sleep(1.5)
        b.sigstop()
        first_c, s = self.create(self.task(a, "first"))
        self.assertNotIsInstance(s, Exception, s)
        first_l, lr = self.list()
        self.assertNotIsInstance(lr, Exception, lr)
        fig("first call after SIGSTOP (health check may not know yet): CreateSandbox", [first_c])
        fig("first call after SIGSTOP: ListSandboxes", [first_l])
        self.assertLess(first_c, FAST_S + 1.5, "create in the first second after the stop")
        self.assertTrue(self.wait_down(b.name), "the gateway never logged B down")

        stuck_c, stuck_l, ids = [], [], []
        for i in range(4):
            # half of them are tasks whose winning host is B: they go to A
            want = a if i % 2 == 0 else b
            t = self.task(want, "during%d" % i)
            dt, s = self.create(t)
            self.assertNotIsInstance(s, Exception, s)
            self.assertEqual(host_of(s.sandbox_id), a.name, "created on the serving host")
            stuck_c.append(dt)
            ids.append((t, s.sandbox_id))
            dt, lr = self.list()
            self.assertNotIsInstance(lr, Exception, lr)
            stuck_l.append(dt)
            self.assertEqual(list(lr.unreachable_hosts), [b.name])
            got = {x.sandbox_id for x in lr.sandboxes}
            self.assertIn(sa.sandbox_id, got)
            self.assertIn(s.sandbox_id, got)
            self.assertNotIn(sb.sandbox_id, got, "B's sandboxes cannot be listed while B is stopped")
        fig("host B SIGSTOPped: CreateSandbox on host A", stuck_c)
        fig("host B SIGSTOPped: ListSandboxes", stuck_l)
        for dt in stuck_c + stuck_l:
            self.assertLess(dt, FAST_S)

        # the task whose sandbox is on B: no second sandbox, a retryable error
        dt, e = self.create(t_on_b)
        self.assertIsInstance(e, grpc.RpcError)
        self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
        self.assertIn(b.name, e.details())
        self.assertNotIn("127.0.0.1", e.details())
        self.assertLess(dt, FAST_S)

        # quota: tenant other has 2 live (one on B, made through the other
        # replica); B's count comes from its last load report
        dt, e = self.create(self.task(a, "oc", tenant="other", user="ot"), OTHER_KEY, "ot")
        self.assertIsInstance(e, grpc.RpcError, "the quota forgot host B's sandbox")
        self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
        self.assertLess(dt, FAST_S)

        # ---- B continues
        b.sigcont()

        def b_back():
            dt, lr = self.list()
            return not isinstance(lr, Exception) and not lr.unreachable_hosts and lr
        lr = sghosts.sgtenancy.wait_for(b_back, 5.0, 0.1)
        self.assertTrue(lr, "B never came back in ListSandboxes")
        self.assertIn(sb.sandbox_id, {x.sandbox_id for x in lr.sandboxes})
        dt, s = self.create(t_on_b)
        self.assertNotIsInstance(s, Exception, s)
        self.assertEqual(s.sandbox_id, sb.sandbox_id, "the task keeps its sandbox on B")
        # a task created on A while its winner B was down keeps its sandbox on A
        t, sid = ids[1]
        dt, s = self.create(t)
        self.assertNotIsInstance(s, Exception, s)
        self.assertEqual(s.sandbox_id, sid, "a second sandbox for the task appeared on B")


if __name__ == "__main__":
    unittest.main(verbosity=2)
