"""A smolagents ``PythonExecutor`` that runs the agent's code in a Cordon sandbox.

    from smolagents import CodeAgent
    from cordon_adapters.smolagents import CordonExecutor

    agent = CodeAgent(tools=[...], model=model, executor=CordonExecutor())

The code runs in WebAssembly with fixed limits (``cordon serve``'s sandbox, docs/sandbox.md)
in one stateful sandbox, so variables survive from one step to the next as with smolagents'
own executor. The agent's tools are *client tools*: when the code calls one, the execution
suspends, this executor runs the tool here (where its credentials and network are) and
sends the result back, and the code goes on. ``final_answer(...)`` ends the step with the
answer.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from smolagents.local_python_executor import CodeOutput, PythonExecutor

from .client import base_url, check, headers

_FINAL = "final_answer"

# Runs before every step's code: each tool becomes a plain (synchronous) function, as the
# agent's prompt describes them, calling the client tool through the sandbox's `tools.call`.
_PRELUDE = """
import tools as _cordon_tools
class _CordonFinalAnswer(Exception):
    pass
def _cordon_tool(_name, _params):
    def call(*args, **kwargs):
        for _value, _key in zip(args, _params):
            kwargs[_key] = _value
        return _cordon_tools.call(_name, kwargs)
    call.__name__ = _name
    return call
"""


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


class CordonExecutor(PythonExecutor):
    """Runs smolagents' code actions in a Cordon sandbox (``POST /v1/sandboxes``).

    ``limits`` are the sandbox's (``cpu_ms``, ``memory_bytes``, ``wall_ms`` …); the client
    tools' answers have ``client_tool_timeout_ms`` to arrive. ``language`` is ``python``
    (CPython with numpy, pandas, matplotlib) or ``python-lite`` (RustPython: faster start,
    standard library only).
    """

    def __init__(self, cordon_url: str | None = None, *, token: str | None = None,
                 limits: dict | None = None, timeout: float = 120.0, language: str = "python"):
        self._base = base_url(cordon_url)
        self._language = language
        self._http = httpx.Client(base_url=self._base, headers=headers(token), timeout=timeout)
        self._limits = limits or {}
        self.tools: dict[str, Any] = {}
        self.sandbox_id: str | None = None
        self.state: dict[str, Any] = {}
        self._variables: dict[str, Any] = {}
        self._setup = ""

    # --- PythonExecutor ------------------------------------------------------------------

    def send_tools(self, tools: dict[str, Any]) -> None:
        self.tools = dict(tools)
        self._restart()

    def send_variables(self, variables: dict[str, Any]) -> None:
        self._variables = {k: _jsonable(v) for k, v in variables.items()}

    def __call__(self, code_action: str) -> CodeOutput:
        if self.sandbox_id is None:
            self._restart()
        final: dict[str, Any] = {}
        result = self._execute(self._wrap(code_action), final)
        logs = result.get("stdout", "")
        if _FINAL in final:
            return CodeOutput(output=final[_FINAL], logs=logs, is_final_answer=True)
        if result.get("status") != "completed":
            error = result.get("error") or {}
            message = f"{error.get('type', result.get('status'))}: {error.get('message', '')}"
            if result.get("limit"):
                message += f" (limit: {result['limit']})"
            raise RuntimeError(f"Code execution failed: {message}\n{logs}{result.get('stderr', '')}")
        return CodeOutput(output=result.get("result"), logs=logs, is_final_answer=False)

    def cleanup(self) -> None:
        if self.sandbox_id is not None:
            try:
                check(self._http.delete(f"/v1/sandboxes/{self.sandbox_id}"))
            finally:
                self.sandbox_id = None

    # --- the sandbox -----------------------------------------------------------------------

    def _restart(self) -> None:
        self.cleanup()
        declared = [{"name": name, "description": getattr(tool, "description", "") or name,
                     "input_schema": {"type": "object"}, "handler": {"kind": "client"}}
                    for name, tool in self.tools.items() if name != _FINAL]
        declared.append({"name": _FINAL, "description": "Give the final answer.",
                         "input_schema": {"type": "object"}, "handler": {"kind": "client"}})
        body = {"language": self._language, "tools": declared, "stateful": True}
        if self._limits:
            body["limits"] = self._limits
        self.sandbox_id = check(self._http.post("/v1/sandboxes", json=body))["id"]
        params = {name: list(getattr(tool, "inputs", {}) or {}) for name, tool in self.tools.items()}
        setup = [_PRELUDE]
        for name, names in params.items():
            if name != _FINAL:
                setup.append(f"{name} = _cordon_tool({name!r}, {names!r})")
        setup.append(
            "def final_answer(answer=None, **kwargs):\n"
            f"    _cordon_tools.call({_FINAL!r}, {{'answer': answer if answer is not None else kwargs}})\n"
            "    raise _CordonFinalAnswer()\n")
        # The sandbox declares every tool as an async global again at each execution, so
        # the synchronous versions are put back in front of each step's code.
        self._setup = "\n".join(setup)

    def _wrap(self, code: str) -> str:
        lines = [self._setup]
        for name, value in self._variables.items():
            if name.isidentifier():
                lines.append(f"{name} = {json.dumps(value)!s}")
        self._variables = {}
        return "\n".join(lines + [code])

    def _execute(self, code: str, final: dict[str, Any]) -> dict:
        """Runs `code`, answering its client tool calls; returns `execution.completed`."""
        url = f"/v1/sandboxes/{self.sandbox_id}/executions"
        with self._http.stream("POST", url, json={"code": code},
                               headers={"accept": "text/event-stream"}) as response:
            if response.status_code >= 400:
                response.read()
                check(response)
            execution = response.headers.get("cordon-execution-id")
            event_type = None
            for line in response.iter_lines():
                if line.startswith("event:"):
                    event_type = line[6:].strip()
                elif line.startswith("data:") and event_type:
                    event = json.loads(line[5:])
                    if event_type == "tool.call" and event.get("locus") == "client":
                        output, is_error = self._run_tool(event["name"], event.get("input") or {}, final)
                        check(self._http.post(f"/v1/executions/{execution}/tool_results", json={
                            "results": [{"call_id": event["id"], "output": output, "is_error": is_error}]}))
                    elif event_type == "execution.completed":
                        return event
        raise RuntimeError("the execution's event stream ended before it completed")

    def _run_tool(self, name: str, arguments: dict, final: dict[str, Any]) -> tuple[Any, bool]:
        if name == _FINAL:
            final[_FINAL] = arguments.get("answer")
            return None, False
        tool = self.tools.get(name)
        if tool is None:
            return f"no tool named {name}", True
        try:
            return _jsonable(tool(**arguments)), False
        except Exception as error:  # the tool's failure goes back to the code as ToolError
            return f"{type(error).__name__}: {error}", True
