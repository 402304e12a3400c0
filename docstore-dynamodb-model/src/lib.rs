//! A capacity model of DynamoDB for tests and benches: an HTTP layer between the SDK and the
//! emulator that enforces what neither emulator models — DynamoDB's throughput limits per
//! partition key and per item, the double cost of transactions, and transaction conflicts — and
//! counts what it saw, so a test can tell whether a table layout has a hot spot and a bench what
//! a layout's creates cost.
//!
//! docstore-dynamodb's `capacity` tests check the model itself (on a hand-set clock), that the
//! SDK reads its refusals as DynamoDB's, and the layout through it; docstore-bench's
//! `hot_collection` measures the layout through it.
//!
//! # Use
//! An SDK client sends through a model when built with [`CapacityModel::http_client`] (and,
//! for the store's own retry settings, [`CapacityModel::retry_config`]);
//! [`CapacityModel::report`] says what every item, partition key and operation went through.
//!
//! # The limits and where they come from
//! All from the Amazon DynamoDB Developer Guide:
//! - **Units** ("Read/write capacity mode", "DynamoDB item sizes"): one write unit (WCU) is one
//!   write per second of an item of up to 1 KB (each further started KB one more unit); one
//!   read unit (RCU) is one strongly consistent read per second of up to 4 KB, or two
//!   eventually consistent ones (half a unit each).
//! - **Transactions** ("Capacity management for transactions"): DynamoDB performs two
//!   underlying reads or writes of every item in a transaction, so a transactional write costs
//!   2 WCU per KB and a transactional read 2 RCU per 4 KB.
//! - **Partitions** ("Best practices for designing and using partition keys effectively",
//!   "Burst and adaptive capacity"): whatever the capacity mode, an access pattern that exceeds
//!   3 000 RCU or 1 000 WCU per second for a single partition key value may be throttled. The
//!   same holds for each partition key value of a global secondary index, whose writes
//!   throttle the base table's writes that feed them ("IndexWriteKeyRangeThroughputExceeded").
//!   A single item is never more than this: split for heat can spread a partition key's
//!   items over partitions by sort key, never one item.
//! - **Burst** ("Burst capacity"): DynamoDB keeps up to 300 s of unused capacity, but only as
//!   far as the partition's hard limit; past 1 000 WCU/3 000 RCU per second nothing bursts. So
//!   each bucket here holds one second of units: a quiet key may take a whole second's units
//!   at once, never more.
//! - **Conflicts** ("Transaction conflict handling in DynamoDB"): a `TransactWriteItems` is
//!   cancelled with `TransactionConflict` for its items that are part of another ongoing
//!   `TransactWriteItems`; a `PutItem`, `UpdateItem` or `DeleteItem` of an item in an ongoing
//!   `TransactWriteItems` fails with `TransactionConflictException`; a `TransactGetItems` is
//!   cancelled when one of its items is part of an ongoing write of any kind.
//! - **Errors**: the `TransactWriteItems` API reference lists the cancellation reasons
//!   (`None`, `TransactionConflict` "Transaction is ongoing for the item", `ThrottlingError`
//!   for a throttled item of an on-demand table — the library creates on-demand tables).
//!
//! # Which throttling error
//! A throttled lone request is answered `ProvisionedThroughputExceededException` (HTTP 400)
//! with a `ThrottlingReasons` entry `TableWriteKeyRangeThroughputExceeded` (or `…Read…`,
//! `Index…`): the partition-key guide says requests past a single partition key value's limit
//! are throttled with that error "regardless of the capacity mode", and the throttling guide
//! lists key-range throttling under both modes. `ThrottlingException` (the newer on-demand
//! error, same `ThrottlingReasons`) can be chosen with [`ThrottleError`]; the SDK and the store
//! treat both as "refused, not applied". A throttled transaction is cancelled with
//! `ThrottlingError` on its throttled items, as the API reference says for on-demand tables.
//!
//! How a throttle reaches the caller: the SDK's standard retries resend throttled lone
//! requests (`ProvisionedThroughputExceededException` is one of its throttling codes) up to
//! its attempt limit and while its retry quota lasts; the store then backs off and sends
//! again. The SDK never resends a `TransactionCanceledException`: the store reads the reasons
//! and backs off itself. A model's client ([`CapacityModel::retry_config`]) has a retry quota
//! of its own, so tests in one binary do not drain each other's.
//!
//! # Time
//! Units are DynamoDB's; the clock may be slowed ([`Clock::scaled`]): at `0.01` model seconds
//! per real second a partition key takes 10 WCU per real second, so a test meets the limits in
//! seconds with every ratio DynamoDB's. Unit tests set the time by hand ([`Clock::manual`]).
//!
//! # Approximations
//! - The item size of a write is the size of what the request carries: a `PutItem`'s item; an
//!   `UpdateItem`'s key and expression values; a `DeleteItem`'s or `ConditionCheck`'s key
//!   (DynamoDB charges the larger of the item before and after, which the model does not
//!   read). Sizes follow DynamoDB's rules (names plus values; numbers about a byte per two
//!   digits; 3 bytes per list or map and 1 per element).
//! - GSI partition keys come from the attributes named in [`CapacityModel::with_indexes`]
//!   (by default docstore's `gNpk` of GSI `docstore-gN`): found in a put item, or as a
//!   placeholder assigned in an update's `SET` clause. A write that moves an item off a GSI key
//!   (or a delete) is not charged to the old GSI key, which the model does not know. GSI writes
//!   cost the item's size at 1×, also inside transactions.
//! - Reads are admitted on their smallest cost (1 RCU, ½ eventually consistent, 2
//!   transactional) and charged the rest from the answer (items returned, sizes summed per
//!   request as DynamoDB rounds them); a bucket may go into debt, as DynamoDB's does. A Query
//!   is charged to its partition key only (base table or GSI); a Scan to the partition keys of
//!   the items it returned, after the fact; items a filter dropped are not seen.
//! - A transaction is ongoing from the moment the model admits it until the emulator answers:
//!   how long that is depends on the emulator's latency and queueing, not DynamoDB's, so
//!   tests assert where conflicts fall (which items), not how many there are. A model may be
//!   given a transaction duration of its own, in DynamoDB seconds
//!   ([`CapacityModel::with_transaction_seconds`]): a `TransactWriteItems`'s answer is then
//!   held until that much model time has passed since its admission, so that on a slowed
//!   clock its items stay ongoing for as long, in DynamoDB time, as the duration says (DynamoDB
//!   publishes no transaction latency: the duration is the caller's assumption to state).
//!   Requests queued inside the emulator would be ongoing for as long as they queue, which
//!   DynamoDB, serving every request at once, never does: a model may let only so many
//!   requests be at the emulator at once ([`CapacityModel::with_concurrency`]), the others
//!   waiting before their admission.
//!   A cancelled transaction (conflict or throttle) consumes nothing; a write refused by its
//!   condition consumes its units, as on DynamoDB.
//! - `BatchGetItem` answers the keys of throttled partitions as `UnprocessedKeys` (the emulator
//!   reads them; the caller does not see them), and `ProvisionedThroughputExceededException`
//!   when every key is throttled, as DynamoDB does; `BatchWriteItem` is throttled whole and
//!   not checked for conflicts (the store sends none).
//! - One table: keys are not told apart by table name.

