"""Two `cordon serve` replicas on one PostgreSQL database, driven with httpx.

Usage: python3 replica_routing.py URL_A URL_B PID_A

A holds a sandbox; requests for it sent to B are forwarded to A (the answer says
`x-cordon-replica: A`), an execution's event stream is served by B from the shared log
(woken by LISTEN/NOTIFY), an approval decided through B reaches A, a request already
forwarded once is never forwarded again. Then A is killed (SIGKILL) while an execution
waits on an approval: once A's lease lapses, B records that execution `interrupted`, and
the stream B was serving ends with that result. Every wait is bounded.
"""

import os
import signal
import sys
import threading
import time

import httpx

from http_api import create_sandbox, read_all, sse_events, streamed_execution, wait_for
from serve_http import check_error

TIMEOUT = httpx.Timeout(30.0)
# A's lease is 1 s in the test; B notices within a heartbeat after it lapses.
DEADLINE_SECONDS = 60
ASK = [{"name": "pay", "policy": "ask", "handler": {"kind": "static", "result": "paid"}}]
PAY = "r = await pay()\nprint(r)\nr"


def replica_of(response):
    replica = response.headers.get("x-cordon-replica", "")
    assert replica.startswith("rpl_"), dict(response.headers)
    return replica


def main(url_a, url_b, pid_a):
    a = httpx.Client(base_url=url_a, timeout=TIMEOUT)
    b = httpx.Client(base_url=url_b, timeout=TIMEOUT)
    id_a, id_b = replica_of(a.get("/v1/health")), replica_of(b.get("/v1/health"))
    assert id_a != id_b, (id_a, id_b)
    # Every answer says who made it, errors too.
    assert replica_of(b.get("/v1/sandboxes/sbx_unknown")) == id_b

    sandbox = create_sandbox(a, "python-lite", tools=ASK, stateful=True)

    # Run through B: forwarded to A, which holds the sandbox.
    started = b.post(f"/v1/sandboxes/{sandbox}/executions", json={"code": "x = 6\nprint('hi')\nx * 7"})
    assert started.status_code == 201, started.text
    assert replica_of(started) == id_a, "the owner answered"
    execution = started.json()["id"]
    # Its events through B: read from the shared log where the request landed.
    events = read_all(b, execution)
    assert events[-1][1] == "execution.completed", events
    result = events[-1][2]
    assert (result["status"], result["stdout"], result["result"]) == ("completed", "hi\n", 42), result
    info = b.get(f"/v1/executions/{execution}")
    assert replica_of(info) == id_b and info.json()["status"] == "completed", info.text

    # A streamed answer (SSE) passes through B as it is written; the session is A's.
    with streamed_execution(b, sandbox, "x + 1") as (_, stream):
        rest = list(stream)
    assert rest[-1][2]["result"] == 7, rest

    # Sandbox routes (files, reads) reach A too.
    described = b.get(f"/v1/sandboxes/{sandbox}")
    assert described.status_code == 200 and replica_of(described) == id_a, described.text
    assert described.json()["state"] == "live", described.text

    # An approval decided through B reaches the execution running in A.
    with streamed_execution(b, sandbox, PAY) as (asking, stream):
        approval = wait_for(stream, "approval.required")[-1][2]["approval_id"]
        decided = b.post(f"/v1/approvals/{approval}", json={"decision": "approve"})
        assert decided.status_code == 200 and replica_of(decided) == id_a, decided.text
        assert decided.json()["execution_id"] == asking, decided.text
        rest = list(stream)
    assert rest[-1][2]["stdout"] == "paid\n", rest

    # A request forwarded once is never forwarded again.
    looped = b.get(f"/v1/sandboxes/{sandbox}", headers={"x-cordon-forwarded-by": id_a})
    check_error(looped, 503, "not_owner")
    assert looped.headers["retry-after"], dict(looped.headers)

    # An execution waiting on an approval in A, streamed through B.
    waiting = b.post(f"/v1/sandboxes/{sandbox}/executions", json={"code": PAY})
    assert waiting.status_code == 201 and replica_of(waiting) == id_a, waiting.text
    waiting = waiting.json()["id"]
    seen, ended = [], threading.Event()

    def follow():
        with b.stream("GET", f"/v1/executions/{waiting}/events",
                      timeout=httpx.Timeout(DEADLINE_SECONDS)) as response:
            assert response.status_code == 200 and replica_of(response) == id_b
            for event in sse_events(response):
                seen.append(event)
        ended.set()

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not any(kind == "approval.required" for _, kind, _ in seen):
        assert time.monotonic() < deadline, f"B's stream never showed A's approval.required: {seen}"
        time.sleep(0.02)

    os.kill(pid_a, signal.SIGKILL)

    # Until A's lease lapses B still takes A for the owner; afterwards B ends what A held.
    while True:
        info = b.get(f"/v1/executions/{waiting}").json()
        if info["status"] != "running":
            break
        assert time.monotonic() < deadline, f"A's execution was never interrupted: {info}"
        time.sleep(0.1)
    assert info["status"] == "interrupted", info
    result = info["result"]
    assert result["status"] == "interrupted", result
    assert "stopped" in result["error"]["message"], result
    assert info["pending_approvals"] == [], info

    # The stream B served was woken by the final event recovery stored, and ended.
    assert ended.wait(DEADLINE_SECONDS), f"B's stream did not end: {seen}"
    assert seen[-1][1] == "execution.completed" and seen[-1][2]["status"] == "interrupted", seen

    # What A held is over: the sandbox says so, and B serves it from the store.
    gone = b.get(f"/v1/sandboxes/{sandbox}")
    assert gone.status_code == 200 and replica_of(gone) == id_b, gone.text
    assert gone.json()["state"] == "interrupted", gone.text
    # Its approval expired with it.
    pending = next(data for _, kind, data in seen if kind == "approval.required")["approval_id"]
    check_error(b.post(f"/v1/approvals/{pending}", json={"decision": "approve"}), 409, "approval_expired")
    # B itself keeps serving.
    mine = create_sandbox(b, "python-lite")
    again = b.post(f"/v1/sandboxes/{mine}/executions", json={"code": "1 + 1"})
    assert again.status_code == 201 and replica_of(again) == id_b, again.text
    assert read_all(b, again.json()["id"])[-1][2]["result"] == 2
    print("replica routing: ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
