//! The walk of a query whose plan sorts in memory: read the matches once, sort their
//! positions once, then read the documents a page at a time by id.
//!
//! Reading page by page, such a plan reads and sorts every match again for each page: pages ×
//! matches reads. This walk reads the matches once in id order (the cheapest way to find them:
//! the scan or an index that stops at the page, as the planner chooses for the filter alone),
//! keeps each one's sort values and id, sorts those, and then fetches each page's documents
//! with one `get_many`: about twice the matches in reads, whatever the number of pages.

use super::stream::{DEFAULT_STREAM_PAGE, PageWalk, Progress, Source, partial};
use crate::document::Document;
use crate::key::Key;
use crate::query::{Query, SortPosition};
use crate::{Error, Result};
use futures_util::stream::{self, BoxStream, StreamExt};
use std::collections::VecDeque;
use std::sync::Arc;

/// The matches' positions, found and sorted once.
struct Sorted {
    /// In the query's order, after its cursor.
    positions: std::vec::IntoIter<SortPosition>,
    /// Whether the backend stopped reading before it had seen every match.
    partial: bool,
}

/// A walk over sorted positions, fetching each page's documents by id.
pub(super) struct SortedWalk {
    source: Source,
    progress: Arc<Progress>,
    /// `None` until the first step finds the matches.
    sorted: Option<Sorted>,
    page: VecDeque<(SortPosition, Document)>,
    done: bool,
}

impl SortedWalk {
    pub(super) fn new(source: Source, progress: Arc<Progress>) -> Self {
        SortedWalk {
            source,
            progress,
            sorted: None,
            page: VecDeque::new(),
            done: false,
        }
    }

    pub(super) fn into_stream(self) -> BoxStream<'static, Result<Document>> {
        stream::unfold(self, SortedWalk::step).boxed()
    }

    async fn step(mut self) -> Option<(Result<Document>, SortedWalk)> {
        loop {
            if let Some((position, doc)) = self.page.pop_front() {
                self.progress.passed(position);
                return Some((Ok(doc), self));
            }
            if self.done {
                return None;
            }
            match self.fill_page().await {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    if self.sorted.as_ref().is_some_and(|s| s.partial) {
                        let err = partial(&self.source);
                        return Some((Err(err), self));
                    }
                }
                Err(err) => {
                    self.done = true;
                    return Some((Err(err), self));
                }
            }
        }
    }

    /// Reads the next page's documents; `false` when no position is left.
    async fn fill_page(&mut self) -> Result<bool> {
        if self.sorted.is_none() {
            self.sorted = Some(self.find_matches().await?);
        }
        let page_size = self.source.query.limit.unwrap_or(1).max(1);
        let sorted = self.sorted.as_mut().expect("found above");
        let positions: Vec<SortPosition> = sorted.positions.by_ref().take(page_size).collect();
        if positions.is_empty() {
            return Ok(false);
        }
        let source = &self.source;
        let keys = positions
            .iter()
            .map(|p| Key::new(&source.site, &source.collection, &p.id))
            .collect::<Result<Vec<_>>>()?;
        let documents = source.store.get_many(&keys).await?;
        let query = self.progress.query();
        self.page = positions
            .into_iter()
            .zip(documents)
            // Deleted or changed out of the answer since the matches were read.
            .filter_map(|(position, doc)| doc.map(|doc| (position, doc)))
            .filter(|(_, doc)| query.matches(doc))
            .collect();
        Ok(true)
    }

    /// Every match's position after the query's cursor, sorted in the query's order.
    async fn find_matches(&self) -> Result<Sorted> {
        let query = self.progress.query();
        // Pages of at least the default size: only positions are kept, and a tiny page size
        // would cost a request per few matches on DynamoDB.
        let page_size = self
            .source
            .query
            .limit
            .unwrap_or(0)
            .max(DEFAULT_STREAM_PAGE);
        let in_id_order = Query {
            order: Vec::new(),
            cursor: None,
            limit: Some(page_size),
            ..self.source.query.clone()
        };
        let source = Source {
            query: in_id_order,
            ..self.source.clone()
        };
        let mut matches = PageWalk::new(source, None).into_stream();
        let mut positions = Vec::new();
        let mut partial = false;
        while let Some(item) = matches.next().await {
            match item {
                Ok(doc) if query.is_after_cursor(&doc) => positions.push(query.position(&doc)),
                Ok(_) => {}
                Err(Error::PartialAnswer(_)) => partial = true,
                Err(err) => return Err(err),
            }
        }
        positions.sort_unstable_by(|a, b| query.compare_positions(a, b));
        Ok(Sorted {
            positions: positions.into_iter(),
            partial,
        })
    }
}
