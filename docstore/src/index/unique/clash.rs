//! Judging a request whose claim of a unique value failed in storage (a constraint the
//! backend learns of only by writing): on the holders read after the rollback, the refusal
//! to report, the stale holders to remove first, or a run again.

use super::Claim;
use crate::batch::Decision;
use crate::index::{CompiledIndex, IndexSet};
use crate::request::Request;
use crate::{Error, Key};
use std::collections::HashMap;
use std::hash::Hash;

/// A document found holding a value a request claims ([`Request::claims`]), as the backend
/// read it: the claim, and whether the document is there and until when. `L` is how the
/// backend names the index (the `label` of [`judge`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Holder<L> {
    /// The holder's key.
    pub key: Key,
    /// The unique index, as the backend labels it.
    pub index: L,
    /// The value held.
    pub value: Vec<u8>,
    /// Whether a document is at the key: a claim left at a key without one holds nothing.
    pub present: bool,
    /// When that document expires (`docs/contract.md`, "Expiry"): from then it holds nothing.
    pub expires_at: Option<i64>,
}

/// What a request whose claim failed is, once judged ([`judge`]).
#[derive(Debug)]
pub enum Clash {
    /// Refused: [`Error::UniqueViolation`] naming the index, the value and the holder (a
    /// batch's as [`Error::Batch`] naming the write).
    Refused(Error),
    /// Holders that hold nothing any more (expired, or their document gone) at these keys:
    /// the backend removes them ([`Plan::expiring`](crate::request::Plan::expiring)) and
    /// runs the request again.
    Stale(Vec<Key>),
    /// No holder is left (a racing writer's, since gone): the request runs again.
    Again,
}

/// Judges `request`, whose `decisions` failed on a unique value, on `holders`: every
/// document found holding one of its claims in `indexes` at `now`, each index named by
/// `label`. Stale holders come first ([`Clash::Stale`]); otherwise the request is judged as
/// its writes leave the documents ([`Request::check_unique`]).
///
/// ```
/// use docstore::batch::Write;
/// use docstore::driver::Origin;
/// use docstore::index::unique::{self, Clash, Holder};
/// use docstore::request::{Op, QuotaCount, Request};
/// use docstore::{Document, Error, Index, IndexSet, Key};
///
/// let set = IndexSet::new([Index::parse("u", "by_email", ["email"])?.unique()])?;
/// let data = docstore::object(serde_json::json!({ "email": "ann@example.com" }))?;
/// let write = Write::create(Key::new("acme", "u", "u-2")?, data);
/// let request = Request::single(Op::Write(&write), Origin::actor("ann"));
/// let none: [Option<Document>; 1] = [None];
/// let decisions = request.decide(&none, 5, 1_000, &mut QuotaCount::unlimited())?;
/// let (_, claim) = &request.claims(&decisions, &set)[0];
/// let holder = |expires_at| Holder {
///     key: Key::new("acme", "u", "u-1").unwrap(),
///     index: claim.index.name().to_owned(),
///     value: claim.value.clone(),
///     present: true,
///     expires_at,
/// };
/// let label = |index: &docstore::index::CompiledIndex| index.name().to_owned();
/// let judged = unique::judge(&request, &decisions, &set, label, [holder(None)], 5);
/// assert!(matches!(judged, Clash::Refused(Error::UniqueViolation { ref holder, .. }) if holder == "u-1"));
/// let judged = unique::judge(&request, &decisions, &set, label, [holder(Some(5))], 5);
/// assert!(matches!(judged, Clash::Stale(ref keys) if keys[0].id() == "u-1"));
/// assert!(matches!(unique::judge(&request, &decisions, &set, label, [], 5), Clash::Again));
/// # Ok::<(), docstore::Error>(())
/// ```
pub fn judge<L: Eq + Hash>(
    request: &Request<'_>,
    decisions: &[Decision],
    indexes: &IndexSet,
    label: impl Fn(&CompiledIndex) -> L,
    holders: impl IntoIterator<Item = Holder<L>>,
    now: i64,
) -> Clash {
    let mut held: HashMap<(String, String, L, Vec<u8>), Vec<String>> = HashMap::new();
    let mut stale = Vec::new();
    for holder in holders {
        if !holder.present || holder.expires_at.is_some_and(|at| at <= now) {
            stale.push(holder.key);
            continue;
        }
        let (site, collection) = (holder.key.site(), holder.key.collection());
        let at = (
            site.to_owned(),
            collection.to_owned(),
            holder.index,
            holder.value,
        );
        held.entry(at).or_default().push(holder.key.id().to_owned());
    }
    if !stale.is_empty() {
        return Clash::Stale(stale);
    }
    let holder_of = |key: &Key, claim: &Claim<'_>, except: &str| {
        let (site, collection) = (key.site().to_owned(), key.collection().to_owned());
        let at = (site, collection, label(claim.index), claim.value.clone());
        let others = held.get(&at).into_iter().flatten();
        Ok(others.filter(|id| *id != except).min().cloned())
    };
    match request.check_unique(decisions, indexes, holder_of) {
        Ok(()) => Clash::Again,
        Err(refusal) => Clash::Refused(refusal),
    }
}
