//! The planner: which declared indexes can serve a query, over which key ranges, in which
//! direction, and what is left to check on the documents read; each one a [`Candidate`]
//! with how it reads ([`Reading`]) and how well it fits ([`Fit`]).
//!
//! Which one runs — or the backend's scan — is the cost rule of
//! [`Candidates`](super::Candidates) (`docs/contract.md`, "Indexes"): every plan gets
//! estimated reads from what the backend knows (the collection's size, the entries of a
//! contested key range counted up to a limit); a plan that stops when the page is full wins
//! over one that must read a whole range and sort it in memory on every page, which wins over
//! the scan in id order only when its range is known to be small (at most
//! `max(L + 1, √((L + 1) × N))` entries for a page of `L` in a collection of `N`).
//!
//! [`Candidate`]: super::Candidate
//! [`Reading`]: super::Reading
//! [`Fit`]: super::Fit

use super::key::{self, TAG_FALSE, TAG_NUMBER, TAG_STRING};
use super::{CompiledIndex, IndexSet};
use crate::query::{CompiledFilter, CompiledQuery, FieldPath, compare_values};
use serde_json::Value;
use std::cmp::Ordering;

/// The most key ranges one plan reads (`In` lists multiply); a query that would need more is
/// not served by that index.
pub const MAX_RANGES: usize = 32;

/// A range of keys of one index: `start` inclusive, `end` exclusive (`None`: to the end of
/// the index). Bytes are compared as unsigned bytes (`memcmp`); keys are relative to the
/// index (a backend puts its own site/collection/index prefix in front).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// The first key in the range (inclusive).
    pub start: Vec<u8>,
    /// The first key after the range (exclusive); `None` when unbounded.
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }

    fn is_empty(&self) -> bool {
        self.end
            .as_deref()
            .is_some_and(|end| end <= self.start.as_slice())
    }

    /// Every key starting with `prefix`.
    fn with_prefix(prefix: Vec<u8>) -> Self {
        KeyRange {
            end: key::prefix_end(&prefix),
            start: prefix,
        }
    }
}

/// How an index serves a query: the planner's output, the same for every backend.
///
/// To read it, a backend walks each of [`ranges`](Self::ranges) (in key order, or backwards
/// when [`reverse`](Self::reverse)), and for every entry offers the key and whether its
/// document passes [`CompiledQuery::matches`] and [`CompiledQuery::is_after_cursor`] to a
/// [`RangeWalk`] (from [`IndexPlan::walk`]), which says when the range has given enough. The
/// documents kept from all ranges then go through [`CompiledQuery::evaluate`], which sorts,
/// cuts the page and makes the cursor: the page is exactly the reference answer.
///
/// Why that is exact: within a range, entries come in the query's order up to ties on the
/// first [`tie_fields`](Self::tie_fields) fields ([`exact_order`](Self::exact_order): no ties
/// at all), so the page's documents are among the first `limit + 1` matches of their range
/// plus the rest of the last one's tie group; ranges are disjoint, so nothing is read twice.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexPlan {
    /// The index's name.
    pub index: String,
    /// The ranges to read, disjoint, in key order (already narrowed to the cursor). Empty when
    /// the filter can match nothing (nothing needs reading).
    pub ranges: Vec<KeyRange>,
    /// Read every range from its end backwards.
    pub reverse: bool,
    /// The leading index fields pinned by `Eq`/`In`.
    pub equality_fields: usize,
    /// Whether the next field has a range or prefix condition.
    pub range_field: bool,
    /// Entries of a range come in the query's order except among entries equal on this many
    /// leading fields (a *tie group*), which must be read whole and sorted in memory.
    pub tie_fields: usize,
    /// Entries come exactly in the query's order (ties included): no tie group to finish.
    pub exact_order: bool,
    /// The filter parts the key ranges do not decide, to check on the documents read (the
    /// whole filter may be checked instead: the answer is the same).
    pub residual: Option<CompiledFilter>,
    /// A human description of the key ranges (for `explain`).
    pub description: String,
}

/// What to do with an entry offered to a [`RangeWalk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Keep the entry's document (it matches); go on.
    Keep,
    /// Skip it (it does not match); go on.
    Skip,
    /// Stop reading this range; the entry is not needed.
    Stop,
}

/// The reading rule of one range of an [`IndexPlan`]: keep matches until the page and one
/// more are found, then finish the tie group of the last one.
#[derive(Clone, Debug)]
pub struct RangeWalk {
    wanted: usize,
    kept: usize,
    tie_fields: usize,
    exact: bool,
    group: Option<Vec<u8>>,
}

impl RangeWalk {
    /// Offers the next entry of the range: its key and whether its document matches the
    /// filter and follows the cursor.
    pub fn offer(&mut self, index: &CompiledIndex, key: &[u8], matches: bool) -> Step {
        if self.kept >= self.wanted {
            if self.exact {
                return Step::Stop;
            }
            let prefix = index.key_prefix(key, self.tie_fields);
            if prefix.is_none() || prefix != self.group.as_deref() {
                return Step::Stop;
            }
        }
        if !matches {
            return Step::Skip;
        }
        self.kept += 1;
        if self.kept == self.wanted && !self.exact {
            self.group = index.key_prefix(key, self.tie_fields).map(<[u8]>::to_vec);
        }
        Step::Keep
    }

    /// Whether the walk has what it needs and the next entry would only be offered to be
    /// refused (useful to stop before fetching another page).
    pub fn is_done(&self) -> bool {
        self.kept >= self.wanted && self.exact
    }
}

