//! The writes, and what each does when an answer is lost (see the crate docs for the
//! summary). Every write call has a fresh write identity `w` that goes into the item's write
//! history ([`crate::history`]); every write is conditioned on what it read (or on the
//! document being absent), and a failed condition is settled with the item it failed on:
//! - the item holds `w`: this call's own earlier attempt was applied — success, with the
//!   document as this call wrote it;
//! - the request was sent once: a genuine refusal (another writer got in first);
//! - it was resent, and the item proves the attempt was not applied (the same incarnation,
//!   too few writes since for `w` to have left the history): a genuine refusal too;
//! - otherwise the outcome cannot be known: `Unavailable`.
//!
//! A caller identity (`Origin::write_id`) is used as `w` for every attempt of the call, and a
//! call that meets it on the item it reads (or, for a create, on the item its condition
//! failed on at the first send) is a repeat of an earlier call: it writes nothing and answers
//! with the document as it stands. A caller-identified delete is recorded
//! ([`crate::deleted`]) in the delete's transaction; a delete that finds its identity there
//! answers as the first did.

use crate::guards::{ClaimChange, Foreign, GuardAction, GuardVerdict, guard_actions};
use crate::history::Stored;
use crate::index::Registry;
use crate::item::{check_full_item, check_item_size, data_text, document_item};
use crate::layout::Layout;
use crate::quick_delete::Quick;
use crate::send::{Action, Companion, Expect, Sent};
use crate::stamps::stamp_item;
use crate::store::DynamoStore;
use docstore::config::CounterMode;
use docstore::document::check_size;
use docstore::driver::{Expiry, Origin};
use docstore::{Data, Document, Error, Key, Result, WriteId};
use std::sync::Arc;

/// What a conditional write does to the data it read.
pub(crate) enum Edit<'a> {
    /// Merges an RFC 7386 patch into it (`update_if`).
    Merge(&'a Data),
    /// Replaces it whole (`replace_if`).
    Replace(Data),
}

impl Edit<'_> {
    /// The data after the edit of `current` (a replacement is moved, not copied).
    fn apply(self, current: &Data) -> Data {
        match self {
            Edit::Merge(patch) => {
                let mut data = current.clone();
                docstore::merge_patch(&mut data, patch);
                data
            }
            Edit::Replace(data) => data,
        }
    }
}

impl DynamoStore {
    /// Whether the site holds its quota of documents (always false without a quota).
    async fn quota_reached(&self, site: &str) -> Result<bool> {
        match self.options.max_docs_per_site {
            None => Ok(false),
            Some(limit) => Ok(self.count_documents(site).await? >= limit),
        }
    }

    async fn count_documents(&self, site: &str) -> Result<u64> {
        Ok(self.read_counters(site).await?.iter().map(|(_, n)| n).sum())
    }

    fn quota_error(&self) -> Error {
        Error::QuotaExceeded {
            limit: self.options.max_docs_per_site.unwrap_or_default(),
        }
    }

    /// `create`: one conditional write (`attribute_not_exists(pk)`) with the counter.
    pub(crate) async fn create_document(
        &self,
        key: &Key,
        data: Data,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let mut doc = Document::first(key.id(), data, origin.actor, self.options.clock.now());
        doc.expires_at = origin.expiry.apply(None, doc.updated_at);
        match self.insert_new(key, &doc, origin.write_id).await? {
            Some(repeated) => Ok(repeated),
            None => Ok(doc),
        }
    }

    /// `restore`: `doc` written exactly as given (its expiry too), like `create`.
    pub(crate) async fn restore_document(
        &self,
        key: &Key,
        doc: &Document,
        origin: Origin<'_>,
    ) -> Result<()> {
        self.insert_new(key, doc, origin.write_id).await.map(drop)
    }

