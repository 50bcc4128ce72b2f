//! Who may answer, decided by Kubernetes, on the real API server (`support::kube_apiserver`) with real
//! ServiceAccount tokens: `--answer-policy kubernetes` asks a SubjectAccessReview whether the answering
//! principal may `update` `queries` in the question's namespace; `--answer-policy recipient` takes the
//! principal's groups from its TokenReview as teams (`ark://teams/<group>`).

use k8s_openapi::api::{
    authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use serde_json::{Value, json};

use crate::support::{
    kube_deployment::{Deployment, deploy},
    within,
};

const ENV_AUTH: [(&str, &str); 2] = [("ARK_BROKER_AUTH", "kubernetes"), ("ARK_BROKER_AUTH_AUDIENCES", "ark-broker")];

/// Lets ServiceAccount `account` of the deployment's namespace update Queries there, and waits until RBAC
/// says so (the authorizer reads roles from a cache; nothing signals it).
async fn grant_query_updates(cluster: &Deployment, account: &str) {
    let (admin, ns) = (cluster.server.admin().await, cluster.namespace.as_str());
    let meta = ObjectMeta { name: Some("query-approver".into()), ..Default::default() };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["ark.mckinsey.com".into()]),
            resources: Some(vec!["queries".into()]),
            verbs: vec!["get".into(), "update".into()],
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), ns).create(&PostParams::default(), &role).await.unwrap();
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "query-approver".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), ns).create(&PostParams::default(), &binding).await.unwrap();
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{ns}:{account}")),
            resource_attributes: Some(ResourceAttributes {
                group: Some("ark.mckinsey.com".into()),
                namespace: Some(ns.into()),
                resource: Some("queries".into()),
                verb: Some("update".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(admin);
    within("RBAC to take effect", async {
        while !reviews.create(&PostParams::default(), &review).await.unwrap().status.unwrap().allowed {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}

async fn ask(cluster: &Deployment, token: &str, body: Value) -> String {
    let asked = cluster.http.post(cluster.url("/questions")).bearer_auth(token).json(&body).send().await.unwrap();
    assert_eq!(asked.status(), 201);
    asked.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

async fn answer(cluster: &Deployment, token: &str, id: &str) -> (u16, Value) {
    let answer = cluster.http.post(cluster.url(&format!("/questions/{id}/answer"))).bearer_auth(token);
    let response = answer.json(&json!({"response": "yes"})).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn answer_policy_kubernetes_lets_whoever_may_update_the_querys_namespace_answer() {
    let env = [ENV_AUTH[0], ENV_AUTH[1], ("ARK_BROKER_ANSWER_POLICY", "kubernetes")];
    let cluster = deploy(json!({"auth": {"mode": "kubernetes", "answerPolicy": "kubernetes"}}), |_| (), &env).await;
    let (server, ns) = (cluster.server, cluster.namespace.clone());
    for account in ["agent", "approver", "viewer"] {
        server.service_account(&ns, account).await;
    }
    grant_query_updates(&cluster, "approver").await;
    let token = |account: &'static str| {
        let ns = ns.clone();
        async move { server.token(&ns, account, &["ark-broker"], 3600).await }
    };
    let (agent, approver, viewer) = (token("agent").await, token("approver").await, token("viewer").await);
    let body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy?",
                      "query": {"namespace": ns, "name": "deploy-1"}});
    let id = ask(&cluster, &agent, body).await;

    let (status, refused) = answer(&cluster, &viewer, &id).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "FORBIDDEN");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!("system:serviceaccount:{ns}:viewer may not update queries in namespace {ns}")),
        "{why}"
    );
    let (status, answered) = answer(&cluster, &approver, &id).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["answeredBy"], format!("system:serviceaccount:{ns}:approver"));
    let history: Value = cluster
        .http
        .get(cluster.url(&format!("/questions/{id}/history")))
        .bearer_auth(&agent)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let steps: Vec<&str> = history["items"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["created", "refused", "answered"], "{history}");

    // RBAC answers only for a namespace: a question naming none cannot be answered under this policy.
    let body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Where?"});
    let id = ask(&cluster, &agent, body).await;
    let (status, refused) = answer(&cluster, &approver, &id).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("names no Query namespace"), "{refused}");
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn answer_policy_recipient_takes_the_principals_kubernetes_groups_as_teams() {
    let env = [ENV_AUTH[0], ENV_AUTH[1], ("ARK_BROKER_ANSWER_POLICY", "recipient")];
    let cluster = deploy(json!({"auth": {"mode": "kubernetes", "answerPolicy": "recipient"}}), |_| (), &env).await;
    let (server, ns) = (cluster.server, cluster.namespace.as_str());
    let elsewhere = server.namespace("other").await;
    server.service_account(ns, "agent").await;
    server.service_account(ns, "operator").await;
    server.service_account(&elsewhere, "operator").await;
    let agent = server.token(ns, "agent", &["ark-broker"], 3600).await;
    let member = server.token(ns, "operator", &["ark-broker"], 3600).await;
    let outsider = server.token(&elsewhere, "operator", &["ark-broker"], 3600).await;
    // Every ServiceAccount of a namespace is in the group `system:serviceaccounts:<namespace>`.
    let team = format!("ark://teams/system:serviceaccounts:{ns}");
    let body = json!({"sender": "ark://agents/deployer", "recipient": team, "content": "Scale up?"});
    let id = ask(&cluster, &agent, body).await;
    let (status, refused) = answer(&cluster, &outsider, &id).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("is not a recipient"), "{refused}");
    let (status, refused) = answer(&cluster, &agent, &id).await;
    assert_eq!(status, 403, "the asker is in the team too, but may not answer its own question: {refused}");
    let (status, answered) = answer(&cluster, &member, &id).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["answeredBy"], format!("system:serviceaccount:{ns}:operator"));
}
