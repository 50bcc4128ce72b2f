//! The MCP tools `ask_question` and `list_pending_questions`: their arguments and results as typed structs
//! (the schemas `tools/list` shows are derived from them, for both protocol eras), the caller's identity from
//! configurable headers, and the result a closed question gives.

use axum::http::{HeaderMap, request::Parts};
use rmcp::{
    ErrorData as McpError,
    handler::server::common::{schema_for_empty_input, schema_for_output, schema_for_type},
    model::{CallToolResult, ContentBlock, JsonObject, Tool},
    schemars::JsonSchema,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::caller::{self, Modes};
use crate::{
    auth::Principal,
    config::Config,
    questions::{
        bodies::NewQuestion,
        channel::CALLER,
        model::{QueryRef, Question, QuestionStatus},
        policy::Answerer,
        timeout::{EscalateTo, OnTimeout},
    },
    state::AppState,
    traces::wait::{TraceParent, WaitTrace},
    validate::shape::from_value,
};

/// The broker's MCP tools: each is named, described and given its task support here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerTool {
    /// Asks a person and waits for the answer.
    AskQuestion,
    /// Lists pending questions.
    ListPendingQuestions,
}

impl BrokerTool {
    /// In `tools/list`'s order: the listing-only tool first, since generic clients (and the conformance
    /// suite) probe the first tool with `{}`.
    pub const ALL: [BrokerTool; 2] = [BrokerTool::ListPendingQuestions, BrokerTool::AskQuestion];

    /// The tool's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            BrokerTool::AskQuestion => "ask_question",
            BrokerTool::ListPendingQuestions => "list_pending_questions",
        }
    }

    /// The tool a call names, if it is one of ours.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// Whether a call may run as a task (MCP Tasks): only a question waits long enough to need one.
    pub fn supports_tasks(self) -> bool {
        matches!(self, BrokerTool::AskQuestion)
    }

    /// The tool as `tools/list` shows it.
    fn definition(self) -> Tool {
        match self {
            BrokerTool::AskQuestion => Tool::new(
                self.name(),
                "Ask a person (or team) a question and wait for the answer. The question appears in the \
                 broker's web page and REST API (and the listed channels); the call returns once someone \
                 answers. Call it as a task to avoid holding the connection open.",
                schema_for_type::<AskArguments>(),
            )
            .with_raw_output_schema(schema_for_output::<Answered>()),
            BrokerTool::ListPendingQuestions => Tool::new(
                self.name(),
                "List questions still waiting for an answer: the calling agent's own when the broker knows \
                 who is calling, otherwise all of them.",
                schema_for_empty_input(),
            )
            .with_raw_output_schema(schema_for_output::<PendingQuestions>()),
        }
    }
}

/// What the broker knows about who is calling.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The agent, as `ark://agents/<name>`.
    pub agent: Option<String>,
    /// The Query.
    pub query: Option<QueryRef>,
    /// With authentication on, the principal whose tasks and questions these are (no one else's are seen);
    /// `None` with it off.
    pub owner: Option<String>,
    /// The caller's trace context (the request's `traceparent` header, or the call's `_meta.traceparent`):
    /// a question asked with one becomes a span of that trace when it closes.
    pub trace: Option<WaitTrace>,
    /// With authentication on, who the request authenticated as: the person at the client answers
    /// `mcp:caller` questions as this principal.
    pub principal: Option<Principal>,
    /// The elicitation modes the client declared (`mcp:caller`).
    pub elicitation: Modes,
    /// Where links to a question's page start (`--public-url`, else this request's host on the HTTP port).
    pub page_base: String,
}

impl Caller {
    /// Reads the request: the principal, and the identity headers (an MCPServer or Query override can set
    /// them).
    pub fn from_request(parts: &Parts, state: &AppState) -> Self {
        // The layer in front lets no unauthenticated request through with auth on; an owner no question has
        // keeps a missing principal from ever seeing everyone's.
        let principal = state.auth.is_on().then(|| parts.extensions.get::<Principal>().cloned()).flatten();
        let owner = state.auth.is_on().then(|| principal.as_ref().map_or_else(String::new, |p| p.name().to_owned()));
        // A 2025-11-25 client's modes come back in the session id it was given; a 2026-07-28 request's
        // `_meta` overrides them (`BrokerMcp::caller`).
        let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
        let elicitation = session.map(Modes::from_session_id).unwrap_or_default();
        let page_base = page_base(&parts.headers, &state.config);
        Caller { owner, principal, elicitation, page_base, ..Self::from_headers(&parts.headers, &state.config) }
    }

