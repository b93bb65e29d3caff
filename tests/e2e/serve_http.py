"""Helpers the scripts that drive `cordon serve` over its HTTP API share, so each check
means the same thing in every script. Imported by name: python puts the running
script's directory (`tests/e2e`) first on `sys.path`, as for `pages.py`.
"""

import time


def check_error(response, status, error_type):
    """`response` is the typed error the API promises: `status`, `type` and a message."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["type"] == error_type, body
    assert isinstance(body["message"], str) and body["message"], body
    return body


def run(http, sandbox, code, polls=1200):
    """Runs `code` in the sandbox and returns its result, polling the execution every
    50 ms until it ends; fails after `polls` polls so a hang cannot block the script."""
    response = http.post(f"/v1/sandboxes/{sandbox}/executions", json={"code": code})
    assert response.status_code == 201, response.text
    execution = response.json()["id"]
    for _ in range(polls):
        info = http.get(f"/v1/executions/{execution}").json()
        if info["status"] != "running":
            return info["result"]
        time.sleep(0.05)
    raise AssertionError(f"execution {execution} did not end")
