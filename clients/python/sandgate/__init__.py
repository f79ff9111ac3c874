"""sandgate — Python client for the sandgate gateway (sandgate.v1.Sandboxes):
isolated, policy-checked sandboxes for AI agents' code.

    from sandgate import Sandbox

    with Sandbox.create(template="code-interpreter", user_id="u1", task_id="t1") as sb:
        ex = sb.run_code("import math\\nmath.sqrt(2)", timeout=30)
        print(ex.text, ex.logs.stdout, ex.error)
        print(sb.commands.run("ls -la").stdout)
        sb.files.write("data.csv", "a,b\\n1,2\\n")

Connection settings come from arguments (addr=, api_key=, tls=, ...; or a
shared client=Client(...)) or from $SANDGATE_ADDR, $SANDGATE_API_KEY,
$SANDGATE_USER and the TLS variables (config.py). AsyncSandbox is the
asyncio twin. Failed calls raise SandgateError subclasses (errors.py);
sandgate.smolagents has a code executor for smolagents' CodeAgent.
"""
from .aio import AsyncClient, AsyncCodeContext, AsyncSandbox
from .client import Client
from .config import ConnectionConfig
from .errors import (AlreadyExists, AuthenticationError, Cancelled, FailedPrecondition, DeadlineExceededError, HostUnavailable,
                     InvalidArgument, InvalidArgumentError, NotFound, NotFoundError,
                     PermissionDenied, PermissionDeniedError, PolicyDenied, QuotaExceeded,
                     QuotaExceededError, SandboxLost, SandboxNotFound, SandgateError, Timeout,
                     Unauthenticated, Unavailable, UnavailableError)
from .execution import (CommandResult, End, Execution, ExecutionError, Logs, Result, SandboxInfo,
                        SandboxList)
from .processes import Process, ProcessOutput, Pty
from .sandbox import CodeContext, Commands, Files, Sandbox

__version__ = "0.2.0"

__all__ = [
    "Sandbox", "AsyncSandbox", "CodeContext", "AsyncCodeContext", "Commands", "Files",
    "Process", "ProcessOutput", "Pty",
    "Client", "AsyncClient", "ConnectionConfig",
    "Execution", "Logs", "Result", "ExecutionError", "End", "CommandResult", "SandboxInfo",
    "SandboxList",
    "SandgateError", "Unauthenticated", "PermissionDenied", "PolicyDenied", "NotFound",
    "SandboxNotFound", "SandboxLost", "QuotaExceeded", "InvalidArgument", "Timeout",
    "AlreadyExists", "FailedPrecondition",
    "Unavailable", "HostUnavailable", "Cancelled",
    "AuthenticationError", "PermissionDeniedError", "NotFoundError", "QuotaExceededError",
    "InvalidArgumentError", "DeadlineExceededError", "UnavailableError",
]
