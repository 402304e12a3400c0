//! Timestamps: the store keeps unix nanoseconds; people write and read RFC 3339.

use clap::ValueEnum;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// How the CLI prints `created_at` / `updated_at`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TimeFormat {
    /// Unix nanoseconds, as the store keeps them (exact; the default).
    #[default]
    Ns,
    /// RFC 3339 in UTC with nanoseconds, e.g. 2024-05-01T12:00:00.000000001Z.
    Rfc3339,
}

/// Unix nanoseconds of an RFC 3339 timestamp (any offset; at most nanosecond precision).
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    let time = OffsetDateTime::parse(text, &Rfc3339).map_err(|e| {
        format!("{text:?} is not an RFC 3339 timestamp (e.g. 2024-05-01T12:00:00Z): {e}")
    })?;
    i64::try_from(time.unix_timestamp_nanos()).map_err(|_| {
        format!("{text:?} is outside the range of nanosecond timestamps (1677 to 2262)")
    })
}

/// RFC 3339 (UTC, nanoseconds) of unix nanoseconds.
pub fn format_rfc3339(nanos: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(nanos))
        .expect("every i64 of nanoseconds is a valid date")
        .format(&Rfc3339)
        .expect("a UTC date formats")
}

/// A timestamp given as JSON: an integer of nanoseconds or an RFC 3339 string.
pub fn from_json(value: &Value) -> Result<i64, String> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("{n} is not a whole number of nanoseconds")),
        Value::String(s) => parse_rfc3339(s),
        other => Err(format!(
            "a timestamp is an integer of unix nanoseconds or an RFC 3339 string, not {other}"
        )),
    }
}

/// Rewrites `created_at` / `updated_at` of a printed document (a JSON object) as RFC 3339.
pub fn rewrite(value: &mut Value, format: TimeFormat) {
    if format == TimeFormat::Ns {
        return;
    }
    if let Value::Object(map) = value {
        for field in ["created_at", "updated_at"] {
            if let Some(nanos) = map.get(field).and_then(Value::as_i64) {
                map.insert(field.to_owned(), Value::String(format_rfc3339(nanos)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_nanosecond_precision() {
        for nanos in [0, 1, -1, 1_714_564_800_000_000_001, i64::MAX, i64::MIN] {
            assert_eq!(parse_rfc3339(&format_rfc3339(nanos)), Ok(nanos), "{nanos}");
        }
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            parse_rfc3339("1970-01-01T01:00:00.5+01:00"),
            Ok(500_000_000)
        );
        assert!(parse_rfc3339("2024-13-01T00:00:00Z").is_err());
        assert!(
            parse_rfc3339("3000-01-01T00:00:00Z")
                .unwrap_err()
                .contains("range")
        );
    }
}
