//! How a table spreads each collection over partition keys (`docs/contract.md`, "Partitions
//! on DynamoDB").
//!
//! DynamoDB gives one partition key value at most 1 000 write units per second, however large
//! the table. A ~1 KB document written in a transaction takes 4 of them, so a collection kept
//! under one partition key takes about 250 creates per second. A table therefore spreads each
//! collection over `partitions` partition keys, by the document id's shard
//! ([`shard_of`](crate::item::shard_of)) `p` in `0..partitions`:
//!
//! | items | partition key |
//! |---|---|
//! | documents | `<site>#<collection>`, then `#<p>` for `p > 0` |
//! | counter shard `s` of a collection | `<site>#__collections`, then `#<p>` for `p = s mod partitions > 0` |
//! | delete stamps ([`crate::stamps`]) | `<site>#__removed`, then `#<p>` for `p > 0` |
//! | delete records ([`crate::deleted`]) | `<site>#__deleted`, then `#<p>` for `p > 0` |
//!
//! Partition 0 carries no suffix: it is the key a table written before partitions holds
//! everything under, so such a table is the layout with one partition. Names hold no `#`, so a
//! suffix never meets a name.
//!
//! The count is the table's, not a store's: the item `pk = "__docstore#layout"`, `sk =
//! "table"` records it (`partitions`, N). The first store to use a table without that record
//! records its own `collection_partitions` when the table holds no item yet; a table that
//! holds items and no record was written before partitions and keeps one partition. A store
//! reads the record once (one consistent `GetItem`; one `Scan` of one item more when there is
//! none).

use crate::item::{PK, SK, num, number, shard_of, text};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use docstore::{Key, Result};
use std::collections::HashMap;

/// The partition key of the layout record.
const LAYOUT_PK: &str = "__docstore#layout";
/// The sort key of the layout record.
const LAYOUT_SK: &str = "table";
/// The record's partition count (N).
const PARTITIONS: &str = "partitions";

/// What follows the site in the partition keys of its collection counters.
pub(crate) const COUNTERS: &str = "__collections";
/// What follows the site in the partition keys of its delete stamps.
pub(crate) const REMOVED: &str = "__removed";
/// What follows the site in the partition keys of its delete records.
pub(crate) const DELETED: &str = "__deleted";

/// The most a partition suffix adds to a key: `#99` (at most 100 partitions).
pub(crate) const MAX_SUFFIX_BYTES: usize = 3;

/// How many partition keys each collection of a table is spread over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// At least 1.
    pub partitions: u32,
}

impl Layout {
    /// The layout of a table written before partitions: everything under one key.
    pub const SINGLE: Layout = Layout { partitions: 1 };

    /// The partition a document id belongs to.
    pub fn partition_of(self, id: &str) -> u32 {
        shard_of(id, self.partitions)
    }

    /// The partition key of the document at `key`.
    pub fn document_pk(self, key: &Key) -> String {
        suffixed(
            format!("{}#{}", key.site(), key.collection()),
            self.partition_of(key.id()),
        )
    }

    /// The partition keys of every document of `collection`, partition 0 first.
    pub fn document_pks(self, site: &str, collection: &str) -> Vec<String> {
        self.every(&format!("{site}#{collection}"))
    }

    /// The partition key of counter shard `shard` of a collection of `site`.
    pub fn counter_pk(self, site: &str, shard: u32) -> String {
        suffixed(format!("{site}#{COUNTERS}"), shard % self.partitions)
    }

    /// The partition keys of every counter shard of `site`.
    pub fn counter_pks(self, site: &str) -> Vec<String> {
        self.every(&format!("{site}#{COUNTERS}"))
    }

    /// The partition key of the site-wide items (`kind`: [`REMOVED`], [`DELETED`]) that
    /// concern the document at `key`.
    pub fn site_items_pk(self, kind: &str, key: &Key) -> String {
        suffixed(
            format!("{}#{kind}", key.site()),
            self.partition_of(key.id()),
        )
    }

    fn every(self, base: &str) -> Vec<String> {
        (0..self.partitions)
            .map(|partition| suffixed(base.to_owned(), partition))
            .collect()
    }
}

fn suffixed(base: String, partition: u32) -> String {
    match partition {
        0 => base,
        partition => format!("{base}#{partition}"),
    }
}

/// What a partition key of the table holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Partition<'a> {
    /// Documents of a collection.
    Documents {
        /// The site.
        site: &'a str,
        /// The collection.
        collection: &'a str,
    },
    /// Collection counter shards of a site.
    Counters {
        /// The site.
        site: &'a str,
    },
    /// The backend's own items (delete stamps and records, index and layout records) or an
    /// item docstore did not write.
    Other,
}

