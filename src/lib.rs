//! Ark Broker: identical, stateless replicas that keep all of Ark's transitional state in PostgreSQL.
//!
//! # Layout
//! - [`config`], [`telemetry`]: settings (flags with env fallbacks), logs and Prometheus metrics;
//!   [`timestamp`]: timestamps as the API writes them.
//! - [`auth`]: who is calling (`--auth none|token|kubernetes`, a trusted proxy's user header), and the 401 layer.
//! - [`server`]: the process: embedded PostgreSQL, binding, signals.
//! - [`app`]: the router and `serve` with its shutdown sequence; [`state`]: what handlers share, and start-up.
//! - [`connections`]: the accept loop: the cap on open connections, header and idle timeouts, draining.
//! - [`error`]: the API error type and the one place it becomes the documented error body.
//! - [`http`]: extractors, paging and flag rules, SSE framing, the request log, health and metrics routes, the
//!   OpenAPI document.
//! - [`db`]: pool and migrations, the embedded server, how feeds are written without a cluster-wide lock
//!   ([`db::feed`]), and fan-out: the one LISTEN connection per replica, each feed's tail that reads a commit
//!   once, the in-process fan-out readers take rows from, the reader loop ([`db::follow`]) and where watches
//!   start ([`db::watch`]).
//! - [`retention`]: the reaper (one replica at a time): expired rows, finished streams, logs and outboxes.
//! - [`idempotency`]: `Idempotency-Key` on the write routes: keys kept 24 h with the first reply.
//! - Domains, each with its routes, model and store (the only place with SQL):
//!   [`messages`] (upstream's Memory API), [`streams`] (LLM chunk streams and the unified execution stream),
//!   [`events`] (execution events)
//!   and [`sessions`] (derived from events and messages by upstream's rules), [`traces`] (OTLP spans),
//!   [`questions`] (questions agents ask people, with the resourceVersion watch), [`queries`] (a Query's
//!   resume state and its tool_call_id ↔ task_id mapping).
//! - [`mcp`]: the MCP server (`ask_question`, `list_pending_questions`, tasks in both protocol eras).
//! - [`query_status`]: the asking Query's phase and `waitingFor` while a question waits (Kubernetes);
//!   [`kubernetes`]: the API client it and `--auth kubernetes` share.
//! - [`ui`]: the web page that answers questions.
//! - [`channels`]: questions delivered to Slack and GitHub through an outbox every replica works off.

pub mod app;
pub mod auth;
pub mod channels;
pub mod config;
pub mod connections;
pub mod db;
pub mod error;
pub mod events;
pub mod http;
pub mod idempotency;
pub mod kubernetes;
pub mod mcp;
pub mod messages;
pub mod queries;
pub mod query_status;
pub mod questions;
pub mod retention;
pub mod server;
pub mod sessions;
pub mod state;
pub mod streams;
pub mod telemetry;
pub mod timestamp;
pub mod traces;
pub mod ui;
pub mod validate;
