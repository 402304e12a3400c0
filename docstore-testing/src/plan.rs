//! What to inject: fault kinds, call kinds and plans.

use docstore::Data;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The kinds of [`Store`](docstore::Store) call, for plans that target one of them and for
/// the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum CallKind {
    /// [`Store::create`](docstore::Store::create).
    Create,
    /// [`Store::get`](docstore::Store::get).
    Get,
    /// [`Store::put`](docstore::Store::put).
    Put,
    /// [`Store::update`](docstore::Store::update).
    Update,
    /// [`Store::update_if`](docstore::Store::update_if).
    UpdateIf,
    /// [`Store::replace_if`](docstore::Store::replace_if).
    ReplaceIf,
    /// [`Store::get_many`](docstore::Store::get_many).
    GetMany,
    /// [`Store::write_all`](docstore::Store::write_all).
    WriteAll,
    /// [`Store::delete`](docstore::Store::delete).
    Delete,
    /// [`Store::delete_if`](docstore::Store::delete_if).
    DeleteIf,
    /// [`Store::restore`](docstore::Store::restore).
    Restore,
    /// [`Store::query`](docstore::Store::query).
    Query,
    /// [`Store::explain`](docstore::Store::explain).
    Explain,
    /// [`Store::collections`](docstore::Store::collections).
    Collections,
    /// [`Store::count`](docstore::Store::count).
    Count,
    /// [`Store::recount`](docstore::Store::recount).
    Recount,
    /// A page of the change feed ([`Site::changes`](docstore::Site::changes), and every page
    /// a `watch` reads).
    Changes,
}

impl CallKind {
    /// The method's name, as in `update_if`.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Create => "create",
            CallKind::Get => "get",
            CallKind::Put => "put",
            CallKind::Update => "update",
            CallKind::UpdateIf => "update_if",
            CallKind::ReplaceIf => "replace_if",
            CallKind::GetMany => "get_many",
            CallKind::WriteAll => "write_all",
            CallKind::Delete => "delete",
            CallKind::DeleteIf => "delete_if",
            CallKind::Restore => "restore",
            CallKind::Query => "query",
            CallKind::Explain => "explain",
            CallKind::Collections => "collections",
            CallKind::Count => "count",
            CallKind::Recount => "recount",
            CallKind::Changes => "changes",
        }
    }
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One way a call can go wrong, as real backends go wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// The call fails with [`Error::Unavailable`](docstore::Error::Unavailable) before it
    /// reaches the store: nothing is applied. Any call.
    Unavailable,
    /// The call reaches the store and is applied (or fails there), then its answer is lost:
    /// the caller sees [`Error::Unavailable`](docstore::Error::Unavailable). Any call; on a
    /// read it is harmless, on a write it is the case retry loops get wrong (a `write_all`
    /// batch was applied as a whole).
    LostAnswer,
    /// Another writer changes the document just before the call reaches the store (an
    /// `update` with the plan's [concurrent patch](Plan::concurrent_patch), by the actor
    /// [`CONCURRENT_ACTOR`](crate::CONCURRENT_ACTOR)), so a conditional write sees
    /// [`Error::Conflict`](docstore::Error::Conflict). Only `update_if`, `replace_if` (what
    /// `Collection::modify` writes with), `delete_if` and `write_all`, where it changes the key
    /// of one write that expects a version (an `UpdateIf`, `DeleteIf` or `Check`), so the batch
    /// fails as a whole.
    ConcurrentWrite,
    /// The call waits this long (`tokio::time::sleep`) before it reaches the store. Any call.
    /// Under tokio's paused test clock the wait takes no real time and is exact.
    Latency(Duration),
    /// The query answers a page that ends early: fewer documents than the store returned
    /// (and than the limit), with a valid `next` cursor from which the walk continues, as
    /// DynamoDB may; or, on the last page, all of them with a `next` cursor whose page is
    /// empty. Every page keeps at least one document, so a walk always ends. Only `query`, and
    /// only when there is something to cut (two documents, or one on the last page).
    ShortPage,
    /// The query answers a page marked partial ([`Page::exhausted_scan`](docstore::Page::exhausted_scan)),
    /// as DynamoDB does when a query in another order than `$id` reached its `max_scan`
    /// bound: the documents are right, others may be missing. A stream turns it into an
    /// [`Error::PartialAnswer`](docstore::Error::PartialAnswer) item. Only `query`; never
    /// drawn by [`strategy::fault`](crate::strategy::fault), since an exact backend never
    /// answers it.
    PartialPage,
}

impl Fault {
    /// Whether this fault can happen to a call of `kind`; a fault that cannot is never
    /// injected there (a planned one is skipped and the call passes through).
    pub fn applies_to(self, kind: CallKind) -> bool {
        match self {
            Fault::Unavailable | Fault::LostAnswer | Fault::Latency(_) => true,
            Fault::ConcurrentWrite => matches!(
                kind,
                CallKind::UpdateIf | CallKind::ReplaceIf | CallKind::DeleteIf | CallKind::WriteAll
            ),
            Fault::ShortPage | Fault::PartialPage => kind == CallKind::Query,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Unavailable => f.write_str("unavailable"),
            Fault::LostAnswer => f.write_str("lost answer"),
            Fault::ConcurrentWrite => f.write_str("concurrent write"),
            Fault::Latency(delay) => write!(f, "latency {delay:?}"),
            Fault::ShortPage => f.write_str("short page"),
            Fault::PartialPage => f.write_str("partial page"),
        }
    }
}

