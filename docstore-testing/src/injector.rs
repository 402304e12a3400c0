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

/// One call under way: its number, the fault it got and a random number for the fault's
/// details (where a short page is cut).
#[derive(Debug)]
pub(crate) struct Turn {
    pub call: u64,
    pub kind: CallKind,
    pub target: String,
    pub fault: Option<Fault>,
    pub draw: u64,
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
    pub fn begin(&self, kind: CallKind, target: String) -> Turn {
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
            call,
            kind,
            target,
            fault: planned.or(drawn),
            draw,
        }
    }

    /// Records the finished call.
    pub fn finish(
        &self,
        turn: Turn,
        injected: Option<Injected>,
        inner: Option<Outcome>,
        outcome: Outcome,
    ) {
        let entry = Entry {
            call: turn.call,
            kind: turn.kind,
            target: turn.target,
            injected,
            inner,
            outcome,
        };
        self.state.lock().entries.push(entry);
    }

    pub fn history(&self) -> History {
        History::new(self.state.lock().entries.clone())
    }
}
