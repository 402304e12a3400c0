//! One conditional document write, sent the way the counter mode asks: alone (PutItem or
//! DeleteItem), or with its collection counter in one `TransactWriteItems` (exact counters),
//! and what came of it, read from the answer without guessing.

use crate::attempts::Attempts;
use crate::counters::counter_update;
use crate::errors::{Failure, classify};
use crate::guards::GuardAction;
use crate::history::Stored;
use crate::item::{CREATED_AT, Item, PK, UPDATED_AT, VERSION, is_document, key_of, num};
use crate::layout::Layout;
use crate::store::DynamoStore;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use docstore::config::CounterMode;
use docstore::{Error, Key, Result, WriteId};
use std::collections::HashMap;

/// The condition a document write is sent under.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expect<'a> {
    /// No document at the key.
    Absent,
    /// Exactly the revision that was read (version, `created_at`, `updated_at`).
    Revision(&'a Stored),
}

/// Why a `TransactWriteItems` was not applied.
#[derive(Debug)]
pub(crate) enum TransactionFailure {
    /// The document action at `index` met a failed condition; the item, when returned.
    Refused { index: usize, item: Option<Item> },
    /// Guard actions met failed conditions: each one's position counted from the first
    /// guard ([`crate::guards`]) and its item, when returned.
    Guarded { refused: Vec<RefusedGuard> },
    /// An item written with the document met its failed condition (a delete's record
    /// appended without a read, [`crate::deleted::record_append`]).
    CompanionRefused,
    /// A competing transaction or throttling: send it again.
    Contended,
    /// Every answer was lost and the SDK gave up: it may have been applied.
    Unknown(Error),
}

/// A guard action whose condition failed: its position among the guards, and the guard
/// item as it stood, when the answer carried it.
#[derive(Debug)]
pub(crate) struct RefusedGuard {
    pub(crate) at: usize,
    pub(crate) item: Option<Item>,
}

/// What to do to the document.
#[derive(Clone, Debug)]
pub(crate) enum Action {
    /// Write this whole item.
    Put(Item),
    /// Delete the document.
    Delete,
}

/// An item a write puts, deletes or updates in its own `TransactWriteItems`, so that it
/// exists exactly when the write committed: a delete's stamp ([`crate::stamps`]) and record
/// ([`crate::deleted`]), a document's expiry marker ([`crate::expiring`]).
#[derive(Clone, Debug)]
pub(crate) enum Companion {
    /// Put this item.
    Put(Item),
    /// Delete the item with this key.
    Delete(Item),
    /// This update, with its own condition (a delete record's append,
    /// [`crate::deleted::record_append`]).
    Update(aws_sdk_dynamodb::types::Update),
}

impl Companion {
    /// The `TransactWriteItems` action.
    pub(crate) fn transact_item(&self, table: &str) -> Result<TransactWriteItem> {
        Ok(match self {
            Companion::Put(item) => {
                let put = Put::builder()
                    .table_name(table)
                    .set_item(Some(item.clone()))
                    .build()
                    .map_err(build_error)?;
                TransactWriteItem::builder().put(put).build()
            }
            Companion::Delete(key) => {
                let delete = Delete::builder()
                    .table_name(table)
                    .set_key(Some(key.clone()))
                    .build()
                    .map_err(build_error)?;
                TransactWriteItem::builder().delete(delete).build()
            }
            Companion::Update(update) => {
                TransactWriteItem::builder().update(update.clone()).build()
            }
        })
    }
}

/// What one write did.
#[derive(Debug)]
pub(crate) enum Sent {
    /// Applied (after resends, possibly, which the service recognised by the client request
    /// token).
    Applied,
    /// The document's condition failed on `current` (`None`: no document). `resent`: the
    /// request was sent more than once, so an earlier attempt may have been applied.
    Refused {
        current: Option<Stored>,
        resent: bool,
    },
    /// The document's condition held but the guard at `at` of the write's guards refused
    /// it ([`crate::guards::judge`] says why); `guard`: the guard item, when returned.
    /// `resent` as for `Refused`.
    Guarded {
        at: usize,
        guard: Option<Item>,
        resent: bool,
    },
    /// The last attempt was refused because of a competing transaction or throttling: send it
    /// again. `maybe_applied`: an earlier attempt of the same request lost its answer (see
    /// [`Attempts::may_have_applied`]), so the write may stand already — the caller checks
    /// for its identity before it writes again.
    Contended { maybe_applied: bool },
    /// Every answer was lost and the SDK gave up (timeouts, 5xx): the write may or may not
    /// have been applied.
    Unknown(Error),
}