/// A fault drawn at random: `fault` with `probability` on every call it applies to, or only
/// on calls of one kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The fault.
    pub fault: Fault,
    /// The calls it targets; `None`: every call it applies to.
    pub kind: Option<CallKind>,
    /// The chance, from 0 to 1, that a targeted call gets it.
    pub probability: f64,
}

/// Which calls a scheduled fault hits: the n-th call of all, or the n-th call of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// The n-th call through the wrapper, counting from 1.
    Call(u64),
    /// The n-th call of one kind, counting from 1.
    NthOf(CallKind, u64),
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Call(n) => write!(f, "call #{n}"),
            Slot::NthOf(kind, n) => write!(f, "{kind} no. {n}"),
        }
    }
}

/// What a [`FaultyDriver`](crate::FaultyDriver) injects, and where.
///
/// A plan is a seed, random [`Rule`]s and scheduled faults. For every call the wrapper first
/// draws each rule that targets the call (in the order they were added; the first hit wins),
/// then a scheduled fault for the call, if any, replaces the drawn one (a call number before
/// an n-th call of a kind). Draws happen for every call whatever is scheduled, so adding or
/// removing a scheduled fault never changes what the rules do to other calls. A call gets at
/// most one fault, and never one that does not [apply](Fault::applies_to) to it.
///
/// ```
/// use docstore_testing::{CallKind, Fault, Plan};
/// use std::time::Duration;
///
/// // 10% of calls lose their answer, every second update_if meets a concurrent writer,
/// // and the third call waits 50 ms.
/// let plan = Plan::seeded(42)
///     .with(Fault::LostAnswer, 0.1)
///     .with_on(CallKind::UpdateIf, Fault::ConcurrentWrite, 0.5)
///     .on_call(3, Fault::Latency(Duration::from_millis(50)));
///
/// // Exactly this sequence: calls 1 and 2 pass, call 3 loses its answer.
/// let scripted = Plan::scripted([None, None, Some(Fault::LostAnswer)]);
/// assert_eq!(scripted.to_string(), "seed 0; call #3: lost answer");
/// # let _ = plan;
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    seed: u64,
    rules: Vec<Rule>,
    scheduled: BTreeMap<Slot, Fault>,
    concurrent_patch: Data,
}

impl Plan {
    /// A plan that injects nothing (seed 0).
    pub fn new() -> Self {
        Plan::default()
    }

    /// A plan that injects nothing yet, drawing its random choices from `seed`.
    pub fn seeded(seed: u64) -> Self {
        Plan {
            seed,
            ..Plan::default()
        }
    }

    /// A plan that injects exactly `faults[i]` into call `i + 1` (`None`: that call passes).
    pub fn scripted(faults: impl IntoIterator<Item = Option<Fault>>) -> Self {
        Plan::new().script(faults)
    }

    /// Adds `fault` with `probability` (clamped to 0..=1) on every call it applies to.
    pub fn with(self, fault: Fault, probability: f64) -> Self {
        self.rule(fault, None, probability)
    }

    /// Adds `fault` with `probability` (clamped to 0..=1) on calls of `kind` only.
    pub fn with_on(self, kind: CallKind, fault: Fault, probability: f64) -> Self {
        self.rule(fault, Some(kind), probability)
    }

    /// Injects `fault` into the `n`-th call through the wrapper (counting from 1).
    pub fn on_call(mut self, n: u64, fault: Fault) -> Self {
        self.scheduled.insert(Slot::Call(n), fault);
        self
    }

    /// Injects `fault` into the `n`-th call of `kind` (counting from 1): "the second
    /// `update_if` loses its answer".
    pub fn on_nth(mut self, kind: CallKind, n: u64, fault: Fault) -> Self {
        self.scheduled.insert(Slot::NthOf(kind, n), fault);
        self
    }

    /// Schedules `faults[i]` for call `i + 1` (`None`: nothing scheduled there).
    pub fn script(mut self, faults: impl IntoIterator<Item = Option<Fault>>) -> Self {
        for (n, fault) in (1..).zip(faults) {
            if let Some(fault) = fault {
                self.scheduled.insert(Slot::Call(n), fault);
            }
        }
        self
    }

    /// The merge patch the concurrent writer of [`Fault::ConcurrentWrite`] applies (default:
    /// `{}`, which changes only the version, `updated_at` and `updated_by`).
    pub fn concurrent_patch(mut self, patch: Data) -> Self {
        self.concurrent_patch = patch;
        self
    }

    /// The seed of the random choices.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The random rules, in the order they are drawn.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The scheduled faults.
    pub fn scheduled(&self) -> &BTreeMap<Slot, Fault> {
        &self.scheduled
    }

    /// The concurrent writer's patch.
    pub fn patch(&self) -> &Data {
        &self.concurrent_patch
    }

    fn rule(mut self, fault: Fault, kind: Option<CallKind>, probability: f64) -> Self {
        let probability = if probability.is_nan() {
            0.0
        } else {
            probability.clamp(0.0, 1.0)
        };
        self.rules.push(Rule {
            fault,
            kind,
            probability,
        });
        self
    }
}

impl fmt::Display for Plan {
    /// One line: the seed, the rules, then the scheduled faults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed {}", self.seed)?;
        for rule in &self.rules {
            write!(f, "; {} p={}", rule.fault, rule.probability)?;
            if let Some(kind) = rule.kind {
                write!(f, " on {kind}")?;
            }
        }
        for (slot, fault) in &self.scheduled {
            write!(f, "; {slot}: {fault}")?;
        }
        Ok(())
    }
}
