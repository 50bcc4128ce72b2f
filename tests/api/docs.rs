//! The book (`README.md`, `docs/`, `chart/README.md`) held to the code: every link between the pages resolves
//! (a file that exists, a heading it has), and the reference tables are generated from the code — the flags
//! from their clap definitions, the metric families from a fresh replica's scrape, the routes from the OpenAPI
//! document — so a flag, metric or route without its row fails here. `UPDATE_DOCS=1` rewrites the tables
//! instead of failing.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serde_json::Value;

use crate::support::{Replica, TestApp, fresh_database};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every page of the book: the README, the chart's, and each Markdown file under `docs/`.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read docs/") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "md") {
                into.push(path);
            }
        }
    }
    let mut pages = vec![root().join("README.md"), root().join("chart/README.md")];
    walk(&root().join("docs"), &mut pages);
    pages.sort();
    pages
}

/// GitHub's anchor of a heading: lower case, only letters, digits, `-`, `_` and spaces kept, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A page's anchors (a repeated heading's as `-1`, `-2`, …, as GitHub numbers them) and the targets of its links.
fn anchors_and_links(text: &str) -> (BTreeSet<String>, Vec<String>) {
    let (mut anchors, mut links, mut seen) = (BTreeSet::new(), Vec::new(), BTreeMap::<String, usize>::new());
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, Options::all()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => heading.iter_mut().for_each(|h| h.push_str(&t)),
            Event::End(TagEnd::Heading(_)) => {
                let slug = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(slug.clone()).or_default();
                anchors.insert(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
                *n += 1;
            }
            Event::Start(Tag::Link { dest_url, .. }) => links.push(dest_url.into_string()),
            _ => {}
        }
    }
    (anchors, links)
}

