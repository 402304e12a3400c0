//! The writes, as seed 001 describes them, and what each does when the SDK resends a request
//! whose answer was lost (see the crate docs for the summary).

use crate::attempts::Attempts;
use crate::backoff::Backoff;
use crate::item::{
    CREATED_AT, CREATED_BY, DATA, Item, PK, UPDATED_AT, UPDATED_BY, VERSION, WRITE_ID,
    check_item_size, data_text, document_item, is_document, key_of, num, parse_document, text,
};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use docstore::clock::next_updated_at;
use docstore::document::{check_restorable, check_size};
use docstore::{Data, Document, Error, Key, Result, WriteId};

/// How often `update` (and `put` and `delete`, which never report a conflict) try before
/// giving up under contention. Generous: with jittered backoff capped at 250 ms, 16 writers
/// hammering one document all get through (a conformance case), and a caller sees
/// `Conflict` only under contention that lasts for many seconds.
const MAX_TRIES: u32 = 100;

/// The condition that the item is still the revision that was read: a delete and re-create
/// in between changes `created_at`, any write changes `version`.
const SAME_REVISION: &str = "#v = :v AND #ca = :ca AND #ua = :ua";

/// What a conditional write did.
enum Outcome {
    /// The write was applied.
    Written,
    /// The condition failed on `item` (`None`: there is no document). `resent`: the SDK had
    /// sent the write more than once, so an earlier attempt may have been applied.
    ConditionFailed { item: Option<Item>, resent: bool },
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

    /// `create`: one conditional PutItem (`attribute_not_exists(pk)`) storing a fresh write
    /// identity `w`, then the counter.
    pub(crate) async fn create_document(
        &self,
        key: &Key,
        data: Data,
        actor: &str,
    ) -> Result<Document> {
        check_size(&data, self.options.max_doc_bytes)?;
        let now = self.options.clock.now();
        let doc = Document {
            id: key.id().to_owned(),
            data,
            created_at: now,
            updated_at: now,
            created_by: actor.to_owned(),
            updated_by: actor.to_owned(),
            version: 1,
        };
        self.insert_new(key, &doc).await?;
        Ok(doc)
    }

    /// `restore`: `doc` written exactly as given, like `create`.
    pub(crate) async fn restore_document(&self, key: &Key, doc: &Document) -> Result<()> {
        check_restorable(key, doc, self.options.max_doc_bytes)?;
        self.insert_new(key, doc).await
    }

    /// Writes `doc` where no document exists: quota, one conditional PutItem
    /// (`attribute_not_exists(pk)`) with a fresh write identity `w`, then the counter. A failed
    /// condition whose item is exactly the one this call wrote, `w` included, is this call's
    /// own earlier attempt whose answer was lost: success.
    async fn insert_new(&self, key: &Key, doc: &Document) -> Result<()> {
        let w = WriteId::random();
        let item = document_item(key, doc, Some(&w));
        let data_len = crate::item::string(&item, DATA)?.len();
        check_item_size(key, data_len, doc.created_by.len(), doc.updated_by.len())?;
        if self.quota_reached(key.site()).await? {
            // A taken id is AlreadyExists even in a full site.
            if self.read(key).await?.is_some() {
                return Err(Error::AlreadyExists);
            }
            return Err(Error::QuotaExceeded {
                limit: self.options.max_docs_per_site.unwrap_or_default(),
            });
        }
        let condition = "attribute_not_exists(#pk)";
        match self
            .put_conditionally(item.clone(), condition, &[("#pk", PK)], &[])
            .await?
        {
            Outcome::Written => {}
            Outcome::ConditionFailed { item: old, .. } if is_own_write(old.as_ref(), &item) => {}
            // Our lost attempt may have created it and another write changed it since: the
            // creation stamp is ours, but a stamp alone does not identify a write.
            // The counter still counts it: with this call's stamp it is almost surely its own.
            Outcome::ConditionFailed {
                item: Some(old),
                resent: true,
            } if same_creation(&old, doc) => {
                self.bump_counter(key.site(), key.collection(), 1).await;
                return Err(unknown_outcome("create", key));
            }
            Outcome::ConditionFailed { .. } => return Err(Error::AlreadyExists),
        }
        self.bump_counter(key.site(), key.collection(), 1).await;
        Ok(())
    }