use aws_sdk_dynamodb::config::retry::{RetryConfig, RetryPartition};
use aws_sdk_dynamodb::config::{HttpClient, RuntimeComponents, SharedHttpClient};
use aws_smithy_runtime_api::client::http::{
    HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// DynamoDB's write limit of one partition key value (and so of one item), units per second.
pub const WRITE_UNITS_PER_SECOND: f64 = 1_000.0;
/// DynamoDB's read limit of one partition key value (and so of one item), units per second.
pub const READ_UNITS_PER_SECOND: f64 = 3_000.0;
/// The bytes one write unit writes.
pub const WRITE_UNIT_BYTES: usize = 1_024;
/// The bytes one strongly consistent read unit reads.
pub const READ_UNIT_BYTES: usize = 4_096;
/// What a transactional read or write costs, in plain reads or writes.
pub const TRANSACTION_FACTOR: f64 = 2.0;
/// What an eventually consistent read costs, in strongly consistent reads.
pub const EVENTUAL_FACTOR: f64 = 0.5;

/// The table's key attributes (docs/contract.md's layout).
const PK: &str = "pk";
const SK: &str = "sk";

/// The error a throttled lone request is answered with (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThrottleError {
    /// `ProvisionedThroughputExceededException`: what DynamoDB documents for a partition key
    /// past its limit in either capacity mode.
    #[default]
    ProvisionedThroughputExceeded,
    /// `ThrottlingException`: the on-demand error of the newer throttling reasons.
    Throttling,
}

impl ThrottleError {
    fn code(self) -> &'static str {
        match self {
            ThrottleError::ProvisionedThroughputExceeded => {
                "ProvisionedThroughputExceededException"
            }
            ThrottleError::Throttling => "ThrottlingException",
        }
    }
}

/// The model's time: DynamoDB seconds.
#[derive(Clone, Debug)]
pub enum Clock {
    /// Real time slowed down: `model_seconds_per_second` DynamoDB seconds pass per real second.
    Scaled {
        /// When the model's time was 0.
        start: Instant,
        /// DynamoDB seconds per real second (0.01: limits a hundredth of DynamoDB's per real
        /// second).
        model_seconds_per_second: f64,
    },
    /// Time a test sets ([`Clock::advance`]).
    Manual(Arc<Mutex<f64>>),
}

impl Clock {
    /// Real time, `model_seconds_per_second` DynamoDB seconds per real second.
    pub fn scaled(model_seconds_per_second: f64) -> Self {
        Clock::Scaled {
            start: Instant::now(),
            model_seconds_per_second,
        }
    }

    /// A clock at 0 that moves only by [`advance`](Self::advance).
    pub fn manual() -> Self {
        Clock::Manual(Arc::default())
    }

    /// Moves a manual clock on by `seconds` DynamoDB seconds (panics on a scaled clock).
    pub fn advance(&self, seconds: f64) {
        match self {
            Clock::Manual(now) => *now.lock().unwrap() += seconds,
            Clock::Scaled { .. } => panic!("a scaled clock follows real time"),
        }
    }

    /// The model's time, in DynamoDB seconds.
    pub fn now(&self) -> f64 {
        match self {
            Clock::Scaled {
                start,
                model_seconds_per_second,
            } => start.elapsed().as_secs_f64() * model_seconds_per_second,
            Clock::Manual(now) => *now.lock().unwrap(),
        }
    }
}

/// An item of the base table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemKey {
    /// The partition key (`pk`).
    pub pk: String,
    /// The sort key (`sk`).
    pub sk: String,
}

/// What a limit applies to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// One item of the base table.
    Item(ItemKey),
    /// One partition key value of the base table (`index: None`) or of a GSI.
    Partition {
        /// The GSI's name; `None` for the base table.
        index: Option<String>,
        /// The partition key's value.
        value: String,
    },
}

impl Target {
    fn base(pk: &str) -> Self {
        Target::Partition {
            index: None,
            value: pk.to_owned(),
        }
    }
}

/// Reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Read units.
    Read,
    /// Write units.
    Write,
}

impl Direction {
    fn per_second(self) -> f64 {
        match self {
            Direction::Read => READ_UNITS_PER_SECOND,
            Direction::Write => WRITE_UNITS_PER_SECOND,
        }
    }
}

/// What one target went through.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// Admitted requests that charged it.
    pub requests: u64,
    /// Write units consumed.
    pub write_units: f64,
    /// Read units consumed.
    pub read_units: f64,
    /// Requests throttled because it had no units left.
    pub throttles: u64,
    /// Requests refused because it was part of an ongoing transaction.
    pub conflicts: u64,
}

/// What one operation (`"PutItem"`, ...) went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperationCounts {
    /// Requests the model saw (resends included).
    pub requests: u64,
    /// Requests throttled.
    pub throttled: u64,
    /// Requests refused for a transaction conflict.
    pub conflicted: u64,
}

/// A snapshot of what the model saw.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Per item and per partition key.
    pub targets: BTreeMap<Target, Usage>,
    /// Per operation.
    pub operations: BTreeMap<String, OperationCounts>,
}

impl Report {
    /// The items of the base table and their usage.
    pub fn items(&self) -> impl Iterator<Item = (&ItemKey, &Usage)> {
        self.targets
            .iter()
            .filter_map(|(target, usage)| match target {
                Target::Item(key) => Some((key, usage)),
                Target::Partition { .. } => None,
            })
    }

