"""A local test page for the computer-use scenarios, served on 127.0.0.1 by a thread.

The page has two buttons at known CSS positions. With the viewport 1280x800 and the model
display 1024x640 the tests use (factor 0.8), their centres are, in model pixels:
  GO  (160, 120): sets the title and the URL fragment to `clicked`
  BUY (400, 120): "Buy now" — the default rules ask before clicking it; sets `bought`
`/login` serves LOGIN instead (a text and a password field), `/dpr` a page that writes its
`devicePixelRatio` into its URL fragment (`#dpr=1`).
"""

import contextlib
import http.server
import os
import threading

PAGE = b"""<!doctype html>
<html><head><title>start</title>
<style>body { margin: 0 } button { position: absolute; width: 200px; height: 100px; font-size: 24px }</style>
</head><body>
<button id="go" style="left: 100px; top: 100px" onclick="document.title = 'clicked'; location.hash = 'clicked'">Go</button>
<button id="buy" style="left: 400px; top: 100px" onclick="document.title = 'bought'; location.hash = 'bought'">Buy now</button>
</body></html>
"""

# A login form: a text field and a password field, 300x40 CSS px each. Model-pixel
# centres: NAME_FIELD (200, 96), PASSWORD_FIELD (200, 160).
LOGIN = b"""<!doctype html>
<html><head><title>login</title>
<style>body { margin: 0 } input { position: absolute; left: 100px; width: 300px; height: 40px }</style>
</head><body>
<input id="name" style="top: 100px">
<input id="pw" type="password" style="top: 180px">
</body></html>
"""

DPR = b"""<!doctype html>
<html><head><title>dpr</title></head><body>
<script>history.replaceState(null, '', '#dpr=' + devicePixelRatio)</script>
</body></html>
"""

DISPLAY = "1024x640"
NAME_FIELD = [200, 96]
PASSWORD_FIELD = [200, 160]
GO = [160, 120]
BUY = [400, 120]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the stdlib's name)
        body = {"/login": LOGIN, "/dpr": DPR}.get(self.path, PAGE)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve_page():
    """Yields the page's URL; the server stops when the block ends."""
    # A fixed port when the caller has to name the page's origin before it exists (an
    # operator's `--allow-origin`); any free port otherwise.
    port = int(os.environ.get("CORDON_E2E_PAGE_PORT", "0"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page"
    finally:
        server.shutdown()
        server.server_close()
