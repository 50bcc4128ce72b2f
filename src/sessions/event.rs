//! What an event means to its session: the fields of its `data` upstream's rules read, and its `reason`.

/// The session-relevant part of an event's `data` (all strings on the wire), plus its `reason`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionEvent {
    /// `data.sessionId`.
    pub session_id: String,
    /// `data.queryName`.
    pub query_name: String,
    /// `data.queryNamespace`.
    pub query_namespace: Option<String>,
    /// `data.conversationId`.
    pub conversation_id: Option<String>,
    /// `data.agent`.
    pub agent: Option<String>,
    /// `data.team`.
    pub team: Option<String>,
    /// `data.tool`, or else `data.toolName` (the completions executor's name for it).
    pub tool: Option<String>,
    /// `data.targetType`.
    pub target_type: Option<String>,
    /// `data.error`.
    pub error: Option<String>,
    /// The event's `reason`.
    pub reason: String,
}

impl SessionEvent {
    /// Reads an event's `data` (`sessionId`, `queryName`, …); `None` when it names no session or no query,
    /// which upstream drops. Values that are not strings count as absent (the event model rejects them
    /// before this is reached).
    pub fn from_data(data: &serde_json::Map<String, serde_json::Value>, reason: &str) -> Option<Self> {
        let text = |key: &str| data.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        let session_id = text("sessionId").filter(|s| !s.is_empty())?;
        let query_name = text("queryName").filter(|s| !s.is_empty())?;
        Some(SessionEvent {
            session_id,
            query_name,
            query_namespace: text("queryNamespace"),
            conversation_id: text("conversationId"),
            agent: text("agent"),
            team: text("team"),
            tool: text("tool").filter(|t| !t.is_empty()).or_else(|| text("toolName")),
            target_type: text("targetType"),
            error: text("error"),
            reason: reason.to_owned(),
        })
    }
}