/// What `pk` holds: `<site>#<name>` with an optional `#<partition>`.
pub(crate) fn parse_pk(pk: &str) -> Partition<'_> {
    let Some((site, rest)) = pk.split_once('#') else {
        return Partition::Other;
    };
    let name = match rest.split_once('#') {
        None => rest,
        Some((name, partition)) if partition.parse::<u32>().is_ok() => name,
        Some(_) => return Partition::Other,
    };
    if site.starts_with("__") || site.is_empty() || name.is_empty() {
        Partition::Other
    } else if name == COUNTERS {
        Partition::Counters { site }
    } else if name.starts_with("__") {
        Partition::Other
    } else {
        Partition::Documents {
            site,
            collection: name,
        }
    }
}

impl DynamoStore {
    /// The table's layout: read once, recorded by this store if the table is new.
    pub(crate) async fn layout(&self) -> Result<Layout> {
        self.layout
            .get_or_try_init(|| self.settle_layout())
            .await
            .copied()
    }

    /// Records this store's layout in a table it has just created (nothing else can be in
    /// it yet): no read first.
    pub(crate) async fn record_new_layout(&self) -> Result<Layout> {
        self.layout
            .get_or_try_init(|| self.record_layout())
            .await
            .copied()
    }

    /// Reads the layout record; records this store's when there is none and the table is
    /// empty; [`Layout::SINGLE`] otherwise.
    async fn settle_layout(&self) -> Result<Layout> {
        if let Some(layout) = self.read_layout().await? {
            return Ok(layout);
        }
        if !self.table_is_empty().await? {
            return Ok(Layout::SINGLE);
        }
        self.record_layout().await
    }

    /// Writes this store's layout record unless the table has one; the table's layout.
    async fn record_layout(&self) -> Result<Layout> {
        let chosen = Layout {
            partitions: self.collection_partitions,
        };
        let recorded = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(PK, text(LAYOUT_PK))
            .item(SK, text(LAYOUT_SK))
            .item(PARTITIONS, num(chosen.partitions))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .send()
            .await;
        match recorded {
            Ok(_) => Ok(chosen),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(PutItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                // Another store recorded first: its layout is the table's.
                Ok(self.read_layout().await?.unwrap_or(chosen))
            }
            Err(err) => Err(self.error("PutItem", err)),
        }
    }

    /// The recorded layout, if any.
    async fn read_layout(&self) -> Result<Option<Layout>> {
        let key = HashMap::from([
            (PK.to_owned(), text(LAYOUT_PK)),
            (SK.to_owned(), text(LAYOUT_SK)),
        ]);
        let Some(item) = self.consistent_get(key).await? else {
            return Ok(None);
        };
        let partitions: u32 = number(&item, PARTITIONS)?;
        Ok(Some(Layout {
            partitions: partitions.max(1),
        }))
    }

    /// Whether the table holds no item at all.
    async fn table_is_empty(&self) -> Result<bool> {
        let output = self
            .client
            .scan()
            .table_name(&self.table)
            .limit(1)
            .send()
            .await
            .map_err(|e| self.error("Scan", e))?;
        Ok(output.items().is_empty() && output.last_evaluated_key.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_zero_is_the_key_of_a_table_written_before_partitions() {
        let key = Key::new("acme", "orders", "o-1").unwrap();
        assert_eq!(Layout::SINGLE.document_pk(&key), "acme#orders");
        assert_eq!(Layout::SINGLE.counter_pk("acme", 7), "acme#__collections");
        let spread = Layout { partitions: 8 };
        let partition = spread.partition_of("o-1");
        let expected = match partition {
            0 => "acme#orders".to_owned(),
            p => format!("acme#orders#{p}"),
        };
        assert_eq!(spread.document_pk(&key), expected);
        assert_eq!(spread.counter_pk("acme", 8), "acme#__collections");
        assert_eq!(spread.counter_pk("acme", 11), "acme#__collections#3");
        assert_eq!(
            spread.document_pks("acme", "orders")[..2],
            ["acme#orders".to_owned(), "acme#orders#1".to_owned()]
        );
        assert_eq!(
            spread.site_items_pk(REMOVED, &key),
            expected.replace("orders", "__removed")
        );
    }

    #[test]
    fn partition_keys_read_back_as_what_they_hold() {
        let documents = |site, collection| Partition::Documents { site, collection };
        assert_eq!(parse_pk("acme#orders"), documents("acme", "orders"));
        assert_eq!(parse_pk("acme#orders#7"), documents("acme", "orders"));
        assert_eq!(
            parse_pk("acme#__collections#3"),
            Partition::Counters { site: "acme" }
        );
        assert_eq!(
            parse_pk("acme#__collections"),
            Partition::Counters { site: "acme" }
        );
        for other in [
            "acme#__removed#2",
            "acme#__deleted",
            "__docstore#indexes",
            "__docstore#layout",
            "acme#orders#x",
            "acme#orders#1#2",
            "acme",
            "#orders",
            "acme#",
        ] {
            assert_eq!(parse_pk(other), Partition::Other, "{other}");
        }
    }
}