    fn from_headers(headers: &HeaderMap, config: &Config) -> Self {
        let header = |name: &str| {
            headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
        };
        let agent = header(&config.agent_header)
            .map(|agent| if agent.starts_with("ark://") { agent } else { format!("ark://agents/{agent}") });
        let query = header(&config.query_header).map(|query| match query.split_once('/') {
            Some((namespace, name)) => QueryRef { namespace: Some(namespace.to_owned()), name: name.to_owned() },
            None => QueryRef { namespace: header(&config.query_namespace_header), name: query },
        });
        Caller { agent, query, trace: WaitTrace::from_headers(headers, config), ..Caller::default() }
    }

    /// The caller as one call's `params._meta.traceparent` (SEP-414) says: a context there that reads is the
    /// call's own and wins over the request's header; a malformed one is ignored.
    pub fn traced(mut self, meta_traceparent: Option<&str>, config: &Config) -> Self {
        if let Some(traceparent) = meta_traceparent.filter(|value| TraceParent::parse(value).is_some()) {
            self.trace = WaitTrace::of(Some(traceparent), config);
        }
        self
    }
}

/// Where links to a question's page start: `--public-url`, else the request's host with the HTTP API's port
/// (the MCP endpoint has a port of its own), over http.
fn page_base(headers: &HeaderMap, config: &Config) -> String {
    if let Some(public) = &config.public_url {
        return public.trim_end_matches('/').to_owned();
    }
    let host = headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    format!("http://{name}:{}", config.port)
}

/// `ask_question`'s arguments: the input schema `tools/list` shows is derived from this type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "rmcp::schemars")]
pub struct AskArguments {
    /// Who should answer: ark://users/<name>, ark://teams/<name>, ark://agents/<name> or ark://channels/<name>
    pub recipient: String,
    /// The question, as the person will read it
    pub content: String,
    /// Where else to deliver it: slack:<channel id or #name>, github:<owner>/<repo>#<issue or PR number>, or
    /// mcp:caller to ask the person at this MCP client (elicitation: a form, or a link to the question's page)
    pub channels: Option<Vec<String>>,
    /// Short answers offered as buttons, e.g. ["Yes, proceed", "No, cancel"]
    pub options: Option<Vec<String>>,
    /// A form for a typed answer instead of text: MCP elicitation's restricted JSON Schema, e.g.
    /// {"type":"object","properties":{"approve":{"type":"boolean"},"replicas":{"type":"integer","minimum":1}},"required":["approve"]}.
    /// The answer is then an object of these fields (the result's structuredContent.response).
    pub response_schema: Option<serde_json::Map<String, Value>>,
    /// Who asks (default: the calling agent)
    pub sender: Option<String>,
    /// The asking Query's name, if the headers do not say
    pub query_name: Option<String>,
    /// The asking Query's namespace
    pub query_namespace: Option<String>,
    /// The LLM tool call this answers
    pub tool_call_id: Option<String>,
    /// Seconds until the question's timeout passes
    pub timeout_seconds: Option<i64>,
    /// What the timeout does: expire (default), default (answered with the responseSchema's defaults) or
    /// escalate (to escalateTo, with a second timeout as long)
    pub on_timeout: Option<OnTimeout>,
    /// Who else hears of it when its timeout escalates it: {"recipients": [...], "channels": [...]}
    pub escalate_to: Option<EscalateTo>,
    /// Re-notify its channels this often (seconds) until it is answered
    pub remind_every_seconds: Option<i64>,
}

/// What an answered `ask_question` returns (its output schema is derived from this type).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "rmcp::schemars")]
pub struct Answered {
    pub question_id: String,
    /// The text, or for a question with a responseSchema the object of its fields.
    pub response: Value,
    #[schemars(extend("format" = "date-time"))]
    pub answered_at: String,
}

/// What `list_pending_questions` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct PendingQuestions {
    pub questions: Vec<PendingQuestion>,
}

/// One pending question in that list.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "rmcp::schemars")]
pub struct PendingQuestion {
    pub id: String,
    pub recipient: String,
    pub content: String,
    pub created_at: String,
}

/// The tools as `tools/list` shows them.
pub fn definitions() -> Vec<Tool> {
    BrokerTool::ALL.map(BrokerTool::definition).into()
}

/// Why `ask_question` asked nothing.
#[derive(Debug)]
pub enum NotAsked {
    /// Arguments that do not make a question: a JSON-RPC error (invalid params).
    Invalid(McpError),
    /// A question its caller's client cannot be asked (`mcp:caller` without elicitation): a tool error
    /// result, which the model reads.
    ToolError(Box<CallToolResult>),
}

impl From<McpError> for NotAsked {
    fn from(error: McpError) -> Self {
        NotAsked::Invalid(error)
    }
}

