#!/usr/bin/python3
"""A lost sandbox is not a killed one (issue 13, point 9).

A gateway and one host (sgcluster.py). Tenant demo creates sandbox LOST
(and runs code in it), one it kills itself (KILLED) and one whose TTL runs
out (EXPIRED). The host is SIGKILLed by its PID and started again (same
name, state dir and port). Then:
  - the owner gets NOT_FOUND with ErrorInfo reason SANDBOX_LOST (its id and
    when, never the owner fields the host sends the gateway), from the
    gateway's owner cache and, after a gateway restart, from the host's
    record;
  - another tenant, and the owner's tenant's other user, get exactly what
    an id that never existed gets (code, message, every trailer);
  - KILLED and EXPIRED answer the plain never-existed NOT_FOUND;
  - the journal is 0600 in the state dir;
  - a sandbox made in the second life is lost after an orderly stop (SIGTERM
    kills every sandbox; that is the platform too), and LOST stays lost
    through the third start's compaction; creates work after each restart.
"""
import os
import signal
import stat
import sys
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgcluster  # noqa: E402
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KD, KO = "ls-demo-key-1", "ls-other-key-2"

POLICY = sg.two_tenant_policy(KD, KO)


def trailers(e):
    """Sorted trailers; x-request-id (fresh per call, for logs) kept as present."""
    return tuple(sorted((k, "<per call>" if k == "x-request-id" else v)
                        for k, v in (e.trailing_metadata() or ())))


def get(api, key, user, sid):
    """(code, details, sorted trailers, error) of GetSandbox."""
    try:
        api.call("GetSandbox", api.pb.GetSandboxRequest(sandbox_id=sid, user_id=user), key,
                 timeout=30)
    except grpc.RpcError as e:
        return e.code(), e.details(), trailers(e), e
    return C.OK, "", (), None


def run(api, key, user, sid):
    try:
        api.call("RunCode", api.pb.RunCodeRequest(sandbox_id=sid, user_id=user, code="x"), key,
                 timeout=30)
    except grpc.RpcError as e:
        return e.code(), e.details(), trailers(e), e
    return C.OK, "", (), None


def wait_reachable(api, sid, timeout=40.0):
    """The gateway's channel backs off while the host is down: wait until a
    call reaches the restarted host."""
    end = time.monotonic() + timeout
    while True:
        a = get(api, KD, "du", sid)
        if a[0] != C.UNAVAILABLE or time.monotonic() > end:
            return a
        time.sleep(0.2)


