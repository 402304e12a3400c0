//! What every feed numbered in commit order shares (SQLite's file, PostgreSQL's schema): its
//! cursors, where a read starts, the page a read makes, and a change as a row keeps it. The
//! backend only reads its bounds and its rows.

use super::{Change, ChangeCursor, ChangeKind, ChangePage, FeedStart};
use crate::data::Data;
use crate::document::Document;
use crate::key::Key;
use crate::{Error, Result};

/// Where a numbered feed stands when a read starts: every position up to `pruned` was
/// removed by retention (0 when none was), `head` is the last position written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedBounds {
    /// The last position removed by retention; 0 when none was.
    pub pruned: u64,
    /// The last position written; `pruned` when the feed is empty.
    pub head: u64,
}

/// A feed whose changes are numbered 1, 2, 3… in commit order under one feed id: cursors
/// are `DRIVER:FEED.POSITION` ([`ChangeCursor::numbered`]), a cursor of another feed is
/// [`Error::InvalidArgument`], one before what retention kept [`Error::CursorExpired`].
///
/// ```
/// use docstore::feed::{FeedBounds, FeedStart, NumberedFeed};
///
/// let feed = NumberedFeed::new("sqlite", "SQLite", "f00d");
/// let bounds = FeedBounds { pruned: 10, head: 42 };
/// assert_eq!(feed.start(&FeedStart::Oldest, bounds)?, 10);
/// assert_eq!(feed.start(&FeedStart::Now, bounds)?, 42);
/// assert_eq!(feed.start(&FeedStart::After(feed.cursor(20)), bounds)?, 20);
/// let pruned = feed.start(&FeedStart::After(feed.cursor(5)), bounds).unwrap_err();
/// assert_eq!(pruned.kind(), docstore::ErrorKind::CursorExpired);
/// let other = NumberedFeed::new("sqlite", "SQLite", "beef").cursor(20);
/// assert!(feed.start(&FeedStart::After(other), bounds).is_err());
/// # Ok::<(), docstore::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct NumberedFeed {
    driver: &'static str,
    store: &'static str,
    feed: String,
}

impl NumberedFeed {
    /// The feed `feed` of `driver` (the cursor tag; `store`: the backend's name in messages).
    pub fn new(driver: &'static str, store: &'static str, feed: impl Into<String>) -> Self {
        NumberedFeed {
            driver,
            store,
            feed: feed.into(),
        }
    }

    /// The cursor after `position`.
    pub fn cursor(&self, position: u64) -> ChangeCursor {
        ChangeCursor::numbered(self.driver, &self.feed, position)
    }

    /// The position `cursor` stands after: [`Error::InvalidArgument`] for a cursor of another
    /// feed (resyncing this one would not help its consumer) or one no such store wrote.
    pub fn position(&self, cursor: &ChangeCursor) -> Result<u64> {
        cursor.numbered_position(self.driver, self.store, &self.feed)
    }

    /// The position a read from `start` reads after, in a feed at `bounds`:
    /// [`Error::CursorExpired`] before what retention kept, [`Error::InvalidArgument`] past the
    /// head (a cursor of a newer copy of the store) and for [`FeedStart::Snapshot`], which
    /// the front end serves.
    pub fn start(&self, start: &FeedStart, bounds: FeedBounds) -> Result<u64> {
        let after = match start {
            FeedStart::Oldest => bounds.pruned,
            FeedStart::Now => bounds.head,
            FeedStart::After(cursor) => self.position(cursor)?,
            FeedStart::Snapshot => return Err(FeedStart::snapshot_refused()),
        };
        if after < bounds.pruned {
            return Err(Error::CursorExpired(format!(
                "changes up to position {} were pruned (retention); the cursor is at {after}: \
                 resync from the start",
                bounds.pruned
            )));
        }
        if after > bounds.head {
            return Err(Error::invalid(format!(
                "change cursor at position {after}: this store's feed ends at {}",
                bounds.head
            )));
        }
        Ok(after)
    }

    /// The page of `changes` (in position order, at most `limit`) that a read found among the
    /// positions up to `read_through`, in a feed whose head is `head`: it continues after
    /// its last change when the page filled, else after everything read (changes of other
    /// scopes included).
    pub fn page(
        &self,
        changes: Vec<Change>,
        limit: usize,
        read_through: u64,
        head: u64,
    ) -> Result<ChangePage> {
        let last = match changes.last() {
            Some(change) if changes.len() == limit => self.position(&change.cursor)?,
            _ => read_through,
        };
        Ok(ChangePage {
            changes,
            next: self.cursor(last),
            caught_up: last == head,
        })
    }
}

