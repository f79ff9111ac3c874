"""sandgate — Python client for the sandgate gateway (sandgate.v1.Sandboxes).

    from sandgate import Client, Sandbox

    client = Client("127.0.0.1:7443", api_key="...")
    with Sandbox.create(template="code-interpreter", task_id="t1", user_id="u1",
                        client=client) as sb:
        ex = sb.run_code("x = 21 * 2\\nx", timeout_seconds=30)
        print(ex.text, ex.logs["stdout"])

Needs the stubs made by clients/python/gen.sh (in $SANDGATE_PY_STUBS or in
sandgate/_gen/); they are loaded on first use.
"""
from .client import Client
from .errors import (AuthenticationError, DeadlineExceededError, InvalidArgumentError,
                     NotFoundError, PermissionDeniedError, QuotaExceededError, SandgateError,
                     UnavailableError)
from .execution import End, ExecResult, Execution, ExecutionError, ExitInfo, Result
from .sandbox import CodeContext, Sandbox

__all__ = [
    "Client", "Sandbox", "CodeContext", "Execution", "ExecResult", "ExecutionError", "ExitInfo",
    "End", "Result", "SandgateError", "AuthenticationError", "NotFoundError",
    "PermissionDeniedError", "QuotaExceededError", "InvalidArgumentError",
    "DeadlineExceededError", "UnavailableError",
]
