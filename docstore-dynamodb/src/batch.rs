//! `write_all` as one `TransactWriteItems`, and `get_many` as consistent `BatchGetItem`s.
//!
//! A batch reads every key first (strongly consistent `BatchGetItem`), decides each write
//! as the single call would (versions, merges, quota), then sends all of them in one
//! transaction: each document write conditioned on the revision read (or on being absent),
//! each `Check` a `ConditionCheck`, and one counter `ADD` per counter shard
//! ([`crate::counters`]) whose count changes — so counters move atomically with the documents
//! whatever the counter mode. The batch has one write identity, stored in the history of every
//! item it writes and on the counter shards it moves, and the request carries a client request
//! token.
//!
//! When a condition fails because another writer got in between the read and the transaction,
//! a batch holding a `Put` or `Update` is read and decided again (those writes never refuse);
//! otherwise the failing write's error is returned. A resent transaction that is refused is
//! settled like a single write: an item or counter holding the batch's identity proves it
//! committed; otherwise the token says it did not (or, with `trust_request_tokens = false`,
//! nothing can tell: `Unavailable`).

use crate::attempts::Attempts;
use crate::counters::{CounterShard, counter_update};
use crate::guards::{ClaimChange, Foreign, GuardAction, GuardVerdict, guard_actions};
use crate::history::Stored;
use crate::item::{Item, check_item_size, data_text, is_document, key_of};
use crate::layout::Layout;
use crate::send::{Companion, Expect, Guarded, RefusedGuard, TransactionFailure, transact_action};
use crate::store::DynamoStore;
use crate::writes::{ItemShape, indexed_item};
use aws_sdk_dynamodb::types::TransactWriteItem;
use docstore::batch::{self, CheckedBatch, Decision, Write, WriteOutcome};
use docstore::config::CounterMode;
use docstore::driver::Origin;
use docstore::index::{
    CompiledIndex,
    unique::{self, BatchWrite},
};
use docstore::{Document, Error, Key, Result, WriteId};
use futures_util::StreamExt;
use std::collections::HashMap;

/// How many `BatchGetItem`s one `get_many` keeps in flight: a page of a sorted walk (1 000
/// keys) takes three round trips instead of ten, without one call flooding the table.
const GETS_IN_FLIGHT: usize = 4;

/// One write of the batch as decided on what was read.
struct Planned {
    /// The action sent for it.
    action: TransactWriteItem,
    /// What the call returns for it when the batch commits.
    outcome: WriteOutcome,
    /// Whether it writes an item (so the item's history can prove the batch committed).
    puts: bool,
    /// For a delete: its stamp ([`crate::stamps`]).
    stamp: Option<Item>,
    /// Its document's expiry markers put and deleted ([`crate::expiring`]).
    markers: Vec<Companion>,
}

/// The counter moves of a batch being planned, and the documents each of its sites counts
/// with the batch's writes so far (read once per site, only under `max_docs_per_site`).
#[derive(Default)]
struct Moves {
    site_counts: HashMap<String, u64>,
    counters: Vec<CounterMove>,
}

/// One write of a batch being planned: its position, the write, what was read at its key,
/// and the batch's identity.
struct Planning<'a> {
    index: usize,
    write: &'a Write,
    current: &'a Option<Stored>,
    w: &'a WriteId,
}

/// A batch's transaction as sent: its keys, its planned writes, its counter moves, and its
/// identity (what proves that it committed).
#[derive(Clone, Copy)]
struct BatchTry<'a> {
    keys: &'a [Key],
    planned: &'a [Planned],
    counters: &'a [CounterMove],
    w: &'a WriteId,
}

/// The write of a batch whose document's condition failed: its position, the item found
/// instead when returned, and whether the request was sent more than once.
struct BatchRefusal {
    index: usize,
    current: Option<Stored>,
    resent: bool,
}

/// What a batch does after sending its transaction.
enum BatchSettled {
    /// It committed: answer its outcomes.
    Committed,
    /// Read the keys again at once.
    ReadAgain,
    /// Send again after the backoff's wait.
    Again,
}

/// What a batch adds to one counter shard.
#[derive(Debug)]
struct CounterMove {
    shard: CounterShard,
    delta: i64,
}

/// The most actions one `TransactWriteItems` takes.
const MAX_ACTIONS: usize = 100;

