"""A host that goes away and comes back (issue 13.3's health tracking, the
other way round): killed, it is NOT_SERVING at once (its port refuses) and
ListSandboxes names it; restarted on the same address after a while, the
gateway sees it SERVING within a few seconds and places on it again.

gRPC's default reconnect backoff grows to 120 s, so without a cap
(rpc_channel_create) a host that was down a minute could wait up to two
more before any gateway reconnected to it.
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sghosts  # noqa: E402
from sghosts import DEMO_KEY, host_of, task_for, timed  # noqa: E402

DOWN_S = 32      # past two default backoff steps (26 s, then 43 s): without a cap, >5 s to return
BACK_WITHIN_S = 4.0


class HostRestart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = os.environ.get("SG_HOSTS_TMP") or sghosts.sgtenancy.new_tmp("sg-hosts-")
        c = cls.c = sghosts.Cluster(cls.tmp)
        try:
            cls.a = c.host("ha")
            cls.b = c.host("hb")
            cls.gw = c.gateway([cls.a.name, cls.b.name])
            cls.api = c.api(cls.gw)
        except Exception:
            c.stop_all()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        cls.c.stop_all()

    def unreachable(self):
        dt, lr = timed(self.api.call, "ListSandboxes",
                       self.api.pb.ListSandboxesRequest(user_id="alice"), DEMO_KEY)
        self.assertNotIsInstance(lr, Exception, lr)
        return list(lr.unreachable_hosts), dt

    def test_restart(self):
        a, b = self.a, self.b
        names = [a.name, b.name]
        t = task_for(names, b.name, "demo", "alice", "back")
        b.terminate()
        t0 = time.monotonic()
        gone = sghosts.sgtenancy.wait_for(lambda: self.unreachable()[0] == [b.name], 3.0, 0.05)
        self.assertTrue(gone, "a killed host is still listed as reachable")
        print("FIGURE killed host out of ListSandboxes after %.2f s" % (time.monotonic() - t0))
        dt, s = timed(self.api.create, DEMO_KEY, "alice", t)
        self.assertNotIsInstance(s, Exception, s)
        self.assertEqual(host_of(s.sandbox_id), a.name)
        self.api.kill(DEMO_KEY, "alice", s.sandbox_id)

        time.sleep(DOWN_S)
        b2 = self.c.host("hb", restart=b)
        t0 = time.monotonic()
        back = sghosts.sgtenancy.wait_for(lambda: self.unreachable()[0] == [], 30.0, 0.1)
        took = time.monotonic() - t0
        print("FIGURE restarted host back in ListSandboxes after %.2f s (down %d s)"
              % (took, DOWN_S))
        self.assertTrue(back, "the restarted host never came back")
        self.assertLess(took, BACK_WITHIN_S, "the gateway took %.1f s to see the host back" % took)
        dt, s = timed(self.api.create, DEMO_KEY, "alice", t)
        self.assertNotIsInstance(s, Exception, s)
        self.assertEqual(host_of(s.sandbox_id), b2.name, "placement returns to the winner")


if __name__ == "__main__":
    unittest.main(verbosity=2)
