//! Printing JSON: pretty on a terminal, one compact line otherwise.

use serde::Serialize;
use std::io::{IsTerminal, Write};

/// Prints `value` on standard output.
pub fn print<T: Serialize>(value: &T) {
    let stdout = std::io::stdout();
    let text = if stdout.is_terminal() {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .expect("output values serialize");
    let mut out = stdout.lock();
    // A closed pipe (e.g. `| head`) is not an error worth reporting.
    let _ = writeln!(out, "{text}");
}
