//! What a decided request writes, as the effects a transactional backend applies in order
//! ([`Plan`]): the driver maps each [`Effect`] to its own statements and decides nothing.

use super::{Found, KeptChange, Logged, Request};
use crate::batch::Decision;
use crate::identity::KeptIds;
use crate::index::unique;
use crate::index::{CompiledIndex, IndexSet};
use crate::{Document, Key};
use std::collections::BTreeMap;

/// One thing a request (or the removal of expired documents) writes.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect<'a> {
    /// Store `document` at `key`: a new document when `creates`, else the next version of
    /// the one there. `position` is the write's in the request.
    Store {
        /// The write's position in the request.
        position: usize,
        /// Where.
        key: &'a Key,
        /// The document as the write leaves it.
        document: &'a Document,
        /// Whether the key held no document.
        creates: bool,
    },
    /// Remove the document at `key`: a delete, or an expired document removed before the
    /// write on its key.
    Remove {
        /// Where.
        key: &'a Key,
    },
    /// Remove what `key` keeps of write identities: the document they belonged to is gone.
    ForgetIds {
        /// Where.
        key: &'a Key,
    },
    /// Keep `kept` at `key`, in place of what it kept ([`Request::kept_after`]).
    KeepIds {
        /// Where.
        key: &'a Key,
        /// The identities, and when a delete recorded them.
        kept: KeptIds,
    },
    /// Forget the delete records made before `before` ([`KeptIds::prunes_before`]): follows
    /// every delete record kept.
    PruneIds {
        /// The oldest instant a delete record is still kept for.
        before: i64,
    },
    /// Release every unique claim of the document at `key` (one of a collection with unique
    /// indexes, removed as expired, or a key that holds no document).
    ReleaseAll {
        /// Where.
        key: &'a Key,
    },
    /// Release the claim of the document at `key` in `index`.
    Release {
        /// Where.
        key: &'a Key,
        /// The unique index.
        index: &'a CompiledIndex,
    },
    /// Claim `value` in `index` for the document at `key`.
    Claim {
        /// Where.
        key: &'a Key,
        /// The unique index.
        index: &'a CompiledIndex,
        /// The value ([`CompiledIndex::claim`]).
        value: Vec<u8>,
    },
    /// Move the count of the documents of `site`'s `collection` by `delta` (never 0).
    Count {
        /// The site.
        site: &'a str,
        /// The collection.
        collection: &'a str,
        /// How many documents more (or fewer).
        delta: i64,
    },
    /// Log a change on the feed.
    Log(Logged<'a>),
}

/// Everything a request writes once decided, in the order a transactional backend applies
/// it: each key's document and identities in key order (an expired document removed first,
/// with its identities and claims; two writers locking keys in one order never wait for each
/// other in turn), the unique claims released, then those claimed (so a request may move a
/// value between its documents), the counters, then the changes in the request's order (a
/// feed lock taken last is held for the least time).
///
/// ```
/// use docstore::batch::Write;
/// use docstore::driver::{Expiry, Origin};
/// use docstore::request::{Effect, Found, Plan, QuotaCount, Request, Op};
/// use docstore::{Data, IndexSet, Key, WriteId};
///
/// let key = Key::new("acme", "notes", "n1")?;
/// let id = WriteId::random();
/// let origin = Origin { actor: "ann", write_id: Some(&id), expiry: Expiry::Keep };
/// let write = Write::create(key.clone(), Data::new());
/// let request = Request::single(Op::Write(&write), origin);
/// let found = Found::at(vec![None], 7);
/// let decisions = request.decide(&found.current, 7, 1_000, &mut QuotaCount::unlimited())?;
/// let indexes = IndexSet::default();
/// let plan = Plan::new(&request, &decisions, &found, |_| None, &indexes, 7);
/// let kinds: Vec<&str> = plan.effects().iter().map(|effect| match effect {
///     Effect::Store { creates: true, .. } => "insert",
///     Effect::KeepIds { .. } => "keep ids",
///     Effect::Count { delta: 1, .. } => "count",
///     Effect::Log(_) => "log",
///     _ => "other",
/// }).collect();
/// assert_eq!(kinds, ["insert", "keep ids", "count", "log"]);
/// # Ok::<(), docstore::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan<'a> {
    effects: Vec<Effect<'a>>,
}

