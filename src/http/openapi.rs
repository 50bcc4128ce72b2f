//! The OpenAPI 3.1 document of the REST API, served at `GET /openapi.json`. Its operations come from the
//! routes themselves: each handler's `#[utoipa::path]` is also how the route is registered
//! (`utoipa_axum::routes!`), so a route and its description are one thing and cannot drift apart; its schemas
//! are derived from the request and reply types. This module adds the document's info and the responses the
//! cross-cutting layers give every route ([`finish`]), and serves the result.

use axum::{Extension, body::Bytes, http::header, response::IntoResponse};
use utoipa::{
    OpenApi,
    openapi::{
        self, HttpMethod, PathItem, Ref, RefOr, Response, ResponseBuilder,
        content::ContentBuilder,
        header::HeaderBuilder,
        path::Operation,
        schema::{ObjectBuilder, Type},
    },
};

use crate::{
    error::{ErrorBody, ErrorCode, ErrorObject},
    http::sse::SseEvent,
};

/// The document's info, tags and shared schemas; the operations are added by the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Ark Broker",
        version = env!("CARGO_PKG_VERSION"),
        description = "Ark's transitional state (conversation memory, LLM chunk streams, execution events, sessions, traces, questions agents ask people), wire-compatible with upstream's ark-broker. Every error is `{\"error\":{\"code\",\"message\",\"requestId\"}}`. Routes that say `text/event-stream` send server-sent events; the MCP endpoint (`/mcp`, JSON-RPC on its own port) and the page (`/ui`, HTML) are not described here.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    components(schemas(ErrorBody, ErrorObject, ErrorCode, SseEvent)),
    tags(
        (name = "memory", description = "Conversation memory: upstream's Memory API"),
        (name = "streams", description = "LLM chunk streams: NDJSON in, server-sent events out"),
        (name = "events", description = "Execution events of Queries"),
        (name = "sessions", description = "Sessions derived from events and messages"),
        (name = "traces", description = "OTLP spans in, traces out"),
        (name = "questions", description = "Questions agents ask people"),
        (name = "queries", description = "A Query's resume state"),
        (name = "channels", description = "Slack's and GitHub's calls (their signatures are the credential)"),
        (name = "operations", description = "Probes, metrics and this document"),
    ),
)]
pub struct ApiDoc;

/// The finished document as JSON, served by [`document`] (a request extension set by the app).
#[derive(Debug, Clone)]
pub struct Document(pub Bytes);

/// `GET /openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    operation_id = "openapi",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", body = serde_json::Value))
)]
pub async fn document(Extension(Document(json)): Extension<Document>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], json)
}

/// Adds what every route answers because of the layers in front of it, where the route does not say it
/// itself: 400 (a NUL byte in a parameter, a malformed query string), 401 (with `--auth` on, except on
/// `open_paths`), 403 (a state-changing request from another site's page), 408 and 413 (a whole body too slow
/// or too large), 500, and 503 with `Retry-After` (Postgres unreachable, the replica draining or at a limit;
/// not `/health`, which always answers). Returns the document as JSON.
pub fn finish(mut document: openapi::OpenApi, open_paths: &[&str]) -> Document {
    for (path, item) in document.paths.paths.iter_mut() {
        let open = open_paths.contains(&path.as_str());
        for (method, operation) in operations(item) {
            let writes = !matches!(method, HttpMethod::Get | HttpMethod::Head | HttpMethod::Options);
            let whole_body = operation.request_body.as_ref().is_some_and(|body| match body {
                RefOr::T(body) => !body.content.contains_key("application/x-ndjson"),
                RefOr::Ref(_) => true,
            });
            let responses = &mut operation.responses.responses;
            let mut add = |status: &str, response: Response| {
                responses.entry(status.to_owned()).or_insert(RefOr::T(response));
            };
            add("400", error("A parameter holds a NUL byte, or the query string is malformed"));
            if !open {
                add("401", unauthorized());
            }
            if writes {
                add("403", error("A state-changing request from another site's page (Origin or Referer)"));
            }
            if whole_body {
                add("408", error("The body did not arrive within --body-read-timeout-seconds"));
                add("413", error("The body is larger than --max-body-bytes"));
            }
            add("500", error("An unexpected failure (logged with the request id)"));
            if path != "/health" {
                add("503", unavailable());
            }
        }
    }
    let mut json = serde_json::to_value(&document).expect("the OpenAPI document serialises");
    plain_descriptions(&mut json);
    Document(Bytes::from(json.to_string()))
}

/// Rewrites the rustdoc links the descriptions and summaries come with (they are the handlers' and types' doc comments):
/// `` [`NewEvent::parse`] `` reads `` `NewEvent::parse` ``, without `crate::`, `super::` or `self::`.
fn plain_descriptions(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    serde_json::Value::String(text) if key == "description" || key == "summary" => {
                        *text = plain_links(text)
                    }
                    _ => plain_descriptions(value),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

fn plain_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start + 2..].find("`]") else { break };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        let name = ["crate::", "super::", "self::"].iter().fold(name, |name, prefix| name.trim_start_matches(prefix));
        out.push('`');
        out.push_str(name);
        out.push('`');
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = (HttpMethod, &mut Operation)> {
    [
        (HttpMethod::Get, &mut item.get),
        (HttpMethod::Put, &mut item.put),
        (HttpMethod::Post, &mut item.post),
        (HttpMethod::Delete, &mut item.delete),
        (HttpMethod::Patch, &mut item.patch),
        (HttpMethod::Head, &mut item.head),
        (HttpMethod::Options, &mut item.options),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.as_mut().map(|operation| (method, operation)))
}

/// A response with the error body.
fn error(description: &str) -> Response {
    error_builder(description).build()
}

fn error_builder(description: &str) -> ResponseBuilder {
    let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
    ResponseBuilder::new().description(description).content("application/json", body)
}

fn unauthorized() -> Response {
    let challenge = HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some("`Bearer realm=\"ark-broker\"`, with `error=\"invalid_token\"` when the token sent is wrong"))
        .build();
    error_builder("Authentication is on and the request has no valid bearer token")
        .header("WWW-Authenticate", challenge)
        .build()
}

fn unavailable() -> Response {
    let retry = HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
        .description(Some("Always 1: this replica a moment later, or another one, may serve"))
        .build();
    error_builder("Postgres cannot be reached, or the replica is draining or at one of its limits; retry")
        .header("Retry-After", retry)
        .build()
}

#[cfg(test)]
mod tests {
    use super::plain_links;

    #[test]
    fn rustdoc_links_read_as_code() {
        assert_eq!(plain_links("[`flag`] reads it; see [`super::budget`]."), "`flag` reads it; see `budget`.");
        assert_eq!(plain_links("no links, `code` and [text]"), "no links, `code` and [text]");
        assert_eq!(plain_links("unclosed [`x"), "unclosed [`x");
    }
}
