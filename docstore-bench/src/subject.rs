//! What a workload drives: the docstore API or a hand-written baseline, behind one trait.

use crate::BenchResult;
use async_trait::async_trait;
use docstore::Data;

/// Where a collection walk continues: opaque text (a docstore cursor, or the last id for a
/// baseline); `None` before the first page.
pub type WalkPosition = Option<String>;

/// One page of a walk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkPage {
    /// The documents on the page.
    pub documents: usize,
    /// Where the next page starts; `None` after the last page.
    pub next: WalkPosition,
}

/// One system under test: a docstore store or a baseline. Every document lives in one site;
/// the single-document workloads use one collection and the query workloads another.
///
/// Each write returns the version it left, so the workloads can hand `update_if` the right
/// expected version and check that every subject did the same thing.
#[async_trait]
pub trait Subject: Send + Sync {
    /// Whether the versions it returns are real (a peer without versions returns 0s, and
    /// the workloads then do not check them).
    fn tracks_versions(&self) -> bool {
        true
    }

    /// Creates `id` in `collection`; an existing id is an error.
    async fn create(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64>;
    /// Reads `id`, parsed into an owned document; whether it exists.
    async fn get(&self, collection: &str, id: &str) -> BenchResult<bool>;
    /// Creates or replaces `id` (keeping its creation metadata); the new version.
    async fn put(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64>;
    /// Merges `patch` (RFC 7386) into `id`, retrying when a concurrent write got in between;
    /// the new version.
    async fn update(&self, collection: &str, id: &str, patch: &Data) -> BenchResult<u64>;
    /// Merges `patch` into `id` if it is still at `expected`; the new version.
    async fn update_if(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: u64,
    ) -> BenchResult<u64>;
    /// Applies each `(id, patch, expected)` if the document is still at `expected`, all in
    /// one atomic write — docstore: one `write_all` of `UpdateIf`s; the SQLite baseline: one
    /// `BEGIN IMMEDIATE` transaction — and returns the new versions. The default (subjects
    /// without multi-document transactions) makes one `update_if` call per document, not
    /// atomically.
    async fn update_if_many(
        &self,
        collection: &str,
        writes: &[(String, Data, u64)],
    ) -> BenchResult<Vec<u64>> {
        let mut versions = Vec::with_capacity(writes.len());
        for (id, patch, expected) in writes {
            versions.push(self.update_if(collection, id, patch, *expected).await?);
        }
        Ok(versions)
    }
    /// Deletes `id`; whether it existed.
    async fn delete(&self, collection: &str, id: &str) -> BenchResult<bool>;
    /// The selective query of [`crate::data::selective_query`]: the ids of its first 20
    /// documents, in order. Every side reads the page's documents whole and holds them all,
    /// as an application given the page does, before it answers their ids.
    async fn top(&self, collection: &str) -> BenchResult<Vec<String>>;
    /// One page of `page_size` documents of `collection` in id order, from `after`.
    async fn walk_page(
        &self,
        collection: &str,
        page_size: usize,
        after: WalkPosition,
    ) -> BenchResult<WalkPage>;
}
