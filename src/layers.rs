//! The crate's layers, top to bottom, and the test that keeps the import graph reading that way: a module
//! may import one of its own layer or of a layer below, never one above, and modules of one layer never
//! import each other in a circle. Inside `channels` the same holds for its parts, and its two rooms, Slack's
//! and GitHub's, never import each other.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// Top-level modules by layer, the top first (as the crate's docs and docs/architecture.md list them).
const LAYERS: &[&[&str]] = &[
    &["main", "server"],
    &["app", "connections"],
    &["ui", "mcp", "operations"],
    &["state", "retention"],
    &[
        "channels",
        "query_status",
        "queries",
        "questions",
        "messages",
        "events",
        "sessions",
        "traces",
        "streams",
        "durable",
    ],
    &["http", "auth", "idempotency", "error"],
    &["db"],
    &["telemetry", "config", "validate", "timestamp", "kubernetes"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a source file belongs to (`src/questions/store.rs` → `questions`).
fn module_of(relative: &Path) -> String {
    let first = relative.components().next().expect("a path under src/").as_os_str().to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// The top-level modules `source` names through `crate::…`, in code (comments are skipped): both
/// `crate::db::watch` and each first name inside `use crate::{a, b::{c, d}}`.
fn imports(source: &str) -> BTreeSet<String> {
    paths_after(source, "crate::").iter().filter_map(|path| first_name(path)).collect()
}

/// Every path `source` names after `prefix`, in code (comments are skipped), its groups spread out:
/// `use crate::{db::{self, feed::Feed}, error::ApiError}` gives `db::self`, `db::feed::Feed`, `error::ApiError`.
fn paths_after(source: &str, prefix: &str) -> Vec<String> {
    let code: String =
        source.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        paths.extend(spread(rest));
    }
    paths
}

/// The paths of the use-tree `tree` opens with: `a::{b, c::{d, e}}` gives `a::b`, `a::c::d`, `a::c::e`.
fn spread(tree: &str) -> Vec<String> {
    let tree = tree.trim_start();
    let Some(group) = tree.strip_prefix('{') else {
        let path: String = tree.chars().take_while(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '!')).collect();
        let rest = &tree[path.len()..];
        return match path.strip_suffix("::") {
            Some(head) if rest.starts_with('{') => {
                spread(rest).into_iter().map(|tail| format!("{head}::{tail}")).collect()
            }
            _ => vec![path],
        };
    };
    let (mut paths, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, ch) in group.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' | ',' if depth == 0 => {
                paths.extend(spread(&group[start..at]));
                if ch == '}' {
                    break;
                }
                start = at + 1;
            }
            '}' => depth -= 1,
            _ => {}
        }
    }
    paths
}

/// The first name of `path`; a macro's keeps its `!` (`feed_row!`), as it is no module.
fn first_name(path: &str) -> Option<String> {
    let path = path.trim_start();
    let mut name: String = path.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    if path[name.len()..].starts_with('!') {
        name.push('!');
    }
    (!name.is_empty() && name != "self").then_some(name)
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Which top-level module imports which, from the crate's own files (`lib.rs` and this file excluded).
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let files: Vec<(String, String)> = files
        .iter()
        .map(|file| (module_of(file.strip_prefix(&src).expect("under src/")), std::fs::read_to_string(file).unwrap()))
        .filter(|(module, _)| module != "lib" && module != "layers")
        .collect();
    // An exported macro is named `crate::name!` but belongs to the module that defines it.
    let macros: BTreeMap<String, String> = files
        .iter()
        .flat_map(|(module, source)| {
            source.split("macro_rules! ").skip(1).filter_map(|rest| Some((first_name(rest)? + "!", module.clone())))
        })
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, source) in &files {
        let targets = imports(source).into_iter().map(|to| macros.get(&to).cloned().unwrap_or(to));
        graph.entry(from.clone()).or_default().extend(targets.filter(|to| to != from));
    }
    graph
}