    /// The write units consumed by all items of the base table.
    pub fn item_write_units(&self) -> f64 {
        self.items().map(|(_, usage)| usage.write_units).sum()
    }

    /// The item that consumed the most write units.
    pub fn hottest_item(&self) -> Option<(&ItemKey, &Usage)> {
        self.items()
            .max_by(|a, b| a.1.write_units.total_cmp(&b.1.write_units))
    }

    /// The share of all items' write units that `key` consumed (0 when nothing was written).
    pub fn write_share(&self, key: &ItemKey) -> f64 {
        let total = self.item_write_units();
        let mine = self
            .targets
            .get(&Target::Item(key.clone()))
            .map_or(0.0, |usage| usage.write_units);
        if total == 0.0 { 0.0 } else { mine / total }
    }

    /// Transaction conflicts (and throttles) met, summed over items.
    pub fn item_refusals(&self) -> u64 {
        self.items()
            .map(|(_, usage)| usage.conflicts + usage.throttles)
            .sum()
    }

    /// The item that met the most conflicts and throttles, with that number.
    pub fn most_refused_item(&self) -> Option<(&ItemKey, u64)> {
        self.items()
            .map(|(key, usage)| (key, usage.conflicts + usage.throttles))
            .max_by_key(|(_, refusals)| *refusals)
    }

    /// The counts of `operation`.
    pub fn operation(&self, operation: &str) -> OperationCounts {
        self.operations.get(operation).copied().unwrap_or_default()
    }
}

/// Units available to one target: refilled at its limit per second, holding at most one
/// second's worth (no burst past the partition limit).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: f64,
}

impl Bucket {
    fn full(direction: Direction, now: f64) -> Self {
        Bucket {
            tokens: direction.per_second(),
            at: now,
        }
    }

    fn refill(&mut self, direction: Direction, now: f64) {
        let limit = direction.per_second();
        let elapsed = (now - self.at).max(0.0);
        self.tokens = (self.tokens + elapsed * limit).min(limit);
        self.at = now;
    }
}

/// Units one request asks of one target.
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    /// What the units are charged to.
    pub target: Target,
    /// Read or write units.
    pub direction: Direction,
    /// How many (DynamoDB units).
    pub units: f64,
}

/// One item (or partition) a request touches, with what it costs: a transaction's action, a
/// batch's key, or the one thing a lone request does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Action {
    /// The base-table item, when the action names one.
    pub item: Option<ItemKey>,
    /// What it costs.
    pub charges: Vec<Charge>,
}

/// How the model treats a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// PutItem, UpdateItem, DeleteItem.
    Write,
    /// TransactWriteItems.
    TransactWrite,
    /// TransactGetItems.
    TransactGet,
    /// GetItem, Query, Scan.
    Read,
    /// BatchGetItem: throttled per key.
    BatchGet,
    /// BatchWriteItem: throttled whole.
    BatchWrite,
    /// Anything else (table administration, streams): passed through, not charged.
    Other,
}

/// A request as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The operation (`X-Amz-Target`'s last part).
    pub operation: String,
    /// How it is treated.
    pub kind: Kind,
    /// Its actions, in request order.
    pub actions: Vec<Action>,
    /// The table named (for the throttling reason's resource).
    pub table: String,
}

/// The model's answer to a request.
#[derive(Debug)]
pub enum Admission {
    /// Send it on; the items it holds are released when the ticket drops.
    Admitted(Ticket),
    /// Answer it with this error instead (HTTP 400, the JSON body).
    Refused(Value),
}

/// Items a request holds while it is ongoing, and the reads it still has to settle.
#[derive(Debug)]
pub struct Ticket {
    state: Arc<Mutex<State>>,
    transactional: Vec<ItemKey>,
    writing: Vec<ItemKey>,
    /// Keys (by action index) of a `BatchGetItem` that were throttled: answered unprocessed.
    pub unprocessed: Vec<usize>,
    /// What the admission charged for reads, per target (settled against the answer).
    pub read_precharge: HashMap<Target, f64>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap();
        for key in &self.transactional {
            release(&mut state.in_transactions, key);
        }
        for key in &self.writing {
            release(&mut state.in_writes, key);
        }
    }
}

fn release(held: &mut HashMap<ItemKey, u32>, key: &ItemKey) {
    if let Some(count) = held.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            held.remove(key);
        }
    }
}

#[derive(Debug, Default)]
struct State {
    buckets: HashMap<(Target, Direction), Bucket>,
    /// Items in ongoing `TransactWriteItems`, with how many hold each.
    in_transactions: HashMap<ItemKey, u32>,
    /// Items in ongoing lone writes.
    in_writes: HashMap<ItemKey, u32>,
    usage: BTreeMap<Target, Usage>,
    operations: BTreeMap<String, OperationCounts>,
}

impl State {
    fn bucket(&mut self, target: &Target, direction: Direction, now: f64) -> &mut Bucket {
        let bucket = self
            .buckets
            .entry((target.clone(), direction))
            .or_insert_with(|| Bucket::full(direction, now));
        bucket.refill(direction, now);
        bucket
    }

    fn usage(&mut self, target: &Target) -> &mut Usage {
        self.usage.entry(target.clone()).or_default()
    }

    fn debit(&mut self, charge: &Charge, now: f64) {
        self.bucket(&charge.target, charge.direction, now).tokens -= charge.units;
        let usage = self.usage(&charge.target);
        match charge.direction {
            Direction::Read => usage.read_units += charge.units,
            Direction::Write => usage.write_units += charge.units,
        }
    }

    /// The indexes of `request`'s actions that touch an item held against it.
    fn conflicts(&self, request: &Request) -> Vec<usize> {
        let held = |key: &ItemKey| match request.kind {
            Kind::TransactWrite | Kind::Write => self.in_transactions.contains_key(key),
            Kind::TransactGet => {
                self.in_transactions.contains_key(key) || self.in_writes.contains_key(key)
            }
            _ => false,
        };
        indexes(&request.actions, |action| {
            action.item.as_ref().is_some_and(held)
        })
    }

