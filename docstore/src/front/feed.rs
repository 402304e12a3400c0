//! The change feed on the front end: pages of changes, [`ChangeStream`] (every change from a
//! start, waiting for new ones), typed changes, and [`Store::replay`] (what a replica does
//! with a change). Cursors are bound here to the feed that handed them out
//! ([`FeedPosition`]), and snapshots are read here ([`snapshot`]), over any driver.

mod snapshot;

use super::Store;
use super::collection::versioned;
use crate::feed::{
    Change, ChangeCursor, ChangeKind, ChangePage, FeedPosition, FeedScope, FeedStart, SnapshotMark,
    WATCH_PAGE, check_page_size,
};
use crate::{Result, Versioned};
use futures_core::Stream;
use futures_util::stream::{self, BoxStream, StreamExt};
use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

impl Store {
    /// Reads at most `limit` (1 to [`MAX_CHANGE_PAGE`](crate::feed::MAX_CHANGE_PAGE))
    /// changes of `scope` after `start` — the whole store ([`FeedScope::whole_store`]) for
    /// the tools that follow every site (copy, backups). Apps read their
    /// [`Site`](super::Site)'s feed, which cannot reach another site.
    pub async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        self.scoped_changes(scope, start, limit).await
    }

    /// Every change of `scope` from `start`, waiting for new ones: see [`ChangeStream`].
    pub fn watch(&self, scope: FeedScope, start: FeedStart) -> ChangeStream {
        ChangeStream::new(self.clone(), scope, start)
    }

    /// Waits until a change may have been committed after `after`, a cursor any feed of this
    /// store handed out (see [`Driver::wait_for_changes`](crate::driver::Driver::wait_for_changes):
    /// it may return early; dropping it is safe). What a reader of pages does when a page was
    /// `caught_up`; [`ChangeStream`] does it itself.
    pub async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()> {
        let driver = FeedPosition::driver_cursor(after)?;
        self.driver.wait_for_changes(&driver).await
    }

    /// A page of `scope`'s changes, its cursors bound to `scope` ([`FeedPosition`]): a
    /// cursor of another scope's feed is [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    /// A snapshot start, or a cursor handed out during one, reads the snapshot
    /// ([`snapshot::page`]).
    pub(crate) async fn scoped_changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        check_page_size(limit)?;
        let position = match start {
            FeedStart::Oldest | FeedStart::Now => {
                let page = self.driver_changes(scope, start, limit).await?;
                return Ok(bind(scope, page));
            }
            FeedStart::Snapshot => FeedPosition {
                driver: self.driver_changes(scope, &FeedStart::Now, 1).await?.next,
                snapshot: SnapshotMark::Start,
            },
            FeedStart::After(cursor) => FeedPosition::decode(scope, cursor)?,
        };
        if position.snapshot != SnapshotMark::Done {
            return snapshot::page(self, scope, position, limit).await;
        }
        let start = FeedStart::After(position.driver);
        Ok(bind(
            scope,
            self.driver_changes(scope, &start, limit).await?,
        ))
    }

    /// A page of the driver's feed, its cursors the driver's own. The front end drops any
    /// change outside the scope a driver might hand back, so a site's feed never shows
    /// another site's writes.
    async fn driver_changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        let mut page = self.driver.changes(scope, start, limit).await?;
        page.changes.retain(|change| scope.contains(&change.key));
        Ok(page)
    }

    /// Makes this store's document at the change's key what the change left in its source
    /// store — the write behind a replica and `docstore copy --follow`: a created or updated
    /// document is written exactly (data, version, timestamps, actors) unless this store
    /// already holds that version or a later one; a delete removes the document unless it is
    /// newer than the deleted version. `true` when it wrote.
    ///
    /// Replaying a feed from its start into an empty store rebuilds the source's documents;
    /// replaying a change twice changes nothing the second time.
    ///
    /// ```
    /// # async fn demo(source: &docstore::Store, replica: &docstore::Store) -> docstore::Result<()> {
    /// let everything = docstore::feed::FeedScope::whole_store();
    /// let page = source.changes(&everything, &docstore::FeedStart::Oldest, 100).await?;
    /// for change in &page.changes {
    ///     replica.replay(change).await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn replay(&self, change: &Change) -> Result<bool> {
        let current = self.get(&change.key).await?;
        let current_version = current.as_ref().map(|doc| doc.version);
        match &change.document {
            Some(_) if current_version >= Some(change.version) => Ok(false),
            None if current_version.is_none_or(|v| v > change.version) => Ok(false),
            document => {
                if let Some(version) = current_version {
                    self.delete_if(&change.key, version).await?;
                }
                if let Some(document) = document {
                    self.restore(&change.key, document).await?;
                }
                Ok(true)
            }
        }
    }
}

