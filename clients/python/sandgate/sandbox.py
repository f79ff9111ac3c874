"""Sandbox and CodeContext: the agent-facing API, in the style of
`Sandbox.create(...)` / `ctx.run_code(...)`. A Sandbox is a handle on one
remote sandbox (one per task is the right default); it owns nothing local but
a reference to its Client. Use it as a context manager so it is killed in a
`finally`, not left to the TTL reaper.
"""
from . import errors
from .client import Client
from .execution import ExecResult, Execution

# Extra client-side deadline on top of an action's own timeout: the server
# enforces the timeout (and its grace period); this only bounds a stuck call.
_DEADLINE_SLACK = 60.0
_DEFAULT_ACTION_DEADLINE = 600.0


def _action_deadline(timeout_seconds):
    if timeout_seconds:
        return float(timeout_seconds) + _DEADLINE_SLACK
    return _DEFAULT_ACTION_DEADLINE


class CodeContext:
    """A persistent Python interpreter inside a sandbox: state (variables,
    imports) survives from one run_code to the next, like a notebook."""

    def __init__(self, sandbox, context_id, language="python"):
        self.sandbox = sandbox  # borrowed
        self.context_id = context_id
        self.language = language

    def run_code(self, code, timeout_seconds=None, **kw):
        return self.sandbox.run_code(code, timeout_seconds=timeout_seconds, context=self, **kw)

    def close(self):
        """Contexts end with their sandbox; nothing to release remotely."""

    def __repr__(self):
        return "CodeContext(%r, %s)" % (self.context_id, self.sandbox.sandbox_id)


