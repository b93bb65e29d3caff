//! `cordon serve`: the HTTP + SSE API, with its store in SQLite.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use cordon_protocol::execution::Language;

use cordon_computer::browser::BrowserOptions;
use cordon_protocol::tool::Policy;
use cordon_server::guard::parse_allowed_host;
use cordon_server::http::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_COMPUTERS, DEFAULT_MAX_SANDBOXES,
    DEFAULT_MAX_WORKSPACE_BYTES_TOTAL, HttpApi, HttpOptions,
};
use cordon_server::objects::Objects;
use cordon_server::store::{DbLocation, Store, default_db_path};

use std::sync::Arc;

use cordon_core::ToolRegistry;
use cordon_gateway::script::ScriptUpstream;
use cordon_gateway::{Api, Credential, GatewayOptions, HttpUpstream, Upstream};
use cordon_server::http::{GatewaySetup, parse_duration, parse_replica_address};

use crate::flags::{BrowserFlags, parse_connect_policy};
use crate::setup::{connect_with_policies, prepare_in_background, sandbox, shutdown_signal};

/// How long open connections may take to finish after Ctrl-C or SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Options of `cordon serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:7420", value_name = "HOST:PORT")]
    pub addr: SocketAddr,
    /// SQLite database file, or a PostgreSQL URL (`postgres://user:password@host:port/db`,
    /// no TLS) for servers that keep their state in one database
    /// [default: ~/.local/share/cordon/cordon.db].
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// Require `Authorization: Bearer <TOKEN>` on every request.
    #[arg(
        long,
        env = "CORDON_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES, value_name = "N")]
    pub max_body_bytes: usize,
    /// Connect to an MCP server (stdio); its tools join every sandbox's tools as
    /// `NAME.tool`. COMMAND runs with `sh -c` (repeatable).
    #[arg(long = "connect", value_name = "NAME=COMMAND")]
    pub connect: Vec<String>,
    /// Policy of the tools of connection NAME unless a declaration of the same name says
    /// stricter: allow (default), ask or deny (repeatable).
    #[arg(long = "connect-policy", value_name = "NAME=POLICY", value_parser = parse_connect_policy)]
    pub connect_policy: Vec<(String, Policy)>,
    /// Also answer requests that name this server NAME (`Host`, and `Origin` of web
    /// pages); loopback names and the --addr IP are always served (repeatable).
    #[arg(long = "allow-host", value_name = "NAME", value_parser = parse_allowed_host)]
    pub allow_host: Vec<String>,
    /// Without --token, still accept sandboxes whose declared tools have `command` or
    /// `http` handlers (programs and requests run on this host).
    #[arg(long)]
    pub allow_host_tools: bool,
    /// Live instances at once (running executions + stateful sandboxes).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_instances: u32,
    /// Sandboxes live at once; creating one more is refused (`503 too_many_sandboxes`)
    /// until one is deleted or expires.
    #[arg(long, default_value_t = DEFAULT_MAX_SANDBOXES, value_name = "N")]
    pub max_sandboxes: usize,
    /// Bytes the `workspace_bytes` of all live sandboxes may add up to (workspaces live in
    /// this process's memory); the default is 64 sandboxes at the default 64 MiB (4 GiB).
    #[arg(long, default_value_t = DEFAULT_MAX_WORKSPACE_BYTES_TOTAL, value_name = "BYTES")]
    pub max_workspace_bytes_total: u64,
    /// Delete finished executions, ended sandboxes and closed computer sessions (with
    /// their trajectories) this long after they ended: 30s, 45m, 12h, 7d; `forever` keeps
    /// everything.
    #[arg(long, default_value = "7d", value_name = "DURATION", value_parser = parse_retain)]
    pub retain: Retain,
    /// Chromium for computer sessions (started on the first `POST /v1/computers`).
    #[arg(long, value_name = "PATH", env = "CORDON_CHROMIUM")]
    pub chromium: Option<PathBuf>,
    /// Computer sessions open at once.
    #[arg(long, default_value_t = DEFAULT_MAX_COMPUTERS, value_name = "N")]
    pub max_computers: usize,
    /// Where computer sessions' trajectories go [default: `trajectories/` next to --db].
    #[arg(long, value_name = "DIR")]
    pub trajectories: Option<PathBuf>,
    /// Where paused sandboxes' state goes (and the gateway's idle code containers): a
    /// folder, or `s3://bucket/prefix` (S3 settings from the AWS variables, or
    /// `?endpoint=…&region=…`) [default: `objects/` next to --db].
    #[arg(long, value_name = "LOCATION")]
    pub objects: Option<String>,
    /// Idle time after which a live sandbox is paused (its state stored, its instance and
    /// memory freed; the next execution resumes it): 30s, 5m, 1h; `off` pauses only when
    /// asked and at a graceful stop.
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = parse_pause_after)]
    pub pause_after: PauseAfter,
    /// How the other replicas on the same --db (PostgreSQL) reach this server, e.g.
    /// http://10.0.0.5:7420. A request for a sandbox, execution or computer session
    /// another replica holds is forwarded to it; without this flag the server runs alone.
    #[arg(long, value_name = "URL", value_parser = parse_replica_address)]
    pub replica_address: Option<String>,
    /// A replica whose heartbeat is older than this is taken for dead: the others end
    /// what it held (executions `interrupted`). Give every replica the same value.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub replica_lease: std::time::Duration,
    /// Put a model behind `POST /v1/messages`: API is anthropic, openai-chat or
    /// openai-responses and URL what that vendor's SDK takes as base_url; or
    /// `script=FILE.jsonl`, a recorded model (docs/gateway.md).
    #[arg(long, value_name = "API=URL")]
    pub upstream: Option<String>,
    /// Environment variable holding the upstream's key; without it the client's own key
    /// is forwarded (never with --token).
    #[arg(long, value_name = "VAR")]
    pub upstream_key_env: Option<String>,
    /// Longest one upstream call may take (500ms, 30s, 10m); past it the client gets 504.
    #[arg(long, default_value = "600s", value_name = "DURATION", value_parser = parse_duration)]
    pub upstream_timeout: std::time::Duration,
    /// Model turns per client request of the gateway.
    #[arg(long, default_value_t = cordon_gateway::DEFAULT_MAX_TOOL_ROUNDS, value_name = "N")]
    pub max_tool_rounds: u32,
    /// Operator server tools the gateway runs itself (the tools-file format).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// Idle time after which a gateway code-execution container expires.
    #[arg(long, default_value = "30m", value_name = "DURATION", value_parser = parse_duration)]
    pub container_ttl: std::time::Duration,
    /// How long a gateway program suspended on client tools waits for their results; past
    /// it those calls fail inside the program (at most --container-ttl).
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = parse_duration)]
    pub program_wait: std::time::Duration,
    /// Gateway code-execution containers alive at once (each holds a sandbox instance; at
    /// most half of --max-instances). A new one closes the least recently used.
    #[arg(long, default_value_t = cordon_gateway::DEFAULT_MAX_CONTAINERS, value_name = "N")]
    pub max_containers: usize,
    /// The language of the gateway's code execution: python (CPython 3.15 with numpy,
    /// pandas and matplotlib), python-lite (RustPython) or javascript.
    #[arg(long, default_value = "python", value_name = "LANGUAGE", value_parser = parse_language)]
    pub code_language: Language,
    /// Idle time after which a session of the session protocol (`PUT /session`) expires;
    /// sessions are kept in the database until then, across restarts.
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = parse_duration)]
    pub session_ttl: std::time::Duration,
    /// The model of sessions whose `PUT /session` names none.
    #[arg(long, value_name = "MODEL")]
    pub session_model: Option<String>,
    #[command(flatten)]
    pub browser: BrowserFlags,
}

