"""`cordon bench --policy upstream` against the stand-in model server (standin_model.py).

Usage: python3 bench_upstream.py --cordon PATH/TO/cordon [--upstream-api API]. The stand-in
plays a model that clicks beside the card of the built-in `drag` task, then drags it into
its box. The run must succeed, and the model must have been sent the task's prompt, the
computer tool at the episode's display size, and the screenshot after its action as the
tool's result. The bench process is killed if it outlives its timeout.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from standin_model import StandinModel, reply, tool_use

UPSTREAM_PATH = {"anthropic": ""}
BROWSER_FLAGS = ["--no-browser-sandbox"] if os.geteuid() == 0 else []


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cordon", default=os.environ.get("CORDON_BIN"))
    parser.add_argument("--upstream-api", default="anthropic", choices=sorted(UPSTREAM_PATH))
    args = parser.parse_args()
    drag = {"action": "left_click_drag", "start_coordinate": [200, 280], "coordinate": [640, 320]}
    with StandinModel() as model, tempfile.TemporaryDirectory(prefix="cordon-bench-") as tmp:
        # A click that solves nothing, then the drag (the page is solved: no third turn).
        model.push(reply(tool_use("computer", {"action": "left_click", "coordinate": [10, 10]})),
                   reply(tool_use("computer", drag)))
        out = os.path.join(tmp, "run")
        upstream = f"{args.upstream_api}={model.url}{UPSTREAM_PATH[args.upstream_api]}"
        done = subprocess.run(
            [args.cordon, "bench", *BROWSER_FLAGS, "--suite", "builtin", "--task", "drag", "--policy",
             "upstream", "--upstream", upstream, "--model", "standin-1", "--out", out],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
        print(done.stdout, done.stderr, file=sys.stderr)
        assert done.returncode == 0, done.returncode
        with open(os.path.join(out, "results.json")) as f:
            run = json.load(f)
        episode = run["episodes"][0]
        assert run["policy"] == "upstream" and episode["success"] and episode["steps"] == 2, episode
        assert episode["trace"][1]["marks"][0]["model"] == [200, 280], episode["trace"][1]
        assert len(model.requests) == 2, model.requests
        first, second = (r.body for r in model.requests)
        text = json.dumps(first)
        assert "Drag the blue card" in text, text[:2000]
        assert "image" in text or "image_url" in text, text[:2000]
        tools = json.dumps(first.get("tools"))
        assert "1024" in tools and "640" in tools, tools
        # The second turn carries the tool's result: the screenshot after the drag.
        last = json.dumps(second["messages"][-1] if "messages" in second else second.get("input", [])[-1])
        assert "iVBOR" in last, last[:2000]
        assert not model.unexpected, model.unexpected
    print("bench upstream: ok", file=sys.stderr)


if __name__ == "__main__":
    main()
