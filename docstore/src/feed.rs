//! The change feed's vocabulary: what a committed write looks like to a consumer
//! ([`Change`]), where a reader stands ([`ChangeCursor`], [`FeedStart`]), what it reads
//! ([`FeedScope`]) and one read's answer ([`ChangePage`]).
//!
//! Every committed write — create, put, update, update_if, replace_if, delete, delete_if,
//! restore, each write of a batch — is one [`Change`]. A refused write, a refused batch, or a
//! repeat of a call that the backend recognised by its write identity produces none. Reads
//! go through [`Store::changes`](crate::Store::changes) / [`Site::changes`](crate::Site::changes)
//! (one page) and the `watch` streams; the guarantees are in `docs/contract.md`, "Change feed".

use crate::document::Document;
use crate::key::{Key, validate_collection, validate_site};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The most changes one page read returns (the feed's own page size limit).
pub const MAX_CHANGE_PAGE: usize = 1000;

/// The page size of a `watch` stream: each read asks for up to this many changes.
pub const WATCH_PAGE: usize = 500;

/// The longest cursor text accepted (a DynamoDB cursor holds a position per stream shard).
pub const MAX_CURSOR_BYTES: usize = 64 * 1024;

/// What a committed write did to its document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A new document: `create`, `restore`, a `put` on a free id.
    Created,
    /// A new version of an existing document: `put`, `update`, `update_if`, `replace_if`.
    Updated,
    /// The document was removed: `delete`, `delete_if`.
    Deleted,
}

impl ChangeKind {
    /// The kind's name as the CLI prints it: `created`, `updated` or `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Updated => "updated",
            ChangeKind::Deleted => "deleted",
        }
    }
}

impl std::fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One committed write, as the feed reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The document's key.
    pub key: Key,
    /// What the write did.
    pub kind: ChangeKind,
    /// The version the write left (for a delete: the version it removed).
    pub version: u64,
    /// The document as the write left it, metadata included; `None` for a delete.
    pub document: Option<Document>,
    /// When the write happened, in unix nanoseconds: the document's `updated_at`, the time
    /// of the delete for a delete.
    pub time: i64,
    /// Who wrote: the document's `updated_by`, the deleting call's actor for a delete.
    pub actor: String,
    /// Where the feed continues after this change: hand it back with
    /// [`FeedStart::After`] to read what follows, in this or another process.
    pub cursor: ChangeCursor,
}

impl Change {
    /// The change of a write that left `document` at `key`: `Created` for version 1 or a
    /// restored document, `Updated` otherwise; its time and actor are the document's.
    pub fn stored(key: Key, kind: ChangeKind, document: Document, cursor: ChangeCursor) -> Self {
        Change {
            key,
            kind,
            version: document.version,
            time: document.updated_at,
            actor: document.updated_by.clone(),
            document: Some(document),
            cursor,
        }
    }

    /// The change of a delete of `key` at `version`, at `time`, by `actor`.
    pub fn deleted(
        key: Key,
        version: u64,
        time: i64,
        actor: impl Into<String>,
        cursor: ChangeCursor,
    ) -> Self {
        Change {
            key,
            kind: ChangeKind::Deleted,
            version,
            document: None,
            time,
            actor: actor.into(),
            cursor,
        }
    }
}

/// A position in a store's change feed: opaque text, valid across processes and restarts,
/// read with [`FeedStart::After`]. Each driver writes its own positions, tagged with the
/// driver's name, so a cursor of another backend is [`Error::InvalidArgument`].
///
/// ```
/// use docstore::feed::ChangeCursor;
///
/// let cursor = ChangeCursor::new("memory", "42");
/// assert_eq!(cursor.to_string(), "memory:42");
/// let read_back = ChangeCursor::parse(&cursor.to_string())?;
/// assert_eq!(read_back.position_for("memory")?, "42");
/// assert!(read_back.position_for("sqlite").is_err());
/// assert!(ChangeCursor::parse("no tag").is_err());
/// # Ok::<(), docstore::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChangeCursor(String);

impl ChangeCursor {
    /// The cursor of `driver` (a short lowercase name) at `position` (the driver's own text).
    pub fn new(driver: &str, position: impl AsRef<str>) -> Self {
        ChangeCursor(format!("{driver}:{}", position.as_ref()))
    }

