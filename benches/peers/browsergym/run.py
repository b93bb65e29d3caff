"""BrowserGym's own MiniWoB++ environment on the task types, seed count and scripted policy
of Cordon's MiniWoB++ bench (harness/agent-bench/benches/miniwob.rs), for the side-by-side
figures in docs/benchmarks.md ("MiniWoB++", "BrowserGym, run for real").

    PREFIX/venv/bin/python benches/peers/browsergym/run.py [--prefix PREFIX] [--seeds 10]
        [--jobs 1,4] [--binary headless-shell,chromium] [--json OUT]
        [--pre-observation-delay S] [--slow-mo MS]

PREFIX is where setup.sh installed the venv and the Playwright browser folders (default
$BROWSERGYM_HOME, else ~/.cache/cordon-peers/browsergym). The environment is BrowserGym's,
unmodified: `gymnasium.make("browsergym/miniwob.<task>")` with its defaults (a new browser
and chat browser per reset, 100 ms slow_mo, 0.5 s pre-observation delay, the full
observation: DOM snapshot, accessibility tree, screenshot at 1.5x). `--pre-observation-delay`
and `--slow-mo` set BrowserGym's own constructor arguments for a second measurement.

Per episode: `env.reset(seed=s)`, then until `terminated`: the planner Cordon's scripted
solver uses (parsed from harness/agent-bench/src/miniwob/solver.rs) runs in the page
through `env.unwrapped.page.evaluate`, and its action goes through BrowserGym's action
space (HighLevelActionSet(subsets=["coord"])): `mouse_click(x, y)` at the element's
centre in screenshot coordinates, `keyboard_type(text)`, `keyboard_press("Control+a")`.
So every timed step is BrowserGym's (action, waits, validation, observation extraction).
Success is reward > 0 at the end. JOBS at once are JOBS processes, each with its own envs,
taking (task, seed) episodes from one queue; episodes/min counts the wall time from
starting the workers (imports and `gymnasium.make` included) to the last episode's end.

Seeds: BrowserGym's task draws `Math.seedrandom(RandomState(seed).randint(0, 1000000))`
(browsergym/miniwob/base.py), where MiniWoB++'s Python and Cordon run
`Math.seedrandom(seed)`, so seed s is another instance of the same task type here.
"""

import argparse
import functools
import http.server
import importlib.util
import json
import logging
import multiprocessing as mp
import os
import re
import socketserver
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SOLVER = REPO / "harness/agent-bench/src/miniwob/solver.rs"
BENCH = REPO / "harness/agent-bench/benches/miniwob.rs"
BINARIES = ("headless-shell", "chromium")
# The step cap of the bench's MiniWoB++ tasks (Cordon's task definition, `max_steps`).
MAX_STEPS = 50


def rust_string(literal: str) -> str:
    """The value of a Rust string literal's body (the escapes solver.rs uses)."""
    out, i = [], 0
    while i < len(literal):
        c = literal[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = literal[i + 1]
        if nxt == "\n":  # line continuation: skip the newline and the next line's indent
            i += 2
            while i < len(literal) and literal[i] in " \t\n":
                i += 1
            continue
        out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}[nxt])
        i += 2
    return "".join(out)


STRING = r'"((?:[^"\\]|\\.)*)"'


def planners() -> dict[str, str]:
    """Cordon's scripted planners, as `solver::planner` builds them: an expression whose
    value is the next action in CSS px, null when the episode is over."""
    source = SOLVER.read_text()
    prelude = re.search(r"const PRELUDE: &str = " + STRING + ";", source, re.S)
    table = re.search(r"const PLANNERS: &\[\(&str, &str\)\] = &\[(.*?)\n\];", source, re.S)
    if not prelude or not table:
        sys.exit(f"cannot read the planners from {SOLVER}")
    prelude = rust_string(prelude.group(1))
    found = {}
    for name, body in re.findall(r"\(\s*" + STRING + r",\s*" + STRING + r",?\s*\)", table.group(1), re.S):
        found[rust_string(name)] = f"(() => {{ {prelude} {rust_string(body)} }})()"
    return found


