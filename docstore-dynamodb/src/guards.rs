//! Unique indexes as guard items (`docs/contract.md`, "Unique indexes").
//!
//! Every value a document claims in a unique index of its collection
//! ([`CompiledIndex::claim`]) has one guard item, written in the same `TransactWriteItems` as
//! the document:
//!
//! | attribute | value |
//! |---|---|
//! | `pk` | `<site>#__unique`, then `#<p>` for the partition `p > 0` of the claim's hash |
//! | `sk` | `<collection>#<index>#<SHA-256 of the claim, hex>` |
//! | `holder` | the id of the document holding the value |
//!
//! The claim is hashed so that a value of any length fits a sort key; the partition spreads a
//! site's guards like its documents ([`crate::layout`]). A write that claims a value puts its
//! guard conditioned `attribute_not_exists(pk) OR holder = :id`; a write that gives a value up
//! (the field changed, or the document is deleted) deletes the guard conditioned the same way
//! (a document written before its index was built may have none). A write whose claims do
//! not change touches no guard. A batch's actions on one guard are merged into one (DynamoDB
//! refuses two actions on an item in a transaction): a value moved from document B to A is
//! one Put conditioned `attribute_not_exists(pk) OR holder = :a OR holder = :b`.
//!
//! The partition name starts with `__`, so guards are none of a site's collections: the
//! change feed, `sites`, `collections`, counts, `recount` and export pass over them
//! ([`crate::layout::parse_pk`]).

use crate::index::Registry;
use crate::item::{Item, PK, SK, text};
use crate::layout::Layout;
use crate::send::build_error;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use docstore::index::CompiledIndex;
use docstore::{Document, Error, Key, Result};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What follows the site in the partition keys of its guard items.
pub(crate) const UNIQUE: &str = "__unique";
/// The attribute naming the document that holds a guard's value.
pub(crate) const HOLDER: &str = "holder";

/// The primary key of one guard item.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GuardKey {
    pub(crate) pk: String,
    pub(crate) sk: String,
}

impl GuardKey {
    /// The guard of `claim` in `index` for `site`'s collection, in a table of `layout`.
    pub(crate) fn of(layout: Layout, site: &str, index: &CompiledIndex, claim: &[u8]) -> Self {
        let digest = Sha256::digest(claim);
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        let spread = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
        let partition = spread % layout.partitions.max(1);
        let base = format!("{site}#{UNIQUE}");
        GuardKey {
            pk: match partition {
                0 => base,
                p => format!("{base}#{p}"),
            },
            sk: format!("{}#{}#{hex}", index.collection(), index.name()),
        }
    }

    /// The key as an item key.
    pub(crate) fn item_key(&self) -> Item {
        HashMap::from([
            (PK.to_owned(), text(&self.pk)),
            (SK.to_owned(), text(&self.sk)),
        ])
    }
}

/// Whether `pk` is the partition key of guard items (`<site>#__unique`, then `#<p>`).
pub(crate) fn is_guard_pk(pk: &str) -> bool {
    let Some((_, rest)) = pk.split_once('#') else {
        return false;
    };
    let name = rest.split_once('#').map_or(rest, |(name, _)| name);
    name == UNIQUE
}

/// The claim a guard action makes for one write, kept for the refusal it may meet.
#[derive(Clone, Debug)]
pub(crate) struct Claimant {
    /// The write's position in its batch (0 for a single write).
    pub(crate) position: usize,
    /// The unique index.
    pub(crate) index: String,
    /// The value claimed, as [`CompiledIndex::value_of`] shows it.
    pub(crate) value: serde_json::Value,
}

/// What a write (or a batch) does to one guard item.
#[derive(Clone, Debug)]
pub(crate) struct GuardAction {
    pub(crate) key: GuardKey,
    /// The id holding the value after the write; `None`: the guard is deleted.
    pub(crate) holder: Option<String>,
    /// The ids that may hold it before the write: the claimant and the documents giving it up.
    pub(crate) allowed: BTreeSet<String>,
    /// The write claiming the value, if one does.
    pub(crate) claimant: Option<Claimant>,
    /// Where the action goes among the call's guards: claims by the claiming write's position,
    /// then its index's slot (the order [`docstore::index::unique::check`] judges claims in,
    /// so the first refused guard is the refusal a write answers); releases after them.
    rank: (usize, usize),
}

impl GuardAction {
    /// The claim of the guard `key` by the document `id` alone (an index build).
    pub(crate) fn claim(key: GuardKey, id: &str) -> Self {
        let mut action = empty(key);
        action.holder = Some(id.to_owned());
        action.allowed.insert(id.to_owned());
        action
    }

