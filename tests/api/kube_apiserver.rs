//! Query status patching and `--auth kubernetes` against a real Kubernetes API server (kube-apiserver 1.20.2 and
//! etcd, `support::kube_apiserver`; `./scripts/test` builds them once) with our own Query CRD
//! (`support::query_crd`). Each test deploys the chart's own ServiceAccount, Role and RoleBinding (rendered from
//! `chart/` with Helm's Go SDK, `tests/deploy/render.py`) into a namespace of its own and runs the broker as a
//! process authenticated as that ServiceAccount (`support::kube_deployment`), so every patch is the production
//! one, under the chart's RBAC.

use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject},
};
use serde_json::{Value, json};

use crate::support::{
    kube_apiserver::{ISSUER, KubeApiServer},
    kube_deployment::{default_deployment, deploy, done, render_chart},
    query_crd::{self, phase, waiting_for},
};

#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn a_question_sets_its_query_input_required_and_the_answer_sets_it_running_again() {
    let cluster = default_deployment().await;
    query_crd::create(&cluster.queries, "review-42", "running").await;
    let question = cluster.ask("review-42").await;
    let id = question["id"].as_str().unwrap();
    let waiting =
        cluster.until("review-42", |q| phase(q).as_deref() == Some("input-required") && waiting_for(q).is_some()).await;
    let annotation = waiting_for(waiting.as_ref()).unwrap();
    assert_eq!(annotation["question"]["id"], id);
    assert_eq!(annotation["toolCallId"], "call_7");
    assert_eq!(annotation["since"], question["createdAt"]);
    let managers: Vec<_> =
        waiting.unwrap().metadata.managed_fields.unwrap().into_iter().filter_map(|f| f.manager).collect();
    assert!(managers.iter().any(|m| m == "ark-broker"), "the broker's field manager: {managers:?}");

    cluster.answer(id).await;
    cluster.until("review-42", |q| phase(q).as_deref() == Some("running") && waiting_for(q).is_none()).await;
    assert_eq!(cluster.settled(id, 2).await, [done("wait", "patched"), done("resume", "patched")]);
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn an_mcp_ask_with_the_querys_header_sets_it_waiting_and_a_cancel_resumes_it() {
    let cluster = default_deployment().await;
    query_crd::create(&cluster.queries, "review-43", "running").await;
    let header = format!("{}/review-43", cluster.namespace);
    let mcp = crate::support::mcp::Mcp::new(&cluster.broker.mcp_url).with_header("x-ark-query", &header);
    let args = json!({"recipient": "ark://users/dave", "content": "via MCP", "toolCallId": "call_9"});
    let created = mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": args, "task": {}})).await;
    let task_id = created.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let waiting = cluster.until("review-43", |q| waiting_for(q).is_some()).await;
    let annotation = waiting_for(waiting.as_ref()).unwrap();
    assert_eq!((annotation["taskId"].as_str(), annotation["toolCallId"].as_str()), (Some(&*task_id), Some("call_9")));
    assert_eq!(phase(waiting.as_ref()).as_deref(), Some("input-required"));

    let id = annotation["question"]["id"].as_str().unwrap();
    let cancelled = cluster.http.delete(cluster.url(&format!("/questions/{id}"))).send().await.unwrap();
    assert!(cancelled.status().is_success(), "{}", cancelled.status());
    cluster.until("review-43", |q| phase(q).as_deref() == Some("running") && waiting_for(q).is_none()).await;
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn a_query_deleted_meanwhile_is_left_alone_once_and_the_broker_carries_on() {
    let cluster = default_deployment().await;
    query_crd::create(&cluster.queries, "review-44", "running").await;
    let question = cluster.ask("review-44").await;
    let id = question["id"].as_str().unwrap();
    cluster.until("review-44", |q| phase(q).as_deref() == Some("input-required")).await;
    cluster.queries.delete("review-44", &DeleteParams::default()).await.unwrap();
    cluster.until("review-44", |q| q.is_none()).await;
    cluster.answer(id).await;
    assert_eq!(
        cluster.settled(id, 2).await,
        [done("wait", "patched"), done("resume", "skipped: the Query is gone")],
        "one attempt, no retry"
    );

    // A question for a Query that never existed (or went before the wait): the same, at the first patch.
    let orphan = cluster.ask("never-created").await;
    assert_eq!(cluster.settled(orphan["id"].as_str().unwrap(), 1).await, [done("wait", "skipped: the Query is gone")]);
    // The worker is alive (nothing panicked, nothing retries): the next Query is patched.
    query_crd::create(&cluster.queries, "review-45", "running").await;
    cluster.ask("review-45").await;
    cluster.until("review-45", |q| phase(q).as_deref() == Some("input-required")).await;
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn the_controllers_transition_wins_its_stale_update_gets_409_and_the_brokers_test_gets_422() {
    let cluster = default_deployment().await;
    query_crd::create(&cluster.queries, "review-46", "running").await;
    // The controller reads the Query, then the broker patches it before the controller writes.
    let read_by_controller = cluster.queries.get("review-46").await.unwrap();
    let question = cluster.ask("review-46").await;
    let id = question["id"].as_str().unwrap();
    cluster.until("review-46", |q| phase(q).as_deref() == Some("input-required") && waiting_for(q).is_some()).await;
    let stale = query_crd::update_phase(&cluster.queries, read_by_controller, "done").await;
    assert!(
        matches!(&stale, Err(kube::Error::Api(status)) if status.code == 409),
        "the broker's patch moved resourceVersion, so the controller's update from before it conflicts: {stale:?}"
    );
    // The controller reads again and finishes the Query; the broker's resume then finds the phase moved on.
    query_crd::controller_sets_phase(&cluster.queries, "review-46", "done").await;
    cluster.answer(id).await;
    assert_eq!(
        cluster.settled(id, 2).await,
        [done("wait", "patched"), done("resume", "skipped: the Query's phase moved on")],
        "a 422 is final: not retried"
    );
    let after = cluster.queries.get("review-46").await.unwrap();
    assert_eq!(phase(Some(&after)).as_deref(), Some("done"), "the controller's phase is not overwritten");
    assert_eq!(waiting_for(Some(&after)), None, "a Query whose phase moved on still loses the annotation");

    // A question for a Query already done: the wait's test fails (422) and nothing is written.
    let late = cluster.ask("review-46").await;
    let late_id = late["id"].as_str().unwrap();
    assert_eq!(cluster.settled(late_id, 1).await, [done("wait", "skipped: the Query's phase moved on")]);
    let untouched = cluster.queries.get("review-46").await.unwrap();
    assert_eq!((phase(Some(&untouched)).as_deref(), waiting_for(Some(&untouched))), (Some("done"), None));
}

/// The chart's Role, rule by rule and verb by verb: taking any one verb away makes the broker fail as documented
/// (the patch it needed answered 403, given up at once — recorded as the patch's outcome, logged as a warning,
/// counted in `ark_broker_outbox_failures_total{outbox="status_patches"}` for `ArkBrokerOutboxFailing`), so the
/// Role grants nothing the broker does not use. The other tests here run under the whole Role: it is enough.
#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn the_charts_role_is_exactly_enough_without_any_one_verb_the_broker_fails_as_documented() {
    let rendered = render_chart("ark", &json!({})).await;
    let role = rendered.iter().find(|o| o["kind"] == "Role").unwrap();
    let mut cases = Vec::new();
    for (index, rule) in role["rules"].as_array().unwrap().iter().enumerate() {
        for verb in rule["verbs"].as_array().unwrap() {
            cases.push((index, rule["resources"].to_string(), verb.as_str().unwrap().to_owned()));
        }
    }
    let outcomes = futures::future::join_all(cases.iter().map(|(index, _, verb)| async move {
        let without = |objects: &mut Vec<Value>| {
            let role = objects.iter_mut().find(|o| o["kind"] == "Role").unwrap();
            let rules = role["rules"].as_array_mut().unwrap();
            rules[*index]["verbs"].as_array_mut().unwrap().retain(|v| v != verb.as_str());
            rules.retain(|rule| !rule["verbs"].as_array().unwrap().is_empty());
        };
        let cluster = deploy(json!({}), without, &[]).await;
        query_crd::create(&cluster.queries, "review-47", "running").await;
        let question = cluster.ask("review-47").await;
        let patches = cluster.settled(question["id"].as_str().unwrap(), 1).await;
        let metrics = cluster.http.get(cluster.url("/metrics")).send().await.unwrap().text().await.unwrap();
        (patches, cluster.broker.log(), metrics)
    }))
    .await;
    for ((_, resources, verb), (patches, log, metrics)) in cases.iter().zip(outcomes) {
        let (action, outcome, attempts) = &patches[0];
        let outcome = outcome.as_deref().unwrap();
        assert!(
            outcome.starts_with("gave up: 403"),
            "without {verb} on {resources} the broker still {outcome}: the Role grants more than it needs"
        );
        assert_eq!((action.as_str(), *attempts), ("wait", 1), "a 403 is given up at once, not retried");
        assert!(
            log.lines().any(|l| l.contains("Query status patch given up") && l.contains("403")),
            "the warning names the 403:\n{log}"
        );
        assert!(metrics.contains("ark_broker_outbox_failures_total{outbox=\"status_patches\"} 1"), "{metrics}");
    }
}

/// `--auth kubernetes` as the chart sets it up (`auth.mode: kubernetes`: audience `ark-broker`, the
/// ServiceAccount bound to `system:auth-delegator`), with real ServiceAccount tokens from TokenRequests.
#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn auth_kubernetes_accepts_a_real_serviceaccount_token_and_refuses_other_audiences_and_expired_ones() {
    let env = [("ARK_BROKER_AUTH", "kubernetes"), ("ARK_BROKER_AUTH_AUDIENCES", "ark-broker")];
    let cluster = deploy(json!({"auth": {"mode": "kubernetes"}}), |_| (), &env).await;
    let (server, ns) = (cluster.server, cluster.namespace.as_str());
    server.service_account(ns, "executor").await;
    let status = |token: String| {
        let request = cluster.http.get(cluster.url("/questions")).bearer_auth(token);
        async move { request.send().await.unwrap().status().as_u16() }
    };

    let token = server.token(ns, "executor", &["ark-broker"], 3600).await;
    assert_eq!(status(token.clone()).await, 200, "a token for the broker's audience");
    // Another ServiceAccount asks: no principal answers its own question.
    server.service_account(ns, "agent").await;
    let asker = server.token(ns, "agent", &["ark-broker"], 3600).await;
    let asked = cluster.http.post(cluster.url("/questions")).bearer_auth(&asker);
    let body = json!({"sender": "ark://agents/reviewer", "recipient": "ark://users/dave", "content": "Merge?"});
    let question: Value = asked.json(&body).send().await.unwrap().json().await.unwrap();
    let answer = cluster.http.post(cluster.url(&format!("/questions/{}/answer", question["id"].as_str().unwrap())));
    let answered: Value =
        answer.bearer_auth(&token).json(&json!({"response": "yes"})).send().await.unwrap().json().await.unwrap();
    assert_eq!(answered["answeredBy"], format!("system:serviceaccount:{ns}:executor"), "{answered}");

    let unauthenticated = cluster.http.get(cluster.url("/questions")).send().await.unwrap();
    assert_eq!(unauthenticated.status(), 401);
    assert_eq!(status(server.token(ns, "executor", &[ISSUER], 3600).await).await, 401, "a token for the API server");
    assert_eq!(status(server.token(ns, "executor", &["another-service"], 3600).await).await, 401);

    // Kubernetes 1.20 issues no token for less than 10 minutes, so an expired one is signed here with the API
    // server's own ServiceAccount key: the real token's claims, moved an hour into the past.
    let short = server.try_token(ns, "executor", &["ark-broker"], 60).await;
    assert!(short.is_err_and(|e| e.contains("10 minutes")), "1.20's minimum expirationSeconds is 600");
    let shifted = |by: i64| {
        move |claims: &mut Value| {
            for claim in ["iat", "nbf", "exp"] {
                claims[claim] = json!(claims[claim].as_i64().unwrap() + by);
            }
        }
    };
    let resigned = server.resign(&token, shifted(60)).await;
    assert_eq!(status(resigned).await, 200, "a token signed here is accepted while valid");
    let expired = server.resign(&token, shifted(-3600 - 120)).await;
    assert_eq!(status(expired).await, 401, "an expired token");
}

