//! The planner's cost rule: which of the candidate plans — every index that serves the query
//! ([`candidates`](super::candidates)) and the backend's scan of the collection — runs a
//! query, by estimated reads (`docs/contract.md`, "Indexes").
//!
//! The rule itself is documented on [`Candidates`].

use super::{IndexPlan, KeyRange};
use crate::query::CompiledQuery;
use std::cmp::Reverse;
use std::fmt;

/// How a plan reads, which decides how its cost grows with the collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// In the query's order (up to ties on its ordered fields): reading stops once the page and
    /// one more are found.
    StopsAtPage,
    /// Each key range is read whole and sorted in memory, for every page.
    SortsRange,
    /// The whole collection is read and sorted in memory, for every page.
    SortsCollection,
}

impl Reading {
    /// How the backend's scan of the collection reads `query`: it stops at the page in id
    /// order, and sorts the collection in any other order.
    pub fn of_scan(query: &CompiledQuery) -> Reading {
        if query.id_order().is_some() {
            Reading::StopsAtPage
        } else {
            Reading::SortsCollection
        }
    }

    /// A stable short name: `stops_at_page`, `sorts_range` or `sorts_collection` (the CLI's
    /// JSON).
    pub fn name(self) -> &'static str {
        match self {
            Reading::StopsAtPage => "stops_at_page",
            Reading::SortsRange => "sorts_range",
            Reading::SortsCollection => "sorts_collection",
        }
    }
}

impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reading::StopsAtPage => "reads in the query's order and stops at the page",
            Reading::SortsRange => "reads its whole range and sorts it in memory on every page",
            Reading::SortsCollection => "reads the whole collection and sorts it in memory",
        })
    }
}

/// How closely an index fits a query, compared field by field (more is better): what breaks
/// ties between candidates of equal estimated reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fit {
    /// Leading index fields pinned by `Eq`/`In`.
    pub pinned_fields: usize,
    /// Whether the next field has a range or prefix condition.
    pub range_field: bool,
    /// Index fields following the query's order.
    pub ordered_fields: usize,
    /// Fewer key ranges fit better.
    pub fewer_ranges: Reverse<usize>,
}

/// One index able to serve a query: its plan, how it reads and how well it fits.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// How the index serves the query.
    pub plan: IndexPlan,
    /// How it reads.
    pub reading: Reading,
    /// How closely it fits the query.
    pub fit: Fit,
}

/// What a backend knows about the data when it plans: the inputs of the estimates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    /// The collection's size (its counter); `None` when the backend did not read it.
    pub collection_size: Option<u64>,
    /// For the indexes [`Candidates::to_count`] names: the entries in the plan's key ranges,
    /// counted up to [`Candidates::small_range_limit`] plus one (a larger value means "more
    /// than the limit", not an exact count).
    pub range_entries: Vec<(String, u64)>,
}

impl Statistics {
    fn entries(&self, index: &str) -> Option<u64> {
        self.range_entries
            .iter()
            .find(|(name, _)| name == index)
            .map(|(_, n)| *n)
    }
}

/// One plan the planner weighed: an index (or the scan, `index: None`), how it reads and its
/// estimated reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// The index; `None` for the scan of the collection.
    pub index: Option<String>,
    /// How it reads.
    pub reading: Reading,
    /// About how many documents (entries, rows or items) it reads for one page; `None` when
    /// the backend gave no collection size and the plan's cost grows with it.
    pub reads: Option<u64>,
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.index {
            Some(name) => write!(f, "index {name}")?,
            None => f.write_str("scan")?,
        }
        write!(f, " ({}", self.reading)?;
        if let Some(n) = self.reads {
            write!(f, ", reads about {n}")?;
        }
        f.write_str(")")
    }
}

/// The planner's decision: the plan that runs, every plan weighed, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The index plan that runs; `None`: the backend scans.
    pub plan: Option<IndexPlan>,
    /// Every plan weighed, the chosen one first, then the scan and the other indexes.
    pub estimates: Vec<Estimate>,
    /// Why the chosen plan won, in a sentence.
    pub reason: String,
}

