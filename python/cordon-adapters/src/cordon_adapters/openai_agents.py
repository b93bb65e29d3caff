"""An OpenAI Agents SDK ``AsyncComputer`` backed by a Cordon computer session.

    from agents import Agent, ComputerTool
    from cordon_adapters.openai_agents import CordonComputer

    async with CordonComputer("https://example.com/", allow_origins=["https://example.com"]) as computer:
        agent = Agent(name="browser", tools=[ComputerTool(computer=computer)], ...)

Every action goes to ``POST /v1/computers/{id}/actions`` in OpenAI's own shape; Cordon maps
the coordinates from the screenshot the model saw to the page exactly (any DPR), runs its
approval gates, waits for the page to settle and returns the next screenshot, which
:meth:`CordonComputer.screenshot` hands back without another capture.
"""

from __future__ import annotations

from typing import Any, Callable

import httpx
from agents import AsyncComputer

from .client import base_url, check, headers

Approver = Callable[[dict], bool]


class CordonComputer(AsyncComputer):
    """A browser session on a Cordon server, as the Agents SDK's computer.

    ``url`` is the start page; ``display`` the screenshot size the model sees (its
    coordinates are in that space); ``viewport`` and ``dpr`` the page's; ``allow_origins``
    where the session may go (empty: anywhere not blocked). A step that Cordon's gates stop
    for approval is decided by ``approve(pending_approval)`` (default: approve everything;
    pass ``lambda p: False`` to refuse). ``last_error`` keeps the last model-visible error
    (an action Cordon refused), which the SDK's computer interface has no channel for.
    """

    def __init__(
        self,
        url: str,
        *,
        cordon_url: str | None = None,
        token: str | None = None,
        display: str = "1024x640",
        viewport: str = "1280x800",
        dpr: int = 1,
        allow_origins: list[str] | None = None,
        rules: list | None = None,
        approve: Approver | None = None,
        timeout: float = 60.0,
    ):
        self._base = base_url(cordon_url)
        self._http = httpx.AsyncClient(base_url=self._base, headers=headers(token), timeout=timeout)
        self._setup: dict[str, Any] = {"url": url, "display": display, "viewport": viewport, "dpr": dpr,
                                       "image_format": "png"}
        if allow_origins:
            self._setup["allow_origins"] = allow_origins
        if rules is not None:
            self._setup["rules"] = rules
        self._approve = approve or (lambda pending: True)
        width, height = (int(v) for v in display.lower().split("x"))
        self._dimensions = (width, height)
        self.id: str | None = None
        self.current_url: str | None = None
        self.last_error: str | None = None
        self.steps: list[dict] = []
        self._screenshot: str | None = None

    # --- lifecycle ----------------------------------------------------------------------

    async def open(self) -> "CordonComputer":
        """Opens the session (done on first use too)."""
        if self.id is None:
            created = check(await self._http.post("/v1/computers", json=self._setup))
            self.id = created["id"]
            self.current_url = created.get("current_url")
            self._screenshot = created["screenshot"]["data"]
        return self

    async def close(self) -> None:
        """Closes the session (its browser context, cookies and storage go with it)."""
        if self.id is not None:
            check(await self._http.delete(f"/v1/computers/{self.id}"))
            self.id = None
        await self._http.aclose()

    async def __aenter__(self) -> "CordonComputer":
        return await self.open()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- AsyncComputer --------------------------------------------------------------------

    @property
    def environment(self):
        return "browser"

    @property
    def dimensions(self) -> tuple[int, int]:
        return self._dimensions

    async def _act(self, action: dict) -> dict:
        await self.open()
        step = check(await self._http.post(f"/v1/computers/{self.id}/actions",
                                           json={"format": "openai", "actions": [action]}))
        # Cordon's gates stopped the step before a risky action: decide, and the step goes on.
        while step.get("status") == "approval_required":
            pending = step["pending_approval"]
            decision = "approve" if self._approve(pending) else "deny"
            decided = check(await self._http.post(f"/v1/approvals/{pending['approval_id']}",
                                                  json={"decision": decision}))
            step = decided["step"]
        self.steps.append({k: v for k, v in step.items() if k != "screenshot"})
        self.last_error = step.get("error")
        self.current_url = step.get("current_url") or self.current_url
        if step.get("screenshot"):
            self._screenshot = step["screenshot"]["data"]
        return step

    async def screenshot(self) -> str:
        await self.open()
        if self._screenshot is None:
            await self._act({"type": "screenshot"})
        shot, self._screenshot = self._screenshot, None
        return shot or ""

    async def click(self, x: int, y: int, button: str = "left") -> None:
        await self._act({"type": "click", "x": x, "y": y, "button": button})

    async def double_click(self, x: int, y: int) -> None:
        await self._act({"type": "double_click", "x": x, "y": y})

    async def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int) -> None:
        await self._act({"type": "scroll", "x": x, "y": y, "scroll_x": scroll_x, "scroll_y": scroll_y})

    async def type(self, text: str) -> None:
        await self._act({"type": "type", "text": text})

    async def wait(self) -> None:
        await self._act({"type": "wait"})

    async def move(self, x: int, y: int) -> None:
        await self._act({"type": "move", "x": x, "y": y})

    async def keypress(self, keys: list[str]) -> None:
        await self._act({"type": "keypress", "keys": list(keys)})

    async def drag(self, path: list[tuple[int, int]]) -> None:
        await self._act({"type": "drag", "path": [{"x": x, "y": y} for x, y in path]})