/// `page` (of the driver's feed) with its cursors bound to `scope`.
fn bind(scope: &FeedScope, mut page: ChangePage) -> ChangePage {
    for change in &mut page.changes {
        change.cursor = following(scope, &change.cursor);
    }
    page.next = following(scope, &page.next);
    page
}

/// The cursor of `scope`'s feed, following (no snapshot) at the driver's `cursor`.
fn following(scope: &FeedScope, cursor: &ChangeCursor) -> ChangeCursor {
    FeedPosition {
        driver: cursor.clone(),
        snapshot: SnapshotMark::Done,
    }
    .encode(scope)
}

/// What a [`ChangeStream`] does once its buffered page is yielded.
#[derive(Clone)]
enum Next {
    /// Reads the page after this start.
    Read(FeedStart),
    /// Waits for a commit after this cursor, then reads after it.
    Wait(ChangeCursor),
}

struct Follow {
    store: Store,
    scope: FeedScope,
    page: VecDeque<Change>,
    next: Next,
}

impl Follow {
    async fn step(mut self) -> Option<(Result<Change>, Follow)> {
        loop {
            if let Some(change) = self.page.pop_front() {
                return Some((Ok(change), self));
            }
            let outcome = match self.next.clone() {
                Next::Read(start) => self.read(start).await,
                Next::Wait(cursor) => self.wait(cursor).await,
            };
            if let Err(err) = outcome {
                return Some((Err(err), self));
            }
        }
    }

    /// Waits for a commit after `cursor`; reads after it next.
    async fn wait(&mut self, cursor: ChangeCursor) -> Result<()> {
        self.store.wait_for_changes(&cursor).await?;
        self.next = Next::Read(FeedStart::After(cursor));
        Ok(())
    }

    async fn read(&mut self, start: FeedStart) -> Result<()> {
        let page = self
            .store
            .scoped_changes(&self.scope, &start, WATCH_PAGE)
            .await?;
        self.next = if page.changes.is_empty() && page.caught_up {
            Next::Wait(page.next)
        } else {
            Next::Read(FeedStart::After(page.next))
        };
        self.page = page.changes.into();
        Ok(())
    }
}

/// Every change of a scope (the whole store, a [`Site`](super::Site) or a
/// [`Collection`](super::Collection)) from a start, oldest first: a [`Stream`] that never
/// ends by itself — at the end of the feed it waits for the next commit (without busy
/// polling; see [`Driver::wait_for_changes`](crate::driver::Driver::wait_for_changes)) and
/// goes on. Drop it to stop.
///
/// Reads [`WATCH_PAGE`] changes at a time, so memory stays bounded. Each change carries its
/// [`cursor`](Change::cursor): keep the last one handled, and a new stream started
/// [`FeedStart::After`] it — in this process or another, after a restart — goes on with the
/// next change, none lost or repeated. A failed read ([`Error::Unavailable`](crate::Error::Unavailable),
/// [`Error::CursorExpired`](crate::Error::CursorExpired)) is an error item; the stream reads again if polled after it.
///
/// ```
/// use futures_util::TryStreamExt;
///
/// # async fn demo(site: &docstore::Site, saved: Option<docstore::ChangeCursor>) -> docstore::Result<()> {
/// let start = saved.map_or(docstore::FeedStart::Now, docstore::FeedStart::After);
/// let mut changes = site.watch(start);
/// while let Some(change) = changes.try_next().await? {
///     println!("{} {} v{}", change.kind, change.key, change.version);
///     // store change.cursor to resume here after a restart
/// }
/// # Ok(())
/// # }
/// ```
pub struct ChangeStream {
    inner: BoxStream<'static, Result<Change>>,
}

