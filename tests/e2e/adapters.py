"""End-to-end checks of the Python adapters (python/cordon-adapters) with the real framework
packages against a real `cordon serve`.

Usage: python3 adapters.py SCENARIO --cordon PATH/TO/cordon (or CORDON_BIN=PATH), where
SCENARIO is `openai_agents`, `smolagents` or `gym`. The script starts its own `cordon serve
--addr 127.0.0.1:0` and stops it on every way out (the kernel sends it SIGTERM if this script
is killed). The models are scripted stand-ins implementing each framework's own model
interface, so the frameworks' real loops run with no network. Every wait has a timeout.
"""

import argparse
import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "cordon-adapters", "src"))

from pages import DISPLAY, GO, serve_page  # noqa: E402

TIMEOUT = 120.0
BROWSER_FLAGS = ["--no-browser-sandbox"] if os.geteuid() == 0 else []


def _die_with_parent():
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


class Cordon:
    """A `cordon serve` on an ephemeral loopback port."""

    def __init__(self, binary, extra=()):
        self.dir = tempfile.TemporaryDirectory(prefix="cordon-adapters-")
        args = [binary, "serve", "--addr", "127.0.0.1:0", "--db", os.path.join(self.dir.name, "c.db"),
                *BROWSER_FLAGS, *extra]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
        self.url = None
        found = threading.Event()

        def drain():
            for raw in self.process.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                print(f"[cordon] {line}", file=sys.stderr, flush=True)
                if self.url is None and "listening on http://" in line:
                    self.url = "http://" + line.split("listening on http://", 1)[1].split()[0].rstrip("/")
                    found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(60):
            self.stop()
            raise RuntimeError("cordon serve did not start")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.dir.cleanup()


# --- OpenAI Agents SDK: ComputerTool(CordonComputer(...)) ---------------------------------

def openai_agents(cordon):
    from agents import Agent, ComputerTool, ModelResponse, Runner, Usage
    from agents.models.interface import Model
    from openai.types.responses import (ResponseComputerToolCall, ResponseOutputMessage,
                                        ResponseOutputText)
    from openai.types.responses.response_computer_tool_call import ActionClick

    from cordon_adapters.openai_agents import CordonComputer

    seen = []

    class ScriptedModel(Model):
        """Asks for one click on GO, then answers with the page's URL it was shown."""

        def __init__(self):
            self.turn = 0

        async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                               handoffs, tracing, **kwargs):
            self.turn += 1
            seen.append(input)
            if self.turn == 1:
                assert any(getattr(t, "name", "") == "computer_use_preview" or type(t).__name__ == "ComputerTool"
                           for t in tools), tools
                call = ResponseComputerToolCall(
                    id="cu_1", call_id="call_1", type="computer_call", status="completed",
                    action=ActionClick(type="click", x=GO[0], y=GO[1], button="left"),
                    pending_safety_checks=[])
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            message = ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="clicked", annotations=[])])
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    async def main():
        with serve_page() as page:
            from urllib.parse import urlsplit
            origin = "http://" + urlsplit(page).netloc
            async with CordonComputer(page, cordon_url=cordon.url, display=DISPLAY,
                                      allow_origins=[origin]) as computer:
                assert computer.dimensions == (1024, 640)
                agent = Agent(name="browser", instructions="Click Go.", model=ScriptedModel(),
                              tools=[ComputerTool(computer=computer)])
                result = await asyncio.wait_for(Runner.run(agent, "Click the Go button."), TIMEOUT)
                assert result.final_output == "clicked", result.final_output
                assert computer.current_url.endswith("#clicked"), computer.current_url
                assert computer.steps and computer.steps[-1]["status"] == "ok", computer.steps
                # The SDK sent the screenshot after the click back to the model.
                outputs = [item for item in seen[-1] if isinstance(item, dict)
                           and item.get("type") == "computer_call_output"]
                assert outputs, seen[-1]
                image = outputs[0]["output"]["image_url"]
                assert image.startswith("data:image/png;base64,") and len(image) > 1000
                # Cordon refused nothing, and the step is in the session's trajectory.
                import httpx
                trajectory = httpx.get(f"{cordon.url}/v1/computers/{computer.id}/trajectory",
                                       timeout=30).json()
                clicks = [s for s in trajectory["steps"] if s["call"]["actions"][0].get("kind") == "click"]
                assert clicks, trajectory

    asyncio.run(main())


# --- smolagents: CodeAgent(executor=CordonExecutor(...)) ----------------------------------

