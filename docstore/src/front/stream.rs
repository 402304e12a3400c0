//! Every match of a query as a `Stream`: page by page when the plan reads in the query's
//! order, sorted once ([`sorted`](super::sorted)) when it sorts in memory.

use super::Store;
use super::sorted::SortedWalk;
use crate::document::Document;
use crate::query::{CompiledQuery, Cursor, Query, SortPosition};
use crate::{Error, Result};
use futures_core::Stream;
use futures_util::stream::{self, BoxStream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// The page size of a walk whose query sets no `limit`: large enough that the round trips
/// do not dominate, small enough that a page of big documents stays a few hundred MB at most.
pub const DEFAULT_STREAM_PAGE: usize = 1000;

/// Every document matching a query, in the query's order: a [`Stream`] of
/// `Result<Document>` that starts at the query's cursor, if any, and reads a page at a time
/// (the query's `limit` is the page size, [`DEFAULT_STREAM_PAGE`] when it has none).
///
/// **Cost.** When the plan reads in the query's order ([`Explain::reading`] is
/// `StopsAtPage`: id order, or an index in the query's order), the walk reads page after page,
/// each where the last one stopped. When the plan sorts in memory (another order, with no
/// index following it), reading page by page would read and sort every match again for each
/// page; the walk instead reads the matches once in id order, keeps only their sort values and
/// ids, sorts those once, and then reads the documents a page at a time by id. Memory stays
/// bounded by a page of documents plus, for a sorted walk, the matches' sort values.
///
/// **While others write**, every document present for the whole walk comes exactly once, and
/// none twice. A walk page by page follows the documents' current values; a sorted walk orders
/// by the values the matches had when it read them, and yields each in its latest version
/// (skipping it when it no longer matches or was deleted).
///
/// **Errors** end the stream after they are yielded: a failed read, or
/// [`Error::PartialAnswer`] when the backend could not answer exactly (its matches so far are
/// yielded first) — a walk never ends short silently. [`resume_cursor`](Self::resume_cursor)
/// says where to start again.
///
/// [`Explain::reading`]: crate::Explain::reading
///
/// ```
/// use futures_util::TryStreamExt;
///
/// # async fn demo(store: &docstore::Store) -> docstore::Result<()> {
/// let query = docstore::Query::parse(r#"status = "open" order by score desc"#)?;
/// let open: Vec<docstore::Document> = store.stream("acme", "tickets", &query).try_collect().await?;
/// # Ok(())
/// # }
/// ```
pub struct DocumentStream {
    inner: BoxStream<'static, Result<Document>>,
    progress: Option<Arc<Progress>>,
}

impl std::fmt::Debug for DocumentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentStream").finish_non_exhaustive()
    }
}

/// Where a walk stands: the position of the last document it yielded, in the query's order.
pub(super) struct Progress {
    query: CompiledQuery,
    last: Mutex<Option<SortPosition>>,
}

impl Progress {
    /// Records the position of the document about to be yielded.
    pub(super) fn passed(&self, position: SortPosition) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(position);
    }

    /// Records `doc`'s current position.
    fn passed_document(&self, doc: &Document) {
        self.passed(self.query.position(doc));
    }

    pub(super) fn query(&self) -> &CompiledQuery {
        &self.query
    }

    fn cursor(&self) -> Option<Cursor> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.as_ref().map(|position| self.query.cursor_at(position))
    }
}

/// What a walk reads: one collection of one site, with the query whose matches it yields.
#[derive(Clone)]
pub(super) struct Source {
    pub(super) store: Store,
    pub(super) site: String,
    pub(super) collection: String,
    /// The query, its cursor taken out and its page size set.
    pub(super) query: Query,
}

/// What a page walk does once its buffered page is yielded.
enum Next {
    /// Reads the page starting after this cursor (`None`: from the query's start).
    Read(Option<Cursor>),
    /// Yields [`Error::PartialAnswer`], then ends.
    Partial,
    /// Ends.
    Done,
}

/// A walk page by page, each page starting at the cursor of the one before.
pub(super) struct PageWalk {
    source: Source,
    page: VecDeque<Document>,
    next: Next,
}

