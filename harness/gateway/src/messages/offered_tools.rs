//! The tools a request offers the model: the client's, the code tool (with the client
//! tools its programs may call), the computer tool, and the operator's; a vendor's hosted
//! tool that neither Cordon nor the upstream can run is refused here.

use std::sync::Arc;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::conversation::{
    CODE_TOOL, Extra, FunctionTool, PROGRAM_TOOL, ToolDefinition, Vendor, gemini, is_code_tool_type,
};
use cordon_protocol::execution::Language;
use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use serde_json::{Value, json};

use super::browser_tool::{BROWSER, BrowserTool, is_browser_toolset};
use super::computer_tool::{BoundComputer, ComputerActions};
use super::failure::{Fail, bad_request, fail};
use super::gemini_computer::GeminiComputer;
use super::request_state::{CodeExecution, RequestState};
use crate::tool_calls::{operator_function, program_function};
use crate::tool_search::{SearchTool, ToolSearch, search_kind};
use crate::upstream::Api;

/// Whether a tool type is one of Cordon's code tools: Anthropic's `code_execution_*`,
/// Responses' `code_interpreter` (Python programs) or `programmatic_tool_calling`
/// (JavaScript programs).
fn is_program_tool_type(kind: &str) -> bool {
    is_code_tool_type(kind) || kind == PROGRAM_TOOL
}

/// Whether a function tool asks to be kept from the model until a search finds it;
/// `Err` when its `defer_loading` is not a boolean.
fn deferred(index: usize, tool: &FunctionTool) -> Result<bool, Fail> {
    match tool.extra.get("defer_loading") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(on)) => Ok(*on),
        Some(_) => Err(bad_request(format!(
            "tools[{index}] (`{}`): `defer_loading` must be true or false",
            tool.name
        ))),
    }
}

/// The tool searches a request declares, each checked (a 400 names what is wrong).
fn declared_searches(tools: &[ToolDefinition]) -> Result<Vec<SearchTool>, Fail> {
    let mut searches: Vec<SearchTool> = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        let ToolDefinition::BuiltIn { kind, data, .. } = tool else {
            continue;
        };
        let Some(search) = search_kind(kind) else {
            continue;
        };
        let search = SearchTool::read(search, kind, data)
            .map_err(|e| bad_request(format!("tools[{index}]: {e}")))?;
        if searches.iter().any(|s| s.name == search.name) {
            return Err(bad_request(format!(
                "tools[{index}]: a tool search named `{}` is declared twice",
                search.name
            )));
        }
        searches.push(search);
    }
    Ok(searches)
}

fn code_tool_description(program_tools: &ToolRegistry, language: Language) -> String {
    let javascript = language == Language::Javascript;
    let mut text = String::from(if javascript {
        "Run a JavaScript program (ES2023, top-level `await`) in a sandbox (no network, no \
         files, no Node.js). The final expression's value and everything logged with \
         `console.log` are returned to you; nothing else is."
    } else {
        "Run Python code in a sandbox (no network, no files). The final expression's value \
         and everything printed are returned to you; nothing else is. Variables persist \
         between calls in the same container."
    });
    if !program_tools.is_empty() {
        text.push_str(if javascript {
            "\n\nThese tools are async functions in the program's globals, each taking one \
             object: call them with `await`, e.g. `const r = await name({arg: value})`, and \
             run several at once with `await Promise.all([...])`. Their results reach only \
             the program: log what you need.\n"
        } else {
            "\n\nThese tools are async functions in the program's globals: call them with \
             `await`, e.g. `r = await name(arg=value)`, and run several at once with \
             `await asyncio.gather(...)` (import asyncio). Their results reach only the \
             program: print what you need.\n"
        });
        for tool in program_tools.iter() {
            let d = &tool.declaration;
            text.push_str(&format!(
                "\n- `{}`: {} Input schema: {}",
                d.name,
                if d.description.is_empty() {
                    "(no description)"
                } else {
                    d.description.as_str()
                },
                d.input_schema
            ));
        }
    }
    text
}

