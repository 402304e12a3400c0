//! Removing expired documents (`docs/contract.md`, "Expiry"): the one delete path that the
//! sweep and the writes meeting an expired document share, and the sweep itself (see
//! [`crate::expiring`] for the items).

use crate::counters::counter_update;
use crate::expiring::{Marker, marker_changes};
use crate::guards::Foreign;
use crate::history::Stored;
use crate::item::key_of;
use crate::send::{Companion, Expect, Sent, build_error};
use crate::stamps::expiry_stamp_item;
use crate::store::DynamoStore;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};
use docstore::config::CounterMode;
use docstore::{Error, Key, Result, WriteId};

impl DynamoStore {
    /// Removes the expired revision `read` at `key` as its expiry: one `TransactWriteItems`
    /// deleting it conditioned on that revision (so on its expiry, which changes only with
    /// the version), with the counter's decrement, its marker's delete, its unique guards'
    /// release and its expiry stamp (the feed's one `Expired` change). `Ok(false)` when
    /// another call removed or rewrote that revision first.
    pub(crate) async fn expire_stored(&self, key: &Key, read: &Stored) -> Result<bool> {
        let shape = self.item_shape().await?;
        let layout = shape.layout;
        let exact = self.counters == CounterMode::Exact;
        let moved = if exact { -1 } else { 0 };
        let mut foreign = Foreign::default();
        let mut backoff = self.backoff();
        // One identity for every try: an earlier try whose answer was lost is recognised by
        // its stamp.
        let w = WriteId::random();
        loop {
            let now = self.options.clock.now();
            let guards = shape.guards(key, Some(&read.doc), None, &foreign)?;
            let mut with = vec![Companion::Put(expiry_stamp_item(
                layout, key, read, now, &w,
            ))];
            with.extend(marker_changes(layout, key, Some(&read.doc), None));
            let sent = self
                .send_delete(key, Expect::Revision(read), moved, &w, with, &guards)
                .await?;
            let settled = match sent {
                Sent::Applied => true,
                Sent::Guarded { at, guard, .. } => {
                    crate::guards::judge(&guards[at], guard.as_ref(), &mut foreign);
                    false
                }
                Sent::Contended { maybe_applied } => {
                    maybe_applied && self.expired_by(key, read, &w).await?
                }
                Sent::Refused { .. } => {
                    // The revision is gone or rewritten: by an earlier try of this call whose
                    // answer was lost (its stamp names `w`), or by another call.
                    if !self.expired_by(key, read, &w).await? {
                        return Ok(false);
                    }
                    true
                }
                Sent::Unknown(err) => {
                    if !self.expired_by(key, read, &w).await.unwrap_or(false) {
                        return Err(err);
                    }
                    true
                }
            };
            if settled {
                if !exact {
                    self.bump_counter(key, -1).await;
                }
                return Ok(true);
            }
            if !backoff.wait().await {
                return Err(Error::Unavailable {
                    message: format!(
                        "removing the expired document {key} kept meeting concurrent writes \
                         or throttling until its deadline (operation_timeout_ms)"
                    ),
                    source: None,
                    write_id: None,
                });
            }
        }
    }

    /// Whether the revision `read` was removed by the expiry `w` (its stamp names `w`).
    async fn expired_by(&self, key: &Key, read: &Stored, w: &WriteId) -> Result<bool> {
        let stamp = self.stamp(key, read).await?;
        Ok(stamp.is_some_and(|stamp| stamp.deleter == w.as_str()))
    }

    /// The document at `key` as a write finds it: read strongly consistently, and, when it
    /// has expired, first removed as its expiry (the key is then empty).
    pub(crate) async fn read_live(&self, key: &Key) -> Result<Option<Stored>> {
        let mut backoff = self.backoff();
        loop {
            let read = self.read(key).await?;
            match read {
                Some(read) if read.doc.is_expired(self.options.clock.now()) => {
                    if Box::pin(self.expire_stored(key, &read)).await? {
                        return Ok(None);
                    }
                }
                other => return Ok(other),
            }
            if !backoff.wait().await {
                return Err(Error::Unavailable {
                    message: format!(
                        "{key} kept changing while its expiry was being recorded, until the \
                         deadline (operation_timeout_ms)"
                    ),
                    source: None,
                    write_id: None,
                });
            }
        }
    }