/// The stamps of a batch's deletes: those that fit in its transaction beside the writes and
/// counter moves, and the rest, written right after it commits.
#[derive(Debug, Default)]
struct Stamps {
    inside: Vec<Item>,
    after: Vec<Item>,
}

impl Stamps {
    /// Splits the stamps of `planned` so the transaction holds at most [`MAX_ACTIONS`]
    /// actions with `counters` counter moves. A batch of [`MAX_BATCH_WRITES`] writes can
    /// already fill the transaction with its writes and counters (50 deletes moving 50
    /// shards), so a stamp may not fit: it is then written after the commit — only
    /// ever for a revision the batch did delete, so a stamp is never wrong; a process that
    /// dies in between leaves that delete without one (the feed then says so).
    ///
    /// [`MAX_BATCH_WRITES`]: docstore::batch::MAX_BATCH_WRITES
    fn split(planned: &[Planned], counters: usize) -> Stamps {
        let markers: usize = planned.iter().map(|p| p.markers.len()).sum();
        let room = MAX_ACTIONS.saturating_sub(planned.len() + counters + markers);
        let mut stamps: Vec<Item> = planned.iter().filter_map(|p| p.stamp.clone()).collect();
        let after = stamps.split_off(room.min(stamps.len()));
        Stamps {
            inside: stamps,
            after,
        }
    }
}

/// A batch as decided: its writes, the unique-index guards they claim and give up
/// ([`crate::guards`]) and the counter moves.
struct PlannedBatch {
    planned: Vec<Planned>,
    guards: Vec<GuardAction>,
    counters: Vec<CounterMove>,
}

impl PlannedBatch {
    /// The batch, when its writes, guards and counter moves fit in one transaction;
    /// otherwise `InvalidArgument` naming the count.
    fn within_one_transaction(self) -> Result<Self> {
        let markers: usize = self.planned.iter().map(|p| p.markers.len()).sum();
        let actions = self.planned.len() + self.guards.len() + self.counters.len() + markers;
        if actions <= MAX_ACTIONS {
            return Ok(self);
        }
        Err(Error::invalid(format!(
            "this batch needs {actions} actions in one DynamoDB transaction ({} writes, {} \
             unique-index guards, {} counter shards, {markers} expiry markers), which holds at \
             most {MAX_ACTIONS}; split it (docs/contract.md, \"How the backends differ\", \
             DynamoDB)",
            self.planned.len(),
            self.guards.len(),
            self.counters.len()
        )))
    }
}

/// What sending the batch did.
enum Sent {
    Applied,
    /// Guards met failed conditions (their positions among the guards, the items when
    /// returned).
    Guarded {
        refused: Vec<RefusedGuard>,
        resent: bool,
    },
    /// The write at `index` met a failed condition on `current`.
    Refused {
        index: usize,
        current: Option<Stored>,
        resent: bool,
    },
    Contended {
        maybe_applied: bool,
    },
    Unknown(Error),
}

impl DynamoStore {
    /// `get_many`: consistent `BatchGetItem`s of 100 keys, unprocessed keys asked again with
    /// jittered backoff. Each document is read strongly consistently, but the answer is not
    /// one snapshot: the items are read at slightly different moments.
    /// An expired document reads as absent.
    pub(crate) async fn get_many_items(&self, keys: &[Key]) -> Result<Vec<Option<Document>>> {
        let now = self.options.clock.now();
        Ok(self
            .read_many(keys)
            .await?
            .into_iter()
            .map(|stored| stored.map(|s| s.doc).filter(|doc| !doc.is_expired(now)))
            .collect())
    }

    /// The documents at `keys` with their histories, in the keys' order: chunks of 100 keys,
    /// up to [`GETS_IN_FLIGHT`] of them at a time.
    pub(crate) async fn read_many(&self, keys: &[Key]) -> Result<Vec<Option<Stored>>> {
        let layout = self.layout().await?;
        let mut found: HashMap<(String, String), Stored> = HashMap::with_capacity(keys.len());
        // The futures are made before the stream (not by a `map` closure inside it), which
        // keeps the whole future `Send` for `async_trait`.
        let reads: Vec<_> = keys
            .chunks(crate::batch_get::MAX_KEYS)
            .map(|chunk| self.read_chunk(chunk, layout))
            .collect();
        let mut chunks = futures_util::stream::iter(reads).buffer_unordered(GETS_IN_FLIGHT);
        while let Some(items) = chunks.next().await {
            found.extend(items?);
        }
        Ok(keys
            .iter()
            .map(|key| found.remove(&(layout.document_pk(key), key.id().to_owned())))
            .collect())
    }

