"""sgsec.py — a small gRPC client for the security tests (tests/security).

Generates Python stubs for proto/sandgate/v1/sandgate.proto into a private
temp dir (never clients/python), and wraps the public Sandboxes API:
create/kill/run/exec with the tenant's API key. Every call goes through the
gateway at SANDGATE_ADDR. Also host-side inspection helpers (processes by
uid, cgroup dirs, fds, zombies, mounts) used by the assertions.

Run only by run_in_netns.sh, inside the test's network namespace.
"""

import os
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO_KEY = "sg-demo-key-0001"
OTHER_KEY = "sg-other-key-0002"
TEMPLATE = "code-interpreter"

sys.path.insert(0, os.path.join(REPO, "tests"))
import drivers  # noqa: E402
# The run's isolation driver (SANDGATE_TEST_DRIVER, tests/drivers.py): an
# attack's outcome is asserted as that driver gives it (the attempt fails
# either way; errnos and who refuses differ).
GVISOR = drivers.is_gvisor()

_pb = None
_grpc_mod = None


def stubs():
    """Generate (once per process) and import sandgate_pb2 / sandgate_pb2_grpc."""
    global _pb, _grpc_mod
    if _pb is not None:
        return _pb, _grpc_mod
    # Under the harness's temp dir (removed by its trap) when there is one.
    out = tempfile.mkdtemp(prefix="sg-sec-stubs.", dir=os.environ.get("SG_SEC_TMP"))
    if not os.environ.get("SG_SEC_TMP"):
        import atexit
        import shutil
        atexit.register(shutil.rmtree, out, True)
    proto_root = os.path.join(REPO, "proto")
    src = os.path.join(proto_root, "sandgate", "v1", "sandgate.proto")
    subprocess.run(["protoc", "-I", proto_root, "--python_out", out, src], check=True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", proto_root,
                    "--grpc_python_out", out, src], check=True)
    sys.path.insert(0, out)
    from sandgate.v1 import sandgate_pb2, sandgate_pb2_grpc  # noqa: E402
    _pb, _grpc_mod = sandgate_pb2, sandgate_pb2_grpc
    return _pb, _grpc_mod


class RunResult:
    def __init__(self):
        self.stdout = b""
        self.stderr = b""
        self.results = []      # (mime, data)
        self.error = None      # (name, value, traceback)
        self.end = None        # pb End
        self.status = None     # grpc.StatusCode when the call itself failed
        self.details = ""

    @property
    def out(self):
        return self.stdout.decode("utf-8", "replace")

    @property
    def value(self):
        """The text/plain result of the final expression, or None."""
        for mime, data in self.results:
            if mime == "text/plain":
                return data.decode("utf-8", "replace")
        return None

    def __repr__(self):
        return ("RunResult(stdout=%r, stderr=%r, results=%r, error=%r, end=%r, status=%r, %r)"
                % (self.stdout[-2000:], self.stderr[-2000:], self.results, self.error,
                   self.end, self.status, self.details))


