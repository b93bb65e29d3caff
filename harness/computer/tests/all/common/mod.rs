//! Test DSL: a loopback test-page server and a browser that is always stopped.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use cordon_computer::browser::{Browser, BrowserOptions, BrowserSession, SessionOptions};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::origin::{OriginPattern, OriginPolicy};
use cordon_computer::{Computer, EngineOptions, Status, StepReport};
use cordon_protocol::computer::{ComputerCall, Vendor, decode};
use futures::FutureExt as _;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A page server on 127.0.0.1 that records every request line (and WebSocket attempts).
pub struct PageServer {
    pub addr: SocketAddr,
    pub hits: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PageServer {
    pub async fn start(other: Option<SocketAddr>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let h = hits.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let h = h.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    let line = req.lines().next().unwrap_or("").to_owned();
                    h.lock().unwrap().push(line.clone());
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    if path == "/late" || path == "/late-shown" {
                        // Slower than a capture, so a step that does not wait for it shows
                        // the page before its result.
                        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
                    }
                    let (status, ctype, body, extra) = route(&path, addr, other);
                    let resp = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n{extra}\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.write_all(body.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Self { addr, hits, task }
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

/// Small targets at known CSS positions (left, top), 8×8 px, near every edge.
pub const TARGETS: &[(&str, u32, u32)] = &[
    ("t0", 4, 4),
    ("t1", 636, 396),
    ("t2", 1266, 786),
    ("t3", 1266, 4),
    ("t4", 4, 786),
    ("t5", 321, 123),
    ("t6", 997, 555),
];
pub const TARGET_SIZE: u32 = 8;

fn route(
    path: &str,
    me: SocketAddr,
    other: Option<SocketAddr>,
) -> (&'static str, &'static str, String, String) {
    let other = other
        .map(|o| o.to_string())
        .unwrap_or_else(|| "127.0.0.1:9".into());
    let html = |body: String| ("200 OK", "text/html; charset=utf-8", body, String::new());
    match path {
        "/targets" => {
            let mut s = String::from(
                "<!doctype html><html><head><title>targets</title><style>body{margin:0;width:100vw;height:100vh;overflow:hidden}\
                 button{position:absolute;padding:0;border:0;background:#c00}</style></head><body>\
                 <script>window.hits=[];</script>",
            );
            for (id, x, y) in TARGETS {
                s.push_str(&format!(
                    "<button id={id} style='left:{x}px;top:{y}px;width:{TARGET_SIZE}px;height:{TARGET_SIZE}px' onclick='hits.push(this.id)'></button>"
                ));
            }
            s.push_str("</body></html>");
            html(s)
        }
        "/form" => html(format!(
            "<!doctype html><html><head><title>form</title><style>body{{margin:0}} *{{position:absolute;box-sizing:border-box}}</style></head><body>\
             <script>window.log=[];</script>\
             <input id=name style='left:100px;top:100px;width:300px;height:40px' placeholder='Your name'>\
             <textarea id=bio style='left:100px;top:160px;width:300px;height:100px'></textarea>\
             <input id=pw type=password name=pw style='left:100px;top:280px;width:300px;height:40px'>\
             <button id=del style='left:100px;top:340px;width:200px;height:40px' onclick='log.push(\"delete\")'>Delete account</button>\
             <button id=open style='left:320px;top:340px;width:200px;height:40px' onclick='log.push(\"open\")'>Open</button>\
             <a id=away href='http://{other}/landing' style='left:100px;top:400px;width:200px;height:40px;display:block'>Elsewhere</a>\
             <input id=keys style='left:100px;top:460px;width:300px;height:40px' onkeydown='log.push(\"kd:\"+event.key+(event.ctrlKey?\"+ctrl\":\"\"))'>\
             </body></html>"
        )),
        "/long" => html(
            "<!doctype html><html><head><title>long</title></head><body style='margin:0'>\
             <div style='height:300px;background:#fff'>top</div><div style='height:40px;background:#f00'></div>\
             <div style='height:5000px;background:#fff'></div></body></html>"
                .into(),
        ),
        "/iframe" => html(
            "<!doctype html><html><head><title>iframe</title></head><body style='margin:0'><script>window.hits=[];</script>\
             <iframe id=f style='position:absolute;left:200px;top:150px;width:400px;height:300px;border:0' \
             srcdoc=\"<body style='margin:0'><button style='position:absolute;left:50px;top:50px;width:100px;height:50px' onclick='parent.hits.push(&quot;inner&quot;)'>Inner</button></body>\"></iframe>\
             </body></html>"
                .into(),
        ),
        "/popup" => html(format!(
            "<!doctype html><html><head><title>popup</title></head><body style='margin:0'>\
             <button style='position:absolute;left:0;top:0;width:200px;height:100px' onclick='window.open(\"http://{other}/popped\")'>Open popup</button></body></html>"
        )),
        "/popup-self" => html(
            "<!doctype html><html><head><title>opener</title></head><body style='margin:0'>\
             <button style='position:absolute;left:0;top:0;width:200px;height:100px' onclick='window.open(\"/targets\")'>Open</button></body></html>"
                .into(),
        ),
        // Four ways a page opens a popup, each a 200×100 button along the top: a page that
        // loads at once, one answered after 400 ms, an `about:blank` written into, a blank
        // window navigated 100 ms later.
        "/popup-kinds" => html(
            "<!doctype html><html><head><title>popups</title><style>\
             button{position:absolute;top:0;width:200px;height:100px}</style></head><body style='margin:0'>\
             <button style='left:0' onclick='window.open(\"/shown\")'>now</button>\
             <button style='left:200px' onclick='window.open(\"/late-shown\")'>late</button>\
             <button style='left:400px' onclick='const w = window.open(); \
               w.document.write(\"<body style=margin:0;background:rgb(255,160,0)>written</body>\"); w.document.close()'>written</button>\
             <button style='left:600px' onclick='const w = window.open(); setTimeout(() => w.location = \"/shown\", 100)'>later</button>\
             </body></html>"
                .into(),
        ),
        "/shown" => html(
            "<!doctype html><title>shown</title><body style='margin:0;height:100vh;background:rgb(0,160,0)'>shown</body>"
                .into(),
        ),
        "/late-shown" => html(
            "<!doctype html><title>late</title><body style='margin:0;height:100vh;background:rgb(0,0,255)'>late</body>"
                .into(),
        ),
        "/redirect" => ("302 Found", "text/plain", String::new(), format!("Location: http://{other}/redirected\r\n")),
        "/ws" => html(format!(
            "<!doctype html><html><head><title>ws</title></head><body><script>\
             window.wsState='pending'; try {{ const s = new WebSocket('ws://{other}/socket');\
             s.onopen=()=>wsState='open'; s.onerror=()=>wsState='error'; s.onclose=()=>{{ if (wsState==='pending') wsState='closed'; }}; }}\
             catch (e) {{ wsState='threw'; }}</script></body></html>"
        )),
        "/cookie" => html(
            "<!doctype html><html><head><title>cookie</title></head><body><script>\
             document.title = 'seen:' + (document.cookie || 'none') + ':' + (localStorage.getItem('k') || 'none');\
             document.cookie = 'sid=1'; localStorage.setItem('k', 'v');</script></body></html>"
                .into(),
        ),
        "/slow" => html(
            "<!doctype html><html><head><title>slow</title></head><body><script>\
             document.body.onclick = () => fetch('/delay').then(r => r.text()).then(t => document.title = 'fetched:' + t);\
             </script><div style='height:100vh'>click me</div></body></html>"
                .into(),
        ),
        // A click whose visible effects all start in a timer: one paints after a fetch,
        // one scrolls to a green band far down the page.
        "/timers" => html(
            "<!doctype html><html><head><title>timers</title></head><body style='margin:0'><script>\
             document.body.onclick = e => setTimeout(() => {\
               if (e.clientX < 640) fetch('/late').then(r => r.text()).then(t => { document.title = 'fetched:' + t; document.body.style.background = 'rgb(0, 0, 255)'; });\
               else window.scrollTo(0, 3000);\
             }, 0);\
             </script><div style='height:3000px'></div><div style='height:2000px;background:rgb(0, 160, 0)'></div></body></html>"
                .into(),
        ),
        // A button that opens a file chooser from script, and a multiple-file input.
        "/upload" => html(
            "<!doctype html><html><head><title>upload</title></head><body style='margin:0'>\
             <button style='position:absolute;left:0;top:0;width:200px;height:100px' onclick='document.getElementById(\"one\").click()'>Attach</button>\
             <input type=file id=one style='position:absolute;left:0;top:300px'>\
             <input type=file id=many multiple style='position:absolute;left:0;top:200px;width:200px;height:50px'>\
             <script>for (const i of document.querySelectorAll('input')) i.onchange = () => \
               document.title = i.id + ':' + [...i.files].map(f => f.name).join(',');</script></body></html>"
                .into(),
        ),
        // Opens windows from load on, in a loop that never ends (the session's page cap).
        "/storm" => html(
            "<!doctype html><html><head><title>storm</title></head><body><script>\
             const burst = () => { for (let i = 0; i < 5; i++) window.open('about:blank'); };\
             burst(); setInterval(burst, 100);</script>storm</body></html>"
                .into(),
        ),
        // Motion after a click on the left half (x < 640): a 400 ms CSS transition of the
        // page from red to blue; on the right half, a 400 ms script animation (a timer
        // moving a green bar across in 30 ms ticks, slower than a step, each tick setting the
        // next before it moves the bar, then painting it blue).
        "/motion" => html(
            "<!doctype html><html><head><title>motion</title><style>\
             body{margin:0;height:100vh;background:rgb(255,0,0);transition:background-color 400ms linear}\
             body.done{background:rgb(0,0,255)} #bar{position:absolute;left:0;top:0;width:100px;height:100px;background:rgb(0,160,0)}\
             </style></head><body><div id=bar></div><script>\
             document.body.onclick = e => { if (e.clientX < 640) { document.body.className = 'done'; return; }\
               const bar = document.getElementById('bar'), t0 = performance.now();\
               const tick = () => { const p = Math.min(1, (performance.now() - t0) / 400); if (p < 1) setTimeout(tick, 30);\
                 bar.style.left = (p * 1180) + 'px'; if (p >= 1) bar.style.background = 'rgb(0,0,255)'; };\
               tick(); };\
             </script></body></html>"
                .into(),
        ),
        // A click on the left half moves a bar across in 13 ms interval ticks (as jQuery 1.x
        // animates) and the interval clears itself in its last run; a click on the right
        // half only paints the page blue.
        "/interval" => html(
            "<!doctype html><html><head><title>interval</title><style>\
             body{margin:0;height:100vh;background:rgb(255,0,0)}\
             #bar{position:absolute;left:0;top:0;width:100px;height:100px;background:rgb(0,160,0)}\
             </style></head><body><div id=bar></div><script>\
             document.body.onclick = e => { if (e.clientX >= 640) { document.body.style.background = 'rgb(0,0,255)'; return; }\
               const bar = document.getElementById('bar'); let n = 0;\
               const id = setInterval(() => { n++; bar.style.left = (n * 100) + 'px'; if (n === 8) clearInterval(id); }, 13); };\
             </script></body></html>"
                .into(),
        ),
        // Motion that never ends: a script moving a bar forever on every frame, and an
        // endless CSS animation.
        "/endless" => html(
            "<!doctype html><html><head><title>endless</title><style>\
             @keyframes spin{to{transform:rotate(360deg)}} #spin{position:absolute;left:600px;top:300px;width:80px;height:80px;background:#333;animation:spin 1s linear infinite}\
             #bar{position:absolute;left:0;top:0;width:100px;height:100px;background:rgb(0,160,0)}\
             </style></head><body style='margin:0;height:100vh'><div id=spin></div><div id=bar></div><script>\
             document.body.onclick = e => { if (e.clientX < 640) return; const bar = document.getElementById('bar');\
               const tick = t => { bar.style.left = (t / 3 % 1180) + 'px'; requestAnimationFrame(tick); };\
               requestAnimationFrame(tick); };\
             </script></body></html>"
                .into(),
        ),
        "/delay" | "/late" => ("200 OK", "text/plain", "done".into(), String::new()),
        "/download" => ("200 OK", "application/octet-stream", "secret".into(), "Content-Disposition: attachment; filename=x.bin\r\n".into()),
        _ => html(format!("<!doctype html><title>page {path} on {me}</title><body>hello</body>")),
    }
}

/// The model display most tests use: the 1280×800 viewport shown as 1024×640.
pub fn fixed() -> DisplaySpec {
    DisplaySpec::Fixed {
        size: Size::new(1024, 640),
    }
}

/// The usual session: a 1280×800 viewport at `dpr`, shown as 1024×640, opening `url`.
pub fn page_opts(dpr: f64, url: String) -> SessionOptions {
    session_opts(Size::new(1280, 800), dpr, fixed(), Some(url))
}

/// A step's screenshot, decoded.
pub struct Shot {
    pub size: Size,
    rgb: Vec<u8>,
}

impl Shot {
    pub fn of(report: &StepReport) -> Self {
        let data = &report.screenshot.as_ref().expect("a screenshot").data;
        let (size, rgb) = cordon_computer::image::decode_rgb(data).unwrap();
        Self { size, rgb }
    }

    /// The RGB pixel at model coordinates.
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.size.width + x) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }
}

static BROWSERS: OnceLock<tokio::sync::Semaphore> = OnceLock::new();

/// The options tests launch Chromium with. The test pages live on loopback, which sessions
/// may not reach by default: tests lift the private-network rule explicitly, as an operator
/// would (`--allow-private-network`); the isolation tests that check the rule use
/// [`strict_browser_options`]. CI runs as root, where Chromium's sandbox cannot run: the
/// tests opt out of it explicitly (`--no-browser-sandbox`).
pub fn browser_options() -> BrowserOptions {
    let mut o = strict_browser_options();
    o.allow_private_network = true;
    o
}

/// Like [`browser_options`], with the private-network rule in force.
pub fn strict_browser_options() -> BrowserOptions {
    let mut o = BrowserOptions::default();
    o.no_sandbox = true;
    o
}

/// Launches Chromium, runs `body`, and stops Chromium whether `body` passes or panics.
/// At most two browsers run at once (2-core machines).
pub async fn with_browser<F, Fut>(body: F)
where
    F: FnOnce(Browser) -> Fut,
    Fut: Future<Output = ()>,
{
    with_browser_options(browser_options(), body).await;
}

/// [`with_browser`] with other options.
pub async fn with_browser_options<F, Fut>(options: BrowserOptions, body: F)
where
    F: FnOnce(Browser) -> Fut,
    Fut: Future<Output = ()>,
{
    let _permit = BROWSERS
        .get_or_init(|| tokio::sync::Semaphore::new(2))
        .acquire()
        .await
        .unwrap();
    let browser = match Browser::launch(options).await {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    let outcome = std::panic::AssertUnwindSafe(body(browser.clone()))
        .catch_unwind()
        .await;
    browser.close().await.unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

pub fn session_opts(
    viewport: Size,
    dpr: f64,
    display: DisplaySpec,
    start: Option<String>,
) -> SessionOptions {
    let mut o = SessionOptions::default();
    o.viewport = viewport;
    o.dpr = dpr;
    o.display = display;
    o.start_url = start;
    o
}

pub fn allow(origins: &[&str]) -> OriginPolicy {
    OriginPolicy::new(
        origins
            .iter()
            .map(|o| OriginPattern::parse(o).unwrap())
            .collect(),
        vec![],
    )
}

pub fn engine(rules: Rules) -> EngineOptions {
    let mut e = EngineOptions::default();
    e.rules = rules;
    e
}

pub async fn computer(
    browser: &Browser,
    opts: SessionOptions,
    rules: Rules,
) -> Computer<BrowserSession> {
    let s = browser.new_session(opts).await.unwrap();
    Computer::new(s, engine(rules))
}

/// One step from a vendor-shaped JSON value.
pub async fn step(
    c: &mut Computer<BrowserSession>,
    vendor: Vendor,
    v: serde_json::Value,
) -> StepReport {
    let call: ComputerCall = decode(vendor, &v).unwrap();
    c.step(call, Some(&v)).await.unwrap()
}

pub async fn ok_step(
    c: &mut Computer<BrowserSession>,
    vendor: Vendor,
    v: serde_json::Value,
) -> StepReport {
    let r = step(c, vendor, v.clone()).await;
    assert_eq!(r.status, Status::Ok, "{v}: {:?}", r.error);
    r
}

/// A left click at model pixel `[x, y]` in Anthropic's shape, which must succeed.
pub async fn left_click<T: serde::Serialize>(
    c: &mut Computer<BrowserSession>,
    at: [T; 2],
) -> StepReport {
    ok_step(
        c,
        Vendor::Anthropic,
        serde_json::json!({"action": "left_click", "coordinate": at}),
    )
    .await
}

pub async fn eval(c: &Computer<BrowserSession>, js: &str) -> serde_json::Value {
    c.backend().eval(js).await.unwrap()
}
