//! A Query's resume state, put together from the `query_resume_states` view, its stream's phase, its
//! pending tool calls and its last message: what `GET /queries/{ns}/{name}/state` answers and the Query page
//! shows.

use super::{
    RouteState,
    model::{BlockedOn, Checkpoint, QueryName, ResumeState, WaitingFor},
    pending::{Pending, pending},
    store::{QueryStore, ResumeRow, StreamPhase},
};
use crate::{db::StoreResult, timestamp::iso_timestamp};

/// The phase of Query `namespace/name` alone (what the Query page shows), without reading its stream:
/// `unknown` when neither a question nor a stream knows it.
pub async fn phase(store: &QueryStore, namespace: &str, name: &str) -> StoreResult<String> {
    let resume = store.resume_row(namespace, name).await?;
    let stream = store.stream_phase(name).await?;
    Ok(phase_of(resume.as_ref(), stream.as_ref()))
}

/// The phase from the resume row, else the stream's.
fn phase_of(resume: Option<&ResumeRow>, stream: Option<&StreamPhase>) -> String {
    match (resume, stream) {
        (Some(resume), _) => resume.phase.clone(),
        (None, Some(stream)) => stream.phase.clone(),
        // Only messages, or nothing yet: a Query that did not stream, whose phase only Kubernetes knows.
        (None, None) => "unknown".to_owned(),
    }
}

/// The resume state of Query `namespace/name`, or `None` when the broker knows nothing of it (no question
/// named it, it has no stream and no messages).
pub async fn load(state: &RouteState, namespace: String, name: String) -> StoreResult<Option<ResumeState>> {
    let resume = state.query_state.resume_row(&namespace, &name).await?;
    let stream = state.query_state.stream_phase(&name).await?;
    let last_message_sequence = state.query_state.last_message_sequence(&name).await?;
    if resume.is_none() && stream.is_none() && last_message_sequence.is_none() {
        return Ok(None);
    }
    // The executor completes its stream right after asking for an approval: read a completed one too.
    let Pending { tool_calls, tool_approval } = match &stream {
        Some(_) => pending(&state.chunks, &name).await?,
        None => Pending::default(),
    };
    let pending = if stream.as_ref().is_some_and(|stream| stream.completed) { Vec::new() } else { tool_calls };
    let phase = if tool_approval.is_some() { "waiting".to_owned() } else { phase_of(resume.as_ref(), stream.as_ref()) };
    let blocked_on = resume.as_ref().and_then(|row| {
        Some(BlockedOn {
            kind: "question",
            question_id: row.question_id.clone()?,
            task_id: row.task_id,
            tool_call_id: row.tool_call_id.clone(),
            status: row.question_status.clone()?,
        })
    });
    let waiting_for = resume.as_ref().and_then(|row| {
        let since = row.waiting_since?;
        Some(WaitingFor {
            question_id: row.question_id.clone()?,
            task_id: row.task_id,
            tool_call_id: row.tool_call_id.clone(),
            since: iso_timestamp(since),
        })
    });
    let blocking_call = blocked_on.as_ref().and_then(|b| b.tool_call_id.as_deref());
    let pending_tool_call =
        pending.iter().find(|call| Some(call.tool_call_id.as_str()) == blocking_call).or(pending.last()).cloned();
    Ok(Some(ResumeState {
        query: QueryName { namespace, name },
        phase,
        waiting_for,
        pending_tool_calls: pending,
        pending_tool_approval: tool_approval,
        can_resume: resume.as_ref().is_some_and(|row| row.can_resume),
        blocked_on,
        conversation_checkpoint: Checkpoint { last_message_sequence, pending_tool_call },
    }))
}
