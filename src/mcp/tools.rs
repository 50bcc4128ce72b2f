//! The MCP tools `ask_question` and `list_pending_questions`: their definitions, their arguments (with the
//! caller's identity from configurable headers), and the result a closed question gives.

use std::sync::Arc;

use axum::http::{HeaderMap, request::Parts};
use rmcp::{
    ErrorData as McpError,
    model::{CallToolResult, ContentBlock, JsonObject, Tool},
};
use serde_json::{Value, json};

use crate::{
    auth::Principal,
    config::Config,
    questions::model::{NewQuestion, QueryRef, Question, QuestionStatus},
    state::AppState,
};

/// Asks a person and waits for the answer.
pub const ASK_QUESTION: &str = "ask_question";
/// Lists pending questions.
pub const LIST_PENDING_QUESTIONS: &str = "list_pending_questions";

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
}

impl Caller {
    /// Reads the request: the principal, and the identity headers (an MCPServer or Query override can set
    /// them).
    pub fn from_request(parts: &Parts, state: &AppState) -> Self {
        // The layer in front lets no unauthenticated request through with auth on; an owner no question has
        // keeps a missing principal from ever seeing everyone's.
        let owner = state
            .auth
            .is_on()
            .then(|| parts.extensions.get::<Principal>().map_or_else(String::new, |p| p.name().to_owned()));
        Caller { owner, ..Self::from_headers(&parts.headers, &state.config) }
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
        Caller { agent, query, owner: None }
    }
}

/// The tools as `tools/list` shows them.
pub fn definitions() -> Vec<Tool> {
    let ask = Tool::new(
        ASK_QUESTION,
        "Ask a person (or team) a question and wait for the answer. The question appears in the broker's \
         web page and REST API (and the listed channels); the call returns once someone answers. Call it as a \
         task to avoid holding the connection open.",
        object(json!({
            "type": "object",
            "properties": {
                "recipient": {"type": "string", "description": "Who should answer: ark://users/<name>, ark://teams/<name>, ark://agents/<name> or ark://channels/<name>"},
                "content": {"type": "string", "description": "The question, as the person will read it"},
                "channels": {"type": "array", "items": {"type": "string"}, "description": "Where else to deliver it: slack:<channel id or #name>, github:<owner>/<repo>#<issue or PR number>"},
                "options": {"type": "array", "items": {"type": "string"}, "description": "Short answers offered as buttons, e.g. [\"Yes, proceed\", \"No, cancel\"]"},
                "sender": {"type": "string", "description": "Who asks (default: the calling agent)"},
                "queryName": {"type": "string", "description": "The asking Query's name, if the headers do not say"},
                "queryNamespace": {"type": "string", "description": "The asking Query's namespace"},
                "toolCallId": {"type": "string", "description": "The LLM tool call this answers"}
            },
            "required": ["recipient", "content"]
        })),
    )
    .with_raw_output_schema(Arc::new(object(json!({
        "type": "object",
        "properties": {
            "questionId": {"type": "string"},
            "response": {"type": "string"},
            "answeredAt": {"type": "string", "format": "date-time"}
        },
        "required": ["questionId", "response", "answeredAt"]
    }))));
    let list = Tool::new(
        LIST_PENDING_QUESTIONS,
        "List questions still waiting for an answer: the calling agent's own when the broker knows who is \
         calling, otherwise all of them.",
        object(json!({"type": "object", "properties": {}})),
    );
    // The listing-only tool first: generic clients (and the conformance suite) probe the first tool with `{}`.
    vec![list, ask]
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("tool schemas are objects"),
    }
}

/// Builds the question `ask_question` asks from its arguments and the caller.
pub fn ask_arguments(arguments: Option<&JsonObject>, caller: &Caller) -> Result<NewQuestion, McpError> {
    let empty = JsonObject::new();
    let arguments = arguments.unwrap_or(&empty);
    let text = |name: &str| -> Result<Option<String>, McpError> {
        match arguments.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(McpError::invalid_params(format!("{name} must be a string"), None)),
        }
    };
    let required = |name: &str| {
        text(name)?.ok_or_else(|| McpError::invalid_params(format!("missing required argument: {name}"), None))
    };
    let strings = |name: &str| match arguments.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| McpError::invalid_params(format!("{name} must be an array of strings"), None)),
        Some(_) => Err(McpError::invalid_params(format!("{name} must be an array of strings"), None)),
    };
    let (channels, options) = (strings("channels")?, strings("options")?);
    let query = match text("queryName")? {
        Some(name) => Some(QueryRef { namespace: text("queryNamespace")?, name }),
        None => caller.query.clone(),
    };
    let question = NewQuestion {
        sender: text("sender")?.or_else(|| caller.agent.clone()).unwrap_or_else(|| "ark://agents/unknown".into()),
        recipient: required("recipient")?,
        content: required("content")?,
        channels,
        options,
        query,
        tool_call_id: text("toolCallId")?,
        ttl_seconds: None,
        task_id: None,
        task_ttl_ms: None,
        owner: caller.owner.clone(),
    };
    question.validate().map_err(|error| McpError::invalid_params(error.to_string(), None))?;
    Ok(question)
}

/// The tool result of a closed question; `None` while it is pending.
pub fn outcome(question: &Question) -> Option<CallToolResult> {
    let refusal =
        |why: &str| CallToolResult::error(vec![ContentBlock::text(format!("Question {} {why}", question.id))]);
    match question.status {
        QuestionStatus::Pending => None,
        QuestionStatus::Answered => {
            let answer = json!({
                "questionId": question.id,
                "response": question.response,
                "answeredAt": question.answered_at,
            });
            let mut result = CallToolResult::success(vec![ContentBlock::text(answer.to_string())]);
            result.structured_content = Some(answer);
            Some(result)
        }
        QuestionStatus::Cancelled => Some(refusal("was cancelled before anyone answered it.")),
        QuestionStatus::Expired => Some(refusal("expired before anyone answered it.")),
    }
}

/// The result of `list_pending_questions`.
pub fn pending_list(questions: &[Question]) -> CallToolResult {
    let items: Vec<Value> = questions
        .iter()
        .map(|q| json!({"id": q.id, "recipient": q.recipient, "content": q.content, "createdAt": q.created_at}))
        .collect();
    let list = json!({"questions": items});
    let mut result = CallToolResult::success(vec![ContentBlock::text(list.to_string())]);
    result.structured_content = Some(list);
    result
}