class LostSandbox(unittest.TestCase):
    def setUp(self):
        self.tmp = sg.new_tmp("sandgate-lost-")
        self.addCleanup(sg.remove_tmp, self.tmp)
        self.c = sgcluster.Cluster(self.tmp, POLICY, n_hosts=1, pool_size=1)
        self.addCleanup(self.c.stop)
        self.c.start()
        self.api = sg.Api(self.tmp, self.c.addr)
        self.addCleanup(lambda: self.api.close())
        self.host = self.c.hosts[0]

    def restart_gateway(self):
        self.api.close()
        self.c.gw.terminate()
        self.c.gw.wait(timeout=10)
        self.c._start_gateway()
        self.api = sg.Api(self.tmp, self.c.addr)

    def never(self):
        return "%s-%s" % (self.host.name, uuid.uuid4().hex)

    def assert_lost(self, a, sid, what):
        self.assertEqual(a[0], C.NOT_FOUND, "%s: %s %s\n%s" % (what, a[0], a[1], self.c.logs()))
        info = self.api.error_info(a[3])
        self.assertIsNotNone(info, "%s: no ErrorInfo (%s)" % (what, a[1]))
        self.assertEqual(info.get("reason"), "SANDBOX_LOST", (what, info))
        self.assertEqual(info.get("domain"), "sandgate")
        md = info.get("metadata", {})
        self.assertEqual(md.get("sandbox_id"), sid)
        self.assertTrue(md.get("lost_at", "").endswith("Z"), md)
        self.assertEqual(set(md), {"sandbox_id", "lost_at"}, "owner fields leak: %r" % md)
        self.assertIn("restarted", a[1])

    def assert_plain(self, a, b, what):
        """a (the id in question) is exactly b (an id that never existed)."""
        self.assertEqual(b[0], C.NOT_FOUND)
        self.assertEqual(b[1], "no such sandbox")
        self.assertEqual(a[:3], b[:3], what)
        self.assertFalse(any(k == sg.DETAILS_KEY for k, _ in a[2]), (what, a[2]))

    def test_restart_loses_live_sandboxes_only(self):
        api = self.api
        lost = api.create(KD, "du", "ls-lost").sandbox_id
        out, _, _, end, _ = api.run(KD, "du", lost, "x = 41\nprint(x + 1)")
        self.assertEqual(out.strip(), "42")
        killed = api.create(KD, "du", "ls-killed").sandbox_id
        api.kill(KD, "du", killed)
        expired = api.create(KD, "du", "ls-expired", ttl_seconds=2).sandbox_id
        sg.wait_for(lambda: get(api, KD, "du", expired)[0] == C.NOT_FOUND, timeout=15)
        self.assertEqual(get(api, KD, "du", expired)[0], C.NOT_FOUND)

        journal = os.path.join(self.host.state_dir, self.host.name + ".journal")
        # An end is answered before the journal's writer thread has it on
        # disk (milliseconds; more on a loaded machine, journal.c): crash
        # only once both ends are written, as a host that ran a while would.
        def ended_on_disk():
            with open(journal) as f:
                recs = [ln.split() for ln in f]
            last = {}
            for r in recs:
                for sid in (killed, expired):
                    if sid in r:
                        last[sid] = r[0]
            return all(last.get(sid) != "C" for sid in (killed, expired))
        self.assertTrue(sg.wait_for(ended_on_disk, timeout=10), "ends not in the journal")
        self.host.stop(signal.SIGKILL)   # a crash, by its PID
        self.host.start()

        # the owner, through the gateway's owner cache (a forwarded call)
        a = wait_reachable(api, lost)
        self.assert_lost(a, lost, "owner GetSandbox (cached)")
        self.assert_lost(run(api, KD, "du", lost), lost, "owner RunCode (cached)")
        # anyone else: the never-existed answer, byte for byte
        self.assert_plain(get(api, KO, "ou", lost), get(api, KO, "ou", self.never()),
                          "other tenant")
        self.assert_plain(get(api, KD, "du2", lost), get(api, KD, "du2", self.never()),
                          "same tenant, other user")
        # ended by their owner or their TTL: not lost
        self.assert_plain(get(api, KD, "du", killed), get(api, KD, "du", self.never()), "killed")
        self.assert_plain(get(api, KD, "du", expired), get(api, KD, "du", self.never()),
                          "expired")

        # a fresh gateway (no cache): the host's record proves the owner
        self.restart_gateway()
        api = self.api
        self.assert_lost(wait_reachable(api, lost), lost, "owner GetSandbox (host record)")
        self.assert_lost(run(api, KD, "du", lost), lost, "owner RunCode (host record)")
        self.assert_plain(get(api, KO, "ou", lost), get(api, KO, "ou", self.never()),
                          "other tenant, uncached")
        self.assert_plain(run(api, KO, "ou", lost), run(api, KO, "ou", self.never()),
                          "other tenant RunCode, uncached")

        # second life: a new sandbox, then an orderly stop, which kills it
        second = api.create(KD, "du", "ls-second").sandbox_id
        self.assertEqual(get(api, KD, "du", second)[0], C.OK)
        self.host.stop(signal.SIGTERM)
        self.host.start()
        self.assert_lost(wait_reachable(api, second), second, "lost at an orderly stop")
        self.assert_lost(get(api, KD, "du", lost), lost, "lost stays lost")
        self.assert_plain(get(api, KD, "du", killed), get(api, KD, "du", self.never()),
                          "killed, third life")
        # and the host serves new work
        fresh = api.create(KD, "du", "ls-fresh").sandbox_id
        out, _, _, _, _ = api.run(KD, "du", fresh, "print(6*7)")
        self.assertEqual(out.strip(), "42")
        self.assertEqual(stat.S_IMODE(os.stat(journal).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(self.host.state_dir).st_mode), 0o700)
        with open(journal) as f:
            text = f.read()
        self.assertTrue(text.startswith("sandgate-journal 1\n"), text[:80])


if __name__ == "__main__":
    unittest.main(verbosity=2)
