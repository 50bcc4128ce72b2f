//! `GET /`: where a newcomer (the start-up log advertises this URL) finds everything else: the page, the
//! OpenAPI document, the probes, the metrics and the MCP endpoint. JSON for API clients, a page of links
//! for a browser.

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, header},
    response::{IntoResponse, Response},
};
use maud::{DOCTYPE, html};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

/// The index route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(index))
}

/// What the broker serves, and where.
#[derive(Debug, Serialize, ToSchema)]
struct Index {
    /// Always `ark-broker`.
    name: &'static str,
    /// The build's version.
    version: &'static str,
    /// Paths on this port, by what they are.
    links: Links,
    /// The MCP endpoint's port (its path is `/mcp`): a port of its own, not this one. Absent when the
    /// configured port is 0 (a free one picked at start-up; the `listening` log line names it).
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp_port: Option<u16>,
}

/// Paths on the HTTP port.
#[derive(Debug, Serialize, ToSchema)]
struct Links {
    /// The questions page, for people.
    page: &'static str,
    /// The REST API's OpenAPI 3.1 document.
    openapi: &'static str,
    /// Liveness.
    health: &'static str,
    /// Readiness: PostgreSQL and the LISTEN connection are up.
    readiness: &'static str,
    /// Prometheus metrics.
    metrics: &'static str,
}

const LINKS: Links =
    Links { page: "/ui", openapi: "/openapi.json", health: "/health", readiness: "/readyz", metrics: "/metrics" };

/// `GET /`: the broker's name and version and where its page, API document, probes, metrics and MCP are.
#[utoipa::path(
    get,
    path = "/",
    tag = "operations",
    operation_id = "index",
    responses((status = 200, description = "Where everything is (a page of links when the client asks for HTML)",
        body = Index))
)]
#[tracing::instrument(level = "debug", skip_all)]
async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let index = Index {
        name: "ark-broker",
        version: env!("CARGO_PKG_VERSION"),
        links: LINKS,
        mcp_port: Some(state.config.mcp_port).filter(|port| *port != 0),
    };
    if wants_html(&headers) { page(&index).into_response() } else { Json(index).into_response() }
}

/// Whether the client asked for HTML before JSON (a browser's `Accept`).
fn wants_html(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|value| value.to_str().ok()).unwrap_or("");
    let position = |kind: &str| accept.find(kind);
    match (position("text/html"), position("application/json")) {
        (Some(html), Some(json)) => html < json,
        (html, _) => html.is_some(),
    }
}

fn page(index: &Index) -> maud::Markup {
    let links = [
        (index.links.page, "Questions page"),
        (index.links.openapi, "OpenAPI document of the REST API"),
        (index.links.health, "Liveness probe"),
        (index.links.readiness, "Readiness probe"),
        (index.links.metrics, "Prometheus metrics"),
    ];
    html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "Ark Broker" } }
            body {
                h1 { "Ark Broker " (index.version) }
                ul {
                    @for (path, label) in links {
                        li { a href=(path) { (label) } " — " code { (path) } }
                    }
                    @if let Some(port) = index.mcp_port {
                        li { "MCP: " code { "/mcp" } " on port " (port) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, accept.parse().unwrap());
        headers
    }

    #[test]
    fn a_browser_gets_the_page_and_an_api_client_json() {
        assert!(wants_html(&accepting("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")));
        assert!(!wants_html(&accepting("application/json")));
        assert!(!wants_html(&accepting("application/json, text/html")));
        assert!(!wants_html(&accepting("*/*")));
        assert!(!wants_html(&HeaderMap::new()));
    }
}
