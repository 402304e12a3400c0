//! Expiring documents (`docs/contract.md`, "Expiry") on DynamoDB: the items that keep
//! `count` exact at once and let the sweep find what is due.
//!
//! A document with an expiry carries `expires_at` (N, unix nanoseconds) and the table's time
//! to live `expires` ([`crate::item::TTL`]), and has one marker item, written in the
//! document's own `TransactWriteItems` (like the unique guards, [`crate::guards`]):
//!
//! | attribute | value |
//! |---|---|
//! | `pk` | `<site>#__expiring`, then `#<p>` for the partition `p > 0` of the id |
//! | `sk` | `<expires_at, 20 digits>#<collection>#<id>` (an expiry before 1970 as 0) |
//!
//! A write that gives its document an expiry puts the marker; one that removes or changes it
//! deletes the old marker (and puts the new one); a delete deletes it. Markers sort by
//! expiry, so the due ones (`sk` below the next nanosecond's digits) are one key range of
//! each partition: `count` and `collections` subtract, per collection, the markers due at
//! the store clock's now, read with one strongly consistent `Query` per partition alongside
//! the counter shards. The partition name starts with `__`, so markers are none of a site's
//! collections: the feed, `sites`, counts and `recount`'s document count pass over them.
//!
//! The sweep ([`DynamoStore::sweep_expired_documents`]) finds the sites with markers in a
//! registry (`pk = "__docstore#expiring"`, `sk = <site>`, put once per site and process
//! before the first expiring write, listed again at most every [`SITES_RELISTED_AFTER`]), reads
//! their due markers (at most its limit) and removes each expired document through the
//! delete path: one `TransactWriteItems` deleting the document conditioned on the revision
//! read (so on still being expired: an expiry changes only with the version), the counter
//! shard's decrement, the marker's delete, the document's unique guards and an expiry stamp
//! ([`crate::stamps`]) that the feed shows as one `Expired` change at the expiry instant with
//! an empty actor. A write that reads an expired document first removes it the same way,
//! then proceeds on the empty key.
//!
//! DynamoDB's time to live is a backstop: it deletes a document item one day
//! ([`TTL_GRACE_SECS`](crate::item::TTL_GRACE_SECS)) after its expiry, when no sweep removed
//! it. That delete moves no counter and leaves the marker: `count` stays exact (the due
//! marker still subtracts it), `recount` reports the counter one above the documents, and the
//! next sweep settles it — the marker of a document that is gone is deleted with the counter's
//! decrement in one transaction conditioned on the document still being absent (`recount`
//! with repair instead sets the counter and deletes such markers).

use crate::item::{Item, PK, SK, text};
use crate::layout::Layout;
use crate::send::{Companion, build_error};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::types::Delete;
use docstore::{Document, Key, Result};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What follows the site in the partition keys of its expiry markers.
pub(crate) const EXPIRING: &str = "__expiring";
/// The partition key of the registry of sites with markers.
const REGISTRY_PK: &str = "__docstore#expiring";
/// How long a store's sweep goes on with the sites it listed before it lists the registry
/// again (sites this store registered itself it knows at once).
pub(crate) const SITES_RELISTED_AFTER: Duration = Duration::from_secs(60);

/// The sort key of the marker of a document of `collection` with id `id` expiring at
/// `expires_at`.
fn marker_sk(expires_at: i64, collection: &str, id: &str) -> String {
    format!("{:020}#{collection}#{id}", expires_at.max(0))
}

/// The sort keys of markers due at `now` are below this one.
fn due_bound(now: i64) -> String {
    format!("{:020}", now.saturating_add(1).max(0))
}

/// The key of the marker of the document at `key` expiring at `expires_at`.
pub(crate) fn marker_key(layout: Layout, key: &Key, expires_at: i64) -> Item {
    HashMap::from([
        (PK.to_owned(), text(layout.site_items_pk(EXPIRING, key))),
        (
            SK.to_owned(),
            text(marker_sk(expires_at, key.collection(), key.id())),
        ),
    ])
}

/// The marker actions of a write at `key` from `before` to `after`: none when the expiry
/// stays, otherwise the old marker's delete and the new one's put.
pub(crate) fn marker_changes(
    layout: Layout,
    key: &Key,
    before: Option<&Document>,
    after: Option<&Document>,
) -> Vec<Companion> {
    let (was, will) = (
        before.and_then(|doc| doc.expires_at),
        after.and_then(|doc| doc.expires_at),
    );
    if was == will {
        return Vec::new();
    }
    let gone = was.map(|at| Companion::Delete(marker_key(layout, key, at)));
    let new = will.map(|at| Companion::Put(marker_key(layout, key, at)));
    gone.into_iter().chain(new).collect()
}

