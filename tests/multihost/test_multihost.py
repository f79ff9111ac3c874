#!/usr/bin/python3
"""Scale-out on one machine (issue 15's proof): 3 etcd members, 2 gateways
and 3 hosts, each in its own network namespace with its own address, joined
by veth pairs to a bridge in a namespace of its own (sgnet.py). Nothing is
added to the machine's namespace, and before anything starts every
namespace is checked to have no route but the test's /24.

The outer process (this file, run as root) builds the namespaces, runs the
checks in an inner process inside the client's namespace (this file again,
with --inner), and tears everything down whatever happened: the inner
process stops what it started by PID; the outer then stops any PID that is
still recorded, removes the cgroups of sandboxes a killed host left, and
deletes every namespace, and fails if it had to.

Checks (tests run in order, sharing the cluster; a client spreads calls
over both gateways):
  1. a host joins -> new creates reach it within seconds;
  2. 20 racing creates of one task through both gateways -> one sandbox;
  3. 200 tasks -> spread over all hosts;
  4. one etcd member killed -> creates through both gateways keep working;
     two -> running sandboxes still answer, creates answer at once (with
     the claims work: UNAVAILABLE), and all is well once they return;
  5. kill -9 a host mid-RunCode -> the call fails UNAVAILABLE within 1 s
     (with claims: reason HOST_LOST, and the task is created again
     elsewhere; today the create says retry), other hosts unaffected; the
     host restarts -> the orphan's cgroup is gone and its id NOT_FOUND;
  6. partition a host (its bridge port down) -> calls to its sandboxes are
     refused at once after a few seconds (with claims: the task is created
     again elsewhere), the others unaffected; healed -> the task has
     exactly one sandbox that answers; 6b: the call that was running on it
     fails UNAVAILABLE (skipped while it does not end: a documented gap);
  7. drain a host (its drain file, as a pod annotation would; SIGUSR1 is
     checked at the end of 8) -> no new task goes there, its sandboxes keep
     answering and their tasks' creates return them; restarted, it takes
     new tasks again;
  8. kill -9 a gateway -> the other serves every sandbox, whichever gateway
     made it, with ownership intact (another user: PERMISSION_DENIED;
     another tenant: NOT_FOUND).
Whether the claims work is on main is read from etcd (keys besides hosts/
under the prefix); until then its stricter checks are left out, and the
run says so.

Env: SANDGATE_BUILD. SANDGATE_KEEP_TMP=1 keeps the logs.
"""
import os
import shutil
import concurrent.futures
import signal
import subprocess
import threading
import sys
import tempfile
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tenancy"))
import sgnet  # noqa: E402
sys.path.insert(0, os.path.join(HERE, ".."))
import drivers  # noqa: E402

NODES = {"c": 2, "e1": 11, "e2": 12, "e3": 13, "g1": 21, "g2": 22,
         "h1": 31, "h2": 32, "h3": 33}
KEY, OTHER_KEY = "mh-key-demo-0001", "mh-key-other-0002"
TTL = 2   # the hosts' lease_ttl, seconds
USER = "mh-user"