/// The display a computer tool declares (`display_width_px`, `display_height_px`).
fn display_of(data: &Value) -> Option<(u64, u64)> {
    // Anthropic's `display_width_px`, OpenAI's `display_width`.
    let side =
        |anthropic: &str, openai: &str| data[anthropic].as_u64().or_else(|| data[openai].as_u64());
    Some((
        side("display_width_px", "display_width")?,
        side("display_height_px", "display_height")?,
    ))
}

/// Anthropic's computer tool as a function tool, for upstreams without the built-in,
/// offering the actions its declaration enables.
fn computer_function(name: &str, data: &Value, actions: &ComputerActions) -> ToolDefinition {
    let (width, height) = display_of(data).unwrap_or((1024, 768));
    ToolDefinition::Function(FunctionTool {
        name: name.to_owned(),
        description: Some(format!(
            "Use a computer with a {width}x{height} screen through screenshots and mouse and \
             keyboard actions. Every action returns a screenshot. Coordinates are [x, y] pixels \
             of the screenshot."
        )),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": actions.offered()},
                "coordinate": {"type": "array", "items": {"type": "integer"}},
                "start_coordinate": {"type": "array", "items": {"type": "integer"}},
                "text": {"type": "string"},
                "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                "scroll_amount": {"type": "integer"},
                "duration": {"type": "number"},
                "region": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["action"]
        }),
        allowed_callers: Vec::new(),
        extra: Extra::new(),
    })
}

/// Whether a built-in tool type is a computer tool (Anthropic's `computer_*`, OpenAI's
/// `computer` and `computer_use_preview`, Gemini's `computerUse`): Cordon runs it on a
/// bound computer, and an upstream of another vendor gets it as a function tool (a Gemini
/// upstream, its own `computerUse`).
fn is_computer_tool(kind: &str) -> bool {
    kind.starts_with("computer_") || kind == "computer" || kind == gemini::COMPUTER_USE
}

/// The request refused when it declares a vendor's hosted tool that Cordon does not run
/// (not a code tool, a tool search, a computer tool, or a browser toolset `bound` to a
/// computer) and that `upstream` cannot take: encoding would
/// leave it out, and the model would answer as if it had never been offered.
fn refuse_unreachable(tools: &[ToolDefinition], upstream: Api, bound: bool) -> Result<(), Fail> {
    for (index, tool) in tools.iter().enumerate() {
        let ToolDefinition::BuiltIn { vendor, kind, .. } = tool else {
            continue;
        };
        if is_program_tool_type(kind)
            || (bound && is_browser_toolset(kind))
            || is_computer_tool(kind)
            || search_kind(kind).is_some()
            || tool.reaches(upstream.vendor())
        {
            continue;
        }
        let what = if kind.is_empty() {
            "a tool without a `type`".to_owned()
        } else {
            format!("tool type `{kind}`")
        };
        return Err(bad_request(format!(
            "tools[{index}]: {what} is built into the {} API; this gateway's upstream \
             speaks the {} API, which cannot take it, and Cordon does not run it. Remove it \
             from `tools`, or use an upstream of the {} API",
            vendor.api_name(),
            upstream.vendor().api_name(),
            vendor.api_name(),
        )));
    }
    Ok(())
}