    /// The indexes of `request`'s actions with a target out of units, and those targets.
    fn exhausted(&mut self, request: &Request, now: f64) -> (Vec<usize>, Vec<Target>) {
        let mut needed: HashMap<(Target, Direction), f64> = HashMap::new();
        for charge in request.actions.iter().flat_map(|a| &a.charges) {
            *needed
                .entry((charge.target.clone(), charge.direction))
                .or_default() += charge.units;
        }
        let mut short = Vec::new();
        for ((target, direction), units) in needed {
            // A bucket may be in debt after a read's settlement; a request is admitted when
            // its units are there.
            if self.bucket(&target, direction, now).tokens < units {
                short.push(target);
            }
        }
        let throttled = indexes(&request.actions, |action| {
            action.charges.iter().any(|c| short.contains(&c.target))
        });
        (throttled, short)
    }
}

fn indexes(actions: &[Action], pick: impl Fn(&Action) -> bool) -> Vec<usize> {
    actions
        .iter()
        .enumerate()
        .filter(|(_, action)| pick(action))
        .map(|(at, _)| at)
        .collect()
}

/// The capacity model: its limits' state and what it saw. Cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct CapacityModel {
    state: Arc<Mutex<State>>,
    clock: Clock,
    throttle_error: ThrottleError,
    /// GSI partition key attributes: (index name, attribute).
    indexes: Arc<Vec<(String, String)>>,
    /// The SDK retry partition of this model's clients.
    partition: String,
    /// How long a `TransactWriteItems` is ongoing at least, in DynamoDB seconds.
    transaction_seconds: f64,
    /// Requests at the emulator at once, at most (`None`: no limit).
    at_emulator: Option<Arc<tokio::sync::Semaphore>>,
}

impl CapacityModel {
    /// A model on `clock`, throttling with `ProvisionedThroughputExceededException`, knowing
    /// docstore's GSIs (`docstore-gN` keyed by `gNpk`).
    pub fn new(clock: Clock) -> Self {
        static MODELS: AtomicU64 = AtomicU64::new(0);
        let indexes = (0..docstore_dynamodb::MAX_SLOTS)
            .map(|slot| (format!("docstore-g{slot}"), format!("g{slot}pk")))
            .collect();
        CapacityModel {
            state: Arc::default(),
            clock,
            throttle_error: ThrottleError::default(),
            transaction_seconds: 0.0,
            at_emulator: None,
            indexes: Arc::new(indexes),
            partition: format!(
                "docstore-capacity-{}",
                MODELS.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }

    /// The same model answering throttled lone requests with `error`.
    pub fn with_throttle_error(mut self, error: ThrottleError) -> Self {
        self.throttle_error = error;
        self
    }

    /// The same model holding every admitted `TransactWriteItems` (its items ongoing, its
    /// answer waiting) until `seconds` DynamoDB seconds have passed since its admission, or the
    /// emulator's answer if that comes later (see "Approximations"). No effect on a manual
    /// clock.
    pub fn with_transaction_seconds(mut self, seconds: f64) -> Self {
        self.transaction_seconds = seconds;
        self
    }

    /// The same model letting at most `requests` requests be admitted and at the emulator at
    /// once; the others wait, before their admission, for one to be answered (a transaction
    /// held for [`with_transaction_seconds`](Self::with_transaction_seconds) is not at the
    /// emulator).
    pub fn with_concurrency(mut self, requests: usize) -> Self {
        self.at_emulator = Some(Arc::new(tokio::sync::Semaphore::new(requests)));
        self
    }

    /// The same model with other GSIs: (index name, partition key attribute).
    pub fn with_indexes(mut self, indexes: Vec<(String, String)>) -> Self {
        self.indexes = Arc::new(indexes);
        self
    }

    /// The model's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Takes every unit `target` has for `direction` now, as another client's requests would:
    /// the next request charged to it is throttled unless time refills it first.
    pub fn drain(&self, target: &Target, direction: Direction) {
        let now = self.clock.now();
        let mut state = self.state.lock().unwrap();
        state.bucket(target, direction, now).tokens = 0.0;
    }

    /// What the model saw so far.
    pub fn report(&self) -> Report {
        let state = self.state.lock().unwrap();
        Report {
            targets: state.usage.clone(),
            operations: state.operations.clone(),
        }
    }

    /// Reads a request: its operation, actions and what each costs (a body that is not JSON
    /// has no actions: nothing is charged).
    pub fn parse(&self, operation: &str, body: &[u8]) -> Request {
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let parser = Parser {
            indexes: &self.indexes,
        };
        parser.request(operation, &body)
    }

    /// Decides on `request`: refused for a conflict, then for throttling, else admitted with
    /// its units debited and its items held.
    pub fn admit(&self, request: &Request) -> Admission {
        let now = self.clock.now();
        let mut state = self.state.lock().unwrap();
        state
            .operations
            .entry(request.operation.clone())
            .or_default()
            .requests += 1;
        if request.kind == Kind::Other {
            return Admission::Admitted(self.ticket(Vec::new(), Vec::new()));
        }
        let conflicts = state.conflicts(request);
        if !conflicts.is_empty() {
            return Admission::Refused(self.conflict(&mut state, request, &conflicts));
        }
        let (mut throttled, short) = state.exhausted(request, now);
        if request.kind == Kind::BatchGet && throttled.len() < request.actions.len() {
            // Throttled keys come back unprocessed; the others are read.
            for target in &short {
                state.usage(target).throttles += 1;
            }
            return Admission::Admitted(self.charge(&mut state, request, now, throttled));
        }
        if !throttled.is_empty() {
            throttled.sort_unstable();
            return Admission::Refused(self.throttle(&mut state, request, &throttled, &short));
        }
        Admission::Admitted(self.charge(&mut state, request, now, Vec::new()))
    }

    fn ticket(&self, transactional: Vec<ItemKey>, writing: Vec<ItemKey>) -> Ticket {
        Ticket {
            state: self.state.clone(),
            transactional,
            writing,
            unprocessed: Vec::new(),
            read_precharge: HashMap::new(),
        }
    }

    /// Debits an admitted request's units (but those of `unprocessed` actions) and holds its
    /// items.
    fn charge(
        &self,
        state: &mut State,
        request: &Request,
        now: f64,
        unprocessed: Vec<usize>,
    ) -> Ticket {
        let mut charged: Vec<Target> = Vec::new();
        let mut read_precharge: HashMap<Target, f64> = HashMap::new();
        for (at, action) in request.actions.iter().enumerate() {
            if unprocessed.contains(&at) {
                continue;
            }
            for charge in &action.charges {
                state.debit(charge, now);
                if charge.direction == Direction::Read {
                    *read_precharge.entry(charge.target.clone()).or_default() += charge.units;
                }
                if !charged.contains(&charge.target) {
                    charged.push(charge.target.clone());
                }
            }
        }
        for target in &charged {
            state.usage(target).requests += 1;
        }
        let items = || request.actions.iter().filter_map(|a| a.item.clone());
        let (transactional, writing): (Vec<ItemKey>, Vec<ItemKey>) = match request.kind {
            Kind::TransactWrite => (items().collect(), Vec::new()),
            Kind::Write | Kind::BatchWrite => (Vec::new(), items().collect()),
            _ => (Vec::new(), Vec::new()),
        };
        for key in &transactional {
            *state.in_transactions.entry(key.clone()).or_default() += 1;
        }
        for key in &writing {
            *state.in_writes.entry(key.clone()).or_default() += 1;
        }
        let mut ticket = self.ticket(transactional, writing);
        ticket.unprocessed = unprocessed;
        ticket.read_precharge = read_precharge;
        ticket
    }

    /// Charges what an answered read consumed beyond its admission's charge (the bucket may
    /// go into debt).
    pub fn settle_reads(&self, ticket: &Ticket, consumed: &[Charge]) {
        let now = self.clock.now();
        let mut state = self.state.lock().unwrap();
        let mut totals: HashMap<Target, f64> = HashMap::new();
        for charge in consumed {
            *totals.entry(charge.target.clone()).or_default() += charge.units;
        }
        for (target, units) in totals {
            let already = ticket.read_precharge.get(&target).copied().unwrap_or(0.0);
            let extra = units - already;
            if extra > 0.0 {
                let fresh = !ticket.read_precharge.contains_key(&target);
                state.debit(
                    &Charge {
                        target: target.clone(),
                        direction: Direction::Read,
                        units: extra,
                    },
                    now,
                );
                if fresh {
                    state.usage(&target).requests += 1;
                }
            }
        }
    }

    fn conflict(&self, state: &mut State, request: &Request, conflicts: &[usize]) -> Value {
        state
            .operations
            .get_mut(&request.operation)
            .expect("counted")
            .conflicted += 1;
        for &at in conflicts {
            let key = request.actions[at]
                .item
                .clone()
                .expect("conflicts are on items");
            state.usage(&Target::Item(key)).conflicts += 1;
        }
        const ONGOING: &str = "Transaction is ongoing for the item";
        match request.kind {
            Kind::Write => json!({
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
                "message": ONGOING,
            }),
            _ => cancellation(
                request.actions.len(),
                conflicts,
                "TransactionConflict",
                ONGOING,
            ),
        }
    }

    fn throttle(
        &self,
        state: &mut State,
        request: &Request,
        throttled: &[usize],
        short: &[Target],
    ) -> Value {
        state
            .operations
            .get_mut(&request.operation)
            .expect("counted")
            .throttled += 1;
        for target in short {
            state.usage(target).throttles += 1;
        }
        match request.kind {
            Kind::TransactWrite | Kind::TransactGet => {
                cancellation(request.actions.len(), throttled, "ThrottlingError", HOT_KEY)
            }
            _ => self.throttling_exception(request, short),
        }
    }

    fn throttling_exception(&self, request: &Request, short: &[Target]) -> Value {
        let reading = request.kind == Kind::Read || request.kind == Kind::BatchGet;
        let operation = if reading { "Read" } else { "Write" };
        let table_arn = format!(
            "arn:aws:dynamodb:us-east-1:000000000000:table/{}",
            request.table
        );
        let mut reasons: Vec<Value> = short
            .iter()
            .map(|target| match target {
                Target::Partition {
                    index: Some(index), ..
                } => json!({
                    "reason": format!("Index{operation}KeyRangeThroughputExceeded"),
                    "resource": format!("{table_arn}/index/{index}"),
                }),
                _ => json!({
                    "reason": format!("Table{operation}KeyRangeThroughputExceeded"),
                    "resource": table_arn,
                }),
            })
            .collect();
        reasons.dedup();
        json!({
            "__type": format!("com.amazonaws.dynamodb.v20120810#{}", self.throttle_error.code()),
            "message": "The level of configured provisioned throughput for the table was \
                        exceeded: a partition key took more than its per-second limit \
                        (capacity model)",
            "ThrottlingReasons": reasons,
        })
    }

    /// Waits until the model's transaction duration has passed since `admitted_at` (model
    /// seconds), on a scaled clock.
    async fn hold_transaction(&self, admitted_at: f64) {
        let Clock::Scaled {
            model_seconds_per_second,
            ..
        } = self.clock
        else {
            return;
        };
        let left = admitted_at + self.transaction_seconds - self.clock.now();
        if left > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(left / model_seconds_per_second)).await;
        }
    }

