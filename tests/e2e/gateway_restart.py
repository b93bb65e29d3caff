"""The model gateway's state at rest outlives `cordon serve`: the server is killed with
SIGKILL between two client requests and the next server (same database, same objects
folder) takes the conversation up, driven by the official `anthropic` SDK.

Usage: python3 gateway_restart.py SCENARIO --cordon PATH/TO/cordon [--db postgres://…]
(without `--db`, a SQLite file in a temporary folder; the objects folder is always in
that folder). The stand-in model
(`standin_model.py`) runs in this script for the whole scenario, so it outlives both
servers; each server is started and stopped here like in `gateway_anthropic.py`.

Scenarios:
  container     a program sets `x = 41` in a container; after the restart the next request
                naming the container runs `print(x + 1)` and the model reads 42
  approval      an `ask` tool's call is handed back; after the restart a `cordon_approval`
                runs it and the turn continues
  interrupted   a program waits for a client tool's result; after the restart answering it
                is a 409 in Anthropic's error shape saying it was interrupted by a restart
  session       a session-protocol session sets `x = 41` in its container; after the
                restart its next turn runs `print(x + 1)` in the same interpreter
"""

import json
import os
import sys
import tempfile

import anthropic
import httpx

import gateway_anthropic as harness
from gateway_anthropic import (
    CODE_TOOL, TRANSFER, Cordon, as_params, blocks, create, ptc_weather, results_for, tools_file,
)
from session_protocol import turn
from standin_model import StandinModel, reply, tool_use


class Restartable:
    """A `cordon serve` on one database and objects folder, killed and started again."""

    def __init__(self, model, directory, extra=()):
        self.upstream = f"anthropic={model.url}"
        self.db = DB or os.path.join(directory, "cordon.db")
        self.extra = ["--objects", os.path.join(directory, "objects"), *extra]
        self.server = Cordon(harness.ARGS.cordon, self.upstream, self.extra, db=self.db)

    def kill_9_and_restart(self):
        process = self.server.process
        process.kill()  # SIGKILL: nothing runs on the way out
        process.wait(10)
        if self.server in harness._LIVE:
            harness._LIVE.remove(self.server)
        self.server = Cordon(harness.ARGS.cordon, self.upstream, self.extra, db=self.db)

    def client(self):
        return self.server.client()

    def stop(self):
        self.server.stop()


def scenario_container(directory, model):
    objects = os.path.join(directory, "objects")
    server = Restartable(model, directory)
    try:
        client = server.client()
        question = {"role": "user", "content": "Set x to 41."}
        model.push(reply(tool_use("code_execution", {"code": "x = 41"}, id="toolu_set")),
                   reply("Set."))
        message, body, _ = create(client, tools=[CODE_TOOL], messages=[question])
        assert message.content[-1].text == "Set.", body
        container = body["container"]["id"]
        kept = os.listdir(os.path.join(objects, "gateway"))
        assert kept == [container], f"the idle container is kept at rest: {kept}"

        server.kill_9_and_restart()
        client = server.client()
        model.push(reply(tool_use("code_execution", {"code": "print(x + 1)"}, id="toolu_add")),
                   reply("It is 42."))
        messages = [question, {"role": "assistant", "content": as_params(message.content)},
                    {"role": "user", "content": "What is x + 1?"}]
        final, body, _ = create(client, tools=[CODE_TOOL], container=container,
                                messages=messages)
        assert final.content[-1].text == "It is 42.", body
        shown = [b for b in body["content"] if b["type"] == "code_execution_tool_result"]
        assert shown and shown[0]["content"]["stdout"] == "42\n", body
        results = model.requests[-1].tool_results()
        assert "42" in results[-1][1] and not results[-1][2], results
        assert body["container"]["id"] == container, body
    finally:
        server.stop()


