//! Per-collection document counters: `pk = "<site>#__collections"`, `sk = <collection>`,
//! `n` (N), moved with an atomic `ADD` right after each document write that created or
//! deleted a document.
//!
//! A counter `ADD` is not idempotent, so the SDK must never resend one whose answer was lost
//! (it would count twice): the SDK's retries are off for it, and it is sent again only when
//! DynamoDB refused it outright (throttling). When its answer is lost (5xx, timeout, dropped
//! connection) it is not resent and a warning is logged: the counter is then exact if the
//! lost attempt was applied and one short if not — the same drift the contract accepts for fast counters after a
//! crash between the document write and the counter write.

use crate::backoff::Backoff;
use crate::errors::{Failure, classify};
use crate::item::{COUNT, PK, SK, counters_pk, num, number, string, text};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use docstore::Result;

/// How often a throttled counter write is tried in all.
const MAX_TRIES: u32 = 8;

impl DynamoStore {
    /// Adds `delta` (+1 or -1) to the counter of `collection` in `site`. Never fails: a counter
    /// that could not be moved is logged (the documented drift of fast counters).
    pub(crate) async fn bump_counter(&self, site: &str, collection: &str, delta: i64) {
        let mut backoff = Backoff::new();
        for _ in 0..MAX_TRIES {
            let mut request = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(PK, text(counters_pk(site)))
                .key(SK, text(collection))
                .update_expression("ADD #n :delta")
                .expression_attribute_names("#n", COUNT)
                .expression_attribute_values(":delta", num(delta));
            if delta < 0 {
                // Never below zero, even after drift.
                request = request
                    .condition_expression("#n >= :one")
                    .expression_attribute_values(":one", num(1));
            }
            let result = request
                .customize()
                .config_override(
                    aws_sdk_dynamodb::config::Builder::default()
                        .retry_config(RetryConfig::disabled()),
                )
                .send()
                .await;
            let err = match result {
                Ok(_) => return,
                Err(err) => err,
            };
            if err
                .as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception())
            {
                return; // already at zero
            }
            match classify(&err) {
                Failure::NotApplied => backoff.wait().await,
                Failure::Unknown | Failure::Permanent => {
                    tracing::warn!(
                        site,
                        collection,
                        delta,
                        error = %aws_sdk_dynamodb::error::DisplayErrorContext(&err),
                        "collection counter not moved (its answer was lost or it failed): \
                         the count may be off by one"
                    );
                    return;
                }
            }
        }
        tracing::warn!(
            site,
            collection,
            delta,
            "collection counter throttled {MAX_TRIES} times: the count may be off by one"
        );
    }

    /// The counters of `site` with `n > 0`, by collection name.
    pub(crate) async fn read_counters(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let mut counters = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", text(counters_pk(site)))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.error("Query", e))?;
            for item in page.items() {
                let n: i64 = number(item, COUNT)?;
                if n > 0 {
                    counters.push((string(item, SK)?.to_owned(), n as u64));
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        counters.sort();
        Ok(counters)
    }
}