impl<'a> Plan<'a> {
    /// The plan of `request`'s `decisions`, made on `found` at `now`, where `kept` says what
    /// each key kept of write identities and `indexes` are the store's.
    pub fn new<'k>(
        request: &'a Request<'_>,
        decisions: &'a [Decision],
        found: &'a Found,
        kept: impl Fn(&Key) -> Option<&'k KeptIds>,
        indexes: &'a IndexSet,
        now: i64,
    ) -> Self {
        let mut builder = Builder::new(indexes);
        let mut order: Vec<usize> = (0..decisions.len()).collect();
        order.sort_by_key(|&i| request.ops()[i].key());
        for i in order {
            let key = request.ops()[i].key();
            let current = found.current[i].as_ref();
            // An expired document's identities went with it.
            let kept = match found.expired[i] {
                Some(_) => {
                    builder.expire(key);
                    None
                }
                None => kept(key),
            };
            builder.write(i, key, &decisions[i], current);
            builder.identities(key, request.kept_after(&decisions[i], kept, now));
        }
        let changes = request.changes(decisions, found, now);
        builder.finish(changes)
    }

    /// The removal of the expired documents among `found` (each key with what it holds; a
    /// key given twice counts once), each with its change, and the unique claims left at keys holding no
    /// document (`docs/contract.md`, "Expiry"): what a sweep writes, or a write whose claims
    /// expired documents still held.
    pub fn expiring(
        found: impl IntoIterator<Item = (&'a Key, Option<&'a Document>)>,
        indexes: &'a IndexSet,
        now: i64,
    ) -> Self {
        let mut found: Vec<_> = found.into_iter().collect();
        found.sort_by_key(|(key, _)| *key);
        found.dedup_by_key(|(key, _)| *key);
        let mut builder = Builder::new(indexes);
        let mut changes = Vec::new();
        for (key, document) in found {
            match document {
                Some(doc) if doc.is_expired(now) => {
                    builder.expire(key);
                    changes.push(Logged::expired(changes.len(), key, doc));
                }
                Some(_) => {}
                None => builder.release_all(key),
            }
        }
        builder.finish(changes)
    }

    /// The effects, in the order they are applied.
    pub fn effects(&self) -> &[Effect<'a>] {
        &self.effects
    }

    /// How many documents the plan removes as expired.
    pub fn expired(&self) -> usize {
        let expired = |effect: &&Effect<'_>| matches!(effect, Effect::Log(logged) if logged.kind == crate::ChangeKind::Expired);
        self.effects.iter().filter(expired).count()
    }
}

/// A [`Plan`] being built: the effects of each phase apart until [`Builder::finish`].
struct Builder<'a> {
    indexes: &'a IndexSet,
    keys: Vec<Effect<'a>>,
    releases: Vec<Effect<'a>>,
    claims: Vec<Effect<'a>>,
    counters: BTreeMap<(&'a str, &'a str), i64>,
}

impl<'a> Builder<'a> {
    fn new(indexes: &'a IndexSet) -> Self {
        Builder {
            indexes,
            keys: Vec::new(),
            releases: Vec::new(),
            claims: Vec::new(),
            counters: BTreeMap::new(),
        }
    }

    /// Removes the expired document at `key` with its identities and unique claims, before
    /// the write on its key (its change is the caller's).
    fn expire(&mut self, key: &'a Key) {
        self.keys.push(Effect::Remove { key });
        self.keys.push(Effect::ForgetIds { key });
        self.release_all(key);
        self.count(key, -1);
    }