    /// One consistent `BatchGetItem` of at most 100 keys: the documents found, by partition
    /// key and id.
    async fn read_chunk(
        &self,
        chunk: &[Key],
        layout: Layout,
    ) -> Result<Vec<((String, String), Stored)>> {
        let keys = chunk.iter().map(|key| key_of(key, layout)).collect();
        let items = self.batch_get(keys, "keys").await?;
        items
            .iter()
            .filter(|item| is_document(item))
            .map(|item| {
                let stored = Stored::from_item(item)?;
                let pk = crate::item::string(item, crate::item::PK)?.to_owned();
                Ok(((pk, stored.doc.id.clone()), stored))
            })
            .collect()
    }

    /// `write_all`: read, decide, one transaction; again under contention.
    ///
    /// With a caller identity, a batch whose identity is on one of the items it reads (or,
    /// for a batch that only deletes, on one of its collection counters as their last
    /// mover) is a repeat: nothing is written, and the outcomes come from the items read.
    pub(crate) async fn write_all_items(
        &self,
        batch: &CheckedBatch<'_>,
        origin: Origin<'_>,
    ) -> Result<Vec<WriteOutcome>> {
        let writes = batch.writes();
        let actor = origin.actor;
        let keys: Vec<Key> = writes.iter().map(|w| w.key().clone()).collect();
        let mut foreign = Foreign::default();
        let mut backoff = self.backoff();
        loop {
            let read = self.read_many(&keys).await?;
            if self.expire_read(&keys, &read).await? {
                // Expired documents were removed as their expiries: their keys are empty.
                continue;
            }
            if let Some(id) = origin.write_id
                && self.batch_repeated(&keys, &read, id).await?
            {
                let current = read.into_iter().map(|r| r.map(|stored| stored.doc));
                return batch::repeated_outcomes(writes, current.collect());
            }
            let w = origin.write_id.cloned().unwrap_or_else(WriteId::random);
            let PlannedBatch {
                planned,
                guards,
                counters,
            } = self.plan(batch, &read, actor, &w, &foreign).await?;
            let stamps = Stamps::split(&planned, guards.len() + counters.len());
            let sent = self.send_batch(&planned, &guards, &counters, &stamps.inside, &w);
            let sent = sent.await?;
            let tried = BatchTry {
                keys: &keys,
                planned: &planned,
                counters: &counters,
                w: &w,
            };
            match self
                .settled(tried, sent, writes, &guards, &mut foreign)
                .await?
            {
                BatchSettled::Committed => {
                    return Ok(self.committed(planned, stamps.after, (&keys, &w)).await);
                }
                BatchSettled::ReadAgain => continue,
                BatchSettled::Again => {
                    if !backoff.wait().await {
                        break;
                    }
                }
            }
        }
        Err(Error::Unavailable {
            message: "write_all kept meeting concurrent writes or throttling until its deadline \
                      (operation_timeout_ms); nothing was written"
                .into(),
            source: None,
            write_id: None,
        })
    }

    /// What the answer to a batch's transaction means: committed (by this send, or by an
    /// earlier one its items, counters or guards prove), to be sent again (contention, a
    /// guard given up meanwhile), to be read again (a document in the way expired), or the
    /// error the call ends with (a unique value held, the refused write's error, an outcome
    /// nothing can settle).
    async fn settled(
        &self,
        tried: BatchTry<'_>,
        sent: Sent,
        writes: &[Write],
        guards: &[GuardAction],
        foreign: &mut Foreign,
    ) -> Result<BatchSettled> {
        let proves = || self.batch_proves(tried.keys, tried.planned, tried.counters, tried.w);
        match sent {
            Sent::Applied => Ok(BatchSettled::Committed),
            Sent::Guarded { refused, resent } => {
                if resent && proves().await? {
                    return Ok(BatchSettled::Committed);
                }
                match self
                    .guards_refused(tried.keys, guards, refused, foreign)
                    .await?
                {
                    Some(err) => Err(err),
                    None => Ok(BatchSettled::Again),
                }
            }
            Sent::Contended { maybe_applied } => match maybe_applied && proves().await? {
                true => Ok(BatchSettled::Committed),
                false => Ok(BatchSettled::Again),
            },
            Sent::Refused {
                index,
                current,
                resent,
            } => {
                let refused = BatchRefusal {
                    index,
                    current,
                    resent,
                };
                self.after_refused_batch(tried, writes, refused).await
            }
            Sent::Unknown(err) => match proves().await? {
                true => Ok(BatchSettled::Committed),
                false => Err(maybe_applied(err)),
            },
        }
    }

