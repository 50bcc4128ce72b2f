//! `mcp:caller` on the wire, across broker processes: a question asks the person at the calling MCP client
//! through elicitation, in both protocol eras, and the reply may reach any replica. The 2025-11-25 era (its
//! `elicitation/create` on the call's own stream, the reply POSTed elsewhere, racing the page and Slack), a
//! task of each era (`input_required`, `tasks/result`'s stream, `tasks/update`), what cannot name the channel,
//! and whose reply is taken with authentication on. The official SDKs drive the same flows in
//! `mcp_replicas.rs`.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{
    Replica,
    cluster::fresh_database,
    fake_channels::FakeApi,
    json_of,
    slack::{self, click, interaction},
    temp_file, within,
};

/// One MCP endpoint spoken to as a client with a person in front of it would.
struct Client {
    http: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
}

impl Client {
    fn new(url: &str) -> Self {
        Client { http: reqwest::Client::new(), url: url.to_owned(), headers: Vec::new() }
    }

    fn with(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The same client (its session, its credentials) on another replica's endpoint.
    fn on(&self, url: &str) -> Self {
        Client { http: self.http.clone(), url: url.to_owned(), headers: self.headers.clone() }
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(body);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        within("the MCP reply headers", request.send()).await.unwrap()
    }

    /// A 2025-11-25 request; its reply's frames.
    async fn call(&self, method: &str, params: Value) -> Frames {
        Frames::of(self.post(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})).await)
    }

    /// The client's JSON-RPC response to the server's request `id`: the HTTP status.
    async fn reply(&self, id: &Value, result: Value) -> u16 {
        self.post(&json!({"jsonrpc": "2.0", "id": id, "result": result})).await.status().as_u16()
    }
}

/// The JSON-RPC messages of a reply, JSON or SSE, one at a time.
struct Frames {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    sse: bool,
}

impl Frames {
    fn of(response: reqwest::Response) -> Self {
        let sse =
            response.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        Frames { body: response.bytes_stream().boxed(), buffer: String::new(), sse }
    }

    async fn next(&mut self) -> Value {
        within("the next MCP message", async {
            loop {
                if !self.sse {
                    if let Some(chunk) = self.body.next().await {
                        self.buffer.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
                        continue;
                    }
                    return serde_json::from_str(&std::mem::take(&mut self.buffer)).unwrap();
                }
                while let Some(end) = self.buffer.find("\n\n") {
                    let frame: String = self.buffer.drain(..end + 2).collect();
                    let data: String = frame.lines().filter_map(|l| l.strip_prefix("data:")).collect();
                    if !data.trim().is_empty() {
                        return serde_json::from_str(data.trim()).unwrap();
                    }
                }
                let chunk = self.body.next().await.expect("the reply ended early").unwrap();
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
    }

    /// The response, past any notifications.
    async fn response(&mut self) -> Value {
        loop {
            let message = self.next().await;
            if message.get("method").is_none() {
                return message;
            }
        }
    }
}

/// `initialize` declaring `elicitation`; the session id the broker gives.
async fn initialize(client: &Client, elicitation: Value) -> Option<String> {
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": elicitation},
                        "clientInfo": {"name": "person", "version": "1"}});
    let reply = client.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})).await;
    assert_eq!(reply.status(), 200);
    reply.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned())
}

fn ask(content: &str, extra: Value) -> Value {
    let mut arguments = json!({"recipient": "ark://teams/ops", "content": content, "channels": ["mcp:caller"]});
    arguments.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    json!({"name": "ask_question", "arguments": arguments})
}

async fn get(replica: &Replica, path: &str) -> Value {
    reqwest::get(replica.url(path)).await.unwrap().json().await.unwrap()
}

/// `get` with the bearer `token`.
async fn get_as(replica: &Replica, path: &str, token: &str) -> Value {
    reqwest::Client::new().get(replica.url(path)).bearer_auth(token).send().await.unwrap().json().await.unwrap()
}

async fn steps(replica: &Replica, id: &str, step: &str) -> Vec<Value> {
    let history = get(replica, &format!("/questions/{id}/history")).await;
    history["items"].as_array().unwrap().iter().filter(|item| item["step"] == step).cloned().collect()
}

