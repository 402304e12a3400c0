//! # conformance-tests
//!
//! For backend authors: the one suite every docstore driver runs, the contract
//! (`docs/contract.md`) turned into tests, run through the front end ([`docstore::Store`])
//! over the driver as applications use it. (Application authors testing their own code
//! want `docstore-testing` instead.) A backend implements [`Harness`] (how to open a store
//! over its driver with given options) and stamps out the whole suite, one `#[tokio::test]`
//! per case, with [`conformance_suite!`]:
//!
//! ```ignore
//! struct MyHarness;
//!
//! #[async_trait::async_trait]
//! impl conformance_tests::Harness for MyHarness {
//!     async fn open(&self, options: docstore::StoreOptions) -> docstore::Store {
//!         docstore::Store::new(MyDriver::with_options(options))
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
mod indexed;
mod support;

pub use indexed::{WithIndexes, suite_indexes};
pub use support::{Ctx, property_cases, unique_site};

use async_trait::async_trait;
use docstore::{Store, StoreOptions};

/// How the suite gets stores from a backend.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A store with `options`. It may share its database with every other store the harness
    /// opened: cases never look outside their own site.
    async fn open(&self, options: StoreOptions) -> Store;

    /// What the backend can and cannot do; the defaults describe an exact backend.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// A store whose change feed has already dropped the change after the returned cursor
    /// (its retention shortened or run out for the test), for the `changes` family's
    /// expired-cursor case; `None` when a test cannot reach the backend's retention — the
    /// harness says why in its docs.
    async fn expired_feed(&self) -> Option<(Store, docstore::ChangeCursor)> {
        None
    }

    /// The share of each property test's default cases this harness runs, as a divisor
    /// (default 1: all of them; `PROPTEST_CASES`, when set, always wins). A harness over the
    /// same driver as another harness that runs them all may run fewer — moto beside
    /// dynoxide: the driver's logic is covered there, and the fewer cases still check this
    /// backend's fidelity on random sequences. Say why in the harness's docs.
    fn property_case_divisor(&self) -> u32 {
        1
    }
}

/// Differences the contract allows between backends.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Capabilities {
    /// The backend always knows whether a full page was the last (`next` is `None` on it).
    /// When false, a full last page may carry a `next` whose page is empty with `next = None`.
    pub knows_last_page: bool,
    /// The backend serves queries by its declared indexes, so `explain` names the index for
    /// a servable query. Default `false`: a backend may still answer every query by its scan
    /// path (the answers must be the same either way; only `explain` differs).
    pub secondary_indexes: bool,
    /// The change feed gives changes of different documents in commit order (memory,
    /// SQLite). When false (DynamoDB Streams: per-shard order), only each document's own
    /// changes are ordered.
    pub feed_commit_order: bool,
    /// Every update's and delete's change carries the document before it
    /// ([`docstore::Change::previous`]: DynamoDB, from the stream's old image; memory; SQLite
    /// with `feed_previous` on). When false the backend gives none.
    pub feed_previous: bool,
    /// The backend enforces unique indexes (`docs/contract.md`, "Unique indexes"). A backend
    /// that cannot yet must refuse to open a store declaring one (`InvalidArgument`), never
    /// accept it unenforced; its harness says false and its own tests check the refusal, and
    /// the `unique` family checks nothing there.
    pub unique_indexes: bool,
    /// The backend keeps document expiry (`docs/contract.md`, "Expiry";
    /// [`Driver::supports_expiry`](docstore::driver::Driver::supports_expiry)). A backend
    /// that does not yet refuses every write giving one; the `expiry` family checks that
    /// refusal there instead.
    pub expiry: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            knows_last_page: true,
            secondary_indexes: false,
            feed_commit_order: true,
            feed_previous: false,
            unique_indexes: true,
            expiry: true,
        }
    }
}

impl Capabilities {
    /// Sets [`Capabilities::knows_last_page`].
    pub fn with_knows_last_page(mut self, knows: bool) -> Self {
        self.knows_last_page = knows;
        self
    }

    /// Sets [`Capabilities::secondary_indexes`].
    pub fn with_secondary_indexes(mut self, serves: bool) -> Self {
        self.secondary_indexes = serves;
        self
    }

    /// Sets [`Capabilities::feed_previous`].
    pub fn with_feed_previous(mut self, gives: bool) -> Self {
        self.feed_previous = gives;
        self
    }

