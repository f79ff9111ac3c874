#!/usr/bin/python3
"""Errors leak neither internals nor existence (issue 13, point 4).

A gateway in front of two hosts (sgcluster.py). Tenant "other" has a
sandbox on host H, which the gateway has cached (it made it); tenant "demo"
has one there too. H is stopped by its PID. Then, for every RPC that names
a sandbox, demo's answers for
  (a) an id that never existed, naming H,
  (b) other's sandbox on H,
  (c) its own sandbox on H
are compared: (a) and (b) must be byte-identical (code, message, every
trailer, grpc-status-details-bin included), and all three UNAVAILABLE with
ErrorInfo reason HOST_UNAVAILABLE and no address, port, resolver or socket
text, which the gateway logs instead. With H up, (a) and (b) are identical
too (NOT_FOUND, "no such sandbox"). The other host keeps serving.
"""
import os
import subprocess
import sys
import threading
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgcluster  # noqa: E402
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KD, KO = "hd-demo-key-1", "hd-other-key-2"

POLICY = sg.two_tenant_policy(KD, KO)

# Words of grpc's own status text for a host it cannot reach.
LEAKS = ("127.0.0.1", "ipv4", "ipv6", "connect", "Connection", "refused", "remote host",
         "addresses", "last error", "UNKNOWN:", "/")

S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-host-down-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["c"] = c = sgcluster.Cluster(tmp, POLICY, n_hosts=2, pool_size=1)
    unittest.addModuleCleanup(c.stop)
    c.start()
    S["api"] = sg.Api(tmp, c.addr)
    unittest.addModuleCleanup(S["api"].close)


TASKS = {}   # sandbox id -> its task


def on_host(api, key, user, host, tries=24):
    """Create sandboxes (new task each time) until one lands on host."""
    for i in range(tries):
        task = "hd-%s-%d" % (uuid.uuid4().hex[:6], i)
        sb = api.create(key, user, task)
        TASKS[sb.sandbox_id] = task
        if sb.sandbox_id.startswith(host + "-"):
            return sb.sandbox_id
    raise AssertionError("no sandbox landed on %s in %d creates" % (host, tries))


def requests(pb, sid, user):
    return [
        ("GetSandbox", pb.GetSandboxRequest(sandbox_id=sid, user_id=user)),
        ("KillSandbox", pb.KillSandboxRequest(sandbox_id=sid, user_id=user)),
        ("ExtendSandbox", pb.ExtendSandboxRequest(sandbox_id=sid, user_id=user, ttl_seconds=60)),
        ("CreateContext", pb.CreateContextRequest(sandbox_id=sid, user_id=user)),
        ("RunCode", pb.RunCodeRequest(sandbox_id=sid, user_id=user, code="1+1")),
        ("Exec", pb.ExecRequest(sandbox_id=sid, user_id=user, command="true")),
        ("WriteFile", pb.WriteFileRequest(sandbox_id=sid, user_id=user, path="a.txt",
                                          data=b"x")),
        ("ReadFile", pb.ReadFileRequest(sandbox_id=sid, user_id=user, path="a.txt")),
    ]


def answer(api, method, req, key):
    """(code, details, trailing metadata as a sorted tuple) of a failing call.
    x-request-id (a fresh random id per call, for correlating logs) is kept as
    "present", not compared by value."""
    try:
        api.call(method, req, key, timeout=30)
    except grpc.RpcError as e:
        return e.code(), e.details(), trailers(e), e
    return C.OK, "", (), None


def trailers(e):
    return tuple(sorted((k, "<per call>" if k == "x-request-id" else v)
                        for k, v in (e.trailing_metadata() or ())))


def host_pb(tmp):
    """host.proto's messages (the gateway -> host API), generated into tmp."""
    out = os.path.join(tmp, "hoststubs")
    if not os.path.isdir(out):
        os.makedirs(out)
        proto = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
        subprocess.run(["protoc", "-I", proto, "--python_out=" + out,
                        "sandgate/v1/host.proto", "sandgate/v1/sandgate.proto"],
                       check=True, timeout=60)
        sys.path.insert(0, out)
    import importlib
    return importlib.import_module("sandgate.v1.host_pb2")


def poll_lists(tmp, port, out, done, first):
    """demo's owners as the host lists them (the load report's view), as
    often as it answers, until it no longer does after `done`."""
    hpb = host_pb(tmp)
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    call = ch.unary_unary("/sandgate.v1.Host/ListSandboxes",
                          request_serializer=hpb.HostListRequest.SerializeToString,
                          response_deserializer=hpb.HostListResponse.FromString)
    try:
        while True:
            try:
                r = call(hpb.HostListRequest(all_tenants=True), timeout=2)
                out.append({x.owner.task_id for x in r.sandboxes if x.owner.tenant_id == "demo"})
                first.set()
            except grpc.RpcError:
                if done.is_set():
                    return
    finally:
        ch.close()


