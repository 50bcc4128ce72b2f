//! Upstream's session rules, one case per rule of the wire contract §1.5.

use chrono::{Duration, TimeZone};

use super::{
    super::{derive::duration, state::ParticipantType},
    *,
};

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 10, 0, 0).unwrap() + Duration::milliseconds(seconds * 1000)
}

fn event(query: &str, reason: &str) -> SessionEvent {
    SessionEvent {
        session_id: "session-s1".into(),
        query_name: query.into(),
        reason: reason.into(),
        ..SessionEvent::default()
    }
}

fn with_error(mut event: SessionEvent, error: &str) -> SessionEvent {
    event.error = Some(error.into());
    event
}

/// Applies `events` to a fresh session, one second apart, in the order they arrived.
fn session_after(events: &[SessionEvent]) -> SessionState {
    let mut session = SessionState::new("session-s1", at(0));
    for (n, event) in events.iter().enumerate() {
        session.apply_event(event, Some(n as i64 + 1), at(n as i64));
    }
    session
}

#[test]
fn the_phase_follows_the_reason_checked_in_upstreams_order() {
    let cases = [
        ("QueryExecutionComplete", None, Phase::Done),
        ("QueryExecutionComplete", Some("boom"), Phase::Error),
        ("QueryExecutionComplete", Some(""), Phase::Done),
        ("QueryExecutionCanceled", None, Phase::Canceled),
        ("ErrorButCanceled", None, Phase::Canceled),
        ("LLMCallError", None, Phase::Error),
        ("QueryExecutionStart", None, Phase::Running),
        ("LLMCallComplete", Some("ignored"), Phase::Running),
        ("", None, Phase::Running),
    ];
    for (reason, error, phase) in cases {
        assert_eq!(phase_of(reason, error), phase, "{reason} with error {error:?}");
    }
}

#[test]
fn a_later_done_clears_an_earlier_error_the_hitl_pause() {
    let session = session_after(&[
        event("q", "QueryExecutionStart"),
        with_error(event("q", "QueryExecutionComplete"), "waiting for approval"),
        event("q", "QueryExecutionComplete"),
    ]);
    let query = &session.queries[0];
    assert_eq!((query.phase, query.error.as_deref()), (Phase::Done, None));
    assert_eq!((session.status, session.error_count), (Status::Idle, 0));
}

#[test]
fn terminal_phases_only_move_as_upstream_allows() {
    // (events after the start, expected phase)
    let cases: [(&[SessionEvent], Phase); 5] = [
        (&[event("q", "QueryExecutionCanceled"), event("q", "QueryExecutionComplete")], Phase::Canceled),
        (&[with_error(event("q", "LLMCallError"), "x"), event("q", "QueryExecutionCanceled")], Phase::Error),
        (&[event("q", "QueryExecutionComplete"), event("q", "LLMCallStart")], Phase::Done),
        (&[event("q", "QueryExecutionCanceled"), with_error(event("q", "LLMCallError"), "late")], Phase::Error),
        (&[event("q", "AgentExecutionStart")], Phase::Running),
    ];
    for (later, phase) in cases {
        let mut events = vec![event("q", "QueryExecutionStart")];
        events.extend(later.iter().cloned());
        assert_eq!(session_after(&events).queries[0].phase, phase, "{later:?}");
    }
}

#[test]
fn completed_at_is_set_for_a_query_first_seen_in_a_terminal_phase_only() {
    let running = session_after(&[event("q", "QueryExecutionStart")]);
    assert_eq!(running.queries[0].completed_at, None);
    let done = session_after(&[event("q", "QueryExecutionComplete")]);
    assert_eq!(done.queries[0].completed_at, Some(at(0)));
}