    /// Removes those of `read` (the documents at `keys`) that have expired, as their expiries;
    /// whether any was.
    pub(crate) async fn expire_read(&self, keys: &[Key], read: &[Option<Stored>]) -> Result<bool> {
        let now = self.options.clock.now();
        let mut any = false;
        for (key, stored) in keys.iter().zip(read) {
            if let Some(stored) = stored.as_ref().filter(|s| s.doc.is_expired(now)) {
                Box::pin(self.expire_stored(key, stored)).await?;
                any = true;
            }
        }
        Ok(any)
    }

    /// The sweep: at most `limit` due markers of the registered sites, soonest expiry first
    /// within what was read, each document removed as its expiry; how many were.
    pub(crate) async fn sweep_expired_documents(&self, limit: usize) -> Result<usize> {
        if limit == 0 {
            return Ok(0);
        }
        let now = self.options.clock.now();
        let mut due: Vec<Marker> = Vec::new();
        for site in self.expiring_sites().await? {
            if due.len() >= limit {
                break;
            }
            let left = limit - due.len();
            due.extend(self.due_markers(&site, now, Some(left)).await?);
        }
        due.sort_by_key(|marker| marker.expires_at);
        let mut removed = 0;
        for marker in due {
            if self.sweep_marker(&marker, now).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes the document of a due `marker` as its expiry; a marker whose document is gone
    /// or expires at another time is settled instead ([`settle_marker`](Self::settle_marker)).
    async fn sweep_marker(&self, marker: &Marker, now: i64) -> Result<bool> {
        match self.read(&marker.key).await? {
            Some(read) if read.doc.expires_at == Some(marker.expires_at) => {
                if read.doc.is_expired(now) {
                    return self.expire_stored(&marker.key, &read).await;
                }
                Ok(false)
            }
            Some(read) => {
                self.settle_marker(marker, Some(&read)).await?;
                Ok(false)
            }
            None => {
                self.settle_marker(marker, None).await?;
                Ok(false)
            }
        }
    }

    /// Deletes a marker that no document stands behind: the document is gone (removed outside
    /// docstore — DynamoDB's time to live — with the counter still counting it: the counter
    /// moves down in the same transaction, conditioned on the document still being absent) or
    /// `read` expires at another time (conditioned on that revision). A condition that fails
    /// leaves the marker to a later sweep.
    async fn settle_marker(&self, marker: &Marker, read: Option<&Stored>) -> Result<()> {
        let layout = self.layout().await?;
        let expect = match read {
            Some(read) => Expect::Revision(read),
            None => Expect::Absent,
        };
        let (condition, names, values) = crate::send::condition(expect);
        let check = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key_of(&marker.key, layout)))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(values)
            .build()
            .map_err(build_error)?;
        let delete = marker.delete(&self.table)?;
        let mut actions = vec![
            TransactWriteItem::builder().condition_check(check).build(),
            TransactWriteItem::builder().delete(delete).build(),
        ];
        if read.is_none() {
            let shard = self.counter_shard(&marker.key);
            let counter = counter_update(&self.table, layout, &shard, -1, None)?;
            actions.push(TransactWriteItem::builder().update(counter).build());
        }
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(actions))
            .send()
            .await;
        match sent {
            Ok(_) => {
                if read.is_none() {
                    tracing::warn!(
                        key = %marker.key,
                        "an expired document was removed outside docstore (DynamoDB's time \
                         to live?): its marker is deleted and its collection counter moved down"
                    );
                }
                Ok(())
            }
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
