//! The change feed on the front end: pages of changes, [`ChangeStream`] (every change from a
//! start, waiting for new ones), typed changes, and [`Store::replay`] (what a replica does
//! with a change).

use super::Store;
use super::collection::versioned;
use crate::feed::{
    Change, ChangeCursor, ChangeKind, ChangePage, FeedScope, FeedStart, WATCH_PAGE, check_page_size,
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

    /// A page of `scope`'s changes. The front end drops any change outside the scope a
    /// driver might hand back, so a site's feed never shows another site's writes.
    pub(crate) async fn scoped_changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        check_page_size(limit)?;
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
        self.store.driver.wait_for_changes(&cursor).await?;
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
/// decoded into `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct TypedChange<T> {
    /// The document's id in the collection.
    pub id: String,
    /// What the write did.
    pub kind: ChangeKind,
    /// The version the write left (for a delete: the version it removed).
    pub version: u64,
    /// The value as the write left it, with its metadata; `None` for a delete.
    pub value: Option<Versioned<T>>,
    /// When the write happened, in unix nanoseconds.
    pub time: i64,
    /// Who wrote.
    pub actor: String,
    /// Where the feed continues after this change.
    pub cursor: ChangeCursor,
}

impl<T: DeserializeOwned + 'static> TypedChange<T> {
    /// Decodes `change`'s document: [`Error::Decode`] naming the key when it does not fit `T`.
    pub(crate) fn decode(change: Change) -> Result<Self> {
        let Change {
            key,
            kind,
            version,
            document,
            time,
            actor,
            cursor,
        } = change;
        let value = document
            .map(|doc| versioned(key.site(), key.collection(), doc))
            .transpose()?;
        Ok(TypedChange {
            id: key.id().to_owned(),
            kind,
            version,
            value,
            time,
            actor,
            cursor,
        })
    }
}

/// The typed form of a page of changes: [`ChangePage`] with each change decoded.
#[derive(Debug)]
pub struct TypedChangePage<T> {
    /// The collection's changes, oldest first, each decoded — or [`Error::Decode`](crate::Error::Decode) naming
    /// the key of a document that does not fit `T` (the page goes on after it).
    pub changes: Vec<Result<TypedChange<T>>>,
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
