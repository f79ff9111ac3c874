#!/usr/bin/python3
"""API-key digests from a file of their own (gateway config `api_keys_file`),
as Kubernetes mounts a Secret beside the policy's ConfigMap.

A gateway alone (its one static host is a refused port: authentication is
decided before any host is asked, so ListSandboxes answers UNAUTHENTICATED
for a key nobody knows and UNAVAILABLE for a known one). The policy gives
tenant `demo` no key and tenant `other` one; the keys file, laid out as the
kubelet writes a Secret volume (keys.yaml -> ..data/keys.yaml, ..data ->
..<timestamp>), gives demo its key. Checks:
  1. the file's key authenticates as demo, an unknown key does not, the
     policy's own key still works;
  2. a Secret swap (a new ..data) to another key is live within a second
     and the old key stops working; five swaps, times printed;
  3. a keys file with errors (a tenant the policy lacks, a value that is not
     a digest, a digest the policy gives another tenant) is rejected with
     file:line:col, and the last good keys stay live;
  4. --check-config loads the keys file: an error there is exit 1 naming
     it; a missing file too.

Env: SANDGATE_BUILD. Run with /usr/bin/python3.
"""
import os
import subprocess
import sys
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KO, K1, K2 = "kf-other-key-0001", "kf-demo-key-0001", "kf-demo-key-0002"
POLICY = """version: 1
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: []
    templates: [code-interpreter]
  - id: other
    api_keys: [%s]
    templates: [code-interpreter]
""" % sg.key_hash(KO)
BOUND_S = 1.0
S = {"gen": 0}


def keys_yaml(*keys):
    return "# tenant id: SHA-256 of its API keys\ndemo:\n" + "".join(
        "  - %s\n" % sg.key_hash(k) for k in keys)


def swap_in(text):
    """As the kubelet's AtomicWriter: a new timestamped dir, a ..data_tmp
    symlink to it renamed over ..data, then the old dir removed."""
    d = S["secret"]
    S["gen"] += 1
    new = "..2026_12_01_16_00_%02d.%d" % (S["gen"], os.getpid())
    os.mkdir(os.path.join(d, new))
    with open(os.path.join(d, new, "keys.yaml"), "w") as f:
        f.write(text)
    data = os.path.join(d, "..data")
    old = os.readlink(data) if os.path.islink(data) else None
    os.symlink(new, os.path.join(d, "..data_tmp"))
    os.rename(os.path.join(d, "..data_tmp"), data)
    if old:
        os.unlink(os.path.join(d, old, "keys.yaml"))
        os.rmdir(os.path.join(d, old))


def code(key):
    api = S["api"]
    return api.status("ListSandboxes", api.pb.ListSandboxesRequest(user_id="u"), key,
                      timeout=10)[0]


def authenticated(key):
    return code(key) != C.UNAUTHENTICATED


def cfg_text():
    with open(S["cfg"]) as f:
        return f.read()


