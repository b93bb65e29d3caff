"""A paused sandbox outlives its server: `cordon serve` is killed with SIGKILL between the
two halves, and the next server (same database, same objects folder) resumes it.

Usage: python3 paused_restart.py before_kill|after_restart BASE_URL STATE_FILE
"""

import json
import sys

import httpx

TIMEOUT = httpx.Timeout(60.0)


def run(http, sandbox, code):
    """Runs `code` (waiting for its end) and returns its result."""
    response = http.post(
        f"/v1/sandboxes/{sandbox}/executions",
        json={"code": code},
        headers={"Accept": "text/event-stream"},
    )
    assert response.status_code == 200, response.text
    for block in response.text.split("\n\n"):
        if "event: execution.completed" in block:
            data = next(line[6:] for line in block.splitlines() if line.startswith("data: "))
            event = json.loads(data)  # the execution's result, flattened
            assert event["status"] == "completed", event
            return event["result"]
    raise AssertionError(f"no execution.completed in {response.text}")


def before_kill(base, state_file):
    with httpx.Client(base_url=base, timeout=TIMEOUT) as http:
        created = http.post("/v1/sandboxes", json={"language": "python-lite", "stateful": True})
        assert created.status_code == 201, created.text
        sandbox = created.json()["id"]
        run(http, sandbox, "x = 41")
        paused = http.post(f"/v1/sandboxes/{sandbox}/pause")
        assert paused.status_code == 200, paused.text
        assert paused.json()["state"] == "paused", paused.text
        assert paused.json()["paused_bytes"] > 0, paused.text
        # A live one that is never paused: the next server says it was interrupted.
        live = http.post("/v1/sandboxes", json={"language": "python-lite", "stateful": True})
        run(http, live.json()["id"], "y = 1")
    with open(state_file, "w") as out:
        json.dump({"paused": sandbox, "live": live.json()["id"]}, out)


def after_restart(base, state_file):
    with open(state_file) as saved:
        state = json.load(saved)
    with httpx.Client(base_url=base, timeout=TIMEOUT) as http:
        described = http.get(f"/v1/sandboxes/{state['paused']}")
        assert described.json()["state"] == "paused", described.text
        assert run(http, state["paused"], "x + 1") == 42
        assert http.get(f"/v1/sandboxes/{state['paused']}").json()["state"] == "live"
        interrupted = http.get(f"/v1/sandboxes/{state['live']}").json()
        assert interrupted["state"] == "interrupted", interrupted
        assert "before pausing it" in interrupted["reason"], interrupted
        refused = http.post(
            f"/v1/sandboxes/{state['live']}/executions", json={"code": "y"}
        )
        assert refused.status_code == 410, refused.text
        assert refused.json()["type"] == "sandbox_interrupted", refused.text


if __name__ == "__main__":
    scenario, base, state_file = sys.argv[1], sys.argv[2], sys.argv[3]
    {"before_kill": before_kill, "after_restart": after_restart}[scenario](base, state_file)
    print(f"paused_restart {scenario}: ok")
