//! Our own CustomResourceDefinition of Ark's `Query` (`ark.mckinsey.com/v1alpha1`), written from the fields Ark
//! publishes (../shared/reference/ecosystem.md §1), not copied from Ark's file: what the broker's patches meet is
//! here — the status subresource, the phase enum (`waiting` is not in it), `metav1.Condition`s, a status that
//! prunes unknown fields — plus enough of `spec` to create a Query like Ark's. Kubernetes 1.20 reads `default: ""`
//! as null and refuses the CRD, so no such default appears. And helpers for Queries: create one as Ark does
//! (object, then status through the subresource), play the controller, and wait for a Query to reach a state
//! (through a watch, not by polling).

use std::fmt::Debug;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent, WatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::within;

/// The phases Ark's Query accepts.
pub const PHASES: &[&str] = &["pending", "provisioning", "running", "input-required", "error", "done", "canceled"];

fn string() -> Value {
    json!({"type": "string"})
}

/// The CRD.
pub fn definition() -> Value {
    let object = |properties: Value| json!({"type": "object", "properties": properties});
    let condition = json!({
        "type": "object",
        "required": ["type", "status", "reason", "message", "lastTransitionTime"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                       "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
            "message": {"type": "string", "maxLength": 32768},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        },
    });
    let tokens = |names: &[&str]| {
        Value::Object(names.iter().map(|n| ((*n).to_owned(), json!({"type": "integer", "format": "int64"}))).collect())
    };
    let spec = object(json!({
        "input": {"x-kubernetes-preserve-unknown-fields": true},
        "target": object(json!({"type": {"type": "string", "enum": ["agent", "team", "model", "tool"]}, "name": string()})),
        "memory": object(json!({"name": string(), "namespace": string()})),
        "serviceAccount": string(),
        "sessionId": string(),
        "conversationId": string(),
        "timeout": {"type": "string", "default": "5m"},
        "ttl": string(),
        "cancel": {"type": "boolean"},
        "type": {"type": "string", "enum": ["user"]},
    }));
    let status = object(json!({
        "phase": {"type": "string", "enum": PHASES, "default": "pending"},
        "conditions": {"type": "array", "items": condition},
        "response": object(json!({
            "target": object(json!({"name": string(), "type": string()})),
            "content": string(), "raw": string(), "phase": string(),
            "a2a": object(json!({"contextId": string(), "taskId": string()})),
        })),
        "tokenUsage": object(tokens(&["promptTokens", "completionTokens", "totalTokens", "cachedTokens"])),
        "conversationId": {"type": "string", "minLength": 1},
        "duration": string(),
    }));
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "queries.ark.mckinsey.com"},
        "spec": {
            "group": "ark.mckinsey.com", "scope": "Namespaced",
            "names": {"kind": "Query", "listKind": "QueryList", "plural": "queries", "singular": "query"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": object(json!({
                    "apiVersion": string(), "kind": string(), "metadata": {"type": "object"},
                    "spec": spec, "status": status,
                }))},
            }],
        },
    })
}

/// Creates the CRD and waits until it is established (its API served).
pub async fn install(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(definition()).unwrap();
    crds.create(&PostParams::default(), &crd).await.expect("the API server accepts our Query CRD");
    let established = |crd: Option<&CustomResourceDefinition>| {
        let conditions = crd.and_then(|c| c.status.as_ref()).and_then(|s| s.conditions.as_ref());
        conditions.is_some_and(|all| all.iter().any(|c| c.type_ == "Established" && c.status == "True"))
    };
    until(&crds, "queries.ark.mckinsey.com", established).await;
}

/// The Queries of `namespace`.
pub fn queries(client: Client, namespace: &str) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("ark.mckinsey.com", "v1alpha1", "Query"), "queries");
    Api::namespaced_with(client, namespace, &resource)
}

/// Creates Query `name` and sets its phase as Ark's controller does (a status update through the subresource;
/// a create ignores status).
pub async fn create(api: &Api<DynamicObject>, name: &str, phase: &str) {
    let query: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ark.mckinsey.com/v1alpha1", "kind": "Query",
        "metadata": {"name": name},
        "spec": {"input": "Review PR 42", "target": {"type": "agent", "name": "reviewer"}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &query).await.unwrap();
    controller_sets_phase(api, name, phase).await;
}

/// Plays Ark's controller: read the Query, set its phase, `Status().Update` it (resourceVersion-checked),
/// reading again after a 409 as its retry does.
pub async fn controller_sets_phase(api: &Api<DynamicObject>, name: &str, phase: &str) {
    loop {
        let query = api.get(name).await.unwrap();
        match update_phase(api, query, phase).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(other) => panic!("the controller's status update failed: {other}"),
        }
    }
}

/// The controller's update of `query` (as it read it) to `phase`, without retrying.
pub async fn update_phase(
    api: &Api<DynamicObject>,
    mut query: DynamicObject,
    phase: &str,
) -> kube::Result<DynamicObject> {
    query.data["status"] = json!({"phase": phase});
    api.replace_status(&query.name_any(), &PostParams::default(), &query).await
}

/// The phase of a Query.
pub fn phase(query: Option<&DynamicObject>) -> Option<String> {
    query?.data["status"]["phase"].as_str().map(str::to_owned)
}

/// The parsed `waitingFor` annotation of a Query.
pub fn waiting_for(query: Option<&DynamicObject>) -> Option<Value> {
    let raw = query?.annotations().get(ark_broker::query_status::WAITING_FOR_ANNOTATION)?;
    Some(serde_json::from_str(raw).expect("the annotation is JSON"))
}

/// Waits until `condition` holds for object `name` (`None`: absent), watching it; returns it then.
pub async fn until<K>(api: &Api<K>, name: &str, condition: impl Fn(Option<&K>) -> bool) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let fields = format!("metadata.name={name}");
    within("a Kubernetes object to reach a state", async {
        loop {
            let list = api.list(&ListParams::default().fields(&fields)).await.unwrap();
            let version = list.metadata.resource_version.clone().unwrap_or_default();
            let mut current = list.items.into_iter().next();
            if condition(current.as_ref()) {
                return current;
            }
            let mut events = api.watch(&WatchParams::default().fields(&fields), &version).await.unwrap().boxed();
            // A watch that ends or errs (expired version, timeout) is started again from a fresh list.
            while let Some(Ok(event)) = events.next().await {
                match event {
                    WatchEvent::Added(object) | WatchEvent::Modified(object) => current = Some(object),
                    WatchEvent::Deleted(_) => current = None,
                    WatchEvent::Bookmark(_) => continue,
                    WatchEvent::Error(_) => break,
                }
                if condition(current.as_ref()) {
                    return current;
                }
            }
        }
    })
    .await
}
