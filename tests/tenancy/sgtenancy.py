"""Shared helpers for the tenancy tests (tests/tenancy/test_*.py).

Daemons: deploy/local/run.sh with its own run dir, ephemeral ports, and a
policy file the test writes itself. Stubs: clients/python/gen.sh into the
temp dir. Calls go through the raw generated stub so a test controls every
metadata entry (authorization, x-sandgate-user-token) exactly.

Env: SANDGATE_BUILD (build dir, default <repo>/build); SANDGATE_KEEP_TMP=1
keeps the temp dirs (daemon logs) after the run.
"""
import base64
import hashlib
import hmac
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import grpc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_SH = os.path.join(REPO, "deploy", "local", "run.sh")
BUILD = os.environ.get("SANDGATE_BUILD", os.path.join(REPO, "build"))
sys.path.insert(0, os.path.join(REPO, "tests"))
import drivers  # noqa: E402
TEMPLATE = "code-interpreter"
DETAILS_KEY = "grpc-status-details-bin"

_stub_mods = {}


def local_host_config(tmp, name="host.yaml"):
    """deploy/local/host.yaml for this run's driver (tests/drivers.py), with
    only the template these suites use: a gvisor run would also warm
    deploy/local's code-interpreter-gvisor (~2 s of CPU and 110 MiB a
    sandbox) for nothing."""
    return drivers.local_host_config(tmp, name=name, only=[TEMPLATE])


def key_hash(key):
    """What `sandgate-policy hash-key KEY` prints."""
    return hashlib.sha256(key.encode()).hexdigest()


def two_tenant_policy(key_demo, key_other):
    """Tenants demo and other, one template each, generous quotas: the
    policy the host-failure suites run under."""
    return """version: 1
defaults:
  quotas: {sandboxes_per_tenant: 100, sandboxes_per_user: 50, concurrent_actions: 64,
           rate_per_s: 10000, rate_burst: 10000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
  - id: other
    api_keys: [%s]
    templates: [code-interpreter]
""" % (key_hash(key_demo), key_hash(key_other))


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign_token(key, user, task, expiry):
    """An end-user token exactly as tenancy/token.c builds it."""
    msg = ("sandgate-user-token-v1\n%s\n%s\n%d" % (user, task, expiry)).encode()
    mac = hmac.new(key.encode() if isinstance(key, str) else key, msg, hashlib.sha256).digest()
    return "%s.%s.%d.%s" % (b64url(user.encode()), b64url(task.encode()), expiry, b64url(mac))


def new_tmp(prefix):
    tmp = tempfile.mkdtemp(prefix=prefix)
    return tmp


def remove_tmp(tmp):
    if not os.environ.get("SANDGATE_KEEP_TMP"):
        shutil.rmtree(tmp, ignore_errors=True)


def stubs(tmp):
    """(pb, errors_pb, grpc_pb) generated into tmp/stubs."""
    if _stub_mods:
        return _stub_mods["pb"], _stub_mods["epb"], _stub_mods["gpb"]
    out = os.path.join(tmp, "stubs")
    if not os.path.isfile(os.path.join(out, "sandgate_pb2_grpc.py")):
        subprocess.run([os.path.join(REPO, "clients", "python", "gen.sh"), out], check=True,
                       timeout=60)
    sys.path.insert(0, tmp)
    _stub_mods["pb"] = importlib.import_module("stubs.sandgate_pb2")
    _stub_mods["epb"] = importlib.import_module("stubs.errors_pb2")
    _stub_mods["gpb"] = importlib.import_module("stubs.sandgate_pb2_grpc")
    return _stub_mods["pb"], _stub_mods["epb"], _stub_mods["gpb"]


def write_atomic(path, text):
    tmp = path + ".tmp-%s" % uuid.uuid4().hex[:6]
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Daemons:
    """A host + gateway from deploy/local/run.sh, on ephemeral ports."""

    def __init__(self, tmp, policy_text, env=None, name="run"):
        self.tmp = tmp
        self.run_dir = os.path.join(tmp, name)
        self.policy_path = os.path.join(tmp, name + "-policy.yaml")
        with open(self.policy_path, "w") as f:
            f.write(policy_text)
        e = dict(os.environ)
        e.update(SANDGATE_RUN_DIR=self.run_dir, SANDGATE_PORT="0", SANDGATE_HOST_PORT="0",
                 SANDGATE_POLICY=self.policy_path, SANDGATE_BUILD=BUILD)
        e.pop("SANDGATE_HOST_NAME", None)
        e.update(env or {})
        if not (env or {}).get("SANDGATE_HOST_CONFIG"):
            # deploy/local/host.yaml for this run's driver (drivers.py), not as
            # shipped; a test that brings its own (test_isolation) keeps it
            e["SANDGATE_HOST_CONFIG"] = local_host_config(tmp, name=name + "-host.yaml")
        self.env = e
        self.addr = None

    def _run_sh(self, cmd):
        return subprocess.run([RUN_SH, cmd], env=self.env, capture_output=True, text=True,
                              timeout=90)

    def start(self):
        lint = subprocess.run([os.path.join(BUILD, "policy", "sandgate-policy"), "lint",
                               self.policy_path], capture_output=True, text=True, timeout=30)
        if lint.returncode != 0:
            raise RuntimeError("test policy does not lint:\n%s%s" % (lint.stdout, lint.stderr))
        r = self._run_sh("start")
        if r.returncode != 0:
            raise RuntimeError("run.sh start failed (%d):\n%s%s\n%s"
                               % (r.returncode, r.stdout, r.stderr, self.logs_tail()))
        with open(os.path.join(self.run_dir, "gateway.port")) as f:
            self.addr = "127.0.0.1:" + f.read().strip()
        with open(os.path.join(self.run_dir, "host.name")) as f:
            self.host_name = f.read().strip()
        return self

    def stop(self):
        r = self._run_sh("stop")
        if r.returncode != 0:
            sys.stderr.write("run.sh stop failed: %s%s\n" % (r.stdout, r.stderr))

    def path(self, name):
        return os.path.join(self.run_dir, name)

    def read(self, name):
        p = self.path(name)
        if not os.path.exists(p):
            return ""
        with open(p, errors="replace") as f:
            return f.read()

    def logs_tail(self):
        return "\n".join("--- %s (tail)\n%s" % (n, self.read(n)[-3000:])
                         for n in ("host.log", "gateway.log"))

    def gateway_pid(self):
        with open(self.path("gateway.pid")) as f:
            return int(f.read().strip())

    def cgroups(self):
        """This host's sandbox cgroups under /sys/fs/cgroup/pids/sandgate."""
        d = "/sys/fs/cgroup/pids/sandgate"
        if not os.path.isdir(d):
            return None
        return sorted(n for n in os.listdir(d) if n.startswith(self.host_name + "-"))


