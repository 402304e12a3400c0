//! The one error type every backend returns.

use crate::identity::WriteId;

/// A boxed error that a backend wraps as the cause of [`Error::Unavailable`] or [`Error::Backend`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a [`Store`](crate::Store) call (and a [`Driver`](crate::driver::Driver) call) can fail with.
///
/// Callers match on the variant, never on the message text. Every variant except
/// [`Error::Unavailable`] and [`Error::Backend`] is returned only when the call changed nothing.
///
/// ```
/// use docstore::Error;
///
/// let err = Error::NotFound { key: "acme/tickets/T-1".into() };
/// assert!(matches!(err, Error::NotFound { .. }));
/// assert!(!err.is_retryable()); // see Error::kind for one match over every kind
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document does not exist; `key` is its key as [`Key`](crate::Key) prints it
    /// (`site/collection/id`).
    #[error("no document {key}")]
    NotFound {
        /// The key that holds no document.
        key: String,
    },

    /// `create` found a document with the same id.
    #[error("a document with this id already exists")]
    AlreadyExists,

    /// The write would give a document a value of a unique index that another document of
    /// the collection holds (`docs/contract.md`, "Unique indexes"): nothing was written.
    /// `value` is the document's value of the index's fields (one field: its value; several:
    /// the array of them), `holder` the id of the document that holds it.
    ///
    /// ```
    /// use docstore::{Error, ErrorKind};
    ///
    /// let err = Error::UniqueViolation {
    ///     index: "by_email".into(),
    ///     value: serde_json::json!("ann@example.com"),
    ///     holder: "u-1".into(),
    /// };
    /// assert_eq!(err.kind(), ErrorKind::UniqueViolation);
    /// assert_eq!(
    ///     err.to_string(),
    ///     "unique index by_email: \"ann@example.com\" is held by document u-1"
    /// );
    /// ```
    #[error("unique index {index}: {value} is held by document {holder}")]
    UniqueViolation {
        /// The unique index.
        index: String,
        /// The value the write claimed.
        value: serde_json::Value,
        /// The id of the document holding it.
        holder: String,
    },

    /// A conditional write found another version than the one expected.
    #[error("version conflict: the document is at version {current}")]
    Conflict {
        /// The version the document has now.
        current: u64,
    },

    /// A name, field path, query, cursor or other input breaks a rule; the message names it.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The serialized document data is larger than the store's `max_doc_bytes`.
    #[error("document data is {size} bytes, the limit is {limit}")]
    TooLarge {
        /// The size of the serialized `data`, in bytes.
        size: usize,
        /// The configured limit, in bytes.
        limit: usize,
    },

    /// The site already holds `max_docs_per_site` documents.
    #[error("the site already holds its quota of {limit} documents")]
    QuotaExceeded {
        /// The configured per-site quota.
        limit: u64,
    },

    /// A transient failure (throttling, a timeout, I/O): the call may succeed when retried,
    /// and a write may have been applied. The store has already retried the call under its
    /// [`RetryPolicy`](crate::retry::RetryPolicy); a write's error carries the identity every
    /// try used ([`write_id`](Error::write_id)): repeat the same call with it.
    #[error("backend unavailable: {message}")]
    Unavailable {
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
        /// The write identity of a write call (`None` for reads and from drivers): give it
        /// to the same call when repeating it ([`WriteCall::write_id`](crate::WriteCall::write_id)).
        write_id: Option<WriteId>,
    },

    /// One write of an atomic batch ([`Store::write_all`](crate::Store::write_all)) failed,
    /// so none was applied: `index` is its position in the batch, `source` what the single
    /// call would have failed with (`Conflict { current }`, `AlreadyExists`, `NotFound`,
    /// `UniqueViolation`, `TooLarge`, `QuotaExceeded`, `InvalidArgument`). Never wraps `Unavailable` or
    /// `Backend`, which concern the whole call, nor another `Batch`.
    ///
    /// ```
    /// use docstore::Error;
    ///
    /// let err = docstore::batch::failed(2, Error::Conflict { current: 7 });
    /// match err {
    ///     Error::Batch { index, source } => match *source {
    ///         Error::Conflict { current } => assert_eq!((index, current), (2, 7)),
    ///         other => panic!("{other}"),
    ///     },
    ///     other => panic!("{other}"),
    /// }
    /// ```
    #[error("write {index} of the batch failed: {source}")]
    Batch {
        /// The position of the failing write in the batch.
        index: usize,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },

    /// A stored document did not deserialize into the type a typed
    /// [`Collection`](crate::Collection) reads it as: the document is there, unchanged, but
    /// its data does not fit `T` (a field of another type, a missing required field, ...).
    #[error("document {key} does not decode: {message}")]
    Decode {
        /// The document's key, as `site/collection/id`.
        key: String,
        /// serde's message: what did not fit, and where.
        message: String,
    },

    /// A walk of every match ([`Collection::stream`](crate::Collection::stream)) met a page
    /// the backend could not answer exactly (DynamoDB's `max_scan` bound was reached, see
    /// [`Page::exhausted_scan`](crate::Page::exhausted_scan)): the matches yielded so far are
    /// right, but others may be missing. Declare an index that serves the query, raise the
    /// bound, or order by `$id`.
    #[error("partial answer: {0}")]
    PartialAnswer(String),

    /// A change cursor points before the oldest change the backend still keeps (past its
    /// retention, see `docs/contract.md`, "Change feed"): the changes in between are gone,
    /// so the consumer must resync — copy the documents again and follow the feed from
    /// [`FeedStart::Now`](crate::feed::FeedStart::Now) — rather than go on with a gap.
    #[error("change cursor expired: {0}")]
    CursorExpired(String),

    /// Any other backend failure.
    #[error("backend error: {message}")]
    Backend {
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
}