#[test]
fn tool_name_becomes_tool_and_fields_are_filled_only_once() {
    let mut first = event("q", "QueryExecutionStart");
    first.tool = Some("search".into());
    first.target_type = Some("tool".into());
    let mut second = event("q", "ToolCallComplete");
    second.tool = Some("other".into());
    second.agent = Some("a1".into());
    second.target_type = Some("team".into());
    let session = session_after(&[first, second]);
    let query = &session.queries[0];
    assert_eq!(query.tool.as_deref(), Some("search"), "a tool once set stays");
    assert_eq!(query.agent.as_deref(), Some("a1"), "an empty field is filled");
    assert_eq!(query.target_type, "tool", "the target type is replaced only while it is the default 'agent'");

    let data = serde_json::json!({"sessionId": "s", "queryName": "q", "toolName": "calc"});
    let event = SessionEvent::from_data(data.as_object().unwrap(), "ToolCallStart").unwrap();
    assert_eq!(event.tool.as_deref(), Some("calc"));
}

#[test]
fn the_name_is_the_session_id_without_its_session_prefix() {
    for (id, name) in [("session-abc", "abc"), ("abc", "abc"), ("session-", ""), ("my-session-x", "my-session-x")] {
        assert_eq!(SessionState::new(id, at(0)).name, name);
    }
}

#[test]
fn the_status_is_active_while_a_query_runs_else_the_latest_querys_outcome() {
    let cases: [(&[SessionEvent], Status, usize); 4] = [
        (&[event("a", "QueryExecutionStart")], Status::Active, 0),
        (
            &[event("a", "QueryExecutionComplete"), with_error(event("b", "QueryExecutionComplete"), "x")],
            Status::Error,
            1,
        ),
        (
            &[with_error(event("a", "QueryExecutionComplete"), "x"), event("b", "QueryExecutionComplete")],
            Status::Idle,
            1,
        ),
        (&[event("a", "QueryExecutionComplete"), event("b", "QueryExecutionStart")], Status::Active, 0),
    ];
    for (events, status, errors) in cases {
        let session = session_after(events);
        assert_eq!((session.status, session.error_count), (status, errors), "{events:?}");
    }
}

#[test]
fn conversations_group_queries_with_message_count_duration_and_participants() {
    let mut a = event("a", "QueryExecutionStart");
    a.conversation_id = Some("c1".into());
    a.agent = Some("weather".into());
    let mut b = event("b", "QueryExecutionStart");
    b.conversation_id = Some("c1".into());
    b.team = Some("crew".into());
    b.target_type = Some("team".into());
    let mut c = event("c", "QueryExecutionStart");
    c.conversation_id = Some("c2".into());
    let mut session = session_after(&[a, b, c]);
    // a at 0 s, b at 1 s, c at 2 s; b completes 63 s after a started.
    session.apply_event(&event("b", "QueryExecutionComplete"), Some(4), at(63));

    let [c1, c2] = &session.conversations[..] else { panic!("two conversations: {:?}", session.conversations) };
    assert_eq!(c1.conversation_id, "c1");
    assert_eq!((c1.name.as_str(), c1.participants.clone()), ("weather", vec!["weather".into(), "crew".into()]));
    assert_eq!((c1.message_count, c1.duration.as_str()), (2, "1m 3s"));
    assert_eq!(c1.participant_type, ParticipantType::Agent, "from the first query's target type");
    assert_eq!(c1.start_time, "2026-11-23T10:00:00.000Z");
    assert_eq!((c2.name.as_str(), c2.duration.as_str()), ("c2", "ongoing"), "no participant: named by its id");
    let names: Vec<&str> = session.participants.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["weather", "c2"]);
    assert_eq!(session.conversation_count(), 2);
}

#[test]
fn short_durations_are_in_seconds() {
    assert_eq!(duration(at(0), Some(at(42))), "42s");
    assert_eq!(duration(at(0), Some(at(60))), "1m 0s");
    assert_eq!(duration(at(0), None), "ongoing");
}

#[test]
fn a_message_joins_a_query_to_its_conversation_once_and_moves_only_the_sessions_activity() {
    let mut done = event("q", "QueryExecutionComplete");
    done.agent = Some("weather".into());
    let mut session = session_after(&[done]);
    assert!(session.conversations.is_empty());
    assert_eq!(session.apply_message("unknown", "c9", at(5)), MessageEffect::Unknown);
    assert_eq!(session.last_activity, at(0), "a message of an unknown query changes nothing");
    assert_eq!(session.apply_message("q", "c1", at(5)), MessageEffect::Joined(0));
    assert_eq!(session.conversations[0].conversation_id, "c1", "the conversation shows without another event");
    assert_eq!(session.participants[0].name, "weather");
    assert_eq!(session.apply_message("q", "c2", at(6)), MessageEffect::Activity);
    assert_eq!(session.queries[0].conversation_id.as_deref(), Some("c1"), "the first conversation stays");
    assert_eq!(
        (session.queries[0].last_activity, session.last_activity),
        (at(0), at(6)),
        "the query's activity elects the status; a message changes no phase"
    );
}