/// A change as a numbered feed's row keeps it: the kind as [`ChangeKind::as_str`] names it,
/// and for a create or an update the document's fields (a delete's are `None`).
#[derive(Clone, Debug)]
pub struct StoredChange<'a> {
    /// The document's key.
    pub key: Key,
    /// `created`, `updated`, `deleted` or `expired`.
    pub kind: &'a str,
    /// The version written, or removed.
    pub version: u64,
    /// The write's time (the document's `updated_at`; an expiry's instant).
    pub time: i64,
    /// The write's actor (the document's `updated_by`).
    pub actor: String,
    /// The document's data; `None` reads as an empty object.
    pub data: Option<Data>,
    /// When the document was created; `None` means at `time`.
    pub created_at: Option<i64>,
    /// Who created the document; `None` means nobody named.
    pub created_by: Option<String>,
    /// When the document written expires.
    pub expires_at: Option<i64>,
    /// The document before the write, where the row keeps it ([`Change::previous`]).
    pub previous: Option<Document>,
}

/// A document as a change row's `previous` column keeps it: one JSON object with its data
/// and metadata (the id is the row's), written by [`previous_text`] or, with the same field
/// names, by the database itself.
#[derive(serde::Serialize)]
struct PreviousRef<'a> {
    data: &'a Data,
    created_at: i64,
    created_by: &'a str,
    updated_at: i64,
    updated_by: &'a str,
    version: u64,
    expires_at: Option<i64>,
}

/// [`PreviousRef`] as read back.
#[derive(serde::Deserialize)]
struct PreviousRow {
    data: Data,
    created_at: i64,
    created_by: String,
    updated_at: i64,
    updated_by: String,
    version: u64,
    #[serde(default)]
    expires_at: Option<i64>,
}

/// `document` as a change row's `previous` column keeps it ([`parse_previous`] reads it back
/// exactly).
///
/// ```
/// use docstore::feed::{parse_previous, previous_text};
///
/// let data = docstore::object(serde_json::json!({"n": 1.5, "big": u64::MAX}))?;
/// let mut document = docstore::Document::first("T-1", data, "alice", 7);
/// document.expires_at = Some(99);
/// let text = previous_text(&document);
/// assert_eq!(parse_previous("T-1", &text)?, document);
/// # Ok::<(), docstore::Error>(())
/// ```
pub fn previous_text(document: &Document) -> String {
    let row = PreviousRef {
        data: &document.data,
        created_at: document.created_at,
        created_by: &document.created_by,
        updated_at: document.updated_at,
        updated_by: &document.updated_by,
        version: document.version,
        expires_at: document.expires_at,
    };
    serde_json::to_string(&row).expect("a document always serializes")
}

/// The document `id` had before a change, from its row's `previous` column ([`previous_text`]);
/// text that is not one is [`Error::Backend`] (a corrupt row).
pub fn parse_previous(id: &str, text: &str) -> Result<Document> {
    let row: PreviousRow = serde_json::from_str(text).map_err(|err| Error::Backend {
        message: format!("corrupt change row: previous value: {err}"),
        source: None,
    })?;
    Ok(Document {
        expires_at: row.expires_at,
        id: id.to_owned(),
        data: row.data,
        created_at: row.created_at,
        updated_at: row.updated_at,
        created_by: row.created_by,
        updated_by: row.updated_by,
        version: row.version,
    })
}

impl StoredChange<'_> {
    /// The change at `cursor`; a kind no store writes is [`Error::Backend`] (a corrupt row).
    pub fn into_change(self, cursor: ChangeCursor) -> Result<Change> {
        let kind = match self.kind {
            "created" => ChangeKind::Created,
            "updated" => ChangeKind::Updated,
            "deleted" => {
                return Ok(
                    Change::deleted(self.key, self.version, self.time, self.actor, cursor)
                        .with_previous(self.previous),
                );
            }
            "expired" => {
                let removal =
                    Change::deleted(self.key, self.version, self.time, self.actor, cursor);
                return Ok(Change {
                    kind: ChangeKind::Expired,
                    ..removal
                });
            }
            other => {
                return Err(Error::Backend {
                    message: format!("corrupt change row: kind {other:?}"),
                    source: None,
                });
            }
        };
        let document = Document {
            id: self.key.id().to_owned(),
            data: self.data.unwrap_or_default(),
            created_at: self.created_at.unwrap_or(self.time),
            updated_at: self.time,
            created_by: self.created_by.unwrap_or_default(),
            updated_by: self.actor,
            version: self.version,
            expires_at: self.expires_at,
        };
        Ok(Change::stored(self.key, kind, document, cursor).with_previous(self.previous))
    }
}