def bench_tasks() -> list[str]:
    """The task types of Cordon's bench (its `TASKS` constant)."""
    table = re.search(r"const TASKS: &\[&str\] = &\[(.*?)\];", BENCH.read_text(), re.S)
    if not table:
        sys.exit(f"cannot read TASKS from {BENCH}")
    return re.findall(r'"([^"]+)"', table.group(1))


def default_html() -> Path:
    """MiniWoB++ 1.1.0's pages: Cordon's cache if it holds them, else the venv's copy."""
    cache = Path(os.environ.get("CORDON_CACHE_DIR", Path.home() / ".cache/cordon"))
    cached = cache / "miniwob/miniwob-1.1.0/html"
    if (cached / "core/core.js").is_file():
        return cached
    # Installed by setup.sh without its dependencies: locate it without importing it.
    spec = importlib.util.find_spec("miniwob")
    if spec is None or spec.origin is None:
        sys.exit("no MiniWoB++ pages: run setup.sh, or pass --html")
    return Path(spec.origin).parent / "html"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(html: Path) -> tuple[socketserver.ThreadingTCPServer, str]:
    server = socketserver.ThreadingTCPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(html))
    )
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/miniwob/"


def to_action(plan: dict, scale: float) -> str | None:
    """The planner's action in BrowserGym's coord action space (screenshot coordinates)."""
    if "click" in plan:
        x, y = plan["click"]
        return f"mouse_click({x * scale:.1f}, {y * scale:.1f})"
    if "type" in plan:
        return f"keyboard_type({json.dumps(plan['type'])})"
    if plan.get("key") == "ctrl+a":
        return 'keyboard_press("Control+a")'
    return None


class LaunchClock:
    """Time spent in Playwright's BrowserType.launch and Browser.close (BrowserGym's reset
    closes the last episode's two browsers and launches two new ones). Wraps the calls
    to time them; what they do is unchanged."""

    def __init__(self):
        from playwright.sync_api import Browser, BrowserType

        self.seconds = 0.0
        self.launches = 0
        for cls, name in ((BrowserType, "launch"), (Browser, "close")):
            setattr(cls, name, self.timed(getattr(cls, name), name == "launch"))

    def timed(self, call, counts):
        @functools.wraps(call)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
                self.launches += counts

        return wrapper

    def take(self) -> tuple[float, int]:
        taken = (self.seconds, self.launches)
        self.seconds, self.launches = 0.0, 0
        return taken