class Api:
    """The public API with explicit metadata. key=None sends no
    authorization; token adds x-sandgate-user-token."""

    def __init__(self, tmp, addr, credentials=None, options=None):
        self.pb, self.epb, gpb = stubs(tmp)
        if credentials is None:
            self.channel = grpc.insecure_channel(addr, options=options or [])
        else:
            self.channel = grpc.secure_channel(addr, credentials, options=options or [])
        self.stub = gpb.SandboxesStub(self.channel)

    def close(self):
        self.channel.close()

    @staticmethod
    def md(key=None, token=None, extra=None):
        m = []
        if key is not None:
            m.append(("authorization", "Bearer " + key))
        if token is not None:
            m.append(("x-sandgate-user-token", token))
        m.extend(extra or [])
        return m

    def call(self, method, req, key=None, token=None, timeout=60, extra=None):
        """Unary: the response. Streams: the list of events. Raises grpc.RpcError."""
        fn = getattr(self.stub, method)
        r = fn(req, metadata=self.md(key, token, extra), timeout=timeout)
        if method in ("RunCode", "Exec", "DownloadFile", "AttachProcess"):
            return list(r)
        return r

    def status(self, method, req, key=None, token=None, timeout=60):
        """(grpc.StatusCode, details, error_info dict or None, response)."""
        try:
            resp = self.call(method, req, key, token, timeout)
            return grpc.StatusCode.OK, "", None, resp
        except grpc.RpcError as e:
            return e.code(), e.details(), self.error_info(e), None

    def error_info(self, e):
        for k, v in (e.trailing_metadata() or ()):
            if k == DETAILS_KEY:
                st = self.epb.RpcStatus.FromString(v)
                for a in st.details:
                    if a.type_url.endswith("google.rpc.ErrorInfo"):
                        info = self.epb.ErrorInfo.FromString(a.value)
                        return {"reason": info.reason, "domain": info.domain,
                                "metadata": dict(info.metadata), "code": st.code,
                                "message": st.message}
                return {"code": st.code, "message": st.message}
        return None

    # -- conveniences --

    def create(self, key, user, task, token=None, **kw):
        template = kw.pop("template", TEMPLATE)
        req = self.pb.CreateSandboxRequest(template=template, user_id=user, task_id=task, **kw)
        sb = self.call("CreateSandbox", req, key, token)
        # a suite run for a driver really runs on it (deploy/local's template)
        if template == TEMPLATE:
            assert sb.isolation == drivers.current(), (sb.isolation, drivers.current())
        return sb

    def run(self, key, user, sid, code, token=None, timeout_s=30):
        """(stdout, stderr, error event or None, end, events)."""
        ev = self.call("RunCode", self.pb.RunCodeRequest(sandbox_id=sid, user_id=user, code=code,
                                                         timeout_seconds=timeout_s),
                       key, token, timeout=timeout_s + 30)
        out = b"".join(e.stdout.data for e in ev if e.WhichOneof("event") == "stdout")
        err = b"".join(e.stderr.data for e in ev if e.WhichOneof("event") == "stderr")
        error = next((e.error for e in ev if e.WhichOneof("event") == "error"), None)
        end = next((e.end for e in ev if e.WhichOneof("event") == "end"), None)
        return out.decode(errors="replace"), err.decode(errors="replace"), error, end, ev

    def exec(self, key, user, sid, command, token=None, timeout_s=30):
        """(stdout, stderr, exit, events)."""
        ev = self.call("Exec", self.pb.ExecRequest(sandbox_id=sid, user_id=user, command=command,
                                                   timeout_seconds=timeout_s),
                       key, token, timeout=timeout_s + 30)
        out = b"".join(e.stdout.data for e in ev if e.WhichOneof("event") == "stdout")
        err = b"".join(e.stderr.data for e in ev if e.WhichOneof("event") == "stderr")
        ex = next((e.exit for e in ev if e.WhichOneof("event") == "exit"), None)
        return out.decode(errors="replace"), err.decode(errors="replace"), ex, ev

    def kill(self, key, user, sid, token=None):
        return self.call("KillSandbox", self.pb.KillSandboxRequest(sandbox_id=sid, user_id=user),
                         key, token)

    def list(self, key, user, token=None):
        return list(self.call("ListSandboxes", self.pb.ListSandboxesRequest(user_id=user), key,
                              token).sandboxes)


def wait_for(pred, timeout=10.0, step=0.02):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            return v
        time.sleep(step)


def percentile(samples, p):
    s = sorted(samples)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]
