//! # conformance-tests
//!
//! The one suite every docstore backend runs: `DESIGN.md` turned into tests. A backend
//! implements [`Harness`] (how to open a store with given options) and stamps out the whole
//! suite, one `#[tokio::test]` per case, with [`conformance_suite!`]:
//!
//! ```ignore
//! struct MyHarness;
//!
//! #[async_trait::async_trait]
//! impl conformance_tests::Harness for MyHarness {
//!     async fn open(&self, options: docstore::StoreOptions) -> std::sync::Arc<dyn docstore::Store> {
//!         std::sync::Arc::new(MyStore::with_options(options))
//!     }
//! }
//!
//! conformance_tests::conformance_suite!(MyHarness);
//! ```
//!
//! Every case works in its own freshly named site, so the suite can run in parallel against
//! one shared database or table. The cases are plain `async fn(&dyn Harness)` in [`cases`],
//! grouped in one module per family, so a backend can also call one directly.
//!
//! Property tests follow `PROPTEST_CASES` (default: see [`property_cases`]).

pub mod cases;
mod support;

pub use support::{Ctx, property_cases, unique_site};

use async_trait::async_trait;
use docstore::{Store, StoreOptions};
use std::sync::Arc;

/// How the suite gets stores from a backend.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A store with `options`. It may share its database with every other store the harness
    /// opened: cases never look outside their own site.
    async fn open(&self, options: StoreOptions) -> Arc<dyn Store>;

    /// What the backend can and cannot do; the defaults describe an exact backend.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
}

/// Differences the contract allows between backends.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Capabilities {
    /// The backend always knows whether a full page was the last (`next` is `None` on it).
    /// When false, a full last page may carry a `next` whose page is empty with `next = None`.
    pub knows_last_page: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            knows_last_page: true,
        }
    }
}

impl Capabilities {
    /// Sets [`Capabilities::knows_last_page`].
    pub fn with_knows_last_page(mut self, knows: bool) -> Self {
        self.knows_last_page = knows;
        self
    }
}

/// Stamps out the whole suite for a harness: one `#[tokio::test]` per case, in one module per
/// family, so a failure names its family and case. The argument is an expression giving a
/// [`Harness`] value; it is evaluated once per test.
#[macro_export]
macro_rules! conformance_suite {
    ($harness:expr) => {
        $crate::__stamp_cases! { $harness;
            names: [
                key_rules_hold_at_every_boundary,
                store_calls_reject_invalid_names,
                edge_names_round_trip,
            ],
        }
    };
}

/// Implementation detail of [`conformance_suite!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_cases {
    ($harness:expr; $($family:ident : [$($case:ident),* $(,)?]),* $(,)?) => {
        $(
            mod $family {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                    async fn $case() {
                        $crate::cases::$family::$case(&$harness).await;
                    }
                )*
            }
        )*
    };
}
