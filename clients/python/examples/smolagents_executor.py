"""A smolagents CodeAgent whose actions run in a sandgate sandbox.

    pip install smolagents            # where its index is reachable
    pip install --no-index --no-build-isolation ./clients/python
    SANDGATE_ADDR=127.0.0.1:7443 SANDGATE_API_KEY=sg-demo-key-0001 \\
    SANDGATE_USER=alice python smolagents_executor.py

One sandbox per agent run, killed when the agent's `with` ends (also when a
step raises). executor_type="sandgate" works too: the package registers the
`smolagents.executors` entry point.
"""
from smolagents import CodeAgent, InferenceClientModel
from smolagents.monitoring import AgentLogger, LogLevel

from sandgate.smolagents import SandgateExecutor


def main():
    logger = AgentLogger(level=LogLevel.INFO)
    executor = SandgateExecutor(["numpy"], logger, task_id="smolagents-example", timeout=60)
    with CodeAgent(tools=[], model=InferenceClientModel(), executor=executor) as agent:
        print(agent.run("What is the 20th Fibonacci number? Use numpy if it helps."))


if __name__ == "__main__":
    main()
