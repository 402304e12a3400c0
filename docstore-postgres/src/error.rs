//! PostgreSQL failures as `docstore` errors, and which of them run a write's transaction again.

use docstore::Error;

/// Why a transaction failed: a `docstore` decision (a condition, a limit), or the database.
#[derive(Debug)]
pub(crate) enum Fail {
    Store(Error),
    Sql(tokio_postgres::Error),
    /// A claim the write needs is held by expired documents or left behind by removed ones
    /// at these keys: they are removed, and the write runs again.
    Stale(Vec<docstore::Key>),
}

impl From<Error> for Fail {
    fn from(err: Error) -> Self {
        Fail::Store(err)
    }
}

impl From<tokio_postgres::Error> for Fail {
    fn from(err: tokio_postgres::Error) -> Self {
        Fail::Sql(err)
    }
}

impl Fail {
    /// Whether running the transaction again may succeed: a race with another writer (a key
    /// inserted meanwhile, a serialization failure, a deadlock).
    pub(crate) fn is_race(&self) -> bool {
        match self {
            Fail::Sql(err) => err
                .code()
                .is_some_and(|code| ["23505", "40001", "40P01"].contains(&code.code())),
            Fail::Store(_) | Fail::Stale(_) => false,
        }
    }

    /// Whether the transaction claimed a unique value another document holds (constraint
    /// `unique_claims_held`).
    pub(crate) fn is_unique_violation(&self) -> bool {
        let Fail::Sql(err) = self else { return false };
        let db = err.as_db_error();
        db.is_some_and(|db| db.constraint() == Some("unique_claims_held"))
    }

    pub(crate) fn into_error(self) -> Error {
        match self {
            Fail::Store(err) => err,
            Fail::Sql(err) => sql(err),
            Fail::Stale(_) => Error::unavailable(
                "PostgreSQL: the unique values a write claims stayed held by expired documents",
                "expired unique holders",
            ),
        }
    }
}

/// A PostgreSQL error: [`Error::Unavailable`] for what is worth retrying (a lost connection,
/// an overloaded or restarting server, a race), [`Error::Backend`] otherwise.
pub(crate) fn sql(err: tokio_postgres::Error) -> Error {
    let transient = match err.code() {
        None => true,
        Some(code) => {
            let code = code.code();
            ["08", "40", "53", "57"]
                .iter()
                .any(|class| code.starts_with(class))
                || code == "55P03"
        }
    };
    let message = format!("PostgreSQL: {err}");
    if transient {
        Error::unavailable(message, err)
    } else {
        Error::backend(message, err)
    }
}

/// The pool could not hand out a connection (the server unreachable, or every connection busy
/// past the wait): worth retrying.
pub(crate) fn pool(err: deadpool_postgres::PoolError) -> Error {
    Error::unavailable(format!("PostgreSQL connection pool: {err}"), err)
}

/// Data in the database that this crate did not write (a row edited by hand).
pub(crate) fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::backend(
        format!("PostgreSQL row docstore cannot read: {what}"),
        "corrupt row",
    )
}