class Client:
    def __init__(self, key=DEMO_KEY, addr=None):
        import grpc
        pb, pbg = stubs()
        self.grpc = grpc
        self.pb = pb
        self.addr = addr or os.environ["SANDGATE_ADDR"]
        self.chan = grpc.insecure_channel(self.addr)
        self.stub = pbg.SandboxesStub(self.chan)
        self.md = (("authorization", "Bearer " + key),)

    def close(self):
        self.chan.close()

    def create(self, user="sec-user", task=None, ttl=600, retries=20):
        """CreateSandbox, retried on UNAVAILABLE (the create path may be
        restarting under concurrent work). Returns the sandbox id."""
        task = task or "sec-" + uuid.uuid4().hex[:12]
        req = self.pb.CreateSandboxRequest(template=TEMPLATE, user_id=user, task_id=task,
                                           ttl_seconds=ttl)
        last = None
        for _ in range(retries):
            try:
                sb = self.stub.CreateSandbox(req, metadata=self.md, timeout=30)
                return sb.sandbox_id
            except self.grpc.RpcError as e:
                last = e
                if e.code() not in (self.grpc.StatusCode.UNAVAILABLE,
                                    self.grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                time.sleep(0.5)
        raise last

    def kill(self, sid, user="sec-user"):
        self.stub.KillSandbox(self.pb.KillSandboxRequest(sandbox_id=sid, user_id=user),
                              metadata=self.md, timeout=30)

    def get(self, sid, user="sec-user"):
        return self.stub.GetSandbox(self.pb.GetSandboxRequest(sandbox_id=sid, user_id=user),
                                    metadata=self.md, timeout=10)

    def new_context(self, sid, user="sec-user"):
        c = self.stub.CreateContext(self.pb.CreateContextRequest(sandbox_id=sid, user_id=user,
                                                                 language="python"),
                                    metadata=self.md, timeout=30)
        return c.context_id

    def run(self, sid, code, timeout=20, ctx="", user="sec-user", rpc_timeout=None):
        req = self.pb.RunCodeRequest(sandbox_id=sid, user_id=user, context_id=ctx, code=code,
                                     timeout_seconds=timeout)
        r = RunResult()
        try:
            for ev in self.stub.RunCode(req, metadata=self.md,
                                        timeout=rpc_timeout or timeout + 30):
                kind = ev.WhichOneof("event")
                if kind == "stdout":
                    r.stdout += ev.stdout.data
                elif kind == "stderr":
                    r.stderr += ev.stderr.data
                elif kind == "result":
                    r.results.append((ev.result.mime_type, ev.result.data))
                elif kind == "error":
                    r.error = (ev.error.name, ev.error.value, ev.error.traceback)
                elif kind == "end":
                    r.end = ev.end
        except self.grpc.RpcError as e:
            r.status, r.details = e.code(), e.details()
        return r

    def write_file(self, sid, path, data, user="sec-user", timeout=10):
        """WriteFile: (status code or None when OK, details, seconds taken)."""
        return self._file_call(self.stub.WriteFile,
                               self.pb.WriteFileRequest(sandbox_id=sid, user_id=user,
                                                        path=path, data=data), timeout)

    def read_file(self, sid, path, user="sec-user", timeout=10):
        """ReadFile: (status code or the data when OK, details, seconds taken)."""
        return self._file_call(self.stub.ReadFile,
                               self.pb.ReadFileRequest(sandbox_id=sid, user_id=user, path=path),
                               timeout)

    def _file_call(self, method, req, timeout):
        t0 = time.monotonic()
        try:
            resp = method(req, metadata=self.md, timeout=timeout)
            got = resp.data if hasattr(resp, "data") else None
            return got, "", time.monotonic() - t0
        except self.grpc.RpcError as e:
            return e.code(), e.details(), time.monotonic() - t0

    def exec(self, sid, command, timeout=20, user="sec-user"):
        req = self.pb.ExecRequest(sandbox_id=sid, user_id=user, command=command,
                                  timeout_seconds=timeout)
        out, err, exit_ = b"", b"", None
        for ev in self.stub.Exec(req, metadata=self.md, timeout=timeout + 30):
            kind = ev.WhichOneof("event")
            if kind == "stdout":
                out += ev.stdout.data
            elif kind == "stderr":
                err += ev.stderr.data
            elif kind == "exit":
                exit_ = ev.exit
        return out, err, exit_


def host_health(timeout=5.0):
    """grpc.health.v1.Health/Check straight at the host (not through the
    gateway): (status code name, seconds taken). An empty request is the
    whole-server check."""
    import grpc
    with open(os.path.join(os.environ["SG_SEC_RUN_DIR"], "host.port")) as f:
        port = f.read().strip()
    with grpc.insecure_channel("127.0.0.1:" + port) as ch:
        check = ch.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
        t0 = time.monotonic()
        try:
            check(b"", timeout=timeout)
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        return code, time.monotonic() - t0


# ---- host-side inspection (we are root in the host's pid namespace) ----

def procs():
    """[(pid, uid, ppid, state, comm)] of every process on the host."""
    res = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
            res.append((int(d), int(st["Uid"].split()[0]), int(st["PPid"]),
                        st["State"].split()[0], st["Name"]))
        except (OSError, KeyError, ValueError):
            pass
    return res


def pids_with_uid(uid):
    return [p for p in procs() if p[1] == uid]


def proc_cgroup(pid, controller="pids"):
    """pid's cgroup path in `controller` (v1) or the unified one (v2), or ""."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                if controller in ctrls.split(",") or (ctrls == "" and line.startswith("0::")):
                    return path
    except OSError:
        pass
    return ""


def cgroup_dirs(sid):
    """Existing cgroup dirs named sid under /sys/fs/cgroup/*/sandgate (v1) or
    /sys/fs/cgroup/sandgate (v2)."""
    found = []
    root = "/sys/fs/cgroup"
    for c in [""] + sorted(os.listdir(root)):
        d = os.path.join(root, c, "sandgate", sid)
        if os.path.isdir(d):
            found.append(d)
    return found


def cgroup_procs(d):
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def children(pid):
    return [p for p in procs() if p[2] == pid]


def zombies_of(pid):
    return [p for p in children(pid) if p[3] == "Z"]


def mountinfo(pid):
    with open("/proc/%d/mountinfo" % pid) as f:
        # mount id, parent, dev, root, mount point (fields 1,2,3,4,5)
        return {tuple(line.split()[2:5]) for line in f}


def wait_for(pred, timeout=10.0, step=0.05):
    end = time.time() + timeout
    while True:
        v = pred()
        if v or time.time() > end:
            return v
        time.sleep(step)