    /// Releases every claim of the document at `key` when its collection has unique indexes.
    fn release_all(&mut self, key: &'a Key) {
        let indexes = self.indexes.for_collection(key.collection());
        if indexes.iter().any(CompiledIndex::is_unique) {
            self.releases.push(Effect::ReleaseAll { key });
        }
    }

    fn count(&mut self, key: &'a Key, delta: i64) {
        *self
            .counters
            .entry((key.site(), key.collection()))
            .or_default() += delta;
    }

    /// The document written by `decision` at `key` (where `current` stood), its counter and
    /// the unique claims it changes.
    fn write(
        &mut self,
        position: usize,
        key: &'a Key,
        decision: &'a Decision,
        current: Option<&'a Document>,
    ) {
        let after = match decision {
            Decision::Store { document, creates } => {
                self.keys.push(Effect::Store {
                    position,
                    key,
                    document,
                    creates: *creates,
                });
                Some(document)
            }
            Decision::Remove if current.is_some() => {
                self.keys.push(Effect::Remove { key });
                None
            }
            Decision::Remove => None,
            Decision::Keep => return,
        };
        self.count(key, decision.counter_delta());
        let indexes = self.indexes.for_collection(key.collection());
        for (index, claim) in unique::claim_changes(indexes, current, after) {
            self.releases.push(Effect::Release { key, index });
            if let Some(value) = claim {
                self.claims.push(Effect::Claim { key, index, value });
            }
        }
    }

    /// What `key` keeps of write identities after its write; a delete record kept prunes
    /// those past the window ([`KeptIds::prunes_before`]).
    fn identities(&mut self, key: &'a Key, change: KeptChange) {
        let kept = match change {
            KeptChange::Unchanged => return,
            KeptChange::Forget => return self.keys.push(Effect::ForgetIds { key }),
            KeptChange::Keep(kept) => kept,
        };
        let prune = kept.prunes_before();
        self.keys.push(Effect::KeepIds { key, kept });
        if let Some(before) = prune {
            self.keys.push(Effect::PruneIds { before });
        }
    }

