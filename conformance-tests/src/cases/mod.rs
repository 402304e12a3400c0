//! The cases, one module per family. Each is an `async fn(&dyn Harness)` that panics on a
//! broken rule.
//!
//! Error precedence, where one call breaks several rules (the model in [`properties`] holds
//! every backend to it): invalid names and queries first, then `TooLarge` for `create` and
//! `put`; `NotFound` / `Conflict` before `TooLarge` for `update` and `update_if` (the size
//! is that of the merged result); `AlreadyExists` before `QuotaExceeded`.

pub mod batches;
pub mod changes;
pub mod concurrency;
pub mod conditional;
pub mod counters;
pub mod crud;
pub mod expiry;
pub mod feed_consumers;
pub mod fidelity;
pub mod filters;
pub mod indexes;
pub mod isolation;
pub mod limits;
pub mod metadata;
pub mod names;
pub mod pagination;
pub mod patch;
pub mod properties;
pub mod restore;
pub mod retries;
pub mod sites;
pub mod sorting;
pub mod streams;
pub mod typed;
pub mod unique;
pub mod write_ids;
