"""Stand-in for smolagents.monitoring: LogLevel and an AgentLogger that
keeps what it was told (tests read .lines and .errors)."""
from enum import IntEnum


class LogLevel(IntEnum):
    OFF = -1
    ERROR = 0
    INFO = 1
    DEBUG = 2


class AgentLogger:
    def __init__(self, level=LogLevel.INFO):
        self.level = level
        self.lines = []
        self.errors = []

    def log(self, *args, level=LogLevel.INFO, **kwargs):
        if level <= self.level:
            self.lines.append(" ".join(str(a) for a in args))

    def log_error(self, error_message):
        self.errors.append(str(error_message))
