//! Errors of the command line and the exit code of each kind.

use docstore::Error;
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
  6   invalid argument (bad name, JSON, query or cursor)
  7   document too large
  8   site quota exceeded
  9   backend unavailable (transient; worth retrying)
  10  import/copy finished but skipped some documents for errors";

/// A failed command: what to print and which exit code to end with.
#[derive(Debug)]
pub struct CliError {
    /// The process exit code.
    pub code: i32,
    /// The message for standard error.
    pub message: String,
}

impl CliError {
    /// An error with an explicit exit code.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
        }
    }

    /// An invalid-argument error (exit code 6).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(6, message)
    }

    /// An I/O error (exit code 1).
    pub fn io(what: &str, err: std::io::Error) -> Self {
        Self::new(1, format!("{what}: {err}"))
    }
}

/// The exit code for a store error.
pub fn code_of(err: &Error) -> i32 {
    match err {
        Error::NotFound => 3,
        Error::AlreadyExists => 4,
        Error::Conflict { .. } => 5,
        Error::InvalidArgument(_) => 6,
        Error::TooLarge { .. } => 7,
        Error::QuotaExceeded { .. } => 8,
        Error::Unavailable { .. } => 9,
        _ => 1,
    }
}

impl From<Error> for CliError {
    fn from(err: Error) -> Self {
        let mut message = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            message.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        CliError {
            code: code_of(&err),
            message,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
