//! What an operator sees: `/metrics` in Prometheus text, every family there from start-up (requests by route
//! and status, open readers, ingest and flushes, delivery lag, questions by status, outbox backlog, pool, build
//! info), and the logs of a real broker process (one line per request with its route, status, latency and
//! request id, none for probes and scrapes, an error logged with its request's id, the version and URLs at
//! start-up).

use serde_json::{Value, json};

use crate::support::{Replica, SseReader, TestApp, fresh_database, json_of, mcp::Mcp, within};

/// The value of the sample `name{labels}` (labels as written, in order), if scraped.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn scrape(app: &TestApp) -> String {
    let response = app.get("/metrics").await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    response.text().await.unwrap()
}

#[tokio::test]
async fn metrics_count_requests_readers_ingest_questions_and_the_pool() {
    let app = TestApp::spawn().await;
    // The recorder is the process's: other tests' brokers count too, so counters are compared before/after.
    let before = scrape(&app).await;
    let created = r#"ark_broker_http_requests_total{method="POST",route="/questions",status="201"}"#;
    let lines = "ark_broker_ingest_lines_total";
    let mut reader = SseReader::open(&app.client, &app.url("/stream/metered")).await;
    let open_readers = sample(&scrape(&app).await, "ark_broker_sse_readers").unwrap();
    assert!(open_readers >= 1.0, "the open SSE reader is counted");

    let (status, _) = json_of(app.post_raw("/stream/metered", "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n").await).await;
    assert_eq!(status, 200);
    within("the chunks at the reader", async {
        for _ in 0..3 {
            reader.next_data().await.expect("a chunk");
        }
    })
    .await;
    let question = json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "metered?"});
    let (_, asked) = json_of(app.post_json("/questions", &question).await).await;
    app.post_json(&format!("/questions/{}/answer", asked["id"].as_str().unwrap()), &json!({"response": "yes"})).await;
    app.post_json("/questions", &question).await;

    let after = scrape(&app).await;
    let grew = |series: &str, by: f64| {
        let (was, is) = (sample(&before, series).unwrap_or(0.0), sample(&after, series).unwrap_or(0.0));
        assert!(is - was >= by, "{series}: {was} → {is}, expected +{by}\n{after}");
    };
    grew(created, 2.0);
    grew(lines, 3.0);
    grew("ark_broker_flush_rows_count", 1.0);
    grew("ark_broker_flush_duration_seconds_count", 1.0);
    grew(r#"ark_broker_notify_delivery_lag_seconds_count{feed="chunks"}"#, 1.0);
    // Row counts are this broker's database's: exact.
    assert_eq!(sample(&after, r#"ark_broker_questions{status="pending"}"#), Some(1.0), "{after}");
    assert_eq!(sample(&after, r#"ark_broker_questions{status="answered"}"#), Some(1.0));
    assert_eq!(sample(&after, r#"ark_broker_outbox_backlog{outbox="channel_deliveries"}"#), Some(0.0));
    assert!(sample(&after, "ark_broker_db_pool_connections").unwrap() >= 1.0);
    assert!(sample(&after, "ark_broker_db_pool_acquire_wait_seconds").is_some());
    let build = after.lines().find(|l| l.starts_with("ark_broker_build_info{")).expect("build info");
    assert!(
        build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))) && build.contains("git_sha="),
        "{build}"
    );
    // The route template labels the series, never the raw path.
    assert!(after.contains(r#"route="/stream/{id}""#) && !after.contains("/stream/metered"), "{after}");

    drop(reader);
    within("the reader to be counted closed", async {
        loop {
            let now = sample(&scrape(&app).await, "ark_broker_sse_readers").unwrap();
            if now < open_readers {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// The metric families docs/operating.md explains (every `ark_broker_*` and upstream's `broker_*_count` name in
/// backticks before its logs bullet), so the page and the scrape cannot drift apart.
fn families_on_the_operating_page() -> Vec<String> {
    let readme = include_str!("../../docs/operating.md");
    let start = readme.find("# Operating: metrics and logs").expect("docs/operating.md's metrics section");
    let section = &readme[start..];
    let section = &section[..section.find("\n- Logs:").expect("the logs bullet after the metrics")];
    let mut families: Vec<String> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|code| code.split('{').next().unwrap())
        .filter(|name| {
            name.starts_with("ark_broker_")
                || name.starts_with("process_")
                || (name.starts_with("broker_") && name.ends_with("_count"))
        })
        .map(str::to_owned)
        .collect();
    families.sort();
    families.dedup();
    families
}

/// The reaper's `kind` labels as docs/operating.md lists them: in the order a pass takes them.
pub fn reaper_kinds_on_the_operating_page() -> Vec<&'static str> {
    let readme = include_str!("../../docs/operating.md");
    let start =
        readme.find("per `kind` (").expect("docs/operating.md's list of the reaper's kinds") + "per `kind` (".len();
    let list = &readme[start..start + readme[start..].find(')').expect("the end of the list")];
    list.split('`').skip(1).step_by(2).collect()
}

/// Every sample of family `name` (with histograms' `_bucket`, `_sum` and `_count`): its series and value.
fn samples_of<'a>(metrics: &'a str, name: &str) -> Vec<(&'a str, f64)> {
    metrics
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let rest = ["_bucket", "_sum", "_count"].iter().find_map(|s| rest.strip_prefix(s)).unwrap_or(rest);
            (rest.starts_with('{') || rest.starts_with(' ')).then_some(())?;
            let (series, value) = line.rsplit_once(' ')?;
            Some((series, value.parse().ok()?))
        })
        .collect()
}

#[tokio::test]
async fn a_fresh_replica_exports_every_family_with_its_help_and_type_at_zero_before_any_traffic() {
    // A process of its own: the recorder is the process's, and this test's own process has others' counts.
    let replica = Replica::start(&fresh_database().await).await;
    // A newline first, so every line, the first too, follows one.
    let metrics = format!("\n{}", reqwest::get(replica.url("/metrics")).await.unwrap().text().await.unwrap());
    let families = families_on_the_operating_page();
    assert!(families.len() >= 31, "docs/operating.md lists the families: {families:?}");
    // Their `route` and `status` labels are not known before the first request (docs/operating.md says so).
    let after_the_first_request = ["ark_broker_http_requests_total", "ark_broker_http_request_duration_seconds"];
    // Read at scrape, so not zero: the pool this replica has, its wait, and the build; and how it hears of
    // commits.
    let not_zero = [
        "ark_broker_listen_mode",
        "ark_broker_db_pool_connections",
        "ark_broker_db_pool_idle_connections",
        "ark_broker_db_pool_acquire_wait_seconds",
        "ark_broker_build_info",
    ];
    for family in families.iter().filter(|f| !after_the_first_request.contains(&f.as_str())) {
        let not_zero = not_zero.contains(&family.as_str()) || family.starts_with("process_");
        assert!(metrics.contains(&format!("\n# HELP {family} ")), "{family} has its help:\n{metrics}");
        assert!(metrics.contains(&format!("\n# TYPE {family} ")), "{family} has its type:\n{metrics}");
        let samples = samples_of(&metrics, family);
        assert!(!samples.is_empty(), "{family} is exported:\n{metrics}");
        if !not_zero {
            assert!(samples.iter().all(|(_, value)| *value == 0.0), "{family} is at zero: {samples:?}");
        }
    }
    // A replica alone holds the relay lock (nobody follows it below `--listen-relay-from`).
    for (mode, value) in [("listening", 0.0), ("relay", 1.0), ("following", 0.0)] {
        let name = format!("ark_broker_listen_mode{{mode=\"{mode}\"}}");
        assert_eq!(sample(&metrics, &name), Some(value), "{name}:\n{metrics}");
    }
    // Every label value known from the start has its series.
    let series = |family: &str, label: &str, values: &[&str]| {
        for value in values {
            let name = format!("{family}{{{label}=\"{value}\"}}");
            assert_eq!(sample(&metrics, &name), Some(0.0), "{name}:\n{metrics}");
        }
    };
    let feeds = ark_broker::db::feed::Feed::ALL.map(|feed| feed.name());
    series("ark_broker_notify_delivery_lag_seconds_count", "feed", &feeds);
    series("ark_broker_notify_delivery_lag_seconds_sum", "feed", &feeds);
    let outboxes = ["status_patches", "channel_deliveries"];
    series("ark_broker_outbox_failures_total", "outbox", &outboxes);
    series("ark_broker_outbox_backlog", "outbox", &outboxes);
    let kinds = reaper_kinds_on_the_operating_page();
    series("ark_broker_reaper_deleted_total", "kind", &kinds);
    let mut exported: Vec<&str> = samples_of(&metrics, "ark_broker_reaper_deleted_total")
        .into_iter()
        .filter_map(|(series, _)| series.split("kind=\"").nth(1)?.split('"').next())
        .collect();
    exported.sort();
    let mut listed = kinds.clone();
    listed.sort();
    assert_eq!(exported, listed, "the reaper exports the kinds docs/operating.md lists, and no other");
    series("ark_broker_questions", "status", &["answered", "cancelled", "expired", "pending"]);
    for histogram in ["ark_broker_flush_rows", "ark_broker_flush_duration_seconds"] {
        assert!(metrics.contains(&format!("\n{histogram}_bucket{{le=\"+Inf\"}} 0\n")), "{histogram}:\n{metrics}");
        assert_eq!(sample(&metrics, &format!("{histogram}_count")), Some(0.0), "{histogram}");
    }
    assert!(
        metrics.contains("\n# TYPE ark_broker_notify_delivery_lag_seconds histogram\n"),
        "a histogram, with nothing observed:\n{metrics}"
    );
    the_process_families_describe_the_replica(&replica, &metrics);
}

/// The `process_*` families of `metrics` are `replica`'s own process, as `/proc` shows it.
fn the_process_families_describe_the_replica(replica: &Replica, metrics: &str) {
    let value = |name: &str| sample(metrics, name).unwrap_or_else(|| panic!("{name}:\n{metrics}"));
    let status = std::fs::read_to_string(format!("/proc/{}/status", replica.pid())).unwrap();
    let kib = |field: &str| -> f64 {
        let line = status.lines().find(|line| line.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() * 1024.0
    };
    let (resident, virtual_memory) = (value("process_resident_memory_bytes"), value("process_virtual_memory_bytes"));
    assert!(resident > 1e6 && resident < 2.0 * kib("VmHWM:"), "resident {resident} vs /proc's peak {}", kib("VmHWM:"));
    assert!((virtual_memory - kib("VmSize:")).abs() < 0.25 * virtual_memory, "virtual {virtual_memory}");
    let (open, max) = (value("process_open_fds"), value("process_max_fds"));
    assert!(open >= 3.0 && open < max, "open descriptors {open} of {max}");
    assert!(value("process_threads") >= 2.0, "the runtime's threads");
    // Whole seconds (the `metrics` crate's counters are integers), as /proc counts them (clock ticks of 10 ms).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", replica.pid())).unwrap();
    let ticks: f64 =
        stat.rsplit(") ").next().unwrap().split(' ').skip(11).take(2).map(|t| t.parse::<f64>().unwrap()).sum();
    let cpu = value("process_cpu_seconds_total");
    assert!(cpu <= ticks / 100.0 && ticks / 100.0 - cpu < 2.0, "CPU seconds {cpu}, /proc's {}", ticks / 100.0);
    let started = value("process_start_time_seconds");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(started <= now && now - started < 600.0, "started {started}, now {now}");
    assert!(metrics.contains("\n# TYPE process_cpu_seconds_total counter\n"), "CPU seconds are a counter");
}

/// The JSON log lines of `replica` that say `message`.
fn lines_saying(replica: &Replica, message: &str) -> Vec<Value> {
    replica
        .log()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == message)
        .collect()
}

#[tokio::test]
async fn each_request_is_logged_once_with_its_route_status_and_id_and_errors_carry_the_id() {
    let url = fresh_database().await;
    let replica = Replica::start(&url).await;
    let started = lines_saying(&replica, "listening");
    let started = started.first().expect("the start-up line");
    assert_eq!(started["version"], env!("CARGO_PKG_VERSION"));
    for (field, path) in [("api.url", "/"), ("page.url", "/ui"), ("mcp.url", "/mcp")] {
        let url = started[field].as_str().unwrap();
        assert!(url.starts_with("http://") && url.ends_with(path), "{field}: {url}");
    }

    let client = reqwest::Client::new();
    let get = |path: &str, id: &str| client.get(replica.url(path)).header("x-request-id", id).send();
    assert_eq!(get("/questions", "log-ok").await.unwrap().status(), 200);
    assert_eq!(get("/questions/q-missing", "log-404").await.unwrap().status(), 404);
    for quiet in ["/health", "/readyz", "/metrics"] {
        get(quiet, "log-quiet").await.unwrap();
    }
    // A table gone from under the broker: the request fails with 500, and the error is logged with its id.
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("alter table messages rename to messages_gone").execute(&pool).await.unwrap();
    assert_eq!(get("/messages", "log-500").await.unwrap().status(), 500);

    let requests = within("the request lines", async {
        loop {
            let lines = lines_saying(&replica, "request");
            if lines.iter().any(|l| l["request.id"] == "log-500") {
                return lines;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let line = |id: &str| {
        let found: Vec<&Value> = requests.iter().filter(|l| l["request.id"] == id).collect();
        assert_eq!(found.len(), 1, "one line for {id}: {requests:?}");
        found[0].clone()
    };
    let ok = line("log-ok");
    assert_eq!((ok["level"].as_str(), ok["http.method"].as_str()), (Some("INFO"), Some("GET")));
    assert_eq!((ok["http.route"].as_str(), ok["http.status"].as_u64()), (Some("/questions"), Some(200)));
    assert!(ok["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0));
    let missing = line("log-404");
    assert_eq!((missing["http.route"].as_str(), missing["http.status"].as_u64()), (Some("/questions/{id}"), Some(404)));
    assert_eq!(line("log-500")["http.status"], 500);
    assert!(requests.iter().all(|l| l["request.id"] != "log-quiet"), "probes and scrapes are not logged");
    let errors: Vec<Value> =
        lines_saying(&replica, "request failed").into_iter().filter(|l| l["level"] == "ERROR").collect();
    assert_eq!(errors.len(), 1, "{}", replica.log());
    assert_eq!(errors[0]["spans"][0]["request.id"], "log-500", "the error names its request");
    assert!(
        !replica.log().contains("tower_http::trace::on_failure"),
        "a failure is logged once, not by tower-http too"
    );

    // MCP's requests are logged the same way, inside a span with their request.id.
    let listed =
        Mcp::new(&replica.mcp_url).with_header("x-request-id", "log-mcp").legacy("tasks/list", json!({})).await;
    assert_eq!(listed.status, 200);
    let mcp_line = within("the MCP request's line", async {
        loop {
            let found = lines_saying(&replica, "request").into_iter().find(|l| l["request.id"] == "log-mcp");
            if let Some(line) = found {
                return line;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        (mcp_line["http.route"].as_str(), mcp_line["spans"][0]["request.id"].as_str()),
        (Some("/mcp"), Some("log-mcp"))
    );

    // A method of the client's own invention is counted as OTHER: it cannot make new series.
    let invented = reqwest::Method::from_bytes(b"M12345").unwrap();
    client.request(invented, replica.url("/anything")).send().await.unwrap();
    let metrics = client.get(replica.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(!metrics.contains("M12345"), "{metrics}");
    assert!(metrics.contains(r#"method="OTHER""#), "{metrics}");
}

#[tokio::test]
async fn at_debug_a_line_logged_inside_a_handler_and_a_store_call_still_names_its_request() {
    let url = fresh_database().await;
    let replica = Replica::start_with(&url, &["--log-level", "info,ark_broker=debug,sqlx=debug"]).await;
    let response =
        reqwest::Client::new().get(replica.url("/messages")).header("x-request-id", "log-debug").send().await.unwrap();
    assert_eq!(response.status(), 200);
    // sqlx logs each statement at debug, inside the store call's span, inside the handler's.
    let statement = within("sqlx's line for the request's statement", async {
        loop {
            let found = replica
                .log()
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|line| line["target"] == "sqlx::query" && line["spans"][0]["request.id"] == "log-debug");
            if let Some(line) = found {
                return line;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let names: Vec<&str> = statement["spans"].as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names.first(), Some(&"http"), "{statement}");
    assert!(names.len() >= 3, "the request's, the handler's and the store call's spans: {statement}");
}

#[tokio::test]
async fn upstreams_size_gauges_count_messages_chunks_spans_events_sessions_and_their_queries() {
    let app = TestApp::spawn().await;
    let messages = json!({"conversation_id": "c-sized", "query_id": "q-sized",
                          "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]});
    assert_eq!(app.post_json("/messages", &messages).await.status(), 200);
    let (status, _) = json_of(app.post_raw("/stream/sized", "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n").await).await;
    assert_eq!(status, 200);
    for (query, session) in [("uid-1", "s-1"), ("uid-2", "s-1"), ("uid-3", "s-2")] {
        let event = json!({"timestamp": "2026-11-23T10:00:00Z", "eventType": "Normal", "reason": "QueryExecutionStart",
                           "message": "started", "data": {"queryId": query, "queryName": format!("q-{query}"),
                                                          "sessionId": session}});
        assert_eq!(app.post_json("/events", &event).await.status(), 201);
    }
    let spans = json!({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "t-1", "spanId": "a", "name": "one"}, {"traceId": "t-1", "spanId": "b", "name": "two"}]}]}]});
    assert_eq!(app.post_json("/v1/traces", &spans).await.status(), 200);

    // Upstream's names and type, no labels; the values are the database's rows, exact at this size.
    let tables = [
        ("select count(*) from messages", "broker_messages_count"),
        ("select count(*) from chunks", "broker_chunks_count"),
        ("select count(*) from spans", "broker_spans_count"),
        ("select count(*) from events", "broker_events_count"),
        ("select count(*) from sessions", "broker_sessions_count"),
        ("select count(*) from session_queries", "broker_session_queries_count"),
    ];
    let mut expected = Vec::new();
    for (count, gauge) in tables {
        let rows: i64 = sqlx::query_scalar(count).fetch_one(&app.pool()).await.unwrap();
        expected.push((gauge, Some(rows as f64)));
    }
    // The recorder is the process's: another test's broker, scraped between this scrape's reading and its
    // rendering, sets the same gauges from its own database. Each scrape sets them again; one of a few
    // renders this broker's alone.
    let mut metrics = scrape(&app).await;
    for _ in 0..20 {
        if expected.iter().all(|(gauge, rows)| sample(&metrics, gauge) == *rows) {
            break;
        }
        metrics = scrape(&app).await;
    }
    for (gauge, rows) in &expected {
        assert!(metrics.contains(&format!("# TYPE {gauge} gauge\n")), "{gauge} is a gauge:\n{metrics}");
        assert!(metrics.contains(&format!("# HELP {gauge} ")), "{gauge} has its help");
        assert_eq!(sample(&metrics, gauge), *rows, "{gauge}\n{metrics}");
    }
    assert_eq!(sample(&metrics, "broker_messages_count"), Some(2.0));
    assert_eq!(sample(&metrics, "broker_events_count"), Some(3.0));
    assert_eq!(sample(&metrics, "broker_spans_count"), Some(2.0));
    assert_eq!(sample(&metrics, "broker_sessions_count"), Some(2.0));
    assert!(sample(&metrics, "broker_chunks_count").unwrap() >= 3.0, "the three chunks");
}