/// How a lone `PutItem` or `DeleteItem` failed.
enum SingleFailed {
    /// Its condition failed: the item as it stood, when DynamoDB returned it.
    Refused(Option<Item>),
    /// A transaction was writing the item.
    Contended,
    /// Anything else, as [`DynamoStore::single_failure`] answers it.
    Other(Result<Sent>),
}

impl Sent {
    /// `self`, with a refusal for contention marked when an attempt may have been applied.
    fn noting(self, attempts: &Attempts) -> Sent {
        match self {
            Sent::Contended { .. } => Sent::Contended {
                maybe_applied: attempts.may_have_applied(),
            },
            other => other,
        }
    }
}

impl DynamoStore {
    /// Sends `action` at `key` under `expect`, moving the collection counter by `delta`
    /// (0, 1 or -1) as the counter mode says, with the write's unique-index `guards` and
    /// expiry markers (`markers`, [`crate::expiring`]). `w` is the call's write identity: it
    /// goes on the counter item in exact mode. A write with guards or markers is always a
    /// transaction (fast counters still move after it).
    #[allow(clippy::too_many_arguments)] // the parts of one write
    pub(crate) async fn send_write(
        &self,
        key: &Key,
        action: &Action,
        expect: Expect<'_>,
        delta: i64,
        w: &WriteId,
        guards: &[GuardAction],
        markers: Vec<Companion>,
    ) -> Result<Sent> {
        let exact = self.counters == CounterMode::Exact;
        if (delta != 0 && exact) || !guards.is_empty() || !markers.is_empty() {
            let moved = if exact { delta } else { 0 };
            let sent = self
                .send_transaction(key, action, expect, moved, w, markers, guards)
                .await?;
            if moved != delta && matches!(sent, Sent::Applied) {
                self.bump_counter(key, delta).await;
            }
            return Ok(sent);
        }
        let sent = self.send_single(key, action, expect).await?;
        if delta != 0 && matches!(sent, Sent::Applied) {
            self.bump_counter(key, delta).await;
        }
        Ok(sent)
    }

    /// A delete with the items that go with it — its stamp ([`crate::stamps`]) and, for a
    /// caller-identified delete, the record of its identity ([`crate::deleted`]), the removal
    /// of its expiry marker ([`crate::expiring`]) — and the
    /// counter move when `delta` is not 0 (exact counters; fast counters pass 0 and move it
    /// after), in one `TransactWriteItems` in either counter mode: those items exist exactly
    /// when the delete happened.
    pub(crate) async fn send_delete(
        &self,
        key: &Key,
        expect: Expect<'_>,
        delta: i64,
        w: &WriteId,
        with: Vec<Companion>,
        guards: &[GuardAction],
    ) -> Result<Sent> {
        self.send_transaction(key, &Action::Delete, expect, delta, w, with, guards)
            .await
    }