impl Choice {
    /// About how many entries the chosen plan reads ([`Explain::estimated_reads`]).
    ///
    /// [`Explain::estimated_reads`]: crate::Explain::estimated_reads
    pub fn estimated_reads(&self) -> Option<u64> {
        self.estimates.first().and_then(|e| e.reads)
    }

    /// What [`Store::explain`](crate::Store::explain) answers for this choice: the chosen
    /// index plan ([`Explain::index`](crate::Explain::index)) or, when the backend scans,
    /// the scan `how` describes, reading as [`Reading::of_scan`] says of `query`; with the
    /// weighing ([`Explain::with_choice`](crate::Explain::with_choice)). A backend adds its
    /// database's own plan with [`Explain::with_database_plan`](crate::Explain::with_database_plan).
    pub fn explain(
        &self,
        query: &CompiledQuery,
        how: impl FnOnce() -> String,
        strongly_consistent: bool,
    ) -> crate::Explain {
        let reads = self.estimated_reads();
        let explain = match &self.plan {
            Some(plan) => {
                crate::Explain::index(plan, self.estimates[0].reading, reads, strongly_consistent)
            }
            None => {
                crate::Explain::scan(how(), Reading::of_scan(query), reads, strongly_consistent)
            }
        };
        explain.with_choice(self)
    }
}

/// The candidate indexes of one query ([`candidates`](super::candidates)) and what the cost
/// rule needs to know about the query; [`choose`](Self::choose) applies the rule
/// (`docs/contract.md`, "Indexes").
///
/// **How each plan reads.** A plan either reads in the query's order and stops once the page
/// (and one more) is found ([`Reading::StopsAtPage`]: an index in exactly the query's order or
/// ordered on the query's sort fields, and the scan of a query in id order), or must read a
/// whole range and sort it in memory for every page ([`Reading::SortsRange`]: an index that
/// pins or bounds the filter's fields but does not follow the query's order, e.g. `(status,
/// -score)` for `status = "open"` in id order), or sorts the whole collection
/// ([`Reading::SortsCollection`]: the scan of any other order).
///
/// **Estimates** (for `explain` and for the rule; `N` is the collection size from its counter,
/// `L` the page size, `R` the entries in a candidate's key ranges, counted by the backend up to
/// a limit when the choice depends on it):
/// - a plan that stops at the page: `L + 1` per key range, at most `R` (or `N`); without a
///   limit, `R` (or `N`);
/// - a plan that sorts a range: `R`, or `N` when not counted;
/// - the scan in id order without a filter: `L + 1`; with a filter: `(L + 1) × N / R` for the
///   smallest counted `R` (the filter's matches, at most `R`, taken as spread evenly over the
///   ids), or `N` when nothing was counted;
/// - the scan in another order: `N` (a backend may bound it further, as DynamoDB's `max_scan`).
///
/// **The rule.** A plan that stops at the page wins over any plan that sorts a range or the
/// collection; among those, the fewest estimated reads, then the best [`Fit`]. When only plans
/// that sort are left and the query has a page size and is in id order (so the scan stops at
/// the page), an index that sorts its range wins only if its range is known to be small:
/// counted at most [`Candidates::small_range_limit`] entries, `max(L + 1, √((L + 1) × N))` —
/// the size at which reading the range whole costs what the scan costs under the even spread
/// above. Counting stops past that limit and reads index entries only (no document), so it
/// never costs more than the index plan it rejects would read. Otherwise (no page size: every plan reads all it finds; another order: the
/// scan sorts the whole collection) the index that sorts the smallest range wins, since its
/// range is part of the collection. Under these estimates the chosen plan never reads more
/// than the cheapest candidate (the planner's property test checks it).
#[derive(Clone, Debug)]
pub struct Candidates {
    list: Vec<Candidate>,
    in_id_order: bool,
    filtered: bool,
    limit: Option<u64>,
}

