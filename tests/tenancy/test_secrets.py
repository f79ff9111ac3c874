#!/usr/bin/python3
"""Scoped credentials (issue 5): a policy secret (source env SG_TEST_SECRET,
set in the daemons' environment through run.sh) granted to tenant demo for
template code-interpreter.

- CreateSandbox with secrets: [name] → the sandbox's env var has the value
  (compared by SHA-256 inside, so the value is never printed in clear);
- printing it gives [REDACTED:<name>] in stdout — whole, split in two flushed
  writes with a sleep between, in an exception message and traceback, and in
  Exec output (whole and split);
- a secret not granted → PERMISSION_DENIED, reason POLICY_DENIED, the rule in
  the trailer;
- a sandbox that did not ask has no such variable; the daemons' canary
  variable is in no sandbox;
- the value never appears in gateway.log, host.log or audit.log.
"""
import hashlib
import os
import sys
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KD, KO = "cs-demo-key-1", "cs-other-key-2"
SECRET = "sgval-" + uuid.uuid4().hex   # unique, so a grep is meaningful
OTHER_SECRET = "sgother-" + uuid.uuid4().hex
CANARY = "canary-" + uuid.uuid4().hex
NAME, ENV = "test_token", "TEST_SECRET_VAR"
TAG = "[REDACTED:%s]" % NAME

POLICY = """version: 1
templates:
  - name: code-interpreter
secrets:
  - name: %s
    source: {env: SG_TEST_SECRET}
    env: %s
    grants:
      - tenants: [demo]
        templates: [code-interpreter]
  - name: other_only
    source: {env: SG_TEST_OTHER_SECRET}
    env: OTHER_SECRET_VAR
    grants:
      - tenants: [other]
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
  - id: other
    api_keys: [%s]
    templates: [code-interpreter]
""" % (NAME, ENV, sg.key_hash(KD), sg.key_hash(KO))

S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-secrets-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY, env={"SG_TEST_SECRET": SECRET,
                                              "SG_TEST_OTHER_SECRET": OTHER_SECRET,
                                              "SG_TEST_DAEMON_CANARY": CANARY})
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = api = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(api.close)
    u = uuid.uuid4().hex[:6]
    S["sid"] = api.create(KD, "alice", "sec-" + u, secrets=[NAME]).sandbox_id
    S["plain"] = api.create(KD, "alice", "plain-" + u).sandbox_id
    unittest.addModuleCleanup(api.kill, KD, "alice", S["sid"])
    unittest.addModuleCleanup(api.kill, KD, "alice", S["plain"])