    /// A batch whose write at `refused.index` met a document other than the one it read:
    /// the batch's own (committed), an expired one (read again), or, unless a resend may
    /// have committed, that write's error or another try.
    async fn after_refused_batch(
        &self,
        tried: BatchTry<'_>,
        writes: &[Write],
        refused: BatchRefusal,
    ) -> Result<BatchSettled> {
        let BatchRefusal {
            index,
            current,
            resent,
        } = refused;
        let key = &tried.keys[index];
        let current = match current {
            Some(current) => Some(current),
            None => self.read(key).await?,
        };
        if current.as_ref().is_some_and(|c| c.holds(tried.w)) {
            return Ok(BatchSettled::Committed);
        }
        if !resent && self.expired_in_the_way(key, current.as_ref()).await? {
            return Ok(BatchSettled::ReadAgain);
        }
        if resent {
            let proves = self.batch_proves(tried.keys, tried.planned, tried.counters, tried.w);
            if proves.await? {
                return Ok(BatchSettled::Committed);
            }
            if !self.trust_request_tokens {
                return Err(Error::Unavailable {
                    message: "the answer to this write_all was lost and the items changed \
                              before the SDK's resend: the batch may or may not have been \
                              applied"
                        .into(),
                    source: None,
                    write_id: None,
                });
            }
        }
        match refusal(&writes[index], current) {
            Some(err) => Err(batch::failed(index, err)),
            None => Ok(BatchSettled::Again),
        }
    }

    /// Decides every write on what was read: the failing write's error, or the actions and
    /// outcomes, the guards of the unique indexes (judged first as the batch leaves the
    /// documents, [`unique::check_batch`]) and the moves of the counter shards of the
    /// documents created or deleted.
    async fn plan(
        &self,
        batch: &CheckedBatch<'_>,
        read: &[Option<Stored>],
        actor: &str,
        w: &WriteId,
        foreign: &Foreign,
    ) -> Result<PlannedBatch> {
        let (writes, mut bytes) = (batch.writes(), batch.bytes());
        let now = self.options.clock.now();
        let limit = self.options.max_doc_bytes;
        let shape = self.item_shape().await?;
        let mut moves = Moves::default();
        let mut planned = Vec::with_capacity(writes.len());
        for (index, (write, current)) in writes.iter().zip(read).enumerate() {
            let found = current.as_ref().map(|read| &read.doc);
            let decision = batch::decide(index, write, found, actor, now, limit, &mut bytes)?
                .expire(batch.expiry(index));
            let delta = decision.counter_delta();
            if delta != 0 {
                self.move_counter(index, write.key(), delta, &mut moves)
                    .await?;
            }
            let doc = match decision {
                Decision::Store { document, .. } => Some(document),
                Decision::Remove | Decision::Keep => None,
            };
            let one = Planning {
                index,
                write,
                current,
                w,
            };
            planned.push(self.planned(&shape, one, doc, (actor, now)).await?);
        }
        let mut counters = moves.counters;
        counters.retain(|moved| moved.delta != 0);
        let guards = batch_guards(&shape, writes, read, &planned, foreign)?;
        PlannedBatch {
            planned,
            guards,
            counters,
        }
        .within_one_transaction()
    }