impl std::fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStream").finish_non_exhaustive()
    }
}

impl ChangeStream {
    pub(crate) fn new(store: Store, scope: FeedScope, start: FeedStart) -> Self {
        let follow = Follow {
            store,
            scope,
            page: VecDeque::new(),
            next: Next::Read(start),
        };
        ChangeStream {
            inner: stream::unfold(follow, Follow::step).boxed(),
        }
    }
}

impl Stream for ChangeStream {
    type Item = Result<Change>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}

/// A change of a typed [`Collection`](super::Collection): [`Change`] with the document
/// decoded into `T`. A change whose document does not decode is one too, with its
/// [`cursor`](Self::cursor): its [`value`](Self::value) is the [`Error::Decode`](crate::Error::Decode),
/// so a consumer can log it, save the cursor and go on.
#[derive(Debug)]
pub struct TypedChange<T> {
    /// The document's id in the collection.
    pub id: String,
    /// What the write did.
    pub kind: ChangeKind,
    /// The version the write left (for a delete: the version it removed).
    pub version: u64,
    /// The value as the write left it, with its metadata; `Ok(None)` for a delete;
    /// [`Error::Decode`](crate::Error::Decode) naming the key when the document does not
    /// fit `T`.
    pub value: Result<Option<Versioned<T>>>,
    /// The value before the write, where the feed gives it ([`Change::previous`]); `None`
    /// for a create, or when the backend does not record it, or when it does not fit `T`.
    pub previous: Option<Versioned<T>>,
    /// When the write happened, in unix nanoseconds.
    pub time: i64,
    /// Who wrote.
    pub actor: String,
    /// Where the feed continues after this change.
    pub cursor: ChangeCursor,
}

impl<T: DeserializeOwned + 'static> TypedChange<T> {
    /// Decodes `change`'s documents; one that does not fit `T` is the value's
    /// [`Error::Decode`](crate::Error::Decode) naming the key (the change keeps its cursor).
    pub(crate) fn decode(change: Change) -> Self {
        let Change {
            key,
            kind,
            version,
            document,
            time,
            actor,
            cursor,
            previous,
        } = change;
        let decode = |doc| versioned(key.site(), key.collection(), doc);
        TypedChange {
            id: key.id().to_owned(),
            kind,
            version,
            value: document.map(decode).transpose(),
            previous: previous.and_then(|doc| decode(doc).ok()),
            time,
            actor,
            cursor,
        }
    }
}

/// The typed form of a page of changes: [`ChangePage`] with each change decoded.
#[derive(Debug)]
pub struct TypedChangePage<T> {
    /// The collection's changes, oldest first, each decoded (a document that does not fit
    /// `T` is its change's [`value`](TypedChange::value) error; the page goes on after it).
    pub changes: Vec<TypedChange<T>>,
    /// Where the next read starts.
    pub next: ChangeCursor,
    /// True when the read reached the end of the feed as it stood.
    pub caught_up: bool,
}

impl<T: DeserializeOwned + 'static> TypedChangePage<T> {
    pub(crate) fn decode(page: ChangePage) -> Self {
        TypedChangePage {
            changes: page.changes.into_iter().map(TypedChange::decode).collect(),
            next: page.next,
            caught_up: page.caught_up,
        }
    }
}
