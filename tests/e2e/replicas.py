"""Three `cordon serve` replicas on one PostgreSQL database and one S3 bucket (moto's
server), behind nginx configured by docs/deploy/nginx/cordon.conf.template: concurrent
stateful sessions run code through the proxy, some are paused, one replica is killed with
SIGKILL in the middle, and what the deployment promises is checked:

- no committed record is lost: every execution that returned `completed` before the kill
  reads back, through the proxy, with the same result;
- every sandbox the killed replica had paused resumes through the proxy with its variables;
- every execution that was running in the killed replica ends `interrupted`, and so does
  each of its idle live sandboxes;
- the survivors' own work goes on (their running executions are untouched).

Usage: python3 replicas.py --cordon PATH/TO/cordon --db postgres://… [--sessions N]
                           [--executions N] [--report [--direct]]
`--report` prints the throughput (executions/s) and latency percentiles of the first
phase, where every session runs `--executions` executions back to back through nginx
(`--direct`: straight to the replica holding the session, no proxy and no forwarding).
Everything the script starts (moto, the replicas, nginx) is stopped on every way out,
and the kernel sends each SIGTERM if the script itself is killed. Every request and wait
has a deadline; nothing asserts how long anything took.
"""

import argparse
import asyncio
import collections
import contextlib
import ctypes
import os
import pathlib
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import httpx

from standin_model import free_port

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "deploy"))
import nginx_config  # noqa: E402

TIMEOUT = httpx.Timeout(120.0, connect=10.0)
BUCKET = "cordon-replicas"
REPLICAS = 3
# Bounds on waiting for something that must happen (never assertions about speed).
START_DEADLINE = 120
RECOVERY_DEADLINE = 120
# An execution that stays running without using the CPU: it waits for a client tool's
# result (`execution.awaiting`) until the script answers it or its replica dies.
WAITING_CODE = "answer = await wait_for_client()\nanswer"
SANDBOX = {
    "language": "python-lite",
    "stateful": True,
    "tools": [{"name": "wait_for_client", "input_schema": {"type": "object"},
               "handler": {"kind": "client"}}],
    # Small workspaces: 200 sessions fit the replicas' workspace budget. The waiting
    # executions wait longer than the script runs.
    "limits": {"workspace_bytes": 1 << 20, "client_tool_timeout_ms": 600_000,
               "wall_ms": 600_000},
}

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child before exec: SIGTERM when this script dies, however it dies."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# --- the processes ---------------------------------------------------------------------

_STARTED = []


class Process:
    """A child process whose stderr is echoed with a prefix and kept."""

    def __init__(self, name, args, env=None, ready=None, echo=True):
        self.name = name
        self.echo = echo
        self.log = collections.deque(maxlen=200)
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=env, preexec_fn=_die_with_parent)
        _STARTED.append(self)
        threading.Thread(target=self._drain, args=(ready,), daemon=True).start()

    def _drain(self, ready):
        for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.log.append(line)
            if self.echo:
                print(f"[{self.name}] {line}", file=sys.stderr, flush=True)
            if ready and ready in line:
                self.ready.set()
        self.ready.set()

    def tail(self, lines):
        return "\n".join(list(self.log)[-lines:])

    def alive(self):
        return self.process.poll() is None

    def stop(self, sig=signal.SIGTERM, grace=60):
        if self.alive():
            self.process.send_signal(sig)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self in _STARTED:
            _STARTED.remove(self)


def stop_everything():
    for process in reversed(list(_STARTED)):
        with contextlib.suppress(Exception):
            process.stop()


def _on_signal(signum, _frame):
    stop_everything()
    sys.exit(128 + signum)


def wait_until(what, check, deadline_s):
    deadline = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {deadline_s} s")
        time.sleep(0.1)


def listening(port):
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False


def start_moto():
    port = free_port()
    moto = Process("moto", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                            "-p", str(port)], echo=False)

    def up():
        if not moto.alive():
            _fail(f"moto exited ({moto.tail(5)}); install the test clients: "
                  "tests/bootstrap.sh (or python3 -m pip install 'moto[s3,server]')")
        return listening(port)

    wait_until("moto listens", up, START_DEADLINE)
    url = f"http://127.0.0.1:{port}"
    # moto does not check signatures: a bare request makes the bucket.
    assert httpx.put(f"{url}/{BUCKET}", timeout=TIMEOUT).status_code == 200
    return url


