"""A remote code executor for a smolagents-style code agent, on sandgate.

Each agent action is Python that runs in a sandbox, in a persistent context,
so variables and imports survive from one action to the next. One sandbox per
task; it is killed in close() (call it from a finally, or use `with`).
Nothing here imports smolagents: an executor is just a callable code -> str.

    SANDGATE_PY_STUBS=/tmp/stubs SANDGATE_ADDR=127.0.0.1:7443 \\
    SANDGATE_API_KEY=sg-demo-key-0001 /usr/bin/python3 smolagents_executor.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sandgate import Client, Sandbox  # noqa: E402

MAX_OBSERVATION_CHARS = 8000


class SandgateExecutor:
    """Runs agent actions in a sandgate sandbox, not in this process."""

    def __init__(self, user_id, task_id, client=None, ttl_seconds=1800, env=None):
        self.sb = Sandbox.create(template="code-interpreter", user_id=user_id, task_id=task_id,
                                 ttl_seconds=ttl_seconds, env=env or {},
                                 client=client or Client())
        try:
            # A persistent interpreter: state survives between actions.
            self.ctx = self.sb.create_code_context(language="python")
        except BaseException:
            self.sb.kill()
            raise

    def __call__(self, code: str) -> str:
        ex = self.ctx.run_code(code, timeout_seconds=120)
        parts = [ex.logs.get("stdout", ""), ex.logs.get("stderr", "")]
        if ex.text is not None:
            parts.append("Out: " + ex.text)
        if ex.error is not None:
            parts.append(ex.error.traceback or "%s: %s" % (ex.error.name, ex.error.value))
        if ex.end is not None and ex.end.context_restarted:
            parts.append("[the interpreter was restarted after a timeout; all variables are lost]")
        if ex.truncated:
            parts.append("[output truncated: the code produced %d bytes]"
                         % ex.end.output_bytes_total)
        text = "\n".join(p for p in parts if p)
        if len(text) > MAX_OBSERVATION_CHARS:  # tell the model, never cut silently
            text = text[:MAX_OBSERVATION_CHARS] + "\n[observation cut to %d chars]" \
                % MAX_OBSERVATION_CHARS
        return text or "(no output)"

    def install(self, packages):
        """Pre-install what the agent will need, once, at startup."""
        code, out, err = self.sb.exec("pip install " + " ".join(packages), timeout_seconds=300)
        if code != 0:
            raise RuntimeError("pip install failed (%d): %s" % (code, err[-2000:]))

    def close(self):
        self.ctx.close()
        self.sb.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


if __name__ == "__main__":
    with SandgateExecutor(user_id="alice", task_id="example-task") as run:
        print(run("import math\nr = 3"))
        print(run("area = math.pi * r ** 2\nprint(f'area {area:.2f}')\narea"))
        print(run("1 / 0"))
