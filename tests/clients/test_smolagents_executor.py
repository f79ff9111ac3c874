#!/usr/bin/python3
"""sandgate.smolagents.SandgateExecutor driving a scripted multi-step
CodeAgent against a real host + gateway.

smolagents cannot be installed here, so the agent and the executor base
classes are the stand-in in smolagents_standin/ (same contract and module
paths as huggingface/smolagents). The sandgate package is installed into a
temp venv as docs/clients.md says (pyvenv.py), which also registers its
`smolagents.executors` entry point; this file re-runs itself there.

Scenario 1 (executor passed as executor=): state across steps, a tool whose
requirement is pip-installed through Exec from a wheel in the workspace, an
error the model sees (with its traceback), an observation cut at the output
cap (and the model told), a final answer longer than the runtime's 8 KiB
error value, and the sandbox killed when the agent's `with` ends.
Scenario 2 (executor_type="sandgate" through the entry point): an
interpreter restart after a timeout (the model told; tools defined again),
then a model step that raises: the run fails and the sandbox is still killed.
"""
import base64
import hashlib
import io
import os
import sys
import unittest
import uuid
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pyvenv  # noqa: E402

TMP = pyvenv.reexec_in_venv(__file__, extra_path=os.path.join(HERE, "smolagents_standin"))

import sandgate  # noqa: E402
import smolagents  # noqa: E402  (the stand-in)
from sandgate.smolagents import SandgateExecutor  # noqa: E402

DEMO_KEY = "sg-demo-key-0001"
# pip in a sandbox (1 CPU) can take past the local policy's 30 s action
# limit on a loaded machine.
D = pyvenv.Daemons(TMP, pyvenv.local_policy().replace("action_timeout: 30s",
                                                      "action_timeout: 180s"))


def setUpModule():
    pyvenv.assert_installed(sandgate)
    assert os.path.realpath(smolagents.__file__).startswith(HERE), smolagents.__file__
    unittest.addModuleCleanup(D.stop)
    D.start()