    /// Reads a cursor's text as [`Display`](std::fmt::Display) wrote it:
    /// [`Error::InvalidArgument`] for text that no driver wrote (empty, too long, control
    /// characters or spaces, no driver tag).
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| Err(Error::invalid(format!("change cursor: {why}")));
        if text.len() > MAX_CURSOR_BYTES {
            return bad("too long");
        }
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return bad("it holds spaces or control characters");
        }
        match text.split_once(':') {
            Some((tag, position))
                if !tag.is_empty()
                    && !position.is_empty()
                    && tag.bytes().all(|b| b.is_ascii_lowercase()) =>
            {
                Ok(ChangeCursor(text.to_owned()))
            }
            _ => bad("not a cursor a store wrote"),
        }
    }

    /// The position text of a cursor written by `driver`; [`Error::InvalidArgument`] for a
    /// cursor of another driver.
    pub fn position_for(&self, driver: &str) -> Result<&str> {
        match self.0.split_once(':') {
            Some((tag, position)) if tag == driver => Ok(position),
            Some((tag, _)) => Err(Error::invalid(format!(
                "change cursor of a {tag} store, not of this {driver} store"
            ))),
            None => Err(Error::invalid("change cursor: not a cursor a store wrote")),
        }
    }

    /// The cursor's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ChangeCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a feed read starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedStart {
    /// At the oldest change the backend still keeps.
    Oldest,
    /// After every change committed so far: only what is written from now on.
    Now,
    /// After the change this cursor was handed with (or after the page it ended).
    After(ChangeCursor),
}

impl FeedStart {
    /// `start` / `oldest`, `now`, or a cursor's text (the CLI's `--from` and `--after`).
    ///
    /// ```
    /// use docstore::feed::FeedStart;
    /// assert_eq!(FeedStart::parse("now")?, FeedStart::Now);
    /// assert_eq!(FeedStart::parse("start")?, FeedStart::Oldest);
    /// assert!(matches!(FeedStart::parse("sqlite:17")?, FeedStart::After(_)));
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "start" | "oldest" => Ok(FeedStart::Oldest),
            "now" => Ok(FeedStart::Now),
            cursor => ChangeCursor::parse(cursor).map(FeedStart::After),
        }
    }
}

/// Which changes a read returns: the whole store's, one site's, or one collection's of a
/// site. Built only valid.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FeedScope {
    site: Option<String>,
    collection: Option<String>,
}

impl FeedScope {
    /// Every change of the store (maintenance tools: copy, backups).
    pub fn whole_store() -> Self {
        FeedScope::default()
    }

    /// The changes of one site; [`Error::InvalidArgument`] for a name that breaks the rules.
    pub fn site(site: &str) -> Result<Self> {
        validate_site(site)?;
        Ok(FeedScope {
            site: Some(site.to_owned()),
            collection: None,
        })
    }

    /// The changes of one collection of a site.
    pub fn collection(site: &str, collection: &str) -> Result<Self> {
        validate_site(site)?;
        validate_collection(collection)?;
        Ok(FeedScope {
            site: Some(site.to_owned()),
            collection: Some(collection.to_owned()),
        })
    }

    /// The site, unless the scope is the whole store.
    pub fn site_name(&self) -> Option<&str> {
        self.site.as_deref()
    }

    /// The collection, when the scope is one.
    pub fn collection_name(&self) -> Option<&str> {
        self.collection.as_deref()
    }

    /// Whether a change of `key` belongs to the scope.
    ///
    /// ```
    /// use docstore::{Key, feed::FeedScope};
    /// let key = Key::new("acme", "tickets", "T-1")?;
    /// assert!(FeedScope::site("acme")?.contains(&key));
    /// assert!(!FeedScope::site("globex")?.contains(&key));
    /// assert!(!FeedScope::collection("acme", "users")?.contains(&key));
    /// assert!(FeedScope::whole_store().contains(&key));
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn contains(&self, key: &Key) -> bool {
        self.site.as_deref().is_none_or(|s| s == key.site())
            && self
                .collection
                .as_deref()
                .is_none_or(|c| c == key.collection())
    }
}

/// One read of the feed.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangePage {
    /// The scope's changes after the start, oldest first; at most the limit asked for.
    pub changes: Vec<Change>,
    /// Where the next read starts: after the last change read, including changes of other
    /// scopes the read went past (so a page may be empty and still move on).
    pub next: ChangeCursor,
    /// True when the read reached the end of the feed as it stood: reading again at once
    /// finds nothing new, so a watcher waits for the next commit.
    pub caught_up: bool,
}

/// Checks a page size asked of the feed: 1 to [`MAX_CHANGE_PAGE`].
pub fn check_page_size(limit: usize) -> Result<()> {
    if (1..=MAX_CHANGE_PAGE).contains(&limit) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "change page size {limit}: it must be 1 to {MAX_CHANGE_PAGE}"
        )))
    }
}