/// One marker as read: the document it stands for and when that expires.
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    pub(crate) key: Key,
    pub(crate) expires_at: i64,
    /// The marker item's key.
    pub(crate) item_key: Item,
}

impl Marker {
    /// The delete of this marker item in `table`, conditioned on its still being there (the
    /// sweep's and `recount`'s transactions: a marker another remover took first cancels it).
    pub(crate) fn delete(&self, table: &str) -> Result<Delete> {
        Delete::builder()
            .table_name(table)
            .set_key(Some(self.item_key.clone()))
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .map_err(build_error)
    }
}

/// The marker an item of `site`'s marker partitions holds (`None`: not one docstore wrote).
fn parse_marker(site: &str, item: &Item) -> Option<Marker> {
    let sk = crate::item::string(item, SK).ok()?;
    let (at, rest) = sk.split_once('#')?;
    let (collection, id) = rest.split_once('#')?;
    let key = Key::new(site, collection, id).ok()?;
    let item_key = HashMap::from([
        (PK.to_owned(), item.get(PK)?.clone()),
        (SK.to_owned(), text(sk)),
    ]);
    Some(Marker {
        key,
        expires_at: at.parse().ok()?,
        item_key,
    })
}

/// The site whose marker partition `pk` is (`<site>#__expiring`, then `#<p>`).
pub(crate) fn marker_site(pk: &str) -> Option<&str> {
    let (site, rest) = pk.split_once('#')?;
    let name = rest.split_once('#').map_or(rest, |(name, _)| name);
    (name == EXPIRING).then_some(site)
}

/// The marker `item` holds when it is one of `site`'s, due at `now`.
pub(crate) fn due_marker(site: &str, item: &Item, now: i64) -> Option<Marker> {
    parse_marker(site, item).filter(|marker| marker.expires_at <= now)
}

/// The sites this store knows to have markers, and when it last listed the registry.
#[derive(Debug, Default)]
pub(crate) struct ExpiringSites {
    inner: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    sites: BTreeSet<String>,
    registered: BTreeSet<String>,
    listed_at: Option<Instant>,
}

impl DynamoStore {
    /// The marker actions of a write at `key` from `before` to `after`, once `key`'s site is
    /// in the registry when the write puts a marker.
    pub(crate) async fn markers(
        &self,
        layout: Layout,
        key: &Key,
        before: Option<&Document>,
        after: Option<&Document>,
    ) -> Result<Vec<Companion>> {
        let changes = marker_changes(layout, key, before, after);
        if changes.iter().any(|c| matches!(c, Companion::Put(_))) {
            self.register_expiring_site(key.site()).await?;
        }
        Ok(changes)
    }

    /// Puts `site` in the registry the sweep lists (once per store: an idempotent PutItem
    /// before the site's first marker, so a marker never exists unregistered).
    pub(crate) async fn register_expiring_site(&self, site: &str) -> Result<()> {
        if self.lock_sites().registered.contains(site) {
            return Ok(());
        }
        self.client
            .put_item()
            .table_name(&self.table)
            .item(PK, text(REGISTRY_PK))
            .item(SK, text(site))
            .send()
            .await
            .map_err(|e| self.error("PutItem", e))?;
        let mut known = self.lock_sites();
        known.registered.insert(site.to_owned());
        known.sites.insert(site.to_owned());
        Ok(())
    }

    fn lock_sites(&self) -> std::sync::MutexGuard<'_, Known> {
        self.expiring_sites
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The sites with markers: the registry as listed at most [`SITES_RELISTED_AFTER`] ago,
    /// and those this store registered since.
    pub(crate) async fn expiring_sites(&self) -> Result<Vec<String>> {
        let fresh = self
            .lock_sites()
            .listed_at
            .is_some_and(|at| at.elapsed() < SITES_RELISTED_AFTER);
        if !fresh {
            let listed = self.query_partition(REGISTRY_PK, None, None).await?;
            let mut known = self.lock_sites();
            for item in &listed {
                if let Ok(site) = crate::item::string(item, SK) {
                    known.sites.insert(site.to_owned());
                }
            }
            known.listed_at = Some(Instant::now());
        }
        Ok(self.lock_sites().sites.iter().cloned().collect())
    }

    /// The markers of `site` due at `now`, soonest first within each partition; at most
    /// `limit` (`None`: all).
    pub(crate) async fn due_markers(
        &self,
        site: &str,
        now: i64,
        limit: Option<usize>,
    ) -> Result<Vec<Marker>> {
        let layout = self.layout().await?;
        let base = format!("{site}#{EXPIRING}");
        let bound = due_bound(now);
        let mut due = Vec::new();
        for partition in 0..layout.partitions {
            let pk = match partition {
                0 => base.clone(),
                p => format!("{base}#{p}"),
            };
            let wanted = limit.map(|limit| limit - due.len());
            if wanted == Some(0) {
                break;
            }
            let items = self.query_partition(&pk, Some(&bound), wanted).await?;
            due.extend(items.iter().filter_map(|item| parse_marker(site, item)));
        }
        Ok(due)
    }

