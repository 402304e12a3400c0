//! Reading a query a chunk at a time, for backends whose reads are statements or requests
//! returning at most `n` rows in key order (PostgreSQL's `ORDER BY … LIMIT n`): the backend
//! fetches one chunk, these decide what to keep and where the next chunk starts, and stop
//! once the page is complete. The documents kept then make the page ([`Kept::page`]).

use super::{CompiledIndex, IndexPlan, Step};
use crate::Page;
use crate::document::Document;
use crate::query::CompiledQuery;
use std::future::Future;

/// The most rows one chunk asks for.
pub const MAX_CHUNK: usize = 1000;

/// The first chunk's size for `query`: its page and one more, at most [`MAX_CHUNK`]. Each
/// further chunk of a read is twice the last (up to [`MAX_CHUNK`]): a read that goes on past
/// its first chunk (a filter skipping rows, a range read whole to be sorted) takes few round
/// trips, one that stops at the page reads no more than it.
pub fn chunk_size(query: &CompiledQuery) -> usize {
    query
        .limit()
        .map_or(MAX_CHUNK, |l| l.saturating_add(1).min(MAX_CHUNK))
}

/// What a chunked read kept: the matches after the cursor it found, and how many rows it
/// fetched.
#[derive(Debug)]
pub struct Kept {
    /// The documents kept.
    pub documents: Vec<Document>,
    /// How many rows the read fetched (kept or not).
    pub read: u64,
    /// Whether [`documents`](Self::documents) are in the query's order already.
    pub in_order: bool,
    /// Whether a match follows [`documents`](Self::documents) in the query's order that the
    /// read found but did not make a document of: with the page complete and in order, the
    /// page only needs to know it is there.
    pub more_unread: bool,
}

impl Kept {
    /// The page: cut at the limit when the documents are in the query's order, else sorted
    /// and cut by [`CompiledQuery::evaluate_owned`]. Documents a backend adds to
    /// [`documents`](Self::documents) must clear [`in_order`](Self::in_order). (Sorting
    /// needs no word of the unread match: it comes with a complete page, so any document
    /// added makes more than a page, and it follows every document of that page.)
    pub fn page(self, query: &CompiledQuery) -> Page {
        match self.in_order {
            true => query.page_in_order(self.documents, self.more_unread),
            false => query.evaluate_owned(self.documents),
        }
    }
}

/// One chunk of an index range to fetch: the entries whose keys are in `start..end`
/// (`None`: unbounded), in key order or backwards when `reverse`, at most `limit` of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The first key (inclusive).
    pub start: Vec<u8>,
    /// The key after the last (exclusive).
    pub end: Option<Vec<u8>>,
    /// Read from the end backwards.
    pub reverse: bool,
    /// The most entries to return.
    pub limit: usize,
}

/// Reads `plan` over `index` with `fetch` (one [`Chunk`] a call: its entries in the chunk's
/// order, each a document's key in `index` — the backend's stored key, which must be
/// [`CompiledIndex::key`] of the document — and the row `document` makes the document of),
/// walking each range with the plan's [`RangeWalk`](super::RangeWalk) until it has what the
/// page needs. With `filtered`, `fetch` returns only documents matching the plan's residual
/// filter (pushed down whole), which are then not checked again; and when the plan also
/// keeps the query's order, the row after a complete page is not made a document
/// ([`Kept::more_unread`]).
pub async fn read_plan<F, Fut, R, E>(
    plan: &IndexPlan,
    index: &CompiledIndex,
    query: &CompiledQuery,
    filtered: bool,
    mut fetch: F,
    document: impl Fn(R) -> Result<Document, E>,
) -> Result<Kept, E>
where
    F: FnMut(Chunk) -> Fut,
    Fut: Future<Output = Result<Vec<(Vec<u8>, R)>, E>>,
{
    let (mut kept, mut read, mut more_unread) = (Vec::new(), 0u64, false);
    for range in &plan.ranges {
        let mut walk = plan.walk(query);
        let (mut start, mut end) = (range.start.clone(), range.end.clone());
        let mut limit = chunk_size(query);
        'chunks: loop {
            let (reverse, chunk) = (plan.reverse, (start.clone(), end.clone()));
            let docs = fetch(Chunk {
                start: chunk.0,
                end: chunk.1,
                reverse,
                limit,
            })
            .await?;
            read += docs.len() as u64;
            let full = docs.len() == limit;
            let mut last = None;
            for (key, row) in docs {
                if plan.page_is_complete(query, filtered, kept.len()) {
                    more_unread = true;
                    break 'chunks;
                }
                let doc = document(row)?;
                debug_assert!(!filtered || query.matches(&doc), "{} fetched", doc.id);
                let matches = (filtered || query.matches(&doc)) && query.is_after_cursor(&doc);
                match walk.offer(index, &key, matches) {
                    Step::Keep => kept.push(doc),
                    Step::Skip => {}
                    Step::Stop => break 'chunks,
                }
                last = Some(key);
            }
            match last {
                // The next chunk starts right after the last key read.
                Some(last) if full && !walk.is_done() => {
                    match reverse {
                        true => end = Some(last),
                        false => start = [last, vec![0]].concat(),
                    }
                    limit = limit.saturating_mul(2).min(MAX_CHUNK);
                }
                _ => break,
            }
        }
    }
    Ok(Kept {
        documents: kept,
        read,
        in_order: plan.keeps_order(),
        more_unread,
    })
}