def _fail(message):
    raise AssertionError(message)


class Replica:
    """One `cordon serve` of the three."""

    def __init__(self, index, binary, db, objects, lease, data):
        self.index = index
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
                   AWS_REGION="us-east-1")
        args = [binary, "serve", "--addr", f"127.0.0.1:{self.port}", "--db", db,
                "--objects", objects,
                "--replica-address", self.url, "--replica-lease", lease,
                # Pausing is what the script asks for, never what idle time decides.
                "--pause-after", "off",
                "--max-sandboxes", "1000", "--max-instances", "1000",
                "--trajectories", os.path.join(data, f"trajectories-{index}")]
        self.process = Process(f"replica {index}", args, env=env, ready="listening on http://")
        if not self.process.ready.wait(START_DEADLINE) or not self.process.alive():
            raise AssertionError(f"replica {index} did not start:\n" +
                                 self.process.tail(20))
        health = httpx.get(f"{self.url}/v1/health", timeout=TIMEOUT)
        assert health.status_code == 200, health.text
        self.id = health.headers.get("x-cordon-replica")
        assert self.id, f"replica {index} names itself in x-cordon-replica: {health.headers}"

    def kill_9(self):
        self.process.process.kill()
        self.process.process.wait(30)


def start_nginx(data, replicas):
    port = free_port()
    args = nginx_config.prepare(os.path.join(data, "nginx"), f"127.0.0.1:{port}",
                                [f"127.0.0.1:{replica.port}" for replica in replicas])
    nginx = Process("nginx", [nginx_config.nginx_binary(), *args])
    url = f"http://127.0.0.1:{port}"

    def up():
        if not nginx.alive():
            _fail(f"nginx exited: {nginx.tail(10)}")
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{url}/v1/health", timeout=TIMEOUT).status_code == 200
        return False

    wait_until("nginx answers", up, START_DEADLINE)
    return nginx, url


# --- the sessions ----------------------------------------------------------------------


class Session:
    """One stateful sandbox and what the script knows it holds."""

    def __init__(self, number):
        self.number = number
        self.id = None
        self.owner = None
        self.x = number * 1000
        self.role = "loop"
        self.waiting_execution = None
        self.last_execution = None  # the latest execution started, finished or not


class Run:
    """What the workload recorded."""

    def __init__(self):
        self.committed = []  # (execution id, result, monotonic time it returned)
        self.latencies = []
        self.kill_time = None  # just before SIGKILL
        self.killed_at = None  # once the killed process is reaped
        self.victim = None


async def call(http, method, url, **kwargs):
    """One request through the proxy. A `503` with `Retry-After` (the replica it reached
    does not own what it names yet: ownership is moving, or the owner died and its lease
    has not lapsed) is tried again after that time, within a deadline, as a client would."""
    deadline = time.monotonic() + RECOVERY_DEADLINE
    while True:
        response = await http.request(method, url, **kwargs)
        if not _retry_later(response, deadline):
            return response
        await asyncio.sleep(min(float(response.headers["retry-after"]), 1.0))


def _retry_later(response, deadline):
    return (response.status_code == 503 and "retry-after" in response.headers
            and time.monotonic() < deadline)


async def execute(http, session, code):
    """Runs `code` through the proxy as an SSE stream; returns (execution id, the
    `execution.completed` event, seconds from request to that event)."""
    started = time.monotonic()
    deadline = started + RECOVERY_DEADLINE
    while True:
        async with http.stream("POST", f"/v1/sandboxes/{session.id}/executions",
                               json={"code": code},
                               headers={"accept": "text/event-stream"}) as response:
            if _retry_later(response, deadline):
                await asyncio.sleep(min(float(response.headers["retry-after"]), 1.0))
                continue
            if response.status_code != 200:
                await response.aread()
                raise AssertionError(f"execution in {session.id}: {response.status_code} "
                                     f"{response.text}")
            execution = response.headers.get("cordon-execution-id")
            session.last_execution = execution
            async for line in response.aiter_lines():
                if line.startswith("data:") and '"execution.completed"' in line:
                    return execution, json.loads(line[5:]), time.monotonic() - started
        raise AssertionError(f"the stream of {execution} ended without execution.completed")


