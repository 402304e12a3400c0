//! Printing JSON on standard output: pretty on a terminal, compact otherwise; documents with
//! their timestamps as the user asked; a closed pipe ends the command quietly.

use crate::exit::CliError;
use crate::timefmt::{self, TimeFormat};
use docstore::Document;
use serde::Serialize;
use serde_json::Value;
use std::io::{BufWriter, IsTerminal, Write};

/// Says `line` on standard error: the human sentence beside a JSON answer (an import's
/// summary, a plan). When standard output and standard error are both the terminal, the JSON
/// on the screen already says it, so it is not said twice; in a pipe (`| jq`) the person
/// still reads it.
pub fn say(line: impl std::fmt::Display) {
    if !(std::io::stdout().is_terminal() && std::io::stderr().is_terminal()) {
        eprintln!("{line}");
    }
}

/// Standard output to write to: the process's, or when it was closed as the command started
/// (`docstore export >&-`) a writer whose every write fails, so that the command fails with
/// exit 1 instead of printing into nothing and saying it succeeded.
pub fn stdout_writer() -> Box<dyn Write> {
    if stdout_was_closed() {
        Box::new(ClosedStdout)
    } else {
        Box::new(std::io::stdout().lock())
    }
}

/// Standard output closed before the command started: every write fails.
struct ClosedStdout;

impl Write for ClosedStdout {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("standard output is closed"))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether standard output was closed when the process started. Rust's runtime opens
/// `/dev/null` for reading and writing on a standard descriptor that is closed at start, so
/// writes there would vanish without an error; a shell's `>/dev/null` opens it for writing
/// only. So `/dev/null` open read-write on descriptor 1 is taken as a closed standard output
/// (only the rare `1<>/dev/null` looks the same).
#[cfg(target_os = "linux")]
fn stdout_was_closed() -> bool {
    const ACCESS_MODE: u32 = 0o3;
    const READ_WRITE: u32 = 0o2;
    let is_null = std::fs::read_link("/proc/self/fd/1")
        .is_ok_and(|target| target == std::path::Path::new("/dev/null"));
    if !is_null {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/self/fdinfo/1") else {
        return false;
    };
    info.lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .is_some_and(|flags| flags & ACCESS_MODE == READ_WRITE)
}

/// Elsewhere there is no cheap safe way to tell: standard output is taken as open.
#[cfg(not(target_os = "linux"))]
fn stdout_was_closed() -> bool {
    false
}

/// Standard output.
pub struct Out {
    writer: BufWriter<Box<dyn Write>>,
    pretty: bool,
    time: TimeFormat,
    /// Documents written inside the open `{"documents": [` list.
    listed: u64,
}

fn write_error(err: std::io::Error) -> CliError {
    CliError::io("writing standard output", err)
}

impl Out {
    /// Standard output, pretty when it is a terminal.
    pub fn new(time: TimeFormat) -> Self {
        let pretty = std::io::stdout().is_terminal();
        Self::to(stdout_writer(), pretty, time)
    }

    /// Output into `writer` (standard output, or a buffer in tests).
    pub(crate) fn to(writer: Box<dyn Write>, pretty: bool, time: TimeFormat) -> Self {
        Out {
            pretty,
            writer: BufWriter::new(writer),
            time,
            listed: 0,
        }
    }

    fn text<T: Serialize + ?Sized>(&self, value: &T) -> String {
        if self.pretty {
            serde_json::to_string_pretty(value)
        } else {
            serde_json::to_string(value)
        }
        .expect("output values serialize")
    }

    fn document_text(&self, document: &Document, pretty: bool) -> String {
        let text = match (self.time, pretty) {
            (TimeFormat::Ns, false) => serde_json::to_string(document),
            (TimeFormat::Ns, true) => serde_json::to_string_pretty(document),
            (_, false) => serde_json::to_string(&self.document_value(document)),
            (_, true) => serde_json::to_string_pretty(&self.document_value(document)),
        };
        text.expect("documents serialize")
    }

    /// A document as a JSON value (timestamps in the chosen format).
    pub(crate) fn document_value(&self, document: &Document) -> Value {
        let mut value = serde_json::to_value(document).expect("documents serialize");
        timefmt::rewrite(&mut value, self.time);
        value
    }

    /// A timestamp as a JSON value in the chosen format.
    pub(crate) fn time_value(&self, nanos: i64) -> Value {
        match self.time {
            TimeFormat::Ns => Value::from(nanos),
            TimeFormat::Rfc3339 => Value::String(timefmt::format_rfc3339(nanos)),
        }
    }