    fn finish(self, changes: Vec<Logged<'a>>) -> Plan<'a> {
        let mut effects = self.keys;
        effects.extend(self.releases);
        effects.extend(self.claims);
        let counters = self.counters.into_iter().filter(|(_, delta)| *delta != 0);
        effects.extend(counters.map(|((site, collection), delta)| Effect::Count {
            site,
            collection,
            delta,
        }));
        effects.extend(changes.into_iter().map(Effect::Log));
        Plan { effects }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{CheckedBatch, Write};
    use crate::driver::{Expiry, Origin};
    use crate::identity::DELETE_IDS_KEPT_FOR_NANOS;
    use crate::request::QuotaCount;
    use crate::{Index, WriteId};

    fn key(id: &str) -> Key {
        Key::new("s", "c", id).unwrap()
    }

    fn user(id: &str, email: &str) -> Document {
        let data = crate::object(serde_json::json!({ "e": email })).unwrap();
        Document::first(id, data, "x", 1)
    }

    /// A short name for each effect, to compare plans at a glance.
    fn names(plan: &Plan<'_>) -> Vec<String> {
        let name = |effect: &Effect<'_>| match effect {
            Effect::Store { key, creates, .. } => format!("store {} {creates}", key.id()),
            Effect::Remove { key } => format!("remove {}", key.id()),
            Effect::ForgetIds { key } => format!("forget {}", key.id()),
            Effect::KeepIds { key, kept } => {
                format!("keep {} {}", key.id(), kept.deleted_at.is_some())
            }
            Effect::PruneIds { before } => format!("prune {before}"),
            Effect::ReleaseAll { key } => format!("release all {}", key.id()),
            Effect::Release { key, .. } => format!("release {}", key.id()),
            Effect::Claim { key, .. } => format!("claim {}", key.id()),
            Effect::Count { delta, .. } => format!("count {delta}"),
            Effect::Log(logged) => format!("log {} {:?}", logged.key.id(), logged.kind),
        };
        plan.effects().iter().map(name).collect()
    }

    #[test]
    fn a_batch_writes_in_key_order_releases_before_claims_and_logs_in_its_order() {
        let set = IndexSet::new([Index::parse("c", "by_e", ["e"]).unwrap().unique()]).unwrap();
        let mut gone = user("a", "y");
        gone.expires_at = Some(5);
        let (a, b, c) = (key("a"), key("b"), key("c"));
        let writes = [
            Write::put(c.clone(), user("c", "x").data),
            Write::delete_if(b.clone(), 1),
            Write::put(a.clone(), user("a", "y").data),
        ];
        let checked = CheckedBatch::check(&writes, 1_000).unwrap();
        let id = WriteId::random();
        let origin = Origin {
            actor: "ann",
            write_id: Some(&id),
            expiry: Expiry::Keep,
        };
        let request = Request::batch(&checked, origin);
        let found = Found::at(vec![None, Some(user("b", "x")), Some(gone)], 7);
        let mut quota = QuotaCount::unlimited();
        let decisions = request
            .decide(&found.current, 7, 1_000, &mut quota)
            .unwrap();
        let plan = Plan::new(&request, &decisions, &found, |_| None, &set, 7);
        let prune = format!("prune {}", 7 - DELETE_IDS_KEPT_FOR_NANOS);
        let expected = [
            "remove a",
            "forget a",
            "store a true",
            "keep a false",
            "remove b",
            "keep b true",
            &prune,
            "store c true",
            "keep c false",
            "release all a",
            "release a",
            "release b",
            "release c",
            "claim a",
            "claim c",
            "log c Created",
            "log b Deleted",
            "log a Expired",
            "log a Created",
        ];
        assert_eq!(
            names(&plan),
            expected,
            "b's value moves to c; the counts net to 0"
        );
        assert_eq!(plan.expired(), 1);
    }

    #[test]
    fn a_delete_without_an_identity_forgets_the_keys_and_a_check_writes_nothing() {
        let (a, b) = (key("a"), key("b"));
        let writes = [
            Write::delete_if(a.clone(), 1),
            Write::check(b.clone(), None),
        ];
        let checked = CheckedBatch::check(&writes, 1_000).unwrap();
        let origin = Origin {
            actor: "ann",
            write_id: None,
            expiry: Expiry::Keep,
        };
        let request = Request::batch(&checked, origin);
        let found = Found::at(vec![Some(user("a", "x")), None], 7);
        let mut quota = QuotaCount::unlimited();
        let decisions = request
            .decide(&found.current, 7, 1_000, &mut quota)
            .unwrap();
        let set = IndexSet::default();
        let kept = KeptIds::written(&WriteId::random(), None);
        let plan = Plan::new(&request, &decisions, &found, |_| Some(&kept), &set, 7);
        let expected = ["remove a", "forget a", "count -1", "log a Deleted"];
        assert_eq!(names(&plan), expected);
    }

    #[test]
    fn expiring_removes_the_expired_and_releases_claims_of_empty_keys() {
        let set = IndexSet::new([Index::parse("c", "by_e", ["e"]).unwrap().unique()]).unwrap();
        let (a, b, c) = (key("a"), key("b"), key("c"));
        let mut gone = user("b", "x");
        gone.expires_at = Some(5);
        let standing = user("c", "y");
        let found = [
            (&c, Some(&standing)),
            (&b, Some(&gone)),
            (&a, None),
            (&b, Some(&gone)),
        ];
        let plan = Plan::expiring(found, &set, 7);
        let expected = [
            "remove b",
            "forget b",
            "release all a",
            "release all b",
            "count -1",
            "log b Expired",
        ];
        assert_eq!(names(&plan), expected, "b, given twice, is removed once");
        let without_unique = IndexSet::default();
        let plan = Plan::expiring([(&a, None)], &without_unique, 7);
        assert!(plan.effects().is_empty(), "no claims to release");
    }
}