/// `--upstream` and friends as the server's gateway setup (`None` without `--upstream`).
fn gateway_setup(args: &ServeArgs) -> anyhow::Result<Option<GatewaySetup>> {
    let Some(spec) = &args.upstream else {
        if args.tools.is_some() || args.upstream_key_env.is_some() {
            bail!("--tools and --upstream-key-env need --upstream API=URL");
        }
        return Ok(None);
    };
    let Some((api, url)) = spec.split_once('=') else {
        bail!(
            "--upstream {spec:?}: expected API=URL (anthropic, openai-chat, openai-responses) \
             or script=FILE.jsonl"
        );
    };
    let upstream: Arc<dyn Upstream> = if api == "script" {
        Arc::new(ScriptUpstream::from_file(std::path::Path::new(url))?)
    } else {
        let Some(api) = Api::parse(api) else {
            bail!(
                "--upstream {spec:?}: the API must be anthropic, openai-chat, openai-responses \
                 or script"
            );
        };
        if !url.starts_with("http://") && !url.starts_with("https://") {
            bail!("--upstream {spec:?}: URL must start with http:// or https://");
        }
        let key = match &args.upstream_key_env {
            Some(var) => Some(Credential(std::env::var(var).with_context(|| {
                format!("--upstream-key-env {var}: the variable is not set")
            })?)),
            None => None,
        };
        Arc::new(HttpUpstream::new(api, url, args.upstream_timeout)?.with_key(key))
    };
    let tools = match &args.tools {
        Some(path) => Some(ToolRegistry::from_file(path)?),
        None => None,
    };
    let options = GatewayOptions::default()
        .max_tool_rounds(args.max_tool_rounds)
        .container_ttl(args.container_ttl)
        .program_wait(args.program_wait)
        .code_language(args.code_language)
        // Containers never take the instances executions and sandboxes need.
        .max_containers(
            args.max_containers
                .min(usize::try_from(args.max_instances / 2).unwrap_or(usize::MAX)),
        );
    Ok(Some(
        GatewaySetup::new(upstream)
            .options(options)
            .tools(tools)
            .session_ttl(args.session_ttl)
            .default_model(args.session_model.clone()),
    ))
}