    /// Writes `doc` where no document exists, with the counter; `Some` with the document as
    /// it stands when the call repeats the caller's write `chosen`, which wrote it.
    async fn insert_new(
        &self,
        key: &Key,
        doc: &Document,
        chosen: Option<&WriteId>,
    ) -> Result<Option<Document>> {
        check_item_size(
            key,
            data_text(&doc.data).len(),
            doc.created_by.len(),
            doc.updated_by.len(),
        )?;
        if self.quota_reached(key.site()).await? {
            // A taken id is AlreadyExists even in a full site (or this call's repeat).
            if let Some(current) = self.read_live(key).await? {
                return match repeats(chosen, &current) {
                    true => Ok(Some(current.doc)),
                    false => Err(Error::AlreadyExists),
                };
            }
            return Err(self.quota_error());
        }
        let w = identity(chosen);
        let shape = self.item_shape().await?;
        let first = [w.as_str().to_owned()];
        let action = Action::Put(indexed_item(&shape, key, doc, &first)?);
        let markers = self.markers(shape.layout, key, None, Some(doc)).await?;
        let mut foreign = Foreign::default();
        let mut backoff = self.backoff();
        loop {
            let guards = shape.guards(key, None, Some(doc), &foreign)?;
            let sent = self
                .send_write(
                    key,
                    &action,
                    Expect::Absent,
                    1,
                    &w,
                    &guards,
                    markers.clone(),
                )
                .await?;
            match self.tried(key, &w, sent, &guards, &mut foreign).await? {
                Tried::Applied => {
                    self.known.remember(key, doc, w.as_str());
                    return Ok(None);
                }
                Tried::FoundApplied => {
                    self.count_late(key, 1).await;
                    return Ok(None);
                }
                Tried::Again => {
                    if !backoff.wait().await {
                        break;
                    }
                }
                Tried::Refused { current, resent } => {
                    if let Some(current) = current.as_ref().filter(|c| c.holds(&w)) {
                        if !resent {
                            // Not this call's attempt: an earlier call with its identity.
                            return Ok(Some(current.doc.clone()));
                        }
                        self.count_late(key, 1).await;
                        return Ok(None);
                    }
                    if self.expired_in_the_way(key, current.as_ref()).await? {
                        // Removed as its expiry: the key is empty now.
                        continue;
                    }
                    if !resent {
                        return Err(Error::AlreadyExists);
                    }
                    return match self.creation_proven(key, &w).await? {
                        Some(true) => Ok(None),
                        Some(false) => Err(Error::AlreadyExists),
                        None => Err(unknown_outcome("create", key)),
                    };
                }
            }
        }
        Err(busy("create", key))
    }

    /// `put`: read; then a creation (with the counter) or a replacement conditioned on the
    /// revision read, which keeps `created_*`. Another write in between: read and try again.
    pub(crate) async fn put_document(
        &self,
        key: &Key,
        data: Data,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let (actor, chosen) = (origin.actor, origin.write_id);
        let text = data_text(&data);
        let mut foreign = Foreign::default();
        let mut backoff = self.backoff();
        loop {
            let current = self.read_live(key).await?;
            if let Some(read) = current.as_ref().filter(|read| repeats(chosen, read)) {
                return Ok(read.doc.clone());
            }
            let w = identity(chosen);
            let PutVersion {
                doc,
                history,
                delta,
            } = self
                .put_version(key, current.as_ref(), &data, origin, &w)
                .await?;
            check_item_size(key, text.len(), doc.created_by.len(), actor.len())?;
            let shape = self.item_shape().await?;
            let action = Action::Put(indexed_item(&shape, key, &doc, &history)?);
            let expect = match &current {
                None => Expect::Absent,
                Some(read) => Expect::Revision(read),
            };
            let before = current.as_ref().map(|read| &read.doc);
            let guards = shape.guards(key, before, Some(&doc), &foreign)?;
            let markers = self.markers(shape.layout, key, before, Some(&doc)).await?;
            let sent = self.send_write(key, &action, expect, delta, &w, &guards, markers);
            match self
                .tried(key, &w, sent.await?, &guards, &mut foreign)
                .await?
            {
                Tried::Applied => {
                    self.known.remember(key, &doc, w.as_str());
                    return Ok(doc);
                }
                Tried::FoundApplied => {
                    self.count_late(key, delta).await;
                    return Ok(doc);
                }
                Tried::Again => {}
                Tried::Refused {
                    current: now_there,
                    resent,
                } => {
                    let refused = (current.as_ref(), now_there.as_ref(), resent);
                    if self.put_proven(key, refused, &w, delta).await? {
                        return Ok(doc);
                    }
                }
            }
            if !backoff.wait().await {
                break;
            }
        }
        Err(busy("put", key))
    }

    /// The version a put writes over `current` (none: a creation, within the site's quota),
    /// with the write-identity history it keeps and the counter's move.
    async fn put_version(
        &self,
        key: &Key,
        current: Option<&Stored>,
        data: &Data,
        origin: Origin<'_>,
        w: &WriteId,
    ) -> Result<PutVersion> {
        let now = self.options.clock.now();
        let version = match current {
            None => {
                if self.quota_reached(key.site()).await? {
                    return Err(self.quota_error());
                }
                let mut doc = Document::first(key.id(), data.clone(), origin.actor, now);
                doc.expires_at = origin.expiry.apply(None, doc.updated_at);
                PutVersion {
                    doc,
                    history: vec![w.as_str().to_owned()],
                    delta: 1,
                }
            }
            Some(read) => {
                let mut doc = read.doc.next(data.clone(), origin.actor, now);
                doc.expires_at = origin.expiry.apply(doc.expires_at, doc.updated_at);
                PutVersion {
                    doc,
                    history: read.next_history(w),
                    delta: 0,
                }
            }
        };
        Ok(version)
    }