/// Reads a query in id order with a page size through `fetch(after, limit)` (at most
/// `limit` documents after id `after` — before it when descending — in the query's id
/// order), until the page and one more matched.
pub async fn read_id_order<F, Fut, E>(query: &CompiledQuery, mut fetch: F) -> Result<Kept, E>
where
    F: FnMut(Option<String>, usize) -> Fut,
    Fut: Future<Output = Result<Vec<Document>, E>>,
{
    let (mut limit, wanted) = (
        chunk_size(query),
        query.limit().map_or(usize::MAX, |l| l.saturating_add(1)),
    );
    let mut after = query.after().map(|c| c.id.clone());
    let (mut matched, mut read) = (Vec::new(), 0u64);
    loop {
        let docs = fetch(after.take(), limit).await?;
        read += docs.len() as u64;
        let full = docs.len() == limit;
        for doc in docs {
            after = Some(doc.id.clone());
            if query.matches(&doc) && query.is_after_cursor(&doc) {
                matched.push(doc);
            }
        }
        if !full || matched.len() >= wanted {
            return Ok(Kept {
                documents: matched,
                read,
                in_order: true,
                more_unread: false,
            });
        }
        limit = limit.saturating_mul(2).min(MAX_CHUNK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Index, IndexSet};
    use crate::query::Query;
    use crate::{Filter, object};
    use serde_json::json;

    fn doc(i: usize) -> Document {
        let data = object(json!({"n": (i * 7) % 10, "odd": i % 2 == 1})).unwrap();
        Document::first(format!("d{i:02}"), data, "", 0)
    }

    /// Chunked reads over a sorted list give the reference pages, page after page, reading
    /// no more than the pages need when the plan stops at the page.
    #[tokio::test]
    async fn chunked_reads_give_the_reference_pages() {
        let indexes = IndexSet::new([Index::parse("c", "by_n", ["-n"]).unwrap()]).unwrap();
        let index = &indexes.for_collection("c")[0];
        let docs: Vec<Document> = (0..40).map(doc).collect();
        let mut sorted = docs.clone();
        sorted.sort_by_key(|d| index.key(d));
        let fetch = |chunk: Chunk| {
            let mut rows: Vec<(Vec<u8>, Document)> = sorted
                .iter()
                .map(|d| (index.key(d), d.clone()))
                .filter(|(key, _)| {
                    *key >= chunk.start && chunk.end.as_ref().is_none_or(|end| key < end)
                })
                .collect();
            if chunk.reverse {
                rows.reverse();
            }
            rows.truncate(chunk.limit);
            async move { Ok::<_, ()>(rows) }
        };
        for query in [
            Query::new().order_by_desc("n").limit(3),
            Query::new().order_by("n").limit(4),
            Query::new()
                .filter(Filter::eq("odd", true))
                .order_by_desc("n")
                .limit(2),
        ] {
            let mut cursor = None;
            let mut pages = 0;
            loop {
                let compiled = query.clone().after(cursor.clone()).compile().unwrap();
                let plan = crate::index::plan(&indexes, "c", &compiled).expect("served");
                let kept = read_plan(&plan, index, &compiled, false, fetch, Ok).await;
                let kept = kept.unwrap();
                assert!(
                    kept.read < docs.len() as u64,
                    "stops before the end: read {}",
                    kept.read
                );
                let page = kept.page(&compiled);
                assert_eq!(page, compiled.evaluate(&docs), "{query:?}");
                pages += 1;
                cursor = page.next;
                if cursor.is_none() {
                    break;
                }
            }
            assert!(pages > 3, "{query:?}: {pages} pages");
        }
    }

    /// A plan read in the query's order with nothing left to check makes documents of the
    /// page only: the row after it just says that more follow.
    #[tokio::test]
    async fn the_row_after_a_complete_page_in_order_is_not_read() {
        let indexes = IndexSet::new([Index::parse("c", "by_n", ["-n"]).unwrap()]).unwrap();
        let index = &indexes.for_collection("c")[0];
        let mut docs: Vec<Document> = (0..40).map(doc).collect();
        docs.sort_by_key(|d| index.key(d));
        let fetch = |chunk: Chunk| {
            let rows: Vec<(Vec<u8>, Document)> = docs
                .iter()
                .map(|d| (index.key(d), d.clone()))
                .filter(|(key, _)| *key >= chunk.start)
                .take(chunk.limit)
                .collect();
            async move { Ok::<_, ()>(rows) }
        };
        let made = std::cell::Cell::new(0);
        let document = |doc: Document| {
            made.set(made.get() + 1);
            Ok(doc)
        };
        let query = Query::new().order_by_desc("n").limit(3).compile().unwrap();
        let plan = crate::index::plan(&indexes, "c", &query).expect("served");
        assert!(plan.keeps_order() && plan.residual.is_none());
        let kept = read_plan(&plan, index, &query, true, fetch, document).await;
        let kept = kept.unwrap();
        assert_eq!(
            (made.get(), kept.read),
            (3, 4),
            "three documents of four rows"
        );
        assert!(kept.more_unread);
        let page = kept.page(&query);
        assert_eq!(page, query.evaluate(&docs));
        assert!(page.next.is_some());
    }

    #[tokio::test]
    async fn id_order_reads_stop_at_the_page() {
        let docs: Vec<Document> = (0..40).map(doc).collect();
        let query = Query::new()
            .filter(Filter::eq("odd", true))
            .limit(5)
            .compile()
            .unwrap();
        let fetch = |after: Option<String>, limit: usize| {
            let rows: Vec<Document> = docs
                .iter()
                .filter(|d| after.as_ref().is_none_or(|a| d.id > *a))
                .take(limit)
                .cloned()
                .collect();
            async move { Ok::<_, ()>(rows) }
        };
        let kept = read_id_order(&query, fetch).await.unwrap();
        assert_eq!(kept.read, 18, "a chunk of 6, then one of 12");
        assert_eq!(kept.page(&query), query.evaluate(&docs));
    }
}