    /// How many documents of each collection of `site` are due at `now` by their markers
    /// (one Query per partition, all at once): what `count` takes off the counters.
    pub(crate) async fn due_counts(&self, site: &str, now: i64) -> Result<HashMap<String, i64>> {
        let layout = self.layout().await?;
        let base = format!("{site}#{EXPIRING}");
        let bound = due_bound(now);
        let pks: Vec<String> = (0..layout.partitions)
            .map(|p| match p {
                0 => base.clone(),
                p => format!("{base}#{p}"),
            })
            .collect();
        let reads = pks
            .iter()
            .map(|pk| self.query_partition(pk, Some(&bound), None));
        let mut counts: HashMap<String, i64> = HashMap::new();
        for items in futures_util::future::try_join_all(reads).await? {
            for marker in items.iter().filter_map(|item| parse_marker(site, item)) {
                *counts
                    .entry(marker.key.collection().to_owned())
                    .or_default() += 1;
            }
        }
        Ok(counts)
    }

    /// The items of partition `pk` (with `sk` below `below`, when given), in key order, at
    /// most `limit`: strongly consistent Queries, page after page.
    async fn query_partition(
        &self,
        pk: &str,
        below: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", text(pk))
                .set_exclusive_start_key(start);
            request = match below {
                Some(bound) => request
                    .key_condition_expression("#pk = :pk AND #sk < :below")
                    .expression_attribute_names("#sk", SK)
                    .expression_attribute_values(":below", text(bound)),
                None => request.key_condition_expression("#pk = :pk"),
            };
            if let Some(limit) = limit {
                let left = limit.saturating_sub(items.len()).clamp(1, 1_000);
                request = request.limit(left as i32);
            }
            let page = request.send().await.map_err(|e| self.error("Query", e))?;
            items.extend(page.items().iter().cloned());
            let full = limit.is_some_and(|limit| items.len() >= limit);
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() && !full => start = Some(key),
                _ => return Ok(items),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(expires_at: Option<i64>) -> Document {
        let mut doc = Document::first("i", Default::default(), "", 0);
        doc.expires_at = expires_at;
        doc
    }

    #[test]
    fn markers_follow_the_expiry() {
        let key = Key::new("s", "c", "a#b").unwrap();
        let layout = Layout::SINGLE;
        let kinds = |changes: Vec<Companion>| -> Vec<(bool, String)> {
            changes
                .into_iter()
                .map(|c| match c {
                    Companion::Put(item) => (true, crate::item::string(&item, SK).unwrap().into()),
                    Companion::Delete(item) => {
                        (false, crate::item::string(&item, SK).unwrap().into())
                    }
                    other => panic!("markers are put or deleted: {other:?}"),
                })
                .collect()
        };
        let (none, five, nine) = (doc(None), doc(Some(5)), doc(Some(9)));
        assert!(marker_changes(layout, &key, Some(&five), Some(&five)).is_empty());
        assert!(marker_changes(layout, &key, None, Some(&none)).is_empty());
        assert_eq!(
            kinds(marker_changes(layout, &key, Some(&five), Some(&nine))),
            [
                (false, "00000000000000000005#c#a#b".to_owned()),
                (true, "00000000000000000009#c#a#b".to_owned())
            ]
        );
        assert_eq!(
            kinds(marker_changes(layout, &key, Some(&nine), None)),
            [(false, "00000000000000000009#c#a#b".to_owned())]
        );
        let item = marker_key(layout, &key, 9);
        let marker = parse_marker("s", &item).unwrap();
        assert_eq!((marker.key, marker.expires_at), (key, 9));
        let pk = crate::item::string(&item, PK).unwrap();
        assert_eq!(marker_site(pk), Some("s"));
        assert_eq!(marker_site("s#__expiring#3"), Some("s"));
        assert_eq!(marker_site("s#c"), None);
        assert!(due_marker("s", &item, 9).is_some() && due_marker("s", &item, 8).is_none());
    }

    /// A marker is due from its expiry's nanosecond on, whatever the id after it.
    #[test]
    fn the_due_range_ends_after_now() {
        let sk = marker_sk(1_700_000_000_000_000_000, "c", "zzz");
        assert!(sk.as_str() >= due_bound(1_699_999_999_999_999_999).as_str());
        assert!(sk.as_str() < due_bound(1_700_000_000_000_000_000).as_str());
        assert!(marker_sk(-5, "c", "i").as_str() < due_bound(0).as_str());
        assert_eq!(due_bound(i64::MAX).len(), 20);
    }
}
