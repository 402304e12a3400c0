//! Per-collection document counters, spread over shards so that no single item is on the write
//! path of a whole collection (docs/contract.md, "Collection counters").
//!
//! A collection's counter is the sum of up to `counter_shards` items under the site's counter
//! partition `pk = "<site>#__collections"`: shard 0 is `sk = <collection>` (the item a table
//! written before shards holds its whole count in), shard `s > 0` is `sk = <collection>#<s>`
//! (`#` is never part of a collection name). Each holds `n` (N) and, with exact counters, `w`
//! (S): the identity of the last create or delete that moved it in the same transaction, which
//! settles a resent delete whose document is gone.
//!
//! A create or delete moves the shard its document id hashes to ([`shard_of`]), so a resend
//! of the same write moves the same shard, and one document's create and delete always meet.
//! A shard may go below zero (a document counted in shard 0 by a table written before shards
//! and deleted from its own shard now): only the sum means anything, so no shard carries a
//! floor and a table written with one counter item needs no migration. Reads clamp a sum below
//! zero (drift) to 0; `recount` reports and repairs it.
//!
//! `count` and `collections` read the site's counter partition in one strongly consistent
//! `Query`: an item is about 60 bytes, so 32 shards of one collection are one read unit.
//!
//! Fast counters move a shard with an atomic `ADD` right after the document write. An `ADD` is
//! not idempotent, so the SDK must never resend one whose answer was lost (it would count
//! twice): the SDK's retries are off for it, and it is sent again only when DynamoDB refused it
//! outright (throttling). When its answer is lost (5xx, timeout, dropped connection) it is not
//! resent and a warning is logged: the counter is then exact if the lost attempt was applied
//! and one short if not — the drift the contract accepts for fast counters.

use crate::errors::{Failure, classify};
use crate::item::{COUNT, COUNTER_WRITE_ID, PK, SK, num, number, shard_of, string, text};
use crate::layout::Layout;
use crate::store::DynamoStore;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::types::{AttributeValue, Update};
use docstore::{Key, Result, WriteId};
use std::collections::BTreeMap;

/// How often a throttled counter write is tried in all.
const MAX_TRIES: u32 = 8;

/// The most shards a collection counter may have (`database.dynamodb.counter_shards`): a
/// `recount` repairs all of a collection's shards in one `TransactWriteItems`, which takes at
/// most 100 items.
pub const MAX_COUNTER_SHARDS: u32 = 100;

/// One counter shard's item key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CounterShard {
    /// The site.
    pub site: String,
    /// The collection.
    pub collection: String,
    /// The shard number (0: the item `sk = <collection>`).
    pub shard: u32,
}

impl CounterShard {
    /// The partition key of the shard in a table of `layout`.
    pub fn partition_key(&self, layout: Layout) -> String {
        layout.counter_pk(&self.site, self.shard)
    }

    /// The sort key: the collection for shard 0, `<collection>#<shard>` for the others.
    pub fn sort_key(&self) -> String {
        match self.shard {
            0 => self.collection.clone(),
            shard => format!("{}#{shard}", self.collection),
        }
    }
}

/// The collection a counter item's sort key counts for.
pub(crate) fn counted_collection(sort_key: &str) -> &str {
    sort_key.split_once('#').map_or(sort_key, |(name, _)| name)
}

/// The shard number of a counter item's sort key (0 for the item `sk = <collection>`).
pub(crate) fn shard_number(sort_key: &str) -> u32 {
    sort_key
        .split_once('#')
        .and_then(|(_, shard)| shard.parse().ok())
        .unwrap_or(0)
}

/// The counter update of `shard`: `ADD n :delta`, and the call's identity in exact mode.
pub(crate) fn counter_update(
    table: &str,
    layout: Layout,
    shard: &CounterShard,
    delta: i64,
    w: Option<&WriteId>,
) -> Result<Update> {
    let update = Update::builder()
        .table_name(table)
        .key(PK, text(shard.partition_key(layout)))
        .key(SK, text(shard.sort_key()))
        .expression_attribute_names("#n", COUNT)
        .expression_attribute_values(":delta", num(delta));
    let update = match w {
        Some(w) => update
            .update_expression("ADD #n :delta SET #w = :w")
            .expression_attribute_names("#w", COUNTER_WRITE_ID)
            .expression_attribute_values(":w", text(w.as_str())),
        None => update.update_expression("ADD #n :delta"),
    };
    update.build().map_err(crate::send::build_error)
}

impl DynamoStore {
    /// The counter shard the creates and deletes of the document at `key` move.
    pub(crate) fn counter_shard(&self, key: &Key) -> CounterShard {
        CounterShard {
            site: key.site().to_owned(),
            collection: key.collection().to_owned(),
            shard: shard_of(key.id(), self.counter_shards),
        }
    }

