"""SandgateExecutor: smolagents' remote code executor on a sandgate sandbox.

    from smolagents import CodeAgent
    from sandgate.smolagents import SandgateExecutor

    with CodeAgent(tools=[...], model=model,
                   executor=SandgateExecutor([], agent_logger, user_id="u1")) as agent:
        agent.run("...")

or, through the `smolagents.executors` entry point this package registers,
CodeAgent(..., executor_type="sandgate", executor_kwargs={...}).

It implements smolagents' RemotePythonExecutor contract: run_code_raise_errors
runs one action in the sandbox's persistent default context and returns
CodeOutput(output, logs, is_final_answer). The base class's send_tools /
send_variables (tool source, patched final_answer, requirements) run through
it unchanged; the final answer is detected as smolagents' own remote
executors detect it: the patched final_answer raises FinalAnswerException,
whose value comes back encoded in the error and is decoded by the base
class's decoder. What this class adds for a sandbox:

- install_packages runs pip through Exec (not IPython's `!pip`), into
  /workspace/.sandgate/site-packages, skipping modules already importable;
- a truncated output, a timeout and a restarted interpreter are said in the
  logs or error the model sees, never silently; after a restart the tools
  and package path are defined again;
- a final answer longer than the runtime's 8 KiB error value is fetched
  whole from a file the patched tool writes;
- a sandbox that ends under the agent (TTL, idle timeout, its host lost it)
  is replaced by a new one for the same task, and the model is told its
  state is gone;
- cleanup()/delete() kill the sandbox (CodeAgent.cleanup and `with` call it).
"""
import inspect
import io
import shlex
import uuid
from typing import Any, Dict, Iterable, List, Mapping, NoReturn, Optional

try:
    from smolagents.local_python_executor import CodeOutput
    from smolagents.remote_executors import RemotePythonExecutor
    from smolagents.utils import AgentError
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("sandgate.smolagents needs smolagents (pip install smolagents)") from e

from .client import Client
from .errors import SandboxLost, SandboxNotFound, SandgateError
from .sandbox import Sandbox

PACKAGES_DIR = "/workspace/.sandgate/site-packages"
_FINAL_FILE = ".sandgate/final_answer"   # relative to /workspace
_CUT_MARK = " bytes cut ...]\n"  # the runtime's note on a cut error value

# Run once after the tools are defined (and after an interpreter restart):
# the package dir goes on sys.path, and the patched final_answer also writes
# its encoded value to a file, so an answer longer than an error value can
# carry is not lost.
_SETUP_CODE = """
import sys as _sg_sys, importlib as _sg_il
if %(dir)r not in _sg_sys.path:
    _sg_sys.path.insert(0, %(dir)r)
_sg_il.invalidate_caches()
del _sg_sys, _sg_il
"""

_FINAL_HOOK = """
def _sg_hook_final_answer():
    import os
    cls = type(globals().get("final_answer"))
    if getattr(cls, "_sg_hooked", False) or not hasattr(cls, "forward"):
        return
    inner = cls.forward
    def forward(self, *args, **kwargs):
        try:
            return inner(self, *args, **kwargs)
        except BaseException as e:
            if type(e).__name__ == "FinalAnswerException":
                os.makedirs(os.path.dirname(%(file)r) or ".", exist_ok=True)
                with open(%(file)r, "w") as f:
                    f.write(str(e.value))
            raise
    cls.forward = forward
    cls._sg_hooked = True
_sg_hook_final_answer()
del _sg_hook_final_answer
""" % {"file": _FINAL_FILE}