impl IndexPlan {
    /// Whether the matches kept reading the ranges in turn are in the query's order already:
    /// one range (or none) read in exactly that order.
    pub fn keeps_order(&self) -> bool {
        self.exact_order && self.ranges.len() <= 1
    }

    /// Whether a read of this plan that kept `kept` matches has the page, so that the next
    /// entry it would keep only says that more follow: the read applied the whole filter
    /// itself (`filter_applied`: no entry it offers can fail it) and reads in the query's
    /// order, so that entry follows a kept match, itself after the cursor.
    pub fn page_is_complete(
        &self,
        query: &CompiledQuery,
        filter_applied: bool,
        kept: usize,
    ) -> bool {
        filter_applied && self.keeps_order() && query.limit() == Some(kept)
    }

    /// The plan's first range, or an empty one when it reads nothing: the statement a
    /// backend asks its database to plan for [`Explain`](crate::Explain).
    pub fn first_range(&self) -> KeyRange {
        self.ranges.first().cloned().unwrap_or(KeyRange {
            start: Vec::new(),
            end: Some(Vec::new()),
        })
    }

    /// A fresh reading rule for one of the plan's ranges.
    pub fn walk(&self, query: &CompiledQuery) -> RangeWalk {
        RangeWalk {
            wanted: query.limit().map_or(usize::MAX, |l| l.saturating_add(1)),
            kept: 0,
            tie_fields: self.tie_fields,
            exact: self.exact_order,
            group: None,
        }
    }
}