async def step(http, session, run, record_latency=False):
    """`x += 1` once; records the result as committed when it completed."""
    execution, done, seconds = await execute(http, session, "x += 1\nx")
    assert done["status"] == "completed", done
    session.x += 1
    assert done["result"] == session.x, (session.id, done["result"], session.x)
    run.committed.append((execution, done["result"], time.monotonic()))
    if record_latency:
        run.latencies.append(seconds)


async def open_session(http, session, run):
    created = await call(http, "POST", "/v1/sandboxes", json=SANDBOX)
    assert created.status_code == 201, created.text
    session.id = created.json()["id"]
    session.owner = created.headers.get("x-cordon-replica")
    assert session.owner, created.headers
    execution, done, _ = await execute(http, session, f"x = {session.x}\nx")
    assert done["status"] == "completed" and done["result"] == session.x, done
    run.committed.append((execution, done["result"], time.monotonic()))


async def loop_until_killed(http, session, run, killed, steps_before_kill):
    """Executions back to back until the kill has happened and a few more ran. A session
    of the killed replica stops at its first failure after the kill; a request in flight
    across the kill may fail (it may have passed through the dying replica) but any
    started after it must succeed."""
    done_after_kill = 0
    while done_after_kill < 3:
        started = time.monotonic()
        try:
            await step(http, session, run)
        except (AssertionError, httpx.HTTPError) as error:
            if session.owner == run.victim and run.kill_time is not None:
                return
            # Started before the killed process was gone: it may have reached it.
            if run.kill_time is not None and (run.killed_at is None or started < run.killed_at):
                print(f"replicas: in flight across the kill, retried: {error!r}",
                      file=sys.stderr)
                # Its effect on `x` is unknown: read it back.
                _, done, _ = await execute(http, session, "x")
                session.x = done["result"]
                continue
            raise
        steps_before_kill.set()
        if killed.is_set():
            done_after_kill += 1


# --- the scenario ----------------------------------------------------------------------


async def scenario(args, replicas, proxy, report):
    run = Run()
    limits = httpx.Limits(max_connections=args.sessions * 2 + 16,
                          max_keepalive_connections=args.sessions * 2 + 16)
    async with httpx.AsyncClient(base_url=proxy, timeout=TIMEOUT, limits=limits) as http:
        sessions = [Session(number) for number in range(args.sessions)]
        await asyncio.gather(*(open_session(http, session, run) for session in sessions))

        # Phase 1 (measured): every session runs its executions back to back, through
        # nginx (or, for comparison, `--direct` to the replica that holds it).
        direct = {replica.id: httpx.AsyncClient(base_url=replica.url, timeout=TIMEOUT,
                                                limits=limits) for replica in replicas}
        try:
            began = time.monotonic()
            await asyncio.gather(*(_steps(direct[session.owner] if args.direct else http,
                                          session, run, args.executions)
                                   for session in sessions))
            elapsed = time.monotonic() - began
        finally:
            for client in direct.values():
                await client.aclose()
        if report:
            report_figures(args, len(run.latencies), elapsed, run.latencies)

        # Phase 2: roles per replica, so the one killed has some of each.
        by_owner = {}
        for session in sessions:
            by_owner.setdefault(session.owner, []).append(session)
        assert set(by_owner) <= {replica.id for replica in replicas}, by_owner.keys()
        for owned in by_owner.values():
            for index, session in enumerate(owned):
                session.role = ("paused", "waiting", "loop")[index % 3]
        victim = max(replicas, key=lambda replica: len(by_owner.get(replica.id, [])))
        victims = by_owner.get(victim.id, [])
        assert {"paused", "waiting", "loop"} <= {s.role for s in victims}, \
            f"the replica to kill owns {len(victims)} sessions; run more sessions"
        run.victim = victim.id

        for session in sessions:
            if session.role == "paused":
                paused = await call(http, "POST", f"/v1/sandboxes/{session.id}/pause")
                assert paused.status_code == 200, paused.text
                assert paused.json()["state"] == "paused", paused.json()
                assert paused.json()["paused_bytes"] > 0, paused.json()
                # Twice is the same answer.
                again = await call(http, "POST", f"/v1/sandboxes/{session.id}/pause")
                assert again.status_code == 200 and again.json()["state"] == "paused", again.text
                shown = await call(http, "GET", f"/v1/sandboxes/{session.id}")
                assert shown.status_code == 200 and shown.json()["state"] == "paused", shown.text
        for session in sessions:
            if session.role == "waiting":
                created = await call(http, "POST", f"/v1/sandboxes/{session.id}/executions",
                                     json={"code": WAITING_CODE})
                assert created.status_code == 201, created.text
                session.waiting_execution = created.json()["id"]
        for session in sessions:
            if session.role == "waiting":
                await wait_awaiting(http, session.waiting_execution)

        # Phase 3: the loops run, one replica dies under them, the loops go on.
        killed = asyncio.Event()
        stepped = [asyncio.Event() for _ in sessions]
        loops = [asyncio.create_task(loop_until_killed(http, s, run, killed, stepped[i]))
                 for i, s in enumerate(sessions) if s.role == "loop"]
        await asyncio.wait_for(asyncio.gather(*(stepped[i].wait() for i, s in
                                                enumerate(sessions) if s.role == "loop")),
                               RECOVERY_DEADLINE)
        run.kill_time = time.monotonic()
        victim.kill_9()
        run.killed_at = time.monotonic()
        killed.set()
        print(f"replicas: killed replica {victim.index} ({victim.id}) owning "
              f"{len(victims)} sessions", file=sys.stderr)
        await asyncio.wait_for(asyncio.gather(*loops), RECOVERY_DEADLINE)

        await check_after_kill(http, sessions, run)