impl Candidates {
    pub(super) fn new(list: Vec<Candidate>, query: &CompiledQuery) -> Self {
        Candidates {
            list,
            in_id_order: query.id_order().is_some(),
            filtered: query.filter().is_some(),
            limit: query.limit().map(|l| l as u64),
        }
    }

    /// Every candidate index, in declaration order.
    pub fn list(&self) -> &[Candidate] {
        &self.list
    }

    /// How the scan reads this query.
    fn scan_reading(&self) -> Reading {
        if self.in_id_order {
            Reading::StopsAtPage
        } else {
            Reading::SortsCollection
        }
    }

    /// Whether a candidate that sorts its range must prove its range small to win: the query
    /// has a page size, the scan stops at it, and no index reads in order.
    fn contested(&self) -> bool {
        self.limit.is_some()
            && self.in_id_order
            && !self.list.iter().any(|c| c.reading == Reading::StopsAtPage)
    }

    /// The plans whose key-range entries the choice depends on: a backend that can count
    /// entries cheaply counts each one's up to [`small_range_limit`](Self::small_range_limit)
    /// plus one and passes them in [`Statistics::range_entries`] (with the collection size);
    /// a backend that passes none gets the scan whenever this is not empty.
    pub fn to_count(&self) -> Vec<&IndexPlan> {
        if !self.contested() {
            return Vec::new();
        }
        self.list
            .iter()
            .filter(|c| c.reading == Reading::SortsRange)
            .map(|c| &c.plan)
            .collect()
    }

    /// The most entries a range may hold to count as small in a collection of
    /// `collection_size`: `max(L + 1, √((L + 1) × N))` (see [`Candidates`]).
    pub fn small_range_limit(&self, collection_size: u64) -> u64 {
        let page = self.limit.unwrap_or(u64::MAX).saturating_add(1);
        page.max(page.saturating_mul(collection_size).isqrt())
    }

    /// Estimated reads of a candidate index.
    fn index_reads(&self, candidate: &Candidate, stats: &Statistics) -> Option<u64> {
        let whole = stats
            .entries(&candidate.plan.index)
            .or(stats.collection_size);
        match (candidate.reading, self.limit) {
            (Reading::StopsAtPage, Some(limit)) => {
                let page = limit
                    .saturating_add(1)
                    .saturating_mul(candidate.plan.ranges.len() as u64);
                Some(whole.map_or(page, |n| n.min(page)))
            }
            _ => whole,
        }
    }

    /// Estimated reads of the scan, given the smallest counted range (`None`: none counted).
    fn scan_reads(&self, stats: &Statistics, smallest_range: Option<u64>) -> Option<u64> {
        let size = stats.collection_size;
        match (self.in_id_order, self.limit) {
            (true, Some(limit)) if !self.filtered => {
                let page = limit.saturating_add(1);
                Some(size.map_or(page, |n| n.min(page)))
            }
            (true, Some(limit)) => match (size, smallest_range) {
                (Some(n), Some(range)) => {
                    let spread = (u128::from(limit) + 1) * u128::from(n) / u128::from(range.max(1));
                    Some(n.min(u64::try_from(spread).unwrap_or(u64::MAX)))
                }
                _ => size,
            },
            _ => size,
        }
    }

    /// Applies the cost rule with what it needs measured: when it asks ([`to_count`]
    /// non-empty), or `always`, the collection's size (`size`, awaited only then), and the
    /// entries of each contested plan's ranges, `count_range(plan, range, at_most)` counting
    /// at most `at_most` of them: a plan's ranges are counted together only up to the
    /// [`small_range_limit`] plus one, so counting never costs what the plan it rejects
    /// would. `always` serves `explain`, whose estimates print the size, and backends whose
    /// size is free. A backend that never waits gives ready futures and polls this once.
    ///
    /// [`to_count`]: Self::to_count
    /// [`small_range_limit`]: Self::small_range_limit
    pub async fn choose_measured<E, Count>(
        self,
        always: bool,
        size: impl Future<Output = Result<u64, E>>,
        mut count_range: impl FnMut(&IndexPlan, &KeyRange, u64) -> Count,
    ) -> Result<Choice, E>
    where
        Count: Future<Output = Result<u64, E>>,
    {
        let mut stats = Statistics::default();
        let to_count = self.to_count();
        if always || !to_count.is_empty() {
            let size = size.await?;
            let at_most = self.small_range_limit(size).saturating_add(1);
            for plan in to_count {
                let mut counted = 0;
                for range in &plan.ranges {
                    counted += count_range(plan, range, at_most - counted).await?;
                    if counted >= at_most {
                        break;
                    }
                }
                stats.range_entries.push((plan.index.clone(), counted));
            }
            stats.collection_size = Some(size);
        }
        Ok(self.choose(&stats))
    }

