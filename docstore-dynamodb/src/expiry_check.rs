//! Checking a site's expiry markers ([`crate::expiring`]) against its documents, part of
//! `recount` (`docstore fsck`): from the same Scan, a marker whose document is gone or
//! expires at another time (the document was removed or rewritten outside docstore — DynamoDB's
//! time to live removes a document a sweep missed, and leaves its marker) is an orphan. With
//! repair each orphan is deleted, conditioned on its document still not standing behind it
//! (and on the marker still being there, so a sweep settling it at the same time does not also
//! move the counter), before the counters are set: `count` subtracts due markers, so an
//! orphan left beside a repaired counter would take one document too many off.

use crate::expiring::{Marker, due_marker, marker_site};
use crate::item::{EXPIRES_AT, Item, PK, key_of, num, number, string};
use crate::layout::{Partition, parse_pk};
use crate::send::build_error;
use crate::store::DynamoStore;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};
use docstore::{Key, RecountMode, Result};
use std::collections::HashSet;

/// What one Scan saw of a site's expiries.
#[derive(Debug, Default)]
pub(crate) struct ExpiryScan {
    /// Every document with an expiry: collection, id and expiry as its marker holds it.
    expiring: HashSet<(String, String, i64)>,
    markers: Vec<Marker>,
}

impl ExpiryScan {
    /// Takes in one scanned item of `site` (documents need `expires_at` projected).
    pub(crate) fn add(&mut self, site: &str, item: &Item) -> Result<()> {
        let pk = string(item, PK)?;
        match parse_pk(pk) {
            Partition::Documents {
                site: of,
                collection,
            } if of == site => {
                if let Ok(at) = number::<i64>(item, EXPIRES_AT) {
                    let id = string(item, crate::item::SK)?.to_owned();
                    self.expiring.insert((collection.to_owned(), id, at.max(0)));
                }
            }
            Partition::Other if marker_site(pk) == Some(site) => {
                if let Some(marker) = due_marker(site, item, i64::MAX) {
                    self.markers.push(marker);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The markers no document stands behind.
    fn orphans(&self) -> impl Iterator<Item = &Marker> {
        self.markers.iter().filter(|marker| {
            let key = &marker.key;
            let seen = (
                key.collection().to_owned(),
                key.id().to_owned(),
                marker.expires_at,
            );
            !self.expiring.contains(&seen)
        })
    }
}

impl DynamoStore {
    /// Logs the orphan markers of `scan` and, with repair, deletes them.
    pub(crate) async fn settle_markers(
        &self,
        site: &str,
        scan: &ExpiryScan,
        mode: RecountMode,
    ) -> Result<()> {
        for marker in scan.orphans() {
            tracing::warn!(
                site,
                key = %marker.key,
                expires_at = marker.expires_at,
                repair = mode == RecountMode::Repair,
                "recount: an expiry marker without its document (removed outside docstore, \
                 e.g. by DynamoDB's time to live)"
            );
            // An expiry before 1970 is kept as 0: the document's own is unknown, so the
            // condition below could not tell it from another; left to the sweep.
            if mode == RecountMode::Repair && marker.expires_at > 0 {
                self.delete_orphan(&marker.key, marker).await?;
            }
        }
        Ok(())
    }

    /// Deletes `marker` if it is still there and the document at `key` is absent or expires
    /// at another time.
    async fn delete_orphan(&self, key: &Key, marker: &Marker) -> Result<()> {
        let layout = self.layout().await?;
        let check = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key_of(key, layout)))
            .condition_expression(
                "attribute_not_exists(#pk) OR attribute_not_exists(#ea) OR #ea <> :at",
            )
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#ea", EXPIRES_AT)
            .expression_attribute_values(":at", num(marker.expires_at))
            .build()
            .map_err(build_error)?;
        let delete = marker.delete(&self.table)?;
        let sent = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().condition_check(check).build())
            .transact_items(TransactWriteItem::builder().delete(delete).build())
            .send()
            .await;
        match sent {
            Ok(_) => Ok(()),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(TransactWriteItemsError::TransactionCanceledException(_))
                ) =>
            {
                Ok(())
            }
            Err(err) => Err(self.error("TransactWriteItems", err)),
        }
    }
}