/// What kind of failure an [`Error`] is, without its details: small and `Copy`, for code that
/// maps errors to something else (an HTTP status, an exit code, a retry decision) in one
/// `match`. [`Error::kind`] looks through [`Error::Batch`] to the failing write's kind.
///
/// ```
/// use docstore::{Error, ErrorKind};
///
/// /// The HTTP status a handler answers for a store error.
/// fn http_status(err: &Error) -> u16 {
///     match err.kind() {
///         ErrorKind::NotFound => 404,
///         ErrorKind::AlreadyExists | ErrorKind::Conflict | ErrorKind::UniqueViolation => 409,
///         ErrorKind::InvalidArgument => 400,
///         ErrorKind::TooLarge => 413,
///         ErrorKind::QuotaExceeded => 403,
///         ErrorKind::CursorExpired => 410,
///         ErrorKind::Unavailable => 503, // worth retrying: `err.is_retryable()`
///         _ => 500,                      // Decode, PartialAnswer, Backend, kinds added later
///     }
/// }
///
/// let refused = docstore::batch::failed(1, Error::Conflict { current: 3 });
/// assert_eq!(http_status(&refused), 409); // the batch's failing write decides
/// assert_eq!(http_status(&Error::invalid("a name")), 400);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`Error::NotFound`].
    NotFound,
    /// [`Error::AlreadyExists`].
    AlreadyExists,
    /// [`Error::Conflict`].
    Conflict,
    /// [`Error::UniqueViolation`].
    UniqueViolation,
    /// [`Error::InvalidArgument`].
    InvalidArgument,
    /// [`Error::TooLarge`].
    TooLarge,
    /// [`Error::QuotaExceeded`].
    QuotaExceeded,
    /// [`Error::Unavailable`]: transient, worth retrying.
    Unavailable,
    /// [`Error::Decode`].
    Decode,
    /// [`Error::PartialAnswer`].
    PartialAnswer,
    /// [`Error::CursorExpired`].
    CursorExpired,
    /// [`Error::Backend`].
    Backend,
}