    /// Moves the counter shard of `key` by `delta`, first holding the site's quota
    /// (`max_docs_per_site`: the stored shards counted once per site, then as the batch moves
    /// them); a create past it fails the batch at `index`.
    async fn move_counter(
        &self,
        index: usize,
        key: &Key,
        delta: i64,
        moves: &mut Moves,
    ) -> Result<()> {
        if let Some(quota) = self.options.max_docs_per_site {
            let count = match moves.site_counts.get_mut(key.site()) {
                Some(count) => count,
                None => {
                    let shards = self.read_counters(key.site()).await?;
                    let stored: u64 = shards.iter().map(|(_, n)| n).sum();
                    let sites = &mut moves.site_counts;
                    sites.entry(key.site().to_owned()).or_insert(stored)
                }
            };
            if delta > 0 && *count >= quota {
                return Err(batch::failed(index, Error::QuotaExceeded { limit: quota }));
            }
            *count = count.saturating_add_signed(delta);
        }
        let shard = self.counter_shard(key);
        match moves.counters.iter_mut().find(|moved| moved.shard == shard) {
            Some(moved) => moved.delta += delta,
            None => moves.counters.push(CounterMove { shard, delta }),
        }
        Ok(())
    }

    /// The action, outcome, stamp and expiry markers of one write of a batch decided to
    /// store `doc` (or, without one, to delete or check), sent on what was read at its key.
    async fn planned(
        &self,
        shape: &ItemShape,
        one: Planning<'_>,
        doc: Option<Document>,
        (actor, now): (&str, i64),
    ) -> Result<Planned> {
        let Planning {
            index,
            write,
            current,
            w,
        } = one;
        let (key, layout) = (write.key(), shape.layout);
        let fail = |err: Error| batch::failed(index, err);
        let stamp = match (write, current) {
            (Write::DeleteIf { .. }, Some(read)) => {
                Some(crate::stamps::stamp_item(layout, key, read, actor, now, w))
            }
            _ => None,
        };
        let (guarded, outcome) = match (write, doc) {
            (Write::DeleteIf { .. }, _) => (Guarded::Delete, WriteOutcome::Deleted),
            (Write::Check { .. }, _) => (Guarded::Check, WriteOutcome::Checked),
            (_, Some(doc)) => {
                let (data, created_by) = (data_text(&doc.data), doc.created_by.len());
                check_item_size(key, data.len(), created_by, doc.updated_by.len()).map_err(fail)?;
                let history = match current {
                    Some(read) => read.next_history(w),
                    None => vec![w.as_str().to_owned()],
                };
                let item = indexed_item(shape, key, &doc, &history).map_err(fail)?;
                (Guarded::Put(item), WriteOutcome::Written(doc))
            }
            (_, None) => unreachable!("every other write has a document"),
        };
        let puts = matches!(guarded, Guarded::Put(_));
        let expect = match current {
            None => Expect::Absent,
            Some(read) => Expect::Revision(read),
        };
        let action = transact_action(&self.table, layout, key, guarded, expect)?;
        let markers = self.batch_markers(layout, write, current, &outcome).await?;
        Ok(Planned {
            action,
            outcome,
            puts,
            stamp,
            markers,
        })
    }

    /// The expiry markers one write of a batch puts and deletes (a check: none).
    async fn batch_markers(
        &self,
        layout: Layout,
        write: &Write,
        current: &Option<Stored>,
        outcome: &WriteOutcome,
    ) -> Result<Vec<Companion>> {
        let after = match outcome {
            WriteOutcome::Written(doc) => Some(doc),
            _ => None,
        };
        match write {
            Write::Check { .. } => Ok(Vec::new()),
            _ => {
                let before = current.as_ref().map(|read| &read.doc);
                self.markers(layout, write.key(), before, after).await
            }
        }
    }

    /// The refusal of a batch whose guards `refused`: the violation of the first write in
    /// batch order whose value another document holds, or `None` to send again (a guard the
    /// batch gives up is another document's, now in `foreign`; or the guard changed since).
    async fn guards_refused(
        &self,
        keys: &[Key],
        guards: &[GuardAction],
        refused: Vec<RefusedGuard>,
        foreign: &mut Foreign,
    ) -> Result<Option<Error>> {
        let mut first: Option<(usize, Error)> = None;
        for RefusedGuard { at, item } in refused {
            let guard = self.refused_guard(&guards[at], item).await?;
            let verdict = crate::guards::judge(&guards[at], guard.as_ref(), foreign);
            if let GuardVerdict::Taken { position, error } = verdict
                && !self.holder_expired(&keys[position], &error).await?
                && first.as_ref().is_none_or(|(p, _)| position < *p)
            {
                first = Some((position, error));
            }
        }
        Ok(first.map(|(position, error)| batch::failed(position, error)))
    }