    /// `put`: one UpdateItem that keeps `created_*` with `if_not_exists`, adds 1 to the
    /// version and removes `w`. It is conditioned on `updated_at` not being ahead of this
    /// call's clock (else it is sent again at the stored `updated_at`, so time never goes
    /// back), and, when the site holds its quota, on the document existing.
    pub(crate) async fn put_document(
        &self,
        key: &Key,
        data: Data,
        actor: &str,
    ) -> Result<Document> {
        check_size(&data, self.options.max_doc_bytes)?;
        let data = data_text(&data);
        check_item_size(key, data.len(), actor.len(), actor.len())?;
        let quota_reached = self.quota_reached(key.site()).await?;
        let condition = if quota_reached {
            "attribute_exists(#pk) AND #ua <= :now"
        } else {
            "attribute_not_exists(#pk) OR #ua <= :now"
        };
        let mut now = self.options.clock.now();
        let mut backoff = Backoff::new();
        for _ in 0..MAX_TRIES {
            let attempts = Attempts::default();
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key_of(key)))
                .update_expression(
                    "SET #data = :data, #ua = :now, #ub = :actor, \
                     #ca = if_not_exists(#ca, :now), #cb = if_not_exists(#cb, :actor) \
                     REMOVE #w ADD #v :one",
                )
                .condition_expression(condition)
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#data", DATA)
                .expression_attribute_names("#ua", UPDATED_AT)
                .expression_attribute_names("#ub", UPDATED_BY)
                .expression_attribute_names("#ca", CREATED_AT)
                .expression_attribute_names("#cb", CREATED_BY)
                .expression_attribute_names("#w", WRITE_ID)
                .expression_attribute_names("#v", VERSION)
                .expression_attribute_values(":data", text(&data))
                .expression_attribute_values(":now", num(now))
                .expression_attribute_values(":actor", text(actor))
                .expression_attribute_values(":one", num(1))
                .return_values(ReturnValue::AllNew)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .customize()
                .interceptor(attempts.clone())
                .send()
                .await;
            let old = match result {
                Ok(output) => {
                    let item = output.attributes.unwrap_or_default();
                    let (doc, _) = parse_document(&item)?;
                    // Version 1: this put created the document. Version 2 after a resend,
                    // with this call's creation stamp: the lost attempt created it.
                    let created = doc.version == 1
                        || (attempts.resent()
                            && doc.version == 2
                            && doc.created_at == now
                            && doc.created_by == actor);
                    if created {
                        self.bump_counter(key.site(), key.collection(), 1).await;
                    }
                    return Ok(doc);
                }
                Err(err) => match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(e)) => {
                        e.item().filter(|item| is_document(item)).cloned()
                    }
                    _ => return Err(self.error("UpdateItem", err)),
                },
            };
            let Some(old) = old else {
                // Only the quota condition fails on a missing document.
                return Err(Error::QuotaExceeded {
                    limit: self.options.max_docs_per_site.unwrap_or_default(),
                });
            };
            let (old, _) = parse_document(&old)?;
            if old.updated_at > now {
                now = old.updated_at;
            } else {
                backoff.wait().await;
                now = next_updated_at(self.options.clock.now(), Some(now));
            }
        }
        Err(Error::Unavailable {
            message: format!("put of {key} kept meeting a moving updated_at"),
            source: None,
        })
    }

    /// `update`: read, merge, write conditioned on the revision read (version, created_at,
    /// updated_at), retried with jittered backoff when another write got in between.
    pub(crate) async fn update_document(
        &self,
        key: &Key,
        patch: &Data,
        actor: &str,
    ) -> Result<Document> {
        let mut backoff = Backoff::new();
        let mut seen = 0;
        for _ in 0..MAX_TRIES {
            let Some((current, _)) = self.read(key).await? else {
                return Err(Error::NotFound);
            };
            seen = current.version;
            let (doc, item) = self.patched(key, &current, patch, actor, None)?;
            match self
                .put_conditionally(
                    item,
                    SAME_REVISION,
                    &revision_names(),
                    &revision_values(&current),
                )
                .await?
            {
                Outcome::Written => return Ok(doc),
                // Gone since the read (a resend of ours would find our own write instead).
                Outcome::ConditionFailed { item: None, .. } => return Err(Error::NotFound),
                // Changed since the read, or our own lost attempt: read and merge again.
                Outcome::ConditionFailed { item: Some(_), .. } => backoff.wait().await,
            }
        }
        Err(Error::Conflict { current: seen })
    }

    /// `update_if`: read, check the version, merge, and one write conditioned on the revision
    /// read, with a fresh write identity `w`; a failed condition on exactly the item this call
    /// wrote is its own earlier attempt: success.
    pub(crate) async fn update_document_if(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: u64,
        actor: &str,
    ) -> Result<Document> {
        let Some((current, _)) = self.read(key).await? else {
            return Err(Error::NotFound);
        };
        if current.version != expected_version {
            return Err(Error::Conflict {
                current: current.version,
            });
        }
        let w = WriteId::random();
        let (doc, item) = self.patched(key, &current, patch, actor, Some(&w))?;
        match self
            .put_conditionally(
                item.clone(),
                SAME_REVISION,
                &revision_names(),
                &revision_values(&current),
            )
            .await?
        {
            Outcome::Written => Ok(doc),
            Outcome::ConditionFailed { item: old, .. } if is_own_write(old.as_ref(), &item) => {
                Ok(doc)
            }
            // Our lost attempt may have been applied, and then overwritten or deleted by
            // another write before the resend: nothing tells.
            Outcome::ConditionFailed {
                item: None,
                resent: true,
            } => Err(unknown_outcome("update_if", key)),
            Outcome::ConditionFailed {
                item: Some(old),
                resent: true,
            } if may_follow(&old, &current)? => Err(unknown_outcome("update_if", key)),
            Outcome::ConditionFailed { item: None, .. } => Err(Error::NotFound),
            Outcome::ConditionFailed {
                item: Some(old), ..
            } => Err(Error::Conflict {
                current: parse_document(&old)?.0.version,
            }),
        }
    }

    /// `delete` (`expected_version: None`) and `delete_if`: read, then one DeleteItem
    /// conditioned on the revision read, then the counter. `Ok(false)`: there was no document.
    ///
    /// When the condition fails because the document is gone and the SDK had sent the delete
    /// more than once, the document was there at the read and this call's lost attempt
    /// removed it: it reports the delete as done.
    pub(crate) async fn delete_document(
        &self,
        key: &Key,
        expected_version: Option<u64>,
    ) -> Result<bool> {
        let mut backoff = Backoff::new();
        for _ in 0..MAX_TRIES {
            let Some((current, _)) = self.read(key).await? else {
                return Ok(false);
            };
            if let Some(expected) = expected_version
                && expected != current.version
            {
                return Err(Error::Conflict {
                    current: current.version,
                });
            }
            let attempts = Attempts::default();
            let mut request = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key_of(key)))
                .condition_expression(SAME_REVISION)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                );
            for (name, value) in revision_names() {
                request = request.expression_attribute_names(name, value);
            }
            for (name, value) in revision_values(&current) {
                request = request.expression_attribute_values(name, value);
            }
            let result = request
                .customize()
                .interceptor(attempts.clone())
                .send()
                .await;
            let old = match result {
                Ok(_) => None,
                Err(err) => match err.as_service_error() {
                    Some(DeleteItemError::ConditionalCheckFailedException(e)) => {
                        Some(e.item().filter(|item| is_document(item)).cloned())
                    }
                    _ => return Err(self.error("DeleteItem", err)),
                },
            };
            match old {
                // Deleted now.
                None => {}
                // Gone after a resend: the document was there at the read, so this call's
                // lost attempt removed it.
                Some(None) if attempts.resent() => {}
                // Deleted by someone else between the read and the write.
                Some(None) => return Ok(false),
                Some(Some(other)) => {
                    if expected_version.is_some() {
                        return Err(Error::Conflict {
                            current: parse_document(&other)?.0.version,
                        });
                    }
                    backoff.wait().await;
                    continue;
                }
            }
            self.bump_counter(key.site(), key.collection(), -1).await;
            return Ok(true);
        }
        Err(Error::Unavailable {
            message: format!("delete of {key} kept meeting concurrent writes"),
            source: None,
        })
    }

    /// `current` with `patch` merged as the next version by `actor`, and its item.
    fn patched(
        &self,
        key: &Key,
        current: &Document,
        patch: &Data,
        actor: &str,
        w: Option<&WriteId>,
    ) -> Result<(Document, Item)> {
        let mut data = current.data.clone();
        docstore::merge_patch(&mut data, patch);
        check_size(&data, self.options.max_doc_bytes)?;
        check_item_size(
            key,
            data_text(&data).len(),
            current.created_by.len(),
            actor.len(),
        )?;
        let doc = Document {
            id: current.id.clone(),
            data,
            created_at: current.created_at,
            updated_at: next_updated_at(self.options.clock.now(), Some(current.updated_at)),
            created_by: current.created_by.clone(),
            updated_by: actor.to_owned(),
            version: current.version + 1,
        };
        let item = document_item(key, &doc, w);
        Ok((doc, item))
    }

    /// One PutItem of `item` under `condition`, asking for the item the condition failed on.
    async fn put_conditionally(
        &self,
        item: Item,
        condition: &str,
        names: &[(&str, &str)],
        values: &[(&str, aws_sdk_dynamodb::types::AttributeValue)],
    ) -> Result<Outcome> {
        let attempts = Attempts::default();
        let mut request = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for (name, value) in names {
            request = request.expression_attribute_names(*name, *value);
        }
        for (name, value) in values {
            request = request.expression_attribute_values(*name, value.clone());
        }
        match request
            .customize()
            .interceptor(attempts.clone())
            .send()
            .await
        {
            Ok(_) => Ok(Outcome::Written),
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(e)) => {
                    Ok(Outcome::ConditionFailed {
                        item: e.item().filter(|item| is_document(item)).cloned(),
                        resent: attempts.resent(),
                    })
                }
                _ => Err(self.error("PutItem", err)),
            },
        }
    }
}

