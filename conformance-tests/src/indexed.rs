//! The whole suite once more with indexes declared: [`WithIndexes`] wraps a harness and
//! declares, on every collection the query cases use, indexes on the fields they filter and
//! sort on (`n`, `s`, `b`, `g`/`k`, `score`, `priority`, `$version`, ...) and on a field no
//! case uses. Every case keeps its expectations: an index never changes an answer.
//!
//! ```ignore
//! mod indexed {
//!     use super::*;
//!     conformance_tests::index_suite!(MyHarness);
//! }
//! ```

use crate::{Capabilities, Harness};
use async_trait::async_trait;
use docstore::index::{Index, IndexSet};
use docstore::{Store, StoreOptions};

/// The collections the query cases write and query.
const COLLECTIONS: [&str; 6] = ["c", "f", "p", "q", "side", "tickets"];

/// The declared fields, per index (one set per collection).
const INDEXES: [(&str, &[&str]); 10] = [
    ("by_n", &["n"]),
    ("by_s", &["s"]),
    ("by_s_n", &["s", "-n"]),
    ("by_b", &["b"]),
    ("by_g_k", &["g", "k"]),
    ("by_score", &["-score"]),
    ("by_priority", &["priority", "$id"]),
    ("by_version", &["$version"]),
    ("by_updated", &["-$updated_at"]),
    ("unrelated", &["no_case_uses_this"]),
];

/// The declarations [`WithIndexes`] adds.
pub fn suite_indexes() -> IndexSet {
    IndexSet::new(COLLECTIONS.iter().flat_map(|collection| {
        INDEXES.iter().map(move |(name, fields)| {
            Index::parse(*collection, *name, fields.iter().copied())
                .expect("the suite's declarations are valid")
        })
    }))
    .expect("the suite's declarations are valid")
}

/// A harness whose stores declare [`suite_indexes`] (unless a case declares its own).
pub struct WithIndexes<H>(pub H);

#[async_trait]
impl<H: Harness> Harness for WithIndexes<H> {
    async fn open(&self, options: StoreOptions) -> Store {
        let options = if options.indexes.is_empty() {
            options.with_indexes(suite_indexes())
        } else {
            options
        };
        self.0.open(options).await
    }

    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }

    async fn expired_feed(&self) -> Option<(Store, docstore::ChangeCursor)> {
        self.0.expired_feed().await
    }

    fn property_case_divisor(&self) -> u32 {
        self.0.property_case_divisor()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_declarations_are_valid() {
        assert_eq!(super::suite_indexes().iter().count(), 60);
    }
}