    /// Adds `delta` (+1 or -1) to the counter shard of the document at `key`. Never fails: a
    /// counter that could not be moved is logged (the documented drift of fast counters).
    pub(crate) async fn bump_counter(&self, key: &Key, delta: i64) {
        let shard = self.counter_shard(key);
        // The document was just written, so the layout is known.
        let Ok(layout) = self.layout().await else {
            return;
        };
        let mut backoff = self.backoff();
        for _ in 0..MAX_TRIES {
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(PK, text(shard.partition_key(layout)))
                .key(SK, text(shard.sort_key()))
                .update_expression("ADD #n :delta")
                .expression_attribute_names("#n", COUNT)
                .expression_attribute_values(":delta", num(delta))
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
            match classify(&err) {
                Failure::NotApplied => {
                    if !backoff.wait().await {
                        break;
                    }
                }
                Failure::Unknown | Failure::Permanent => {
                    tracing::warn!(
                        %key,
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
            %key,
            delta,
            "collection counter throttled {MAX_TRIES} times: the count may be off by one"
        );
    }

    /// The counters of `site` whose shards sum to more than 0, by collection name, less the
    /// documents whose expiry is due at the store clock's now and that no sweep removed yet
    /// (their markers, read alongside: [`crate::expiring`]).
    pub(crate) async fn read_counters(&self, site: &str) -> Result<Vec<(String, u64)>> {
        let now = self.options.clock.now();
        let (sums, due) =
            futures_util::future::try_join(self.counter_sums(site), self.due_counts(site, now))
                .await?;
        Ok(sums
            .into_iter()
            .map(|(collection, sum)| {
                let due = due.get(&collection).copied().unwrap_or(0);
                (collection, sum.saturating_sub(due))
            })
            .filter(|(_, sum)| *sum > 0)
            .map(|(collection, sum)| (collection, sum as u64))
            .collect())
    }

    /// The sum of every collection's counter shards in `site` (below zero after drift), read
    /// with one strongly consistent `Query` per counter partition, all at once (more pages
    /// only past 1 MB of counters in a partition).
    pub(crate) async fn counter_sums(&self, site: &str) -> Result<BTreeMap<String, i64>> {
        let pks = self.layout().await?.counter_pks(site);
        let reads = pks.iter().map(|pk| self.counter_partition(pk));
        let mut sums = BTreeMap::new();
        for partition in futures_util::future::try_join_all(reads).await? {
            for (collection, n) in partition {
                let sum: &mut i64 = sums.entry(collection).or_default();
                *sum = sum.saturating_add(n);
            }
        }
        Ok(sums)
    }

    /// The counter shards of one counter partition: collection and count of each.
    async fn counter_partition(&self, pk: &str) -> Result<Vec<(String, i64)>> {
        let mut shards = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", text(pk))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.error("Query", e))?;
            for item in page.items() {
                let collection = counted_collection(string(item, SK)?);
                shards.push((collection.to_owned(), number(item, COUNT)?));
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(shards),
            }
        }
    }

    /// The identity of the last create or delete that moved `shard` in exact mode.
    pub(crate) async fn counter_write_id(&self, shard: &CounterShard) -> Result<Option<String>> {
        let key = std::collections::HashMap::from([
            (
                PK.to_owned(),
                text(shard.partition_key(self.layout().await?)),
            ),
            (SK.to_owned(), text(shard.sort_key())),
        ]);
        let item = self.consistent_get(key).await?;
        Ok(match item.as_ref().and_then(|i| i.get(COUNTER_WRITE_ID)) {
            Some(AttributeValue::S(w)) => Some(w.clone()),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_zero_is_the_item_of_a_table_written_before_shards() {
        let shard = |shard| CounterShard {
            site: "acme".into(),
            collection: "tickets".into(),
            shard,
        };
        assert_eq!(shard(0).sort_key(), "tickets");
        assert_eq!(shard(7).sort_key(), "tickets#7");
        assert_eq!(counted_collection("tickets"), "tickets");
        assert_eq!(counted_collection("tickets#7"), "tickets");
        assert_eq!(shard_number("tickets#7"), 7);
        assert_eq!(shard_number("tickets"), 0);
        assert_eq!(shard_of("anything", 1), 0);
    }

    /// The layout's hash: fixed values (FNV-1a), so a change to it fails here before it
    /// moves counts of existing tables to other shards.
    #[test]
    fn documents_spread_over_the_shards_by_a_fixed_hash() {
        assert_eq!(shard_of("", 32), (0xcbf2_9ce4_8422_2325_u64 % 32) as u32);
        assert_eq!(
            shard_of("a", 1 << 16),
            (0xaf63_dc4c_8601_ec8c_u64 % (1 << 16)) as u32
        );
        let mut used = [0u32; 32];
        for n in 0..3200 {
            used[shard_of(&format!("order-{n}"), 32) as usize] += 1;
        }
        assert!(used.iter().all(|&n| (50..=150).contains(&n)), "{used:?}");
    }
}
