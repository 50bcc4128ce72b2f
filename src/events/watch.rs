//! `watch=true` on `/events` and `/events/{queryUID}`: upstream's generic SSE (`: connected`, one `data:`
//! line per event, heartbeats), live across replicas. A query's watch follows that query's positions; the
//! watch of all events follows the global feed below the visibility horizon (see [`crate::db::feed`]).

use axum::response::Response;
use futures::{StreamExt, stream};

use super::model::EventRecord;
use crate::{
    db::{self, fanout::FeedRow, follow::follow},
    error::ApiError,
    http::sse,
    state::AppState,
};

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// Only events stored after the watch began.
    Live,
    /// Everything still kept (`from-beginning=true`).
    Beginning,
    /// Events after upstream's `cursor` (an event's sequence number).
    After(i64),
}

/// Streams one query's events from `start`. The start is fixed before the response goes out.
pub async fn query(state: &AppState, query_id: String, start: Start) -> Result<Response, ApiError> {
    let store = state.events.clone();
    let subscription = state.event_fanout.subscribe_key(&query_id);
    let from = match start {
        Start::Live => store.last_position(&query_id).await?,
        Start::Beginning => 0,
        Start::After(sequence) => store.position_after_sequence(&query_id, sequence).await?,
    };
    let read = move |after| {
        let (store, query_id) = (store.clone(), query_id.clone());
        async move { store.query_page(&query_id, after).await }
    };
    let events = follow(subscription, from, state.config.poll_interval(), read, <EventRecord as FeedRow>::position);
    Ok(respond(state, events.boxed()))
}

/// Streams every event (of one session, when given) from `start` (`Live` or `After`).
pub async fn all(state: &AppState, session_id: Option<String>, start: Start) -> Result<Response, ApiError> {
    let store = state.events.clone();
    let subscription = state.event_fanout.subscribe_global();
    let (from, snapshot) = match start {
        Start::After(sequence) => (store.global_cursor_of(sequence).await?, None),
        Start::Beginning => (Default::default(), None),
        Start::Live => {
            let snapshot = db::start_snapshot(&state.pool).await?;
            (snapshot.cursor(), Some(snapshot))
        }
    };
    let read = move |after| {
        let store = store.clone();
        async move { store.global_page(after).await }
    };
    let events = follow(subscription, from, state.config.poll_interval(), read, <EventRecord as FeedRow>::global)
        .filter(move |record| {
            let new = snapshot.as_ref().is_none_or(|s| s.is_new(record.tx));
            let wanted = session_id.as_deref().is_none_or(|id| record.session_id.as_deref() == Some(id));
            std::future::ready(new && wanted)
        });
    Ok(respond(state, events.boxed()))
}

fn respond(state: &AppState, events: futures::stream::BoxStream<'static, std::sync::Arc<EventRecord>>) -> Response {
    let frames = events.map(|record| sse::data(record.event.get()));
    let frames = stream::once(async { sse::connected() }).chain(frames);
    sse::respond(frames, state.shutdown.clone(), Some(state.config.sse_heartbeat()))
}
