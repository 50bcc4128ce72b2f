//! The crate's layers, top to bottom, and the test that keeps the import graph reading that way: a module
//! may import one of its own layer or of a layer below, never one above, and modules of one layer never
//! import each other in a circle.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// Top-level modules by layer, the top first (as the crate's docs and the README list them).
const LAYERS: &[&[&str]] = &[
    &["main", "server"],
    &["app", "connections"],
    &["ui", "mcp", "operations"],
    &["state", "retention"],
    &["channels", "query_status", "queries", "questions", "messages", "events", "sessions", "traces", "streams"],
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
    let code: String =
        source.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.extend(first_name(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(ch);
            }
            found.extend(first_name(&item));
        } else {
            found.extend(first_name(rest));
        }
    }
    found
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

#[test]
fn modules_of_one_layer_import_each_other_in_no_circle() {
    let graph = import_graph();
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
    for module in graph.keys() {
        let circle = visit(module, &graph, &mut Vec::new(), &mut done);
        assert!(circle.is_none(), "modules importing each other in a circle: {circle:?}");
    }
}

#[test]
fn imports_are_read_from_paths_and_groups_but_not_comments() {
    let source = "use crate::{db::{self, feed::Feed}, error::ApiError};\n// crate::ui is a comment\n\
                  let x = crate::config::Config::default();\ncrate::feed_row!(Row, id);";
    assert_eq!(imports(source), ["config", "db", "error", "feed_row!"].map(String::from).into());
}