/// The question `ask_question` asks ([`ask_arguments`]); with `mcp:caller`, only when the answer policy would
/// let the person at this client answer it (the caller's principal), or it would wait on that channel in vain.
pub async fn ask(arguments: Option<&JsonObject>, caller: &Caller, state: &AppState) -> Result<NewQuestion, NotAsked> {
    let question = ask_arguments(arguments, caller, &state.config)?;
    if question.channels.iter().any(|channel| channel == CALLER) {
        let answerer = Answerer::Caller(caller.principal.as_ref());
        if let Err(why) = state.answer_policy.check_before_asking(&question, answerer).await {
            let why = format!("The person at this client could not answer this question through '{CALLER}': {why}");
            return Err(NotAsked::ToolError(Box::new(tool_error(why))));
        }
    }
    Ok(question)
}

/// Builds the question `ask_question` asks from its arguments and the caller, checked as REST checks one;
/// with `mcp:caller`, the elicitation that asks the person at the client.
pub fn ask_arguments(
    arguments: Option<&JsonObject>,
    caller: &Caller,
    config: &Config,
) -> Result<NewQuestion, NotAsked> {
    let arguments = Value::Object(arguments.cloned().unwrap_or_default());
    // The same messages as REST's: `recipient: required`, `channels: expected array, received string`.
    let arguments: AskArguments =
        from_value(&arguments).map_err(|error| McpError::invalid_params(error.to_string(), None))?;
    let query = match arguments.query_name {
        Some(name) => Some(QueryRef { namespace: arguments.query_namespace, name }),
        None => caller.query.clone(),
    };
    let mut question = NewQuestion {
        sender: arguments.sender.or_else(|| caller.agent.clone()).unwrap_or_else(|| "ark://agents/unknown".into()),
        recipient: arguments.recipient,
        content: arguments.content,
        channels: arguments.channels.unwrap_or_default(),
        options: arguments.options.unwrap_or_default(),
        response_schema: arguments.response_schema.map(Value::Object),
        query,
        tool_call_id: arguments.tool_call_id,
        ttl_seconds: None,
        timeout_seconds: arguments.timeout_seconds,
        expires_at: None,
        on_timeout: arguments.on_timeout,
        escalate_to: arguments.escalate_to,
        remind_every_seconds: arguments.remind_every_seconds,
        task_id: None,
        task_ttl_ms: None,
        owner: caller.owner.clone(),
        trace: caller.trace.clone(),
        caller_elicitation: None,
    };
    if question.channels.iter().any(|channel| channel == CALLER) {
        let asked = caller::stored(&question, caller.elicitation);
        question.caller_elicitation = Some(asked.map_err(|why| NotAsked::ToolError(Box::new(tool_error(why))))?);
    }
    question.admit(config).map_err(|error| McpError::invalid_params(error.to_string(), None))?;
    Ok(question)
}

/// The text of a result's first text block.
pub fn text_of(result: &CallToolResult) -> String {
    result.content.iter().find_map(|block| block.as_text().map(|text| text.text.clone())).unwrap_or_default()
}

/// A tool error result saying `why`.
fn tool_error(why: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(why)])
}

/// The tool result of a closed question; `None` while it is pending.
pub fn outcome(question: &Question) -> Option<CallToolResult> {
    let refusal =
        |why: &str| CallToolResult::error(vec![ContentBlock::text(format!("Question {} {why}", question.id))]);
    match question.status {
        QuestionStatus::Pending => None,
        QuestionStatus::Answered => {
            let answer = Answered {
                question_id: question.id.clone(),
                response: question.response.clone().unwrap_or_default(),
                answered_at: question.answered_at.clone().unwrap_or_default(),
            };
            Some(structured(&answer))
        }
        QuestionStatus::Cancelled => Some(refusal("was cancelled before anyone answered it.")),
        QuestionStatus::Expired => Some(refusal("expired before anyone answered it.")),
        QuestionStatus::Declined => {
            let by = question.answered_by.as_deref().map(|by| format!(" by {by}")).unwrap_or_default();
            let why = question.decline_reason.as_deref().map(|why| format!(": {why}")).unwrap_or_default();
            Some(refusal(&format!("was declined{by}{why}")))
        }
    }
}

/// The result of `list_pending_questions`.
pub fn pending_list(questions: &[Question]) -> CallToolResult {
    let questions = questions
        .iter()
        .map(|q| PendingQuestion {
            id: q.id.clone(),
            recipient: q.recipient.clone(),
            content: q.content.clone(),
            created_at: q.created_at.clone(),
        })
        .collect();
    structured(&PendingQuestions { questions })
}

/// A result carrying `value` both as structured content and as its JSON text (for clients that read text).
fn structured(value: &impl Serialize) -> CallToolResult {
    let value = serde_json::to_value(value).expect("tool results serialise");
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}
