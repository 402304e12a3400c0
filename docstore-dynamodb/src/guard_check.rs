//! Checking a site's unique-index guards ([`crate::guards`]) against its documents, and
//! repairing them: part of `recount` (`docstore fsck`), and [`DynamoStore::check_unique`].
//!
//! From one Scan of the site: every value a document claims in a unique index of the table
//! should have exactly one guard naming it, and every guard should name a document claiming
//! its value. A guard missing (or naming a document that does not claim the value) is written;
//! an orphan guard is deleted; documents sharing a value (only possible when guards were lost
//! or removed outside docstore) are reported and left alone: which one keeps the value is the
//! application's decision.

use crate::guards::{GuardKey, HOLDER, holder_of, is_guard_pk};
use crate::index::Registry;
use crate::item::{DATA, Item, PK, SK, VERSION, num, string, text};
use crate::layout::{Layout, Partition, parse_pk};
use crate::store::DynamoStore;
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, Put, TransactWriteItem};
use docstore::{Document, RecountMode, Result, UniqueProblem};
use std::collections::BTreeMap;

/// A document's claim as the scan saw it.
#[derive(Debug)]
struct SeenClaim {
    collection: String,
    index: String,
    id: String,
    /// The document item's partition key and version, to condition a repair on.
    pk: String,
    version: u64,
}

/// What a Scan of one site saw of its claims and guards.
#[derive(Debug, Default)]
pub(crate) struct GuardScan {
    claims: BTreeMap<GuardKey, Vec<SeenClaim>>,
    guards: BTreeMap<GuardKey, String>,
}

/// A problem and the transaction repairing it (empty: left alone).
struct Finding {
    problem: UniqueProblem,
    repair: Vec<TransactWriteItem>,
}

impl GuardScan {
    /// Notes `item` of `site`: a document's claims in the unique indexes of `registry`, or a
    /// guard.
    pub(crate) fn add(
        &mut self,
        registry: &Registry,
        layout: Layout,
        site: &str,
        item: &Item,
    ) -> Result<()> {
        let (pk, sk) = (string(item, PK)?, string(item, SK)?);
        if let Some(holder) = holder_of(item)
            && is_guard_pk(pk)
            && pk.split_once('#').is_some_and(|(of, _)| of == site)
        {
            let key = GuardKey {
                pk: pk.to_owned(),
                sk: sk.to_owned(),
            };
            self.guards.insert(key, holder.to_owned());
            return Ok(());
        }
        let Partition::Documents { collection, .. } = parse_pk(pk) else {
            return Ok(());
        };
        let unique: Vec<_> = registry
            .for_collection(collection)
            .filter(|i| i.compiled.is_unique())
            .collect();
        if unique.is_empty() {
            return Ok(());
        }
        let data =
            serde_json::from_str(string(item, DATA)?).map_err(|e| docstore::Error::Backend {
                message: format!("the data of {pk}/{sk} is not JSON: {e}"),
                source: None,
            })?;
        // Unique indexes hold data fields only: the metadata does not matter to a claim.
        let doc = Document::first(sk, data, "", 0);
        let version = crate::item::number(item, VERSION)?;
        for table_index in unique {
            if let Some(claim) = table_index.compiled.claim(&doc) {
                let key = GuardKey::of(layout, site, &table_index.compiled, &claim);
                self.claims.entry(key).or_default().push(SeenClaim {
                    collection: collection.to_owned(),
                    index: table_index.index.name.clone(),
                    id: sk.to_owned(),
                    pk: pk.to_owned(),
                    version,
                });
            }
        }
        Ok(())
    }

    /// Every disagreement, with the repair of each that can be repaired.
    fn findings(&self, table: &str) -> Result<Vec<Finding>> {
        let mut findings = Vec::new();
        for (key, claims) in &self.claims {
            let held = self.guards.get(key);
            match claims.as_slice() {
                [claim] if held == Some(&claim.id) => {}
                [claim] => findings.push(Finding {
                    problem: UniqueProblem::Missing {
                        collection: claim.collection.clone(),
                        index: claim.index.clone(),
                        id: claim.id.clone(),
                    },
                    repair: put_guard(table, key, claim, held)?,
                }),
                claims => {
                    let mut ids: Vec<String> = claims.iter().map(|c| c.id.clone()).collect();
                    ids.sort();
                    findings.push(Finding {
                        problem: UniqueProblem::Shared {
                            collection: claims[0].collection.clone(),
                            index: claims[0].index.clone(),
                            ids,
                        },
                        repair: Vec::new(),
                    });
                }
            }
        }
        for (key, holder) in &self.guards {
            if self.claims.contains_key(key) {
                continue;
            }
            let mut parts = key.sk.splitn(3, '#');
            let collection = parts.next().unwrap_or_default().to_owned();
            let index = parts.next().unwrap_or_default().to_owned();
            findings.push(Finding {
                problem: UniqueProblem::Orphan {
                    collection,
                    index,
                    holder: holder.clone(),
                },
                repair: vec![delete_guard(table, key, holder)?],
            });
        }
        Ok(findings)
    }
}

