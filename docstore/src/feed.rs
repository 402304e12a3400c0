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
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

mod commits;
mod numbered;
pub use commits::Commits;
pub use numbered::{FeedBounds, NumberedFeed, StoredChange, parse_previous, previous_text};

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
    /// The document expired and was removed (`docs/contract.md`, "Expiry"): once per
    /// expired document, when the store removes it; its time is the expiry instant and its
    /// actor empty.
    Expired,
    /// No write: a document as it stood when a [`FeedStart::Snapshot`] read it, handed to a
    /// new consumer before the changes that follow it.
    Existing,
}

impl ChangeKind {
    /// Whether the change removed its document (`Deleted` or `Expired`): what a consumer
    /// that mirrors the store applies as a delete.
    pub fn removes(self) -> bool {
        matches!(self, ChangeKind::Deleted | ChangeKind::Expired)
    }

    /// The kind's name as the CLI prints it: `created`, `updated`, `deleted`, `expired` or
    /// `existing`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Updated => "updated",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Expired => "expired",
            ChangeKind::Existing => "existing",
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
    /// The document as it was before the write, metadata included, where the backend keeps
    /// it: for an update, the version it replaced; for a delete, the document it removed;
    /// `None` for a create, a snapshot's document and a backend or store that does not
    /// record it (`docs/contract.md`, "Change feed": DynamoDB and memory always, SQLite
    /// with `feed_previous` on).
    pub previous: Option<Document>,
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
            previous: None,
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
            previous: None,
        }
    }

    /// The removal of the expired document `document` at `key` ([`ChangeKind::Expired`]): at
    /// its expiry instant, by nobody.
    pub fn expired(key: Key, document: &Document, cursor: ChangeCursor) -> Self {
        Change {
            kind: ChangeKind::Expired,
            time: document.expires_at.unwrap_or(document.updated_at),
            ..Change::deleted(key, document.version, 0, "", cursor)
        }
    }

    /// A document as a snapshot read it ([`ChangeKind::Existing`]): its version, time and
    /// actor are the document's.
    pub fn existing(key: Key, document: Document, cursor: ChangeCursor) -> Self {
        Change::stored(key, ChangeKind::Existing, document, cursor)
    }

    /// The same change with the document as it was before the write ([`Change::previous`]).
    pub fn with_previous(mut self, previous: Option<Document>) -> Self {
        self.previous = previous;
        self
    }
}

