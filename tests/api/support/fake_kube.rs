//! A fake Kubernetes API server for the Ark `Query` custom resource, strict where the real one is: it
//! serves GET and PATCH on the object and on `/status` (merge and JSON Patch), applies status only through
//! `/status` and metadata only through the object, answers a failed JSON Patch `test` with 422 (generic, as the
//! real one: no causes) and a phase outside the enum with 422 naming `status.phase` in its causes, a stale
//! `resourceVersion` with 409, enforces the CRD's status schema (the phase enum; unknown status fields
//! pruned), and can be taken down (503) and brought back.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};
use tokio::sync::watch;

/// The phases the upstream Query CRD accepts.
const PHASES: &[&str] = &["pending", "provisioning", "running", "input-required", "error", "done", "canceled"];
/// The status fields the upstream CRD declares; the rest is pruned.
const STATUS_FIELDS: &[&str] = &["phase", "conditions", "response", "tokenUsage", "conversationId", "duration"];
const BASE: &str = "/apis/ark.mckinsey.com/v1alpha1/namespaces/{namespace}/queries/{name}";

#[derive(Default)]
struct Cluster {
    /// Phases a patched CRD adds to the enum (e.g. `waiting`).
    extra_phases: Vec<String>,
    queries: HashMap<(String, String), Value>,
    version: u64,
    down: bool,
    /// Every request: (method, path).
    requests: Vec<(String, String)>,
}

/// The running fake.
#[derive(Clone)]
pub struct FakeKube {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    cluster: Arc<Mutex<Cluster>>,
    changed: watch::Sender<u64>,
}

impl FakeKube {
    /// Starts the fake on a free loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = FakeKube {
            url: format!("http://{}", listener.local_addr().unwrap()),
            cluster: Arc::default(),
            changed: watch::channel(0).0,
        };
        let app = Router::new()
            .route(BASE, get(read).patch(patch_object))
            .route(&format!("{BASE}/status"), get(read).patch(patch_status))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        fake
    }

    /// Accepts `phase` too, as a cluster whose CRD was extended with it.
    pub fn allow_phase(&self, phase: &str) {
        self.write(|cluster| cluster.extra_phases.push(phase.to_owned()));
    }

    /// Creates a Query in `phase`.
    pub fn create(&self, namespace: &str, name: &str, phase: &str) {
        self.write(|cluster| {
            cluster.version += 1;
            let query = json!({
                "apiVersion": "ark.mckinsey.com/v1alpha1", "kind": "Query",
                "metadata": {"name": name, "namespace": namespace, "resourceVersion": cluster.version.to_string(), "annotations": {}},
                "spec": {"input": "hello", "target": {"type": "agent", "name": "reviewer"}},
                "status": {"phase": phase},
            });
            cluster.queries.insert((namespace.into(), name.into()), query);
        });
    }

    /// Plays the controller: a full status update to `phase`.
    pub fn controller_sets_phase(&self, namespace: &str, name: &str, phase: &str) {
        self.write(|cluster| {
            cluster.version += 1;
            let version = cluster.version.to_string();
            let query = cluster.queries.get_mut(&(namespace.into(), name.into())).expect("a query");
            query["status"]["phase"] = json!(phase);
            query["metadata"]["resourceVersion"] = json!(version);
        });
    }

    /// Deletes a Query (it finished and was cleaned up).
    pub fn delete(&self, namespace: &str, name: &str) {
        self.write(|cluster| {
            cluster.queries.remove(&(namespace.into(), name.into()));
        });
    }

    /// Makes every request fail with 503 (`true`) or work again (`false`).
    pub fn set_down(&self, down: bool) {
        self.write(|cluster| cluster.down = down);
    }

    /// The Query as stored.
    pub fn query(&self, namespace: &str, name: &str) -> Option<Value> {
        self.cluster.lock().unwrap().queries.get(&(namespace.into(), name.into())).cloned()
    }

    /// How many requests matched `method` and a path ending in `suffix`.
    pub fn count(&self, method: &str, suffix: &str) -> usize {
        let cluster = self.cluster.lock().unwrap();
        cluster.requests.iter().filter(|(m, p)| m == method && p.ends_with(suffix)).count()
    }

    /// Waits until `condition` holds for the Query (re-checked after every request the fake serves).
    pub async fn wait_for(&self, namespace: &str, name: &str, condition: impl Fn(Option<&Value>) -> bool) {
        let mut changed = self.changed.subscribe();
        loop {
            if condition(self.query(namespace, name).as_ref()) {
                return;
            }
            changed.changed().await.expect("the fake lives as long as the test");
        }
    }

    /// Waits until at least `n` requests matched `method` and `suffix`.
    pub async fn wait_for_requests(&self, method: &str, suffix: &str, n: usize) {
        let mut changed = self.changed.subscribe();
        while self.count(method, suffix) < n {
            changed.changed().await.expect("the fake lives as long as the test");
        }
    }

    fn write<T>(&self, change: impl FnOnce(&mut Cluster) -> T) -> T {
        let result = change(&mut self.cluster.lock().unwrap());
        self.changed.send_modify(|n| *n += 1);
        result
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code});
    (StatusCode::from_u16(code).unwrap(), Json(body)).into_response()
}