def outer():
    tmp = tempfile.mkdtemp(prefix="sandgate-multihost-")
    prefix = "sgmh%d" % (os.getpid() % 100000)
    net = sgnet.Net(prefix, NODES, tmp)
    tag = uuid.uuid4().hex[:5]
    rc = 1
    root_links = sgnet.root_links()
    try:
        net.up()
        # other work on the machine may add links meanwhile; none may be ours
        ours = {"br0", "eth0"} | {"v-" + n for n in NODES}
        gained = (sgnet.root_links() - root_links) & ours
        if gained:
            raise RuntimeError("the machine's own namespace gained %r" % sorted(gained))
        net.check_no_route_out()
        print("multihost: %d namespaces, no route out of %s.0/24" % (len(NODES) + 1, sgnet.SUBNET))
        sys.stdout.flush()
        env = dict(os.environ, SGMH_TMP=tmp, SGMH_PREFIX=prefix, SGMH_TAG=tag)
        r = subprocess.run(["nsenter", "--net=/run/netns/" + net.ns("c"), "--", sys.executable,
                            os.path.abspath(__file__), "--inner"], env=env, timeout=600)
        rc = r.returncode
    finally:
        cleaned = net.teardown(["m%s%s" % (tag, h) for h in ("h1", "h2", "h3")])
        left = [n for n in sgnet.sh("ip", "netns", "list").stdout.split() if n.startswith(prefix + "-")]
        print("multihost: teardown %s" % (", ".join(cleaned) or "nothing"))
        if left or net.leftover_pids():
            print("multihost: LEFT BEHIND: netns %r, pids %r" % (left, net.leftover_pids()))
            rc = 1
        stray = [c for c in cleaned if c.startswith("SIGKILL") or c.startswith("cgroup")]
        if stray and rc == 0:
            print("multihost: the inner run left processes or cgroups behind: %r" % stray)
            rc = 1
        if os.environ.get("SANDGATE_KEEP_TMP"):
            print("multihost: logs in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


# ---------------------------------------------------------------- inner ----
S = {}


def build():
    return os.environ.get("SANDGATE_BUILD", os.path.join(HERE, "..", "..", "build"))


class Cluster:
    def __init__(self):
        self.tmp = os.environ["SGMH_TMP"]
        self.tag = os.environ["SGMH_TAG"]
        self.net = sgnet.Net(os.environ["SGMH_PREFIX"], NODES, self.tmp)
        self.procs = {}         # node -> Popen
        self.prefix = "/sgmh-%s/" % self.tag
        self.endpoints = ["%s:2379" % self.net.addr(e) for e in ("e1", "e2", "e3")]
        self.uid = {"h1": 460000, "h2": 470000, "h3": 480000}

    def host_name(self, node):
        return "m%s%s" % (self.tag, node)

    def node_of(self, sandbox_id):
        name = sandbox_id.split("-", 1)[0]
        return next(n for n in ("h1", "h2", "h3") if self.host_name(n) == name)

    def log(self, node):
        return os.path.join(self.tmp, node + ".log")

    def start_etcd(self, node, state="new"):
        a = self.net.addr(node)
        cluster = ",".join("%s=http://%s:2380" % (e, self.net.addr(e)) for e in ("e1", "e2", "e3"))
        self.procs[node] = self.net.spawn(node, [
            "etcd", "--name", node, "--data-dir", os.path.join(self.tmp, node + ".etcd"),
            "--listen-client-urls", "http://%s:2379" % a, "--advertise-client-urls",
            "http://%s:2379" % a, "--listen-peer-urls", "http://%s:2380" % a,
            "--initial-advertise-peer-urls", "http://%s:2380" % a, "--initial-cluster", cluster,
            "--initial-cluster-state", state, "--initial-cluster-token", "sgmh-" + self.tag,
            "--heartbeat-interval", "100", "--election-timeout", "600"], self.log(node))

    def etcdctl(self, *args, timeout="2s"):
        return subprocess.run(["etcdctl", "--endpoints=" + ",".join(self.endpoints),
                               "--command-timeout=" + timeout] + list(args),
                              env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                              text=True, timeout=20)

    def start_host(self, node):
        d = os.path.join(self.tmp, node)
        os.makedirs(os.path.join(d, "rt"), exist_ok=True)
        cfg = os.path.join(d, "host.yaml")
        with open(os.path.join(HERE, "..", "..", "deploy", "local", "host.yaml")) as f:
            text = drivers.host_config(f.read())   # for this run's driver
        lines = []
        for line in text.splitlines():
            if line.startswith("listen:"):
                line = 'listen: "%s:7444"' % self.net.addr(node)
            elif line.startswith("name:"):
                line = "name: " + self.host_name(node)
            elif line.startswith("runtime_dir:"):
                line = "runtime_dir: " + os.path.join(d, "rt")
            elif line.startswith("uid_base:"):
                line = "uid_base: %d" % self.uid[node]
            lines.append(line)
        lines.append("registry:\n  etcd: [%s]\n  prefix: %s\n  lease_ttl: %d" % (
            ", ".join('"%s"' % e for e in self.endpoints), self.prefix, TTL))
        with open(cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        pf = os.path.join(d, "port")
        if os.path.exists(pf):
            os.unlink(pf)
        self.procs[node] = p = self.net.spawn(
            node, [os.path.join(build(), "bin", "sandgate-host"), "--config", cfg,
                   "--port-file", pf, "--drain-file", self.drain_file(node)], self.log(node),
            env=dict(os.environ, SANDGATE_POOL_SIZE="1"))
        return pf, p

    def drain_file(self, node):
        """What Kubernetes' downward API makes of the pod's annotations."""
        return os.path.join(self.tmp, node, "annotations")

    def start_gateway(self, node):
        cfg = os.path.join(self.tmp, node + ".yaml")
        with open(cfg, "w") as f:
            f.write('listen: "%s:7443"\npolicy: "%s"\naudit_log: "%s"\nthreads: 2\n'
                    "registry:\n  etcd: [%s]\n  prefix: %s\n" % (
                        self.net.addr(node), os.path.join(self.tmp, "policy.yaml"),
                        os.path.join(self.tmp, node + ".audit"),
                        ", ".join('"%s"' % e for e in self.endpoints), self.prefix))
        pf = os.path.join(self.tmp, node + ".port")
        self.procs[node] = p = self.net.spawn(
            node, [os.path.join(build(), "bin", "sandgate"), "--config", cfg, "--port-file", pf],
            self.log(node))
        return pf, p

    def kill(self, node, sig=signal.SIGKILL):
        p = self.procs.pop(node, None)
        if p and p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_all(self):
        for node in ("g1", "g2", "h1", "h2", "h3", "e1", "e2", "e3"):
            self.kill(node, signal.SIGTERM)


def wait(pred, what, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))


def wait_file(path, proc, what, timeout=60):
    wait(lambda: (os.path.exists(path) and os.path.getsize(path) > 0) or proc.poll() is not None,
         what, timeout)
    if proc.poll() is not None:
        raise AssertionError("%s exited with %s" % (what, proc.returncode))


def setUpModule():
    import sgtenancy as sg   # imports grpc: Debian's python3-grpcio
    S["sg"] = sg
    c = S["c"] = Cluster()
    unittest.addModuleCleanup(c.stop_all)
    with open(os.path.join(c.tmp, "policy.yaml"), "w") as f:
        f.write(sg.two_tenant_policy(KEY, OTHER_KEY).replace(
            "sandboxes_per_tenant: 100, sandboxes_per_user: 50",
            "sandboxes_per_tenant: 2000, sandboxes_per_user: 1000"))
    t0 = time.monotonic()
    for e in ("e1", "e2", "e3"):
        c.start_etcd(e)
    wait(lambda: c.etcdctl("put", c.prefix + "ready", "1").returncode == 0, "etcd quorum", 30)
    waits = [c.start_host(h) + ("host " + h,) for h in ("h1", "h2")]
    waits += [c.start_gateway(g) + ("gateway " + g,) for g in ("g1", "g2")]
    for pf, p, what in waits:
        wait_file(pf, p, what)
    S["api"] = {g: sg.Api(c.tmp, "%s:7443" % c.net.addr(g)) for g in ("g1", "g2")}
    for a in S["api"].values():
        unittest.addModuleCleanup(a.close)
    # both gateways place on both hosts
    for g in ("g1", "g2"):
        wait(lambda: len(hosts_of(g, 6)) == 2, "%s to see h1 and h2" % g, 30)
    print("cluster up in %.1f s" % (time.monotonic() - t0))
    # Task claims and sandbox records in etcd (the claims work) make the
    # stricter checks apply: anything under the prefix besides hosts/.
    # Read while a sandbox is live: a claim may go with its sandbox.
    probe = create("g1")
    keys = c.etcdctl("get", c.prefix, "--prefix", "--keys-only").stdout.split()
    kill("g1", probe)
    S["claims"] = any(not k[len(c.prefix):].startswith(("hosts/", "ready")) for k in keys)
    print("etcd holds %s" % ("claims/records" if S["claims"] else "host entries only"))


SANDBOXES = {}   # sandbox id -> (gateway that made it, task)
SANDBOXES_AGAIN = {}   # task -> the sandbox a create made for it after its host was lost


def _created_elsewhere(task, old, node):
    try:
        sid = S["api"]["g2"].create(KEY, USER, task).sandbox_id
    except Exception:   # noqa: BLE001
        return False
    if sid != old and S["c"].node_of(sid) != node:
        SANDBOXES_AGAIN[task] = sid
        return True
    return False


def create(g, task=None, user=USER, key=KEY, retry=5.0):
    """A new task's sandbox through gateway g. UNAVAILABLE is retried for
    `retry` seconds, as the API asks of clients: on a machine this loaded
    (other work shares its 2 cores) a gateway's health check can miss a
    host for a moment. Creates of one task are idempotent, so a retry never
    makes a second sandbox."""
    import grpc
    task = task or "mh-" + uuid.uuid4().hex[:10]
    end = time.monotonic() + retry
    while True:
        try:
            sb = S["api"][g].create(key, user, task)
            break
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > end:
                raise
            S["retries"] = S.get("retries", 0) + 1
            time.sleep(0.1)
    SANDBOXES[sb.sandbox_id] = (g, task)
    return sb.sandbox_id


def run_ok(g, sid, code, retry=5.0):
    """RunCode through g where the sandbox's host is up: UNAVAILABLE is
    retried for `retry` seconds (see create)."""
    import grpc
    end = time.monotonic() + retry
    while True:
        try:
            return S["api"][g].run(KEY, USER, sid, code)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > end:
                raise
            S["retries"] = S.get("retries", 0) + 1
            time.sleep(0.1)


def kill(g, sid, user=USER):
    S["api"][g].kill(KEY, user, sid)
    SANDBOXES.pop(sid, None)


def hosts_of(g, n):
    """The hosts n probe creates through g landed on (each killed again)."""
    seen = set()
    for _ in range(n):
        try:
            sid = create(g)
            seen.add(S["c"].node_of(sid))
            kill(g, sid)
        except Exception:   # noqa: BLE001 (a host not yet seen: keep polling)
            pass
    return seen


def code_of(e):
    return e.code().name


class MultiHost(unittest.TestCase):
    def test_1_a_host_joins_and_new_creates_reach_it(self):
        c = S["c"]
        pf, p = c.start_host("h3")
        wait_file(pf, p, "host h3")
        t_serving = time.monotonic()
        got = {}

        def reaches(g):
            def pred():
                if g not in got and "h3" in hosts_of(g, 3):
                    got[g] = time.monotonic() - t_serving
                return g in got
            return pred
        for g in ("g1", "g2"):
            wait(reaches(g), "a create through %s to land on h3" % g, 20)
        print("h3 serving -> first create there: g1 %.2f s, g2 %.2f s" % (got["g1"], got["g2"]))
        self.assertLess(max(got.values()), 15.0)   # ~1 s idle; 10-20 s at load average 40

    def test_2_racing_creates_of_one_task_get_one_sandbox(self):
        task = "race-" + uuid.uuid4().hex[:8]

        def one(i):
            g = "g1" if i % 2 else "g2"
            try:
                return create(g, task)
            except Exception as e:  # noqa: BLE001
                return "error " + (code_of(e) if hasattr(e, "code") else repr(e))
        barrier = threading.Barrier(20)

        def raced(i):
            barrier.wait()
            return one(i)
        with concurrent.futures.ThreadPoolExecutor(20) as ex:
            ids = list(ex.map(raced, range(20)))
        print("20 racing creates of one task through both gateways: %s" % sorted(set(ids)))
        self.assertEqual(len(set(ids)), 1, ids)
        self.assertFalse(ids[0].startswith("error"), ids)
        SANDBOXES[ids[0]] = ("g1", task)

    def test_3_200_tasks_spread_over_every_host(self):

        def one(i):
            g = "g1" if i % 2 else "g2"
            task = "spread-%d-%s" % (i, uuid.uuid4().hex[:6])
            return g, create(g, task)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            made = list(ex.map(one, range(200)))
        took = time.monotonic() - t0
        per = {}
        for _, sid in made:
            per[S["c"].node_of(sid)] = per.get(S["c"].node_of(sid), 0) + 1
        print("200 tasks (8 at a time, both gateways) in %.1f s: %s" % (took, per))
        self.assertEqual(sum(per.values()), 200)
        self.assertEqual(len({sid for _, sid in made}), 200)
        for h in ("h1", "h2", "h3"):
            self.assertGreaterEqual(per.get(h, 0), 40, per)   # an even share is 66
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda m: S["api"][m[0]].kill(KEY, USER, m[1]), made))

    def test_4_etcd_members_lost_one_then_two(self):
        c = S["c"]
        live = create("g1")
        out, _, err, _, _ = run_ok("g2", live, "state = 41")
        self.assertIsNone(err)
        c.kill("e3")
        ok = 0
        for i in range(10):
            create("g1" if i % 2 else "g2", retry=0)   # raises on any error
            ok += 1
        self.assertEqual(ok, 10)
        print("one etcd member down: 10/10 creates")
        c.kill("e2")
        time.sleep(1.5)   # past the election timeout: no leader any more
        # running sandboxes still answer, through either gateway
        for g in ("g1", "g2"):
            out, _, err, _, _ = run_ok(g, live, "state += 1; print(state)")
            self.assertIsNone(err, g)
        codes = {}
        for i in range(6):
            t0 = time.monotonic()
            try:
                create("g1" if i % 2 else "g2", retry=0)
                codes.setdefault("OK", []).append(time.monotonic() - t0)
            except Exception as e:  # noqa: BLE001
                import grpc
                self.assertIsInstance(e, grpc.RpcError)
                self.assertEqual(code_of(e), "UNAVAILABLE", e.details())
                info = S["api"]["g1"].error_info(e)
                self.assertNotIn(sgnet.SUBNET, e.details() + repr(info))   # no internal address
                if S.get("claims"):
                    self.assertEqual((info or {}).get("reason"), "REGISTRY_UNAVAILABLE", info)
                codes.setdefault("UNAVAILABLE", []).append(time.monotonic() - t0)
        print("two etcd members down: creates %s" % {k: "%d (max %.2f s)" % (len(v), max(v))
                                                    for k, v in codes.items()})
        for v in codes.values():
            self.assertLess(max(v), 5.0)   # a clean answer, never a hang
        if S.get("claims"):
            self.assertNotIn("OK", codes, "a create succeeded with no etcd quorum")
        # back
        c.start_etcd("e2", "existing")
        c.start_etcd("e3", "existing")
        wait(lambda: c.etcdctl("put", c.prefix + "ready", "2").returncode == 0, "etcd quorum back", 30)
        wait(lambda: len(hosts_of("g1", 6) | hosts_of("g2", 6)) == 3, "all hosts placed on", 20)
        out, _, err, _, _ = run_ok("g1", live, "print(state)")
        self.assertIsNone(err)
        self.assertEqual(out.strip(), "43")

    def on(self, node, g="g1"):
        """A new sandbox on node (new tasks until one lands there)."""
        for _ in range(60):
            sid = create(g)
            if S["c"].node_of(sid) == node:
                return sid
        raise AssertionError("no create landed on " + node)

    def streaming_run(self, g, sid, code, started, result):
        """RunCode in a thread: result gets (code name or OK, seconds from
        its first stdout to its end, reason)."""
        api = S["api"][g]
        req = api.pb.RunCodeRequest(sandbox_id=sid, user_id=USER, code=code, timeout_seconds=60)
        t_first = None
        try:
            for ev in api.stub.RunCode(req, metadata=api.md(KEY), timeout=90):
                if ev.WhichOneof("event") == "stdout" and t_first is None:
                    t_first = time.monotonic()
                    started.set()
            result.append(("OK", time.monotonic(), None))
        except Exception as e:  # noqa: BLE001
            info = api.error_info(e) if hasattr(e, "trailing_metadata") else None
            result.append((code_of(e) if hasattr(e, "code") else repr(e), time.monotonic(),
                           (info or {}).get("reason")))
        started.set()

    def test_5_kill_9_a_host_mid_runcode(self):
        c = S["c"]
        victim, other = self.on("h2"), self.on("h1", "g2")
        task = SANDBOXES[victim][1]
        cg = "/sys/fs/cgroup/pids/sandgate/" + victim
        started, res = threading.Event(), []
        code = "import time\nprint('go', flush=True)\ntime.sleep(20)\n"
        th = threading.Thread(target=self.streaming_run, args=("g2", victim, code, started, res))
        th.start()
        self.assertTrue(started.wait(20), "the RunCode never started")
        t_kill = time.monotonic()
        c.kill("h2")
        try:
            th.join(30)
            self.assertFalse(th.is_alive(), "the RunCode on the killed host did not end")
            codename, t_end, reason = res[0]
            print("host killed mid-RunCode: %s (%s) after %.2f s" % (codename, reason,
                                                                     t_end - t_kill))
            # the connection's reset says so at once, before the registry can
            # (the lease outlives the host by up to lease_ttl)
            self.assertEqual(codename, "UNAVAILABLE")
            self.assertIn(reason, ("HOST_UNAVAILABLE", "HOST_LOST"))
            self.assertLess(t_end - t_kill, 1.0)
            # other hosts' sandboxes are unaffected
            out, _, err, _, _ = run_ok("g1", other, "print('fine')")
            self.assertIsNone(err)
            self.assertEqual(out.strip(), "fine")
            if S.get("claims"):
                # once its lease is gone: HOST_LOST, and the task is created
                # again elsewhere
                lost = {}

                def says_lost():
                    try:
                        S["api"]["g1"].run(KEY, USER, victim, "1")
                    except Exception as e:  # noqa: BLE001
                        lost["r"] = (code_of(e), (S["api"]["g1"].error_info(e) or {}).get("reason"))
                    return lost.get("r") == ("UNAVAILABLE", "HOST_LOST")
                wait(says_lost, "calls to the lost sandbox to say HOST_LOST", 8)
                print("HOST_LOST %.2f s after the kill" % (time.monotonic() - t_kill))
                sid = S["api"]["g1"].create(KEY, USER, task).sandbox_id
                self.assertNotEqual(sid, victim)
                self.assertNotEqual(c.node_of(sid), "h2")
            else:             # today: its live sandbox is on a host that is down
                with self.assertRaises(Exception) as cm:
                    S["api"]["g1"].create(KEY, USER, task)
                self.assertEqual(code_of(cm.exception), "UNAVAILABLE")
        finally:
            # it restarts: the orphan (its cgroup, its processes) is cleaned
            # up, and its owner hears the sandbox is gone
            pf, p = c.start_host("h2")
            wait_file(pf, p, "host h2 again")
        wait(lambda: not os.path.exists(cg), "the orphan's cgroup to go", 10)
        wait(lambda: "h2" in hosts_of("g1", 4), "h2 placed on again", 10)
        seen = []

        def gone():
            try:
                S["api"]["g1"].run(KEY, USER, victim, "1")
                seen.append("OK")
            except Exception as e:  # noqa: BLE001
                seen.append(code_of(e))
            return seen[-1] == "NOT_FOUND"
        # UNAVAILABLE for a moment is the health check catching up under load
        wait(gone, "the lost sandbox's id to be NOT_FOUND", 10)
        self.assertEqual(set(seen) - {"UNAVAILABLE", "NOT_FOUND"}, set(), seen)

    def test_6_partition_a_host_then_heal(self):
        c = S["c"]
        victim, other = self.on("h1"), self.on("h2", "g2")
        task = SANDBOXES[victim][1]
        _, _, err, _, _ = run_ok("g1", victim, "mark = 'before'")
        self.assertIsNone(err)
        started, res = threading.Event(), []
        code = "import time\nprint('go', flush=True)\ntime.sleep(8)\n"
        th = threading.Thread(target=self.streaming_run, args=("g1", victim, code, started, res))
        th.start()
        self.assertTrue(started.wait(20), "the RunCode never started")
        t_cut = time.monotonic()
        c.net.link("h1", up=False)
        try:
            if S.get("claims"):
                # the running call fails HOST_LOST within 1 s of the host's
                # lease running out (lease_ttl 2 s after the cut)
                # checked by test_6b (a known gap: docs/operations.md)
                th.join(TTL + 1.5)
                S["inflight_partition"] = (list(res), time.monotonic() - t_cut)
            # new calls to its sandboxes are refused, promptly once noticed
            refused = {}

            def prompt_refusal():
                t0 = time.monotonic()
                try:
                    S["api"]["g2"].call("GetSandbox", S["api"]["g2"].pb.GetSandboxRequest(
                        sandbox_id=victim, user_id=USER), KEY, timeout=3)
                    return False
                except Exception as e:  # noqa: BLE001
                    refused["code"] = code_of(e)
                    return code_of(e) == "UNAVAILABLE" and time.monotonic() - t0 < 0.5
            t = wait(prompt_refusal, "calls to the cut-off host to be refused at once", 10)
            print("partitioned: calls to its sandboxes refused at once %.2f s after the cut"
                  % (time.monotonic() - t_cut))
            self.assertEqual(refused["code"], "UNAVAILABLE")
            self.assertLess(t, 6.0)
            out, _, err, _, _ = run_ok("g2", other, "print('fine')")
            self.assertIsNone(err)
            again = None
            if S.get("claims"):   # its task, created again elsewhere meanwhile
                wait(lambda: _created_elsewhere(task, victim, "h1"), "the task re-created", 10)
                again = SANDBOXES_AGAIN[task]
        finally:
            c.net.link("h1", up=True)
        th.join(30)
        # healed: the task has exactly one sandbox that answers
        wait(lambda: "h1" in hosts_of("g1", 6), "h1 placed on again", 15)
        reachable = []
        for sid in [victim] + ([again] if again else []):
            try:
                out, _, err, _, _ = run_ok("g2", sid, "print(1)")
                if err is None:
                    reachable.append(sid)
            except Exception as e:  # noqa: BLE001
                self.assertEqual(code_of(e), "NOT_FOUND", e)
        print("healed: reachable for the task: %s" % reachable)
        self.assertEqual(len(reachable), 1, reachable)

    def test_6b_a_running_call_on_a_cut_off_host(self):
        """The call that was running on the host when it was cut off (no TCP
        reset): it should fail HOST_LOST once the lease is gone. Documented
        as not built (docs/operations.md, "Not built yet": such calls end at
        their own deadline), so a call still running is a skip naming the
        gap, not a failure; a call that ended must have ended UNAVAILABLE."""
        if not S.get("claims"):
            self.skipTest("needs the claims work")
        res, after = S.get("inflight_partition", ([], 0))
        if not res:
            self.skipTest("known gap: the running call on the cut-off host had not ended %.1f s "
                          "after the cut" % after)
        codename, _, reason = res[0]
        print("the running call on the cut-off host ended %s (%s)" % (codename, reason))
        self.assertEqual(codename, "UNAVAILABLE")
        self.assertIn(reason, ("HOST_LOST", "HOST_UNAVAILABLE"))

    def test_7_drain_a_host_then_restart_it(self):
        """Drained (its --drain-file, as a pod annotation would): no new task
        goes to the host; its sandboxes keep running and their tasks keep
        them. Restarted (the drain file removed), it takes new tasks."""
        c = S["c"]
        on_h3 = None
        for _ in range(40):
            sid = create("g1")
            if c.node_of(sid) == "h3":
                on_h3 = sid
                break
        self.assertIsNotNone(on_h3, "no create landed on h3")
        _, _, err, _, _ = run_ok("g2", on_h3, "kept = 7")
        self.assertIsNone(err)
        # as the kubelet updates a downward API file: a new file renamed over
        with open(c.drain_file("h3") + ".new", "w") as f:
            f.write('kubernetes.io/config.seen="x"\nsandgate.io/drain="true"\n')
        os.replace(c.drain_file("h3") + ".new", c.drain_file("h3"))
        t = wait(lambda: '"draining":true' in c.etcdctl(
            "get", c.prefix + "hosts/" + c.host_name("h3"), "--print-value-only").stdout,
            "h3's entry to say draining", 5)
        time.sleep(0.3)   # the watch event reaching both gateways
        landed = [c.node_of(create("g1" if i % 2 else "g2")) for i in range(30)]
        print("h3's entry said draining %.2f s after its drain file did; 30 new tasks then: %s" % (
            t, {n: landed.count(n) for n in sorted(set(landed))}))
        self.assertNotIn("h3", landed)
        for g in ("g1", "g2"):
            out, _, err, _, _ = run_ok(g, on_h3, "print(kept)")
            self.assertIsNone(err)
            self.assertEqual(out.strip(), "7")
            # the task's retry gets its sandbox, on the draining host
            self.assertEqual(S["api"][g].create(KEY, USER, SANDBOXES[on_h3][1]).sandbox_id, on_h3)
        # the upgrade's last step: stop it, start it, it takes new tasks again
        c.kill("h3", signal.SIGTERM)
        os.unlink(c.drain_file("h3"))
        pf, p = c.start_host("h3")
        wait_file(pf, p, "host h3 again")
        wait(lambda: "h3" in hosts_of("g1", 6) and "h3" in hosts_of("g2", 6),
             "new tasks on the restarted h3", 15)

    def test_8_kill_9_a_gateway_the_other_serves_every_sandbox(self):
        c = S["c"]
        mine = [create("g1" if i % 2 else "g2") for i in range(8)]
        for sid in mine:
            _, _, err, _, _ = run_ok("g1", sid, "who = %r" % sid)
            self.assertIsNone(err)
        c.kill("g1")
        import grpc
        api = S["api"]["g2"]
        for sid in mine:
            out, _, err, _, _ = run_ok("g2", sid, "print(who)")
            self.assertIsNone(err, sid)
            self.assertEqual(out.strip(), sid)
            with self.assertRaises(grpc.RpcError) as cm:
                api.run(KEY, "mh-someone-else", sid, "1")
            self.assertEqual(code_of(cm.exception), "PERMISSION_DENIED")
            with self.assertRaises(grpc.RpcError) as cm:
                api.run(OTHER_KEY, USER, sid, "1")
            self.assertEqual(code_of(cm.exception), "NOT_FOUND")
        print("g1 killed: g2 served all %d sandboxes (on %s)"
              % (len(mine), sorted({c.node_of(s) for s in mine})))
        # the other way to drain: SIGUSR1
        c.procs["h1"].send_signal(signal.SIGUSR1)
        t = wait(lambda: '"draining":true' in c.etcdctl(
            "get", c.prefix + "hosts/" + c.host_name("h1"), "--print-value-only").stdout,
            "h1's entry to say draining after SIGUSR1", 5)
        print("SIGUSR1: h1's entry said draining %.2f s later" % t)


def inner():
    r = subprocess.run(["etcdctl", "version"], capture_output=True)
    if r.returncode != 0:
        print("etcdctl missing")
        return 1
    prog = unittest.main(module=__name__, argv=[sys.argv[0], "-v"], exit=False)
    print("calls retried on UNAVAILABLE: %d; load average %s" % (
        S.get("retries", 0), open("/proc/loadavg").read().split()[0]))
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("multihost: needs root (network namespaces)")
        sys.exit(1)
    sys.exit(inner() if "--inner" in sys.argv else outer())
