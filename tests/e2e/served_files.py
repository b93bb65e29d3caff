"""Hostile checks: bytes a sandbox wrote, served back by `cordon serve`, are inert.

A sandboxed program can write `report.html` or `report.svg` with a script in it. Served
back with its active content type on Cordon's own origin, that script would pass the
Host/Origin guard as same-origin and drive the API (create sandboxes, write files). Every
response carrying such bytes must be a download that no browser renders or sniffs.

Usage:
  python3 served_files.py headers BASE_URL    # the headers of every served file
  python3 served_files.py chromium BASE_URL   # the files opened in the server's Chromium
Exits non-zero on the first failed check; every request is bounded by a timeout.
"""

import sys
import urllib.parse

import httpx

from serve_http import run

TIMEOUT = httpx.Timeout(60.0)

# Types a browser executes or renders as a document with script: never served as such.
ACTIVE = ("html", "svg", "xml", "javascript", "ecmascript", "xhtml", "xsl", "css")


def payload_html(sandbox, marker):
    """A page whose script writes `marker` back into the sandbox and creates a sandbox.
    The requests are synchronous: if the script runs, they are done before `load`."""
    return f"""<!doctype html><html><head><title>report</title><script>
function send(method, path, body, type) {{
  var x = new XMLHttpRequest();
  x.open(method, path, false);
  if (type) x.setRequestHeader('Content-Type', type);
  try {{ x.send(body); }} catch (e) {{}}
}}
send('PUT', '/v1/sandboxes/{sandbox}/files/{marker}', 'script ran');
send('POST', '/v1/sandboxes', '{{"language": "javascript"}}', 'application/json');
</script></head><body><h1>Quarterly report</h1></body></html>
"""


def payload_svg(sandbox, marker):
    return f"""<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><script>
var x = new XMLHttpRequest();
x.open('PUT', '/v1/sandboxes/{sandbox}/files/{marker}', false);
try {{ x.send('script ran'); }} catch (e) {{}}
</script><rect width="100" height="100" fill="red"/></svg>
"""