#[test]
fn every_module_has_a_layer() {
    for module in import_graph().keys() {
        assert!(layer_of(module).is_some(), "src/{module} is in no layer of LAYERS: give it one");
    }
}

#[test]
fn no_module_imports_one_above_it() {
    let upward: Vec<String> = import_graph()
        .iter()
        .flat_map(|(from, targets)| targets.iter().map(move |to| (from, to)))
        .filter(|(from, to)| layer_of(to) < layer_of(from))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(upward.is_empty(), "imports that point up a layer: {upward:?}");
}

/// A circle in `graph` (`a -> b -> a`), if there is one.
fn circle_in(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first from every module; a module met again while still on the path closes a circle.
    fn visit<'a>(
        module: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| *m == module) {
            return Some(path[at..].iter().chain([&module]).map(|m| m.to_string()).collect());
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for next in graph.get(module).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|module| visit(module, graph, &mut Vec::new(), &mut done))
}

#[test]
fn modules_of_one_layer_import_each_other_in_no_circle() {
    let circle = circle_in(&import_graph());
    assert!(circle.is_none(), "modules importing each other in a circle: {circle:?}");
}

#[test]
fn imports_are_read_from_paths_and_groups_but_not_comments() {
    let source = "use crate::{db::{self, feed::Feed}, error::ApiError};\n// crate::ui is a comment\n\
                  let x = crate::config::Config::default();\ncrate::feed_row!(Row, id);";
    assert_eq!(imports(source), ["config", "db", "error", "feed_row!"].map(String::from).into());
}

/// Inside `channels`, its parts by layer, the top first: what works both channels (the senders the state
/// holds, the delivery worker, reminders), one room per channel, and what both channels share. A part imports
/// one of its own layer or below, and the rooms never each other. `channels/mod.rs`, the door every part may
/// name (`RouteState`, the router), is none of them.
const CHANNEL_PARTS: &[&[&str]] = &[
    &["outbound", "worker", "remind"],
    CHANNEL_ROOMS,
    &["store", "reminder_store", "send", "answer", "form", "receipt", "signature", "inbound_schema"],
];

/// One room per channel (`channels/slack/`, `channels/github/`): each keeps to itself.
const CHANNEL_ROOMS: &[&str] = &["slack", "github"];

fn channel_layer_of(part: &str) -> Option<usize> {
    CHANNEL_PARTS.iter().position(|layer| layer.contains(&part))
}

/// Which part of `channels` (a file beside `mod.rs`, or a room's folder) imports which: named through
/// `crate::channels::…`, or through as many `super::` as the file's module stands below `channels` (one in
/// `remind.rs` and `slack/mod.rs`, two in `slack/inbound.rs`). Names that are no part (the door's items, a
/// test module's `super::`) are left out.
fn channel_graph() -> BTreeMap<String, BTreeSet<String>> {
    let channels = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/channels");
    let mut files = Vec::new();
    sources(&channels, &mut files);
    let files: Vec<(String, usize, String)> = files
        .iter()
        .map(|file| (file.strip_prefix(&channels).expect("under src/channels/"), file))
        .filter(|(relative, _)| *relative != Path::new("mod.rs"))
        .map(|(relative, file)| {
            let depth = relative.components().count() - usize::from(relative.ends_with("mod.rs"));
            (module_of(relative), depth, std::fs::read_to_string(file).unwrap())
        })
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> =
        files.iter().map(|(part, _, _)| (part.clone(), BTreeSet::new())).collect();
    for (part, depth, source) in &files {
        let through_crate = paths_after(source, "crate::")
            .into_iter()
            .filter_map(|path| path.strip_prefix("channels::").map(str::to_owned));
        let through_super = paths_after(source, &"super::".repeat(*depth));
        let named: BTreeSet<String> = through_crate
            .chain(through_super)
            .filter_map(|path| first_name(&path))
            .filter(|name| name != part && graph.contains_key(name))
            .collect();
        graph.get_mut(part).expect("every part is a key").extend(named);
    }
    graph
}

