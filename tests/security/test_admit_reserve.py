"""test_admit_reserve.py — admission control for memory and pids (issue 13,
point 2): with a reserve larger than the machine has (raised through
SG_SEC_HOST_SED), every CreateSandbox is refused RESOURCE_EXHAUSTED naming
what ran out (SG_SEC_EXPECT: "memory" or "pids"), before anything is
allocated: the warm pool is held back too, so no sandbox process exists,
and the host keeps answering its health check.

Run by run_in_netns.sh (CTest: security_admit_memory, security_admit_pids).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgsec  # noqa: E402


class AdmitReserve(unittest.TestCase):
    def test_refused_naming_the_resource(self):
        c = sgsec.Client()
        want = os.environ["SG_SEC_EXPECT"]
        try:
            for _ in range(3):
                with self.assertRaises(c.grpc.RpcError) as cm:
                    c.create(retries=1)
                e = cm.exception
                self.assertEqual(e.code(), c.grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
                self.assertIn("host is out of %s" % want, e.details())
                print("refusal: %s" % e.details(), file=sys.stderr)
            # this host's sandboxes are cgroups "<host name>-<id>" (other
            # helpers' hosts may share the uid range, never the name)
            name = os.environ["SG_SEC_HOST_NAME"] + "-"
            root = "/sys/fs/cgroup"
            made = [os.path.join(c, "sandgate", d)
                    for c in [""] + sorted(os.listdir(root))
                    if os.path.isdir(os.path.join(root, c, "sandgate"))
                    for d in os.listdir(os.path.join(root, c, "sandgate")) if d.startswith(name)]
            self.assertEqual(made, [], "a refused host still made sandboxes")
            with open(os.path.join(os.environ["SG_SEC_RUN_DIR"], "host.log")) as f:
                self.assertIn("pool refill held back: host is out of %s" % want, f.read())
            self.assertEqual(sgsec.host_health()[0], "OK")
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
