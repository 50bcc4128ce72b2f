//! `watch=true` on `/events` and `/events/{queryUID}`: upstream's generic SSE (`: connected`, one `data:`
//! line per event, heartbeats), live across replicas. A query's watch follows that query's positions; the
//! watch of all events follows the global feed below the visibility horizon (see [`crate::db::feed`]).

use std::sync::Arc;

use axum::response::Response;
use futures::{StreamExt, stream::BoxStream};

use super::{RouteState, model::EventRecord};
use crate::{
    db::watch::{Start, follow_all, follow_key},
    error::ApiError,
    http::sse,
};

/// Streams one query's events from `start`.
pub async fn query(state: &RouteState, query_id: String, start: Start) -> Result<Response, ApiError> {
    let retry = state.config.poll_interval();
    let events = follow_key(&state.events, query_id, start, retry).await?;
    Ok(respond(state, events))
}

/// Streams every event (of one session, when given) from `start`.
pub async fn all(state: &RouteState, session_id: Option<String>, start: Start) -> Result<Response, ApiError> {
    let retry = state.config.poll_interval();
    let start = start.global(&state.events).await?;
    let events = follow_all(&state.events, start, retry).await?;
    let events = events
        .filter(move |record| {
            std::future::ready(session_id.as_deref().is_none_or(|id| record.session_id.as_deref() == Some(id)))
        })
        .boxed();
    Ok(respond(state, events))
}

fn respond(state: &RouteState, events: BoxStream<'static, Arc<EventRecord>>) -> Response {
    let frames = events.map(|record| sse::data(record.event.get()));
    sse::watch(frames, state.streams_end.token(), state.config.sse_heartbeat())
}
