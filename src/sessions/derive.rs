//! What a session shows that is derived from its queries (upstream's `recalculateConversations` and
//! `recalculateParticipants`): one conversation per conversation id its queries have, and one participant
//! per conversation name.

use chrono::{DateTime, Utc};

use super::state::{ConversationSummary, Participant, ParticipantType, Phase, QueryState};

fn participant_type_of(target_type: &str) -> ParticipantType {
    match target_type {
        "team" => ParticipantType::Team,
        "tool" => ParticipantType::Tool,
        _ => ParticipantType::Agent,
    }
}

pub(super) fn conversations_of(queries: &[QueryState]) -> Vec<ConversationSummary> {
    let mut groups: Vec<(&str, Vec<&QueryState>)> = Vec::new();
    for query in queries {
        let Some(id) = query.conversation_id.as_deref().filter(|id| !id.is_empty()) else { continue };
        match groups.iter_mut().find(|(group, _)| *group == id) {
            Some((_, members)) => members.push(query),
            None => groups.push((id, vec![query])),
        }
    }
    groups
        .into_iter()
        .map(|(id, members)| {
            let mut participants: Vec<String> = Vec::new();
            for query in &members {
                let who = [&query.team, &query.agent, &query.tool].into_iter().flatten().find(|w| !w.is_empty());
                if let Some(who) = who
                    && !participants.contains(who)
                {
                    participants.push(who.clone());
                }
            }
            let (first, last) = (members[0], members[members.len() - 1]);
            ConversationSummary {
                conversation_id: id.to_owned(),
                name: participants.first().cloned().unwrap_or_else(|| id.to_owned()),
                participants,
                message_count: members.len(),
                duration: duration(first.created_at, last.completed_at),
                start_time: crate::timestamp::iso_timestamp(first.created_at),
                participant_type: participant_type_of(&first.target_type),
                error_count: members.iter().filter(|q| q.phase == Phase::Error).count(),
            }
        })
        .collect()
}

pub(super) fn participants_of(conversations: &[ConversationSummary]) -> Vec<Participant> {
    let mut participants: Vec<Participant> = Vec::new();
    for conversation in conversations {
        if !participants.iter().any(|p| p.name == conversation.name) {
            participants.push(Participant {
                id: conversation.name.clone(),
                name: conversation.name.clone(),
                kind: conversation.participant_type,
            });
        }
    }
    participants
}

/// `1m 3s`, `42s`, or `ongoing` when there is no end yet (whole seconds, rounded down, as upstream).
pub(super) fn duration(start: DateTime<Utc>, end: Option<DateTime<Utc>>) -> String {
    let Some(end) = end else { return "ongoing".into() };
    let seconds = (end - start).num_milliseconds().div_euclid(1000);
    let minutes = seconds.div_euclid(60);
    if minutes > 0 { format!("{minutes}m {}s", seconds % 60) } else { format!("{seconds}s") }
}
