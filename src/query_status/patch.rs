//! The Kubernetes side: conditional patches of one Query. The phase changes only with a JSON Patch whose
//! `test` names the phase we expect, so a transition the controller made meanwhile always wins (the test
//! fails with 422 and we leave the Query alone); `waitingFor` goes into an annotation, because the CRD
//! prunes unknown status fields. A 422 that names invalid fields is no failed `test` but the CRD refusing our
//! phase, and is given up like a 403.

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams},
};
use serde_json::{Value, json};

use crate::{questions::store::waiting::WaitingFor, timestamp::iso_timestamp};

/// The annotation that mirrors `waitingFor`.
pub const WAITING_FOR_ANNOTATION: &str = "ark-broker.ark.mckinsey.com/waiting-for";
/// The phase a resumed Query returns to.
const RUNNING: &str = "running";

/// How a patch attempt ended.
#[derive(Debug)]
pub enum Outcome {
    /// Done, or moot (the Query moved on or is gone); the text says which.
    Done(String),
    /// A transient failure (API server down, conflict, throttled); try again later.
    Retry(String),
    /// A failure retrying cannot fix (e.g. forbidden); give up.
    GiveUp(String),
}

/// Patches Queries through one Kubernetes client.
#[derive(Clone)]
pub struct QueryPatcher {
    client: Client,
    waiting_phase: String,
}

impl QueryPatcher {
    /// A patcher setting `waiting_phase` while a question waits.
    pub fn new(client: Client, waiting_phase: String) -> Self {
        QueryPatcher { client, waiting_phase }
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("ark.mckinsey.com", "v1alpha1", "Query"),
            "queries",
        );
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }

    /// running → waiting, then the annotation.
    pub async fn wait(&self, namespace: &str, name: &str, waiting: &WaitingFor) -> Outcome {
        if let Err(outcome) = self.switch_phase(namespace, name, RUNNING, &self.waiting_phase).await {
            return outcome;
        }
        match self.annotate(namespace, name, Some(waiting)).await {
            Ok(()) => Outcome::Done("patched".into()),
            Err(outcome) => outcome,
        }
    }

    /// waiting → running and the annotation removed; or, while another question still waits, only the
    /// annotation updated to that one.
    pub async fn resume(&self, namespace: &str, name: &str, still_waiting: Option<&WaitingFor>) -> Outcome {
        if let Some(other) = still_waiting {
            return match self.annotate(namespace, name, Some(other)).await {
                Ok(()) => Outcome::Done(format!("skipped: still waiting on {}", other.question_id)),
                Err(outcome) => outcome,
            };
        }
        // A Query whose phase moved on still loses its annotation.
        let result = match self.switch_phase(namespace, name, &self.waiting_phase, RUNNING).await {
            Ok(()) => "patched".to_owned(),
            Err(Outcome::Done(moot)) => moot,
            Err(failure) => return failure,
        };
        match self.annotate(namespace, name, None).await {
            Ok(()) => Outcome::Done(result),
            Err(failure) => failure,
        }
    }

    async fn switch_phase(&self, namespace: &str, name: &str, from: &str, to: &str) -> Result<(), Outcome> {
        let operations = json!([
            {"op": "test", "path": "/status/phase", "value": from},
            {"op": "replace", "path": "/status/phase", "value": to},
        ]);
        let patch: json_patch::Patch = serde_json::from_value(operations).expect("a well-formed JSON Patch");
        self.api(namespace).patch_status(name, &params(), &Patch::<()>::Json(patch)).await.map(|_| ()).map_err(classify)
    }

    async fn annotate(&self, namespace: &str, name: &str, waiting: Option<&WaitingFor>) -> Result<(), Outcome> {
        let value = waiting.map_or(Value::Null, |w| Value::String(annotation(w).to_string()));
        let patch = json!({"metadata": {"annotations": {WAITING_FOR_ANNOTATION: value}}});
        match self.api(namespace).patch(name, &params(), &Patch::Merge(patch)).await {
            Ok(_) => Ok(()),
            // Gone: nothing left to annotate.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(classify(error)),
        }
    }
}

fn params() -> PatchParams {
    PatchParams { field_manager: Some("ark-broker".into()), ..PatchParams::default() }
}

/// `{"since","question":{"id"},"taskId","toolCallId"}`.
fn annotation(waiting: &WaitingFor) -> Value {
    json!({
        "since": iso_timestamp(waiting.since),
        "question": {"id": waiting.question_id},
        "taskId": waiting.task_id,
        "toolCallId": waiting.tool_call_id,
    })
}

/// 404 means gone, and a 422 for a failed `test` means the phase moved on: both finish the patch. A 422 that
/// names fields is the API server refusing the object we would make (the CRD's schema: a waiting phase its enum
/// lacks), which no retry fixes, like a 403. Conflicts, throttling and server errors are transient.
fn classify(error: kube::Error) -> Outcome {
    match error {
        kube::Error::Api(status) => match status.code {
            404 => Outcome::Done("skipped: the Query is gone".into()),
            422 if !names_fields(&status) => Outcome::Done("skipped: the Query's phase moved on".into()),
            409 | 429 | 500.. => Outcome::Retry(format!("{} {}", status.code, status.message)),
            _ => Outcome::GiveUp(format!("{} {}", status.code, status.message)),
        },
        other => Outcome::Retry(other.to_string()),
    }
}

/// Whether a refusal names the fields it found invalid (a schema violation). A failed JSON Patch `test` names
/// none: the API server answers it with a generic 422 ("the server rejected our request due to an error in our
/// request", no causes).
fn names_fields(status: &kube::core::Status) -> bool {
    status.details.as_ref().is_some_and(|details| details.causes.iter().any(|cause| !cause.field.is_empty()))
}

#[cfg(test)]
mod tests {
    use kube::core::{Status, response::StatusDetails};

    use super::*;

    fn refused(code: u16, fields: &[&str]) -> kube::Error {
        let causes = fields.iter().map(|f| json!({"reason": "FieldValueNotSupported", "message": "", "field": f}));
        let details = json!({"name": "", "group": "", "kind": "", "uid": "", "causes": causes.collect::<Vec<_>>(),
                             "retryAfterSeconds": 0});
        let details: StatusDetails = serde_json::from_value(details).unwrap();
        kube::Error::Api(Status::failure("refused", "Invalid").with_code(code).with_details(details).boxed())
    }

    #[test]
    fn refusals_are_classified_as_the_real_api_server_words_them() {
        assert!(matches!(classify(refused(404, &[])), Outcome::Done(m) if m.contains("gone")));
        assert!(matches!(classify(refused(422, &[])), Outcome::Done(m) if m.contains("moved on")));
        assert!(matches!(classify(refused(422, &["status.phase"])), Outcome::GiveUp(m) if m.starts_with("422")));
        assert!(matches!(classify(refused(403, &[])), Outcome::GiveUp(m) if m.starts_with("403")));
        assert!(matches!(classify(refused(409, &[])), Outcome::Retry(_)));
        assert!(matches!(classify(refused(503, &[])), Outcome::Retry(_)));
    }
}
