"""A Gymnasium ``Env`` over Cordon's benchmark environments (``/v1/envs``, docs/bench.md).

    import gymnasium as gym
    from cordon_adapters.gym import CordonEnv

    env = CordonEnv(task="form")                 # a built-in task, or a task object
    obs, info = env.reset(seed=0)                # obs["screenshot"]: H x W x 3 uint8
    obs, reward, terminated, truncated, info = env.step(
        {"action": "left_click", "coordinate": [360, 80]})

Each episode is an isolated browser session of the server's Chromium. The reward is read
by Cordon from the page (the task's JavaScript predicate or DOM query), never from the
agent. An action is one model call in its vendor's shape: an Anthropic computer action
(a dict, or its JSON text), or ``{"format": "openai"|"gemini"|"native", "actions": [...]}``.
A malformed action is not an exception: the step's ``info["status"]`` is ``"error"`` and
``info["error"]`` says why, as a model would be told.
"""

from __future__ import annotations

import base64
import io
import json
import string
from typing import Any

import gymnasium as gym
import httpx
import numpy as np
from gymnasium import spaces

from .client import base_url, check, headers

_URL_CHARS = string.printable


def _decode(screenshot: dict | None, shape: tuple[int, int, int]) -> np.ndarray:
    if not screenshot:
        return np.zeros(shape, dtype=np.uint8)
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(screenshot["data"]))).convert("RGB")
    return np.asarray(image, dtype=np.uint8)


class CordonEnv(gym.Env):
    """One Cordon benchmark environment as a Gymnasium ``Env``.

    ``task`` is a built-in task's id (``GET /v1/envs/tasks``) or a web task object with a
    ``url`` (docs/bench.md); ``dpr`` 1 or 2. Observations are
    ``{"screenshot": uint8[H, W, 3], "url": str}``; ``info`` carries the step's status,
    error, gate decisions, marks (model and screen coordinates) and timings.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, task: str | dict = "form", *, cordon_url: str | None = None,
                 token: str | None = None, dpr: int | None = None, render_mode: str | None = None,
                 timeout: float = 120.0):
        self._http = httpx.Client(base_url=base_url(cordon_url), headers=headers(token), timeout=timeout)
        self.task = task
        self.dpr = dpr
        self.render_mode = render_mode
        self.id: str | None = None
        self.prompt: str | None = None
        self._last: np.ndarray | None = None
        # The display is known once the first environment opens; 1024x640 is Cordon's default.
        self._shape = (640, 1024, 3)
        self.observation_space = spaces.Dict({
            "screenshot": spaces.Box(0, 255, self._shape, dtype=np.uint8),
            "url": spaces.Text(max_length=4096, charset=_URL_CHARS),
        })
        self.action_space = spaces.Text(max_length=100_000, charset=string.printable)

    def _observation(self, body: dict) -> dict:
        shot = body.get("screenshot")
        if shot:
            self._shape = (shot["height"], shot["width"], 3)
            self.observation_space["screenshot"] = spaces.Box(0, 255, self._shape, dtype=np.uint8)
            self._last = _decode(shot, self._shape)
        elif self._last is None:
            self._last = np.zeros(self._shape, dtype=np.uint8)
        return {"screenshot": self._last, "url": body.get("url") or ""}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        if self.id is None or "task" in options:
            if self.id is not None:
                self.close()
            body: dict[str, Any] = {"task": options.get("task", self.task), "seed": seed or 0}
            if self.dpr:
                body["dpr"] = self.dpr
            created = check(self._http.post("/v1/envs", json=body))
            self.id = created["id"]
        else:
            created = check(self._http.post(f"/v1/envs/{self.id}/reset",
                                            json={} if seed is None else {"seed": seed}))
        self.prompt = created.get("prompt")
        info = {"prompt": self.prompt, "task": created.get("task"), "max_steps": created.get("max_steps"),
                "screen": created.get("screen"), "env_id": self.id}
        return self._observation(created["observation"]), info

    def step(self, action):
        if self.id is None:
            raise RuntimeError("call reset() before step()")
        if isinstance(action, str):
            action = json.loads(action)
        if isinstance(action, dict) and "actions" in action:
            body = action
        else:
            body = {"format": "anthropic", "actions": [action]}
        out = check(self._http.post(f"/v1/envs/{self.id}/step", json=body))
        info = dict(out["info"])
        truncated = bool(out.get("truncated"))
        terminated = bool(out["done"]) and not truncated
        return self._observation(out["observation"]), float(out["reward"]), terminated, truncated, info

    def evaluate(self) -> float:
        """The reward read from the page now."""
        return float(check(self._http.post(f"/v1/envs/{self.id}/evaluate"))["reward"])

    def render(self):
        return self._last

    def close(self):
        if self.id is not None:
            try:
                check(self._http.delete(f"/v1/envs/{self.id}"))
            finally:
                self.id = None
        super().close()
