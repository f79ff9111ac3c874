"""Issue 13.7: gateway replicas whose configs list the hosts in another
order must still send one task to one host (one sandbox per task).

Two hosts, two gateways: G1 lists [A, B], G2 lists [B, A]. Every task
created through G1 and then G2 gets the same sandbox, on the host the
rendezvous spec (gateway/placement.h, re-implemented in sghosts.py) names
by host name. Before, the host was hash % position: reversed order sent
every key to the other host and a second sandbox appeared.

Then a flap: the task's winning host B is stopped, the task is created on A
(the next host); B comes back; creating the task again, through either
gateway, returns the sandbox on A instead of starting one on B.
"""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sghosts  # noqa: E402
from sghosts import DEMO_KEY, host_of, task_for, task_key, timed, winner  # noqa: E402

N_TASKS = 8


class HostOrder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = os.environ.get("SG_HOSTS_TMP") or sghosts.sgtenancy.new_tmp("sg-hosts-")
        c = cls.c = sghosts.Cluster(cls.tmp)
        try:
            cls.a = c.host("ha")
            cls.b = c.host("hb")
            cls.g1 = c.gateway([cls.a.name, cls.b.name])
            cls.g2 = c.gateway([cls.b.name, cls.a.name])
            cls.api1, cls.api2 = c.api(cls.g1), c.api(cls.g2)
        except Exception:
            c.stop_all()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.api1.close()
        cls.api2.close()
        cls.c.stop_all()

    def run(self, result=None):
        r = super().run(result)
        if result and (result.failures or result.errors):
            sys.stderr.write(self.c.logs_tail() + "\n")
        return r

    def names(self):
        return [self.a.name, self.b.name]

    def create(self, api, task, user="alice"):
        dt, s = timed(api.create, DEMO_KEY, user, task)
        self.assertNotIsInstance(s, Exception, "create %s: %s" % (task, s))
        return s

    def test_1_order_does_not_matter(self):
        on = {}
        for i in range(N_TASKS):
            t = "order-%d" % i
            s1 = self.create(self.api1, t)
            s2 = self.create(self.api2, t)
            self.assertEqual(s1.sandbox_id, s2.sandbox_id,
                             "task %s: G1 [A,B] and G2 [B,A] made two sandboxes" % t)
            want = winner(self.names(), task_key("demo", "alice", t))
            self.assertEqual(host_of(s1.sandbox_id), want, "task %s not on its rendezvous host" % t)
            on[want] = on.get(want, 0) + 1
        print("tasks per host: %s" % on)
        mine = [s.sandbox_id for s in self.api1.list(DEMO_KEY, "alice")]
        self.assertEqual(len(mine), N_TASKS, "one sandbox per task, across both gateways")

    def test_2_flap_keeps_the_task_on_its_sandbox(self):
        a, b = self.a, self.b
        t = task_for(self.names(), b.name, "demo", "bob", "flap")
        b.sigstop()
        try:
            # both gateways must have noticed before the create
            for g in (self.g1, self.g2):
                ok = sghosts.sgtenancy.wait_for(
                    lambda: any(("host %s " % b.name) in ln and "NOT_SERVING" in ln
                                for ln in g.read_log().splitlines()), 5.0, 0.05)
                self.assertTrue(ok, "gateway %s never saw B down" % g.name)
            s = self.create(self.api1, t, "bob")
            self.assertEqual(host_of(s.sandbox_id), a.name, "winner down: the next host")
        finally:
            b.sigcont()

        def serving(g):
            # the gateway's log lines are JSON objects; their message says the state
            msgs = [json.loads(ln)["msg"] if ln.startswith("{") else ln
                    for ln in g.read_log().splitlines()]
            lines = [m for m in msgs if ("host %s " % b.name) in m]
            return lines and lines[-1].rstrip().endswith("SERVING") and "NOT_SERVING" not in lines[-1]
        for g in (self.g1, self.g2):
            self.assertTrue(sghosts.sgtenancy.wait_for(lambda: serving(g), 5.0, 0.05),
                            "gateway %s never saw B back" % g.name)
        for api in (self.api1, self.api2):
            again = self.create(api, t, "bob")
            self.assertEqual(again.sandbox_id, s.sandbox_id,
                             "B is back and wins the key, but the task's sandbox is on A")
        mine = [x.sandbox_id for x in self.api2.list(DEMO_KEY, "bob") if x.task_id == t]
        self.assertEqual(mine, [s.sandbox_id])


if __name__ == "__main__":
    unittest.main(verbosity=2)