class HostDown(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        c, api = S["c"], S["api"]
        cls.down, cls.up = c.hosts[1], c.hosts[0]
        cls.theirs = on_host(api, KO, "ou", cls.down.name)   # cached: the gateway made it
        cls.mine = on_host(api, KD, "du", cls.down.name)
        cls.never = "%s-%s" % (cls.down.name, uuid.uuid4().hex)
        cls.mine_up = on_host(api, KD, "du", cls.up.name)
        # with the host up: existence is not observable either
        cls.up_answers = {}
        for (m, ra), (_, rb) in zip(requests(api.pb, cls.never, "du"),
                                    requests(api.pb, cls.theirs, "du")):
            cls.up_answers[m] = (answer(api, m, ra, KD), answer(api, m, rb, KD))
        cls.port = cls.down.port
        # While it stops, the host must never list demo's sandboxes without
        # mine: a gateway takes such a list as its quota count and would
        # place the retry below elsewhere (the stop kills the sandboxes but
        # ends none of them). Polled until the host stops answering, so the
        # check waits for a state, not a time.
        cls.stop_lists = []
        done, first = threading.Event(), threading.Event()
        poller = threading.Thread(target=poll_lists, args=(
            S["tmp"], cls.port, cls.stop_lists, done, first), daemon=True)
        poller.start()
        first.wait(30)   # polling has begun: the stop below is seen from its start
        cls.down.stop()   # by its PID (SIGTERM)
        done.set()
        poller.join(30)

    def test_host_up_never_existed_and_other_tenants_alike(self):
        for m, (a, b) in self.up_answers.items():
            with self.subTest(rpc=m):
                self.assertEqual(a[0], C.NOT_FOUND, a[1])
                self.assertEqual(a[1], "no such sandbox")
                self.assertEqual(a[:3], b[:3])

    def check_public(self, code, details, trailers, e, what):
        self.assertEqual(code, C.UNAVAILABLE, "%s: %s %s" % (what, code, details))
        info = S["api"].error_info(e)
        self.assertIsNotNone(info, "%s: no ErrorInfo" % what)
        self.assertEqual(info.get("reason"), "HOST_UNAVAILABLE", (what, info))
        self.assertEqual(info.get("domain"), "sandgate")
        text = details + " " + info.get("message", "") + " " + repr(info.get("metadata"))
        for word in LEAKS + (str(self.port),):
            self.assertNotIn(word, text, "%s leaks %r: %s" % (what, word, text))

    def test_host_down_never_existed_equals_other_tenants(self):
        api = S["api"]
        for (m, ra), (_, rb), (_, rc) in zip(requests(api.pb, self.never, "du"),
                                             requests(api.pb, self.theirs, "du"),
                                             requests(api.pb, self.mine, "du")):
            with self.subTest(rpc=m):
                a = answer(api, m, ra, KD)
                b = answer(api, m, rb, KD)
                c = answer(api, m, rc, KD)
                self.assertEqual(a[:3], b[:3], "%s: never-existed vs other tenant's" % m)
                self.check_public(*a, what="%s never-existed" % m)
                self.check_public(*b, what="%s other tenant's" % m)
                self.check_public(*c, what="%s own" % m)
                # the caller's own id gets the same text (only the host is down)
                self.assertEqual(a[1], c[1])

    def test_a_stopping_host_never_lists_without_its_sandboxes(self):
        self.assertTrue(self.stop_lists, "the host never answered a list")
        for owners in self.stop_lists:
            self.assertIn(TASKS[self.mine], owners)

    def test_create_retry_of_a_task_on_the_down_host(self):
        # the task's live sandbox is on the stopped host: no second one elsewhere,
        # a retryable HOST_UNAVAILABLE, no address
        api = S["api"]
        code, det, tr, e = answer(api, "CreateSandbox", api.pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id="du", task_id=TASKS[self.mine]), KD)
        self.check_public(code, det, tr, e, "CreateSandbox retry")

    def test_other_host_still_serves_and_details_are_logged(self):
        api = S["api"]
        out, _, _, end, _ = api.run(KD, "du", self.mine_up, "6*7")
        self.assertIsNotNone(end)
        names = [s.sandbox_id for s in api.list(KD, "du")]
        self.assertIn(self.mine_up, names)
        self.assertNotIn(self.mine, names)
        # what the caller was not told is in the gateway's log, for operators
        log = S["c"].gateway_log()
        self.assertIn("127.0.0.1:%d" % self.port, log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