/// The guard `key` written for `claim`, conditioned on the document still being the revision
/// the scan saw and on the guard still holding what it held (`held`).
fn put_guard(
    table: &str,
    key: &GuardKey,
    claim: &SeenClaim,
    held: Option<&String>,
) -> Result<Vec<TransactWriteItem>> {
    let check = ConditionCheck::builder()
        .table_name(table)
        .key(PK, text(&claim.pk))
        .key(SK, text(&claim.id))
        .condition_expression("#v = :v")
        .expression_attribute_names("#v", VERSION)
        .expression_attribute_values(":v", num(claim.version))
        .build()
        .map_err(crate::send::build_error)?;
    let mut item = key.item_key();
    item.insert(HOLDER.to_owned(), text(&claim.id));
    let put = Put::builder().table_name(table).set_item(Some(item));
    let put = match held {
        None => put
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK),
        Some(held) => put
            .condition_expression("#h = :held")
            .expression_attribute_names("#h", HOLDER)
            .expression_attribute_values(":held", text(held)),
    };
    let put = put.build().map_err(crate::send::build_error)?;
    Ok(vec![
        TransactWriteItem::builder().condition_check(check).build(),
        TransactWriteItem::builder().put(put).build(),
    ])
}

/// The orphan guard `key` deleted if it still names `holder`.
fn delete_guard(table: &str, key: &GuardKey, holder: &str) -> Result<TransactWriteItem> {
    let delete = Delete::builder()
        .table_name(table)
        .set_key(Some(key.item_key()))
        .condition_expression("#h = :held")
        .expression_attribute_names("#h", HOLDER)
        .expression_attribute_values(":held", text(holder))
        .build()
        .map_err(crate::send::build_error)?;
    Ok(TransactWriteItem::builder().delete(delete).build())
}

impl DynamoStore {
    /// Compares the site's unique-index guards with its documents (one Scan of the table,
    /// like [`recount`](docstore::Store::recount)); with [`RecountMode::Repair`] writes the
    /// missing guards and deletes the orphans, each conditioned on what the scan saw (a guard
    /// or document changed since is left alone: run it again on a quiet site). Documents
    /// sharing a value are reported, never repaired. `docstore fsck --repair` repairs guards
    /// too (its `recount`).
    pub async fn check_unique(&self, site: &str, mode: RecountMode) -> Result<Vec<UniqueProblem>> {
        docstore::Key::new(site, "c", "i")?;
        let registry = self.registry().await?;
        let layout = self.layout().await?;
        let mut scan = GuardScan::default();
        let mut pages = crate::table_scan::TableScan::new(self, None);
        let prefix = format!("{site}#");
        while let Some(items) = pages
            .next_page(|request| {
                request
                    .filter_expression("begins_with(#pk, :prefix)")
                    .expression_attribute_names("#pk", PK)
                    .expression_attribute_values(":prefix", text(&prefix))
            })
            .await?
        {
            for item in &items {
                scan.add(&registry, layout, site, item)?;
            }
        }
        self.settle_guards(site, &scan, mode).await
    }

    /// The problems `scan` shows, repaired when `mode` says so.
    pub(crate) async fn settle_guards(
        &self,
        site: &str,
        scan: &GuardScan,
        mode: RecountMode,
    ) -> Result<Vec<UniqueProblem>> {
        let findings = scan.findings(&self.table)?;
        for finding in &findings {
            let repairable = !finding.repair.is_empty() && mode == RecountMode::Repair;
            let repaired = repairable && self.repair(finding.repair.clone()).await?;
            tracing::warn!(site, problem = ?finding.problem, repaired, "unique-index guard");
        }
        Ok(findings.into_iter().map(|f| f.problem).collect())
    }

    /// Sends one repair; `false` when its condition failed (changed since the scan).
    async fn repair(&self, actions: Vec<TransactWriteItem>) -> Result<bool> {
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(actions))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_transaction_canceled_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(self.error("TransactWriteItems", err)),
        }
    }
}
