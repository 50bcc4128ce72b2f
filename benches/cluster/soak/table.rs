//! The soak's markdown: the minute samples as two tables (the replicas; the database's tables) and a verdict
//! per series (`verdict.rs`), naming the tables whose rows are kept by design.

use super::{
    sample::Sample,
    verdict::{self, Judged, Verdict},
};

/// Slack of each kind of series (see `verdict.rs`): what a bounded series may wobble by in absolute terms.
const RSS_SLACK_MB: f64 = 8.0;
const FILES_SLACK: f64 = 5.0;
const POOL_SLACK: f64 = 2.0;
const ROWS_SLACK: f64 = 500.0;
const DATABASE_SLACK_MB: f64 = 16.0;

/// Tables first in this order (the soak's busiest), then the rest by name.
const ORDER: &[&str] = &[
    "chunks",
    "streams",
    "stream_writers",
    "messages",
    "conversations",
    "events",
    "event_queries",
    "sessions",
    "session_queries",
    "questions",
    "question_events",
];

/// Tables that keep a row per key for good (docs/retention.md), so they grow with the keys a run makes.
const KEPT_BY_DESIGN: &[(&str, &str)] = &[
    ("conversations", "one position counter per conversation, kept by design"),
    ("event_queries", "one position counter per Query, kept by design"),
    ("questions", "questions are the record people report on, kept by design"),
    ("traces", "one position counter per trace, kept by design"),
];

/// Replica names, in order.
pub const NAMES: [&str; 3] = ["A", "B", "C"];

/// One series: its name, a value per minute, its slack.
pub struct Series {
    pub name: String,
    pub values: Vec<f64>,
    slack: f64,
}

/// The tables shown: those with a row at some minute.
fn table_names(samples: &[Sample]) -> Vec<String> {
    let mut names: Vec<String> = samples
        .iter()
        .flat_map(|s| s.tables.iter().filter(|(_, rows)| **rows > 0).map(|(name, _)| name.clone()))
        .collect();
    names.sort_by_key(|name| (ORDER.iter().position(|o| *o == name.as_str()).unwrap_or(ORDER.len()), name.clone()));
    names.dedup();
    names
}

/// Every series of the samples.
pub fn series(samples: &[Sample]) -> Vec<Series> {
    let of = |name: String, slack: f64, value: &dyn Fn(&Sample) -> f64| Series {
        name,
        values: samples.iter().map(value).collect(),
        slack,
    };
    let mut all = Vec::new();
    for (r, replica) in NAMES.iter().enumerate() {
        all.push(of(format!("{replica} RSS MiB"), RSS_SLACK_MB, &|s| s.replicas[r].rss_mb));
        all.push(of(format!("{replica} open files"), FILES_SLACK, &|s| s.replicas[r].open_files as f64));
        all.push(of(format!("{replica} pool connections"), POOL_SLACK, &|s| {
            s.replicas[r].pool_connections.unwrap_or(f64::NAN)
        }));
    }
    for table in table_names(samples) {
        all.push(of(format!("{table} rows"), ROWS_SLACK, &|s| s.tables.get(&table).copied().unwrap_or(0) as f64));
    }
    all.push(of("database MiB".to_owned(), DATABASE_SLACK_MB, &|s| s.database_mb));
    all
}

/// The markdown header of the replicas' table.
pub fn replicas_header() -> String {
    let columns: Vec<String> = NAMES.iter().map(|r| format!("{r} RSS MiB | {r} files | {r} pool")).collect();
    let rules = "|---".repeat(2 + 3 * NAMES.len());
    format!("| minute | {} | chunks/s |\n{rules}|\n", columns.join(" | "))
}

/// One minute of the replicas' table.
pub fn replicas_row(sample: &Sample) -> String {
    let cells: Vec<String> = sample
        .replicas
        .iter()
        .map(|r| {
            let pool = r.pool_connections.map_or("–".to_owned(), |p| format!("{p:.0}"));
            format!("{:.1} | {} | {pool}", r.rss_mb, r.open_files)
        })
        .collect();
    format!("| {} | {} | {:.0} |\n", sample.minute, cells.join(" | "), sample.chunks_per_s)
}

/// Both tables and the verdicts, with the samples before `warm_up` (minutes) left out of the verdicts.
pub fn markdown(samples: &[Sample], warm_up: usize) -> (String, Vec<(String, Judged)>) {
    let mut md = String::from("Replicas, each minute:\n\n");
    md.push_str(&replicas_header());
    samples.iter().for_each(|s| md.push_str(&replicas_row(s)));

    let tables = table_names(samples);
    md.push_str("\nRows of each table (exact counts), and the database's size, each minute:\n\n");
    md.push_str(&format!("| minute | {} | database MiB |\n", tables.join(" | ")));
    md.push_str(&format!("{}|\n", "|---".repeat(tables.len() + 2)));
    for sample in samples {
        let rows: Vec<String> = tables.iter().map(|t| sample.tables.get(t).copied().unwrap_or(0).to_string()).collect();
        md.push_str(&format!("| {} | {} | {:.0} |\n", sample.minute, rows.join(" | "), sample.database_mb));
    }

    md.push_str(&format!(
        "\nVerdicts (after a warm-up of {warm_up} minutes; growing = the second half's maximum above the first's \
         by > {:.0} % + slack **and** the fitted line rising by > {:.0} % of the mean + slack):\n\n",
        verdict::TOLERANCE * 100.0,
        verdict::TOLERANCE * 100.0
    ));
    md.push_str("| series | first half max | second half max | fitted rise | verdict |\n|---|---|---|---|---|\n");
    let mut judged = Vec::new();
    for series in series(samples) {
        let result = verdict::judge(&series.values, warm_up, series.slack);
        let table = series.name.strip_suffix(" rows").unwrap_or_default();
        let note = KEPT_BY_DESIGN.iter().find(|(t, _)| *t == table).map(|(_, why)| *why);
        let word = match (result.verdict, note) {
            (Verdict::Growing, Some(why)) => format!("**growing** ({why})"),
            (Verdict::Growing, None) => "**growing**".to_owned(),
            (other, _) => other.word().to_owned(),
        };
        let numbers = match result.verdict {
            Verdict::TooShort => "– | – | –".to_owned(),
            _ => format!("{:.1} | {:.1} | {:+.1}", result.first_max, result.second_max, result.rise),
        };
        md.push_str(&format!("| {} | {numbers} | {word} |\n", series.name));
        judged.push((series.name, result));
    }
    (md, judged)
}