async def _steps(http, session, run, count):
    for _ in range(count):
        await step(http, session, run, record_latency=True)


async def wait_awaiting(http, execution):
    """Until the execution waits for its client tool; returns the pending call's id."""
    deadline = time.monotonic() + START_DEADLINE
    while True:
        shown = (await call(http, "GET", f"/v1/executions/{execution}")).json()
        assert shown["status"] == "running", shown
        if shown["pending_tool_calls"]:
            return shown["pending_tool_calls"][0]["id"]
        assert time.monotonic() < deadline, f"{execution} never called its tool"
        await asyncio.sleep(0.1)


async def check_after_kill(http, sessions, run):
    # Every execution that was running in the killed replica ends `interrupted`, with a
    # final event saying so.
    for session in sessions:
        if session.role != "waiting":
            continue
        if session.owner == run.victim:
            shown = await wait_status(http, session.waiting_execution, "interrupted")
            last = shown["events"][-1]
            assert last["type"] == "execution.completed", last
            assert last["status"] == "interrupted", last
        else:
            # A survivor's execution waits on, untouched: answered through the proxy, it
            # completes with the answer.
            call_id = await wait_awaiting(http, session.waiting_execution)
            answered = await call(
                http, "POST", f"/v1/executions/{session.waiting_execution}/tool_results",
                json={"results": [{"call_id": call_id, "output": session.number,
                                   "is_error": False}]})
            assert answered.status_code == 200, answered.text
            shown = await wait_status(http, session.waiting_execution, "completed")
            assert shown["result"]["result"] == session.number, shown["result"]

    # The killed replica's live sandboxes died with it: `interrupted`, saying why. The
    # execution each was running when the replica died (if any) ended `interrupted`
    # unless it had completed just before.
    committed_ids = {entry[0] for entry in run.committed}
    for session in sessions:
        if session.role == "loop" and session.owner == run.victim:
            shown = await wait_sandbox_state(http, session.id, "interrupted")
            assert shown.get("reason"), shown
            if session.last_execution not in committed_ids:
                ended = await wait_ended(http, session.last_execution)
                assert ended["status"] in ("interrupted", "completed"), ended

    # No committed record is lost.
    committed = [entry for entry in run.committed if entry[2] < run.kill_time]
    assert committed, "nothing completed before the kill"
    for execution, result, _ in committed:
        shown = await call(http, "GET", f"/v1/executions/{execution}")
        assert shown.status_code == 200, shown.text
        body = shown.json()
        assert body["status"] == "completed", body
        assert body["result"]["result"] == result, (execution, body["result"], result)

    # Every paused sandbox resumes through the proxy with its variables: the killed
    # replica's (the point) and the survivors' alike.
    resumed = 0
    for session in sessions:
        if session.role != "paused":
            continue
        response = await call(http, "POST", f"/v1/sandboxes/{session.id}/resume")
        assert response.status_code == 200, response.text
        assert response.json()["state"] == "live", response.json()
        _, done, _ = await execute(http, session, "x")
        assert done["status"] == "completed" and done["result"] == session.x, \
            (session.id, done, session.x)
        await step(http, session, run)
        resumed += session.owner == run.victim
    assert resumed > 0

    # The service goes on: a new session works through the proxy.
    fresh = Session(10**6)
    await open_session(http, fresh, run)
    await step(http, fresh, run)
    print(f"replicas: {len(committed)} committed executions read back; {resumed} paused "
          f"sandboxes of the killed replica resumed; its "
          f"{sum(s.role == 'waiting' and s.owner == run.victim for s in sessions)} running "
          f"executions ended interrupted", file=sys.stderr)