    /// Sets [`Capabilities::unique_indexes`].
    pub fn with_unique_indexes(mut self, enforced: bool) -> Self {
        self.unique_indexes = enforced;
        self
    }

    /// Sets [`Capabilities::expiry`].
    pub fn with_expiry(mut self, kept: bool) -> Self {
        self.expiry = kept;
        self
    }

    /// Sets [`Capabilities::feed_commit_order`].
    pub fn with_feed_commit_order(mut self, ordered: bool) -> Self {
        self.feed_commit_order = ordered;
        self
    }
}

/// Stamps out the whole suite for a harness: one `#[tokio::test]` per case, in one module per
/// family, so a failure names its family and case. The argument is an expression giving a
/// [`Harness`] value; it is evaluated once per test.
#[macro_export]
macro_rules! conformance_suite {
    ($harness:expr) => {
        $crate::__contract_cases!($harness);
        $crate::__front_end_cases!($harness);
    };
}

/// Stamps out, for a harness, the families whose cost an index can change (every family but
/// the front end's own: sites, streams, typed collections, which read no declared index),
/// over [`WithIndexes`]: the answers must stay exactly the same with indexes declared.
///
/// ```ignore
/// mod indexed {
///     use super::*;
///     conformance_tests::index_suite!(MyHarness);
/// }
/// ```
#[macro_export]
macro_rules! index_suite {
    ($harness:expr) => {
        $crate::__contract_cases!($crate::WithIndexes($harness));
    };
}

/// Implementation detail of [`conformance_suite!`]: the contract's families.
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_cases {
    ($harness:expr) => {
        $crate::__stamp_cases! { $harness;
            changes: [
                each_write_kind_gives_one_change,
                refused_writes_give_no_change,
                a_batch_gives_each_of_its_writes,
                each_documents_changes_come_in_version_order,
                a_cursor_resumes_without_gap_or_duplicate,
                watch_wakes_on_a_new_write,
                a_feed_shows_only_its_scope,
                bad_and_expired_cursors_are_errors,
                a_replica_from_the_feed_equals_the_source,
            ],
            feed_consumers: [
                a_snapshot_then_the_changes_give_each_version_once,
                a_snapshot_hands_out_the_documents_then_follows,
                a_feed_cursor_of_one_site_is_refused_on_another,
                an_undecodable_change_carries_its_cursor,
                changes_carry_the_previous_value_where_kept,
            ],
            batches: [
                batch_applies_every_kind,
                empty_batch_does_nothing,
                failing_write_changes_nothing_at_any_position,
                quota_applies_to_batches,
                each_key_at_most_once,
                batch_at_and_past_the_write_limit,
                batch_at_and_past_the_byte_limit,
                counters_move_with_batches,
                batch_update_under_concurrent_writers,
                batch_races_single_writes,
                transfers_keep_the_total,
                get_many_keeps_order_and_missing,
                get_many_refuses_a_repeated_key,
                get_many_reads_many_keys,
            ],
            concurrency: [
                concurrent_updates_lose_nothing,
                racing_update_if_has_one_winner,
                racing_create_has_one_winner,
                counters_exact_under_concurrency,
                concurrent_puts_create_once,
            ],
            conditional: [
                update_if_current_version_applies,
                update_if_stale_version_is_conflict,
                update_if_missing_is_not_found,
                delete_if_current_version_deletes,
                delete_if_stale_version_is_conflict,
                delete_if_missing_is_not_found,
            ],
            counters: [
                counters_follow_every_write,
                failed_writes_do_not_move_counters,
                collections_are_listed_by_name,
            ],
            crud: [
                create_then_get_returns_same_document,
                create_existing_is_already_exists_and_changes_nothing,
                get_missing_is_none,
                put_creates_then_replaces,
                delete_reports_whether_it_deleted,
                recreate_after_delete_starts_over,
                update_merges_or_is_not_found,
            ],
            fidelity: [
                values_round_trip_exactly,
                number_kinds_are_kept,
            ],
            filters: [
                eq_compares_by_value,
                eq_null_matches_only_stored_null,
                ne_includes_missing_fields,
                ranges_on_numbers,
                ranges_on_strings_and_booleans,
                ranges_never_cross_kinds,
                in_matches_any_value,
                exists_includes_null,
                prefix_matches_strings_only,
                contains_matches_array_elements,
                boolean_combinations,
                nested_and_escaped_paths,
                system_fields_filter,
                invalid_queries_are_invalid_argument,
            ],
            indexes: [
                indexed_pages_equal_the_reference,
                every_write_keeps_indexes_exact,
                explain_names_the_index_or_a_scan,
                consistent_queries_see_every_write,
                random_indexed_queries_match_the_reference_evaluator,
            ],
            isolation: [
                sites_are_isolated,
                collections_are_isolated,
            ],
            limits: [
                max_doc_bytes_at_and_above_the_limit,
                default_max_doc_bytes_is_390000,
                quota_refuses_creates_in_a_full_site,
                nesting_depth_is_limited,
            ],
            metadata: [
                version_grows_by_one_per_write,
                timestamps_come_from_the_clock,
                clock_stepping_back_never_moves_updated_at_back,
                actors_are_recorded,
                actors_are_checked_before_any_write,
            ],
            names: [
                key_rules_hold_at_every_boundary,
                store_calls_reject_invalid_names,
                edge_names_round_trip,
            ],
            pagination: [
                page_walks_equal_the_unpaged_result,
                last_page_has_no_next,
                walk_is_exact_under_inserts_and_deletes,
                garbage_cursor_is_invalid,
                foreign_cursor_is_invalid,
                walks_over_null_and_missing_sort_values,
                huge_limit_is_served,
            ],
            patch: [
                rfc7386_appendix_examples,
                patch_removals_and_nesting,
            ],
            properties: [
                random_operations_match_the_model,
                random_queries_match_the_reference_evaluator,
            ],
            restore: [
                restore_writes_the_document_verbatim,
                restore_existing_is_already_exists,
                restore_refuses_bad_documents,
                restore_respects_the_quota,
            ],
            sorting: [
                mixed_kinds_sort_in_the_total_order,
                several_sort_keys,
                default_order_is_by_id,
                sort_by_system_fields,
            ],
        }
    };
}