#[test]
fn an_older_done_applied_after_a_newer_error_leaves_the_error() {
    let mut session = session_after(&[event("q", "QueryExecutionStart")]);
    let failed = with_error(event("q", "QueryExecutionComplete"), "boom");
    assert_eq!(session.apply_event(&failed, Some(3), at(3)), Some(0));
    assert_eq!(session.apply_event(&event("q", "QueryExecutionComplete"), Some(2), at(4)), None, "nothing changed");
    let query = &session.queries[0];
    assert_eq!((query.phase, query.error.as_deref(), query.completed_at), (Phase::Error, Some("boom"), Some(at(3))));
    assert_eq!((session.status, session.error_count, session.last_activity), (Status::Error, 1, at(3)));
}

#[test]
fn a_late_non_terminal_event_does_not_make_the_querys_own_done_stale() {
    let mut session = session_after(&[event("q", "QueryExecutionStart")]);
    session.apply_event(&event("q", "LLMCallComplete"), Some(3), at(3));
    assert_eq!(session.apply_event(&event("q", "QueryExecutionComplete"), Some(2), at(4)), Some(0));
    let query = &session.queries[0];
    assert_eq!((query.phase, query.completed_at), (Phase::Done, Some(at(4))));
    assert_eq!(query.last_activity, at(3), "a late terminal event does not re-elect its query");
    assert_eq!((query.last_event_sequence, query.last_phase_sequence), (3, 2));
}

#[test]
fn a_late_event_still_fills_what_is_unset_and_unordered_ones_always_apply() {
    let mut session = session_after(&[event("q", "QueryExecutionStart"), event("q", "LLMCallStart")]);
    let mut late = event("q", "AgentExecutionStart");
    late.agent = Some("weather".into());
    assert_eq!(session.apply_event(&late, Some(1), at(5)), Some(0), "it filled the agent");
    assert_eq!((session.queries[0].agent.as_deref(), session.queries[0].last_activity), (Some("weather"), at(1)));
    assert_eq!(session.apply_event(&late, Some(1), at(6)), None, "a replay of it changes nothing");
    // `POST /sessions` has no arrival order: applied as it comes, and no watermark moves.
    let posted = with_error(event("q", "ToolCallError"), "x");
    assert_eq!(session.apply_event(&posted, None, at(7)), Some(0));
    assert_eq!(session.queries[0].phase, Phase::Error);
    assert_eq!((session.queries[0].last_event_sequence, session.queries[0].last_phase_sequence), (2, 0));
}

#[test]
fn removing_a_query_derives_the_totals_again_without_moving_the_activity() {
    let mut failed = with_error(event("b", "QueryExecutionComplete"), "boom");
    failed.conversation_id = Some("c2".into());
    let mut session = session_after(&[event("a", "QueryExecutionComplete"), failed]);
    assert_eq!((session.status, session.error_count, session.conversations.len()), (Status::Error, 1, 1));
    assert!(!session.remove_query("unknown"));
    assert!(session.remove_query("b"));
    assert_eq!((session.status, session.error_count, session.conversations.len()), (Status::Idle, 0, 0));
    assert_eq!(session.last_activity, at(1));
    assert!(session.remove_query("a"));
    assert!(session.queries.is_empty());
}

#[test]
fn events_without_a_session_or_query_name_change_no_session() {
    let data = serde_json::json!({"queryId": "u", "queryName": "q"});
    assert_eq!(SessionEvent::from_data(data.as_object().unwrap(), "x"), None);
    let data = serde_json::json!({"queryId": "u", "sessionId": "s", "queryName": ""});
    assert_eq!(SessionEvent::from_data(data.as_object().unwrap(), "x"), None);
}