def gw_log():
    with open(os.path.join(S["tmp"], "gateway.log")) as f:
        return f.read()


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-keysfile-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["secret"] = os.path.join(tmp, "api-keys")
    os.mkdir(S["secret"])
    swap_in(keys_yaml(K1))
    os.symlink("..data/keys.yaml", os.path.join(S["secret"], "keys.yaml"))
    with open(os.path.join(tmp, "policy.yaml"), "w") as f:
        f.write(POLICY)
    S["cfg"] = os.path.join(tmp, "gateway.yaml")
    with open(S["cfg"], "w") as f:
        f.write('listen: "127.0.0.1:1"\npolicy: policy.yaml\napi_keys_file: api-keys/keys.yaml\n'
                'hosts: [{name: h, address: "127.0.0.1:1"}]\n')
    pf = os.path.join(tmp, "gateway.port")
    log = open(os.path.join(tmp, "gateway.log"), "a")
    p = S["proc"] = subprocess.Popen(
        [os.path.join(sg.BUILD, "bin", "sandgate"), "--config", S["cfg"], "--listen",
         "127.0.0.1:0", "--port-file", pf], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    unittest.addModuleCleanup(stop)
    sg.wait_for(lambda: (os.path.exists(pf) and os.path.getsize(pf) > 0) or p.poll() is not None,
                15)
    assert p.poll() is None, gw_log()
    with open(pf) as f:
        S["api"] = sg.Api(tmp, "127.0.0.1:" + f.read().strip())


def stop():
    p = S.get("proc")
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class KeysFile(unittest.TestCase):
    def test_1_keys_from_the_file_authenticate(self):
        self.assertTrue(authenticated(K1))
        self.assertEqual(code(K1), C.UNAVAILABLE)   # past auth: the host is not there
        self.assertEqual(code(K2), C.UNAUTHENTICATED)
        self.assertEqual(code("not-a-key"), C.UNAUTHENTICATED)
        self.assertTrue(authenticated(KO))          # the policy's own key
        self.assertIn("API keys from %s" % os.path.join(S["secret"], "keys.yaml"), gw_log())
        self.assertNotIn(sg.key_hash(K1), gw_log())  # digests are not logged either

    def test_2_secret_swaps_are_live_within_a_second(self):
        times = []
        old, new = K1, K2
        for _ in range(5):
            t0 = time.monotonic()
            swap_in(keys_yaml(new))
            self.assertTrue(sg.wait_for(lambda: authenticated(new) and not authenticated(old),
                                        5), gw_log()[-2000:])
            times.append(time.monotonic() - t0)
            old, new = new, old
        print("keys file swaps live after: %s s" % ", ".join("%.2f" % t for t in times))
        self.assertLess(max(times), BOUND_S)
        S["live"] = old   # the key the last swap put in

    def test_3_a_bad_keys_file_is_rejected_and_the_last_good_stays(self):
        live = S.get("live", K1)
        self.assertTrue(authenticated(live))
        other = K2 if live == K1 else K1
        bad = ("demo:\n  - %s\n  - %s\n  - not-a-digest\nnobody:\n  - %s\n"
               % (sg.key_hash(other), sg.key_hash(KO), sg.key_hash("x")))
        before = gw_log().count("policy reload rejected")
        swap_in(bad)
        sg.wait_for(lambda: gw_log().count("policy reload rejected") > before, 5)
        log = gw_log()
        self.assertGreater(log.count("policy reload rejected"), before, log[-2000:])
        self.assertIn("keys.yaml:3:5: demo[1]: duplicate API key hash '%s': the policy gives "
                      "it to tenant 'other'" % sg.key_hash(KO), log)
        self.assertIn("keys.yaml:4:5: demo[2]: expected a SHA-256 hex digest", log)
        self.assertIn("keys.yaml:5:1: nobody: no tenant 'nobody' in the policy", log)
        self.assertTrue(authenticated(live))          # last good keys stay
        self.assertEqual(code(other), C.UNAUTHENTICATED)   # nothing of the bad file
        swap_in(keys_yaml(live))

    def test_4_check_config_reads_the_keys_file(self):
        gw = os.path.join(sg.BUILD, "bin", "sandgate")
        r = subprocess.run([gw, "--check-config", "--config", S["cfg"]], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        bad = os.path.join(S["tmp"], "bad-keys.yaml")
        with open(bad, "w") as f:
            f.write("demo: [%s]\nghost: []\n" % sg.key_hash("z"))
        cfg = os.path.join(S["tmp"], "gw-bad.yaml")
        with open(cfg, "w") as f:
            f.write(cfg_text().replace("api-keys/keys.yaml", bad))
        r = subprocess.run([gw, "--check-config", "--config", cfg], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("%s:2:1: ghost: no tenant 'ghost' in the policy" % bad, r.stdout + r.stderr)
        with open(cfg, "w") as f:
            f.write(cfg_text().replace("api-keys/keys.yaml", "no-such.yaml"))
        r = subprocess.run([gw, "--check-config", "--config", cfg], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("no-such.yaml", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