    /// Whether a put refused on `now_there` (having read `read`; `resent`: sent more than
    /// once) was applied after all, by an earlier attempt; `false`: wait and try again.
    async fn put_proven(
        &self,
        key: &Key,
        (read, now_there, resent): (Option<&Stored>, Option<&Stored>, bool),
        w: &WriteId,
        delta: i64,
    ) -> Result<bool> {
        if now_there.is_some_and(|c| c.holds(w)) {
            self.count_late(key, delta).await;
            return Ok(true);
        }
        // A resent creation that meets someone else's document, or a resent replacement
        // that meets a new incarnation or a long history: ours may have been applied and
        // overwritten since.
        let not_applied = match (read, now_there) {
            (Some(read), Some(there)) => there.proves_not_applied(read, w),
            _ => false,
        };
        if !resent || not_applied {
            return Ok(false);
        }
        if !self.transactional(delta) {
            return Err(unknown_outcome("put", key));
        }
        // A creation in a transaction: the token settles it, as for create.
        match self.creation_proven(key, w).await? {
            Some(proven) => Ok(proven),
            None => Err(unknown_outcome("put", key)),
        }
    }

    /// `update`: read, merge, write conditioned on the revision read; another write in
    /// between: read, merge and try again.
    pub(crate) async fn update_document(
        &self,
        key: &Key,
        patch: &Data,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let (actor, chosen) = (origin.actor, origin.write_id);
        let mut foreign = Foreign::default();
        let mut backoff = self.backoff();
        let mut seen;
        loop {
            let Some(read) = self.read_live(key).await? else {
                return Err(Error::not_found(key));
            };
            if repeats(chosen, &read) {
                return Ok(read.doc);
            }
            seen = read.doc.version;
            let w = identity(chosen);
            let shape = self.item_shape().await?;
            let by = (actor, origin.expiry);
            let (doc, action) = self.patched(&shape, key, &read, Edit::Merge(patch), by, &w)?;
            let guards = shape.guards(key, Some(&read.doc), Some(&doc), &foreign)?;
            let markers = self
                .markers(shape.layout, key, Some(&read.doc), Some(&doc))
                .await?;
            let write = RevisionWrite {
                key,
                call: "update",
                action: &action,
                doc: &doc,
                read: &read,
                w: &w,
            };
            match self
                .write_over(write, &guards, markers, &mut foreign)
                .await?
            {
                Revised::Written => return Ok(doc),
                // Deleted since the read.
                Revised::Refused(None) => return Err(Error::not_found(key)),
                Revised::Refused(Some(_)) | Revised::Again => {
                    if !backoff.wait().await {
                        break;
                    }
                }
            }
        }
        Err(Error::Conflict { current: seen })
    }

    /// `update_if` and `replace_if`: read, check the version, edit, and one write
    /// conditioned on the revision read.
    pub(crate) async fn update_document_if(
        &self,
        key: &Key,
        edit: Edit<'_>,
        expected_version: u64,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let (actor, chosen) = (origin.actor, origin.write_id);
        let Some(read) = self.read_live(key).await? else {
            return Err(Error::not_found(key));
        };
        if repeats(chosen, &read) {
            return Ok(read.doc);
        }
        if read.doc.version != expected_version {
            return Err(Error::Conflict {
                current: read.doc.version,
            });
        }
        let w = identity(chosen);
        let shape = self.item_shape().await?;
        let (doc, action) = self.patched(&shape, key, &read, edit, (actor, origin.expiry), &w)?;
        let markers = self
            .markers(shape.layout, key, Some(&read.doc), Some(&doc))
            .await?;
        let mut foreign = Foreign::default();
        let mut backoff = self.backoff();
        loop {
            let guards = shape.guards(key, Some(&read.doc), Some(&doc), &foreign)?;
            let write = RevisionWrite {
                key,
                call: "update_if",
                action: &action,
                doc: &doc,
                read: &read,
                w: &w,
            };
            match self
                .write_over(write, &guards, markers.clone(), &mut foreign)
                .await?
            {
                Revised::Written => return Ok(doc),
                Revised::Again => {
                    if !backoff.wait().await {
                        break;
                    }
                }
                Revised::Refused(current) => {
                    let now = self.options.clock.now();
                    return match current.filter(|c| !c.doc.is_expired(now)) {
                        None => Err(Error::not_found(key)),
                        Some(c) => Err(Error::Conflict {
                            current: c.doc.version,
                        }),
                    };
                }
            }
        }
        Err(busy("update_if", key))
    }

