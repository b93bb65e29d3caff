"""The few HTTP calls the adapters share (``cordon serve``'s API, docs/http-api.md)."""

from __future__ import annotations

import os
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:7420"


class CordonError(RuntimeError):
    """An HTTP error from Cordon: ``status``, ``type`` (machine-readable) and the message,
    which says what was wrong and what to do."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(f"{status} {kind}: {message}")
        self.status = status
        self.type = kind
        self.message = message


def base_url(url: str | None) -> str:
    return (url or os.environ.get("CORDON_URL") or DEFAULT_URL).rstrip("/")


def headers(token: str | None) -> dict[str, str]:
    token = token or os.environ.get("CORDON_TOKEN")
    return {"authorization": f"Bearer {token}"} if token else {}


def check(response: httpx.Response) -> Any:
    """The JSON body of a success; raises :class:`CordonError` otherwise."""
    if response.status_code >= 400:
        try:
            body = response.json()
            raise CordonError(response.status_code, body.get("type", "error"), body.get("message", ""))
        except ValueError:
            raise CordonError(response.status_code, "error", response.text) from None
    if response.status_code == 204 or not response.content:
        return None
    return response.json()