async def wait_status(http, execution, status):
    """Until the execution ends; it must end with `status`."""
    shown = await wait_ended(http, execution)
    assert shown["status"] == status, (status, shown)
    return shown


async def wait_ended(http, execution):
    """Until the execution is no longer `running` (bounded); returns it."""
    deadline = time.monotonic() + RECOVERY_DEADLINE
    while True:
        response = await call(http, "GET", f"/v1/executions/{execution}")
        assert response.status_code == 200, response.text
        shown = response.json()
        if shown["status"] != "running":
            return shown
        assert time.monotonic() < deadline, f"{execution} is still running"
        await asyncio.sleep(0.2)


async def wait_sandbox_state(http, sandbox, state):
    deadline = time.monotonic() + RECOVERY_DEADLINE
    while True:
        response = await call(http, "GET", f"/v1/sandboxes/{sandbox}")
        assert response.status_code == 200, response.text
        shown = response.json()
        if shown["state"] == state:
            return shown
        assert shown["state"] == "live", (state, shown)
        assert time.monotonic() < deadline, f"{sandbox} is still {shown['state']}"
        await asyncio.sleep(0.2)


def report_figures(args, executions, seconds, latencies):
    ordered = sorted(latencies)

    def percentile(p):
        return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] * 1000

    path = "directly to each session's replica" if args.direct else "through nginx"
    print(f"replicas: {args.sessions} sessions x {args.executions} executions {path} "
          f"({REPLICAS} replicas): {executions} executions in {seconds:.2f} s = "
          f"{executions / seconds:.1f} executions/s; latency p50 {percentile(50):.1f} ms, "
          f"p90 {percentile(90):.1f} ms, p99 {percentile(99):.1f} ms, max "
          f"{ordered[-1] * 1000:.1f} ms, mean {statistics.mean(latencies) * 1000:.1f} ms",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cordon", default=os.environ.get("CORDON_BIN"), required=False)
    parser.add_argument("--db", required=True, help="a PostgreSQL URL (an empty database)")
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--executions", type=int, default=5,
                        help="executions per session in the measured phase")
    parser.add_argument("--lease", default="1s",
                        help="--replica-lease of the replicas: a replica whose heartbeat is "
                             "older is dead to the others")
    parser.add_argument("--report", action="store_true",
                        help="print throughput and latency of the measured phase")
    parser.add_argument("--direct", action="store_true",
                        help="measure without nginx: each session's executions go to the "
                             "replica that holds it (the comparison for --report)")
    args = parser.parse_args()
    if not args.cordon:
        parser.error("--cordon PATH (or CORDON_BIN) is required")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    with tempfile.TemporaryDirectory(prefix="cordon-replicas-") as data:
        try:
            moto = start_moto()
            objects = (f"s3://{BUCKET}/replicas?endpoint={moto}&region=us-east-1"
                       f"&allow_http=true")
            replicas = [Replica(index, args.cordon, args.db, objects, args.lease, data)
                        for index in range(REPLICAS)]
            assert len({replica.id for replica in replicas}) == REPLICAS
            _, proxy = start_nginx(data, replicas)
            asyncio.run(scenario(args, replicas, proxy, args.report))
        finally:
            stop_everything()
    print("replicas: ok", file=sys.stderr)


if __name__ == "__main__":
    main()