/// A position in a store's change feed: opaque text, valid across processes and restarts,
/// read with [`FeedStart::After`]. Each driver writes its own positions, tagged with the
/// driver's name, so a cursor of another backend is [`Error::InvalidArgument`]. A driver's
/// position never holds `~`: the front end appends after it what binds a cursor to its
/// site's or collection's feed and where a snapshot stands (`docs/contract.md`, "Change
/// feed").
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
    /// The cursor of `driver` (a short lowercase name) at `position` (the driver's own text,
    /// without `~`).
    pub fn new(driver: &str, position: impl AsRef<str>) -> Self {
        debug_assert!(
            !position.as_ref().contains(MARK),
            "a driver position holds `~`"
        );
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

    /// The cursor of a feed that numbers its changes in one sequence: `driver:FEED.POSITION`,
    /// `feed` the id the store's feed was created with (no `.` nor `~`), `position` the
    /// number of the last change read.
    ///
    /// ```
    /// use docstore::ChangeCursor;
    ///
    /// let cursor = ChangeCursor::numbered("sqlite", "f00d", 42);
    /// assert_eq!(cursor.to_string(), "sqlite:f00d.42");
    /// assert_eq!(cursor.numbered_position("sqlite", "SQLite", "f00d")?, 42);
    /// assert!(cursor.numbered_position("sqlite", "SQLite", "beef").is_err());
    /// assert!(ChangeCursor::new("sqlite", "42").numbered_position("sqlite", "SQLite", "f00d").is_err());
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn numbered(driver: &str, feed: &str, position: u64) -> Self {
        ChangeCursor::new(driver, format!("{feed}.{position}"))
    }

    /// The position of a cursor [`numbered`](Self::numbered) wrote for `driver` and this
    /// store's `feed` (`store`: the backend's name in messages). [`Error::InvalidArgument`]
    /// for a cursor of another driver, text no such store wrote, or a cursor of another
    /// store's feed (saying so: follow that store with it, or start this one's feed afresh).
    pub fn numbered_position(&self, driver: &str, store: &str, feed: &str) -> Result<u64> {
        let text = self.position_for(driver)?;
        let malformed =
            || Error::invalid(format!("change cursor: not a cursor a {store} store wrote"));
        let (of, position) = text.split_once('.').ok_or_else(malformed)?;
        let position: u64 = position.parse().map_err(|_| malformed())?;
        if of != feed {
            return Err(Error::invalid(format!(
                "change cursor: this cursor belongs to another store (the {store} feed {of}; \
                 this one's is {feed}): follow that store with it, or start this store's feed \
                 from the start or from now"
            )));
        }
        Ok(position)
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
    /// Every document of the scope as it stands ([`ChangeKind::Existing`]), then every change
    /// after them — exactly once each, under one cursor (`docs/contract.md`, "Change feed",
    /// "Starting from a snapshot"). What a new consumer that must see every document starts
    /// with; read by the front end ([`Store`](crate::Store)), never handed to a driver.
    Snapshot,
}

impl FeedStart {
    /// What a driver answers a [`FeedStart::Snapshot`] handed to it: the front end reads
    /// snapshots over the driver's feed and queries, and never passes one on.
    pub fn snapshot_refused() -> Error {
        Error::invalid("a snapshot start is read by docstore::Store, not by a driver")
    }

    /// `start` / `oldest`, `now`, `snapshot`, or a cursor's text (the CLI's `--from` and
    /// `--after`).
    ///
    /// ```
    /// use docstore::feed::FeedStart;
    /// assert_eq!(FeedStart::parse("now")?, FeedStart::Now);
    /// assert_eq!(FeedStart::parse("snapshot")?, FeedStart::Snapshot);
    /// assert_eq!(FeedStart::parse("start")?, FeedStart::Oldest);
    /// assert!(matches!(FeedStart::parse("sqlite:17")?, FeedStart::After(_)));
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "start" | "oldest" => Ok(FeedStart::Oldest),
            "now" => Ok(FeedStart::Now),
            "snapshot" => Ok(FeedStart::Snapshot),
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

    /// The scope as messages name it: `site acme`, `collection acme/tickets`, `the whole
    /// store`.
    fn describe(&self) -> String {
        match (&self.site, &self.collection) {
            (Some(site), Some(collection)) => format!("collection {site}/{collection}"),
            (Some(site), None) => format!("site {site}"),
            _ => "the whole store".to_owned(),
        }
    }

    /// What a cursor of this scope's feed carries to bind it here: a fingerprint of the site
    /// and collection; `None` for the whole store, whose cursors are the driver's own.
    fn binding(&self) -> Option<String> {
        let site = self.site.as_ref()?;
        let shape = serde_json::json!([site, self.collection]);
        Some(crate::query::fingerprint(shape.to_string().as_bytes()))
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

/// What separates the parts the front end adds to a driver's cursor text.
const MARK: char = '~';
/// The part binding a cursor to its site's or collection's feed: `~s` and a fingerprint.
const SCOPE_PART: char = 's';
/// The part saying where a snapshot stands: `~k` and the base64 of a JSON key.
const SNAPSHOT_PART: char = 'k';

/// How far a snapshot ([`FeedStart::Snapshot`]) has read the scope's documents, in key
/// order (site, collection, id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SnapshotMark {
    /// No document handed out yet.
    Start,
    /// Every document up to this key (included) handed out, or covered by the feed.
    After(Key),
    /// Every document handed out: the reader follows the feed.
    Done,
}

impl SnapshotMark {
    /// Whether the snapshot has passed `key`: a change of it must be handed out, since no
    /// document read later will show it.
    pub(crate) fn covers(&self, key: &Key) -> bool {
        match self {
            SnapshotMark::Start => false,
            SnapshotMark::After(last) => key <= last,
            SnapshotMark::Done => true,
        }
    }
}

/// A cursor the front end handed out, read back: the driver's cursor and, while a snapshot
/// is read, how far it stands.
///
/// The text is the driver's cursor, then `~s<fingerprint>` for a site's or collection's feed
/// (the whole store's cursors are the driver's own), then, during a snapshot,
/// `~k<base64 of ["site","collection","id"]>` (`[]` before the first document).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FeedPosition {
    /// Where the driver's feed stands.
    pub(crate) driver: ChangeCursor,
    /// How far the snapshot stands ([`SnapshotMark::Done`]: following).
    pub(crate) snapshot: SnapshotMark,
}

impl FeedPosition {
    /// The cursor of this position in `scope`'s feed.
    pub(crate) fn encode(&self, scope: &FeedScope) -> ChangeCursor {
        let mut text = self.driver.0.clone();
        if let Some(binding) = scope.binding() {
            text.extend([MARK, SCOPE_PART]);
            text.push_str(&binding);
        }
        let key = match &self.snapshot {
            SnapshotMark::Done => None,
            SnapshotMark::Start => Some(serde_json::json!([])),
            SnapshotMark::After(key) => {
                Some(serde_json::json!([key.site(), key.collection(), key.id()]))
            }
        };
        if let Some(key) = key {
            text.extend([MARK, SNAPSHOT_PART]);
            text.push_str(&URL_SAFE_NO_PAD.encode(key.to_string()));
        }
        ChangeCursor(text)
    }

    /// Reads a cursor of `scope`'s feed: [`Error::InvalidArgument`] for one of another site's
    /// or collection's feed (or of the whole store's feed on a scoped one, and the reverse),
    /// and for text no front end wrote.
    pub(crate) fn decode(scope: &FeedScope, cursor: &ChangeCursor) -> Result<Self> {
        let (driver, parts) = Self::split(cursor)?;
        let expected = scope.binding();
        if parts.binding != expected {
            let whose = match (parts.binding.is_some(), expected.is_some()) {
                (false, _) => "the whole store's feed",
                (true, false) => "a site's or collection's feed",
                (true, true) => "another site's or collection's feed",
            };
            return Err(Error::invalid(format!(
                "change cursor of {whose}, not of the feed of {}: a feed takes only the \
                 cursors it handed out",
                scope.describe()
            )));
        }
        Ok(FeedPosition {
            driver,
            snapshot: parts.snapshot,
        })
    }

    /// The driver's cursor inside any cursor the front end wrote (for waiting, which does not
    /// depend on the scope).
    pub(crate) fn driver_cursor(cursor: &ChangeCursor) -> Result<ChangeCursor> {
        Self::split(cursor).map(|(driver, _)| driver)
    }

    fn split(cursor: &ChangeCursor) -> Result<(ChangeCursor, Parts)> {
        let malformed = || Error::invalid("change cursor: not a cursor a store wrote");
        let mut pieces = cursor.0.split(MARK);
        let driver = ChangeCursor::parse(pieces.next().unwrap_or_default())?;
        let mut parts = Parts {
            binding: None,
            snapshot: SnapshotMark::Done,
        };
        let mut last = None;
        for piece in pieces {
            let mut chars = piece.chars();
            let tag = chars.next().ok_or_else(malformed)?;
            let body = chars.as_str();
            // Each part at most once, the binding first.
            let rank = [SCOPE_PART, SNAPSHOT_PART].iter().position(|&t| t == tag);
            let rank = rank.ok_or_else(malformed)?;
            if last.is_some_and(|l| l >= rank) {
                return Err(malformed());
            }
            last = Some(rank);
            match tag {
                SCOPE_PART => {
                    let hex = body.len() == 16 && body.bytes().all(|b| b.is_ascii_hexdigit());
                    if !hex || body.bytes().any(|b| b.is_ascii_uppercase()) {
                        return Err(malformed());
                    }
                    parts.binding = Some(body.to_owned());
                }
                _ => parts.snapshot = snapshot_mark(body).ok_or_else(malformed)?,
            }
        }
        Ok((driver, parts))
    }
}

/// The parts after a driver's cursor.
struct Parts {
    binding: Option<String>,
    snapshot: SnapshotMark,
}

/// The snapshot mark of a `~k` part: `[]` or `[site, collection, id]` (a valid key).
fn snapshot_mark(body: &str) -> Option<SnapshotMark> {
    let bytes = URL_SAFE_NO_PAD.decode(body).ok()?;
    let names: Vec<String> = serde_json::from_slice(&bytes).ok()?;
    match names.as_slice() {
        [] => Some(SnapshotMark::Start),
        [site, collection, id] => Key::new(site, collection, id).ok().map(SnapshotMark::After),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(snapshot: SnapshotMark) -> FeedPosition {
        FeedPosition {
            driver: ChangeCursor::new("memory", "00ff.17"),
            snapshot,
        }
    }

    #[test]
    fn cursors_round_trip_in_their_scope() {
        let key = Key::new("acme", "tickets", "T~1 é").unwrap();
        let scopes = [
            FeedScope::whole_store(),
            FeedScope::site("acme").unwrap(),
            FeedScope::collection("acme", "tickets").unwrap(),
        ];
        for scope in &scopes {
            for mark in [
                SnapshotMark::Start,
                SnapshotMark::After(key.clone()),
                SnapshotMark::Done,
            ] {
                let cursor = position(mark.clone()).encode(scope);
                let text = ChangeCursor::parse(&cursor.to_string()).unwrap();
                assert_eq!(FeedPosition::decode(scope, &text).unwrap(), position(mark));
            }
        }
        let plain = position(SnapshotMark::Done).encode(&scopes[0]);
        assert_eq!(
            plain.as_str(),
            "memory:00ff.17",
            "whole-store cursors are the driver's"
        );
    }

    #[test]
    fn a_cursor_of_another_scope_is_invalid() {
        let acme = FeedScope::site("acme").unwrap();
        let scopes = [
            FeedScope::whole_store(),
            FeedScope::site("globex").unwrap(),
            FeedScope::collection("acme", "tickets").unwrap(),
        ];
        for from in &scopes {
            for mark in [SnapshotMark::Start, SnapshotMark::Done] {
                let cursor = position(mark).encode(from);
                let err = FeedPosition::decode(&acme, &cursor).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            }
            let cursor = position(SnapshotMark::Done).encode(&acme);
            assert!(FeedPosition::decode(from, &cursor).is_err());
        }
    }

    #[test]
    fn garbage_parts_are_invalid() {
        let acme = FeedScope::site("acme").unwrap();
        let good = position(SnapshotMark::Start).encode(&acme).to_string();
        let (head, _) = good.split_once("~k").unwrap();
        for text in [
            format!("{head}~"),
            format!("{head}~x1"),
            format!("{head}~kW10~s0123456789abcdef"),
            format!("{head}~kW10~kW10"),
            format!("{head}~k!!"),
            format!("{head}~kWyJhIl0"),
            "memory:00ff.17~sABCDEF0123456789".to_owned(),
            "memory:00ff.17~s0123".to_owned(),
        ] {
            let cursor = ChangeCursor::parse(&text).unwrap();
            let err = FeedPosition::decode(&acme, &cursor).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{text}: {err}");
        }
    }
}
