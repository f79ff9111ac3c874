"""Stand-in for smolagents.local_python_executor: the executor interface."""
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

BASE_BUILTIN_MODULES = ["collections", "datetime", "itertools", "math", "queue", "random",
                        "re", "stat", "statistics", "time", "unicodedata"]


@dataclass
class CodeOutput:
    output: Any
    logs: str
    is_final_answer: bool


class FinalAnswerException(BaseException):
    """BaseException, so agent code's `except Exception` cannot swallow it."""

    def __init__(self, value):
        self.value = value


class PythonExecutor(ABC):
    @abstractmethod
    def send_tools(self, tools): ...

    @abstractmethod
    def send_variables(self, variables): ...

    @abstractmethod
    def __call__(self, code_action): ...