def scenario_approval(directory, model):
    tools = tools_file(directory, [TRANSFER])
    server = Restartable(model, directory, ["--tools", tools])
    try:
        client = server.client()
        question = {"role": "user", "content": "Send 10 to Bob."}
        model.push(reply("Transferring.", tool_use("transfer", {"amount": 10}, id="toolu_tx")))
        message, _, _ = create(client, messages=[question])
        assert message.stop_reason == "tool_use", message
        assert [u.id for u in blocks(message, "tool_use")] == ["toolu_tx"], message

        server.kill_9_and_restart()
        client = server.client()
        model.push(reply("Done."))
        before = len(model.requests)
        approval = {"type": "cordon_approval", "tool_use_id": "toolu_tx", "granted": True}
        history = [question, {"role": "assistant", "content": as_params(message.content)},
                   {"role": "user", "content": [approval]}]
        final, body, _ = create(client, messages=history)
        assert final.stop_reason == "end_turn", body
        assert final.content[-1].text == "Done.", body
        assert len(model.requests) == before + 1, model.requests
        call, output, is_error = model.requests[-1].tool_results()[0]
        assert call == "toolu_tx" and not is_error, model.requests[-1]
        assert json.loads(output) == {"ok": True, "ref": "TX-991"}, output
        # Decided once: the same approval again is refused.
        try:
            create(client, messages=history)
            raise AssertionError("a second approval of the same call was accepted")
        except anthropic.BadRequestError as refused:
            assert "already answered" in str(refused), refused
    finally:
        server.stop()


def scenario_interrupted(directory, model):
    server = Restartable(model, directory)
    try:
        client = server.client()
        code = 'r = await get_weather(city="Paris")\nprint(r)'
        model.push(reply(tool_use("code_execution", {"code": code}, id="toolu_wait")))
        question = {"role": "user", "content": "Weather in Paris?"}
        tools = [CODE_TOOL, ptc_weather()]
        message, body, _ = create(client, tools=tools, messages=[question])
        assert message.stop_reason == "tool_use", body
        container = body["container"]["id"]
        call = blocks(message, "tool_use")[0].id

        server.kill_9_and_restart()
        client = server.client()
        before = len(model.requests)
        messages = [question, {"role": "assistant", "content": as_params(message.content)},
                    results_for(message, {call: {"temp_c": 21}})]
        try:
            create(client, tools=tools, container=container, messages=messages)
            raise AssertionError("a program's results were accepted after a restart")
        except anthropic.ConflictError as refused:
            assert refused.status_code == 409, refused
            error = refused.body["error"]
            assert "interrupted by a restart" in error["message"], error
            assert container in error["message"], error
        assert len(model.requests) == before, "the model is not asked"
    finally:
        server.stop()


def scenario_session(directory, model):
    server = Restartable(model, directory)
    try:
        http = httpx.Client(base_url=server.server.url, timeout=60.0)
        model.push(reply(tool_use("code_execution", {"code": "x = 41"}, id="call_set")),
                   reply("Set."))
        session, events = turn(http, "PUT", "/session", {
            "model": "standin-session-1", "messages": [{"role": "user", "content": "x = 41"}]})
        assert events[-1] == ("turn_stop", {"stopReason": "end_turn"}), events

        server.kill_9_and_restart()
        http = httpx.Client(base_url=server.server.url, timeout=60.0)
        model.push(reply(tool_use("code_execution", {"code": "print(x + 1)"}, id="call_add")),
                   reply("42."))
        _, events = turn(http, "POST", f"/session/{session}", {"messages": [
            {"role": "user", "content": "and x + 1?"}]})
        results = [data for name, data in events if name == "tool_result"]
        assert len(results) == 1 and not results[0]["isError"], events
        assert "42" in results[0]["content"], events
    finally:
        server.stop()


SCENARIOS = {
    "container": scenario_container,
    "approval": scenario_approval,
    "interrupted": scenario_interrupted,
    "session": scenario_session,
}


def run(api):
    assert api == "anthropic", api
    with tempfile.TemporaryDirectory(prefix="cordon-restart-") as directory:
        model = StandinModel().start()
        try:
            SCENARIOS[harness.ARGS.scenario](directory, model)
        finally:
            model.stop()


def _take_db_flag():
    """`--db URL` out of the command line (the shared parser does not know it)."""
    if "--db" not in sys.argv:
        return None
    at = sys.argv.index("--db")
    url = sys.argv[at + 1]
    del sys.argv[at:at + 2]
    return url


DB = None

if __name__ == "__main__":
    DB = _take_db_flag()
    harness.run_scenarios({name: run for name in SCENARIOS}, __doc__)
