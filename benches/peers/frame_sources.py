"""Which frame sources of Chromium show a click's effects, and how fast: raw CDP against
Debian's chromium (new headless), the page of `harness/computer/benches/step.rs` (a button
that turns yellow on odd clicks and cyan on even ones). Every frame is decoded and checked
against the click count; a frame in the other colour is `stale` (it shows the page before
the click).

    python3 frame_sources.py [N] [--uncapped] [--spinner]

Sources, each after a click (press + release) and one `Runtime.evaluate` round trip:
  screenshot  Page.captureScreenshot, full size (what Playwright's screenshot does)
  clip.scale  Page.captureScreenshot with clip.scale 0.8 (1024x640)
  start/stop  Page.startScreencast (maxWidth 1024) -> first frame -> stop + ack
  running     a screencast left running: the first frame pushed after the click, and the
              first frame stamped at or after the page's next requestAnimationFrame time
  beginFrame  HeadlessExperimental.beginFrame with --enable-begin-frame-control

Needs `pip install websockets Pillow`. Starts its own Chromium on loopback and stops it.
"""

import asyncio, base64, http.server, io, json, re, subprocess, sys, tempfile, threading, time, shutil

import websockets
from PIL import Image

CHROMIUM = "/usr/lib/chromium/chromium"
PAGE = (
    "<!doctype html><title>bench</title><script>window.n = 0</script><body style='margin:0'>"
    "<button id=b style='position:absolute;left:500px;top:300px;width:280px;height:200px;font:40px sans-serif' "
    "onclick='this.textContent = ++window.n; this.style.background = window.n % 2 ? \"#fc0\" : \"#0cf\"'>0</button>"
    "<p style='font:16px sans-serif;padding:20px'>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>"
)
SPINNER = (
    "<style>@keyframes r{to{transform:rotate(360deg)}}</style>"
    "<div style='position:absolute;left:40px;top:100px;width:300px;height:300px;"
    "background:conic-gradient(red,blue,green,red);animation:r 1s linear infinite'></div>"
)
FLAGS = [
    "--headless", "--disable-gpu", "--disable-smooth-scrolling", "--no-default-browser-check",
    "--disable-extensions", "--no-sandbox", "--hide-scrollbars", "--mute-audio", "--no-first-run",
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
    "--remote-debugging-port=0",
]


def serve(body):
    data = body.encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}/"


class Cdp:
    def __init__(self, ws):
        self.ws, self.next_id, self.pending = ws, 0, {}
        self.frames = asyncio.Queue()

    async def pump(self):
        try:
            await self._pump()
        except websockets.ConnectionClosed:
            pass  # Chromium stopped

    async def _pump(self):
        async for raw in self.ws:
            m = json.loads(raw)
            if "id" in m:
                f = self.pending.pop(m["id"], None)
                if f:
                    f.set_result(m)
            elif m.get("method") == "Page.screencastFrame":
                self.frames.put_nowait((time.perf_counter(), m["params"]))

    async def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        f = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = f
        await self.ws.send(json.dumps(msg))
        r = await f
        if "error" in r:
            raise RuntimeError(f"{method}: {r['error']['message']}")
        return r["result"]

    def ack(self, s, frame):
        asyncio.ensure_future(self.send("Page.screencastFrameAck", {"sessionId": frame["sessionId"]}, s))


class Browser:
    def __init__(self, extra):
        self.dir = tempfile.mkdtemp(prefix="cordon-frames-")
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, *extra, f"--user-data-dir={self.dir}", "about:blank"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
        )

    async def connect(self):
        while True:
            line = self.proc.stderr.readline().decode()
            m = re.search(r"ws://\S+", line)
            if m:
                break
            if not line:
                raise RuntimeError("chromium printed no DevTools address")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        cdp = Cdp(await websockets.connect(m.group(0), max_size=None))
        asyncio.ensure_future(cdp.pump())
        return cdp

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


