//! Ark Broker: identical, stateless replicas that keep all of Ark's transitional state in PostgreSQL.
//!
//! # Layout, top to bottom
//! Every import points down a layer or within one ([`layers`] checks it, and docs/architecture.md draws it).
//! - Entry: [`server`], the process: flags, embedded PostgreSQL, signals.
//! - App: [`app`], the router and `serve` with its shutdown sequence; [`connections`], the accept loop: the
//!   cap on open connections, header and idle timeouts, draining.
//! - Faces over the whole state: [`ui`], the page that answers questions; [`mcp`], the MCP server
//!   (`ask_question`, `list_pending_questions`, tasks in both protocol eras); [`operations`], the probes and
//!   `/metrics`.
//! - State: [`state`], what handlers share (each domain gets its own `RouteState` from it), and start-up;
//!   [`retention`], the reaper (one replica at a time): expired rows, finished streams, logs and outboxes.
//! - Domains, each with its routes, model (its checks return [`validate::Invalid`]) and store (the only place
//!   with SQL): [`channels`] (questions delivered to Slack and GitHub through an outbox every replica works
//!   off), [`query_status`] (the asking Query's phase and `waitingFor` while a question waits, in
//!   Kubernetes), [`queries`] (a Query's resume state and its tool_call_id ↔ task_id mapping), [`questions`]
//!   (questions agents ask people, with the resourceVersion watch), [`messages`] (upstream's Memory API),
//!   [`events`] (execution events), [`sessions`] (derived from events and messages by upstream's rules),
//!   [`traces`] (OTLP spans), [`streams`] (LLM chunk streams and the unified execution stream), [`durable`] (the Durable Streams
//!   protocol under `/v1/stream`).
//! - Shared by the domains: [`http`] (extractors, paging and flag rules, SSE framing, the request log, the
//!   OpenAPI document), [`auth`] (who is calling, and the 401 layer), [`idempotency`] (`Idempotency-Key`:
//!   keys kept 24 h with the first reply), [`error`] (the API error type and the one place it becomes the
//!   documented error body).
//! - Storage: [`db`]: pool and migrations, the embedded server, how feeds are written without a cluster-wide
//!   lock ([`db::feed`]), and fan-out: the one LISTEN connection per replica, each feed's tail that reads a
//!   commit once, the in-process fan-out readers take rows from, the reader loop ([`db::follow`]) and where
//!   watches start ([`db::watch`]).
//! - Ground: [`telemetry`] (logs and Prometheus metrics), [`config`] (flags with env fallbacks),
//!   [`validate`] (the domain error and input checks), [`timestamp`], [`kubernetes`] (the API client Query
//!   status and `--auth kubernetes` share).

pub mod app;
pub mod auth;
pub mod channels;
pub mod config;
pub mod connections;
pub mod db;
pub mod durable;
pub mod error;
pub mod events;
pub mod http;
pub mod idempotency;
pub mod kubernetes;
#[cfg(test)]
mod layers;
pub mod mcp;
pub mod messages;
pub mod operations;
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