    /// `delete` (`expected_version: None`) and `delete_if`: read, then a delete conditioned on
    /// the revision read, with the counter. `Ok(false)`: there was no document.
    ///
    /// A delete never touches a document created after its read: when the revision it read is
    /// gone and another incarnation stands at the key, that one was created after this call's
    /// delete could have happened, and the call reports that there was nothing to delete.
    ///
    /// A delete with an identity (`chosen`: the caller's, or the one the store drew for the
    /// call's retries) first reads the document and the key's delete record together, in one
    /// `BatchGetItem`: a record holding the identity means an earlier try did this delete
    /// (`Ok(true)`, nothing removed); otherwise the delete is sent with its record in one
    /// transaction. Every
    /// delete is one transaction with its stamp (the actor and time the change feed shows,
    /// [`crate::stamps`]); exact counters move the counter in it, fast counters right after.
    pub(crate) async fn delete_document(
        &self,
        key: &Key,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<bool> {
        let chosen = origin.write_id;
        let quick = identity(chosen);
        let quick = self.delete_known(key, expected_version, origin, &quick);
        if let Quick::Answer(deleted) = quick.await? {
            return Ok(deleted);
        }
        self.known.forget(key);
        let (mut first_read, recorded) = match chosen {
            Some(id) => match self.read_for_identified_delete(key, id).await? {
                Some((read, recorded)) => (Some(read), Some(recorded)),
                None => return Ok(true),
            },
            None => (None, None),
        };
        let mut foreign = Foreign::default();
        let mut backoff = self.backoff();
        loop {
            let read = match first_read.take() {
                Some(read) => read,
                None => self.read_live(key).await?,
            };
            let Some(read) = read else {
                return Ok(false);
            };
            if let Some(expected) = expected_version
                && expected != read.doc.version
            {
                return Err(Error::Conflict {
                    current: read.doc.version,
                });
            }
            let w = identity(chosen);
            let now = self.options.clock.now();
            let shape = self.item_shape().await?;
            let guards = shape.guards(key, Some(&read.doc), None, &foreign)?;
            let by = (origin.actor, now);
            let with = delete_companions(shape.layout, key, &read, recorded.as_ref(), by, &w);
            // Exact counters move the counter in the delete's transaction; fast counters
            // right after it commits (`count_late`), never in the transaction, so deletes
            // do not contend on the collection's counter item.
            let moved = match self.counters {
                CounterMode::Exact => DELETED,
                CounterMode::Fast => 0,
            };
            let attempt = DeleteTry {
                key,
                read: &read,
                w: &w,
                recorded: recorded.is_some(),
                moved,
            };
            let expect = Expect::Revision(&read);
            let sent = self
                .send_delete(key, expect, moved, &w, with, &guards)
                .await?;
            let guarded = (guards.as_slice(), &mut foreign);
            match self
                .delete_sent(attempt, sent, guarded, expected_version)
                .await?
            {
                DeleteStep::Deleted(deleted) => return Ok(deleted),
                // Removed as its expiry: read again, and find the key empty.
                DeleteStep::ReadAgain => continue,
                DeleteStep::Wait => {
                    if !backoff.wait().await {
                        break;
                    }
                }
            }
        }
        Err(busy("delete", key))
    }

    /// What a delete does after `attempt` went out as `sent`: answer, or try again (a guard
    /// of `guards` refused it, `foreign` learns why), or settle a refusal or a lost answer.
    async fn delete_sent(
        &self,
        attempt: DeleteTry<'_>,
        sent: Sent,
        (guards, foreign): (&[GuardAction], &mut Foreign),
        expected_version: Option<u64>,
    ) -> Result<DeleteStep> {
        let key = attempt.key;
        Ok(match sent {
            Sent::Applied => DeleteStep::Deleted(self.counted_if_own(key, true).await),
            // A delete only gives values up: its guard was another document's.
            Sent::Guarded { at, guard, .. } => {
                crate::guards::judge(&guards[at], guard.as_ref(), foreign);
                DeleteStep::Wait
            }
            Sent::Contended { maybe_applied } => {
                let (read, w) = (attempt.read, attempt.w);
                if maybe_applied && self.deleted_by(key, read, w, attempt.recorded).await? {
                    DeleteStep::Deleted(self.counted_if_own(key, true).await)
                } else {
                    DeleteStep::Wait
                }
            }
            Sent::Refused { current, resent } => {
                let refused = Refused {
                    current: current.as_ref(),
                    resent,
                    expected_version,
                };
                self.after_refused_delete(attempt, refused).await?
            }
            Sent::Unknown(err) => DeleteStep::Deleted(self.after_lost_delete(attempt, err).await?),
        })
    }

    /// What a delete does after `attempt` was refused: the document at the key did not hold
    /// the revision read. Expired: read again. The revision still there: a conflict for
    /// `delete_if`, else try again after a wait. Gone: deleted by this call's lost attempt
    /// or by another caller, which the revision's stamp, the key's delete record or the
    /// counter tells.
    async fn after_refused_delete(
        &self,
        attempt: DeleteTry<'_>,
        refused: Refused<'_>,
    ) -> Result<DeleteStep> {
        let DeleteTry { key, read, w, .. } = attempt;
        if self.expired_in_the_way(key, refused.current).await? {
            return Ok(DeleteStep::ReadAgain);
        }
        if let Some(still) = refused.current.filter(|c| c.same_incarnation(read)) {
            // The incarnation read still stands, so no delete of it was applied.
            if refused.expected_version.is_some() {
                return Err(Error::Conflict {
                    current: still.doc.version,
                });
            }
            return Ok(DeleteStep::Wait);
        }
        if !refused.resent {
            return Ok(DeleteStep::Deleted(false));
        }
        // The revision's stamp names the call that deleted it (it went in with the delete,
        // so it exists exactly when some docstore delete committed).
        if let Some(stamp) = self.stamp(key, read).await? {
            let own = self.counted_if_own(key, stamp.deleter == w.as_str()).await;
            return Ok(DeleteStep::Deleted(own));
        }
        if attempt.recorded {
            // The record went in with the delete: it says whether that committed.
            let own = self.recorded_deletes(key).await?.holds(w);
            return Ok(DeleteStep::Deleted(self.counted_if_own(key, own).await));
        }
        // No stamp: the revision was removed by a delete from outside docstore (this call's
        // delete would have left one). Exact counters: the counter's last mover being this
        // call proves the commit; otherwise the token says the lost attempt did not commit.
        if attempt.moved == 0 {
            return Ok(DeleteStep::Deleted(false));
        }
        if self.counter_proves(key, w).await? {
            return Ok(DeleteStep::Deleted(true));
        }
        if self.trust_request_tokens {
            return Ok(DeleteStep::Deleted(false));
        }
        Err(unknown_outcome("delete", key))
    }

    /// Whether `attempt`, whose answer was lost (`err`), deleted the document: its stamp, its
    /// delete record or the counter says so; `err` when none can.
    async fn after_lost_delete(&self, attempt: DeleteTry<'_>, err: Error) -> Result<bool> {
        let DeleteTry { key, read, w, .. } = attempt;
        if let Ok(Some(stamp)) = self.stamp(key, read).await {
            return Ok(self.counted_if_own(key, stamp.deleter == w.as_str()).await);
        }
        if attempt.recorded {
            let record = self.recorded_deletes(key).await;
            if record.is_ok_and(|ids| ids.holds(w)) {
                return Ok(self.counted_if_own(key, true).await);
            }
            return Err(err);
        }
        if attempt.moved != 0 && self.counter_proves(key, w).await.unwrap_or(false) {
            return Ok(true);
        }
        Err(err)
    }

    /// `own`, after moving the fast counter for the delete when it was this call's.
    async fn counted_if_own(&self, key: &Key, own: bool) -> bool {
        if own {
            self.count_late(key, DELETED).await;
        }
        own
    }

    /// The first read of a delete with the identity `id`: the document (removed first when it
    /// expired) and the key's recorded deletes, read together; `None` when they hold `id`
    /// (an earlier try did this delete).
    async fn read_for_identified_delete(
        &self,
        key: &Key,
        id: &WriteId,
    ) -> Result<Option<(Option<Stored>, docstore::identity::WriteIds)>> {
        let (read, recorded) = self.read_with_deletes(key).await?;
        if recorded.holds(id) {
            return Ok(None);
        }
        let read = match read {
            Some(read) if self.expired_in_the_way(key, Some(&read)).await? => {
                self.read_live(key).await?
            }
            read => read,
        };
        Ok(Some((read, recorded)))
    }

    /// `read` with `edit` applied as the next revision by `actor` with write identity `w`.
    fn patched(
        &self,
        shape: &ItemShape,
        key: &Key,
        read: &Stored,
        edit: Edit<'_>,
        (actor, expiry): (&str, Expiry),
        w: &WriteId,
    ) -> Result<(Document, Action)> {
        let current = &read.doc;
        let data = edit.apply(&current.data);
        check_size(&data, self.options.max_doc_bytes)?;
        check_item_size(
            key,
            data_text(&data).len(),
            current.created_by.len(),
            actor.len(),
        )?;
        let mut doc = current.next(data, actor, self.options.clock.now());
        doc.expires_at = expiry.apply(doc.expires_at, doc.updated_at);
        let item = indexed_item(shape, key, &doc, &read.next_history(w))?;
        Ok((doc, Action::Put(item)))
    }

    /// Whether `current`, which a write's condition met, has expired: it is then removed as
    /// its expiry (`Ok(true)`: the write reads again and finds the key empty).
    pub(crate) async fn expired_in_the_way(
        &self,
        key: &Key,
        current: Option<&Stored>,
    ) -> Result<bool> {
        let now = self.options.clock.now();
        match current.filter(|c| c.doc.is_expired(now)) {
            Some(expired) => {
                // Boxed: the delete path's future inside every write's would be too deep a type.
                Box::pin(self.expire_stored(key, expired)).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Whether a write moving the counter by `delta` is sent as a transaction with a client
    /// request token (exact counters).
    fn transactional(&self, delta: i64) -> bool {
        delta != 0 && self.counters == CounterMode::Exact
    }

    /// Fast counters: moves the counter after a write that was applied (a delete's), or found
    /// applied after its answer was lost (exact counters moved in the write's own transaction).
    pub(crate) async fn count_late(&self, key: &Key, delta: i64) {
        if delta != 0 && self.counters == CounterMode::Fast {
            self.bump_counter(key, delta).await;
        }
    }

    /// Exact counters: whether the counter item, moved in the same transaction as the
    /// document, still carries `w` as its last mover — proof that the transaction committed.
    async fn counter_proves(&self, key: &Key, w: &WriteId) -> Result<bool> {
        if self.counters != CounterMode::Exact {
            return Ok(false);
        }
        let shard = self.counter_shard(key);
        Ok(self.counter_write_id(&shard).await?.as_deref() == Some(w.as_str()))
    }

    /// Sends `write` once, conditioned on the revision it read, with its `guards` and
    /// `markers`, and settles the answer: written (by this send, or by an earlier attempt the
    /// item or the guards prove), to be tried again (contention, a guard another writer
    /// released meanwhile), or refused on what stands now. A refusal of a resent request that
    /// the item cannot prove unapplied is `Unavailable`.
    async fn write_over(
        &self,
        write: RevisionWrite<'_>,
        guards: &[GuardAction],
        markers: Vec<Companion>,
        foreign: &mut Foreign,
    ) -> Result<Revised> {
        let RevisionWrite { key, w, read, .. } = write;
        let expect = Expect::Revision(read);
        let sent = self.send_write(key, write.action, expect, 0, w, guards, markers);
        match self.tried(key, w, sent.await?, guards, foreign).await? {
            Tried::Applied => {
                self.known.remember(key, write.doc, w.as_str());
                Ok(Revised::Written)
            }
            Tried::FoundApplied => Ok(Revised::Written),
            Tried::Again => Ok(Revised::Again),
            Tried::Refused { current, resent } => {
                if current.as_ref().is_some_and(|c| c.holds(w)) {
                    return Ok(Revised::Written);
                }
                let proven = current
                    .as_ref()
                    .is_some_and(|c| c.proves_not_applied(read, w));
                if resent && !proven {
                    return Err(unknown_outcome(write.call, key));
                }
                Ok(Revised::Refused(current))
            }
        }
    }

    /// Settles what every single write settles alike: a guard that refused it (the call's
    /// own earlier attempt, a value another document gave up, or the
    /// [`Error::UniqueViolation`] naming the holder), contention (an earlier attempt may
    /// stand), and a lost answer (the item says whether the write is there; else the error
    /// says it may have been applied). The refusal by the document's condition is the
    /// write's own to judge.
    async fn tried(
        &self,
        key: &Key,
        w: &WriteId,
        sent: Sent,
        guards: &[GuardAction],
        foreign: &mut Foreign,
    ) -> Result<Tried> {
        Ok(match sent {
            Sent::Applied => Tried::Applied,
            Sent::Guarded { at, guard, resent } => {
                let refused = (&guards[at], guard.as_ref(), resent);
                match self.guard_refused(key, w, refused, foreign).await? {
                    true => Tried::FoundApplied,
                    false => Tried::Again,
                }
            }
            Sent::Contended { maybe_applied } => {
                match maybe_applied && self.holds_write(key, w).await? {
                    true => Tried::FoundApplied,
                    false => Tried::Again,
                }
            }
            Sent::Refused { current, resent } => Tried::Refused { current, resent },
            Sent::Unknown(err) => {
                self.settle(key, w, err).await?;
                Tried::FoundApplied
            }
        })
    }

    /// A resent transactional creation refused because the key holds a document: whether it
    /// was this call's. `Some(true)`: the counter's last mover is this call (committed);
    /// `Some(false)`: not, and the client request token settles it (DynamoDB answers a
    /// resent transaction that had committed with success, so the refusal is genuine);
    /// `None`: neither can tell.
    async fn creation_proven(&self, key: &Key, w: &WriteId) -> Result<Option<bool>> {
        if !self.transactional(1) {
            return Ok(None);
        }
        if self.counter_proves(key, w).await? {
            return Ok(Some(true));
        }
        Ok(self.trust_request_tokens.then_some(false))
    }

    /// A single write's guard `refused` (the action, the guard item, whether the request was
    /// resent): `Ok(true)` when the write was applied after all (a resend whose own earlier
    /// attempt committed), `Ok(false)` to send again after backoff (a guard the write gives
    /// up turned out to be another document's, see [`Foreign`], or it changed since), or the
    /// [`Error::UniqueViolation`] naming the holder.
    async fn guard_refused(
        &self,
        key: &Key,
        w: &WriteId,
        refused: (&GuardAction, Option<&crate::item::Item>, bool),
        foreign: &mut Foreign,
    ) -> Result<bool> {
        let (action, guard, resent) = refused;
        if resent && self.holds_write(key, w).await? {
            return Ok(true);
        }
        match crate::guards::judge(action, guard, foreign) {
            GuardVerdict::Taken { error, .. } if !self.holder_expired(key, &error).await? => {
                Err(error)
            }
            _ => Ok(false),
        }
    }

    /// Whether the document holding the value of a [`Error::UniqueViolation`] (in the
    /// collection of `key`, the write claiming it) has expired: it is then removed as its
    /// expiry, which releases the value (`docs/contract.md`, "Expiry"), and the write is sent
    /// again.
    pub(crate) async fn holder_expired(&self, key: &Key, error: &Error) -> Result<bool> {
        let Error::UniqueViolation { holder, .. } = error else {
            return Ok(false);
        };
        let Ok(holder_key) = Key::new(key.site(), key.collection(), holder.as_str()) else {
            return Ok(false);
        };
        let read = self.read(&holder_key).await?;
        self.expired_in_the_way(&holder_key, read.as_ref()).await
    }

    /// Whether the document at `key` holds the write `w` (one consistent read): a write whose
    /// answer was lost and whose resend was refused for contention was applied after all.
    async fn holds_write(&self, key: &Key, w: &WriteId) -> Result<bool> {
        Ok(self.read(key).await?.is_some_and(|stored| stored.holds(w)))
    }

    /// Whether the delete `w` removed the revision `read`: its stamp names `w`, or, for a
    /// caller-identified delete (`recorded`), the key's record of deletes holds it.
    pub(crate) async fn deleted_by(
        &self,
        key: &Key,
        read: &Stored,
        w: &WriteId,
        recorded: bool,
    ) -> Result<bool> {
        if let Some(stamp) = self.stamp(key, read).await? {
            return Ok(stamp.deleter == w.as_str());
        }
        Ok(recorded && self.recorded_deletes(key).await?.holds(w))
    }

    /// After the SDK gave up with every answer lost: one read settles it when the item holds
    /// `w` (applied); otherwise the outcome is unknown and `err` (`Unavailable`) stands.
    async fn settle(&self, key: &Key, w: &WriteId, err: Error) -> Result<()> {
        match self.read(key).await {
            Ok(Some(stored)) if stored.holds(w) => Ok(()),
            _ => Err(may_have_been_applied(err)),
        }
    }
}

/// The items a delete `w` of `read` at `key` by `actor` at `now` writes or removes with it:
/// its stamp, the record of a caller-identified delete (`recorded`: the key's earlier ones),
/// and the removal of the document's expiry marker.
fn delete_companions(
    layout: Layout,
    key: &Key,
    read: &Stored,
    recorded: Option<&docstore::identity::WriteIds>,
    (actor, now): (&str, i64),
    w: &WriteId,
) -> Vec<Companion> {
    let mut with = vec![Companion::Put(stamp_item(layout, key, read, actor, now, w))];
    if let Some(recorded) = recorded {
        let record = crate::deleted::record_item(layout, key, recorded, w, now);
        with.push(Companion::Put(record));
    }
    with.extend(crate::expiring::marker_changes(
        layout,
        key,
        Some(&read.doc),
        None,
    ));
    with
}

/// The counter move of a delete.
const DELETED: i64 = -1;

/// A delete's try: its key, the revision it read, the identity it went with, whether the
/// key's delete record went with it, and the counter move it carried (0: fast counters,
/// moved after it commits).
#[derive(Clone, Copy)]
struct DeleteTry<'a> {
    key: &'a Key,
    read: &'a Stored,
    w: &'a WriteId,
    recorded: bool,
    moved: i64,
}

/// How a delete's try was refused: the document found instead (`None`: none), whether the
/// request was sent more than once, and the version `delete_if` expected.
struct Refused<'a> {
    current: Option<&'a Stored>,
    resent: bool,
    expected_version: Option<u64>,
}

/// What a delete does after a try.
enum DeleteStep {
    /// Answer: whether this call deleted the document.
    Deleted(bool),
    /// Read the key again at once.
    ReadAgain,
    /// Try again after the backoff's wait.
    Wait,
}

/// The identity of one attempt: the caller's, or a fresh one.
fn identity(chosen: Option<&WriteId>) -> WriteId {
    chosen.cloned().unwrap_or_else(WriteId::random)
}

/// Whether `read` was written by the caller's write `chosen`: the call is a repeat.
fn repeats(chosen: Option<&WriteId>, read: &Stored) -> bool {
    chosen.is_some_and(|id| read.holds(id))
}

/// What a document's item is made of besides the document: the table's layout and the
/// indexes its collection carries.
pub(crate) struct ItemShape {
    pub(crate) registry: Arc<Registry>,
    pub(crate) layout: Layout,
}

impl DynamoStore {
    /// The shape of the document items this store writes now.
    pub(crate) async fn item_shape(&self) -> Result<ItemShape> {
        Ok(ItemShape {
            registry: self.registry().await?,
            layout: self.layout().await?,
        })
    }
}

impl ItemShape {
    /// The guard actions of one write at `key` from `before` to `after`
    /// ([`crate::guards`]); refused when the store declares a unique index of the collection
    /// that the table does not hold.
    pub(crate) fn guards(
        &self,
        key: &Key,
        before: Option<&Document>,
        after: Option<&Document>,
        foreign: &Foreign,
    ) -> Result<Vec<GuardAction>> {
        self.registry.refuse_unheld(key.collection())?;
        let change = ClaimChange {
            position: 0,
            key,
            before,
            after,
        };
        Ok(guard_actions(
            &self.registry,
            self.layout,
            &[change],
            foreign,
        ))
    }
}

/// The item of `doc` with its history and the keys of every index of its collection,
/// refused when it would not fit.
pub(crate) fn indexed_item(
    shape: &ItemShape,
    key: &Key,
    doc: &Document,
    history: &[String],
) -> Result<crate::item::Item> {
    let mut item = document_item(key, doc, history, shape.layout);
    crate::index::add_index_keys(&shape.registry, key, doc, &mut item);
    check_full_item(&item)?;
    Ok(item)
}

/// `Unavailable` that says the write may have been applied.
fn may_have_been_applied(err: Error) -> Error {
    match err {
        Error::Unavailable {
            message, source, ..
        } => Error::Unavailable {
            message: format!("{message}; the write may or may not have been applied"),
            source,
            write_id: None,
        },
        other => other,
    }
}

/// The answer to a write whose lost attempt may or may not have been applied.
fn unknown_outcome(call: &str, key: &Key) -> Error {
    Error::Unavailable {
        message: format!(
            "the answer to this {call} of {key} was lost and the document changed before the \
             SDK's resend in a way that hides whether it was applied: the {call} may or may \
             not have been applied; read the document to find out"
        ),
        source: None,
        write_id: None,
    }
}

fn busy(call: &str, key: &Key) -> Error {
    Error::Unavailable {
        message: format!(
            "{call} of {key} kept meeting concurrent writes or throttling until its deadline \
             (operation_timeout_ms); nothing was written"
        ),
        source: None,
        write_id: None,
    }
}

/// A write conditioned on the revision it read ([`DynamoStore::write_over`]): `call` names it
/// in errors; `action` writes `doc` with identity `w` over `read`.
struct RevisionWrite<'a> {
    key: &'a Key,
    call: &'static str,
    action: &'a Action,
    doc: &'a Document,
    read: &'a Stored,
    w: &'a WriteId,
}

/// How a single write's try ended, once [`DynamoStore::tried`] settled what every write
/// settles alike.
enum Tried {
    /// This send applied it.
    Applied,
    /// An earlier send of the call applied it (its guard, its contention or its lost answer
    /// proved so): a fast counter has yet to move.
    FoundApplied,
    /// Another writer, throttling, or a guard given up meanwhile: wait and send again.
    Again,
    /// The document's condition failed on `current` (`None`: no document); `resent`: the
    /// request went more than once, so an earlier attempt may have been applied.
    Refused {
        current: Option<Stored>,
        resent: bool,
    },
}

/// The version a put writes, the write-identity history it keeps, and how it moves the
/// collection's counter (1: a creation).
struct PutVersion {
    doc: Document,
    history: Vec<String>,
    delta: i64,
}

/// What became of a [`RevisionWrite`].
enum Revised {
    /// Applied: by this send, or by an earlier attempt of the call.
    Written,
    /// Another writer or throttling got in the way: wait and send again.
    Again,
    /// The revision read is gone; what stands now (`None`: no document).
    Refused(Option<Stored>),
}