    /// One `TransactWriteItems` of the planned writes, the counter moves and the deletes'
    /// stamps that fit (`stamps`).
    async fn send_batch(
        &self,
        planned: &[Planned],
        guards: &[GuardAction],
        counters: &[CounterMove],
        stamps: &[Item],
        w: &WriteId,
    ) -> Result<Sent> {
        let mut request = self
            .client
            .transact_write_items()
            .client_request_token(WriteId::random().as_str());
        for write in planned {
            request = request.transact_items(write.action.clone());
        }
        for guard in guards {
            request = request.transact_items(guard.transact_item(&self.table)?);
        }
        for moved in counters {
            request = request.transact_items(
                TransactWriteItem::builder()
                    .update(counter_update(
                        &self.table,
                        self.layout().await?,
                        &moved.shard,
                        moved.delta,
                        Some(w),
                    )?)
                    .build(),
            );
        }
        for marker in planned.iter().flat_map(|p| &p.markers) {
            request = request.transact_items(marker.transact_item(&self.table)?);
        }
        for stamp in stamps {
            let put = aws_sdk_dynamodb::types::Put::builder()
                .table_name(&self.table)
                .set_item(Some(stamp.clone()))
                .build()
                .map_err(crate::send::build_error)?;
            request = request.transact_items(TransactWriteItem::builder().put(put).build());
        }
        let attempts = Attempts::default();
        let err = match request
            .customize()
            .interceptor(attempts.clone())
            .send()
            .await
        {
            Ok(_) => return Ok(Sent::Applied),
            Err(err) => err,
        };
        Ok(
            match self.transaction_failure(err, planned.len(), guards.len())? {
                TransactionFailure::Guarded { refused } => Sent::Guarded {
                    refused,
                    resent: attempts.resent(),
                },
                TransactionFailure::Refused { index, item } => Sent::Refused {
                    index,
                    current: match item {
                        Some(item) if is_document(&item) => Some(Stored::from_item(&item)?),
                        // Not returned (or only the key): read it.
                        _ => None,
                    },
                    resent: attempts.resent(),
                },
                TransactionFailure::Contended => Sent::Contended {
                    maybe_applied: attempts.may_have_applied(),
                },
                TransactionFailure::Unknown(err) => Sent::Unknown(err),
                // A batch writes its stamps, records and markers unconditionally.
                TransactionFailure::CompanionRefused => {
                    return Err(crate::send::companion_refused(&self.table));
                }
            },
        )
    }