/// Without the chart's `system:auth-delegator` binding the API server refuses the broker's TokenReviews: callers
/// get 503 with `Retry-After` (their token may well be valid), not 401, and the broker logs what to grant.
#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn auth_kubernetes_without_the_auth_delegator_binding_answers_503() {
    let env = [("ARK_BROKER_AUTH", "kubernetes"), ("ARK_BROKER_AUTH_AUDIENCES", "ark-broker")];
    let no_delegator = |objects: &mut Vec<Value>| objects.retain(|o| o["kind"] != "ClusterRoleBinding");
    let cluster = deploy(json!({"auth": {"mode": "kubernetes"}}), no_delegator, &env).await;
    cluster.server.service_account(&cluster.namespace, "executor").await;
    let token = cluster.server.token(&cluster.namespace, "executor", &["ark-broker"], 3600).await;
    let response = cluster.http.get(cluster.url("/questions")).bearer_auth(token).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let log = cluster.broker.log();
    assert!(
        log.lines().any(|l| l.contains("cannot check a bearer token") && l.contains("system:auth-delegator")),
        "the error log says what to grant:\n{log}"
    );
}

/// `--waiting-phase waiting` on a cluster whose CRD lacks it (Ark's): the API server refuses the phase (422,
/// `Unsupported value`), which is a configuration error, not a Query that moved on: given up, and said so.
#[tokio::test]
#[ignore = "needs a kube-apiserver and the chart tools: ./scripts/test builds them and runs it"]
async fn a_waiting_phase_the_crd_refuses_is_given_up_as_such_not_taken_for_a_query_that_moved_on() {
    let cluster = deploy(json!({}), |_| (), &[("ARK_BROKER_WAITING_PHASE", "waiting")]).await;
    query_crd::create(&cluster.queries, "review-48", "running").await;
    let question = cluster.ask("review-48").await;
    let patches = cluster.settled(question["id"].as_str().unwrap(), 1).await;
    let outcome = patches[0].1.as_deref().unwrap();
    assert!(outcome.starts_with("gave up: 422") && outcome.contains("Unsupported value"), "{outcome}");
    let given_up = |line: &str| line.contains("Query status patch given up") && line.contains("status.phase");
    cluster.broker.logged("the give-up logged", given_up).await;
    let query = cluster.queries.get("review-48").await.unwrap();
    assert_eq!((phase(Some(&query)).as_deref(), waiting_for(Some(&query))), (Some("running"), None));
}

