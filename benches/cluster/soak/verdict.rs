//! The soak's verdict on one series of minute samples: flat (bounded) or growing. Pure, so the one-minute
//! soak test (`tests/api/bench_smoke.rs`) checks it on made-up series too.
//!
//! The samples taken during the warm-up (while the first rows reach their retention and the caches fill)
//! are left out. Of the rest, a series is **growing** when both
//! * the second half's maximum exceeds the first half's by more than 10 % of the first half's maximum plus
//!   the series' slack, and
//! * the least-squares line through all of them rises, over the samples' span, by more than 10 % of their
//!   mean plus the slack;
//!
//! and **flat** otherwise. Either test alone is fooled: a plateau that ends in one late spike passes the
//! first, a saw-tooth (a table filled, then reaped) can tilt the line. A steady leak passes both. The slack
//! (a few MiB, files or rows, by the series' kind) keeps small series from being judged on noise, e.g. a
//! pool of 4 connections that once has 5. Fewer than four samples after the warm-up give no verdict.

use serde::Serialize;

/// Share of the first half's maximum (and of the mean) a series may rise by and still be flat.
pub const TOLERANCE: f64 = 0.10;
/// Samples after the warm-up needed for a verdict.
pub const MIN_SAMPLES: usize = 4;

/// What a series did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Bounded: it levelled off.
    Flat,
    /// Rising steadily.
    Growing,
    /// Too few samples after the warm-up.
    TooShort,
}

impl Verdict {
    /// The word in the report.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Flat => "flat",
            Verdict::Growing => "growing",
            Verdict::TooShort => "too short to tell",
        }
    }
}

/// The numbers behind a verdict.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Judged {
    pub verdict: Verdict,
    /// Maxima of the first and second half after the warm-up.
    pub first_max: f64,
    pub second_max: f64,
    /// The fitted line's rise over the samples' span.
    pub rise: f64,
    pub mean: f64,
}

/// Judges `samples` (one per minute), leaving out the first `warm_up`; `slack` is in the series' unit.
pub fn judge(samples: &[f64], warm_up: usize, slack: f64) -> Judged {
    let steady = samples.get(warm_up..).unwrap_or_default();
    let n = steady.len();
    let max = |values: &[f64]| values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = if n == 0 { 0.0 } else { steady.iter().sum::<f64>() / n as f64 };
    if n < MIN_SAMPLES {
        return Judged { verdict: Verdict::TooShort, first_max: 0.0, second_max: 0.0, rise: 0.0, mean };
    }
    let (first, second) = steady.split_at(n / 2);
    let (first_max, second_max) = (max(first), max(second));
    let rise = slope(steady) * (n - 1) as f64;
    let growing = second_max > first_max * (1.0 + TOLERANCE) + slack && rise > mean * TOLERANCE + slack;
    let verdict = if growing { Verdict::Growing } else { Verdict::Flat };
    Judged { verdict, first_max, second_max, rise, mean }
}

/// Least-squares slope of `values` against their index.
fn slope(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = values.iter().sum::<f64>() / n;
    let (mut covariance, mut variance) = (0.0, 0.0);
    for (x, y) in values.iter().enumerate() {
        let dx = x as f64 - mean_x;
        covariance += dx * (y - mean_y);
        variance += dx * dx;
    }
    if variance == 0.0 { 0.0 } else { covariance / variance }
}
