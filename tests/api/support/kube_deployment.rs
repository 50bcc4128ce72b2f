//! The broker deployed as the chart deploys it, on the real API server ([`super::kube_apiserver`]): the chart
//! rendered for a namespace of its own (`tests/deploy/render.py`, Helm's Go SDK), its ServiceAccount, Role,
//! RoleBinding (and auth-delegator ClusterRoleBinding) applied, and the broker run as a process authenticated as
//! that ServiceAccount — a TokenRequest token in a kubeconfig, found the way it finds one in production
//! (`KUBECONFIG`, `Config::infer`) — so every request it makes is the production one, under the chart's RBAC.

use std::path::Path;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use serde_json::{Value, json};
use sqlx::PgPool;

use super::{Replica, fresh_database, kube_apiserver::KubeApiServer, query_crd, within};

/// The chart's ServiceAccount (release `ark-broker`).
pub const ACCOUNT: &str = "ark-broker";

/// A namespace with the chart's RBAC in it, a broker running as the chart's ServiceAccount, and its database.
pub struct Deployment {
    pub server: &'static KubeApiServer,
    pub namespace: String,
    pub queries: Api<DynamicObject>,
    pub broker: Replica,
    pub pool: PgPool,
    pub http: reqwest::Client,
}

/// Deploys the chart's RBAC rendered with `values` into a new namespace, after `edit` (which may take some of it
/// away), and starts a broker as its ServiceAccount with `env` (the chart's settings under test).
pub async fn deploy(values: Value, edit: impl FnOnce(&mut Vec<Value>), env: &[(&str, &str)]) -> Deployment {
    let server = KubeApiServer::shared().await;
    let namespace = server.namespace("ark").await;
    let admin = server.admin().await;
    let mut objects = render_chart(&namespace, &values).await;
    edit(&mut objects);
    let role = objects.iter().find(|o| o["kind"] == "Role").expect("the chart renders a Role").clone();
    let mut delegator = false;
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        if ["ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding"].contains(&kind) {
            delegator |= kind == "ClusterRoleBinding";
            apply(&admin, &namespace, object).await;
        }
    }
    rbac_in_effect(&admin, &namespace, &role, delegator).await;
    let token = server.token(&namespace, ACCOUNT, &[], 3600).await;
    let kubeconfig = server.kubeconfig_file(&token);
    let database = fresh_database().await;
    let env = [&[("KUBECONFIG", kubeconfig.to_str().unwrap())], env].concat();
    let broker = Replica::start_with_env(&database, &[], &env).await;
    Deployment {
        server,
        queries: query_crd::queries(admin.clone(), &namespace),
        namespace,
        broker,
        pool: PgPool::connect(&database).await.unwrap(),
        http: reqwest::Client::new(),
    }
}

/// The chart's objects for an install into `namespace` (tests/deploy/render.py).
pub async fn render_chart(namespace: &str, values: &Value) -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("tests/deploy/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: ./scripts/test installs it (or run scripts/python-venv tests/deploy)",
        python.display()
    );
    let output = tokio::process::Command::new(python)
        .arg(root.join("tests/deploy/render.py"))
        .args([namespace, &values.to_string()])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "render.py: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Creates `object` (in `namespace` unless it is cluster-scoped).
async fn apply(admin: &Client, namespace: &str, object: &Value) {
    let (group, version) = object["apiVersion"].as_str().unwrap().rsplit_once('/').unwrap_or(("", "v1"));
    let kind = object["kind"].as_str().unwrap();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = if kind.starts_with("Cluster") {
        Api::all_with(admin.clone(), &resource)
    } else {
        Api::namespaced_with(admin.clone(), namespace, &resource)
    };
    let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create {kind}: {e}"));
}

/// Waits until RBAC grants the chart's ServiceAccount every verb of `role` in `namespace`, and TokenReviews if
/// `delegator` (its auth-delegator binding): the authorizer reads roles from a cache, so a binding just created
/// takes a moment to count (nothing signals it; asked every 20 ms).
async fn rbac_in_effect(admin: &Client, namespace: &str, role: &Value, delegator: bool) {
    let mut checks = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        for resource in rule["resources"].as_array().unwrap() {
            let (resource, subresource) = match resource.as_str().unwrap().split_once('/') {
                Some((resource, sub)) => (resource.to_owned(), Some(sub.to_owned())),
                None => (resource.as_str().unwrap().to_owned(), None),
            };
            for verb in rule["verbs"].as_array().unwrap() {
                checks.push(ResourceAttributes {
                    group: Some("ark.mckinsey.com".into()),
                    namespace: Some(namespace.into()),
                    resource: Some(resource.clone()),
                    subresource: subresource.clone(),
                    verb: Some(verb.as_str().unwrap().into()),
                    ..Default::default()
                });
            }
        }
    }
    if delegator {
        checks.push(ResourceAttributes {
            group: Some("authentication.k8s.io".into()),
            resource: Some("tokenreviews".into()),
            verb: Some("create".into()),
            ..Default::default()
        });
    }
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    for attributes in checks {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(format!("system:serviceaccount:{namespace}:{ACCOUNT}")),
                groups: Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]),
                resource_attributes: Some(attributes),
                ..Default::default()
            },
            ..Default::default()
        };
        within("RBAC to take effect", async {
            while !reviews.create(&PostParams::default(), &review).await.unwrap().status.unwrap().allowed {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
    }
}

/// The chart as installed by default (status patching on).
pub async fn default_deployment() -> Deployment {
    deploy(json!({}), |_| (), &[]).await
}

/// An outbox row of a Query status patch: action, outcome, attempts.
pub type Patch = (String, Option<String>, i32);

impl Deployment {
    pub fn url(&self, path: &str) -> String {
        self.broker.url(path)
    }

    /// `POST /questions` naming Query `name` of this namespace; the created question.
    pub async fn ask(&self, name: &str) -> Value {
        let body = json!({"sender": "ark://agents/reviewer", "recipient": "ark://users/dave", "content": "Merge?",
                          "query": {"namespace": self.namespace, "name": name}, "toolCallId": "call_7"});
        let response = self.http.post(self.url("/questions")).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 201);
        response.json().await.unwrap()
    }

    pub async fn answer(&self, id: &str) {
        let answer = json!({"response": "yes"});
        let response = self.http.post(self.url(&format!("/questions/{id}/answer"))).json(&answer).send().await.unwrap();
        assert_eq!(response.status(), 200, "the answer never waits for Kubernetes");
    }

    /// Waits until Query `name` satisfies `condition` (watched).
    pub async fn until(&self, name: &str, condition: impl Fn(Option<&DynamicObject>) -> bool) -> Option<DynamicObject> {
        query_crd::until(&self.queries, name, condition).await
    }

    /// The question's status patches once all `n` are done (nothing signals that; looked at every 20 ms).
    pub async fn settled(&self, question_id: &str, n: usize) -> Vec<Patch> {
        within("the status patches to settle", async {
            loop {
                let rows: Vec<Patch> = sqlx::query_as(
                    "select action, outcome, attempts from query_status_patches where question_id = $1 order by id",
                )
                .bind(question_id)
                .fetch_all(&self.pool)
                .await
                .unwrap();
                if rows.len() == n && rows.iter().all(|(_, outcome, _)| outcome.is_some()) {
                    return rows;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

/// A patch done at the first attempt with `outcome`.
pub fn done(action: &str, outcome: &str) -> Patch {
    (action.into(), Some(outcome.into()), 1)
}