/// The strict fake the other Query status tests use (`support::fake_kube`) answers as the real API server does, to
/// the same requests: the phase enum (422 naming `status.phase`), pruning, a failed `test` (422 naming no field),
/// a stale `resourceVersion` (409), a missing Query (404), status ignored through the object.
#[tokio::test]
#[ignore = "needs a kube-apiserver: ./scripts/test builds it and runs it"]
async fn the_fake_api_server_answers_as_the_real_one() {
    let server = KubeApiServer::shared().await;
    let namespace = server.namespace("parity").await;
    let real = query_crd::queries(server.admin().await, &namespace);
    query_crd::create(&real, "review-49", "running").await;
    let fake = crate::support::fake_kube::FakeKube::start().await;
    fake.create(&namespace, "review-49", "running");
    let fake_client = Client::try_from(kube::Config::new(fake.url.parse().unwrap())).unwrap();
    let fake = query_crd::queries(fake_client, &namespace);
    assert_eq!(probe(&fake).await, probe(&real).await);
}

/// What the API server answers to each case: the status code, whether the refusal names fields, and the Query's
/// phase and status fields afterwards.
async fn probe(api: &Api<DynamicObject>) -> Vec<(&'static str, u16, bool, Value)> {
    use kube::api::{Patch, PatchParams};
    let merge = |patch: Value| Patch::<Value>::Merge(patch);
    let failed_test = json!([{"op": "test", "path": "/status/phase", "value": "done"},
                             {"op": "replace", "path": "/status/phase", "value": "error"}]);
    // (case, Query, through the status subresource, patch)
    let cases = [
        ("phase outside the enum", "review-49", true, merge(json!({"status": {"phase": "waiting"}}))),
        ("unknown status field", "review-49", true, merge(json!({"status": {"waitingFor": {"since": "now"}}}))),
        (
            "stale resourceVersion",
            "review-49",
            true,
            merge(json!({"metadata": {"resourceVersion": "1"}, "status": {"phase": "done"}})),
        ),
        ("missing Query", "missing", true, merge(json!({"status": {"phase": "done"}}))),
        ("status through the object", "review-49", false, merge(json!({"status": {"phase": "done"}}))),
        ("a failed test", "review-49", true, Patch::Json(serde_json::from_value(failed_test).unwrap())),
    ];
    let mut answers = Vec::new();
    for (case, name, status, patch) in cases {
        let params = PatchParams::default();
        let result =
            if status { api.patch_status(name, &params, &patch).await } else { api.patch(name, &params, &patch).await };
        let (code, names_fields) = match result {
            Ok(_) => (200, false),
            Err(kube::Error::Api(status)) => {
                let details = status.details.as_ref();
                (status.code, details.is_some_and(|d| d.causes.iter().any(|c| !c.field.is_empty())))
            }
            Err(other) => panic!("{case}: {other}"),
        };
        let after = api.get("review-49").await.unwrap();
        answers.push((case, code, names_fields, after.data["status"].clone()));
    }
    answers
}