def create_sandbox(http):
    response = http.post("/v1/sandboxes", json={"language": "python-lite"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def files_of(http, sandbox):
    response = http.get(f"/v1/sandboxes/{sandbox}/files")
    assert response.status_code == 200, response.text
    return sorted(f["path"] for f in response.json()["files"])


def filename_star(disposition):
    """The decoded RFC 6266 `filename*=UTF-8''…` parameter of a Content-Disposition."""
    for part in disposition.split(";"):
        name, _, value = part.strip().partition("=")
        if name.lower() == "filename*":
            charset, _, encoded = value.partition("''")
            assert charset.upper() == "UTF-8", disposition
            return urllib.parse.unquote(encoded, encoding="utf-8", errors="strict")
    raise AssertionError(f"no filename* in {disposition!r}")


def assert_inert(response, name):
    """`response` is a download browsers neither render, sniff nor run."""
    headers = response.headers
    media = headers["content-type"].split(";")[0].strip().lower()
    assert not any(word in media for word in ACTIVE), (name, headers["content-type"])
    assert headers["x-content-type-options"] == "nosniff", (name, dict(headers))
    csp = [d.strip() for d in headers["content-security-policy"].split(";")]
    assert "sandbox" in csp and "default-src 'none'" in csp, (name, csp)
    assert headers["cross-origin-resource-policy"] == "same-origin", (name, dict(headers))
    disposition = headers["content-disposition"]
    assert disposition.split(";")[0].strip().lower() == "attachment", (name, disposition)
    assert filename_star(disposition) == name.rsplit("/", 1)[-1], (name, disposition)
    # The plain `filename=` fallback is a quoted ASCII string with nothing that could end it.
    assert all(32 <= ord(c) < 127 for c in disposition), disposition


def scenario_headers(base):
    with httpx.Client(base_url=base, timeout=TIMEOUT) as http:
        sandbox = create_sandbox(http)
        files = f"/v1/sandboxes/{sandbox}/files"
        # The attack as reported: the sandboxed program writes the page itself.
        html = payload_html(sandbox, "pwned.txt")
        result = run(http, sandbox, f"open('report.html', 'w').write({html!r})\n'written'")
        assert result["status"] == "completed" and result["result"] == "written", result
        # The same bytes uploaded, under every active extension.
        svg = payload_svg(sandbox, "pwned.txt").encode()
        names = ["report.svg", "a/b/page.htm", "page.xhtml", "feed.xml", "code.js", "mod.mjs",
                 "style.css", "Report.HTML", "noext", 'odd na"me;\u00e9%.html']
        for name in names:
            body = svg if name.endswith("svg") else html.encode()
            put = http.put(f"{files}/{urllib.parse.quote(name)}", content=body)
            assert put.status_code == 201, (name, put.text)
        for name in ["report.html"] + names:
            got = http.get(f"{files}/{urllib.parse.quote(name)}")
            assert got.status_code == 200, (name, got.text)
            assert_inert(got, name)
            assert got.content == (svg if name.endswith("svg") else html.encode()), name
        # Passive types keep a useful type, still as inert downloads.
        http.put(f"{files}/data.json", content=b'{"a": 1}')
        got = http.get(f"{files}/data.json")
        assert got.headers["content-type"] == "application/json", got.headers
        assert got.json() == {"a": 1}
        assert_inert(got, "data.json")
        # Every response of the API says nosniff, errors and JSON included.
        for path in ["/v1/health", files, f"{files}/missing.txt", "/no/such/route"]:
            response = http.get(path)
            assert response.headers.get("x-content-type-options") == "nosniff", (path, dict(response.headers))
        # Nothing above ran the page's script: no file was written back.
        assert "pwned.txt" not in files_of(http, sandbox), files_of(http, sandbox)


def scenario_chromium(base):
    """Opens the written files in the server's own Chromium (a computer session), the way
    a user's browser would open the link: no script of theirs may reach the API."""
    with httpx.Client(base_url=base, timeout=TIMEOUT) as http:
        victim = create_sandbox(http)
        files = f"/v1/sandboxes/{victim}/files"
        pages = {
            "report.html": payload_html(victim, "pwned-html.txt").encode(),
            "report.svg": payload_svg(victim, "pwned-svg.txt").encode(),
        }
        for name, body in pages.items():
            assert http.put(f"{files}/{name}", content=body).status_code == 201
        for name in pages:
            url = f"{base}{files}/{name}"
            opened = http.post("/v1/computers", json={"url": url})
            # Chromium refuses the download (computer sessions deny downloads): the session
            # opens on an empty page, or the start fails. Either way nothing rendered.
            assert opened.status_code in (201, 502), (name, opened.status_code, opened.text)
            if opened.status_code == 201:
                computer = opened.json()["id"]
                # One more step: a script that did run has finished its synchronous
                # requests long before a second screenshot is taken.
                step = http.post(f"/v1/computers/{computer}/actions",
                                 json={"actions": [{"action": "screenshot"}]})
                assert step.status_code == 200, step.text
                # A screenshot of page content is served as an inert download too.
                steps = http.get(f"/v1/computers/{computer}/trajectory").json()["steps"]
                shot = http.get(steps[-1]["screenshot"]["url"])
                assert shot.status_code == 200, shot.text
                assert shot.headers["content-type"] == "image/png", shot.headers
                assert_inert(shot, f"{computer}-step-{steps[-1]['step']}.png")
                assert http.delete(f"/v1/computers/{computer}").status_code == 204
            print(f"{name}: POST /v1/computers answered {opened.status_code}")
        written = files_of(http, victim)
        assert written == ["report.html", "report.svg"], f"a page's script ran: {written}"
        # The server keeps serving.
        assert http.get("/v1/health").status_code == 200


SCENARIOS = {"headers": scenario_headers, "chromium": scenario_chromium}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    print(f"ok {sys.argv[1]}")
