//! The integration tests, one binary: black-box HTTP against in-process brokers, and real broker processes
//! for everything that crosses replicas. Each test gets a fresh database on a throwaway PostgreSQL.

mod support;

mod aborted;
mod ark_sdk;
mod auth;
mod bench_smoke;
mod browser_safety;
mod channels;
mod commit_order;
mod connections;
mod database_tls;
mod deploy;
mod drain;
mod embedded;
mod end_of_query;
mod events;
mod events_replicas;
mod exact_ingest;
mod frozen;
mod kube_apiserver;
mod mcp;
mod mcp_blocking;
mod mcp_replicas;
mod memory;
mod nul;
mod observability;
mod openapi;
mod operations;
mod outage;
mod query_page;
mod query_status;
mod questions;
mod replicas;
mod reports;
mod restart_story;
mod resume;
mod retention;
mod rolling_restart;
mod sessions;
mod sessions_lifecycle;
mod slack;
mod streams;
mod traces;
mod ui;
mod unified;
