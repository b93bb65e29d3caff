"""Hostile checks: one client cannot hold more sandboxes or workspace memory than the
server's caps (`--max-sandboxes`, `--max-workspace-bytes-total`), and the server keeps
serving the sandboxes it has.

Usage:
  python3 capacity.py sandboxes BASE_URL MAX        # a server started with --max-sandboxes MAX
  python3 capacity.py bytes BASE_URL TOTAL          # ... with --max-workspace-bytes-total TOTAL
Exits non-zero on the first failed check; every request and wait is bounded.
"""

import sys
import time

import httpx

from serve_http import check_error, run

TIMEOUT = httpx.Timeout(60.0)


def create(http, **body):
    body.setdefault("language", "python-lite")
    return http.post("/v1/sandboxes", json=body)


def created(response):
    assert response.status_code == 201, response.text
    return response.json()["id"]


def still_serves(http, sandboxes):
    """Every sandbox listed still runs code and takes files."""
    for sandbox in sandboxes:
        result = run(http, sandbox, "6 * 7")
        assert result["status"] == "completed" and result["result"] == 42, result
        put = http.put(f"/v1/sandboxes/{sandbox}/files/still.txt", content=b"here")
        assert put.status_code == 201, put.text


def scenario_sandboxes(base, maximum):
    maximum = int(maximum)
    with httpx.Client(base_url=base, timeout=TIMEOUT) as http:
        live = [created(create(http, stateful=i % 2 == 1)) for i in range(maximum)]
        # One too many, in every shape: refused with a type and a way out, nothing made.
        for extra in [{}, {"stateful": True}, {"limits": {"workspace_bytes": 1}}]:
            body = check_error(create(http, **extra), 503, "too_many_sandboxes")
            message = body["message"]
            assert str(maximum) in message and "--max-sandboxes" in message, message
            assert "DELETE /v1/sandboxes/" in message, message
        still_serves(http, live)
        # Deleting one frees its place, once: the next create fits, the one after does not.
        assert http.delete(f"/v1/sandboxes/{live.pop(0)}").status_code == 204
        live.append(created(create(http)))
        check_error(create(http), 503, "too_many_sandboxes")
        # An expired sandbox frees its place too (the reaper looks every few seconds).
        assert http.delete(f"/v1/sandboxes/{live.pop()}").status_code == 204
        short = created(create(http, ttl_seconds=1))
        check_error(create(http), 503, "too_many_sandboxes")
        deadline = time.monotonic() + 60
        while True:
            response = create(http)
            if response.status_code == 201:
                live.append(response.json()["id"])
                break
            check_error(response, 503, "too_many_sandboxes")
            assert time.monotonic() < deadline, "the expired sandbox never freed its place"
            time.sleep(0.5)
        check_error(http.get(f"/v1/sandboxes/{short}/files"), 410, "sandbox_expired")
        still_serves(http, live)
        # A flood of refused creates leaves the server serving.
        for _ in range(50):
            check_error(create(http), 503, "too_many_sandboxes")
        still_serves(http, live)
        assert http.get("/v1/health").status_code == 200


def scenario_bytes(base, total):
    total = int(total)
    third = total // 3
    with httpx.Client(base_url=base, timeout=TIMEOUT) as http:
        # More than the whole server holds can never fit: a 422 that names the flag.
        body = check_error(create(http, limits={"workspace_bytes": total + 1}), 422, "invalid_request")
        assert "--max-workspace-bytes-total" in body["message"], body
        a = created(create(http, limits={"workspace_bytes": third}))
        b = created(create(http, stateful=True, limits={"workspace_bytes": third}))
        # What is left is total - 2 * third: one byte more is refused, that much fits.
        left = total - 2 * third
        body = check_error(create(http, limits={"workspace_bytes": left + 1}), 503, "workspace_budget_exhausted")
        message = body["message"]
        assert "--max-workspace-bytes-total" in message and str(total) in message, message
        assert "DELETE /v1/sandboxes/" in message, message
        c = created(create(http, limits={"workspace_bytes": left}))
        check_error(create(http, limits={"workspace_bytes": 1}), 503, "workspace_budget_exhausted")
        # The sandboxes that fit hold what they declared, and keep working.
        fill = http.put(f"/v1/sandboxes/{a}/files/fill.bin", content=b"x" * (third - 10))
        assert fill.status_code == 201, fill.text
        still_serves(http, [a, b, c])
        # Deleting one gives its bytes back.
        assert http.delete(f"/v1/sandboxes/{b}").status_code == 204
        d = created(create(http, limits={"workspace_bytes": third}))
        check_error(create(http, limits={"workspace_bytes": 1}), 503, "workspace_budget_exhausted")
        still_serves(http, [a, c, d])
        assert http.get("/v1/health").status_code == 200


SCENARIOS = {"sandboxes": scenario_sandboxes, "bytes": scenario_bytes}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    print(f"ok {sys.argv[1]}")