    /// The `TransactWriteItems` action: a Put of the guard naming the new holder, or its
    /// Delete, conditioned on the guard being absent or held by one of `allowed`; a failed
    /// condition returns the guard (`ALL_OLD`), which names the holder.
    pub(crate) fn transact_item(&self, table: &str) -> Result<TransactWriteItem> {
        let mut condition = String::from("attribute_not_exists(#pk)");
        let mut values = HashMap::new();
        for (at, id) in self.allowed.iter().enumerate() {
            condition.push_str(&format!(" OR #h = :h{at}"));
            values.insert(format!(":h{at}"), text(id));
        }
        let names = HashMap::from([
            ("#pk".to_owned(), PK.to_owned()),
            ("#h".to_owned(), HOLDER.to_owned()),
        ]);
        let values = (!values.is_empty()).then_some(values);
        let all_old = ReturnValuesOnConditionCheckFailure::AllOld;
        let action = match &self.holder {
            Some(holder) => {
                let mut item = self.key.item_key();
                item.insert(HOLDER.to_owned(), text(holder));
                let put = Put::builder()
                    .table_name(table)
                    .set_item(Some(item))
                    .condition_expression(condition)
                    .set_expression_attribute_names(Some(names))
                    .set_expression_attribute_values(values)
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(build_error)?;
                TransactWriteItem::builder().put(put).build()
            }
            None => {
                let delete = Delete::builder()
                    .table_name(table)
                    .set_key(Some(self.key.item_key()))
                    .condition_expression(condition)
                    .set_expression_attribute_names(Some(names))
                    .set_expression_attribute_values(values)
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(build_error)?;
                TransactWriteItem::builder().delete(delete).build()
            }
        };
        Ok(action)
    }
}

/// One write as the guards see it: what stood at `key` before and what the write leaves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClaimChange<'a> {
    pub(crate) position: usize,
    pub(crate) key: &'a Key,
    pub(crate) before: Option<&'a Document>,
    pub(crate) after: Option<&'a Document>,
}

/// Guards met that another document holds although a write of this call gives their value
/// up (only possible when documents shared a value before the index was built): the call
/// leaves them alone and sends again.
#[derive(Debug, Default)]
pub(crate) struct Foreign(BTreeSet<GuardKey>);

impl Foreign {
    pub(crate) fn add(&mut self, key: GuardKey) {
        self.0.insert(key);
    }
}