#[test]
fn every_part_of_channels_has_a_layer_and_every_listed_part_is_there() {
    let graph = channel_graph();
    for part in graph.keys() {
        assert!(channel_layer_of(part).is_some(), "src/channels/{part} is in no layer of CHANNEL_PARTS: give it one");
    }
    for part in CHANNEL_PARTS.concat() {
        assert!(graph.contains_key(part), "CHANNEL_PARTS lists {part}, which src/channels/ does not hold");
    }
    // The graph reads both ways of naming a part, or the tests below would pass on nothing.
    assert!(graph["slack"].contains("send") && graph["outbound"].contains("github"), "imports not read: {graph:?}");
}

#[test]
fn no_part_of_channels_imports_one_above_it_and_slack_and_github_import_neither_the_other() {
    let wrong: Vec<String> = channel_graph()
        .iter()
        .flat_map(|(from, targets)| targets.iter().map(move |to| (from.as_str(), to.as_str())))
        .filter(|(from, to)| {
            channel_layer_of(to) < channel_layer_of(from)
                || (CHANNEL_ROOMS.contains(from) && CHANNEL_ROOMS.contains(to))
        })
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "imports inside channels/ that point up a layer or from one channel's room to the other's: {wrong:?}"
    );
}

#[test]
fn parts_of_channels_import_each_other_in_no_circle() {
    let circle = circle_in(&channel_graph());
    assert!(circle.is_none(), "parts of channels/ importing each other in a circle: {circle:?}");
}

#[test]
fn paths_are_read_through_super_and_nested_groups() {
    let source = "use super::{Slack, blocks::Closed};\n\
                  use crate::{channels::{RouteState, send::{Message, Sent}}, error::ApiError};\n\
                  // super::super::github::GitHub is a comment\nlet x = super::super::store::Store::new();";
    let through_crate = ["channels::RouteState", "channels::send::Message", "channels::send::Sent", "error::ApiError"];
    assert_eq!(paths_after(source, "crate::"), through_crate);
    assert_eq!(paths_after(source, "super::super::"), ["store::Store::new"]);
}

/// The rooms of `questions/` that are data (the form, the timeout, the record): the store uses them, and they
/// never reach the store.
const QUESTION_DATA_ROOMS: &[&str] = &["form", "timeout", "record"];

/// The code of each file under `src/questions/`, by its path there (comment lines left out).
fn question_files() -> Vec<(std::path::PathBuf, String)> {
    let questions = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/questions");
    let mut files = Vec::new();
    sources(&questions, &mut files);
    files
        .into_iter()
        .map(|file| {
            let source = std::fs::read_to_string(&file).unwrap();
            let code = source.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>();
            (file.strip_prefix(&questions).unwrap().to_owned(), code.join("\n"))
        })
        .collect()
}

#[test]
fn statements_on_the_questions_tables_are_only_in_the_questions_store() {
    let files = question_files();
    let outside: Vec<_> = files
        .iter()
        .filter(|(path, code)| !path.starts_with("store") && code.contains("sqlx::query"))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(outside.is_empty(), "SQL outside src/questions/store/: {outside:?}");
    let inside = files.iter().filter(|(path, code)| path.starts_with("store") && code.contains("sqlx::query"));
    assert!(inside.count() >= 10, "the check reads the store's statements");
}

#[test]
fn the_questions_data_rooms_never_reach_into_its_store() {
    let wrong: Vec<_> = question_files()
        .into_iter()
        .filter(|(path, _)| QUESTION_DATA_ROOMS.iter().any(|room| path.starts_with(room)))
        .filter(|(_, code)| {
            code.contains("QuestionStore") || code.contains("questions::store") || code.contains("super::store")
        })
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(wrong.is_empty(), "these reach into the questions store: {wrong:?}");
}