/// Implementation detail of [`conformance_suite!`]: the front end's families.
#[doc(hidden)]
#[macro_export]
macro_rules! __front_end_cases {
    ($harness:expr) => {
        $crate::__stamp_cases! { $harness;
            sites: [
                a_site_reaches_only_its_own_documents,
                a_batch_stays_in_its_site,
                cursors_are_refused_across_sites_and_collections,
                handles_are_built_valid,
                the_store_lists_the_sites_holding_documents,
            ],
            streams: [
                streams_give_every_match_in_order,
                streams_are_exact_under_writes_between_pages,
                streams_resume_from_their_cursor,
                a_sorted_walk_yields_each_document_once_in_its_latest_version,
                counts_of_a_collection_and_of_a_filter,
            ],
            typed: [
                typed_values_round_trip,
                awkward_values_round_trip_through_a_struct,
                a_document_that_does_not_fit_is_a_decode_error,
                values_that_are_not_objects_are_refused,
                replace_if_stores_the_value_whole,
                filters_take_any_serializable_value,
                modify_under_contention_loses_nothing,
                a_modify_that_changes_nothing_writes_nothing,
            ],
            write_ids: [
                a_repeated_write_answers_as_the_first,
                a_repeat_after_other_writes_applies_nothing,
                a_repeated_delete_spares_a_new_document,
                a_repeated_batch_answers_as_the_first,
                modify_applies_once_under_lost_answers,
                a_client_key_is_a_write_identity,
            ],
            // Its cases declare their own unique indexes, so the index suite would run them
            // unchanged a second time: stamped once, here.
            unique: [
                a_held_value_is_refused_on_every_write_path,
                missing_and_null_values_are_not_constrained,
                values_are_kept_rewritten_and_released,
                values_are_per_site_and_collection_and_equal_by_value,
                batches_judge_claims_as_they_leave_the_documents,
                racing_claims_have_one_holder,
                a_resent_claim_is_not_refused,
            ],
            // Its cases run on a manual clock of their own: stamped once, here.
            expiry: [
                an_expired_document_reads_as_deleted,
                writes_find_an_expired_key_empty,
                writes_keep_set_and_default_the_expiry,
                each_expiry_is_one_change_on_the_feed,
                an_expired_document_frees_its_unique_values,
            ],
            retries: [
                every_write_is_applied_once_under_throttling_and_lost_answers,
                reads_streams_and_feeds_retry_unavailable,
                a_call_retried_after_its_budget_with_the_error_identity_applies_once,
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