#[test]
fn every_link_between_the_pages_resolves_to_a_file_and_a_heading() {
    let pages = pages();
    assert!(pages.len() >= 15, "the book's pages: {pages:?}");
    let parsed: BTreeMap<PathBuf, (BTreeSet<String>, Vec<String>)> =
        pages.iter().map(|page| (page.clone(), anchors_and_links(&std::fs::read_to_string(page).unwrap()))).collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (page, (_, links)) in &parsed {
        for link in links.iter().filter(|link| !link.contains("://") && !link.starts_with("mailto:")) {
            let (path, anchor) = link.split_once('#').unwrap_or((link, ""));
            let target = if path.is_empty() { page.clone() } else { page.parent().unwrap().join(path) };
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{}: {link} (no such file)", page.display()));
                continue;
            };
            checked += 1;
            if anchor.is_empty() {
                continue;
            }
            let anchors = match parsed.get(&target) {
                Some((anchors, _)) => anchors.clone(),
                None => anchors_and_links(&std::fs::read_to_string(&target).unwrap_or_default()).0,
            };
            if !anchors.contains(anchor) {
                broken.push(format!("{}: {link} (no heading #{anchor} there)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 50, "only {checked} internal links checked");
}

#[test]
fn a_broken_link_or_anchor_is_found() {
    let (anchors, links) = anchors_and_links("# The `mcp:caller` tool\n\n## Again\n## Again\n\n[x](a.md#b) [y](#c)\n");
    assert_eq!(anchors, BTreeSet::from(["again".into(), "again-1".into(), "the-mcpcaller-tool".into()]));
    assert_eq!(links, ["a.md#b", "#c"]);
}

/// Checks that `page` holds `content` as its generated block `name`, or rewrites the block with
/// `UPDATE_DOCS=1`.
fn generated(page: &str, name: &str, content: &str) {
    let path = root().join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {page}: {e}"));
    let start = format!("<!-- generated: {name} (UPDATE_DOCS=1 cargo test --test api docs:: rewrites it) -->\n");
    let end = format!("<!-- end of generated: {name} -->");
    let (Some(from), Some(to)) = (text.find(&start), text.find(&end)) else {
        panic!("{page} has no generated block `{name}`: it starts with {start:?} and ends with {end:?}")
    };
    let current = &text[from + start.len()..to];
    if current == content {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{start}{content}{}", &text[..from], &text[to..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    let differ: Vec<String> = content
        .lines()
        .filter(|line| !current.lines().any(|l| l == *line))
        .map(|line| format!("+ {line}"))
        .chain(current.lines().filter(|line| !content.lines().any(|l| l == *line)).map(|line| format!("- {line}")))
        .collect();
    panic!(
        "{page}'s `{name}` differs from the code (`+` the code has it, `-` only the page does); \
         UPDATE_DOCS=1 cargo test --test api docs:: rewrites it:\n{}",
        differ.join("\n")
    );
}

/// One table cell of free text: on one line, its pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

#[test]
#[cfg_attr(
    not(feature = "conformance-fixtures"),
    ignore = "the table lists --mcp-conformance-fixtures, a flag of the conformance-fixtures build (./scripts/test builds it)"
)]
fn the_configuration_page_lists_every_flag_as_clap_defines_it() {
    use clap::CommandFactory;
    let mut table =
        String::from("| flag | environment | upstream's name | default | meaning |\n|---|---|---|---|---|\n");
    for arg in ark_broker::config::Config::command().get_arguments() {
        let Some(long) = arg.get_long().filter(|long| !["help", "version"].contains(long)) else { continue };
        let env = arg.get_env().map_or("—".to_owned(), |env| format!("`{}`", env.to_string_lossy()));
        let upstream: Vec<String> = ark_broker::config::upstream::ALIASES
            .iter()
            .filter(|alias| alias.flag == arg.get_id().as_str())
            .map(|alias| format!("`{}`", alias.upstream))
            .collect();
        let upstream = if upstream.is_empty() { "—".to_owned() } else { upstream.join(", ") };
        let defaults: Vec<String> = arg.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect();
        let default = if defaults.is_empty() { "—".to_owned() } else { format!("`{}`", defaults.join(",")) };
        let meaning = cell(&arg.get_help().map(ToString::to_string).unwrap_or_default());
        table.push_str(&format!("| `--{long}` | {env} | {upstream} | {default} | {meaning} |\n"));
    }
    assert!(table.lines().count() > 60, "{table}");
    generated("docs/configuration.md", "flags", &table);
}

#[tokio::test]
async fn the_metrics_page_lists_every_family_a_fresh_replica_exports() {
    // A process of its own, as an operator's scrape sees one; one request first, so the HTTP families exist.
    let replica = Replica::start(&fresh_database().await).await;
    assert_eq!(reqwest::get(replica.url("/questions")).await.unwrap().status(), 200);
    let scrape = reqwest::get(replica.url("/metrics")).await.unwrap().text().await.unwrap();
    let mut families: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for line in scrape.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name).or_default().1 = help;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name).or_default().0 = kind;
        }
    }
    assert!(families.len() >= 31, "{scrape}");
    let mut table = String::from("| family | type | meaning |\n|---|---|---|\n");
    for (name, (kind, help)) in families {
        table.push_str(&format!("| `{name}` | {kind} | {} |\n", cell(help)));
    }
    generated("docs/metrics.md", "families", &table);
}

#[tokio::test]
async fn the_api_page_lists_every_route_of_the_openapi_document() {
    let app = TestApp::spawn().await;
    let document: Value = app.get("/openapi.json").await.json().await.unwrap();
    let mut table = String::from("| method | path | what it does |\n|---|---|---|\n");
    for (path, item) in document["paths"].as_object().expect("the document's paths") {
        for method in ["get", "put", "post", "patch", "delete", "head", "options"] {
            let Some(operation) = item.get(method) else { continue };
            // utoipa takes a doc comment's first line as the summary and the rest as the description: a first
            // paragraph longer than a line goes on there.
            let summary = operation["summary"].as_str().unwrap_or_default();
            let rest = operation["description"].as_str().unwrap_or_default().split("\n\n").next().unwrap_or_default();
            let paragraph = if summary.ends_with('.') { summary.to_owned() } else { format!("{summary} {rest}") };
            let what = paragraph.trim();
            // The handlers' summaries open with their own route (`GET /x`: …), which the table has already.
            let what =
                what.split_once("`: ").filter(|(route, _)| route.starts_with('`')).map_or(what, |(_, rest)| rest);
            let what = cell(what);
            table.push_str(&format!("| `{}` | `{path}` | {what} |\n", method.to_uppercase()));
        }
    }
    assert!(table.lines().count() > 40, "{table}");
    generated("docs/api.md", "routes", &table);
}