class Sandbox:
    """One remote sandbox. Create with Sandbox.create(...), attach to an
    existing one with Sandbox.connect(...)."""

    def __init__(self, client, info, user_id):
        self.client = client        # borrowed unless _owns_client
        self.info = info            # the last sandbox.v1.Sandbox message seen
        self.user_id = user_id
        self._owns_client = False
        self._killed = False

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    def create(cls, template="code-interpreter", task_id="", user_id="", ttl_seconds=0,
               env=None, egress=(), secrets=(), user_token="", client=None, timeout=None):
        """Create a sandbox for (user_id, task_id). env is the sandbox's whole
        environment; egress is [(host, port)] the task needs (denied unless
        the policy grants it); secrets names credentials the task needs.
        Without client=, a Client is made from $SANDGATE_ADDR/$SANDGATE_API_KEY
        and closed with the sandbox."""
        owns = client is None
        if owns:
            client = Client()
        pb = client.pb
        req = pb.CreateSandboxRequest(template=template, user_id=user_id, task_id=task_id,
                                      ttl_seconds=int(ttl_seconds or 0),
                                      secrets=list(secrets), user_token=user_token)
        req.env.update(env or {})
        for target in egress:
            host, port = (target, 0) if isinstance(target, str) else target
            req.egress.add(host=host, port=int(port))
        try:
            info = client.unary("CreateSandbox", req, timeout=timeout)
        except BaseException:
            if owns:
                client.close()
            raise
        sb = cls(client, info, user_id)
        sb._owns_client = owns
        return sb

    @classmethod
    def connect(cls, sandbox_id, user_id, client):
        """Attach to an existing sandbox (GetSandbox checks ownership)."""
        info = client.unary("GetSandbox",
                            client.pb.GetSandboxRequest(sandbox_id=sandbox_id, user_id=user_id))
        return cls(client, info, user_id)

    @staticmethod
    def list(user_id, client, timeout=None):
        """The caller's own sandboxes (sandbox.v1.Sandbox messages)."""
        resp = client.unary("ListSandboxes", client.pb.ListSandboxesRequest(user_id=user_id),
                            timeout=timeout)
        return list(resp.sandboxes)

    @property
    def sandbox_id(self):
        return self.info.sandbox_id

    def refresh(self):
        self.info = self.client.unary(
            "GetSandbox",
            self.client.pb.GetSandboxRequest(sandbox_id=self.sandbox_id, user_id=self.user_id))
        return self.info

    def extend(self, ttl_seconds):
        """New lifetime from now (capped by policy)."""
        self.info = self.client.unary(
            "ExtendSandbox",
            self.client.pb.ExtendSandboxRequest(sandbox_id=self.sandbox_id, user_id=self.user_id,
                                                ttl_seconds=int(ttl_seconds)))
        return self.info

    def kill(self):
        """Kill the sandbox and everything in it. Raises NotFoundError if it is
        already gone (killed, or expired)."""
        try:
            self.client.unary("KillSandbox",
                              self.client.pb.KillSandboxRequest(sandbox_id=self.sandbox_id,
                                                                user_id=self.user_id))
            self._killed = True
        finally:
            if self._owns_client:
                self.client.close()
                self._owns_client = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._killed:
            return False
        try:
            self.kill()
        except errors.NotFoundError:
            pass  # already gone (TTL): nothing left to clean up
        except errors.SandgateError:
            if exc_type is None:
                raise  # otherwise keep the exception that is already unwinding
        return False

    def __repr__(self):
        return "Sandbox(%r, user=%r, task=%r)" % (self.sandbox_id, self.user_id,
                                                   self.info.task_id)

    # -- code ------------------------------------------------------------------

    def create_code_context(self, language="python"):
        """A new persistent interpreter, separate from the default one."""
        ctx = self.client.unary(
            "CreateContext",
            self.client.pb.CreateContextRequest(sandbox_id=self.sandbox_id,
                                                user_id=self.user_id, language=language))
        return CodeContext(self, ctx.context_id, ctx.language or language)

    def run_code(self, code, timeout_seconds=None, context=None, max_output_bytes=0,
                 on_stdout=None, on_stderr=None, on_result=None, on_error=None,
                 request_timeout=None):
        """Run Python in a context (None = the sandbox's default one).

        Returns an Execution. An exception in the code is not raised: it is
        ex.error, and the context survives it. on_stdout/on_stderr get text
        as it streams; on_result/on_error get each Result/ExecutionError.
        timeout_seconds=None uses the policy default; the server interrupts
        the code at the timeout (ex.end.timed_out). request_timeout is the
        client-side gRPC deadline (default: the timeout plus a slack)."""
        ctx_id = context.context_id if isinstance(context, CodeContext) else (context or "")
        req = self.client.pb.RunCodeRequest(sandbox_id=self.sandbox_id, user_id=self.user_id,
                                            context_id=ctx_id, code=code,
                                            timeout_seconds=int(timeout_seconds or 0),
                                            max_output_bytes=int(max_output_bytes or 0))
        deadline = request_timeout or _action_deadline(timeout_seconds)
        return Execution.from_events(self.client.stream("RunCode", req, timeout=deadline),
                                     on_stdout=on_stdout, on_stderr=on_stderr,
                                     on_result=on_result, on_error=on_error)

    def exec(self, cmd, timeout_seconds=None, max_output_bytes=0, on_stdout=None,
             on_stderr=None, request_timeout=None):
        """Run `/bin/sh -c cmd` in the sandbox; returns ExecResult
        (exit_code, stdout, stderr), with .info for signal/timeout/truncation."""
        req = self.client.pb.ExecRequest(sandbox_id=self.sandbox_id, user_id=self.user_id,
                                         command=cmd, timeout_seconds=int(timeout_seconds or 0),
                                         max_output_bytes=int(max_output_bytes or 0))
        deadline = request_timeout or _action_deadline(timeout_seconds)
        return ExecResult.from_events(self.client.stream("Exec", req, timeout=deadline),
                                      on_stdout=on_stdout, on_stderr=on_stderr)

    # -- files (paths are relative to /workspace) -------------------------------

    def write_file(self, path, data, mode=0):
        """Write bytes (or str, as UTF-8); returns the bytes written."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        resp = self.client.unary(
            "WriteFile",
            self.client.pb.WriteFileRequest(sandbox_id=self.sandbox_id, user_id=self.user_id,
                                            path=path, data=data, mode=int(mode)))
        return resp.bytes_written

    def read_file(self, path):
        """The file's bytes."""
        resp = self.client.unary(
            "ReadFile",
            self.client.pb.ReadFileRequest(sandbox_id=self.sandbox_id, user_id=self.user_id,
                                           path=path))
        return bytes(resp.data)
