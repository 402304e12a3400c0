//! Mapping SQLite failures onto `docstore::Error`.

use docstore::Error;
use rusqlite::ErrorCode;
use std::time::Duration;

/// What an operation on a connection fails with: a SQLite error (maybe worth retrying) or a
/// store outcome such as `NotFound` that ends the operation.
#[derive(Debug)]
pub(crate) enum Fail {
    /// SQLite failed.
    Sql(rusqlite::Error),
    /// The operation decided the outcome.
    Store(Error),
}

impl From<rusqlite::Error> for Fail {
    fn from(err: rusqlite::Error) -> Self {
        Fail::Sql(err)
    }
}

impl From<Error> for Fail {
    fn from(err: Error) -> Self {
        Fail::Store(err)
    }
}

impl Fail {
    /// Whether retrying the whole operation may succeed: another connection held a lock.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self, Fail::Sql(err) if Fail::is_busy_sql(err))
    }

    fn is_busy_sql(err: &rusqlite::Error) -> bool {
        matches!(
            err.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    }

    /// The `docstore::Error` to return.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Fail::Store(err) => err,
            Fail::Sql(err) => map(err),
        }
    }

    /// The `docstore::Error` to return once the operation gave up waiting: a busy failure
    /// says that the database stayed locked for the whole busy timeout.
    pub(crate) fn into_error_after_waiting(self, busy_timeout: Duration) -> Error {
        match self {
            Fail::Sql(err) if Fail::is_busy_sql(&err) => Error::unavailable(
                format!(
                    "the database stayed locked by another connection or process for the \
                     whole busy timeout ({} ms)",
                    busy_timeout.as_millis()
                ),
                err,
            ),
            other => other.into_error(),
        }
    }
}

/// Busy, locked and I/O failures are [`Error::Unavailable`]; every other one is
/// [`Error::Backend`].
pub(crate) fn map(err: rusqlite::Error) -> Error {
    let transient = matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::SystemIoFailure)
    );
    if transient {
        Error::unavailable("sqlite is busy or failed to do I/O", err)
    } else {
        Error::backend("sqlite failed", err)
    }
}

/// A stored row that cannot be read back (corrupt JSON, negative version).
pub(crate) fn corrupt(what: impl Into<String>) -> Error {
    Error::Backend {
        message: format!("corrupt row: {}", what.into()),
        source: None,
    }
}