    /// An SDK HTTP client (plain HTTP, for the emulators) that sends every request through
    /// this model.
    pub fn http_client(&self) -> SharedHttpClient {
        SharedHttpClient::new(ModelClient {
            inner: aws_smithy_http_client::Builder::new().build_http(),
            model: self.clone(),
        })
    }

    /// The store's own retries ([`DynamoStore::connect`](docstore_dynamodb::DynamoStore)'s:
    /// 3 attempts, 20 ms first backoff) with the SDK's standard retry quota, in a retry
    /// partition of this model's own.
    pub fn retry_config(&self) -> (RetryConfig, RetryPartition) {
        (
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(20)),
            RetryPartition::new(self.partition.clone()),
        )
    }
}

/// The message of a transaction's `ThrottlingError` on an on-demand table (the
/// `TransactWriteItems` API reference).
const HOT_KEY: &str = concat!(
    "Throughput exceeds the current capacity of your table or index. DynamoDB is ",
    "automatically scaling your table or index so please try again shortly. If exceptions ",
    "persist, check if you have a hot key: ",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/",
    "bp-partition-key-design.html",
);

/// A `TransactionCanceledException` whose `reasons` actions carry `code`.
fn cancellation(actions: usize, reasons: &[usize], code: &str, message: &str) -> Value {
    let codes: Vec<&str> = (0..actions)
        .map(|at| if reasons.contains(&at) { code } else { "None" })
        .collect();
    let listed: Vec<Value> = codes
        .iter()
        .map(|&c| match c {
            "None" => json!({"Code": "None"}),
            _ => json!({"Code": c, "Message": message}),
        })
        .collect();
    json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": format!(
            "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
            codes.join(", ")
        ),
        "CancellationReasons": listed,
    })
}