impl Error {
    /// The kind of this error; for [`Error::Batch`], the kind of the write that failed (a
    /// batch's own refusal is never `Unavailable` or `Backend`: those concern the whole call
    /// and come unwrapped).
    ///
    /// ```
    /// use docstore::{Error, ErrorKind};
    ///
    /// let refused = docstore::batch::failed(0, Error::AlreadyExists);
    /// assert_eq!(refused.kind(), ErrorKind::AlreadyExists);
    /// assert_eq!(Error::Conflict { current: 2 }.kind(), ErrorKind::Conflict);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists => ErrorKind::AlreadyExists,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::UniqueViolation { .. } => ErrorKind::UniqueViolation,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::QuotaExceeded { .. } => ErrorKind::QuotaExceeded,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Batch { source, .. } => source.kind(),
            Error::Decode { .. } => ErrorKind::Decode,
            Error::PartialAnswer(_) => ErrorKind::PartialAnswer,
            Error::CursorExpired(_) => ErrorKind::CursorExpired,
            Error::Backend { .. } => ErrorKind::Backend,
        }
    }

    /// Whether the same call may succeed when repeated unchanged: only for
    /// [`ErrorKind::Unavailable`] (throttling, a timeout, I/O), which also means a write may
    /// have been applied — repeat a write with the same
    /// [`WriteCall::write_id`](crate::WriteCall::write_id), so it applies once. A
    /// [`Conflict`](Error::Conflict) is not: the call must read again and decide anew.
    ///
    /// ```
    /// use docstore::Error;
    ///
    /// let lost = Error::unavailable("timed out", std::io::Error::other("timeout"));
    /// assert!(lost.is_retryable());
    /// assert!(!Error::Conflict { current: 4 }.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// [`Error::NotFound`] naming `key`.
    ///
    /// ```
    /// let key = docstore::Key::new("acme", "tickets", "T-1")?;
    /// let err = docstore::Error::not_found(&key);
    /// assert_eq!(err.to_string(), "no document acme/tickets/T-1");
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn not_found(key: &crate::Key) -> Self {
        Error::NotFound {
            key: key.to_string(),
        }
    }

    /// For [`Error::Batch`]: the failing write's index and its error.
    ///
    /// ```
    /// use docstore::Error;
    ///
    /// let key = docstore::Key::new("acme", "tickets", "T-1")?;
    /// let err = docstore::batch::failed(0, Error::not_found(&key));
    /// assert!(matches!(err.batch_failure(), Some((0, Error::NotFound { .. }))));
    /// assert!(Error::not_found(&key).batch_failure().is_none());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn batch_failure(&self) -> Option<(usize, &Error)> {
        match self {
            Error::Batch { index, source } => Some((*index, source)),
            _ => None,
        }
    }

    /// The write identity a call that ended [`Error::Unavailable`] used: the one to give the
    /// same call when it is repeated later ([`WriteCall::write_id`](crate::WriteCall::write_id)),
    /// so that a try of it that was applied is recognised instead of applied again. Every
    /// write call's `Unavailable` carries one (the caller's, or one the store drew for the
    /// call); reads and other errors carry none.
    ///
    /// ```
    /// use docstore::{Error, WriteId};
    ///
    /// # async fn demo(tickets: &docstore::Collection<docstore::Data>) -> docstore::Result<()> {
    /// match tickets.modify("T-1", |t| { t.insert("seen".into(), true.into()); }).await {
    ///     Err(err @ Error::Unavailable { .. }) => {
    ///         // The store retried within its budget; keep the identity with the job, and
    ///         // repeat the same call with it later: applied exactly once.
    ///         let id: WriteId = err.write_id().expect("a write's Unavailable has one").clone();
    ///         tickets.modify("T-1", |t| { t.insert("seen".into(), true.into()); })
    ///             .write_id(id)
    ///             .await?;
    ///     }
    ///     other => drop(other?),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_id(&self) -> Option<&WriteId> {
        match self {
            Error::Unavailable { write_id, .. } => write_id.as_ref(),
            _ => None,
        }
    }

    /// This error, when it is [`Error::Unavailable`], carrying `id` as its
    /// [`write_id`](Self::write_id).
    pub(crate) fn with_write_id(self, id: WriteId) -> Self {
        match self {
            Error::Unavailable {
                message, source, ..
            } => Error::Unavailable {
                message,
                source,
                write_id: Some(id),
            },
            other => other,
        }
    }

    /// An [`Error::InvalidArgument`] with the given message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    /// An [`Error::Unavailable`] wrapping `source`.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Unavailable {
            message: message.into(),
            source: Some(source.into()),
            write_id: None,
        }
    }

    /// An [`Error::Backend`] wrapping `source`.
    pub fn backend(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Backend {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

impl From<crate::query::ParseError> for Error {
    /// A query text that does not parse is [`Error::InvalidArgument`] with the position.
    fn from(err: crate::query::ParseError) -> Self {
        Error::InvalidArgument(format!("query text, {err}"))
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<(Error, ErrorKind)> {
        let io = || std::io::Error::other("cause");
        vec![
            (
                Error::NotFound {
                    key: "a/b/c".into(),
                },
                ErrorKind::NotFound,
            ),
            (Error::AlreadyExists, ErrorKind::AlreadyExists),
            (Error::Conflict { current: 1 }, ErrorKind::Conflict),
            (
                Error::UniqueViolation {
                    index: "i".into(),
                    value: serde_json::json!(1),
                    holder: "h".into(),
                },
                ErrorKind::UniqueViolation,
            ),
            (Error::invalid("x"), ErrorKind::InvalidArgument),
            (Error::TooLarge { size: 2, limit: 1 }, ErrorKind::TooLarge),
            (Error::QuotaExceeded { limit: 1 }, ErrorKind::QuotaExceeded),
            (Error::unavailable("x", io()), ErrorKind::Unavailable),
            (
                Error::Decode {
                    key: "a/b/c".into(),
                    message: "x".into(),
                },
                ErrorKind::Decode,
            ),
            (Error::PartialAnswer("x".into()), ErrorKind::PartialAnswer),
            (Error::CursorExpired("x".into()), ErrorKind::CursorExpired),
            (Error::backend("x", io()), ErrorKind::Backend),
        ]
    }

    #[test]
    fn every_error_has_its_own_kind_and_a_batch_has_its_writes() {
        let kinds: Vec<ErrorKind> = every_kind().iter().map(|(_, kind)| *kind).collect();
        for (err, kind) in every_kind() {
            assert_eq!(err.kind(), kind, "{err}");
            assert_eq!(err.is_retryable(), kind == ErrorKind::Unavailable, "{err}");
            assert_eq!(kinds.iter().filter(|k| **k == kind).count(), 1);
            let refused = crate::batch::failed(3, err);
            assert_eq!(refused.kind(), kind, "{refused}");
        }
    }
}