/// Whether the item a condition failed on is exactly `written`, write identity included.
fn is_own_write(old: Option<&Item>, written: &Item) -> bool {
    let Some(old) = old else { return false };
    match (parse_document(old), parse_document(written)) {
        (Ok(old), Ok(written)) => written.1.is_some() && old == written,
        _ => false,
    }
}

/// Whether `old` carries the creation stamp (`created_at`, `created_by`) of `doc`.
fn same_creation(old: &Item, doc: &Document) -> bool {
    parse_document(old)
        .is_ok_and(|(old, _)| old.created_at == doc.created_at && old.created_by == doc.created_by)
}

/// Whether `old` can be a later revision of the document `current` was read from: same
/// creation, a higher version.
fn may_follow(old: &Item, current: &Document) -> Result<bool> {
    let (old, _) = parse_document(old)?;
    Ok(old.created_at == current.created_at && old.version > current.version)
}

/// The answer to a write whose lost attempt may or may not have been applied.
fn unknown_outcome(call: &str, key: &Key) -> Error {
    Error::Unavailable {
        message: format!(
            "the answer to this {call} of {key} was lost and the document changed before the \
             SDK's resend: the {call} may or may not have been applied; read the document to \
             find out"
        ),
        source: None,
    }
}

fn revision_names() -> [(&'static str, &'static str); 3] {
    [("#v", VERSION), ("#ca", CREATED_AT), ("#ua", UPDATED_AT)]
}

fn revision_values(doc: &Document) -> [(&'static str, aws_sdk_dynamodb::types::AttributeValue); 3] {
    [
        (":v", num(doc.version)),
        (":ca", num(doc.created_at)),
        (":ua", num(doc.updated_at)),
    ]
}
