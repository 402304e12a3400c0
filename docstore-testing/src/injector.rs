//! Deciding, call by call, which fault a plan injects, and keeping the history.

use crate::history::{Entry, History, Injected, Outcome};
use crate::plan::{CallKind, Fault, Plan, Slot};
use parking_lot::Mutex;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::collections::HashMap;

/// A plan in action: the random generator, the call counters and the entries so far.
#[derive(Debug)]
pub(crate) struct Injector {
    plan: Plan,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// A portable generator: the same seed gives the same draws on every platform and release.
    rng: Xoshiro256PlusPlus,
    calls: u64,
    per_kind: HashMap<CallKind, u64>,
    entries: Vec<Entry>,
}

/// One call under way: its number, the fault it got, a random number for the fault's
/// details (which key a concurrent writer changes, where a short page is cut) and what was
/// injected so far. Recorded by [`finish`](Self::finish), or as [`Outcome::Cancelled`] when
/// dropped before (the caller gave up on the call, e.g. a timeout during injected latency).
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    injector: &'a Injector,
    call: u64,
    kind: CallKind,
    target: String,
    pub fault: Option<Fault>,
    pub draw: u64,
    pub injected: Option<Injected>,
    done: bool,
}

impl Turn<'_> {
    /// Records the call: what the wrapped store answered (`None`: not called) and what the
    /// caller gets.
    pub fn finish(mut self, inner: Option<Outcome>, outcome: Outcome) {
        self.done = true;
        self.record(inner, outcome);
    }

    fn record(&mut self, inner: Option<Outcome>, outcome: Outcome) {
        let entry = Entry {
            call: self.call,
            kind: self.kind,
            target: std::mem::take(&mut self.target),
            injected: self.injected.take(),
            inner,
            outcome,
        };
        self.injector.state.lock().entries.push(entry);
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.record(None, Outcome::Cancelled);
        }
    }
}

impl Injector {
    pub fn new(plan: Plan) -> Self {
        let rng = Xoshiro256PlusPlus::seed_from_u64(plan.seed());
        Injector {
            plan,
            state: Mutex::new(State {
                rng,
                calls: 0,
                per_kind: HashMap::new(),
                entries: Vec::new(),
            }),
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Numbers the call and decides its fault. Every call draws the same amount of
    /// randomness (one draw per targeting rule, one for the details), whatever it gets.
    pub fn begin(&self, kind: CallKind, target: String) -> Turn<'_> {
        let mut state = self.state.lock();
        state.calls += 1;
        let call = state.calls;
        let nth = {
            let counter = state.per_kind.entry(kind).or_insert(0);
            *counter += 1;
            *counter
        };
        let mut drawn = None;
        for rule in self.plan.rules() {
            if rule.kind.is_none_or(|k| k == kind) && rule.fault.applies_to(kind) {
                let hit = state.rng.random_bool(rule.probability);
                if hit && drawn.is_none() {
                    drawn = Some(rule.fault);
                }
            }
        }
        let draw = state.rng.random::<u64>();
        let scheduled = self.plan.scheduled();
        let planned = scheduled
            .get(&Slot::Call(call))
            .or_else(|| scheduled.get(&Slot::NthOf(kind, nth)))
            .copied()
            .filter(|fault| fault.applies_to(kind));
        Turn {
            injector: self,
            call,
            kind,
            target,
            fault: planned.or(drawn),
            draw,
            injected: None,
            done: false,
        }
    }

    pub fn history(&self) -> History {
        History::new(self.state.lock().entries.clone())
    }
}