def wheel(name, version, files):
    """A pure-Python wheel (zip) with these {path: text} files."""
    di = "%s-%s.dist-info" % (name, version)
    files = dict(files)
    files[di + "/METADATA"] = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    files[di + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: sandgate-test\n"
                            "Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, text in files.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(data)))
        record.append(di + "/RECORD,,")
        z.writestr(di + "/RECORD", "\n".join(record) + "\n")
    return buf.getvalue()


class WordCount(smolagents.Tool):
    name = "word_count"
    description = "Counts the words in a text."
    inputs = {"text": {"type": "string", "description": "the text"}}
    output_type = "integer"

    def forward(self, text):
        import sgwords  # a third-party module: a requirement smolagents installs
        return sgwords.count(text)


class Shout(smolagents.Tool):
    name = "shout"
    description = "Upper-cases a text."
    inputs = {"text": {"type": "string", "description": "the text"}}
    output_type = "string"

    def forward(self, text):
        return text.upper() + "!"


class Script:
    """A scripted model: step i returns code[i] (a callable gets the memory)."""

    def __init__(self, steps):
        self.steps = list(steps)
        self.seen = []

    def __call__(self, memory):
        self.seen.append(memory)
        step = self.steps.pop(0)
        return step(memory) if callable(step) else step


class ExecutorTest(unittest.TestCase):

    def gone(self, sandbox_id):
        with sandgate.Client(D.addr, DEMO_KEY) as c:
            with self.assertRaises(sandgate.SandboxNotFound):
                sandgate.Sandbox.connect(sandbox_id, user_id="agent-user", client=c)

    def test_agent_loop(self):
        logger = smolagents.AgentLogger()
        ex = SandgateExecutor([], logger, addr=D.addr, api_key=DEMO_KEY, user_id="agent-user",
                              task_id="smol-" + uuid.uuid4().hex[:8], max_output_bytes=4096,
                              pip_args=["--no-index", "--find-links", "/workspace/wheels"])
        sid = ex.sandbox.sandbox_id
        ex.sandbox.files.write("wheels/sgwords-1.0-py3-none-any.whl", wheel(
            "sgwords", "1.0", {"sgwords/__init__.py": "def count(t):\n    return len(t.split())\n"}))
        long_text = "w" * 10000  # past the runtime's 8 KiB error value
        model = Script([
            "import math\nradius = base_radius\nprint('radius set')",
            "area = math.pi * radius ** 2\nn = word_count('a b c d')\nprint('words', n)\narea",
            "print('about to fail')\n{}['missing']",
            "print('y' * 20000)",
            "final_answer({'area': round(area, 2), 'words': n, 'text': %r})" % long_text,
        ])
        with smolagents.CodeAgent(tools=[WordCount()], model=model, executor=ex) as agent:
            answer = agent.run("area and words", additional_args={"base_radius": 3})
            mem = agent.memory
        self.assertEqual(answer, {"area": 28.27, "words": 4, "text": long_text})
        kinds = [k for k, _ in mem]
        self.assertEqual(kinds, ["task", "observation", "observation", "error", "observation",
                                 "observation"], mem)
        self.assertIn("radius set", mem[1][1])
        self.assertIn("words 4", mem[2][1])                      # the tool, installed via Exec
        self.assertIn("28.274333882308138", mem[2][1])           # state across steps
        err = mem[3][1]                                          # what the model sees next
        self.assertIn("about to fail", err)
        self.assertIn("KeyError", err)
        self.assertIn("Traceback (most recent call last)", err)
        self.assertIn("<cell-", err)
        self.assertEqual(model.seen[3][-1], ("error", err))      # ...and it did see it
        self.assertIn("[sandgate: output cut: the code printed 20001 bytes", mem[4][1])
        self.assertLess(len(mem[4][1]), 5000)
        self.assertIn("sgwords", ex.installed_packages)
        self.assertIn("sandgate: pip install sgwords", logger.lines)
        self.assertIsNone(ex.sandbox)                             # cleanup ran
        self.gone(sid)

    def test_entry_point_restart_and_a_step_that_raises(self):
        model = Script([
            "import time\nkeep = 1\nwhile True:\n    try:\n        time.sleep(5)\n"
            "    except KeyboardInterrupt:\n        pass\n",
            "print(shout('still here'), 'keep' in globals())",
            lambda memory: (_ for _ in ()).throw(RuntimeError("model backend down")),
        ])
        agent = smolagents.CodeAgent(
            tools=[Shout()], model=model, executor_type="sandgate",
            executor_kwargs={"addr": D.addr, "api_key": DEMO_KEY, "user_id": "agent-user",
                             "task_id": "smol-ep-" + uuid.uuid4().hex[:8], "timeout": 2})
        self.assertIsInstance(agent.python_executor, SandgateExecutor)
        sid = agent.python_executor.sandbox.sandbox_id
        with self.assertRaises(RuntimeError):
            with agent:
                agent.run("restart")
        mem = agent.memory
        self.assertEqual(mem[1][0], "error", mem)
        self.assertIn("time limit", mem[1][1])
        self.assertIn("interpreter was restarted", mem[1][1])
        self.assertEqual(mem[2][0], "observation", mem)
        self.assertIn("STILL HERE! False", mem[2][1])   # tools back, old state gone
        self.gone(sid)

    def test_sandbox_ended_under_the_agent_is_replaced(self):
        ex = SandgateExecutor([], smolagents.AgentLogger(), addr=D.addr, api_key=DEMO_KEY,
                              user_id="agent-user", task_id="smol-r-" + uuid.uuid4().hex[:8])
        first = ex.sandbox.sandbox_id

        def killed_elsewhere(memory):
            # As if its TTL ran out: the sandbox ends between two steps.
            with sandgate.Client(D.addr, DEMO_KEY) as c:
                self.assertTrue(sandgate.Sandbox.connect(first, user_id="agent-user",
                                                         client=c).kill())
            return "print(kept)"
        model = Script([
            "kept = 'before'\nprint(shout('one'))",
            killed_elsewhere,
            "print(shout('two'), 'kept' in globals())",
            "final_answer('done')",
        ])
        with smolagents.CodeAgent(tools=[Shout()], model=model, executor=ex) as agent:
            self.assertEqual(agent.run("replace"), "done")
            second = ex.sandbox.sandbox_id
            mem = agent.memory
        self.assertEqual([k for k, _ in mem], ["task", "observation", "error", "observation",
                                               "observation"], mem)
        self.assertIn("ONE!", mem[1][1])
        self.assertIn("replaced by a new one", mem[2][1])
        self.assertIn("did not run", mem[2][1])
        self.assertIn("TWO! False", mem[3][1])   # tools defined again; old state gone
        self.assertNotEqual(first, second)
        self.gone(first)
        self.gone(second)

    def test_cleanup_is_idempotent_and_failed_setup_kills(self):
        ex = SandgateExecutor([], smolagents.AgentLogger(), addr=D.addr, api_key=DEMO_KEY,
                              user_id="agent-user", task_id="smol-c-" + uuid.uuid4().hex[:8])
        sid = ex.sandbox.sandbox_id
        ex.cleanup()
        ex.delete()
        self.gone(sid)
        with self.assertRaises(smolagents.utils.AgentError):
            SandgateExecutor(["no_such_module_xyz"], smolagents.AgentLogger(), addr=D.addr,
                             api_key=DEMO_KEY, user_id="agent-user", task_id="smol-bad",
                             pip_args=["--no-index"])
        with sandgate.Client(D.addr, DEMO_KEY) as c:
            left = [s for s in sandgate.Sandbox.list(user_id="agent-user", client=c)
                    if s.task_id == "smol-bad"]
        self.assertEqual(left, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