/// `--retain`: how long histories are kept (`None`: forever).
#[derive(Debug, Clone, Copy)]
pub struct Retain(pub Option<std::time::Duration>);

/// Parses `30s`, `45m`, `12h`, `7d` (or `forever`).
fn parse_retain(text: &str) -> Result<Retain, String> {
    let text = text.trim();
    if matches!(text, "forever" | "never" | "off") {
        return Ok(Retain(None));
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| {
        format!("{text:?}: expected a number with a unit, like 30s, 45m, 12h or 7d")
    })?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit must be s, m, h or d")),
    };
    if number == 0 {
        return Err("the retention must be longer than 0 (or `forever`)".to_owned());
    }
    Ok(Retain(Some(std::time::Duration::from_secs(
        number.saturating_mul(seconds),
    ))))
}

/// `--pause-after`: idle time before a sandbox is paused (`None`: off).
#[derive(Debug, Clone, Copy)]
pub struct PauseAfter(pub Option<std::time::Duration>);

fn parse_pause_after(text: &str) -> Result<PauseAfter, String> {
    if matches!(text.trim(), "off" | "never") {
        return Ok(PauseAfter(None));
    }
    parse_duration(text).map(|after| PauseAfter(Some(after)))
}

/// `cordon serve`.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if !args.addr.ip().is_loopback() && args.token.is_none() {
        bail!(
            "refusing to listen on {} without --token: anyone who can reach it could run code, \
             and `command` tools run programs on this host",
            args.addr
        );
    }
    let gateway = gateway_setup(&args)?;
    let db = match args.db {
        Some(path) => path,
        None => default_db_path()
            .context("no home directory to keep the database in; pass --db PATH")?,
    };
    let location = DbLocation::parse(&db);
    let store = Store::open_location(&location)
        .await
        .with_context(|| format!("opening {}", location.describe()))?;
    let sandbox = sandbox(
        vec![Language::PythonLite, Language::Javascript],
        args.max_instances,
    )
    .await?;
    // The CPython image can take minutes the first time: the server answers meanwhile.
    prepare_in_background(&sandbox, Language::Python);
    let mut browser = args.browser.apply(BrowserOptions::default())?;
    if let Some(path) = args.chromium {
        browser = browser.executable(path);
    }
    // Beside the SQLite file; with PostgreSQL, beside where the file would be.
    let beside = match &location {
        DbLocation::Sqlite(path) => Some(path.clone()),
        _ => default_db_path(),
    };
    let trajectories = args.trajectories.unwrap_or_else(|| {
        beside
            .as_deref()
            .and_then(std::path::Path::parent)
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
            .join("trajectories")
    });
    let objects_location = args.objects.clone().or_else(|| match &location {
        // Nothing outlives an in-memory database: its paused sandboxes stay in memory too.
        DbLocation::Sqlite(path) if path.as_os_str() == ":memory:" => None,
        _ => Some(
            beside_db(beside.as_deref(), "objects")
                .display()
                .to_string(),
        ),
    });
    let objects = match &objects_location {
        Some(at) => {
            Some(Objects::open(at).with_context(|| format!("opening the object store at {at}"))?)
        }
        None => None,
    };
    let options = HttpOptions::default()
        .objects(objects)
        .pause_after(args.pause_after.0)
        .replica_address(args.replica_address)
        .replica_lease(args.replica_lease)
        .connections(connect_with_policies(&args.connect, &args.connect_policy).await?)
        .allowed_hosts(args.allow_host)
        .allow_host_tools(args.allow_host_tools)
        .token(args.token)
        .max_body_bytes(args.max_body_bytes)
        .browser(browser)
        .trajectories(Some(trajectories))
        .max_computers(args.max_computers)
        .max_sandboxes(args.max_sandboxes)
        .max_workspace_bytes_total(args.max_workspace_bytes_total)
        .retain(args.retain.0)
        .gateway(gateway);
    let api = HttpApi::new(sandbox, store, options)
        .await
        .with_context(|| format!("recovering {}", location.describe()))?;
    let stopper = api.shutdown_handle();
    if api.expired_on_start() > 0 {
        eprintln!(
            "cordon: {} execution(s) were running when the last server stopped; they are now `interrupted`",
            api.expired_on_start()
        );
    }
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    let local = listener.local_addr()?;
    // Tests and supervisors read this line to learn the port (with --addr 127.0.0.1:0).
    eprintln!(
        "cordon: listening on http://{local} (database {})",
        location.describe()
    );
    // Open event streams of suspended executions would hold a graceful shutdown open
    // for minutes: after a signal, connections get a short grace period, then the process
    // exits (executions still running are recovered as `interrupted` at the next start,
    // or by another replica once this one's lease lapses).
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let notify = stop.clone();
    let signalled = async move {
        shutdown_signal().await;
        notify.notify_one();
    };
    tokio::select! {
        served = api.serve(listener, signalled) => served?,
        () = async {
            stop.notified().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => eprintln!("cordon: open connections did not close within {} s; exiting", SHUTDOWN_GRACE.as_secs()),
    }
    // Computer sessions end and Chromium stops (also when the grace period ran out).
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, stopper.shutdown()).await;
    Ok(ExitCode::SUCCESS)
}

/// `name` in the folder of the database file `db` (`.` when it has none).
fn beside_db(db: Option<&std::path::Path>, name: &str) -> PathBuf {
    db.and_then(std::path::Path::parent)
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."))
        .join(name)
}

/// A language name as every interface takes it (`python`, `python-lite`, `javascript`).
fn parse_language(name: &str) -> Result<Language, String> {
    Language::parse(name)
        .ok_or_else(|| format!("unknown language {name:?} (python, python-lite or javascript)"))
}
