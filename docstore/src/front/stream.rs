//! Every match of a query as a `Stream`, page by page.

use super::Store;
use crate::document::Document;
use crate::query::{Cursor, Query};
use crate::{Error, Result};
use futures_core::Stream;
use futures_util::stream::{self, BoxStream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The page size of a walk whose query sets no `limit`: large enough that the round trips
/// do not dominate, small enough that a page of big documents stays a few hundred MB at most.
pub const DEFAULT_STREAM_PAGE: usize = 1000;

/// Every document matching a query, in the query's order: a [`Stream`] of
/// `Result<Document>` that reads one page at a time (the query's `limit` is the page size,
/// [`DEFAULT_STREAM_PAGE`] when it has none), so memory stays bounded by a page whatever the
/// number of matches. It starts at the query's cursor, if any.
///
/// Like a walk by hand with cursors, it sees every document present for the whole walk once,
/// in order, while others write between pages. An error ends the stream after it is yielded:
/// a failed page read, or [`Error::PartialAnswer`] when the backend could not answer a page
/// exactly (its matches so far are yielded first) — a walk never ends short silently.
///
/// ```
/// use futures_util::TryStreamExt;
///
/// # async fn demo(store: &docstore::Store) -> docstore::Result<()> {
/// let query = docstore::Query::parse(r#"status = "open""#)?;
/// let open: Vec<docstore::Document> = store.stream("acme", "tickets", &query).try_collect().await?;
/// # Ok(())
/// # }
/// ```
pub struct DocumentStream {
    inner: BoxStream<'static, Result<Document>>,
}

impl std::fmt::Debug for DocumentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentStream").finish_non_exhaustive()
    }
}

/// What the walk does once its buffered page is yielded.
enum Next {
    /// Reads the page starting after this cursor (`None`: from the query's start).
    Read(Option<Cursor>),
    /// Yields [`Error::PartialAnswer`], then ends.
    Partial,
    /// Ends.
    Done,
}

struct Walk {
    store: Store,
    site: String,
    collection: String,
    query: Query,
    page: VecDeque<Document>,
    next: Next,
}

impl Walk {
    /// The next item, reading a page when the buffered one is used up.
    async fn step(mut self) -> Option<(Result<Document>, Walk)> {
        loop {
            if let Some(doc) = self.page.pop_front() {
                return Some((Ok(doc), self));
            }
            match std::mem::replace(&mut self.next, Next::Done) {
                Next::Done => return None,
                Next::Partial => return Some((Err(self.partial()), self)),
                Next::Read(cursor) => {
                    if let Err(err) = self.read(cursor).await {
                        return Some((Err(err), self));
                    }
                }
            }
        }
    }

    async fn read(&mut self, cursor: Option<Cursor>) -> Result<()> {
        self.query.cursor = cursor;
        let page = self
            .store
            .query(&self.site, &self.collection, &self.query)
            .await?;
        self.page = page.documents.into();
        self.next = match (page.exhausted_scan, page.next) {
            (true, _) => Next::Partial,
            (false, Some(cursor)) => Next::Read(Some(cursor)),
            (false, None) => Next::Done,
        };
        Ok(())
    }

    fn partial(&self) -> Error {
        Error::PartialAnswer(format!(
            "the backend stopped reading {}/{} before it had seen every document; the \
             matches yielded so far are right, others may be missing",
            self.site, self.collection
        ))
    }
}

impl DocumentStream {
    pub(crate) fn new(store: Store, site: &str, collection: &str, mut query: Query) -> Self {
        let cursor = query.cursor.take();
        query.limit = Some(query.limit.unwrap_or(DEFAULT_STREAM_PAGE));
        let walk = Walk {
            store,
            site: site.to_owned(),
            collection: collection.to_owned(),
            query,
            page: VecDeque::new(),
            next: Next::Read(cursor),
        };
        DocumentStream {
            inner: stream::unfold(walk, Walk::step).boxed(),
        }
    }
}

impl Stream for DocumentStream {
    type Item = Result<Document>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}