class Secrets(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]

    def run_(self, code, sid=None):
        return self.api.run(KD, "alice", sid or S["sid"], code)

    def assertNoLeak(self, *texts):
        for t in texts:
            self.assertNotIn(SECRET, t)
            self.assertNotIn(SECRET[:12], t, "half of the secret leaked")
            self.assertNotIn(SECRET[12:], t, "half of the secret leaked")

    def test_granted_secret_is_in_the_env(self):
        out, err, error, _, _ = self.run_(
            "import os, hashlib\n"
            "print(hashlib.sha256(os.environ.get(%r, '').encode()).hexdigest())" % ENV)
        self.assertIsNone(error, error)
        self.assertEqual(out.strip(), hashlib.sha256(SECRET.encode()).hexdigest())

    def test_print_is_redacted(self):
        out, err, error, _, ev = self.run_("import os\nprint(os.environ[%r])" % ENV)
        self.assertEqual(out, TAG + "\n")
        self.assertNoLeak(out, err)

    def test_print_in_two_flushed_halves_is_redacted(self):
        out, err, error, _, ev = self.run_(
            "import os, sys, time\n"
            "v = os.environ[%r]\n"
            "sys.stdout.write('<' + v[:12]); sys.stdout.flush()\n"
            "time.sleep(0.4)\n"
            "sys.stdout.write(v[12:] + '>\\n'); sys.stdout.flush()\n" % ENV)
        chunks = [e.stdout.data.decode() for e in ev if e.WhichOneof("event") == "stdout"]
        self.assertEqual(out, "<" + TAG + ">\n", chunks)
        self.assertNoLeak(*chunks)

    def test_stderr_and_exception_are_redacted(self):
        out, err, error, _, ev = self.run_(
            "import os, sys\n"
            "print(os.environ[%r], file=sys.stderr)\n"
            "raise ValueError('token is ' + os.environ[%r])" % (ENV, ENV))
        self.assertIn(TAG, err)
        self.assertIsNotNone(error)
        self.assertEqual(error.name, "ValueError")
        self.assertIn(TAG, error.value)
        self.assertNoLeak(out, err, error.value, error.traceback)
        self.assertIn(TAG, error.traceback + error.value)
        # every event, as bytes on the wire
        self.assertNoLeak(*(e.SerializeToString().decode("latin-1") for e in ev))

    def test_result_repr_is_redacted(self):
        out, err, error, _, ev = self.run_("import os\nos.environ[%r]" % ENV)
        blob = b"".join(e.SerializeToString() for e in ev).decode("latin-1")
        self.assertNoLeak(blob)
        res = [e.result.data.decode() for e in ev if e.WhichOneof("event") == "result"]
        self.assertTrue(res and TAG in res[0], res)

    def test_exec_output_is_redacted(self):
        out, err, ex, ev = self.api.exec(KD, "alice", S["sid"], "echo \"$%s\"" % ENV)
        self.assertEqual(out, TAG + "\n")
        self.assertEqual(ex.exit_code, 0)
        out, err, ex, ev = self.api.exec(
            KD, "alice", S["sid"],
            "printf '%%s' \"$%s\" | cut -c1-12 | tr -d '\\n'; sleep 0.4; "
            "printf '%%s\\n' \"$%s\" | cut -c13-; echo \"$%s\" >&2" % (ENV, ENV, ENV))
        chunks = [e.stdout.data.decode() for e in ev if e.WhichOneof("event") == "stdout"]
        self.assertEqual(out, TAG + "\n", chunks)
        self.assertEqual(err, TAG + "\n")
        self.assertNoLeak(*chunks)

    def test_sandbox_that_did_not_ask_has_no_secret(self):
        out, err, error, _, _ = self.run_(
            "import os\n"
            "vals = ' '.join(os.environ.values())\n"
            "print(%r in os.environ, 'OTHER_SECRET_VAR' in os.environ,"
            " 'SG_TEST_SECRET' in os.environ, 'SG_TEST_DAEMON_CANARY' in os.environ,"
            " %r in vals, %r in vals)" % (ENV, SECRET[:16], CANARY[:16]), sid=S["plain"])
        self.assertIsNone(error, error)
        self.assertEqual(out, "False False False False False False\n")

    def test_daemon_canary_not_in_the_granted_sandbox(self):
        out, err, error, _, _ = self.run_(
            "import os\nprint('SG_TEST_DAEMON_CANARY' in os.environ, 'SG_TEST_SECRET' in "
            "os.environ, 'OTHER_SECRET_VAR' in os.environ, any(%r in v for v in "
            "os.environ.values()))" % CANARY[:16])
        self.assertEqual(out, "False False False False\n")
        out, _, _, _ = self.api.exec(KD, "alice", S["sid"], "env | grep -c %s || true" % CANARY[:16])
        self.assertEqual(out.strip(), "0")

    def test_ungranted_secret_is_policy_denied(self):
        for asked in (["other_only"], [NAME, "other_only"], ["no_such_secret"]):
            code, details, info, _ = self.api.status("CreateSandbox", self.api.pb.CreateSandboxRequest(
                template=sg.TEMPLATE, user_id="alice", task_id="deny-" + uuid.uuid4().hex[:6],
                secrets=asked), KD)
            with self.subTest(asked=asked):
                self.assertEqual(code, C.PERMISSION_DENIED, details)
                self.assertIsNotNone(info, "no grpc-status-details-bin trailer")
                self.assertEqual(info["reason"], "POLICY_DENIED")
                self.assertIn(info["metadata"].get("rule"),
                              ("default.deny-secret", "default.unknown-secret"), info)
                self.assertNoLeak(details, str(info))
                self.assertNotIn(OTHER_SECRET, details + str(info))
        # the other tenant may not have demo's secret either
        code, details, info, _ = self.api.status("CreateSandbox", self.api.pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id="alice", task_id="deny-o", secrets=[NAME]), KO)
        self.assertEqual(code, C.PERMISSION_DENIED, details)
        self.assertEqual(info["metadata"].get("rule"), "default.deny-secret", info)

    def test_zz_secret_never_in_logs(self):
        d = S["d"]
        for name in ("gateway.log", "host.log", "audit.log"):
            text = d.read(name)
            with self.subTest(log=name):
                if name == "audit.log":
                    self.assertIn('"action":"create"', text)   # the log is really there
                self.assertNotIn(SECRET, text)
                self.assertNotIn(OTHER_SECRET, text)
                self.assertNotIn(CANARY, text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