async def open_page(cdp, url, begin_frame_control=False):
    ctx = (await cdp.send("Target.createBrowserContext"))["browserContextId"]
    params = {"url": "about:blank", "browserContextId": ctx}
    if begin_frame_control:
        params["enableBeginFrameControl"] = True
    target = (await cdp.send("Target.createTarget", params))["targetId"]
    s = (await cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
    await cdp.send("Emulation.setDeviceMetricsOverride",
                   {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}, s)
    await cdp.send("Page.enable", {}, s)
    if not begin_frame_control:
        await cdp.send("Page.navigate", {"url": url}, s)
        await asyncio.sleep(1.0)
    return s


def shows(b64, clicks):
    img = Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB")
    r, _, b = img.getpixel((520 * img.width // 1280, 310 * img.height // 800))
    return (r > 200 and b < 100) if clicks % 2 else (b > 200 and r < 100)


async def click(cdp, s):
    for kind, buttons in (("mousePressed", 1), ("mouseReleased", 0)):
        await cdp.send("Input.dispatchMouseEvent", {"type": kind, "x": 640, "y": 400,
                                                    "button": "left", "buttons": buttons, "clickCount": 1}, s)


def pct(v, p):
    v = sorted(v)
    return v[round((len(v) - 1) * p)] if v else float("nan")


async def drain(cdp, s):
    await asyncio.sleep(0.1)
    while not cdp.frames.empty():
        cdp.ack(s, cdp.frames.get_nowait()[1])


async def main():
    n = int(next((a for a in sys.argv[1:] if a.isdigit()), "100"))
    extra = ["--disable-gpu-vsync", "--disable-frame-rate-limit"] if "--uncapped" in sys.argv else []
    url = serve(PAGE + (SPINNER if "--spinner" in sys.argv else "") + "</body>")
    browser = Browser(extra)
    try:
        cdp = await browser.connect()
        s = await open_page(cdp, url)
        clicks = 0
        cast = {"format": "jpeg", "quality": 80, "maxWidth": 1024, "maxHeight": 640}

        async def shot(clip):
            p = {"format": "jpeg", "quality": 80, "optimizeForSpeed": True, "fromSurface": True}
            if clip:
                p["clip"] = {"x": 0, "y": 0, "width": 1280, "height": 800, "scale": 0.8}
            return (await cdp.send("Page.captureScreenshot", p, s))["data"]

        async def start_stop():
            await cdp.send("Page.startScreencast", cast, s)
            _, frame = await asyncio.wait_for(cdp.frames.get(), 2)
            stop = asyncio.ensure_future(cdp.send("Page.stopScreencast", {}, s))
            cdp.ack(s, frame)
            await stop
            return frame["data"]

        sources = {"screenshot": lambda: shot(False), "clip.scale": lambda: shot(True),
                   "start/stop": start_stop}
        times = {k: [] for k in sources}
        stale = {k: 0 for k in sources}
        for i in range(n + 3):
            for name, capture in sources.items():
                t = time.perf_counter()
                await click(cdp, s)
                clicks += 1
                await cdp.send("Runtime.evaluate", {"expression": "1"}, s)
                data = await capture()
                if i >= 3:
                    times[name].append((time.perf_counter() - t) * 1000)
                    stale[name] += not shows(data, clicks)
                await drain(cdp, s)
        for name in sources:
            print(f"{name:11} p50 {pct(times[name], .5):6.1f} ms  p99 {pct(times[name], .99):6.1f} ms  "
                  f"stale {stale[name]}/{n}")

        # A screencast left running.
        await cdp.send("Page.startScreencast", cast, s)
        await drain(cdp, s)
        first_stale = by_raf_stale = no_frame = 0
        to_good = []
        for i in range(n):
            await drain(cdp, s)
            t = time.perf_counter()
            await click(cdp, s)
            clicks += 1
            raf = asyncio.ensure_future(cdp.send("Runtime.evaluate", {
                "expression": "new Promise(r => requestAnimationFrame(t => r(performance.timeOrigin + t)))",
                "awaitPromise": True, "returnByValue": True}, s))
            seen = []
            end = time.perf_counter() + 0.3
            while time.perf_counter() < end:
                try:
                    arrived, frame = await asyncio.wait_for(cdp.frames.get(), end - time.perf_counter())
                except asyncio.TimeoutError:
                    break
                cdp.ack(s, frame)
                seen.append((arrived, frame))
            raf_ms = (await raf)["result"]["value"]
            if not seen:
                no_frame += 1
                continue
            first_stale += not shows(seen[0][1]["data"], clicks)
            good = next((a for a, f in seen if shows(f["data"], clicks)), None)
            if good:
                to_good.append((good - t) * 1000)
            stamped = next((f for _, f in seen if f["metadata"]["timestamp"] * 1000 >= raf_ms), None)
            by_raf_stale += stamped is None or not shows(stamped["data"], clicks)
        await cdp.send("Page.stopScreencast", {}, s)
        print(f"running    first frame after the click stale {first_stale}/{n}; frame stamped at/after "
              f"the next rAF stale or missing {by_raf_stale}/{n}; no frame {no_frame}/{n}; "
              f"click -> first frame with the change p50 {pct(to_good, .5):.1f} ms p99 {pct(to_good, .99):.1f} ms")
    finally:
        browser.close()

    # Begin-frame control: does this Chromium still have it?
    browser = Browser(["--enable-begin-frame-control", "--run-all-compositor-stages-before-draw"])
    try:
        cdp = await browser.connect()
        s = await open_page(cdp, url, begin_frame_control=True)
        try:
            await asyncio.wait_for(cdp.send("HeadlessExperimental.beginFrame", {"interval": 16.666}, s), 5)
            print("beginFrame  available")
        except Exception as e:  # noqa: BLE001 - reported, not raised
            print(f"beginFrame  not available: {e}")
    finally:
        browser.close()


asyncio.run(main())
