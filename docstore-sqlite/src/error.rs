//! Mapping SQLite failures onto `docstore::Error`.

use docstore::Error;
use rusqlite::ErrorCode;

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
        matches!(self, Fail::Sql(err) if matches!(
            err.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        ))
    }

    /// The `docstore::Error` to return.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Fail::Store(err) => err,
            Fail::Sql(err) => map(err),
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