/// The guard actions of `changes` (one write, or a batch's writes), merged per guard item,
/// in a fixed order: every value claimed, every value given up that no write of the call
/// claims, except the releases `foreign` says belong to another document.
pub(crate) fn guard_actions(
    registry: &Registry,
    layout: Layout,
    changes: &[ClaimChange<'_>],
    foreign: &Foreign,
) -> Vec<GuardAction> {
    let mut actions: BTreeMap<GuardKey, GuardAction> = BTreeMap::new();
    for change in changes {
        let unique = registry
            .for_collection(change.key.collection())
            .filter(|table_index| table_index.compiled.is_unique());
        for table_index in unique {
            let index = &table_index.compiled;
            let slot = table_index.slot;
            let before = change.before.and_then(|doc| index.claim(doc));
            let after = change.after.and_then(|doc| index.claim(doc));
            if before == after {
                continue;
            }
            let id = change.key.id();
            let site = change.key.site();
            if let (Some(claim), Some(doc)) = (&after, change.after) {
                let key = GuardKey::of(layout, site, index, claim);
                let action = actions.entry(key.clone()).or_insert_with(|| empty(key));
                action.rank = (change.position, slot);
                action.holder = Some(id.to_owned());
                action.allowed.insert(id.to_owned());
                action.claimant = Some(Claimant {
                    position: change.position,
                    index: index.name().to_owned(),
                    value: index.value_of(doc),
                });
            }
            if let Some(claim) = &before {
                let key = GuardKey::of(layout, site, index, claim);
                let action = actions.entry(key.clone()).or_insert_with(|| empty(key));
                action.allowed.insert(id.to_owned());
            }
        }
    }
    let mut actions: Vec<GuardAction> = actions
        .into_values()
        .filter(|action| action.holder.is_some() || !foreign.0.contains(&action.key))
        .collect();
    actions.sort_by_key(|action| action.rank);
    actions
}

fn empty(key: GuardKey) -> GuardAction {
    GuardAction {
        key,
        holder: None,
        allowed: BTreeSet::new(),
        claimant: None,
        rank: (usize::MAX, 0),
    }
}

/// The holder a guard item names.
pub(crate) fn holder_of(item: &Item) -> Option<&str> {
    match item.get(HOLDER) {
        Some(AttributeValue::S(holder)) => Some(holder),
        _ => None,
    }
}

/// What a refused guard means for the call that sent it.
#[derive(Debug)]
pub(crate) enum GuardVerdict {
    /// Another document holds the value a write claims: the refusal, and the write's position.
    Taken { position: usize, error: Error },
    /// A guard the call gives up is another document's (recorded in the call's [`Foreign`]),
    /// or it changed since: send again.
    Again,
}

/// Judges the refusal of `action`, whose guard item (with `ALL_OLD`, or read since) is
/// `guard`.
pub(crate) fn judge(
    action: &GuardAction,
    guard: Option<&Item>,
    foreign: &mut Foreign,
) -> GuardVerdict {
    let holder = guard.and_then(holder_of);
    match (&action.claimant, holder) {
        (Some(claimant), Some(holder)) if !action.allowed.contains(holder) => GuardVerdict::Taken {
            position: claimant.position,
            error: Error::UniqueViolation {
                index: claimant.index.clone(),
                value: claimant.value.clone(),
                holder: holder.to_owned(),
            },
        },
        (None, Some(holder)) if !action.allowed.contains(holder) => {
            foreign.add(action.key.clone());
            GuardVerdict::Again
        }
        _ => GuardVerdict::Again,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexState, TableIndex};
    use docstore::index::{Index, IndexSet};

    fn registry() -> Registry {
        let index = Index::parse("u", "by_email", ["email"]).unwrap().unique();
        let compiled = IndexSet::new([index.clone()])
            .unwrap()
            .iter()
            .next()
            .cloned()
            .unwrap();
        Registry::of(vec![TableIndex {
            index,
            slot: 1,
            state: IndexState::Built,
            added_at: 0,
            partitions: 1,
            suffixed: true,
            resume: None,
            compiled,
        }])
    }

    fn doc(id: &str, email: &str) -> Document {
        Document::first(
            id,
            docstore::object(serde_json::json!({ "email": email })).unwrap(),
            "",
            0,
        )
    }

    fn change<'a>(
        position: usize,
        key: &'a Key,
        before: Option<&'a Document>,
        after: Option<&'a Document>,
    ) -> ClaimChange<'a> {
        ClaimChange {
            position,
            key,
            before,
            after,
        }
    }

    /// A value moved from b to a is one Put naming a and allowing both; the value a gave up
    /// is one Delete allowing a; a write keeping its value touches no guard.
    #[test]
    fn a_batch_merges_its_actions_per_guard() {
        let registry = registry();
        let layout = Layout { partitions: 8 };
        let (ka, kb) = (
            Key::new("s", "u", "a").unwrap(),
            Key::new("s", "u", "b").unwrap(),
        );
        let (a_x, a_y, b_y, b_z) = (doc("a", "x"), doc("a", "y"), doc("b", "y"), doc("b", "z"));
        let changes = [
            change(0, &ka, Some(&a_x), Some(&a_y)),
            change(1, &kb, Some(&b_y), Some(&b_z)),
        ];
        let actions = guard_actions(&registry, layout, &changes, &Foreign::default());
        let summary: Vec<(Option<&str>, Vec<&str>, Option<usize>)> = actions
            .iter()
            .map(|a| {
                (
                    a.holder.as_deref(),
                    a.allowed.iter().map(String::as_str).collect(),
                    a.claimant.as_ref().map(|c| c.position),
                )
            })
            .collect();
        // Claims first in batch order, then the release of x.
        assert_eq!(
            summary,
            vec![
                (Some("a"), vec!["a", "b"], Some(0)),
                (Some("b"), vec!["b"], Some(1)),
                (None, vec!["a"], None),
            ]
        );
        let same = [change(0, &ka, Some(&a_x), Some(&a_x))];
        assert!(guard_actions(&registry, layout, &same, &Foreign::default()).is_empty());
        // A release found to be another document's is left out when sent again.
        let mut foreign = Foreign::default();
        foreign.add(actions[2].key.clone());
        assert_eq!(
            guard_actions(&registry, layout, &changes, &foreign).len(),
            2
        );
    }

    /// The guard key depends on site, collection, index and value only, and spreads over the
    /// layout's partitions.
    #[test]
    fn guard_keys_are_fixed_by_the_value() {
        let registry = registry();
        let index = &registry.indexes[0].compiled;
        let claim = index.claim(&doc("a", "x")).unwrap();
        let layout = Layout { partitions: 8 };
        let key = GuardKey::of(layout, "s", index, &claim);
        assert_eq!(
            key,
            GuardKey::of(layout, "s", index, &index.claim(&doc("b", "x")).unwrap())
        );
        assert!(key.sk.starts_with("u#by_email#") && key.sk.len() == "u#by_email#".len() + 64);
        assert!(is_guard_pk(&key.pk), "{}", key.pk);
        assert_ne!(key, GuardKey::of(layout, "t", index, &claim));
    }
}
