//! The canonical types: what every vendor shape decodes into.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Vendor fields the canonical model does not name, kept so nothing is silently lost.
pub type Extra = Map<String, Value>;

/// Which API a vendor-specific piece (reasoning, built-in tool) came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    Anthropic,
    OpenaiChat,
    OpenaiResponses,
    Gemini,
}

impl Vendor {
    /// The API's name in messages (`Anthropic Messages`, `OpenAI Chat Completions`, …).
    pub fn api_name(self) -> &'static str {
        match self {
            Vendor::Anthropic => "Anthropic Messages",
            Vendor::OpenaiChat => "OpenAI Chat Completions",
            Vendor::OpenaiResponses => "OpenAI Responses",
            Vendor::Gemini => "Gemini",
        }
    }
}

/// A model request in canonical form.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Request {
    /// The vendor this was decoded from: `extra` maps are re-encoded only for it.
    pub origin: Option<Vendor>,
    pub model: String,
    /// System text; `None` when the request had none.
    pub system: Option<System>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: Option<ToolChoice>,
    /// `Some(false)` when the client forbade several calls in one turn.
    pub parallel_tool_calls: Option<bool>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stop_sequences: Vec<String>,
    pub stream: bool,
    /// Top-level request fields not modelled above (metadata, thinking, container, …).
    pub extra: Extra,
}

/// System prompt: a plain string or text blocks (Anthropic allows both).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum System {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl System {
    /// The whole system text, blocks joined by blank lines.
    pub fn text(&self) -> String {
        match self {
            System::Text(t) => t.clone(),
            System::Blocks(blocks) => join_text(blocks),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One message: a role and its content blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
    /// The vendor sent the content as a bare string (kept so it is re-encoded as one).
    pub content_was_string: bool,
    pub extra: Extra,
}

impl Message {
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self {
            role,
            content,
            content_was_string: false,
            extra: Extra::new(),
        }
    }
}

/// Image data: inline base64 or a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

impl ImageSource {
    /// As a URL: the URL itself or a `data:` URL.
    pub fn to_url(&self) -> String {
        match self {
            ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
            ImageSource::Url { url } => url.clone(),
        }
    }

    /// From a URL, turning `data:<type>;base64,<data>` back into inline data.
    pub fn from_url(url: &str) -> Self {
        if let Some(rest) = url.strip_prefix("data:")
            && let Some((media_type, data)) = rest.split_once(";base64,")
        {
            return ImageSource::Base64 {
                media_type: media_type.to_owned(),
                data: data.to_owned(),
            };
        }
        ImageSource::Url {
            url: url.to_owned(),
        }
    }
}

/// Who made a tool call: the model directly, or a program (programmatic tool calling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCaller {
    /// `direct`, `code_execution_20250825` (or a later version), `program`, …
    pub kind: String,
    pub tool_id: Option<String>,
}

/// A call of a client or function tool by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The pairing key (Anthropic `id`, Chat `tool_calls[].id`, Responses `call_id`).
    pub id: String,
    pub name: String,
    /// The arguments; a JSON value once complete.
    pub input: Value,
    pub caller: Option<ToolCaller>,
    pub extra: Extra,
}

/// Content of a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl ToolResultContent {
    pub fn text(&self) -> String {
        match self {
            ToolResultContent::Text(t) => t.clone(),
            ToolResultContent::Blocks(b) => join_text(b),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub content: ToolResultContent,
    pub is_error: bool,
    pub extra: Extra,
}

/// A content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
        extra: Extra,
    },
    Image {
        source: ImageSource,
        extra: Extra,
    },
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    /// Reasoning/thinking, carried as the vendor's own JSON so it can go back to it.
    Reasoning {
        vendor: Vendor,
        data: Value,
    },
    /// A call of a server tool (code execution), e.g. Anthropic `server_tool_use`.
    ServerToolCall {
        id: String,
        name: String,
        input: Value,
        extra: Extra,
    },
    /// A server tool's result, e.g. `code_execution_tool_result`; `kind` is the block type.
    ServerToolResult {
        kind: String,
        tool_use_id: String,
        content: Value,
        extra: Extra,
    },
    /// A block of another kind, kept verbatim for its vendor.
    Opaque {
        vendor: Vendor,
        data: Value,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            extra: Extra::new(),
        }
    }
}

pub(crate) fn join_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolDefinition {
    Function(FunctionTool),
    /// A vendor built-in (`code_execution_20250825`, `computer_20251124`, OpenAI
    /// `computer`, …): its type string and the whole declaration.
    BuiltIn {
        vendor: Vendor,
        kind: String,
        data: Value,
    },
}

impl ToolDefinition {
    /// Whether a request to `vendor` can declare this tool: a function tool goes to every
    /// vendor, a built-in only to its own (the encoders leave the others out).
    pub fn reaches(&self, vendor: Vendor) -> bool {
        match self {
            ToolDefinition::Function(_) => true,
            ToolDefinition::BuiltIn { vendor: from, .. } => *from == vendor,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    /// Who may call it (`direct`, `code_execution_20250825`, `programmatic`); empty = unset.
    pub allowed_callers: Vec<String>,
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    Auto,
    /// Anthropic `any`, OpenAI `required`.
    Any,
    Tool {
        name: String,
    },
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    PauseTurn,
    Refusal,
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub extra: Extra,
}

/// The code-execution container a turn ran in (Anthropic `container`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Container {
    pub id: String,
    pub expires_at: Option<String>,
}

/// One assistant turn: the model's answer to a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The vendor this was decoded from: `extra` maps are re-encoded only for it.
    pub origin: Option<Vendor>,
    pub id: String,
    pub model: String,
    pub content: Vec<ContentBlock>,
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
    pub usage: Usage,
    pub container: Option<Container>,
    pub extra: Extra,
}

impl Turn {
    /// The tool calls of this turn, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall(c) => Some(c),
            _ => None,
        })
    }
}

/// The name Cordon's code tool has in the canonical conversation (a server tool the gateway
/// runs in its sandbox; the Responses API calls it `code_interpreter`).
pub const CODE_TOOL: &str = "code_execution";

/// The name and type of Cordon's JavaScript code tool: the Responses API's
/// `programmatic_tool_calling`, whose programs are `program` / `program_output` items.
pub const PROGRAM_TOOL: &str = "programmatic_tool_calling";

/// Whether a tool type (a declaration's `type`, a call's `caller.type`) is the code tool:
/// Anthropic's `code_execution_*` in any version (`_20250825`, `_20260120`, `_20260521`, …)
/// or the Responses API's `code_interpreter`.
pub fn is_code_tool_type(kind: &str) -> bool {
    kind.starts_with("code_execution_") || kind == "code_interpreter"
}