def smolagents(cordon):
    from smolagents import CodeAgent, Tool
    from smolagents.models import ChatMessage, Model

    from cordon_adapters.smolagents import CordonExecutor

    calls = []

    class Add(Tool):
        name = "add"
        description = "Adds two numbers."
        inputs = {"a": {"type": "number", "description": "first"},
                  "b": {"type": "number", "description": "second"}}
        output_type = "number"

        def forward(self, a, b):
            calls.append((a, b))
            return a + b

    steps = [
        # Step 1: state that must survive into step 2, a tool call by keyword, a print.
        "<code>\nx = add(a=2, b=3)\nprint('x is', x)\n</code>",
        # Step 2: positional arguments, the variable from step 1, the final answer.
        "<code>\ny = add(x, 10)\nfinal_answer(y * 2)\n</code>",
    ]

    class ScriptedModel(Model):
        def __init__(self):
            super().__init__(model_id="scripted")
            self.turn = 0

        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None,
                     **kwargs):
            text = "Thought: compute.\n" + steps[min(self.turn, len(steps) - 1)]
            self.turn += 1
            return ChatMessage(role="assistant", content=text)

    executor = CordonExecutor(cordon.url, limits={"cpu_ms": 5000})
    agent = CodeAgent(tools=[Add()], model=ScriptedModel(), executor=executor, max_steps=4)
    try:
        answer = agent.run("Add 2 and 3, then add 10 and double it.")
    finally:
        executor.cleanup()
    assert answer == 30, answer
    assert calls == [(2, 3), (5, 10)], calls
    logs = [getattr(step, "observations", None) for step in agent.memory.steps]
    assert any(log and "x is 5" in log for log in logs), logs
    # Code that fails in the sandbox is an error the agent sees, not a crash of the host.
    executor2 = CordonExecutor(cordon.url, language="python-lite")
    executor2.send_tools({})
    try:
        # The language is the executor's choice (CPython by default, as above).
        implementation = executor2("import sys\nsys.implementation.name").output
        assert implementation == "rustpython", implementation
        executor2("1 / 0")
        raise AssertionError("a ZeroDivisionError should surface")
    except RuntimeError as error:
        assert "ZeroDivisionError" in str(error), error
    finally:
        executor2.cleanup()


# --- Gymnasium: CordonEnv over /v1/envs --------------------------------------------------

def gym(cordon):
    import numpy as np

    from cordon_adapters.gym import CordonEnv

    env = CordonEnv("drag", cordon_url=cordon.url, dpr=2)
    try:
        obs, info = env.reset(seed=0)
        assert obs["screenshot"].shape == (640, 1024, 3) and obs["screenshot"].dtype == np.uint8
        assert "/drag/index.html?seed=0" in obs["url"], obs["url"]
        assert "Drag" in info["prompt"], info
        assert env.observation_space.contains(obs)
        # A malformed action is an error the agent reads, not an exception.
        obs, reward, terminated, truncated, info = env.step({"action": "fly"})
        assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, "error"), info
        assert "fly" in info["error"], info
        obs, reward, terminated, truncated, info = env.step(
            '{"action": "left_click_drag", "start_coordinate": [200, 280], "coordinate": [640, 320]}')
        assert (reward, terminated, truncated) == (1.0, True, False), (reward, info)
        assert info["marks"][0]["model"] == [200, 280], info["marks"]
        assert info["marks"][0]["device"] == [2 * v for v in info["marks"][0]["screen"]], info["marks"]
        assert env.evaluate() == 1.0
        # A new episode of the same task starts unsolved.
        obs, info = env.reset(seed=1)
        assert "seed=1" in obs["url"] and env.evaluate() == 0.0
        # Inline tasks and unknown ones.
        from cordon_adapters import CordonError
        try:
            CordonEnv("no-such-task", cordon_url=cordon.url).reset()
            raise AssertionError("an unknown task should be refused")
        except CordonError as error:
            assert error.status == 422 and "no built-in task" in error.message, error
    finally:
        env.close()


SCENARIOS = {"openai_agents": openai_agents, "smolagents": smolagents, "gym": gym}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--cordon", default=os.environ.get("CORDON_BIN"))
    args = parser.parse_args()
    if not args.cordon:
        parser.error("--cordon PATH (or CORDON_BIN) is required")
    cordon = Cordon(args.cordon)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        started = time.time()
        SCENARIOS[args.scenario](cordon)
        print(f"{args.scenario}: ok in {time.time() - started:.1f}s", file=sys.stderr)
    finally:
        cordon.stop()


if __name__ == "__main__":
    main()
