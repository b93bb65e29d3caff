//! The tools a request offers the model: the client's, the code tool (with the client
//! tools its programs may call), the computer tool, and the operator's; a vendor's hosted
//! tool that neither Cordon nor the upstream can run is refused here.

use std::sync::Arc;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::conversation::{
    Extra, FunctionTool, ToolDefinition, Vendor, is_code_tool_type,
};
use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use serde_json::{Value, json};

use super::computer_tool::{BoundComputer, ComputerActions};
use super::failure::{Fail, bad_request};
use super::request_state::{CodeExecution, RequestState};
use crate::tool_calls::{code_function, operator_function};
use crate::upstream::Api;

fn code_tool_description(program_tools: &ToolRegistry) -> String {
    let mut text = String::from(
        "Run Python code in a sandbox (no network, no files). The final expression's value \
         and everything printed are returned to you; nothing else is. Variables persist \
         between calls in the same container.",
    );
    if !program_tools.is_empty() {
        text.push_str(
            "\n\nThese tools are async functions in the program's globals: call them with \
             `await`, e.g. `r = await name(arg=value)`, and run several at once with \
             `await asyncio.gather(...)` (import asyncio). Their results reach only the \
             program: print what you need.\n",
        );
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
/// `computer` and `computer_use_preview`): Cordon runs it on a bound computer, and an
/// upstream of another vendor gets it as a function tool.
fn is_computer_tool(kind: &str) -> bool {
    kind.starts_with("computer_") || kind == "computer"
}

/// The request refused when it declares a vendor's hosted tool that Cordon does not run
/// (not the code tool, not a computer tool) and that `upstream` cannot take: encoding would
/// leave it out, and the model would answer as if it had never been offered.
fn refuse_unreachable(tools: &[ToolDefinition], upstream: Api) -> Result<(), Fail> {
    for (index, tool) in tools.iter().enumerate() {
        let ToolDefinition::BuiltIn { vendor, kind, .. } = tool else {
            continue;
        };
        if is_code_tool_type(kind) || is_computer_tool(kind) || tool.reaches(upstream.vendor()) {
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
    /// Classifies the request's tools into what the model is offered; refuses, before
    /// anything is opened or run, a hosted tool that would be dropped on the way upstream.
    pub(super) async fn setup_tools(
        &mut self,
        tools: &[ToolDefinition],
        computer_header: Option<&str>,
        computer_id: &mut Option<String>,
    ) -> Result<(), Fail> {
        refuse_unreachable(tools, self.gw.upstream.api())?;
        let mut code_kind: Option<String> = None;
        for tool in tools {
            if let ToolDefinition::BuiltIn { kind, .. } = tool
                && is_code_tool_type(kind)
            {
                code_kind = Some(kind.clone());
            }
        }
        let mut program_tools = Vec::new();
        for tool in tools {
            match tool {
                ToolDefinition::Function(f) => {
                    self.client_names.insert(f.name.clone());
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
                            handler: HandlerSpec::Client {},
                        });
                    }
                    let direct = f.allowed_callers.is_empty()
                        || f.allowed_callers.iter().any(|c| c == "direct");
                    if direct {
                        let mut offered = f.clone();
                        offered.allowed_callers.clear();
                        self.offered.push(ToolDefinition::Function(offered));
                    }
                }
                ToolDefinition::BuiltIn { kind, .. } if is_code_tool_type(kind) => {}
                ToolDefinition::BuiltIn { kind, data, vendor } if is_computer_tool(kind) => {
                    let name = data["name"].as_str().unwrap_or("computer").to_owned();
                    let actions = ComputerActions::of(kind, data);
                    match (computer_header, &self.gw.computers) {
                        (Some(binding), Some(computers)) => {
                            let id = if binding.starts_with("http://")
                                || binding.starts_with("https://")
                            {
                                computers
                                    .open(binding, display_of(data))
                                    .await
                                    .map_err(|e| {
                                        bad_request(format!(
                                            "x-cordon-computer: cannot open {binding}: {e}"
                                        ))
                                    })?
                            } else if computers.exists(binding).await {
                                binding.to_owned()
                            } else {
                                return Err(bad_request(format!(
                                    "x-cordon-computer: no open computer `{binding}` (POST /v1/computers opens one, or pass a URL)"
                                )));
                            };
                            *computer_id = Some(id.clone());
                            self.computer = Some(BoundComputer {
                                id,
                                name: name.clone(),
                                actions: actions.clone(),
                            });
                        }
                        (Some(_), None) => {
                            return Err(bad_request(
                                "x-cordon-computer: this server runs no computers",
                            ));
                        }
                        // Unbound: a client tool like any other.
                        (None, _) => {
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
                    if *vendor == upstream_vendor
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
            self.offered
                .push(code_function(code_tool_description(&registry)));
            self.code_execution = Some(CodeExecution {
                kind,
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
                self.offered.push(operator_function(d));
            }
        }
        Ok(())
    }
}