/// A schema violation as the real one words it: 422 naming the field in `details.causes`.
fn invalid(name: &str, field: &str, message: &str) -> Response {
    let details = json!({"name": name, "group": "ark.mckinsey.com", "kind": "Query",
                         "causes": [{"reason": "FieldValueNotSupported", "message": message, "field": field}]});
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 422,
                      "reason": "Invalid", "details": details,
                      "message": format!("Query.ark.mckinsey.com \"{name}\" is invalid: {field}: {message}")});
    (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
}

async fn read(State(fake): State<FakeKube>, Path((namespace, name)): Path<(String, String)>) -> Response {
    fake.write(|cluster| {
        cluster.requests.push(("GET".into(), format!("{namespace}/{name}")));
        if cluster.down {
            return status(503, "ServiceUnavailable", "the API server is down");
        }
        match cluster.queries.get(&(namespace, name)) {
            Some(query) => Json(query.clone()).into_response(),
            None => status(404, "NotFound", "queries.ark.mckinsey.com not found"),
        }
    })
}

async fn patch_object(
    State(fake): State<FakeKube>,
    path: Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    apply(&fake, path.0, &headers, &body, false)
}

async fn patch_status(
    State(fake): State<FakeKube>,
    path: Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    apply(&fake, path.0, &headers, &body, true)
}

fn apply(
    fake: &FakeKube,
    (namespace, name): (String, String),
    headers: &HeaderMap,
    body: &[u8],
    subresource: bool,
) -> Response {
    let suffix = if subresource { "/status" } else { "" };
    fake.write(|cluster| {
        cluster.requests.push(("PATCH".into(), format!("{namespace}/{name}{suffix}")));
        if cluster.down {
            return status(503, "ServiceUnavailable", "the API server is down");
        }
        let Some(current) = cluster.queries.get(&(namespace.clone(), name.clone())).cloned() else {
            return status(404, "NotFound", "queries.ark.mckinsey.com not found");
        };
        let Ok(document) = serde_json::from_slice::<Value>(body) else {
            return status(400, "BadRequest", "the body is not JSON");
        };
        let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let mut patched = current.clone();
        match content_type {
            "application/merge-patch+json" => {
                let stale = document
                    .pointer("/metadata/resourceVersion")
                    .is_some_and(|v| *v != current["metadata"]["resourceVersion"]);
                if stale {
                    return status(
                        409,
                        "Conflict",
                        "the object has been modified; please apply your changes to the latest version",
                    );
                }
                json_patch::merge(&mut patched, &document);
            }
            "application/json-patch+json" => {
                let Ok(operations) = serde_json::from_value::<json_patch::Patch>(document) else {
                    return status(400, "BadRequest", "not a JSON Patch");
                };
                if json_patch::patch(&mut patched, &operations).is_err() {
                    // The real one's words for a failed `test` (and a missing path): generic, no causes.
                    return status(422, "Invalid", "the server rejected our request due to an error in our request");
                }
            }
            other => return status(415, "UnsupportedMediaType", &format!("unsupported patch type {other}")),
        }
        // The status subresource takes only status; the object takes everything but status.
        let mut stored = current.clone();
        if subresource {
            stored["status"] = patched["status"].take();
        } else {
            patched["status"] = current["status"].clone();
            stored = patched;
        }
        if let Some(phase) = stored["status"]["phase"].as_str()
            && !PHASES.contains(&phase)
            && !cluster.extra_phases.iter().any(|extra| extra == phase)
        {
            return invalid(&name, "status.phase", &format!("Unsupported value: \"{phase}\""));
        }
        if let Some(fields) = stored["status"].as_object_mut() {
            fields.retain(|key, _| STATUS_FIELDS.contains(&key.as_str()));
        }
        cluster.version += 1;
        stored["metadata"]["resourceVersion"] = json!(cluster.version.to_string());
        cluster.queries.insert((namespace, name), stored.clone());
        Json(stored).into_response()
    })
}