/// The conditions the planner understands: top-level conjuncts on one field.
enum Leaf<'a> {
    Eq(&'a Value),
    In(&'a [Value]),
    Lower(&'a Value, bool),
    Upper(&'a Value, bool),
    Prefix(&'a str),
}

fn conjuncts(filter: Option<&CompiledFilter>) -> Vec<&CompiledFilter> {
    fn flatten<'a>(filter: &'a CompiledFilter, out: &mut Vec<&'a CompiledFilter>) {
        match filter {
            CompiledFilter::And(parts) => parts.iter().for_each(|p| flatten(p, out)),
            other => out.push(other),
        }
    }
    let mut out = Vec::new();
    if let Some(filter) = filter {
        flatten(filter, &mut out);
    }
    out
}

fn leaf(filter: &CompiledFilter) -> Option<(&FieldPath, Leaf<'_>)> {
    Some(match filter {
        CompiledFilter::Eq(p, v) => (p, Leaf::Eq(v)),
        CompiledFilter::In(p, vs) => (p, Leaf::In(vs)),
        CompiledFilter::Gt(p, v) => (p, Leaf::Lower(v, false)),
        CompiledFilter::Gte(p, v) => (p, Leaf::Lower(v, true)),
        CompiledFilter::Lt(p, v) => (p, Leaf::Upper(v, false)),
        CompiledFilter::Lte(p, v) => (p, Leaf::Upper(v, true)),
        CompiledFilter::Prefix(p, s) => (p, Leaf::Prefix(s)),
        _ => return None,
    })
}

/// Whether key equality is `Eq` equality for this value (objects compare by canonical text,
/// where `1` and `1.0` differ).
fn keyable(value: &Value) -> bool {
    match value {
        Value::Object(_) => false,
        Value::Array(items) => items.iter().all(keyable),
        _ => true,
    }
}

/// The tag range `[first, last]` of the kind a range operator compares within.
fn kind_tags(value: &Value) -> Option<(u8, u8)> {
    match value {
        Value::Bool(_) => Some((TAG_FALSE, TAG_FALSE + 1)),
        Value::Number(_) => Some((TAG_NUMBER, TAG_NUMBER)),
        Value::String(_) => Some((TAG_STRING, TAG_STRING)),
        _ => None,
    }
}

fn encoded(value: Option<&Value>, descending: bool) -> Vec<u8> {
    if descending {
        key::encode_descending(value)
    } else {
        key::encode(value)
    }
}

/// One end of a value interval on the range field.
#[derive(Clone)]
enum End {
    /// Component bytes; whether keys holding exactly that component are inside.
    At(Vec<u8>, bool),
}

/// Every declared index of `collection` that can serve `query` (see [`IndexPlan`]), as a
/// [`Candidate`](super::Candidate): how it reads and how well it fits. The cost rule that
/// picks one of them or the scan is [`Candidates::choose`](super::Candidates::choose).
///
/// Rules: `Eq` (or `In`: one range per value, at most [`MAX_RANGES`]) on a leading run of
/// the index's fields, with values holding no object; then at most one range (`Gt`, `Gte`,
/// `Lt`, `Lte` — a lower and an upper bound of one kind: numbers, strings or booleans) or
/// `Prefix` on the next field; the query's order, leaving out fields pinned by `Eq`, must be
/// the next fields of the index, all in the index's directions or all reversed, optionally
/// closed by `$id`. An index that pins nothing, bounds nothing and orders nothing is not
/// worth using.
pub fn candidates(
    indexes: &IndexSet,
    collection: &str,
    query: &CompiledQuery,
) -> super::Candidates {
    let parts = conjuncts(query.filter());
    let usable: Vec<Usable<'_>> = parts
        .iter()
        .enumerate()
        .filter_map(|(part, filter)| leaf(filter).map(|(path, leaf)| Usable { part, path, leaf }))
        .collect();
    let list = indexes
        .for_collection(collection)
        .iter()
        .filter_map(|index| plan_one(index, query, &parts, &usable))
        .collect();
    super::Candidates::new(list, query)
}

/// The index and key ranges that serve `query` over `collection` when nothing is known about
/// the data (no collection size, no range counted): [`candidates`] chosen with
/// [`Statistics::default`](super::Statistics). `None` when the scan is chosen.
pub fn plan(indexes: &IndexSet, collection: &str, query: &CompiledQuery) -> Option<IndexPlan> {
    candidates(indexes, collection, query)
        .choose(&super::Statistics::default())
        .plan
}

/// A conjunct of the query's filter the planner understands: where it stands among the
/// conjuncts, its field, and what it asks of the field.
struct Usable<'q> {
    part: usize,
    path: &'q FieldPath,
    leaf: Leaf<'q>,
}

/// A plan in the making: which conjuncts the key ranges decide, and the words of `explain`.
struct Draft {
    used: Vec<bool>,
    described: Vec<String>,
}

/// The bounds the field after the pinned ones puts on the keys (a range or a prefix), and
/// whether its conditions can match nothing at all.
#[derive(Default)]
struct Bounds {
    lower: Option<End>,
    upper: Option<End>,
    range_field: bool,
    matches_nothing: bool,
}

/// One end of a range condition: the value and whether it is included.
#[derive(Clone, Copy)]
struct Limit<'q> {
    value: &'q Value,
    inclusive: bool,
}

/// A query order field the index reads in its own order: its position in the query's order
/// and its direction there.
struct OrderedField {
    position: usize,
    descending: bool,
}

/// How the index's order serves the query's: the fields after the pinned ones that it reads
/// in order, the direction of a closing `$id`, and whether the index is read backwards.
struct IndexOrder {
    ordered: Vec<OrderedField>,
    id_descending: Option<bool>,
    reverse: bool,
}

fn plan_one(
    index: &CompiledIndex,
    query: &CompiledQuery,
    parts: &[&CompiledFilter],
    usable: &[Usable<'_>],
) -> Option<super::Candidate> {
    let fields = index.fields();
    let mut draft = Draft {
        used: vec![false; parts.len()],
        described: Vec::new(),
    };
    let pins = pin_leading_fields(fields, usable, &mut draft);
    let pinned = pins.len();
    let combinations = pins.iter().try_fold(1usize, |n, values| {
        n.checked_mul(values.len()).filter(|n| *n <= MAX_RANGES)
    })?;
    let mut bounds = bound_next_field(fields.get(pinned), usable, &mut draft);
    bounds.matches_nothing |= combinations == 0;
    let order = index_order(fields, query, &pins)?;
    let ordered = order.ordered.len();
    if pinned == 0 && !bounds.range_field && ordered == 0 && !bounds.matches_nothing {
        return None;
    }
    let exact_order =
        pinned + ordered == fields.len() && order.id_descending.unwrap_or(false) == order.reverse;
    describe_order(&order, exact_order, pinned, fields.len(), &mut draft);
    let cursor_group = cursor_group(index, query, &pins, &order.ordered, pinned);
    if cursor_group.is_some() {
        draft.described.push("from the cursor".into());
    }
    let ranges = match bounds.matches_nothing {
        true => Vec::new(),
        false => key_ranges(
            &pins,
            fields,
            &bounds,
            cursor_group.as_deref(),
            order.reverse,
        ),
    };
    // Empty ranges read nothing: as cheap as a plan can be.
    let reading = if exact_order || ordered > 0 || ranges.is_empty() {
        super::Reading::StopsAtPage
    } else {
        super::Reading::SortsRange
    };
    let fit = super::Fit {
        pinned_fields: pinned,
        range_field: bounds.range_field,
        ordered_fields: ordered,
        fewer_ranges: std::cmp::Reverse(ranges.len()),
    };
    Some(super::Candidate {
        reading,
        fit,
        plan: IndexPlan {
            index: index.name().to_owned(),
            ranges,
            reverse: order.reverse,
            equality_fields: pinned,
            range_field: bounds.range_field,
            tie_fields: pinned + ordered,
            exact_order,
            residual: residual(parts, &draft.used),
            description: draft.described.join("; "),
        },
    })
}

/// The values each leading field of the index is pinned to by an `Eq` (else an `In`) on it,
/// distinct and in key order (`1` and `1.0` are one value), up to the first field without.
fn pin_leading_fields<'q>(
    fields: &[(FieldPath, bool)],
    usable: &[Usable<'q>],
    draft: &mut Draft,
) -> Vec<Vec<&'q Value>> {
    let mut pins = Vec::new();
    for (path, _) in fields {
        let equal = usable.iter().find_map(|u| match u.leaf {
            Leaf::Eq(value) if u.path == path && keyable(value) => Some((u.part, vec![value])),
            _ => None,
        });
        let found = equal.or_else(|| {
            usable.iter().find_map(|u| match u.leaf {
                Leaf::In(values) if u.path == path && values.iter().all(keyable) => {
                    Some((u.part, values.iter().collect()))
                }
                _ => None,
            })
        });
        let Some((part, mut values)) = found else {
            break;
        };
        draft.used[part] = true;
        values.sort_by(|a, b| compare_values(Some(a), Some(b)));
        values.dedup_by(|a, b| compare_values(Some(a), Some(b)) == Ordering::Equal);
        draft.described.push(match values.as_slice() {
            [one] => format!("{path} = {one}"),
            many => {
                let listed: Vec<String> = many.iter().map(|v| v.to_string()).collect();
                format!("{path} in [{}]", listed.join(", "))
            }
        });
        pins.push(values);
    }
    pins
}

/// The bounds of at most one range (a lower and an upper end of one kind) or one prefix on
/// `field`, the one after the pinned fields.
fn bound_next_field(
    field: Option<&(FieldPath, bool)>,
    usable: &[Usable<'_>],
    draft: &mut Draft,
) -> Bounds {
    let Some((path, descending)) = field else {
        return Bounds::default();
    };
    let mut bounds = Bounds::default();
    let mut kind: Option<(u8, u8)> = None;
    let mut lower: Option<Limit<'_>> = None;
    let mut upper: Option<Limit<'_>> = None;
    let mut prefix: Option<&str> = None;
    for u in usable.iter().filter(|u| u.path == path) {
        match u.leaf {
            Leaf::Lower(value, inclusive) | Leaf::Upper(value, inclusive) if prefix.is_none() => {
                let Some(tags) = kind_tags(value) else {
                    // A range against null, an array or an object matches nothing.
                    bounds.matches_nothing = true;
                    draft.used[u.part] = true;
                    continue;
                };
                if kind.is_some_and(|kind| kind != tags) {
                    continue; // another kind: left to the residual (it then matches nothing)
                }
                let end = match u.leaf {
                    Leaf::Lower(..) => &mut lower,
                    _ => &mut upper,
                };
                if end.is_none() {
                    kind = Some(tags);
                    *end = Some(Limit { value, inclusive });
                    draft.used[u.part] = true;
                }
            }
            Leaf::Prefix(text) if kind.is_none() && prefix.is_none() => {
                prefix = Some(text);
                draft.used[u.part] = true;
            }
            _ => {}
        }
    }
    if let Some(text) = prefix {
        draft
            .described
            .push(format!("{path} starts with {}", Value::from(text)));
        let mut bytes = encoded(Some(&Value::from(text)), *descending);
        bytes.truncate(bytes.len() - 2); // drop the terminator: every extension of `text`
        bounds.lower = Some(End::At(bytes.clone(), true));
        bounds.upper = Some(End::At(bytes, true));
        bounds.range_field = true;
    } else if let Some((first, last)) = kind {
        let mut text = Vec::new();
        let mut end = |limit: Option<Limit<'_>>, tag: u8, operators: [&str; 2]| match limit {
            None => End::At(vec![tag], true),
            Some(Limit { value, inclusive }) => {
                text.push(format!(
                    "{path} {} {value}",
                    operators[usize::from(inclusive)]
                ));
                End::At(key::encode(Some(value)), inclusive)
            }
        };
        let low = end(lower, first, [">", ">="]);
        let high = end(upper, last, ["<", "<="]);
        draft.described.push(text.join(" and "));
        // Ascending bytes of the interval [low, high]; a descending field inverts them,
        // which swaps the ends.
        let (lower, upper) = match descending {
            true => (invert_end(high), invert_end(low)),
            false => (low, high),
        };
        bounds.lower = Some(lower);
        bounds.upper = Some(upper);
        bounds.range_field = true;
    }
    bounds
}

/// How the query's order maps onto the index: leaving out fields pinned to one value, the
/// query's order fields up to `$id` must be the index's next fields, all in its directions
/// or all reversed; `None` when they are not.
fn index_order(
    fields: &[(FieldPath, bool)],
    query: &CompiledQuery,
    pins: &[Vec<&Value>],
) -> Option<IndexOrder> {
    let pinned = pins.len();
    let pinned_one = |path: &FieldPath| {
        fields
            .iter()
            .zip(pins)
            .any(|((p, _), values)| p == path && values.len() == 1)
    };
    let mut ordered: Vec<OrderedField> = Vec::new();
    let mut id_descending = None;
    for (position, (path, descending)) in query.order().iter().enumerate() {
        if *path == FieldPath::Id && !fields[..pinned].iter().any(|(p, _)| p == path) {
            id_descending = Some(*descending);
            break;
        }
        if pinned_one(path) {
            continue;
        }
        match fields.get(pinned + ordered.len()) {
            Some((p, _)) if p == path => ordered.push(OrderedField {
                position,
                descending: *descending,
            }),
            _ => return None,
        }
    }
    let reverse = match ordered.first() {
        Some(first) => {
            let reverse = first.descending != fields[pinned].1;
            let uniform = ordered
                .iter()
                .zip(&fields[pinned..])
                .all(|(field, (_, descending))| (field.descending != *descending) == reverse);
            if !uniform {
                return None;
            }
            reverse
        }
        None => id_descending.unwrap_or(false),
    };
    Some(IndexOrder {
        ordered,
        id_descending,
        reverse,
    })
}

/// The words of `explain` for the order the index is read in.
fn describe_order(
    order: &IndexOrder,
    exact_order: bool,
    pinned: usize,
    fields: usize,
    draft: &mut Draft,
) {
    let ordered = order.ordered.len();
    if ordered > 0 {
        let direction = if order.reverse { "reverse " } else { "" };
        draft.described.push(format!("in {direction}index order"));
    } else if order.reverse {
        draft.described.push("in reverse index order".into());
    }
    if !exact_order && pinned + ordered < fields {
        let ties = pinned + ordered;
        draft
            .described
            .push(format!("ties on {ties} field(s) sorted in memory"));
    }
}

/// The key ranges to read, in key order, empty ones left out: one per combination of pinned
/// values, each within `bounds`, narrowed to the cursor's tie group when there is one.
fn key_ranges(
    pins: &[Vec<&Value>],
    fields: &[(FieldPath, bool)],
    bounds: &Bounds,
    cursor_group: Option<&[u8]>,
    reverse: bool,
) -> Vec<KeyRange> {
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    for (values, (_, descending)) in pins.iter().zip(fields) {
        prefixes = prefixes
            .iter()
            .flat_map(|prefix| {
                values.iter().map(move |value| {
                    let mut next = prefix.clone();
                    key::push(Some(value), *descending, &mut next);
                    next
                })
            })
            .collect();
    }
    let mut ranges: Vec<KeyRange> = prefixes
        .into_iter()
        .map(|prefix| {
            let range = match (&bounds.lower, &bounds.upper) {
                (Some(lower), Some(upper)) => KeyRange {
                    start: start_of(&prefix, lower),
                    end: end_of(&prefix, upper),
                },
                _ => KeyRange::with_prefix(prefix.clone()),
            };
            match cursor_group {
                Some(group) => from_cursor(range, &prefix, group, reverse),
                None => range,
            }
        })
        .filter(|range| !range.is_empty())
        .collect();
    ranges.sort_by(|a, b| a.start.cmp(&b.start));
    ranges
}

/// `range` (of the keys behind `prefix`) narrowed to start at the cursor's tie group, or to
/// end after it when read backwards.
fn from_cursor(mut range: KeyRange, prefix: &[u8], group: &[u8], reverse: bool) -> KeyRange {
    let mut at = prefix.to_vec();
    at.extend_from_slice(group);
    if reverse {
        let end = key::prefix_end(&at);
        range.end = match (range.end, end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    } else if at > range.start {
        range.start = at;
    }
    range
}

/// The conjuncts the key ranges do not decide, as one filter.
fn residual(parts: &[&CompiledFilter], used: &[bool]) -> Option<CompiledFilter> {
    let mut residual: Vec<CompiledFilter> = parts
        .iter()
        .zip(used)
        .filter(|(_, used)| !**used)
        .map(|(part, _)| (*part).clone())
        .collect();
    match residual.len() {
        0 => None,
        1 => residual.pop(),
        _ => Some(CompiledFilter::And(residual)),
    }
}

fn invert_end(end: End) -> End {
    let End::At(mut bytes, inclusive) = end;
    bytes.iter_mut().for_each(|b| *b = !*b);
    End::At(bytes, inclusive)
}

/// Where keys whose component is at (or after) `end` start, behind `prefix`.
fn start_of(prefix: &[u8], end: &End) -> Vec<u8> {
    let End::At(bytes, inclusive) = end;
    let mut at = prefix.to_vec();
    at.extend_from_slice(bytes);
    if *inclusive {
        at
    } else {
        key::prefix_end(&at).unwrap_or(at)
    }
}

/// Where keys after the component `end` start, behind `prefix` (exclusive end).
fn end_of(prefix: &[u8], end: &End) -> Option<Vec<u8>> {
    let End::At(bytes, inclusive) = end;
    let mut at = prefix.to_vec();
    at.extend_from_slice(bytes);
    if *inclusive {
        key::prefix_end(&at)
    } else {
        Some(at)
    }
}

/// The components (after the pinned prefix) of the cursor's tie group: where reading may
/// start. `None` without a cursor, or when the cursor does not sit inside the pinned values
/// (a forged cursor: reading starts at the range's start and the evaluator applies it).
fn cursor_group(
    index: &CompiledIndex,
    query: &CompiledQuery,
    pins: &[Vec<&Value>],
    ordered: &[OrderedField],
    pinned: usize,
) -> Option<Vec<u8>> {
    let position = query.after()?;
    let fields = index.fields();
    for (in_order, (path, _)) in query.order().iter().enumerate() {
        if let Some(field) = fields[..pinned].iter().position(|(p, _)| p == path) {
            let at = position.keys.get(in_order)?.as_ref();
            if !pins[field]
                .iter()
                .any(|v| compare_values(at, Some(v)).is_eq())
            {
                return None;
            }
        }
    }
    if ordered.is_empty() {
        return None;
    }
    let mut group = Vec::new();
    for (field, (_, descending)) in ordered.iter().zip(&fields[pinned..]) {
        let at = position.keys.get(field.position)?.as_ref();
        key::push(at, *descending, &mut group);
    }
    Some(group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;
    use crate::query::{Filter, Order, Query, evaluate};
    use crate::{Document, Page};
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// The entries of `plan`'s ranges in `docs`, counted up to `at_most`.
    fn entries(set: &IndexSet, docs: &[Document], plan: &IndexPlan, at_most: u64) -> u64 {
        let index = set
            .for_collection("c")
            .iter()
            .find(|i| i.name() == plan.index)
            .unwrap();
        let inside = docs
            .iter()
            .filter(|d| plan.ranges.iter().any(|r| r.contains(&index.key(d))))
            .count() as u64;
        inside.min(at_most)
    }

    /// What a counting backend gives the planner: the collection's size and the contested
    /// ranges counted up to the small-range limit plus one; `exact`: counted to the end.
    fn statistics(
        set: &IndexSet,
        docs: &[Document],
        candidates: &crate::index::Candidates,
        exact: bool,
    ) -> crate::index::Statistics {
        let size = docs.len() as u64;
        let at_most = if exact {
            u64::MAX
        } else {
            candidates.small_range_limit(size).saturating_add(1)
        };
        crate::index::Statistics {
            collection_size: Some(size),
            range_entries: candidates
                .to_count()
                .into_iter()
                .map(|plan| (plan.index.clone(), entries(set, docs, plan, at_most)))
                .collect(),
        }
    }

    /// A backend in miniature: one ordered map per index, read as the plan the cost rule
    /// chose says (counting contested ranges as SQLite and memory do).
    fn run(set: &IndexSet, docs: &[Document], query: &Query) -> (Page, Option<IndexPlan>) {
        let compiled = query.compile().unwrap();
        let candidates = candidates(set, "c", &compiled);
        let stats = statistics(set, docs, &candidates, false);
        let Some(plan) = candidates.choose(&stats).plan else {
            return (compiled.evaluate(docs), None);
        };
        let index = set
            .for_collection("c")
            .iter()
            .find(|i| i.name() == plan.index)
            .unwrap();
        let map: BTreeMap<Vec<u8>, &Document> = docs.iter().map(|d| (index.key(d), d)).collect();
        let mut kept = Vec::new();
        for range in &plan.ranges {
            let mut walk = plan.walk(&compiled);
            let entries: Vec<(&Vec<u8>, &&Document)> =
                map.iter().filter(|(k, _)| range.contains(k)).collect();
            let ordered: Box<dyn Iterator<Item = _>> = if plan.reverse {
                Box::new(entries.into_iter().rev())
            } else {
                Box::new(entries.into_iter())
            };
            for (key, doc) in ordered {
                let matches = compiled.matches(doc) && compiled.is_after_cursor(doc);
                match walk.offer(index, key, matches) {
                    Step::Keep => kept.push(*doc),
                    Step::Skip => {}
                    Step::Stop => break,
                }
            }
        }
        (compiled.evaluate(kept), Some(plan))
    }

    fn doc(id: &str, data: serde_json::Value) -> Document {
        Document {
            expires_at: None,
            id: id.into(),
            data: crate::object(data).unwrap(),
            created_at: 1,
            updated_at: 2,
            created_by: "c".into(),
            updated_by: "u".into(),
            version: 1,
        }
    }

    fn set(fields: &[&str]) -> IndexSet {
        IndexSet::new([Index::parse("c", "i", fields).unwrap()]).unwrap()
    }

    #[test]
    fn the_issue_query_is_served_in_order() {
        let set = IndexSet::new([
            Index::parse("c", "by_status_score", ["status", "-score"]).unwrap(),
            Index::parse("c", "by_priority", ["priority"]).unwrap(),
        ])
        .unwrap();
        let query = Query::new()
            .filter(Filter::eq("status", "open").and(Filter::gte("priority", 50)))
            .order_by_desc("score")
            .limit(20)
            .compile()
            .unwrap();
        let plan = plan(&set, "c", &query).unwrap();
        assert_eq!(plan.index, "by_status_score");
        assert!(plan.exact_order && !plan.reverse);
        assert_eq!(plan.ranges.len(), 1);
        assert_eq!(plan.equality_fields, 1);
        assert!(matches!(plan.residual, Some(CompiledFilter::Gte(..))));
    }

    /// The issue's shape: an index that pins `status` but orders by `-score` must read and
    /// sort all of `status = "open"` for every page of an id-order query.
    fn open_tickets(n: usize) -> Vec<Document> {
        (0..n)
            .map(|i| {
                let status = if i % 4 == 0 { "open" } else { "closed" };
                doc(
                    &format!("t{i:05}"),
                    json!({"status": status, "score": (i * 7) % 100}),
                )
            })
            .collect()
    }

    /// The measured choice counts a contested plan's ranges together, each with what the
    /// small-range limit leaves, and chooses as the counted statistics say; with nothing
    /// contested it reads neither the size nor a range.
    #[test]
    fn a_measured_choice_counts_a_plans_ranges_together_up_to_the_limit() {
        use futures_util::FutureExt;
        let set = set(&["status", "-score"]);
        let index = &set.for_collection("c")[0];
        let mut docs = open_tickets(4_000);
        docs.extend((0..3).map(|i| doc(&format!("a{i}"), json!({"status": "archived"}))));
        let statuses = vec![json!("archived"), json!("open")];
        let by_id = Query::new()
            .filter(Filter::In("status".into(), statuses))
            .limit(100)
            .compile()
            .unwrap();
        let found = candidates(&set, "c", &by_id);
        let limit = found.small_range_limit(docs.len() as u64);
        let mut asked = Vec::new();
        let count = |_: &IndexPlan, range: &KeyRange, at_most: u64| {
            asked.push(at_most);
            let inside = docs
                .iter()
                .filter(|d| range.contains(&index.key(d)))
                .count();
            std::future::ready(Ok::<_, ()>((inside as u64).min(at_most)))
        };
        let size = std::future::ready(Ok(docs.len() as u64));
        let measured = found.clone().choose_measured(false, size, count);
        let measured = measured.now_or_never().unwrap().unwrap();
        // "archived" (3 entries) first, then "open" with what is left of limit + 1.
        assert_eq!(asked, [limit + 1, limit + 1 - 3]);
        let counted = found
            .clone()
            .choose(&statistics(&set, &docs, &found, false));
        assert_eq!(measured.plan, counted.plan);
        assert_eq!(measured.reason, counted.reason);
        let read = std::cell::Cell::new(false);
        let size = async {
            read.set(true);
            Ok(0)
        };
        let count = |_: &IndexPlan, _: &KeyRange, _: u64| async { Err(()) };
        let found = by_score_candidates(&set);
        let choice = found.choose_measured(false, size, count).now_or_never();
        assert_eq!(choice.unwrap().unwrap().plan.unwrap().index, "i");
        assert!(!read.get(), "the size was read for an uncontested choice");
    }

    #[test]
    fn a_range_sorted_whole_loses_to_the_scan_in_id_order_unless_small() {
        let set = set(&["status", "-score"]);
        let docs = open_tickets(4_000);
        let by_id = Query::new()
            .filter(Filter::eq("status", "open"))
            .limit(100)
            .compile()
            .unwrap();
        let found = candidates(&set, "c", &by_id);
        assert_eq!(found.list().len(), 1);
        assert_eq!(found.list()[0].reading, crate::index::Reading::SortsRange);
        // sqrt(101 * 4000) = 635 < 1000 open tickets: the scan.
        assert_eq!(found.small_range_limit(4_000), 635);
        let stats = statistics(&set, &docs, &found, false);
        assert_eq!(stats.range_entries, vec![("i".to_owned(), 636)]);
        let choice = found.clone().choose(&stats);
        assert_eq!(choice.plan, None, "{}", choice.reason);
        assert_eq!(choice.estimates[0].index, None);
        // The scan: 101 × 4000 / 636 (the count stopped there).
        assert_eq!(choice.estimates[0].reads, Some(635));
        assert_eq!(choice.estimates[1].reads, Some(636));
        assert!(
            choice.reason.contains("more than 635 entries"),
            "{}",
            choice.reason
        );
        // Knowing nothing, the same.
        assert_eq!(plan(&set, "c", &by_id), None);
        // A rare value: its range is small, the index wins.
        let rare = Query::new()
            .filter(Filter::eq("status", "archived"))
            .limit(100)
            .compile()
            .unwrap();
        let mut docs = docs;
        docs.extend((0..3).map(|i| doc(&format!("a{i}"), json!({"status": "archived"}))));
        let found = candidates(&set, "c", &rare);
        let choice = found
            .clone()
            .choose(&statistics(&set, &docs, &found, false));
        assert_eq!(choice.plan.map(|p| p.index).as_deref(), Some("i"));
        assert_eq!(choice.estimates[0].reads, Some(3));
        // Ordered by score, the index reads in order and stops at the page.
        let by_score = Query::new()
            .filter(Filter::eq("status", "open"))
            .order_by_desc("score")
            .limit(100)
            .compile()
            .unwrap();
        let found = candidates(&set, "c", &by_score);
        assert!(found.to_count().is_empty());
        let choice = found.choose(&statistics(&set, &docs, &by_score_candidates(&set), false));
        assert_eq!(choice.plan.map(|p| p.index).as_deref(), Some("i"));
        assert_eq!(choice.estimates[0].reads, Some(101));
        assert_eq!(choice.estimates[1].index, None);
    }

    fn by_score_candidates(set: &IndexSet) -> crate::index::Candidates {
        let query = Query::new()
            .filter(Filter::eq("status", "open"))
            .order_by_desc("score")
            .limit(100)
            .compile()
            .unwrap();
        candidates(set, "c", &query)
    }

    #[test]
    fn unservable_queries_scan() {
        let set = set(&["status", "score"]);
        for query in [
            Query::new(),
            Query::new().order_by("other"),
            Query::new().order_by("score"),
            Query::new()
                .filter(Filter::eq("status", "x"))
                .order_by("other"),
            Query::new()
                .filter(Filter::eq("status", "x"))
                .order_by("score")
                .order_by_desc("$id")
                .order_by("zzz"),
            Query::new().filter(Filter::eq("status", json!({"a": 1}))),
            Query::new().filter(Filter::any([Filter::eq("status", 1)])),
            Query::new()
                .filter(Filter::is_in("status", [1, 2]))
                .order_by("status"),
        ] {
            let compiled = query.compile().unwrap();
            let planned = plan(&set, "c", &compiled);
            let serves_order_then_id = query.order.len() == 3;
            assert_eq!(
                planned.is_some(),
                serves_order_then_id,
                "{query:?}: {planned:?}"
            );
        }
        assert!(
            plan(
                &set,
                "other",
                &Query::new().order_by("status").compile().unwrap()
            )
            .is_none()
        );
    }

    #[test]
    fn numbers_are_equal_across_kinds_and_missing_is_not_null() {
        let set = set(&["n"]);
        let docs = [
            doc("a", json!({"n": 1})),
            doc("b", json!({"n": 1.0})),
            doc("c", json!({"n": null})),
            doc("d", json!({})),
            doc("e", json!({"n": "1"})),
            doc("f", json!({"n": [1.0]})),
        ];
        for (filter, expected) in [
            (Filter::eq("n", 1.0), vec!["a", "b"]),
            (Filter::eq("n", serde_json::Value::Null), vec!["c"]),
            (
                Filter::is_in("n", [json!(1), json!(1.0), json!([1])]),
                vec!["a", "b", "f"],
            ),
            (Filter::gte("n", 0), vec!["a", "b"]),
            (Filter::gte("n", "0"), vec!["e"]),
            (Filter::lt("n", serde_json::Value::Null), vec![]),
            (Filter::prefix("n", ""), vec!["e"]),
        ] {
            let (page, plan) = run(&set, &docs, &Query::new().filter(filter.clone()));
            assert!(plan.is_some(), "{filter:?}");
            let ids: Vec<&str> = page.documents.iter().map(|d| d.id.as_str()).collect();
            assert_eq!(ids, expected, "{filter:?}");
        }
    }

    fn index_fields() -> impl Strategy<Value = Vec<String>> {
        let field = prop::sample::select(vec![
            "a",
            "-a",
            "n",
            "-n",
            "s",
            "-s",
            "$version",
            "-$updated_by",
        ]);
        prop::collection::vec(field, 1..4).prop_map(|fields| {
            let mut seen = Vec::new();
            let mut out = Vec::new();
            for f in fields {
                let path = f.trim_start_matches('-').to_owned();
                if !seen.contains(&path) {
                    seen.push(path);
                    out.push(f.to_owned());
                }
            }
            out
        })
    }

    /// Queries that indexes over `a b n s` can often serve: equalities, ins, ranges and
    /// prefixes on those fields, orders on them, sometimes more.
    fn servable_query() -> impl Strategy<Value = Query> {
        let path = prop::sample::select(vec!["a", "n", "s", "$version", "$updated_by"]);
        let leaf = prop_oneof![
            (path.clone(), crate::strategies::scalar()).prop_map(|(f, v)| Filter::eq(f, v)),
            (
                path.clone(),
                prop::collection::vec(crate::strategies::scalar(), 0..3)
            )
                .prop_map(|(f, v)| Filter::In(f.into(), v)),
            (path.clone(), crate::strategies::scalar()).prop_map(|(f, v)| Filter::gte(f, v)),
            (path.clone(), crate::strategies::scalar()).prop_map(|(f, v)| Filter::gt(f, v)),
            (path.clone(), crate::strategies::scalar()).prop_map(|(f, v)| Filter::lt(f, v)),
            (path.clone(), crate::strategies::scalar()).prop_map(|(f, v)| Filter::lte(f, v)),
            (path.clone(), crate::strategies::string()).prop_map(|(f, p)| Filter::prefix(f, p)),
        ];
        let leaf = prop_oneof![6 => leaf, 1 => crate::strategies::filter(1)];
        let order = prop::collection::vec(
            (path, any::<bool>()).prop_map(|(f, d)| Order {
                field: f.into(),
                descending: d,
            }),
            0..3,
        );
        let id_tail = prop::option::of(any::<bool>());
        (
            prop::collection::vec(leaf, 0..3),
            order,
            id_tail,
            prop::option::of(1usize..5),
        )
            .prop_map(|(leaves, mut order, id_tail, limit)| {
                if let Some(descending) = id_tail {
                    order.push(Order {
                        field: "$id".into(),
                        descending,
                    });
                }
                Query {
                    filter: (!leaves.is_empty()).then(|| Filter::all(leaves)),
                    order,
                    limit,
                    ..Query::default()
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Whatever index is declared, reading by the plan gives the reference pages, and
        /// walking pages by cursor gives the reference answer once.
        #[test]
        fn plans_give_the_reference_answer(
            fields in prop::collection::vec(index_fields(), 1..3),
            data in prop::collection::vec(crate::strategies::data(), 0..14),
            versions in prop::collection::vec(1u64..4, 14),
            query in servable_query(),
        ) {
            let indexes = fields
                .iter()
                .enumerate()
                .map(|(i, f)| Index::parse("c", format!("i{i}"), f).unwrap());
            let Ok(set) = IndexSet::new(indexes) else { return Ok(()) };
            let docs: Vec<Document> = data
                .into_iter()
                .enumerate()
                .map(|(i, data)| Document { expires_at: None,
                    id: format!("d{}", (i * 5) % 14),
                    data,
                    created_at: 0,
                    updated_at: 0,
                    created_by: String::new(),
                    updated_by: ["x", "y", ""][i % 3].into(),
                    version: versions[i],
                })
                .collect();
            let mut cursor = None;
            let mut walked = Vec::new();
            for _ in 0..=docs.len() + 1 {
                let paged = query.clone().after(cursor);
                let expected = evaluate(&docs, &paged).unwrap();
                let (got, plan) = run(&set, &docs, &paged);
                prop_assert_eq!(&got, &expected, "{:?} {:?}", paged, plan);
                walked.extend(got.documents);
                match got.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            let whole = evaluate(&docs, &Query { limit: None, ..query.clone() }).unwrap();
            prop_assert_eq!(walked, whole.documents);
        }

        /// The cost rule never picks a plan estimated costlier than the cheapest candidate
        /// (the stated factor is 1): under the statistics the planner was given (ranges
        /// counted up to its limit), and with every contested range counted to the end.
        #[test]
        fn the_chosen_plan_is_the_cheapest_estimate(
            fields in prop::collection::vec(index_fields(), 1..4),
            data in prop::collection::vec(crate::strategies::data(), 0..40),
            query in servable_query(),
        ) {
            let indexes = fields
                .iter()
                .enumerate()
                .map(|(i, f)| Index::parse("c", format!("i{i}"), f).unwrap());
            let Ok(set) = IndexSet::new(indexes) else { return Ok(()) };
            let docs: Vec<Document> = data
                .into_iter()
                .enumerate()
                .map(|(i, data)| doc(&format!("d{i:02}"), serde_json::Value::from(data)))
                .collect();
            let compiled = query.compile().unwrap();
            let found = candidates(&set, "c", &compiled);
            for exact in [false, true] {
                let stats = statistics(&set, &docs, &found, exact);
                let choice = found.clone().choose(&stats);
                let reads: Vec<u64> = choice
                    .estimates
                    .iter()
                    .map(|e| e.reads.expect("the size is known"))
                    .collect();
                let cheapest = reads.iter().copied().min().unwrap();
                prop_assert!(
                    reads[0] <= cheapest,
                    "{:?} chose {:?} ({}): {:?}",
                    query,
                    choice.plan.as_ref().map(|p| &p.index),
                    choice.reason,
                    choice.estimates
                );
                prop_assert_eq!(choice.estimates[0].index.as_ref(), choice.plan.as_ref().map(|p| &p.index));
            }
        }
    }
}