    /// A lone PutItem or DeleteItem.
    async fn send_single(&self, key: &Key, action: &Action, expect: Expect<'_>) -> Result<Sent> {
        let layout = self.layout().await?;
        let attempts = Attempts::default();
        let (condition, names, values) = condition(expect);
        let result = match action {
            Action::Put(item) => self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item.clone()))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(values)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .customize()
                .interceptor(attempts.clone())
                .send()
                .await
                .map(|_| ())
                .map_err(|err| match err.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(e)) => {
                        SingleFailed::Refused(e.item().cloned())
                    }
                    Some(PutItemError::TransactionConflictException(_)) => SingleFailed::Contended,
                    _ => SingleFailed::Other(self.single_failure("PutItem", err)),
                }),
            Action::Delete => self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key_of(key, layout)))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(values)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .customize()
                .interceptor(attempts.clone())
                .send()
                .await
                .map(|_| ())
                .map_err(|err| match err.as_service_error() {
                    Some(DeleteItemError::ConditionalCheckFailedException(e)) => {
                        SingleFailed::Refused(e.item().cloned())
                    }
                    Some(DeleteItemError::TransactionConflictException(_)) => {
                        SingleFailed::Contended
                    }
                    _ => SingleFailed::Other(self.single_failure("DeleteItem", err)),
                }),
        };
        let sent = match result {
            Ok(()) => Sent::Applied,
            Err(SingleFailed::Refused(item)) => Sent::Refused {
                current: self.refused_on(key, item).await?,
                resent: attempts.resent(),
            },
            Err(SingleFailed::Contended) => Sent::Contended {
                maybe_applied: false,
            },
            Err(SingleFailed::Other(failure)) => failure?,
        };
        Ok(sent.noting(&attempts))
    }

    /// The document write, its guards, the counter move and the items `with` it in one
    /// `TransactWriteItems`, with a fresh client request token (the SDK resends it unchanged,
    /// so DynamoDB recognises a resend of a committed transaction and answers success without
    /// applying it again).
    #[allow(clippy::too_many_arguments)] // the parts of one transaction
    async fn send_transaction(
        &self,
        key: &Key,
        action: &Action,
        expect: Expect<'_>,
        delta: i64,
        w: &WriteId,
        with: Vec<Companion>,
        guards: &[GuardAction],
    ) -> Result<Sent> {
        let guarded = match action {
            Action::Put(item) => Guarded::Put(item.clone()),
            Action::Delete => Guarded::Delete,
        };
        let layout = self.layout().await?;
        let mut actions = vec![transact_action(&self.table, layout, key, guarded, expect)?];
        for guard in guards {
            actions.push(guard.transact_item(&self.table)?);
        }
        if delta != 0 {
            let shard = self.counter_shard(key);
            let counter = counter_update(&self.table, layout, &shard, delta, Some(w))?;
            actions.push(TransactWriteItem::builder().update(counter).build());
        }
        for companion in &with {
            actions.push(companion.transact_item(&self.table)?);
        }
        let attempts = Attempts::default();
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(actions))
            .client_request_token(WriteId::random().as_str())
            .customize()
            .interceptor(attempts.clone())
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(Sent::Applied),
            Err(err) => err,
        };
        Ok(match self.transaction_failure(err, 1, guards.len())? {
            TransactionFailure::Refused { item, .. } => Sent::Refused {
                current: self.refused_on(key, item).await?,
                resent: attempts.resent(),
            },
            TransactionFailure::Guarded { mut refused } => {
                let RefusedGuard { at, item } = refused.swap_remove(0);
                Sent::Guarded {
                    at,
                    guard: self.refused_guard(&guards[at], item).await?,
                    resent: attempts.resent(),
                }
            }
            // Refused as a whole: the document as it stands now.
            TransactionFailure::CompanionRefused => Sent::Refused {
                current: self.read(key).await?,
                resent: attempts.resent(),
            },
            TransactionFailure::Contended => Sent::Contended {
                maybe_applied: attempts.may_have_applied(),
            },
            TransactionFailure::Unknown(err) => Sent::Unknown(err),
        })
    }

    /// Reads a failed `TransactWriteItems` whose first `documents` actions are document
    /// writes, the next `guards` unique-index guards and the rest counter moves and items
    /// written with them: which action was refused (a document before a guard, so a
    /// resend that meets its own committed write is settled as a document refusal), or
    /// whether to send again.
    pub(crate) fn transaction_failure(
        &self,
        err: SdkError<TransactWriteItemsError, HttpResponse>,
        documents: usize,
        guards: usize,
    ) -> Result<TransactionFailure> {
        let reasons = match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
                e.cancellation_reasons().to_vec()
            }
            Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                return Ok(TransactionFailure::Contended);
            }
            _ => {
                return match self.single_failure("TransactWriteItems", err)? {
                    Sent::Unknown(err) => Ok(TransactionFailure::Unknown(err)),
                    _ => Ok(TransactionFailure::Contended),
                };
            }
        };
        let code = |at: usize| reasons.get(at).and_then(|r| r.code()).unwrap_or("None");
        let refused = |at: usize| code(at) == "ConditionalCheckFailed";
        if let Some(index) = (0..documents).find(|&i| refused(i)) {
            return Ok(TransactionFailure::Refused {
                index,
                item: reasons[index].item().cloned(),
            });
        }
        let guards_refused: Vec<RefusedGuard> = (documents..documents + guards)
            .filter(|&i| refused(i))
            .map(|i| RefusedGuard {
                at: i - documents,
                item: reasons[i].item().cloned(),
            })
            .collect();
        if !guards_refused.is_empty() {
            return Ok(TransactionFailure::Guarded {
                refused: guards_refused,
            });
        }
        if (documents + guards..reasons.len()).any(refused) {
            return Ok(TransactionFailure::CompanionRefused);
        }
        let contended = [
            "TransactionConflict",
            "ThrottlingError",
            "ProvisionedThroughputExceeded",
        ];
        if reasons
            .iter()
            .any(|r| r.code().is_some_and(|c| contended.contains(&c)))
        {
            return Ok(TransactionFailure::Contended);
        }
        let codes: Vec<&str> = (0..reasons.len()).map(code).collect();
        Err(Error::Backend {
            message: format!(
                "DynamoDB TransactWriteItems on `{}` was cancelled: {codes:?}",
                self.table
            ),
            source: Some(Box::new(err)),
        })
    }

    /// The document a condition failed on: the item the answer carried (`ALL_OLD`), or, for a
    /// service that leaves it out of a transaction's cancellation reasons, a consistent read.
    async fn refused_on(&self, key: &Key, item: Option<Item>) -> Result<Option<Stored>> {
        match item {
            Some(item) if is_document(&item) => Ok(Some(Stored::from_item(&item)?)),
            _ => self.read(key).await,
        }
    }

    /// The guard `action` was refused on: the item the answer carried (`ALL_OLD`), or a
    /// consistent read when the service left it out (`None`: gone since).
    pub(crate) async fn refused_guard(
        &self,
        action: &GuardAction,
        item: Option<Item>,
    ) -> Result<Option<Item>> {
        match item {
            Some(item) if crate::guards::holder_of(&item).is_some() => Ok(Some(item)),
            _ => self.consistent_get(action.key.item_key()).await,
        }
    }

    /// A failed lone write: contention and throttling are `Contended`; a lost answer the SDK
    /// gave up on is `Unknown`; anything else is an error.
    fn single_failure<E>(&self, operation: &str, err: SdkError<E, HttpResponse>) -> Result<Sent>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match classify(&err) {
            Failure::NotApplied => Ok(Sent::Contended {
                maybe_applied: false,
            }),
            Failure::Unknown => Ok(Sent::Unknown(self.error(operation, err))),
            Failure::Permanent => Err(self.error(operation, err)),
        }
    }
}