    /// The outcomes of a committed batch, once the stamps that did not fit in its
    /// transaction (see [`Stamps::split`]) are written.
    /// The store remembers the revisions the batch `w` wrote at `keys` (one per planned
    /// write, in order), so that their deletes need not read first ([`crate::known`]).
    async fn committed(
        &self,
        planned: Vec<Planned>,
        late_stamps: Vec<Item>,
        (keys, w): (&[Key], &WriteId),
    ) -> Vec<WriteOutcome> {
        for (key, write) in keys.iter().zip(&planned) {
            match &write.outcome {
                WriteOutcome::Written(doc) => self.known.remember(key, doc, w.as_str()),
                WriteOutcome::Deleted => self.known.forget(key),
                _ => {}
            }
        }
        for stamp in late_stamps {
            let put = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(stamp))
                .send()
                .await;
            if let Err(err) = put {
                tracing::warn!(
                    table = %self.table,
                    error = %self.error("PutItem", err),
                    "a delete stamp of a committed batch was not written: the change feed \
                     shows that delete with an empty actor"
                );
            }
        }
        outcomes(planned)
    }

    /// Whether the batch with the caller identity `id` was applied by an earlier call: an
    /// item read holds it, or — when none of its keys has an item — one of its collection
    /// counters' last mover is it (so a batch that only deletes is recognised until another
    /// create or delete moves that counter).
    async fn batch_repeated(
        &self,
        keys: &[Key],
        read: &[Option<Stored>],
        id: &WriteId,
    ) -> Result<bool> {
        if read.iter().flatten().any(|stored| stored.holds(id)) {
            return Ok(true);
        }
        if read.iter().any(Option::is_some) || self.counters != CounterMode::Exact {
            return Ok(false);
        }
        for key in keys {
            let shard = self.counter_shard(key);
            if self.counter_write_id(&shard).await?.as_deref() == Some(id.as_str()) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the batch with identity `w` committed: one of the items it puts holds `w`, or
    /// one of the counters it moves names `w` as its last mover.
    async fn batch_proves(
        &self,
        keys: &[Key],
        planned: &[Planned],
        counters: &[CounterMove],
        w: &WriteId,
    ) -> Result<bool> {
        let written: Vec<Key> = keys
            .iter()
            .zip(planned)
            .filter(|(_, p)| p.puts)
            .map(|(k, _)| k.clone())
            .collect();
        if !written.is_empty()
            && self
                .read_many(&written)
                .await?
                .iter()
                .flatten()
                .any(|stored| stored.holds(w))
        {
            return Ok(true);
        }
        for moved in counters {
            if self.counter_write_id(&moved.shard).await?.as_deref() == Some(w.as_str()) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The guard actions of a batch's writes, merged per guard item, once
/// [`unique::check_batch`] found no two of its writes claiming one value (values held
/// outside the batch are left to the guards' conditions).
fn batch_guards(
    shape: &ItemShape,
    writes: &[Write],
    read: &[Option<Stored>],
    planned: &[Planned],
    foreign: &Foreign,
) -> Result<Vec<GuardAction>> {
    let changes: Vec<ClaimChange<'_>> = writes
        .iter()
        .zip(read)
        .zip(planned)
        .enumerate()
        .filter_map(|(position, ((write, current), planned))| {
            let after = match &planned.outcome {
                WriteOutcome::Written(doc) => Some(doc),
                WriteOutcome::Deleted => None,
                _ => return None,
            };
            Some(ClaimChange {
                position,
                key: write.key(),
                before: current.as_ref().map(|read| &read.doc),
                after,
            })
        })
        .collect();
    let mut unique: HashMap<&str, Vec<CompiledIndex>> = HashMap::new();
    for change in &changes {
        let collection = change.key.collection();
        shape
            .registry
            .refuse_unheld(collection)
            .map_err(|err| batch::failed(change.position, err))?;
        unique.entry(collection).or_insert_with(|| {
            shape
                .registry
                .for_collection(collection)
                .filter(|i| i.compiled.is_unique())
                .map(|i| i.compiled.clone())
                .collect()
        });
    }
    if unique.values().all(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let batch_writes: Vec<BatchWrite<'_>> = changes
        .iter()
        .map(|change| BatchWrite {
            position: change.position,
            key: change.key,
            stored: change.after,
        })
        .collect();
    let none: &[CompiledIndex] = &[];
    unique::check_batch(
        &batch_writes,
        |collection| unique.get(collection).map_or(none, Vec::as_slice),
        |_, _, _| Ok(None),
    )?;
    Ok(guard_actions(
        &shape.registry,
        shape.layout,
        &changes,
        foreign,
    ))
}

/// The error of a write whose condition failed on `current` after the read, or `None` when
/// the write never refuses (`Put`, `Update`: the batch is decided again).
fn refusal(write: &Write, current: Option<Stored>) -> Option<Error> {
    match write {
        Write::Put { .. } | Write::Update { .. } => None,
        Write::Create { .. } | Write::Restore { .. } => Some(Error::AlreadyExists),
        Write::Check { version: None, .. } => Some(Error::AlreadyExists),
        Write::UpdateIf { .. } | Write::DeleteIf { .. } | Write::Check { .. } => {
            Some(match current {
                None => Error::not_found(write.key()),
                Some(c) => Error::Conflict {
                    current: c.doc.version,
                },
            })
        }
    }
}

/// `Unavailable` that says the batch may have been applied.
fn maybe_applied(err: Error) -> Error {
    match err {
        Error::Unavailable {
            message, source, ..
        } => Error::Unavailable {
            message: format!("{message}; the batch may or may not have been applied"),
            source,
            write_id: None,
        },
        other => other,
    }
}

fn outcomes(planned: Vec<Planned>) -> Vec<WriteOutcome> {
    planned.into_iter().map(|p| p.outcome).collect()
}