/// Reads requests and answers into actions and charges.
struct Parser<'a> {
    indexes: &'a [(String, String)],
}

impl Parser<'_> {
    fn request(&self, operation: &str, body: &Value) -> Request {
        let table = body["TableName"].as_str().unwrap_or_default().to_owned();
        let (kind, actions) = match operation {
            "PutItem" => (Kind::Write, vec![self.put(&body["Item"], 1.0)]),
            "UpdateItem" => (Kind::Write, vec![self.update(body, 1.0)]),
            "DeleteItem" => (Kind::Write, vec![self.keyed_write(&body["Key"], 1.0)]),
            "GetItem" => (Kind::Read, vec![get(&body["Key"], consistency(body))]),
            "Query" => (Kind::Read, vec![self.query(body)]),
            "Scan" => (Kind::Read, Vec::new()),
            "BatchGetItem" => (Kind::BatchGet, batch_get(body)),
            "BatchWriteItem" => (Kind::BatchWrite, self.batch_write(body)),
            "TransactWriteItems" => (Kind::TransactWrite, self.transact_write(body)),
            "TransactGetItems" => (Kind::TransactGet, transact_get(body)),
            _ => (Kind::Other, Vec::new()),
        };
        let table = if table.is_empty() {
            first_table(body)
        } else {
            table
        };
        Request {
            operation: operation.to_owned(),
            kind,
            actions,
            table,
        }
    }

    /// A write of `item` (the whole item known): the item, its partition, its GSI keys.
    fn put(&self, item: &Value, factor: f64) -> Action {
        let gsi_keys = self.gsi_keys_of_item(item);
        write_action(item, item_size(item), factor, gsi_keys)
    }

    /// An update: the key plus the expression values; GSI keys assigned in `SET`.
    fn update(&self, update: &Value, factor: f64) -> Action {
        let size = item_size(&update["Key"]) + values_size(&update["ExpressionAttributeValues"]);
        let gsi_keys = self.gsi_keys_of_update(update);
        write_action(&update["Key"], size, factor, gsi_keys)
    }

    /// A delete or condition check: the key's size.
    fn keyed_write(&self, key: &Value, factor: f64) -> Action {
        write_action(key, item_size(key), factor, Vec::new())
    }

    fn query(&self, query: &Value) -> Action {
        let index = query["IndexName"].as_str().map(str::to_owned);
        let attribute = match &index {
            None => Some(PK),
            Some(name) => self
                .indexes
                .iter()
                .find(|(index, _)| index == name)
                .map(|(_, attribute)| attribute.as_str()),
        };
        let value = attribute.and_then(|attribute| {
            equality_value(
                query["KeyConditionExpression"].as_str().unwrap_or_default(),
                attribute,
                query,
            )
        });
        let Some(value) = value else {
            return Action::default();
        };
        Action {
            item: None,
            charges: vec![Charge {
                target: Target::Partition { index, value },
                direction: Direction::Read,
                units: consistency(query),
            }],
        }
    }

    fn batch_write(&self, body: &Value) -> Vec<Action> {
        let mut actions = Vec::new();
        for requests in object(&body["RequestItems"]).values() {
            for request in requests.as_array().into_iter().flatten() {
                if let Some(item) = request.get("PutRequest") {
                    actions.push(self.put(&item["Item"], 1.0));
                } else if let Some(delete) = request.get("DeleteRequest") {
                    actions.push(self.keyed_write(&delete["Key"], 1.0));
                }
            }
        }
        actions
    }

    fn transact_write(&self, body: &Value) -> Vec<Action> {
        let factor = TRANSACTION_FACTOR;
        let items = body["TransactItems"].as_array().into_iter().flatten();
        items
            .map(|item| {
                if let Some(put) = item.get("Put") {
                    self.put(&put["Item"], factor)
                } else if let Some(update) = item.get("Update") {
                    self.update(update, factor)
                } else if let Some(delete) = item.get("Delete") {
                    self.keyed_write(&delete["Key"], factor)
                } else if let Some(check) = item.get("ConditionCheck") {
                    self.keyed_write(&check["Key"], factor)
                } else {
                    Action::default()
                }
            })
            .collect()
    }

    /// The GSI partition keys an item carries: (index, value).
    fn gsi_keys_of_item(&self, item: &Value) -> Vec<(String, String)> {
        self.indexes
            .iter()
            .filter_map(|(index, attribute)| {
                let value = item[attribute.as_str()]["S"].as_str()?;
                Some((index.clone(), value.to_owned()))
            })
            .collect()
    }

    /// The GSI partition keys an update's `SET` clause assigns from placeholders.
    fn gsi_keys_of_update(&self, update: &Value) -> Vec<(String, String)> {
        let expression = update["UpdateExpression"].as_str().unwrap_or_default();
        let assignments = set_assignments(expression);
        self.indexes
            .iter()
            .filter_map(|(index, attribute)| {
                let (_, placeholder) = assignments
                    .iter()
                    .find(|(name, _)| resolve_name(name, update) == *attribute)?;
                let value =
                    update["ExpressionAttributeValues"][placeholder.as_str()]["S"].as_str()?;
                Some((index.clone(), value.to_owned()))
            })
            .collect()
    }
}