#[tokio::test]
async fn the_callers_answer_races_the_page_and_slack_across_replicas_and_the_first_wins_once() {
    let fake = FakeApi::slack().await;
    let (a, b, c) = slack::three_replicas(&fake).await;
    let session = initialize(&Client::new(&a.mcp_url), json!({})).await.expect("a session id spelling the modes");
    assert!(session.starts_with("ark-elicit.form."), "{session}");
    let person = Client::new(&a.mcp_url).with("mcp-session-id", &session);
    let mut winners = std::collections::BTreeSet::new();
    for round in 0..3 {
        let content = format!("Roll back release {round}?");
        let extra = json!({"channels": ["mcp:caller", "slack:#ops"], "options": ["Yes", "No"]});
        let mut call = person.call("tools/call", ask(&content, extra)).await;
        let asked = call.next().await;
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        assert_eq!(asked["params"]["mode"], "form");
        assert_eq!(asked["params"]["message"], content.as_str());
        assert_eq!(asked["params"]["requestedSchema"]["properties"]["answer"]["enum"], json!(["Yes", "No"]));
        let id = asked["id"].as_str().unwrap().strip_prefix("ark-caller/").unwrap().to_owned();
        let message = within("the question in Slack", async {
            loop {
                if let Some(m) = fake.messages().into_iter().find(|m| m["blocks"].to_string().contains(&id)) {
                    return m;
                }
                fake.wait_for(fake.messages().len() + 1, false).await;
            }
        })
        .await;
        // The reply POSTed to C, a click in Slack on B, the page's form on A: at once.
        let on_c = person.on(&c.mcp_url);
        let from_client = on_c.reply(&asked["id"], json!({"action": "accept", "content": {"answer": "Yes"}}));
        let clicked = click(&fake, &message, "U7", "option:1", &format!("{id}|1"));
        let from_slack = interaction(&b, &clicked);
        let from_page = reqwest::Client::new()
            .post(a.url(&format!("/ui/questions/{id}/answer")))
            .form(&[("response", "Maybe later")])
            .send();
        let (client_status, _, page) = tokio::join!(from_client, from_slack, from_page);
        assert_eq!(client_status, 202, "a reply is taken, or too late, never an error");
        assert!(page.unwrap().status().is_success(), "the page's answer is taken or told it lost");
        let outcome = call.response().await;
        let question = get(&b, &format!("/questions/{id}")).await;
        assert_eq!(question["status"], "answered");
        assert_eq!(outcome["result"]["structuredContent"]["response"], question["response"], "{outcome}");
        let answered = steps(&c, &id, "answered").await;
        assert_eq!(answered.len(), 1, "answered once: {answered:?}");
        let via = answered[0]["channel"].as_str().unwrap().to_owned();
        let expected = match via.as_str() {
            "mcp:caller" => "Yes",
            "page" => "Maybe later",
            _ => "No",
        };
        assert_eq!(question["response"], expected, "the winner's answer ({via})");
        winners.insert(via);
    }
    println!("winners: {winners:?}");
}

#[tokio::test]
async fn a_legacy_task_is_input_required_until_its_caller_answers_on_tasks_results_stream() {
    let url = fresh_database().await;
    let (a, b, c) = Replica::three(&url, &[]).await;
    let session = initialize(&Client::new(&a.mcp_url), json!({"form": {}, "url": {}})).await.unwrap();
    assert!(session.starts_with("ark-elicit.form+url."), "{session}");
    let person = Client::new(&a.mcp_url).with("mcp-session-id", &session);
    let mut params = ask("Scale the cluster?", json!({}));
    params["task"] = json!({"ttl": 600_000});
    let created = person.call("tools/call", params).await.response().await;
    let task = created["result"]["task"]["taskId"].as_str().unwrap().to_owned();
    let got = person.on(&b.mcp_url).call("tasks/get", json!({"taskId": task})).await.response().await;
    assert_eq!(got["result"]["status"], "input_required", "{got}");

    let mut result = person.on(&b.mcp_url).call("tasks/result", json!({"taskId": task})).await;
    let asked = result.next().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task.as_str());
    let status =
        person.on(&c.mcp_url).reply(&asked["id"], json!({"action": "accept", "content": {"answer": "two"}})).await;
    assert_eq!(status, 202);
    let outcome = result.response().await;
    assert_eq!(outcome["result"]["structuredContent"]["response"], "two", "{outcome}");
    let got = person.on(&a.mcp_url).call("tasks/get", json!({"taskId": task})).await.response().await;
    assert_eq!(got["result"]["status"], "completed");
    let id = outcome["result"]["structuredContent"]["questionId"].as_str().unwrap();
    assert_eq!(steps(&c, id, "answered").await[0]["channel"], "mcp:caller");
}

#[tokio::test]
async fn a_modern_task_carries_its_callers_form_as_input_requests_and_takes_the_answer_from_tasks_update() {
    let url = fresh_database().await;
    let (a, b, c) = Replica::three(&url, &[]).await;
    let capabilities = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}}});
    let modern = |replica: &Replica, method: &str, params: Value| {
        let mut params = params;
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                 "io.modelcontextprotocol/clientInfo": {"name": "person", "version": "1"},
                                 "io.modelcontextprotocol/clientCapabilities": capabilities});
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
        let request = reqwest::Client::new()
            .post(&replica.mcp_url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .json(&body);
        let name = match method {
            "tools/call" => "ask_question".to_owned(),
            _ => params["taskId"].as_str().unwrap_or_default().to_owned(),
        };
        let request = request.header("mcp-name", name);
        async move { Frames::of(request.send().await.unwrap()).response().await }
    };
    let schema =
        json!({"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}, "required": ["size"]});
    let created = modern(&a, "tools/call", ask("How many nodes?", json!({"responseSchema": schema}))).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "input_required");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let got = modern(&b, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(got["result"]["status"], "input_required", "{got}");
    let request = &got["result"]["inputRequests"]["ask_question"];
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["requestedSchema"], schema);

    let update =
        json!({"taskId": task, "inputResponses": {"ask_question": {"action": "accept", "content": {"size": 5}}}});
    let updated = modern(&c, "tasks/update", update).await;
    assert!(updated.get("error").is_none(), "{updated}");
    let got = modern(&a, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["result"]["structuredContent"]["response"], json!({"size": 5}));
}

