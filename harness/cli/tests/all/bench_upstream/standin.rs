//! A scripted stand-in model server on 127.0.0.1 for `cordon bench --policy upstream`. It
//! answers every POST (Anthropic `/v1/messages`, OpenAI `/responses`, Gemini
//! `/v1beta/models/{model}:generateContent`) with the next turn of its script: a function
//! that looks at the request — the tool declared, the screenshots' format and size, the
//! results of the previous calls — and returns the vendor's response body, or what is
//! wrong with the request (recorded, and answered with a 500 so the episode ends).

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use base64::Engine as _;
use serde_json::{Value, json};

/// One request the stand-in received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// Its `anthropic-beta` header.
    pub beta: Option<String>,
    pub body: Value,
}

/// One scripted model turn.
pub type Turn = Box<dyn Fn(&Received) -> Result<Value, String> + Send + Sync>;

#[derive(Default)]
struct Script {
    turns: Vec<Turn>,
    received: Vec<Received>,
    failures: Vec<String>,
}

pub struct StandIn {
    pub url: String,
    script: Arc<Mutex<Script>>,
    _runtime: tokio::runtime::Runtime,
}

impl StandIn {
    pub fn start(turns: Vec<Turn>) -> StandIn {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let script = Arc::new(Mutex::new(Script {
            turns,
            ..Script::default()
        }));
        let router = axum::Router::new()
            .fallback(axum::routing::post(answer))
            .with_state(script.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move {
            let _served = axum::serve(listener, router).await;
        });
        StandIn {
            url,
            script,
            _runtime: runtime,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.script.lock().unwrap().received.clone()
    }

    /// What was wrong with the requests (empty when every turn was as expected).
    pub fn failures(&self) -> Vec<String> {
        self.script.lock().unwrap().failures.clone()
    }
}

async fn answer(
    State(script): State<Arc<Mutex<Script>>>,
    uri: Uri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut script = script.lock().unwrap();
    let request = Received {
        path: uri.path().to_owned(),
        beta: headers
            .get("anthropic-beta")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body,
    };
    let index = script.received.len();
    script.received.push(request.clone());
    let outcome = match script.turns.get(index) {
        Some(turn) => turn(&request),
        None => Err(format!(
            "request {} was not expected: {}",
            index + 1,
            request.path
        )),
    };
    match outcome {
        Ok(reply) => (StatusCode::OK, Json(reply)),
        Err(failure) => {
            let failure = format!("turn {}: {failure}", index + 1);
            script.failures.push(failure.clone());
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": {"type": "api_error", "message": failure}})),
            )
        }
    }
}

/// `Err(message)` unless `condition`.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}

/// The size of a base64 PNG or JPEG, checking it is one.
pub fn image_size(media_type: &str, data: &str) -> Result<(u32, u32), String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("the screenshot is not base64: {e}"))?;
    let format = match media_type {
        "image/png" if bytes.starts_with(b"\x89PNG\r\n\x1a\n") => image::ImageFormat::Png,
        "image/jpeg" if bytes.starts_with(b"\xff\xd8\xff") => image::ImageFormat::Jpeg,
        other => return Err(format!("the screenshot is not the {other} it says it is")),
    };
    let decoded = image::load_from_memory_with_format(&bytes, format)
        .map_err(|e| format!("the screenshot does not decode: {e}"))?;
    Ok((decoded.width(), decoded.height()))
}

/// Checks a `data:` URL holds a PNG or JPEG of `size`.
pub fn check_data_url(url: &str, size: (u32, u32)) -> Result<(), String> {
    let rest = url
        .strip_prefix("data:")
        .ok_or_else(|| format!("not a data: URL: {:.60}", url))?;
    let (media_type, data) = rest
        .split_once(";base64,")
        .ok_or_else(|| "a data: URL without ;base64,".to_owned())?;
    let got = image_size(media_type, data)?;
    ensure(got == size, || {
        format!("a screenshot of {got:?}, not {size:?}")
    })
}