/// The first table a batch or transaction names.
fn first_table(body: &Value) -> String {
    if let Some(table) = object(&body["RequestItems"]).keys().next() {
        return table.clone();
    }
    let items = body["TransactItems"].as_array().into_iter().flatten();
    items
        .flat_map(|item| object(item).values())
        .find_map(|action| action["TableName"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn object(value: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    value
        .as_object()
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// An item's key from a `Key` or an item.
pub fn item_key(item: &Value) -> Option<ItemKey> {
    Some(ItemKey {
        pk: item[PK]["S"].as_str()?.to_owned(),
        sk: item[SK]["S"].as_str()?.to_owned(),
    })
}

/// A write of `size` bytes at `factor` to the item keyed in `key` and its partition; GSI keys
/// at 1× the item's size.
fn write_action(key: &Value, size: usize, factor: f64, gsi_keys: Vec<(String, String)>) -> Action {
    let Some(item) = item_key(key) else {
        return Action::default();
    };
    let units = write_units(size) * factor;
    let mut charges = vec![
        Charge {
            target: Target::Item(item.clone()),
            direction: Direction::Write,
            units,
        },
        Charge {
            target: Target::base(&item.pk),
            direction: Direction::Write,
            units,
        },
    ];
    for (index, value) in gsi_keys {
        charges.push(Charge {
            target: Target::Partition {
                index: Some(index),
                value,
            },
            direction: Direction::Write,
            units: write_units(size),
        });
    }
    Action {
        item: Some(item),
        charges,
    }
}

/// A read of one item at `units` (its smallest cost; the answer settles the rest).
fn get(key: &Value, units: f64) -> Action {
    let Some(item) = item_key(key) else {
        return Action::default();
    };
    Action {
        charges: vec![
            Charge {
                target: Target::Item(item.clone()),
                direction: Direction::Read,
                units,
            },
            Charge {
                target: Target::base(&item.pk),
                direction: Direction::Read,
                units,
            },
        ],
        item: Some(item),
    }
}

/// A read's smallest cost: 1 unit strongly consistent, ½ eventually.
fn consistency(request: &Value) -> f64 {
    match request["ConsistentRead"].as_bool() {
        Some(true) => 1.0,
        _ => EVENTUAL_FACTOR,
    }
}

fn batch_get(body: &Value) -> Vec<Action> {
    let mut actions = Vec::new();
    for keys in object(&body["RequestItems"]).values() {
        let units = consistency(keys);
        for key in keys["Keys"].as_array().into_iter().flatten() {
            actions.push(get(key, units));
        }
    }
    actions
}

fn transact_get(body: &Value) -> Vec<Action> {
    let items = body["TransactItems"].as_array().into_iter().flatten();
    items
        .map(|item| get(&item["Get"]["Key"], TRANSACTION_FACTOR))
        .collect()
}

/// Write units of `bytes`: one per started KB, at least one.
pub fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as f64
}

/// Strongly consistent read units of `bytes`: one per started 4 KB, at least one.
pub fn read_units(bytes: usize) -> f64 {
    bytes.div_ceil(READ_UNIT_BYTES).max(1) as f64
}

/// An item's size as DynamoDB counts it: attribute names plus values.
pub fn item_size(item: &Value) -> usize {
    object(item)
        .iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

fn values_size(values: &Value) -> usize {
    object(values).values().map(value_size).sum()
}

/// An attribute value's size: strings and binaries their bytes, numbers about one byte per
/// two digits plus one, lists and maps 3 bytes plus 1 per element.
fn value_size(value: &Value) -> usize {
    let Some((kind, inner)) = object(value).iter().next() else {
        return 0;
    };
    let texts = || {
        inner
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, str::len),
        "N" => inner.as_str().map_or(0, number_size),
        "B" => inner.as_str().map_or(0, binary_size),
        "BOOL" | "NULL" => 1,
        "SS" => texts().map(str::len).sum(),
        "NS" => texts().map(number_size).sum(),
        "BS" => texts().map(binary_size).sum(),
        "L" => {
            3 + inner
                .as_array()
                .into_iter()
                .flatten()
                .map(|element| 1 + value_size(element))
                .sum::<usize>()
        }
        "M" => {
            3 + object(inner)
                .iter()
                .map(|(name, element)| 1 + name.len() + value_size(element))
                .sum::<usize>()
        }
        _ => 0,
    }
}

fn number_size(text: &str) -> usize {
    let digits = text.bytes().filter(u8::is_ascii_digit).count();
    (digits.div_ceil(2) + 1).min(21)
}

fn binary_size(base64: &str) -> usize {
    let padding = base64.bytes().rev().take_while(|&b| b == b'=').count();
    (base64.len() * 3 / 4).saturating_sub(padding)
}

/// `#name` through `ExpressionAttributeNames`, or the name itself.
fn resolve_name<'a>(name: &'a str, request: &'a Value) -> &'a str {
    match name.starts_with('#') {
        true => request["ExpressionAttributeNames"][name]
            .as_str()
            .unwrap_or(name),
        false => name,
    }
}

/// The `SET` clause's `name = :placeholder` assignments (others, such as `if_not_exists`,
/// are left out).
fn set_assignments(expression: &str) -> Vec<(String, String)> {
    let Some(start) = find_keyword(expression, "SET") else {
        return Vec::new();
    };
    let clause = &expression[start + 3..];
    let end = ["ADD", "REMOVE", "DELETE"]
        .iter()
        .filter_map(|keyword| find_keyword(clause, keyword))
        .min()
        .unwrap_or(clause.len());
    split_top_level(&clause[..end])
        .into_iter()
        .filter_map(|assignment| {
            let (name, value) = assignment.split_once('=')?;
            let value = value.trim();
            let simple = value.starts_with(':') && !value.contains(char::is_whitespace);
            simple.then(|| (name.trim().to_owned(), value.to_owned()))
        })
        .collect()
}

/// Where `keyword` stands as a word in `expression` (case-insensitive).
fn find_keyword(expression: &str, keyword: &str) -> Option<usize> {
    let upper = expression.to_ascii_uppercase();
    let bytes = upper.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'#' || b == b':';
    upper.match_indices(keyword).map(|(at, _)| at).find(|&at| {
        let before = at == 0 || !is_word(bytes[at - 1]);
        let after = bytes.get(at + keyword.len()).is_none_or(|&b| !is_word(b));
        before && after
    })
}

/// `text` split at commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The string value a key condition sets `attribute` equal to.
fn equality_value(condition: &str, attribute: &str, request: &Value) -> Option<String> {
    let upper = condition.to_ascii_uppercase();
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, _) in upper.match_indices(" AND ") {
        parts.push(&condition[start..at]);
        start = at + 5;
    }
    parts.push(&condition[start..]);
    parts.into_iter().find_map(|part| {
        let (name, value) = part.split_once('=')?;
        let name = name.trim().trim_start_matches('(');
        let value = value.trim().trim_end_matches(')');
        if resolve_name(name, request) != attribute {
            return None;
        }
        request["ExpressionAttributeValues"][value]["S"]
            .as_str()
            .map(str::to_owned)
    })
}

/// What an answered read consumed, per target.
pub fn consumed_reads(request: &Request, body: &Value, answer: &Value) -> Vec<Charge> {
    let read = |target: Target, bytes: usize, factor: f64| Charge {
        target,
        direction: Direction::Read,
        units: read_units(bytes) * factor,
    };
    match request.operation.as_str() {
        "GetItem" => {
            let Some(item) = item_key(&body["Key"]) else {
                return Vec::new();
            };
            let (bytes, factor) = (item_size(&answer["Item"]), consistency(body));
            vec![
                read(Target::base(&item.pk), bytes, factor),
                read(Target::Item(item), bytes, factor),
            ]
        }
        "Query" => {
            let Some(charge) = request.actions.first().and_then(|a| a.charges.first()) else {
                return Vec::new();
            };
            let bytes = answer["Items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(item_size);
            vec![read(charge.target.clone(), bytes.sum(), consistency(body))]
        }
        "Scan" => {
            let mut per_partition: BTreeMap<String, usize> = BTreeMap::new();
            for item in answer["Items"].as_array().into_iter().flatten() {
                if let Some(key) = item_key(item) {
                    *per_partition.entry(key.pk).or_default() += item_size(item);
                }
            }
            let factor = consistency(body);
            let charges = per_partition.into_iter();
            charges
                .map(|(pk, bytes)| read(Target::base(&pk), bytes, factor))
                .collect()
        }
        "BatchGetItem" | "TransactGetItems" => item_reads(request, answer),
        _ => Vec::new(),
    }
}

/// A batch's or transaction's reads: each item returned at its own size.
fn item_reads(request: &Request, answer: &Value) -> Vec<Charge> {
    let mut returned: Vec<&Value> = Vec::new();
    for items in object(&answer["Responses"]).values() {
        returned.extend(items.as_array().into_iter().flatten());
    }
    for response in answer["Responses"].as_array().into_iter().flatten() {
        returned.push(&response["Item"]);
    }
    let mut charges = Vec::new();
    for item in returned {
        let Some(key) = item_key(item) else { continue };
        let action = request
            .actions
            .iter()
            .find(|a| a.item.as_ref() == Some(&key));
        let factor = action
            .and_then(|a| a.charges.first())
            .map_or(1.0, |c| c.units);
        let units = read_units(item_size(item)) * factor;
        for target in [Target::base(&key.pk), Target::Item(key.clone())] {
            charges.push(Charge {
                target,
                direction: Direction::Read,
                units,
            });
        }
    }
    charges
}

/// Moves the items of the throttled keys of a `BatchGetItem` answer to `UnprocessedKeys`.
fn unprocess(request_body: &Value, request: &Request, unprocessed: &[usize], answer: &mut Value) {
    let keys: Vec<ItemKey> = unprocessed
        .iter()
        .filter_map(|&at| request.actions[at].item.clone())
        .collect();
    let mut left: Map<String, Value> = Map::new();
    for (table, wanted) in object(&request_body["RequestItems"]) {
        let mut entry = wanted.clone();
        let table_keys: Vec<Value> = wanted["Keys"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|key| item_key(key).is_some_and(|k| keys.contains(&k)))
            .cloned()
            .collect();
        if table_keys.is_empty() {
            continue;
        }
        entry["Keys"] = Value::Array(table_keys);
        left.insert(table.clone(), entry);
        if let Some(items) = answer["Responses"][table.as_str()].as_array_mut() {
            items.retain(|item| item_key(item).is_none_or(|k| !keys.contains(&k)));
        }
    }
    let unprocessed_keys = answer
        .as_object_mut()
        .map(|answer| answer.entry("UnprocessedKeys").or_insert_with(|| json!({})));
    if let Some(Value::Object(existing)) = unprocessed_keys {
        existing.extend(left);
    }
}

#[derive(Debug)]
struct ModelClient {
    inner: SharedHttpClient,
    model: CapacityModel,
}

impl HttpClient for ModelClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(ModelConnector {
            inner: self.inner.http_connector(settings, components),
            model: self.model.clone(),
        })
    }
}

#[derive(Debug)]
struct ModelConnector {
    inner: SharedHttpConnector,
    model: CapacityModel,
}

impl HttpConnector for ModelConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let inner = self.inner.clone();
        let model = self.model.clone();
        HttpConnectorFuture::new(async move {
            let body_bytes = request.body().bytes().unwrap_or_default().to_vec();
            let parsed = model.parse(&operation, &body_bytes);
            let at_emulator = match &model.at_emulator {
                Some(slots) => Some(slots.clone().acquire_owned().await.expect("never closed")),
                None => None,
            };
            let admitted_at = model.clock.now();
            let ticket = match model.admit(&parsed) {
                Admission::Refused(error) => return Ok(answer(400, &error)),
                Admission::Admitted(ticket) => ticket,
            };
            let response = inner.call(request).await?;
            drop(at_emulator);
            if parsed.kind == Kind::TransactWrite {
                model.hold_transaction(admitted_at).await;
            }
            let reads = matches!(parsed.kind, Kind::Read | Kind::BatchGet | Kind::TransactGet);
            if !reads || response.status().as_u16() != 200 {
                return Ok(response);
            }
            // The answer says what the read consumed (and a batch's throttled keys are
            // taken out of it).
            let (status, headers, body) = (response.status(), response.headers().clone(), {
                let mut response = response;
                response.take_body()
            });
            let bytes = ByteStream::new(body)
                .collect()
                .await
                .map_err(|err| ConnectorError::io(err.into()))?
                .into_bytes();
            let mut json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let request_body: Value = serde_json::from_slice(&body_bytes).unwrap_or(Value::Null);
            if !ticket.unprocessed.is_empty() {
                unprocess(&request_body, &parsed, &ticket.unprocessed, &mut json);
            }
            model.settle_reads(&ticket, &consumed_reads(&parsed, &request_body, &json));
            let body = if ticket.unprocessed.is_empty() {
                SdkBody::from(bytes)
            } else {
                SdkBody::from(json.to_string())
            };
            let mut rebuilt = HttpResponse::new(status, body);
            for (name, value) in headers.iter() {
                if !name.eq_ignore_ascii_case("content-length")
                    && !name.eq_ignore_ascii_case("x-amz-crc32")
                {
                    rebuilt
                        .headers_mut()
                        .insert(name.to_owned(), value.to_owned());
                }
            }
            Ok(rebuilt)
        })
    }
}

/// An HTTP answer with a JSON body.
fn answer(status: u16, body: &Value) -> HttpResponse {
    HttpResponse::new(
        StatusCode::try_from(status).expect("valid status"),
        SdkBody::from(body.to_string()),
    )
}