class SandgateExecutor(RemotePythonExecutor):
    """Runs a CodeAgent's actions in a sandgate sandbox.

    Args:
        additional_imports: packages the agent may import; those the sandbox
            cannot import yet are pip-installed (needs a policy egress grant
            to an index, or pip_args pointing at local wheels).
        logger: smolagents' AgentLogger (the agent passes its own).
        allow_pickle: as smolagents' remote executors (final answers and
            variables; False = JSON-safe only), where the base class has it.
        template, user_id, task_id, ttl_seconds, env, egress, secrets: the
            sandbox (see Sandbox.create); task_id defaults to a fresh one.
        sandbox: an existing sandgate.Sandbox to use instead (not killed by
            cleanup unless kill_on_cleanup=True).
        timeout: each action's time limit in seconds (None = policy default).
        max_output_bytes: lower the policy's output cap per action.
        pip_args: extra pip arguments (e.g. ["--index-url", URL]).
        client / addr= / api_key= / ...: the connection (see ConnectionConfig).
    """

    def __init__(self, additional_imports: Iterable[str] = (), logger: Any = None,
                 allow_pickle: bool = False, *, template: str = "code-interpreter",
                 user_id: Optional[str] = None, task_id: Optional[str] = None,
                 ttl_seconds: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
                 egress: Iterable[Any] = (), secrets: Iterable[str] = (),
                 sandbox: Optional[Sandbox] = None, kill_on_cleanup: Optional[bool] = None,
                 timeout: Optional[float] = None, max_output_bytes: Optional[int] = None,
                 pip_args: Iterable[str] = (), client: Any = None, **conn: Any):
        logger = logger if logger is not None else _default_logger()
        base = inspect.signature(RemotePythonExecutor.__init__).parameters
        if "allow_pickle" in base:
            super().__init__(list(additional_imports), logger, allow_pickle=allow_pickle)
        else:  # smolagents before allow_pickle: final answers are pickled
            super().__init__(list(additional_imports), logger)
            self.allow_pickle = True
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.pip_args = list(pip_args)
        self._setup: List[str] = []      # tool/setup cells replayed after a restart
        self._recording = False
        self.sandbox: Optional[Sandbox] = None  # None once cleaned up
        self._client: Optional[Client] = None   # owned: made here for our own sandbox
        self._create: Optional[Dict[str, Any]] = None  # how to make the sandbox again
        if sandbox is not None:
            self.sandbox = sandbox
            self._kill = bool(kill_on_cleanup)
        else:
            if client is None:
                client = self._client = Client(**conn)
            elif conn:
                raise TypeError("SandgateExecutor: pass client= or connection settings, not both")
            self._create = dict(template=template, user_id=user_id,
                                task_id=task_id or "smolagents-" + uuid.uuid4().hex,
                                ttl_seconds=ttl_seconds, env=env, egress=list(egress),
                                secrets=list(secrets), client=client)
            try:
                self.sandbox = Sandbox.create(**self._create)
            except BaseException:
                self._close_client()
                raise
            self._kill = True if kill_on_cleanup is None else kill_on_cleanup
        try:
            self._run_setup(_SETUP_CODE % {"dir": PACKAGES_DIR})
            self.installed_packages = self.install_packages(list(additional_imports))
        except BaseException:
            self.cleanup()
            raise
        self.logger.log("sandgate sandbox %s is running" % self._sb.sandbox_id)

    # -- the contract ------------------------------------------------------------

    def run_code_raise_errors(self, code: str) -> CodeOutput:
        """Run one action in the sandbox's default context.

        Returns CodeOutput(output, logs, is_final_answer); raises AgentError
        (which the agent shows the model) when the code raised, with the
        logs, the exception and its traceback."""
        if self._recording:
            self._setup.append(code)
        try:
            ex = self._sb.run_code(code, timeout=self.timeout,
                                       max_output_bytes=self.max_output_bytes)
        except SandboxNotFound as e:  # also SandboxLost: its host restarted
            self._replace_sandbox(e)  # raises AgentError telling the model
        logs = ex.logs.stdout
        if ex.logs.stderr:
            logs += ("\n" if logs and not logs.endswith("\n") else "") + ex.logs.stderr
        if ex.truncated:
            logs += ("\n[sandgate: output cut: the code printed %d bytes, past this sandbox's "
                     "cap; print less, or a summary]\n" % ex.output_bytes_total)
        err = ex.error
        if err is not None and err.name == self.FINAL_ANSWER_EXCEPTION:
            return CodeOutput(output=self._final_answer(err.value), logs=logs,
                              is_final_answer=True)
        if err is not None:
            notes = []
            if ex.timed_out:
                notes.append("[sandgate: the code ran past its time limit and was interrupted]")
            if ex.context_restarted:
                notes.append("[sandgate: the interpreter was restarted: every variable and "
                             "import from earlier steps is lost; tools are defined again]")
                self._replay_setup()
            raise AgentError("%s\nExecuting code yielded an error:\n%s\n%s\n%s%s" % (
                logs, err.name, err.value, err.traceback,
                "\n" + "\n".join(notes) if notes else ""), self.logger)
        return CodeOutput(output=self._output(ex), logs=logs, is_final_answer=False)

    def send_tools(self, tools: Dict[str, Any]) -> None:
        """The base class's send_tools (requirements, patched final_answer,
        tool source), recorded so it can be replayed after a restart."""
        self._recording = True
        try:
            super().send_tools(tools)
        finally:
            self._recording = False
        if "final_answer" in tools:
            self._run_setup(_FINAL_HOOK)

    def install_packages(self, additional_imports: List[str]) -> List[str]:
        """pip-install, through Exec, the packages the sandbox cannot import
        yet (names as in smolagents' additional imports: "pkg", "pkg.*";
        "*" is skipped). Returns the list asked for, as smolagents expects;
        raises AgentError with pip's output if pip fails."""
        names = sorted({n.split(".")[0] for n in additional_imports or () if n and n != "*"})
        missing = self._not_importable(names)
        if missing:
            cmd = ("PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install --no-input "
                   "--no-cache-dir --no-compile --target %s %s %s" % (
                       shlex.quote(PACKAGES_DIR), " ".join(shlex.quote(a) for a in self.pip_args),
                       " ".join(shlex.quote(n) for n in missing)))
            self.logger.log("sandgate: pip install %s" % " ".join(missing))
            res = self._sb.commands.run(cmd, timeout=max(self.timeout or 0, 300))
            if res.exit_code != 0:
                how = ("ran past the action time limit and was killed" if res.timed_out
                       else "was killed by signal %d" % res.signal if res.signal
                       else "failed (exit %d)" % res.exit_code)
                raise AgentError("pip install %s %s:\n%s" % (
                    " ".join(missing), how, (res.stdout + res.stderr)[-4000:]), self.logger)
            self._run_setup(_SETUP_CODE % {"dir": PACKAGES_DIR})
        return list(additional_imports or ())

    def cleanup(self) -> None:
        """Kill the sandbox (idempotent; errors are logged, not raised)."""
        sb = getattr(self, "sandbox", None)
        self.sandbox = None
        if sb is None:
            self._close_client()
            return
        try:
            if self._kill:
                self.logger.log("sandgate: killing sandbox %s" % sb.sandbox_id)
                sb.kill()
            else:
                sb.close()
        except SandgateError as e:
            _log_error(self.logger, "sandgate: cleanup of %s failed: %s" % (sb.sandbox_id, e))
        finally:
            self._close_client()

    def _replace_sandbox(self, why: SandgateError) -> NoReturn:
        """The sandbox ended under us (TTL, idle timeout, its host lost it):
        make a new one for the same task, define the tools again and tell
        the model its state is gone. Without the means to (sandbox= given),
        tell it the sandbox is gone."""
        old = self._sb
        if self._create is None:
            raise AgentError("sandgate: the sandbox %s is gone (%s); this executor cannot make "
                             "another" % (old.sandbox_id, why.reason or why),
                             self.logger)
        _log_error(self.logger, "sandgate: sandbox %s ended (%s); making a new one"
                   % (old.sandbox_id, why))
        self.sandbox = Sandbox.create(**self._create)
        self._replay_setup()
        raise AgentError("[sandgate: the sandbox ended (%s) and was replaced by a new one: every "
                         "variable, import and file from earlier steps is lost; tools are defined "
                         "again. This step's code did not run.]"
                         % ("its host restarted" if isinstance(why, SandboxLost)
                            else "its lifetime ran out or it was killed"), self.logger)

    def _close_client(self) -> None:
        c, self._client = self._client, None
        if c is not None:
            c.close()

    def delete(self) -> None:
        """Same as cleanup()."""
        self.cleanup()

    def __enter__(self) -> "SandgateExecutor":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.cleanup()
        return False

    # -- helpers -------------------------------------------------------------------

    @property
    def _sb(self) -> Sandbox:
        if self.sandbox is None:
            raise AgentError("sandgate: this executor was cleaned up (its sandbox is killed)",
                             self.logger)
        return self.sandbox

    def _run_setup(self, code: str) -> None:
        ex = self._sb.run_code(code, timeout=self.timeout or 60)
        if ex.error is not None:
            raise AgentError("sandgate: setup failed: %s: %s" % (ex.error.name, ex.error.value),
                             self.logger)
        if code not in self._setup:
            self._setup.append(code)

    def _replay_setup(self) -> None:
        for code in list(self._setup):
            ex = self._sb.run_code(code, timeout=self.timeout or 60)
            if ex.error is not None:
                _log_error(self.logger, "sandgate: re-running setup after a restart failed: "
                           "%s: %s" % (ex.error.name, ex.error.value))

    def _not_importable(self, names: List[str]) -> List[str]:
        if not names:
            return []
        ex = self._sb.run_code("import importlib.util as _sg_u\n"
                                   "[n for n in %r if _sg_u.find_spec(n) is None]" % names,
                                   timeout=30)
        if ex.error is not None or ex.text is None:
            return names
        import ast
        return list(ast.literal_eval(ex.text))

    def _final_answer(self, value: str) -> Any:
        if value.endswith(_CUT_MARK):  # cut by the runtime: the hook kept it whole
            try:
                value = str(self._sb.files.read(_FINAL_FILE))
            except SandgateError as e:
                raise AgentError("sandgate: the final answer was cut and could not be read "
                                 "back: %s" % e, self.logger)
        decode = getattr(RemotePythonExecutor, "_deserialize_final_answer", None)
        if decode is not None:
            if "allow_pickle" in inspect.signature(decode).parameters:
                return decode(value, self.allow_pickle)
            return decode(value)
        import base64
        import pickle
        return pickle.loads(base64.b64decode(value))  # smolagents before SafeSerializer

    @staticmethod
    def _output(ex: Any) -> Any:
        """The action's output as smolagents' remote executors return it:
        the main result's text, else an image (PIL if installed)."""
        for r in ex.results:
            if r.is_main_result:
                return r.text
        for r in ex.results:
            img = r.png if r.png is not None else r.jpeg
            if img is not None:
                try:
                    import PIL.Image
                    return PIL.Image.open(io.BytesIO(img))
                except ImportError:
                    return img
        for r in ex.results:
            if r.json is not None:
                return r.json
        return None


def _default_logger() -> Any:
    try:
        from smolagents.monitoring import AgentLogger, LogLevel
        return AgentLogger(level=LogLevel.INFO)
    except Exception:  # pragma: no cover
        class _Quiet:
            def log(self, *a: Any, **k: Any) -> None:
                pass
            log_error = log
        return _Quiet()


def _log_error(logger: Any, msg: str) -> None:
    fn = getattr(logger, "log_error", None) or getattr(logger, "log")
    fn(msg)


__all__ = ["SandgateExecutor", "PACKAGES_DIR"]
