"""Stand-in for smolagents.agents.CodeAgent: the step loop as it touches
the executor. The model is any callable(memory) -> code; memory is a list
of (kind, text) with kind in task / observation / error."""
from importlib import metadata

from .default_tools import FinalAnswerTool
from .monitoring import AgentLogger, LogLevel
from .utils import AgentExecutionError, AgentMaxStepsError, truncate_content

BUILTIN_EXECUTORS = ("local", "blaxel", "e2b", "modal", "docker")


class CodeAgent:
    def __init__(self, tools, model, executor=None, executor_type="local", executor_kwargs=None,
                 additional_authorized_imports=None, max_steps=10, logger=None):
        self.tools = {t.name: t for t in tools}
        self.tools.setdefault("final_answer", FinalAnswerTool())
        self.model = model
        self.max_steps = max_steps
        self.logger = logger or AgentLogger(level=LogLevel.INFO)
        self.additional_authorized_imports = list(additional_authorized_imports or [])
        self.executor_type = executor_type
        self.executor_kwargs = dict(executor_kwargs or {})
        self.python_executor = executor if executor is not None else self.create_python_executor()
        self.memory = []

    def create_python_executor(self):
        if self.executor_type in BUILTIN_EXECUTORS:
            raise ValueError("the stand-in has no built-in executor %r" % self.executor_type)
        found = [ep for ep in metadata.entry_points(group="smolagents.executors")
                 if ep.name == self.executor_type]
        if len(found) != 1:
            raise ValueError("Unsupported executor type: %s (%d entry points)"
                             % (self.executor_type, len(found)))
        factory = found[0].load()
        return factory(self.additional_authorized_imports, self.logger, **self.executor_kwargs)

    def run(self, task, additional_args=None):
        self.state = dict(additional_args or {})
        self.memory = [("task", task)]
        self.python_executor.send_variables(variables=self.state)
        self.python_executor.send_tools({**self.tools})
        for _ in range(self.max_steps):
            code = self.model(list(self.memory))  # an exception here ends the run
            try:
                out = self.python_executor(code)
            except Exception as e:
                err = AgentExecutionError(str(e), self.logger)
                self.memory.append(("error", err.message))
                continue
            obs = ("Execution logs:\n" + out.logs + "Last output from code snippet:\n"
                   + truncate_content(str(out.output)))
            self.memory.append(("observation", obs))
            if out.is_final_answer:
                return out.output
        raise AgentMaxStepsError("Reached max steps.", self.logger)

    def cleanup(self):
        if hasattr(self.python_executor, "cleanup"):
            self.python_executor.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
