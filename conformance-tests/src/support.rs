//! Helpers the cases share.

use crate::Harness;
use docstore::{Data, Key, Store, StoreOptions};
use std::sync::atomic::{AtomicU64, Ordering};

/// A site name no other case (in this run or any earlier one) uses: `tag`, a random part and
/// a counter, within the 64-character limit.
pub fn unique_site(tag: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tag: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(30)
        .collect();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{tag}-{}-{n}",
        docstore::WriteId::random()
            .as_str()
            .get(..16)
            .unwrap_or("x")
    )
}

/// The number of cases a property test runs: `PROPTEST_CASES` when set, else `default`.
pub fn property_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The cases a property test runs on harness `h`: `PROPTEST_CASES` when set, else `default`
/// divided by the harness's [`Harness::property_case_divisor`] (at least one).
pub fn property_cases_on(h: &dyn crate::Harness, default: u32) -> u32 {
    property_cases((default / h.property_case_divisor().max(1)).max(1))
}

/// A store and a fresh site for one case.
pub struct Ctx {
    /// The store under test.
    pub store: Store,
    /// This case's own site.
    pub site: String,
}

impl Ctx {
    /// Opens a store with default options and picks a fresh site.
    pub async fn new(harness: &dyn Harness, tag: &str) -> Self {
        Self::with_options(harness, tag, StoreOptions::default()).await
    }

    /// Opens a store with `options` and picks a fresh site.
    pub async fn with_options(harness: &dyn Harness, tag: &str, options: StoreOptions) -> Self {
        Ctx {
            store: harness.open(options).await,
            site: unique_site(tag),
        }
    }

    /// The key of `id` in `collection` of this case's site.
    pub fn key(&self, collection: &str, id: &str) -> Key {
        Key::new(&self.site, collection, id).expect("test keys are valid")
    }
}

/// JSON object literal as document data; panics on anything but an object.
pub fn obj(value: serde_json::Value) -> Data {
    docstore::object(value).expect("test data is an object")
}
