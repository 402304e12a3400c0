//! Document data as PostgreSQL keeps it. JSONB stores numbers as `numeric`, which keeps
//! every digit and the scale of a plain decimal (`1.0` stays `1.0`, `u64::MAX` and `i64::MIN`
//! stay exact) but not an exponent (`1e16` would read back as the integer
//! `10000000000000000`). So floats are written as plain decimals that always carry a point —
//! the shortest round-trip digits, or the exact integer for magnitudes from 2^53 up, so that
//! `numeric` compares them by the same exact value as `docstore::query::compare_numbers`.
//! Two things JSONB cannot hold at all — a `\u0000` in a string and the sign of `-0.0` — make
//! a document *inexact*: its exact text is kept beside (column `raw`) and read back from
//! there, and queries treat it as a candidate whatever its JSONB says (the core evaluator
//! decides).

use docstore::{Data, Error};
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};
use std::io;

/// `data` as JSON text for PostgreSQL.
#[derive(Debug)]
pub(crate) struct Body {
    /// The exact text (what reads give back).
    pub(crate) text: String,
    /// Whether JSONB keeps `text` exactly.
    pub(crate) exact: bool,
}

impl Body {
    pub(crate) fn of(value: &impl serde::Serialize) -> Body {
        let mut formatter = Exactness { exact: true };
        let mut bytes = Vec::with_capacity(128);
        let mut ser = serde_json::Serializer::with_formatter(&mut bytes, &mut formatter);
        value
            .serialize(&mut ser)
            .expect("a JSON value always serializes");
        let text = String::from_utf8(bytes).expect("serde_json writes UTF-8");
        Body {
            text,
            exact: formatter.exact,
        }
    }

    /// What the `data` column holds: the text itself, or for an inexact document the nearest
    /// text JSONB accepts (`\u0000` escapes replaced), which queries never trust alone.
    pub(crate) fn jsonb(&self) -> String {
        if self.exact {
            self.text.clone()
        } else {
            self.text.replace("\\u0000", "\\ufffd")
        }
    }

    /// What the `raw` column holds: the exact text of an inexact document.
    pub(crate) fn raw(&self) -> Option<String> {
        (!self.exact).then(|| self.text.clone())
    }
}

/// serde_json's compact output, with floats as plain decimals, noting what JSONB would lose.
struct Exactness {
    exact: bool,
}

impl Formatter for &mut Exactness {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value == 0.0 && value.is_sign_negative() {
            self.exact = false;
        }
        writer.write_all(plain_decimal(value).as_bytes())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        if matches!(escape, CharEscape::AsciiControl(0)) {
            self.exact = false;
        }
        CompactFormatter.write_char_escape(writer, escape)
    }
}

/// A float as a decimal without exponent, always with a point: its exact value from 2^53 up
/// (where every float is an integer), else its shortest round-trip digits.
pub(crate) fn plain_decimal(value: f64) -> String {
    let mut text = if value.abs() >= 9_007_199_254_740_992.0 {
        format!("{value:.0}")
    } else {
        value.to_string()
    };
    if !text.contains('.') {
        text.push_str(".0");
    }
    text
}

/// Parses document data that this crate wrote.
pub(crate) fn parse(text: &str) -> Result<Data, Error> {
    serde_json::from_str(text).map_err(|err| crate::error::corrupt(format!("data: {err}")))
}