impl RequestState<'_> {
    /// The computer `x-cordon-computer` binds: an open one by id, or a new browser opened
    /// on a URL (showing the model `display`); `None` without the header.
    async fn bind_computer(
        &self,
        header: Option<&str>,
        display: Option<(u64, u64)>,
    ) -> Result<Option<String>, Fail> {
        let Some(binding) = header else {
            return Ok(None);
        };
        let Some(computers) = &self.gw.computers else {
            return Err(bad_request(
                "x-cordon-computer: this server runs no computers",
            ));
        };
        if binding.starts_with("http://") || binding.starts_with("https://") {
            let id = computers.open(binding, display).await.map_err(|e| {
                bad_request(format!("x-cordon-computer: cannot open {binding}: {e}"))
            })?;
            Ok(Some(id))
        } else if computers.exists(binding).await {
            Ok(Some(binding.to_owned()))
        } else if computers.interrupted_by_restart(binding).await {
            Err(fail(
                409,
                "invalid_request_error",
                format!(
                    "x-cordon-computer: computer `{binding}` was interrupted by a restart of the \
                     server (its browser stopped with the process); open a new one \
                     (POST /v1/computers, or pass a URL)"
                ),
            ))
        } else {
            Err(bad_request(format!(
                "x-cordon-computer: no open computer `{binding}` (POST /v1/computers opens one, \
                 or pass a URL)"
            )))
        }
    }

    /// Classifies the request's tools into what the model is offered; refuses, before
    /// anything is opened or run, a hosted tool that would be dropped on the way upstream.
    pub(super) async fn setup_tools(
        &mut self,
        tools: &[ToolDefinition],
        computer_header: Option<&str>,
        computer_id: &mut Option<String>,
    ) -> Result<(), Fail> {
        refuse_unreachable(tools, self.gw.upstream.api(), computer_header.is_some())?;
        let mut code_kind: Option<String> = None;
        for (index, tool) in tools.iter().enumerate() {
            if let ToolDefinition::BuiltIn { kind, .. } = tool
                && is_program_tool_type(kind)
            {
                if let Some(first) = &code_kind {
                    return Err(bad_request(format!(
                        "tools[{index}]: `{kind}` is a second code tool (`{first}` is declared \
                         already); declare one"
                    )));
                }
                // Chat Completions has no item for a program nor a caller on a call: its
                // client could not tell the program's calls from the model's.
                if kind == PROGRAM_TOOL && self.api == Api::OpenaiChat {
                    return Err(bad_request(format!(
                        "tools[{index}]: `{PROGRAM_TOOL}` needs a Responses (or Messages) \
                         client: Chat Completions cannot show a program or who made a call"
                    )));
                }
                code_kind = Some(kind.clone());
            }
        }
        let searches = declared_searches(tools)?;
        let mut search = (!searches.is_empty()).then(|| ToolSearch::new(searches));
        let mut program_tools = Vec::new();
        for (index, tool) in tools.iter().enumerate() {
            match tool {
                ToolDefinition::Function(f) => {
                    self.client_names.insert(f.name.clone());
                    let defer = deferred(index, f)?;
                    let programmatic = code_kind.as_ref().is_some_and(|k| {
                        f.allowed_callers
                            .iter()
                            .any(|c| c == k || c == "programmatic")
                    });
                    if programmatic {
                        program_tools.push(ToolDeclaration {
                            name: f.name.clone(),
                            description: f.description.clone().unwrap_or_default(),
                            input_schema: f.input_schema.clone(),
                            policy: Policy::Allow,
                            defer_loading: false,
                            handler: HandlerSpec::Client {},
                        });
                    }
                    let direct = f.allowed_callers.is_empty()
                        || f.allowed_callers.iter().any(|c| c == "direct");
                    match (&mut search, defer && direct) {
                        (Some(search), true) => search.defer(f),
                        (None, true) => {
                            return Err(bad_request(format!(
                                "tools[{index}] (`{}`) has `defer_loading: true` but no tool \
                                 search is declared (`tool_search_tool_regex_20251119` or \
                                 `tool_search_tool_bm25_20251119`): nothing could load it",
                                f.name
                            )));
                        }
                        (_, false) if direct => {
                            let mut offered = f.clone();
                            offered.allowed_callers.clear();
                            offered.extra.remove("defer_loading");
                            self.offered.push(ToolDefinition::Function(offered));
                        }
                        (_, false) => {}
                    }
                }
                ToolDefinition::BuiltIn { kind, .. }
                    if is_program_tool_type(kind) || search_kind(kind).is_some() => {}
                ToolDefinition::BuiltIn { kind, data, .. } if is_browser_toolset(kind) => {
                    // Unbound, the client runs the members: only the shape is checked.
                    let browser = BrowserTool::read(kind, data, computer_header.is_some())
                        .map_err(|e| bad_request(format!("tools[{index}]: {e}")))?;
                    let Some(id) = self.bind_computer(computer_header, None).await? else {
                        // Unbound: the client runs it (an Anthropic upstream only; refused
                        // for the others above).
                        self.offered.push(tool.clone());
                        continue;
                    };
                    *computer_id = Some(id.clone());
                    let upstream = self.gw.upstream.api().vendor();
                    self.offered.push(if upstream == Vendor::Anthropic {
                        ToolDefinition::BuiltIn {
                            vendor: Vendor::Anthropic,
                            kind: kind.clone(),
                            data: browser.upstream_declaration(data),
                        }
                    } else {
                        browser.function()
                    });
                    self.computer = Some(BoundComputer {
                        id,
                        name: BROWSER.to_owned(),
                        actions: ComputerActions::of(kind, data),
                        browser: Some(browser),
                        gemini: None,
                    });
                }
                ToolDefinition::BuiltIn { kind, data, vendor } if is_computer_tool(kind) => {
                    let name = data["name"].as_str().unwrap_or("computer").to_owned();
                    let actions = ComputerActions::of(kind, data);
                    match self
                        .bind_computer(computer_header, display_of(data))
                        .await?
                    {
                        Some(id) => {
                            *computer_id = Some(id.clone());
                            // A Gemini upstream drives it with its own computer-use tool.
                            let gemini = (self.gw.upstream.api() == Api::Gemini)
                                .then(|| GeminiComputer::of(data));
                            self.computer = Some(BoundComputer {
                                id,
                                name: name.clone(),
                                actions: actions.clone(),
                                browser: None,
                                gemini,
                            });
                        }
                        // Unbound: a client tool like any other.
                        None => {
                            self.client_names.insert(name.clone());
                        }
                    }
                    // The vendor's own tool reaches an upstream of that vendor when Cordon runs
                    // Anthropic's actions (bound) or the client runs the vendor's (unbound:
                    // `computer_call` items pass through as they are). Otherwise the model
                    // gets a function taking Anthropic's actions, which Cordon or the client
                    // runs.
                    let upstream_vendor = self.gw.upstream.api().vendor();
                    let computer_bound = self.computer.is_some();
                    let gemini = self.computer.as_ref().and_then(|c| c.gemini.as_ref());
                    if let Some(gemini) = gemini {
                        self.offered.push(gemini.declaration());
                    } else if *vendor == upstream_vendor
                        && (!computer_bound || *vendor == Vendor::Anthropic)
                    {
                        self.offered.push(tool.clone());
                    } else {
                        self.offered.push(computer_function(&name, data, &actions));
                    }
                }
                other => self.offered.push(other.clone()),
            }
        }
        if let Some(kind) = code_kind {
            if !self.gw.containers.available() {
                return Err(bad_request(format!(
                    "`{kind}`: code execution is not available on this server"
                )));
            }
            let registry = ToolRegistry::new(program_tools)
                .map_err(|e| bad_request(format!("tools callable from code execution: {e}")))?;
            // Responses' `programmatic_tool_calling` runs JavaScript; the other code tools
            // run the server's code language (Python unless the operator chose otherwise).
            let (name, language) = if kind == PROGRAM_TOOL {
                (PROGRAM_TOOL, Language::Javascript)
            } else {
                (CODE_TOOL, self.gw.containers.language())
            };
            self.offered.push(program_function(
                name,
                code_tool_description(&registry, language),
                language,
            ));
            self.code_execution = Some(CodeExecution {
                kind,
                name: name.to_owned(),
                language,
                tools: Dispatcher::new(Arc::new(registry)),
            });
        }
        if let Some(operator) = &self.gw.operator {
            for tool in operator.registry().iter() {
                let d = &tool.declaration;
                // An `ask` tool needs an approval, which only the Messages API can carry
                // (`cordon_approval`): other clients are not offered it.
                let unanswerable = d.policy == Policy::Ask && self.api != Api::Anthropic;
                if self.client_names.contains(&d.name) || d.policy == Policy::Deny || unanswerable {
                    continue;
                }
                // The operator's deferral applies when the client declares a search;
                // without one the tool is offered as usual.
                match (&mut search, d.defer_loading) {
                    (Some(search), true) => {
                        if let ToolDefinition::Function(f) = operator_function(d) {
                            search.defer(&f);
                        }
                    }
                    _ => self.offered.push(operator_function(d)),
                }
            }
        }
        if let Some(search) = search {
            self.offered.extend(search.functions());
            self.tool_search = Some(search);
        }
        Ok(())
    }
}