/// What one guarded action of a `TransactWriteItems` does to its document.
#[derive(Debug)]
pub(crate) enum Guarded {
    /// Write this whole item.
    Put(Item),
    /// Delete the document.
    Delete,
    /// Only check the condition.
    Check,
}

/// The `TransactWriteItems` action doing `guarded` at `key` under `expect`, answering a failed
/// condition with the item as it was (`ALL_OLD`): the one builder of document actions for
/// single transactional writes and `write_all`.
pub(crate) fn transact_action(
    table: &str,
    layout: Layout,
    key: &Key,
    guarded: Guarded,
    expect: Expect<'_>,
) -> Result<TransactWriteItem> {
    let (condition, names, values) = condition(expect);
    let all_old = ReturnValuesOnConditionCheckFailure::AllOld;
    let action = TransactWriteItem::builder();
    let action = match guarded {
        Guarded::Put(item) => action.put(
            Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(values)
                .return_values_on_condition_check_failure(all_old)
                .build()
                .map_err(build_error)?,
        ),
        Guarded::Delete => action.delete(
            Delete::builder()
                .table_name(table)
                .set_key(Some(key_of(key, layout)))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(values)
                .return_values_on_condition_check_failure(all_old)
                .build()
                .map_err(build_error)?,
        ),
        Guarded::Check => action.condition_check(
            ConditionCheck::builder()
                .table_name(table)
                .set_key(Some(key_of(key, layout)))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(values)
                .return_values_on_condition_check_failure(all_old)
                .build()
                .map_err(build_error)?,
        ),
    };
    Ok(action.build())
}

/// The condition expression of `expect`, its names and values.
pub(crate) fn condition(
    expect: Expect<'_>,
) -> (
    &'static str,
    HashMap<String, String>,
    Option<HashMap<String, AttributeValue>>,
) {
    match expect {
        Expect::Absent => (
            "attribute_not_exists(#pk)",
            HashMap::from([("#pk".to_owned(), PK.to_owned())]),
            None,
        ),
        Expect::Revision(read) => (
            "#v = :v AND #ca = :ca AND #ua = :ua",
            HashMap::from([
                ("#v".to_owned(), VERSION.to_owned()),
                ("#ca".to_owned(), CREATED_AT.to_owned()),
                ("#ua".to_owned(), UPDATED_AT.to_owned()),
            ]),
            Some(HashMap::from([
                (":v".to_owned(), num(read.doc.version)),
                (":ca".to_owned(), num(read.doc.created_at)),
                (":ua".to_owned(), num(read.doc.updated_at)),
            ])),
        ),
    }
}

/// A transaction refused by the condition of an item that the sender wrote without one:
/// not a refusal the sender can settle.
pub(crate) fn companion_refused(table: &str) -> Error {
    Error::Backend {
        message: format!(
            "DynamoDB TransactWriteItems on `{table}` was cancelled by a condition on an item \
             written without one"
        ),
        source: None,
    }
}

pub(crate) fn build_error(err: aws_sdk_dynamodb::error::BuildError) -> Error {
    Error::Backend {
        message: format!("building a DynamoDB request failed: {err}"),
        source: Some(Box::new(err)),
    }
}