impl PageWalk {
    pub(super) fn new(source: Source, start: Option<Cursor>) -> Self {
        PageWalk {
            source,
            page: VecDeque::new(),
            next: Next::Read(start),
        }
    }

    /// The next item, reading a page when the buffered one is used up.
    pub(super) async fn step(mut self) -> Option<(Result<Document>, PageWalk)> {
        loop {
            if let Some(doc) = self.page.pop_front() {
                return Some((Ok(doc), self));
            }
            match std::mem::replace(&mut self.next, Next::Done) {
                Next::Done => return None,
                Next::Partial => return Some((Err(partial(&self.source)), self)),
                Next::Read(cursor) => {
                    if let Err(err) = self.read(cursor).await {
                        return Some((Err(err), self));
                    }
                }
            }
        }
    }

    async fn read(&mut self, cursor: Option<Cursor>) -> Result<()> {
        let source = &mut self.source;
        source.query.cursor = cursor;
        let page = source
            .store
            .query(&source.site, &source.collection, &source.query)
            .await?;
        self.page = page.documents.into();
        self.next = match (page.exhausted_scan, page.next) {
            (true, _) => Next::Partial,
            (false, Some(cursor)) => Next::Read(Some(cursor)),
            (false, None) => Next::Done,
        };
        Ok(())
    }

    pub(super) fn into_stream(self) -> BoxStream<'static, Result<Document>> {
        stream::unfold(self, PageWalk::step).boxed()
    }
}

/// The error that ends a walk the backend could not answer exactly.
pub(super) fn partial(source: &Source) -> Error {
    Error::PartialAnswer(format!(
        "the backend stopped reading {}/{} before it had seen every document; the matches \
         yielded so far are right, others may be missing",
        source.site, source.collection
    ))
}

/// The walk `query` needs: page by page in id order without asking; otherwise as the plan
/// says ([`Explain::walk_sorts_once`](crate::Explain::walk_sorts_once)).
async fn choose_walk(
    source: Source,
    start: Option<Cursor>,
    progress: Arc<Progress>,
) -> BoxStream<'static, Result<Document>> {
    let sorts_once = if progress.query.id_order().is_some() {
        false
    } else {
        match source
            .store
            .explain(&source.site, &source.collection, &source.query)
            .await
        {
            Ok(plan) => plan.walk_sorts_once(),
            Err(err) => return stream::once(async { Err(err) }).boxed(),
        }
    };
    if sorts_once {
        return SortedWalk::new(source, progress).into_stream();
    }
    PageWalk::new(source, start)
        .into_stream()
        .map(move |item| {
            if let Ok(doc) = &item {
                progress.passed_document(doc);
            }
            item
        })
        .boxed()
}

impl DocumentStream {
    pub(crate) fn new(store: Store, site: &str, collection: &str, mut query: Query) -> Self {
        query.limit = Some(query.limit.unwrap_or(DEFAULT_STREAM_PAGE));
        let compiled = match query.compile_for(site, collection) {
            Ok(compiled) => compiled,
            Err(err) => {
                return DocumentStream {
                    inner: stream::once(async { Err(err) }).boxed(),
                    progress: None,
                };
            }
        };
        let start = query.cursor.take();
        let progress = Arc::new(Progress {
            last: Mutex::new(compiled.start_position()),
            query: compiled,
        });
        let source = Source {
            store,
            site: site.to_owned(),
            collection: collection.to_owned(),
            query,
        };
        let walk = choose_walk(source, start, Arc::clone(&progress));
        DocumentStream {
            inner: stream::once(walk).flatten().boxed(),
            progress: Some(progress),
        }
    }

    /// The cursor after the last document this stream yielded (before the first: the
    /// query's own cursor, `None` without one): the same query with it as its cursor
    /// ([`Query::after`]) walks on from there, as a page's `next` would — the way to resume a
    /// walk that an error or the caller stopped.
    pub fn resume_cursor(&self) -> Option<Cursor> {
        self.progress.as_ref().and_then(|p| p.cursor())
    }
}

impl Stream for DocumentStream {
    type Item = Result<Document>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}
