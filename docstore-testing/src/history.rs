//! What happened: one entry per call, with the fault it got and what each side saw.

use crate::plan::{CallKind, Fault};
use docstore::Error;
use std::fmt;
use std::time::Duration;

/// The kind of a [`docstore::Error`], comparable and printable (the error itself is neither
/// `Clone` nor `PartialEq`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`Error::NotFound`].
    NotFound,
    /// [`Error::AlreadyExists`].
    AlreadyExists,
    /// [`Error::Conflict`], with the version the document had.
    Conflict {
        /// The document's version.
        current: u64,
    },
    /// [`Error::InvalidArgument`].
    InvalidArgument,
    /// [`Error::TooLarge`].
    TooLarge,
    /// [`Error::QuotaExceeded`].
    QuotaExceeded,
    /// [`Error::Unavailable`].
    Unavailable,
    /// [`Error::Batch`]: write `index` of a batch failed with `source`.
    Batch {
        /// The failing write's position in the batch.
        index: usize,
        /// Its error's kind.
        source: Box<ErrorKind>,
    },
    /// [`Error::Backend`], or a kind added to [`Error`] after this crate was written.
    Backend,
}

impl ErrorKind {
    /// The kind of `error`.
    pub fn of(error: &Error) -> Self {
        match error {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists => ErrorKind::AlreadyExists,
            Error::Conflict { current } => ErrorKind::Conflict { current: *current },
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::QuotaExceeded { .. } => ErrorKind::QuotaExceeded,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Batch { index, source } => ErrorKind::Batch {
                index: *index,
                source: Box::new(ErrorKind::of(source)),
            },
            _ => ErrorKind::Backend,
        }
    }
}

/// The answer to a call, in short: a one-line summary of the value, or the error's kind.
///
/// Summaries hold no timestamps, so a history does not depend on the clock: a document is
/// `id v<version> <data>` (data cut at 80 characters), a `get` that found nothing `none`, a
/// page the ids it holds and `next` when a cursor follows, counts their number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The call succeeded with this value.
    Ok(String),
    /// The call failed with an error of this kind.
    Err(ErrorKind),
    /// The caller dropped the call before it finished (a timeout around it, an aborted
    /// task); the entry's `inner` is then `None`, also when the store had been called.
    Cancelled,
}

impl Outcome {
    /// The outcome of `answer`, summarizing a success with `summary`.
    pub fn of<T>(answer: &docstore::Result<T>, summary: impl FnOnce(&T) -> String) -> Self {
        match answer {
            Ok(value) => Outcome::Ok(summary(value)),
            Err(error) => Outcome::Err(ErrorKind::of(error)),
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok(_))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok(summary) => f.write_str(summary),
            Outcome::Err(kind) => write!(f, "Err({kind:?})"),
            Outcome::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// A fault as it was injected, with what it did.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Injected {
    /// [`Fault::Unavailable`]: the store was not called.
    Unavailable,
    /// [`Fault::LostAnswer`]: the store answered [`Entry::inner`], the caller got
    /// `Unavailable`.
    LostAnswer,
    /// [`Fault::ConcurrentWrite`]: which document the concurrent writer changed and its own
    /// outcome (its `update` fails with `NotFound` when there is no document to change).
    ConcurrentWrite {
        /// The document it wrote, as `site/collection/id`.
        target: String,
        /// What the concurrent writer's `update` answered.
        outcome: Outcome,
    },
    /// [`Fault::Latency`]: the call waited this long before reaching the store.
    Latency(Duration),
    /// [`Fault::ShortPage`]: the page kept its first `kept` documents of the `of` the store
    /// returned and got a cursor after the last one kept (`kept == of`: a last page that got
    /// a cursor to an empty page).
    ShortPage {
        /// Documents the caller got.
        kept: usize,
        /// Documents the store returned.
        of: usize,
    },
    /// [`Fault::PartialPage`]: the page was marked partial.
    PartialPage,
}

impl Injected {
    /// The fault this was.
    pub fn fault(&self) -> Fault {
        match self {
            Injected::Unavailable => Fault::Unavailable,
            Injected::LostAnswer => Fault::LostAnswer,
            Injected::ConcurrentWrite { .. } => Fault::ConcurrentWrite,
            Injected::Latency(delay) => Fault::Latency(*delay),
            Injected::ShortPage { .. } => Fault::ShortPage,
            Injected::PartialPage => Fault::PartialPage,
        }
    }
}

/// One call through the wrapper.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The call's number, counting from 1 in the order calls started.
    pub call: u64,
    /// Which method.
    pub kind: CallKind,
    /// What it addressed: `site/collection/id` (with `@v<n>` for an expected version),
    /// `site/collection` and the page size and cursor position for a query, `site` otherwise.
    pub target: String,
    /// The fault injected into the call, if any.
    pub injected: Option<Injected>,
    /// What the wrapped store answered; `None` when it was not called (or the call was
    /// [cancelled](Outcome::Cancelled)).
    pub inner: Option<Outcome>,
    /// What the caller got.
    pub outcome: Outcome,
}

impl Entry {
    /// Whether the wrapped store answered success, so that a write took effect there.
    pub fn applied(&self) -> bool {
        self.inner.as_ref().is_some_and(Outcome::is_ok)
    }
}

impl fmt::Display for Entry {
    /// `#4 update_if acme/boards/B @v1 [lost answer] -> Err(Unavailable) (store answered B v2 {..})`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} {}", self.call, self.kind, self.target)?;
        match &self.injected {
            None => {}
            Some(Injected::ConcurrentWrite { target, outcome }) => {
                write!(f, " [concurrent write to {target}: {outcome}]")?;
            }
            Some(Injected::ShortPage { kept, of }) => {
                write!(f, " [short page: {kept} of {of}]")?;
            }
            Some(injected) => write!(f, " [{}]", injected.fault())?,
        }
        write!(f, " -> {}", self.outcome)?;
        match &self.inner {
            Some(inner) if *inner != self.outcome => write!(f, " (store answered {inner})"),
            _ => Ok(()),
        }
    }
}

/// Every call through a [`FaultyDriver`](crate::FaultyDriver), in call order.
///
/// Print it (one entry per line) when a test fails; compare two with `==` to check that a
/// seed reproduces a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct History {
    entries: Vec<Entry>,
}

impl History {
    pub(crate) fn new(mut entries: Vec<Entry>) -> Self {
        entries.sort_by_key(|entry| entry.call);
        History { entries }
    }

    /// The entries, by call number.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entries that got a fault.
    pub fn faulted(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|entry| entry.injected.is_some())
    }

    /// The number of calls.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no call was made.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl fmt::Display for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            writeln!(f, "{entry}")?;
        }
        Ok(())
    }
}