def worker(queue, results, config):
    """One process, one env per task type it meets; episodes until the queue is empty."""
    started = time.perf_counter()
    import gymnasium as gym
    import browsergym.miniwob  # noqa: F401 (registers the tasks)
    from browsergym.core.action.highlevel import HighLevelActionSet

    actions = HighLevelActionSet(subsets=["coord"], strict=False, multiaction=False)
    kwargs = {"headless": True, "action_mapping": actions.to_python_code}
    if config["pre_observation_delay"] is not None:
        kwargs["pre_observation_delay"] = config["pre_observation_delay"]
    if config["slow_mo"] is not None:
        kwargs["slow_mo"] = config["slow_mo"]
    clock = LaunchClock()
    # --slow-mo logs BrowserGym's "Overriding the task's slow_mo" warning on every reset.
    logging.getLogger("browsergym.core.env").setLevel(logging.ERROR)
    results.put({"kind": "import", "seconds": time.perf_counter() - started})
    envs = {}
    while True:
        item = queue.get()
        if item is None:
            break
        task, seed = item
        record = {"kind": "episode", "task": task, "seed": seed, "steps": [], "error": None}
        try:
            if task not in envs:
                t = time.perf_counter()
                envs[task] = gym.make(f"browsergym/miniwob.{task}", **kwargs)
                record["make_s"] = time.perf_counter() - t
            env = envs[task]
            t = time.perf_counter()
            obs, _ = env.reset(seed=seed)
            record["reset_s"] = time.perf_counter() - t
            record["browsers_s"], record["launches"] = clock.take()
            record["goal"] = obs["goal"]
            page = env.unwrapped.page
            scale = getattr(page, "_bgym_scale_factor", 1.0)
            reward, terminated = 0.0, False
            for _ in range(MAX_STEPS):
                t = time.perf_counter()
                plan = page.evaluate(config["planners"][task])
                plan_s = time.perf_counter() - t
                if plan is None or "stuck" in plan:
                    record["error"] = plan and f"planner stuck: {plan['stuck']}"
                    break
                action = to_action(plan, scale)
                t = time.perf_counter()
                obs, reward, terminated, truncated, info = env.step(action)
                step_s = time.perf_counter() - t
                record["steps"].append(
                    {
                        "action": action,
                        "plan_s": plan_s,
                        "step_s": step_s,
                        "exec_s": info["action_exec_stop"] - info["action_exec_start"],
                        "wait_s": info["wait_for_page_loading_stop"] - info["wait_for_page_loading_start"],
                        "validate_s": info["validation_stop"] - info["validation_start"],
                        "obs_s": info["get_observation_stop"] - info["get_observation_start"],
                        "error": obs["last_action_error"] or None,
                    }
                )
                if terminated or truncated:
                    break
            record["reward"] = float(reward)
            record["success"] = reward > 0
        except Exception:  # an episode that fails is a failure, and the env starts over
            record["error"] = traceback.format_exc(limit=3)
            record["success"] = False
            env = envs.pop(task, None)
            if env is not None:
                try:
                    env.close()
                except Exception:
                    pass
        results.put(record)
    for env in envs.values():
        env.close()
    results.put({"kind": "done"})


