//! Timestamps as the API writes them: what JavaScript's `toISOString` gives (milliseconds, `Z`), as upstream
//! sends them. Stores and models format with it, so it stands below both.

use chrono::{DateTime, SecondsFormat, Utc};

/// Formats a timestamp the way JavaScript's `toISOString` does (milliseconds, `Z`).
pub fn iso_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}