#[tokio::test]
async fn only_an_mcp_call_from_a_client_that_can_be_asked_names_the_caller() {
    let url = fresh_database().await;
    let a = Replica::start(&url).await;
    let rest = reqwest::Client::new();
    let body =
        json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "Hi?", "channels": ["mcp:caller"]});
    let (status, refused) = json_of(rest.post(a.url("/questions")).json(&body).send().await.unwrap()).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("'mcp:caller'"), "{refused}");
    let body = json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "Hi?", "timeoutSeconds": 60,
                      "onTimeout": "escalate", "escalateTo": {"recipients": ["ark://users/c"], "channels": ["mcp:caller"]}});
    let (status, refused) = json_of(rest.post(a.url("/questions")).json(&body).send().await.unwrap()).await;
    assert_eq!(status, 400, "{refused}");

    // A 2025-11-25 client that declared no elicitation gets no session, and a tool error; nothing is stored.
    assert_eq!(initialize(&Client::new(&a.mcp_url), json!(null)).await, None);
    let reply = Client::new(&a.mcp_url).call("tools/call", ask("Nobody to ask?", json!({}))).await.response().await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(reply["result"]["content"][0]["text"].as_str().unwrap().contains("'mcp:caller'"), "{reply}");
    let listed = get(&a, "/questions").await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 0, "nothing stored: {listed}");

    // A reply to no elicitation of ours is a 404, a malformed one a 400.
    let client = Client::new(&a.mcp_url);
    assert_eq!(client.reply(&json!("ark-caller/q-none"), json!({"action": "accept"})).await, 404);
}

#[tokio::test]
async fn with_authentication_only_the_asking_principal_answers_as_the_caller() {
    let url = fresh_database().await;
    let tokens = temp_file("ark-broker-caller-", "alice-token alice\nbob-token bob\n");
    let args = ["--auth", "token", "--auth-tokens-file", tokens.path().to_str().unwrap()];
    let (a, b) = tokio::join!(Replica::start_with(&url, &args), Replica::start_with(&url, &args));
    let alice = Client::new(&a.mcp_url).with("authorization", "Bearer alice-token");
    let session = initialize(&alice, json!({})).await.unwrap();
    let alice = alice.with("mcp-session-id", &session);
    let mut call = alice.call("tools/call", ask("Ship on Friday?", json!({}))).await;
    let asked = call.next().await;
    let id = asked["id"].as_str().unwrap().strip_prefix("ark-caller/").unwrap().to_owned();

    let bob = Client::new(&b.mcp_url).with("authorization", "Bearer bob-token").with("mcp-session-id", &session);
    let accept = json!({"action": "accept", "content": {"answer": "Sure"}});
    assert_eq!(bob.reply(&asked["id"], accept.clone()).await, 403, "bob did not ask it");
    let question: Value = get_as(&b, &format!("/questions/{id}"), "bob-token").await;
    assert_eq!(question["status"], "pending", "{question}");

    assert_eq!(alice.on(&b.mcp_url).reply(&asked["id"], accept).await, 202);
    let outcome = call.response().await;
    assert_eq!(outcome["result"]["structuredContent"]["response"], "Sure", "{outcome}");
    let question: Value = get_as(&a, &format!("/questions/{id}"), "alice-token").await;
    assert_eq!(question["answeredBy"], "alice", "the person at alice's client answers as alice");
}

#[tokio::test]
async fn a_caller_the_answer_policy_would_refuse_is_told_so_and_nothing_is_asked() {
    let url = fresh_database().await;
    let tokens = temp_file("ark-broker-caller-", "alice-token alice\n");
    let args =
        ["--auth", "token", "--auth-tokens-file", tokens.path().to_str().unwrap(), "--answer-policy", "recipient"];
    let replica = Replica::start_with(&url, &args).await;
    let alice = Client::new(&replica.mcp_url).with("authorization", "Bearer alice-token");
    let session = initialize(&alice, json!({})).await.unwrap();
    let alice = alice.with("mcp-session-id", &session);

    // For the team ops, which alice is not in: she could never answer it, so she is not asked.
    let refused = alice.call("tools/call", ask("Ship on Friday?", json!({}))).await.response().await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let why = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(why.contains("'mcp:caller'") && why.contains("not a recipient"), "{why}");
    let listed: Value = get_as(&replica, "/questions", "alice-token").await;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(0), "nothing was stored: {listed}");

    // For alice herself: asked at her client.
    let mut call = alice.call("tools/call", ask("Ship on Monday?", json!({"recipient": "ark://users/alice"}))).await;
    let asked = call.next().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
}
