"""A stand-in for the parts of huggingface/smolagents that a remote code
executor meets, written for sandgate's tests (smolagents itself cannot be
installed here: its index is unreachable). Test-only; never shipped.

It keeps smolagents' contract, module paths and names: PythonExecutor and
CodeOutput (local_python_executor), RemotePythonExecutor with send_tools
(requirements, the final_answer tool patched to raise FinalAnswerException
with an encoded value, tool source sent as code), send_variables,
install_packages ("!pip", which executors override) and the final-answer
decoder (remote_executors), Tool and get_tools_definition_code (tools),
AgentError and truncate_content (utils), AgentLogger (monitoring), and a
CodeAgent whose step loop calls the executor, turns its exceptions into
errors the model sees next step, truncates observations, stops on the final
answer, resolves executor_type through the `smolagents.executors` entry
points, and calls executor.cleanup() from cleanup() / `with`.
"""
from .agents import CodeAgent
from .default_tools import FinalAnswerTool
from .local_python_executor import CodeOutput, PythonExecutor
from .monitoring import AgentLogger, LogLevel
from .remote_executors import RemotePythonExecutor
from .tools import Tool

__all__ = ["CodeAgent", "FinalAnswerTool", "CodeOutput", "PythonExecutor", "AgentLogger",
           "LogLevel", "RemotePythonExecutor", "Tool"]