def run(config: dict, jobs: int, binary: str, prefix: Path) -> dict:
    os.environ["PLAYWRIGHT_BROWSERS_PATH"] = str(prefix / "browsers" / binary)
    episodes = [(task, seed) for task in config["tasks"] for seed in range(config["seeds"])]
    ctx = mp.get_context("spawn")
    queue, results = ctx.Queue(), ctx.Queue()
    for item in episodes:
        queue.put(item)
    for _ in range(jobs):
        queue.put(None)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    workers = [ctx.Process(target=worker, args=(queue, results, config)) for _ in range(jobs)]
    for w in workers:
        w.start()
    records, imports, done = [], [], 0
    while done < jobs:
        message = results.get()
        if message["kind"] == "episode":
            records.append(message)
            if config["verbose"]:
                print(
                    f"  {message['task']}-s{message['seed']}: success={message['success']} "
                    f"steps={len(message['steps'])} reset={message.get('reset_s', 0):.2f}s"
                    + (f" error={message['error']}" if message["error"] else ""),
                    file=sys.stderr,
                )
        elif message["kind"] == "import":
            imports.append(message["seconds"])
        else:
            done += 1
    seconds = time.perf_counter() - started
    for w in workers:
        w.join()
    steps = [s for r in records for s in r["steps"]]

    def pct(values, q):
        if not values:
            return None
        values = sorted(values)
        return values[min(len(values) - 1, int(q * len(values)))]

    def ms(values, q):
        v = pct(values, q)
        return None if v is None else round(v * 1000, 1)

    return {
        "peer": "browsergym",
        "binary": binary,
        "jobs": jobs,
        "episodes": len(records),
        "succeeded": sum(r["success"] for r in records),
        "seconds": round(seconds, 2),
        "per_minute": round(len(records) / seconds * 60, 1),
        "load_avg_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "import_s_max": round(max(imports), 2) if imports else None,
        "reset_ms_p50": ms([r["reset_s"] for r in records if "reset_s" in r], 0.5),
        "reset_browsers_ms_p50": ms([r["browsers_s"] for r in records if "browsers_s" in r], 0.5),
        "launches_per_reset": round(
            sum(r.get("launches", 0) for r in records) / max(1, sum("reset_s" in r for r in records)), 2
        ),
        "steps": len(steps),
        "step_ms_p50": ms([s["step_s"] for s in steps], 0.5),
        "step_ms_p90": ms([s["step_s"] for s in steps], 0.9),
        "step_exec_ms_p50": ms([s["exec_s"] for s in steps], 0.5),
        "step_wait_ms_p50": ms([s["wait_s"] for s in steps], 0.5),
        "step_validate_ms_p50": ms([s["validate_s"] for s in steps], 0.5),
        "step_obs_ms_p50": ms([s["obs_s"] for s in steps], 0.5),
        "plan_ms_p50": ms([s["plan_s"] for s in steps], 0.5),
        "failures": [
            {"task": r["task"], "seed": r["seed"], "reward": r.get("reward"), "error": r["error"]}
            for r in records
            if not r["success"]
        ],
        "action_errors": sorted({s["error"] for s in steps if s["error"]}),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--prefix",
        type=Path,
        default=Path(os.environ.get("BROWSERGYM_HOME", Path.home() / ".cache/cordon-peers/browsergym")),
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--jobs", default="1,4")
    parser.add_argument("--binary", default=",".join(BINARIES))
    parser.add_argument("--tasks", default=None, help="comma-separated (default: the bench's TASKS)")
    parser.add_argument("--html", type=Path, default=None)
    parser.add_argument("--pre-observation-delay", type=float, default=None)
    parser.add_argument("--slow-mo", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every result here")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()

    tasks = args.tasks.split(",") if args.tasks else bench_tasks()
    known = planners()
    missing = [t for t in tasks if t not in known]
    if missing:
        sys.exit(f"no scripted planner for {missing} in {SOLVER}")
    html = args.html or default_html()
    server, url = serve(html)
    os.environ["MINIWOB_URL"] = url
    config = {
        "tasks": tasks,
        "seeds": args.seeds,
        "planners": {t: known[t] for t in tasks},
        "pre_observation_delay": args.pre_observation_delay,
        "slow_mo": args.slow_mo,
        "verbose": args.verbose,
    }
    from importlib.metadata import version

    print(
        f"browsergym-miniwob {version('browsergym-miniwob')}, playwright {version('playwright')}, "
        f"pages {html}, tasks {','.join(tasks)}, seeds 0..{args.seeds - 1}, "
        f"pre_observation_delay {'default (0.5 s)' if args.pre_observation_delay is None else args.pre_observation_delay}, "
        f"slow_mo {args.slow_mo if args.slow_mo is not None else 'default (100 ms)'}",
        file=sys.stderr,
    )
    rows = []
    for binary in args.binary.split(","):
        if not (args.prefix / "browsers" / binary).is_dir():
            print(f"skipping {binary}: {args.prefix}/browsers/{binary} missing (run setup.sh)", file=sys.stderr)
            continue
        for jobs in (int(j) for j in args.jobs.split(",")):
            row = run(config, jobs, binary, args.prefix)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("failures",)}), file=sys.stderr)
    server.shutdown()
    header = "| binary | at once | episodes | succeeded | seconds | episodes/min | reset p50 (browsers' launch + close) | step p50 / p90 | step: action / wait / validate / observation p50 |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for r in rows:
        print(
            f"| {r['binary']} | {r['jobs']} | {r['episodes']} | {r['succeeded']} | {r['seconds']} | "
            f"**{r['per_minute']}** | {r['reset_ms_p50']} ms ({r['reset_browsers_ms_p50']} ms) | {r['step_ms_p50']} / {r['step_ms_p90']} ms | "
            f"{r['step_exec_ms_p50']} / {r['step_wait_ms_p50']} / {r['step_validate_ms_p50']} / {r['step_obs_ms_p50']} ms |"
        )
    for r in rows:
        for f in r["failures"]:
            print(f"failed ({r['binary']}, {r['jobs']} at once): {f}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