    /// Prints one JSON value on its own line(s).
    pub fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CliError> {
        let text = self.text(value);
        writeln!(self.writer, "{text}").map_err(write_error)
    }

    /// Prints one JSON value as one compact line (JSON Lines), whatever standard output is.
    pub fn line<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CliError> {
        let text = serde_json::to_string(value).expect("output values serialize");
        writeln!(self.writer, "{text}").map_err(write_error)
    }

    /// Prints a document (timestamps in the chosen format).
    pub fn document(&mut self, document: &Document) -> Result<(), CliError> {
        let text = self.document_text(document, self.pretty);
        writeln!(self.writer, "{text}").map_err(write_error)
    }

    /// Prints a document as one compact line (JSON Lines), whatever standard output is.
    pub fn document_line(&mut self, document: &Document) -> Result<(), CliError> {
        let text = self.document_text(document, false);
        writeln!(self.writer, "{text}").map_err(write_error)
    }

    /// Opens `{"documents": [`: then [`Out::listed_document`] for each, then
    /// [`Out::end_documents`]. The whole is the same JSON as printing the page at once.
    pub fn begin_documents(&mut self) -> Result<(), CliError> {
        self.listed = 0;
        let open = if self.pretty {
            "{\n  \"documents\": ["
        } else {
            "{\"documents\":["
        };
        self.writer.write_all(open.as_bytes()).map_err(write_error)
    }

    /// One document of the open list.
    pub fn listed_document(&mut self, document: &Document) -> Result<(), CliError> {
        let separator = if self.listed == 0 { "" } else { "," };
        self.listed += 1;
        if self.pretty {
            // JSON text never holds a raw newline inside a string: indenting lines is safe.
            let text = self.document_text(document, true).replace('\n', "\n    ");
            write!(self.writer, "{separator}\n    {text}").map_err(write_error)
        } else {
            let text = self.document_text(document, false);
            write!(self.writer, "{separator}{text}").map_err(write_error)
        }
    }

    /// Closes the list with the page's `next` and `exhausted_scan`, and with `error` when
    /// reading stopped on one after the list was opened (`next` is then where to resume):
    /// standard output stays one whole JSON object whatever happened.
    pub fn end_documents(
        &mut self,
        next: Option<&docstore::Cursor>,
        exhausted_scan: bool,
        error: Option<&str>,
    ) -> Result<(), CliError> {
        let next = serde_json::to_string(&next).expect("cursors serialize");
        let error = error.map(|e| serde_json::to_string(e).expect("strings serialize"));
        let text = if self.pretty {
            let close = if self.listed == 0 { "]" } else { "\n  ]" };
            let error = error.map_or(String::new(), |e| format!(",\n  \"error\": {e}"));
            format!(
                "{close},\n  \"next\": {next},\n  \"exhausted_scan\": {exhausted_scan}{error}\n}}\n"
            )
        } else {
            let error = error.map_or(String::new(), |e| format!(",\"error\":{e}"));
            format!("],\"next\":{next},\"exhausted_scan\":{exhausted_scan}{error}}}\n")
        };
        self.writer.write_all(text.as_bytes()).map_err(write_error)
    }

    /// Sends what is buffered (a closed pipe is [`CliError::closed_pipe`]).
    pub fn flush(&mut self) -> Result<(), CliError> {
        self.writer.flush().map_err(write_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_list_ended_by_an_error_is_still_one_json_object() {
        let document = Document {
            expires_at: None,
            id: "a".into(),
            data: docstore::object(serde_json::json!({"x": 1})).unwrap(),
            created_at: 1,
            updated_at: 1,
            created_by: "t".into(),
            updated_by: "t".into(),
            version: 1,
        };
        for pretty in [false, true] {
            let buffer = Shared::default();
            let mut out = Out::to(Box::new(buffer.clone()), pretty, TimeFormat::Ns);
            out.begin_documents().unwrap();
            out.listed_document(&document).unwrap();
            out.end_documents(None, false, Some("backend \"gone\""))
                .unwrap();
            out.flush().unwrap();
            let bytes = buffer.0.lock().unwrap().clone();
            let value: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(value["error"], "backend \"gone\"", "pretty {pretty}");
            assert_eq!(value["documents"][0]["id"], "a", "pretty {pretty}");
        }
    }
}
