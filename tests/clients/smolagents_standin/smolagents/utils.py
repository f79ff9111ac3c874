"""Stand-in for smolagents.utils: the agent error types and truncate_content."""

MAX_LENGTH_TRUNCATE_CONTENT = 20000


class AgentError(Exception):
    """An error the agent reports to the model; logged when made."""

    def __init__(self, message, logger):
        super().__init__(message)
        self.message = message
        logger.log_error(message)


class AgentExecutionError(AgentError):
    pass


class AgentGenerationError(AgentError):
    pass


class AgentMaxStepsError(AgentError):
    pass


def truncate_content(content, max_length=MAX_LENGTH_TRUNCATE_CONTENT):
    """Keep the head and the tail, saying that the middle was cut."""
    if len(content) <= max_length:
        return content
    half = max_length // 2
    return (content[:half] + "\n..._This content has been truncated to stay below %d "
            "characters_...\n" % max_length + content[-half:])
