//! Errors of the command line and the exit code of each kind.

use aws_sdk_dynamodb::types::error::ResourceNotFoundException;
use docstore::{Error, ErrorKind};
use std::fmt;

/// The exit codes, as `--help` prints them.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   success
  1   backend or I/O error
  2   bad command line
  3   not found
  4   already exists
  5   version conflict
  6   invalid argument (bad name, JSON, query or cursor; input text that is not UTF-8)
  7   document too large
  8   site quota exceeded
  9   backend unavailable (transient; worth retrying)
  10  import/copy finished but skipped some documents or lines (see \"skipped\")
  11  partial answer: the store stopped reading early (exhausted_scan); see --allow-partial
  12  fsck found counters or unique indexes that disagree with the documents and stand
  13  the change cursor is older than what the store keeps of its feed (resync, then --from now)
  14  unique value taken: another document holds the value of a unique index
  130 interrupted (Ctrl-C) during import, copy, export or index build: it says what is done;
      run it again to resume
A closed pipe (e.g. `docstore export | head -1`) ends the command quietly with 0; a standard
output that cannot be written (closed with `>&-`, a full disk) is 1.";

/// Success.
pub const SUCCESS: i32 = 0;
/// A backend or I/O error.
pub const FAILURE: i32 = 1;
/// A bad command line (also what clap exits with).
pub const USAGE: i32 = 2;
/// The document (or index) is not there.
pub const NOT_FOUND: i32 = 3;
/// The document is already there.
pub const ALREADY_EXISTS: i32 = 4;
/// The document's version is not the one given.
pub const CONFLICT: i32 = 5;
/// A bad name, JSON, query, cursor or option value.
pub const INVALID_ARGUMENT: i32 = 6;
/// The document is over the size limit.
pub const TOO_LARGE: i32 = 7;
/// The site holds its quota of documents.
pub const QUOTA_EXCEEDED: i32 = 8;
/// The backend is unavailable or stayed busy (transient; worth retrying).
pub const UNAVAILABLE: i32 = 9;
/// An import or copy finished but skipped some documents or lines.
pub const SKIPPED: i32 = 10;
/// The store stopped reading early and the answer is partial.
pub const PARTIAL_ANSWER: i32 = 11;
/// `fsck` found counters or unique indexes that disagree with the documents, not repaired.
pub const COUNTERS_DIFFER: i32 = 12;
/// The change cursor is older than what the store keeps of its feed.
pub const CURSOR_EXPIRED: i32 = 13;
/// Another document holds the value of a unique index the write gives its document.
pub const UNIQUE_VIOLATION: i32 = 14;
/// An `import`, `copy` (with `--follow` too, before or after following), `export` or
/// `index build` stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub const INTERRUPTED: i32 = 130;

/// A failed command: what to print and which exit code to end with.
#[derive(Debug)]
pub struct CliError {
    /// The process exit code.
    pub code: i32,
    /// The message for standard error.
    pub message: String,
    /// The store said its DynamoDB table does not exist (the message is then rewritten for
    /// someone at a shell).
    pub(crate) missing_table: bool,
}

impl CliError {
    /// An error with an explicit exit code.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
            missing_table: false,
        }
    }

    /// An invalid-argument error ([`INVALID_ARGUMENT`]).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(INVALID_ARGUMENT, message)
    }

    /// An I/O error ([`FAILURE`]); a closed pipe is [`CliError::closed_pipe`].
    pub fn io(what: &str, err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            return Self::closed_pipe();
        }
        Self::new(FAILURE, format!("{what}: {err}"))
    }

    /// The reader of standard output went away (`| head`): stop quietly with exit code 0, as
    /// `cat` and `jq` do when their SIGPIPE is ignored.
    pub fn closed_pipe() -> Self {
        Self::new(SUCCESS, "")
    }

    /// Whether this is a quiet stop that is no failure ([`CliError::closed_pipe`]).
    pub fn is_quiet(&self) -> bool {
        self.code == SUCCESS
    }

    /// The same error with `context` (e.g. the document's key) in front of its message.
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        if !self.is_quiet() {
            self.message = format!("{context}: {}", self.message);
        }
        self
    }
}

/// The exit code for a store error (a batch's refusal: that of the write that failed).
pub fn code_of(err: &Error) -> i32 {
    match err.kind() {
        ErrorKind::NotFound => NOT_FOUND,
        ErrorKind::AlreadyExists => ALREADY_EXISTS,
        ErrorKind::Conflict => CONFLICT,
        ErrorKind::UniqueViolation => UNIQUE_VIOLATION,
        ErrorKind::InvalidArgument => INVALID_ARGUMENT,
        ErrorKind::TooLarge => TOO_LARGE,
        ErrorKind::QuotaExceeded => QUOTA_EXCEEDED,
        ErrorKind::Unavailable => UNAVAILABLE,
        ErrorKind::PartialAnswer => PARTIAL_ANSWER,
        ErrorKind::CursorExpired => CURSOR_EXPIRED,
        _ => FAILURE,
    }
}

impl From<Error> for CliError {
    fn from(err: Error) -> Self {
        let mut message = err.to_string();
        let mut missing_table = false;
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            missing_table |= cause.is::<ResourceNotFoundException>();
            let cause_text = cause.to_string();
            // SDK errors repeat their inner error's text one level up: say each thing once.
            if !message.contains(&cause_text) {
                message.push_str(&format!(": {cause_text}"));
            }
            source = cause.source();
        }
        CliError {
            code: code_of(&err),
            message,
            missing_table,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
