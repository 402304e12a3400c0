//! The whole conformance suite on file-backed stores: every store the suite opens is a new
//! `SqliteStore` (own connections) on one shared database file, so cases also run against
//! each other's writers through SQLite's locking.

use async_trait::async_trait;
use docstore::{Store, StoreOptions};
use docstore_sqlite::SqliteStore;
use std::path::PathBuf;
use std::sync::OnceLock;

fn shared_file() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
        .path()
        .join("conformance.db")
}

struct SqliteHarness;

/// The file a store with `options` opens: the shared one, or — for a store without
/// background sweeps, an expiry case's on a manual clock — a file of its own. Its documents
/// read as expired long ago to the other cases' stores, on the system clock, whose background
/// sweeps would remove them from a shared file mid-case.
fn file_for(options: &StoreOptions, shared: PathBuf) -> PathBuf {
    if options.sweep_interval.is_some() {
        return shared;
    }
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
        .path()
        .join(format!("own-{n}.db"))
}

#[async_trait]
impl conformance_tests::Harness for SqliteHarness {
    async fn open(&self, options: StoreOptions) -> Store {
        let file = file_for(&options, shared_file());
        Store::new(SqliteStore::open_with_options(file, options).expect("open the store"))
    }

    fn capabilities(&self) -> conformance_tests::Capabilities {
        conformance_tests::Capabilities::default().with_secondary_indexes(true)
    }
}

conformance_tests::conformance_suite!(SqliteHarness);

/// The contract's families again with indexes declared on the fields the cases query.
mod indexed {
    use super::*;
    conformance_tests::index_suite!(SqliteHarness);
}

/// The suite again with `synchronous=NORMAL`, where writes run on the calling thread
/// instead of through the writer thread (own shared file), and with `feed_previous` on, so
/// every change of the suite also records the document before it (the other harnesses keep
/// the default, off, and check that no change carries one).
mod normal_durability {
    use super::*;
    use docstore_sqlite::{Durability, SqliteOptions};

    fn file() -> PathBuf {
        static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
        DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
            .path()
            .join("normal.db")
    }

    struct NormalHarness;

    #[async_trait]
    impl conformance_tests::Harness for NormalHarness {
        async fn open(&self, options: StoreOptions) -> Store {
            let sqlite = SqliteOptions::default()
                .with_durability(Durability::Normal)
                .with_feed_previous(true);
            let file = file_for(&options, file());
            Store::new(SqliteStore::open_with(file, options, sqlite).expect("open the store"))
        }

        fn capabilities(&self) -> conformance_tests::Capabilities {
            conformance_tests::Capabilities::default()
                .with_secondary_indexes(true)
                .with_feed_previous(true)
        }

        /// The SQL is the FULL harness's, which runs every property case; a quarter here
        /// still drives random sequences through the calling-thread write path.
        fn property_case_divisor(&self) -> u32 {
            4
        }
    }

    conformance_tests::conformance_suite!(NormalHarness);
}

/// The suite once more on private in-memory databases (one per store).
mod in_memory {
    use super::*;

    struct MemoryHarness;

    #[async_trait]
    impl conformance_tests::Harness for MemoryHarness {
        async fn open(&self, options: StoreOptions) -> Store {
            Store::new(SqliteStore::in_memory_with_options(options).expect("open the store"))
        }

        fn capabilities(&self) -> conformance_tests::Capabilities {
            conformance_tests::Capabilities::default().with_secondary_indexes(true)
        }

        /// The SQL is the file harness's, which runs every property case; a quarter here
        /// still checks a private in-memory database on random sequences.
        fn property_case_divisor(&self) -> u32 {
            4
        }
    }

    conformance_tests::conformance_suite!(MemoryHarness);
}
