"""Stand-in for smolagents.remote_executors: RemotePythonExecutor, the base
class of executors that run actions somewhere else. Subclasses implement
run_code_raise_errors (and usually install_packages, cleanup)."""
import base64
import copy
import inspect
import json
import pickle
import textwrap

from .local_python_executor import PythonExecutor
from .tools import get_tools_definition_code
from .utils import AgentError


class SerializationError(Exception):
    pass


def _encode(value, allow_pickle):
    try:
        return "safe:" + json.dumps(value)
    except TypeError:
        if not allow_pickle:
            raise SerializationError("cannot encode %s safely" % type(value).__name__)
        return "pickle:" + base64.b64encode(pickle.dumps(value)).decode()


class RemotePythonExecutor(PythonExecutor):
    FINAL_ANSWER_EXCEPTION = "FinalAnswerException"

    def __init__(self, additional_imports, logger, allow_pickle=False):
        self.additional_imports = additional_imports
        self.logger = logger
        self.allow_pickle = allow_pickle
        self.logger.log("Initializing executor, hold on...")
        self.installed_packages = []

    def run_code_raise_errors(self, code):
        raise NotImplementedError

    def send_tools(self, tools):
        if "final_answer" in tools:
            fa = copy.copy(tools["final_answer"])
            self._patch_final_answer_with_exception(fa)
            tools = {**tools, "final_answer": fa}
        wanted = {p for t in tools.values() for p in t.to_dict()["requirements"]
                  if p not in self.installed_packages + ["smolagents"]}
        if wanted:
            self.installed_packages += self.install_packages(sorted(wanted))
        code = get_tools_definition_code(tools)
        if code:
            out = self.run_code_raise_errors(code)
            self.logger.log(out.logs)

    def send_variables(self, variables):
        if not variables:
            return
        blob = _encode(variables, self.allow_pickle)
        self.run_code_raise_errors(
            "import json as _j, base64 as _b, pickle as _p\n"
            "_v = %r\n"
            "vars_dict = _j.loads(_v[5:]) if _v.startswith('safe:') else "
            "_p.loads(_b.b64decode(_v[7:]))\n"
            "locals().update(vars_dict)\n" % blob)

    def __call__(self, code_action):
        return self.run_code_raise_errors(code_action)

    def install_packages(self, additional_imports):
        if additional_imports:
            out = self.run_code_raise_errors("!pip install " + " ".join(additional_imports))
            self.logger.log(out.logs)
        return additional_imports

    def _patch_final_answer_with_exception(self, final_answer_tool):
        """Make final_answer raise FinalAnswerException(encoded value); the
        methods carry __source__, since their source is what gets sent."""
        allow = self.allow_pickle

        class _FinalAnswerTool(final_answer_tool.__class__):
            pass

        def forward(self, *args, **kwargs):
            import base64
            import json
            import pickle
            ALLOW_PICKLE = None

            class FinalAnswerException(BaseException):
                def __init__(self, value):
                    self.value = value

            value = self._forward(*args, **kwargs)
            try:
                encoded = "safe:" + json.dumps(value)
            except TypeError:
                if not ALLOW_PICKLE:
                    raise
                encoded = "pickle:" + base64.b64encode(pickle.dumps(value)).decode()
            raise FinalAnswerException(encoded)

        forward.__source__ = textwrap.dedent(inspect.getsource(forward)).replace(
            "ALLOW_PICKLE = None", "ALLOW_PICKLE = %r" % allow)
        original = final_answer_tool.forward.__func__

        def _forward(self, *args, **kwargs):
            return original(self, *args, **kwargs)

        _forward.__source__ = textwrap.dedent(inspect.getsource(original)).replace(
            "def forward(", "def _forward(", 1)
        _FinalAnswerTool.forward = forward
        _FinalAnswerTool._forward = _forward
        final_answer_tool.__class__ = _FinalAnswerTool

    @staticmethod
    def _deserialize_final_answer(encoded_value, allow_pickle=False):
        if encoded_value.startswith("safe:"):
            return json.loads(encoded_value[5:])
        if encoded_value.startswith("pickle:"):
            if not allow_pickle:
                raise SerializationError("Pickle data rejected: allow_pickle=False")
            return pickle.loads(base64.b64decode(encoded_value[7:]))
        raise SerializationError("Unknown final answer format")


__all__ = ["RemotePythonExecutor", "AgentError"]