    /// Applies the cost rule (see [`Candidates`]) with what the backend knows.
    pub fn choose(self, stats: &Statistics) -> Choice {
        let smallest_range = self
            .to_count()
            .iter()
            .filter_map(|plan| stats.entries(&plan.index))
            .min();
        let scan = Estimate {
            index: None,
            reading: self.scan_reading(),
            reads: self.scan_reads(stats, smallest_range),
        };
        let weighed: Vec<(Estimate, &Candidate)> = self
            .list
            .iter()
            .map(|c| {
                let estimate = Estimate {
                    index: Some(c.plan.index.clone()),
                    reading: c.reading,
                    reads: self.index_reads(c, stats),
                };
                (estimate, c)
            })
            .collect();
        let (winner, reason) = self.winner(&weighed, stats);
        let mut estimates = Vec::with_capacity(weighed.len() + 1);
        if let Some(w) = winner {
            estimates.push(weighed[w].0.clone());
        }
        estimates.push(scan);
        estimates.extend(
            weighed
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != winner)
                .map(|(_, (e, _))| e.clone()),
        );
        Choice {
            plan: winner.map(|w| weighed[w].1.plan.clone()),
            estimates,
            reason,
        }
    }

    /// The winning candidate (`None`: the scan) and why.
    fn winner(
        &self,
        weighed: &[(Estimate, &Candidate)],
        stats: &Statistics,
    ) -> (Option<usize>, String) {
        let cheapest = |reading: Reading| {
            weighed
                .iter()
                .enumerate()
                .filter(|(_, (_, c))| c.reading == reading)
                .min_by_key(|(_, (e, c))| (e.reads.unwrap_or(u64::MAX), Reverse(c.fit)))
                .map(|(i, (e, _))| (i, e))
        };
        if let Some((i, e)) = cheapest(Reading::StopsAtPage) {
            let name = e.index.as_deref().unwrap_or_default();
            return (
                Some(i),
                format!("index {name} reads in the query's order and stops when the page is full"),
            );
        }
        let Some((i, e)) = cheapest(Reading::SortsRange) else {
            return (None, "no declared index serves the query".to_owned());
        };
        let name = e.index.as_deref().unwrap_or_default();
        if !self.contested() {
            let why = if self.limit.is_none() {
                "without a page size every plan reads all it finds"
            } else {
                "the scan would sort the whole collection"
            };
            return (
                Some(i),
                format!("{why}, and the range of index {name} is part of it"),
            );
        }
        let Some(size) = stats.collection_size else {
            return (None, unknown_range(name));
        };
        let limit = self.small_range_limit(size);
        match stats.entries(name) {
            Some(entries) if entries <= limit => (
                Some(i),
                format!(
                    "the range of index {name} is small ({entries} entries, at most {limit}): \
                     reading it whole costs less than the scan in id order"
                ),
            ),
            Some(_) => (
                None,
                format!(
                    "the scan in id order stops when the page is full; index {name} would read \
                     and sort its whole range on every page, and that range holds more than \
                     {limit} entries"
                ),
            ),
            None => (None, unknown_range(name)),
        }
    }
}

fn unknown_range(name: &str) -> String {
    format!(
        "the scan in id order stops when the page is full; index {name} would read and sort \
         its whole range on every page, and that range is not known to be small"
    )
}
