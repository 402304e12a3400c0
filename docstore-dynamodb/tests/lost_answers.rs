//! Lost answers, for real: a fault-injecting HTTP client lets each write reach the emulator and
//! then loses its answer (an HTTP 500 or a dropped connection), so the SDK sends it again.
//! `create`, `restore` and `update_if` must report success exactly once with one version step;
//! every other write must end without a false error and with nothing lost, as the crate docs
//! describe; and a few hundred random writes with random losses must end in the same state as
//! the same writes without losses. Run on both emulators.

mod support;

use docstore::{Document, Error, Key, Store, StoreOptions};
use docstore_dynamodb::DynamoStore;
use serde_json::json;
use support::faults::{Faults, Loss, Refusal};
use support::{Emulator, ensure_table, obj, site, store_on};
use tokio::sync::OnceCell;

static DYNOXIDE: OnceCell<String> = OnceCell::const_new();
static MOTO: OnceCell<String> = OnceCell::const_new();

const LOSSES: [Loss; 2] = [Loss::ServerError, Loss::Dropped];

/// A store whose answers are lost as `Faults` says, a clean store on the same table, and a
/// fresh site.
struct Setup {
    lossy: DynamoStore,
    clean: DynamoStore,
    faults: Faults,
    site: String,
}

impl Setup {
    async fn new(emulator: Emulator, cell: &'static OnceCell<String>) -> Self {
        let table = ensure_table(cell, emulator, "lost").await;
        let faults = Faults::default();
        Setup {
            lossy: store_on(
                emulator.faulty_client(&faults),
                &table,
                10_000,
                StoreOptions::default(),
            ),
            clean: store_on(emulator.client(), &table, 10_000, StoreOptions::default()),
            faults,
            site: site("lost"),
        }
    }

    fn key(&self, id: &str) -> Key {
        Key::new(&self.site, "c", id).unwrap()
    }

    /// Scripts one loss and checks, after `run`, that it happened and was resent.
    fn lose(&self, operation: &str, loss: Loss) {
        self.faults.lose_next(operation, loss);
    }

    fn assert_lost(&self, expected: usize) {
        assert!(
            self.faults.script_done(),
            "the scripted loss never happened"
        );
        assert_eq!(
            self.faults.injected().len(),
            expected,
            "{:?}",
            self.faults.injected()
        );
    }

    async fn stored(&self, id: &str) -> Option<Document> {
        self.clean.get(&self.key(id)).await.unwrap()
    }

    async fn counters(&self) -> Vec<(String, u64)> {
        self.clean.collections(&self.site).await.unwrap()
    }
}

async fn create_succeeds_once(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        s.lose("PutItem", loss);
        let doc = s
            .lossy
            .create(&s.key("a"), obj(json!({"n": 1})), "alice")
            .await
            .unwrap_or_else(|e| panic!("{loss:?}: create after a lost answer: {e}"));
        s.assert_lost(1);
        assert_eq!(doc.version, 1);
        assert_eq!(s.stored("a").await, Some(doc));
        assert_eq!(s.counters().await, vec![("c".to_owned(), 1)], "{loss:?}");
    }
}

async fn restore_succeeds_once(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        let doc = Document {
            id: "a".into(),
            data: obj(json!({"n": 1})),
            created_at: 10,
            updated_at: 20,
            created_by: "x".into(),
            updated_by: "y".into(),
            version: 7,
        };
        s.lose("PutItem", loss);
        s.lossy.restore(&s.key("a"), &doc).await.unwrap();
        s.assert_lost(1);
        assert_eq!(s.stored("a").await, Some(doc));
        assert_eq!(s.counters().await, vec![("c".to_owned(), 1)]);
    }
}

async fn update_if_succeeds_once(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        s.clean
            .create(&s.key("a"), obj(json!({"n": 1})), "")
            .await
            .unwrap();
        s.lose("PutItem", loss);
        let doc = s
            .lossy
            .update_if(&s.key("a"), &obj(json!({"m": 2})), 1, "bob")
            .await
            .unwrap_or_else(|e| panic!("{loss:?}: update_if after a lost answer: {e}"));
        s.assert_lost(1);
        assert_eq!(doc.version, 2, "one version step");
        assert_eq!(doc.data, obj(json!({"n": 1, "m": 2})));
        assert_eq!(s.stored("a").await, Some(doc));
    }
}

/// Documented: a resent `put` applies twice (same data, version + 2), and still counts a
/// document it created once.
async fn put_loses_nothing(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        s.lose("UpdateItem", loss);
        let created = s
            .lossy
            .put(&s.key("a"), obj(json!({"n": 1})), "p")
            .await
            .unwrap();
        s.assert_lost(1);
        assert_eq!(created.data, obj(json!({"n": 1})));
        assert_eq!(created.version, 2, "the resend applied again");
        assert_eq!(s.stored("a").await, Some(created.clone()));
        assert_eq!(
            s.counters().await,
            vec![("c".to_owned(), 1)],
            "{loss:?}: counted once"
        );

        s.lose("UpdateItem", loss);
        let replaced = s
            .lossy
            .put(&s.key("a"), obj(json!({"n": 2})), "q")
            .await
            .unwrap();
        s.assert_lost(2);
        assert_eq!(replaced.data, obj(json!({"n": 2})));
        assert_eq!(replaced.version, 4);
        assert_eq!(
            (replaced.created_at, replaced.created_by.as_str()),
            (created.created_at, "p")
        );
        assert_eq!(s.stored("a").await, Some(replaced));
        assert_eq!(s.counters().await, vec![("c".to_owned(), 1)]);
    }
}

/// Documented: `update` meets its own write, reads again and applies the patch again (a merge
/// patch applied twice gives the same data): no error, nothing lost, version + 2.
async fn update_loses_nothing(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        s.clean
            .create(&s.key("a"), obj(json!({"n": 1, "k": [1]})), "")
            .await
            .unwrap();
        s.lose("PutItem", loss);
        let doc = s
            .lossy
            .update(&s.key("a"), &obj(json!({"k": [2], "n": null})), "u")
            .await
            .unwrap();
        s.assert_lost(1);
        assert_eq!(doc.data, obj(json!({"k": [2]})));
        assert_eq!(doc.version, 3);
        assert_eq!(s.stored("a").await, Some(doc));
    }
}

async fn delete_reports_its_own_delete(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        s.clean
            .create(&s.key("a"), obj(json!({})), "")
            .await
            .unwrap();
        s.clean
            .create(&s.key("b"), obj(json!({})), "")
            .await
            .unwrap();
        s.lose("DeleteItem", loss);
        assert!(
            s.lossy.delete(&s.key("a")).await.unwrap(),
            "{loss:?}: it was there"
        );
        s.assert_lost(1);
        s.lose("DeleteItem", loss);
        s.lossy.delete_if(&s.key("b"), 1).await.unwrap();
        s.assert_lost(2);
        assert_eq!(s.stored("a").await, None);
        assert_eq!(s.stored("b").await, None);
        assert_eq!(
            s.counters().await,
            vec![],
            "{loss:?}: each delete counted once"
        );
    }
}

/// A lost counter answer is never resent: the counter moves once.
async fn counter_answers_are_not_counted_twice(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        s.faults.lose_next("UpdateItem", loss); // the counter ADD after the PutItem
        s.lossy
            .create(&s.key("a"), obj(json!({})), "")
            .await
            .unwrap();
        s.clean
            .create(&s.key("b"), obj(json!({})), "")
            .await
            .unwrap();
        s.assert_lost(1);
        assert_eq!(s.counters().await, vec![("c".to_owned(), 2)], "{loss:?}");
        s.faults.lose_next("UpdateItem", loss);
        s.lossy.delete(&s.key("a")).await.unwrap();
        s.assert_lost(2);
        assert_eq!(s.counters().await, vec![("c".to_owned(), 1)], "{loss:?}");
    }
}

/// A lost answer never turns a real refusal into success.
async fn real_refusals_stay_refusals(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        s.clean
            .create(&s.key("a"), obj(json!({"by": "clean"})), "")
            .await
            .unwrap();
        s.lose("PutItem", loss);
        let err = s
            .lossy
            .create(&s.key("a"), obj(json!({})), "")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::AlreadyExists), "{loss:?}: {err}");
        s.assert_lost(1);
        s.clean
            .update(&s.key("a"), &obj(json!({"x": 1})), "")
            .await
            .unwrap();
        // A stale update_if is refused on its read; a racing one on its write:
        let err = s
            .lossy
            .update_if(&s.key("a"), &obj(json!({})), 1, "")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Conflict { current: 2 }), "{err}");
        assert_eq!(s.stored("a").await.unwrap().version, 2);
        assert_eq!(s.counters().await, vec![("c".to_owned(), 1)]);
    }
}

/// Failures that outlast the SDK's retries: 5xx and throttling are `Unavailable`, anything
/// else `Backend`; a throttled counter write is sent again and counts once.
async fn failures_map_to_their_kinds(emulator: Emulator, cell: &'static OnceCell<String>) {
    let refuse = |code: &'static str, status: u16| Refusal {
        status,
        code,
        always: true,
    };
    for (status, code, unavailable) in [
        (500, "InternalServerError", true),
        (503, "ServiceUnavailable", true),
        (400, "ProvisionedThroughputExceededException", true),
        (400, "ThrottlingException", true),
        (400, "ValidationException", false),
    ] {
        let s = Setup::new(emulator, cell).await;
        s.faults.refuse("GetItem", refuse(code, status));
        let err = s.lossy.get(&s.key("a")).await.unwrap_err();
        match (unavailable, &err) {
            (true, Error::Unavailable { .. }) | (false, Error::Backend { .. }) => {}
            _ => panic!("{status} {code}: {err:?}"),
        }
        assert!(err.to_string().contains(code), "{err}");
    }
    let s = Setup::new(emulator, cell).await;
    s.faults.refuse(
        "UpdateItem",
        Refusal {
            status: 400,
            code: "ProvisionedThroughputExceededException",
            always: false,
        },
    );
    s.lossy
        .create(&s.key("a"), obj(json!({})), "")
        .await
        .unwrap();
    assert_eq!(
        s.counters().await,
        vec![("c".to_owned(), 1)],
        "the throttled ADD was resent"
    );
}

/// How a racing call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Race {
    Won,
    Lost,
    /// `Unavailable`: its lost attempt may have been applied and another write changed the
    /// document before the resend, so the call cannot tell.
    Unknown,
}

fn race<T: std::fmt::Debug>(result: docstore::Result<T>, lost: fn(&Error) -> bool) -> Race {
    match result {
        Ok(_) => Race::Won,
        Err(err) if lost(&err) => Race::Lost,
        Err(Error::Unavailable { .. }) => Race::Unknown,
        Err(err) => panic!("unexpected {err}"),
    }
}

/// Checks one id's race: never two winners, no winner only when a call could not tell, and
/// the stored value is the winner's.
fn check_race(id: &str, what: &str, outcomes: [Race; 2], stored: &serde_json::Value) {
    let winners: Vec<usize> = (0..2).filter(|t| outcomes[*t] == Race::Won).collect();
    assert!(winners.len() <= 1, "{id}: two {what} winners");
    if let [winner] = winners[..] {
        assert_eq!(
            stored,
            &json!(winner),
            "{id}: the stored {what} is the winner's"
        );
    } else {
        assert!(
            outcomes.contains(&Race::Unknown),
            "{id}: no {what} winner: {outcomes:?}"
        );
    }
}

/// Two callers race `create` and then `update_if` on the same ids while half of their write
/// answers are lost: never two winners, and the stored document is the winner's. When the
/// document changed between a lost attempt and its resend, the call answers `Unavailable`
/// (it cannot know whether its attempt was applied) rather than a false refusal.
async fn racing_writers_with_losses_never_both_win(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    let table = ensure_table(cell, emulator, "lost").await;
    let site = site("race");
    let ids: Vec<String> = (0..30).map(|i| format!("r{i:02}")).collect();
    let tasks: Vec<_> = (0..2u64)
        .map(|task| {
            let faults = Faults::default();
            faults.lose_randomly(0.5, 0x7ace + task);
            let store = store_on(
                emulator.faulty_client(&faults),
                &table,
                10,
                StoreOptions::default(),
            );
            let (site, ids) = (site.clone(), ids.clone());
            tokio::spawn(async move {
                let actor = format!("t{task}");
                let mut outcomes = Vec::new();
                for id in &ids {
                    let key = Key::new(&site, "c", id).unwrap();
                    let created = race(
                        store.create(&key, obj(json!({"c": task})), &actor).await,
                        |e| matches!(e, Error::AlreadyExists),
                    );
                    let updated = race(
                        store
                            .update_if(&key, &obj(json!({"u": task})), 1, &actor)
                            .await,
                        |e| matches!(e, Error::Conflict { .. }),
                    );
                    outcomes.push((created, updated));
                }
                (outcomes, faults.injected().len())
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    assert!(results.iter().all(|(_, lost)| *lost > 5), "losses happened");
    let clean = store_on(emulator.client(), &table, 10, StoreOptions::default());
    for (i, id) in ids.iter().enumerate() {
        let (a, b) = (results[0].0[i], results[1].0[i]);
        let doc = clean
            .get(&Key::new(&site, "c", id).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(doc.version, 2, "{id}: one update_if applied");
        check_race(id, "create", [a.0, b.0], &doc.data["c"]);
        check_race(id, "update_if", [a.1, b.1], &doc.data["u"]);
    }
    assert_eq!(clean.count(&site).await.unwrap(), 30);
}

/// One random write of the run.
#[derive(Clone, Debug)]
enum Op {
    Create(String, i64),
    Put(String, i64),
    Update(String, i64),
    UpdateIfCurrent(String, i64),
    UpdateIfStale(String),
    Delete(String),
    DeleteIfCurrent(String),
    DeleteIfStale(String),
}

/// xorshift64: a reproducible op sequence without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

fn ops(seed: u64, count: usize, exact_only: bool) -> Vec<Op> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let id = format!("d{}", rng.next(6));
            let n = rng.next(1000) as i64;
            match rng.next(if exact_only { 6 } else { 8 }) {
                0 => Op::Create(id, n),
                1 => Op::UpdateIfCurrent(id, n),
                2 => Op::UpdateIfStale(id),
                3 => Op::Delete(id),
                4 => Op::DeleteIfCurrent(id),
                5 => Op::DeleteIfStale(id),
                6 => Op::Put(id, n),
                _ => Op::Update(id, n),
            }
        })
        .collect()
}

/// What a call answered, in a form two runs can compare (versions only when asked).
async fn apply(store: &DynamoStore, site: &str, op: &Op, versions: bool) -> String {
    let key = |id: &str| Key::new(site, "c", id).unwrap();
    let show = |result: docstore::Result<Document>| match result {
        Ok(doc) => format!(
            "ok {} {} {}",
            serde_json::Value::Object(doc.data),
            doc.updated_by,
            if versions {
                doc.version.to_string()
            } else {
                String::new()
            }
        ),
        Err(err) => kind(&err),
    };
    let current = |id: String| async move {
        store
            .get(&key(&id))
            .await
            .unwrap()
            .map_or(1, |doc| doc.version)
    };
    match op {
        Op::Create(id, n) => show(store.create(&key(id), obj(json!({"n": n})), "c").await),
        Op::Put(id, n) => show(store.put(&key(id), obj(json!({"n": n})), "p").await),
        Op::Update(id, n) => show(store.update(&key(id), &obj(json!({"u": n})), "u").await),
        Op::UpdateIfCurrent(id, n) => {
            let version = current(id.clone()).await;
            show(
                store
                    .update_if(&key(id), &obj(json!({"i": n})), version, "i")
                    .await,
            )
        }
        Op::UpdateIfStale(id) => {
            let version = current(id.clone()).await + 1;
            show(
                store
                    .update_if(&key(id), &obj(json!({"s": 1})), version, "s")
                    .await,
            )
        }
        Op::Delete(id) => match store.delete(&key(id)).await {
            Ok(deleted) => format!("ok {deleted}"),
            Err(err) => kind(&err),
        },
        Op::DeleteIfCurrent(id) => {
            let version = current(id.clone()).await;
            match store.delete_if(&key(id), version).await {
                Ok(()) => "ok".to_owned(),
                Err(err) => kind(&err),
            }
        }
        Op::DeleteIfStale(id) => {
            let version = current(id.clone()).await + 1;
            match store.delete_if(&key(id), version).await {
                Ok(()) => "ok".to_owned(),
                Err(err) => kind(&err),
            }
        }
    }
}

fn kind(err: &Error) -> String {
    match err {
        Error::NotFound => "NotFound".into(),
        Error::AlreadyExists => "AlreadyExists".into(),
        Error::Conflict { .. } => "Conflict".into(),
        other => format!("unexpected error: {other}"),
    }
}

async fn run_with_and_without_losses(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
    seed: u64,
    exact_only: bool,
) {
    let s = Setup::new(emulator, cell).await;
    s.faults.lose_randomly(0.3, seed);
    let clean_site = site("clean");
    let ops = ops(seed, 300, exact_only);
    for (i, op) in ops.iter().enumerate() {
        let clean = apply(&s.clean, &clean_site, op, exact_only).await;
        let lossy = apply(&s.lossy, &s.site, op, exact_only).await;
        assert_eq!(lossy, clean, "op {i}: {op:?}");
    }
    let injected = s.faults.injected();
    assert!(injected.len() >= 20, "too few losses: {}", injected.len());
    for loss in LOSSES {
        assert!(injected.iter().any(|(_, l)| *l == loss), "no {loss:?}");
    }
    for id in 0..6 {
        let id = format!("d{id}");
        let clean = s
            .clean
            .get(&Key::new(&clean_site, "c", &id).unwrap())
            .await
            .unwrap();
        let lossy = s.clean.get(&s.key(&id)).await.unwrap();
        let strip = |doc: Option<Document>| {
            doc.map(|d| {
                (
                    d.data,
                    d.created_by,
                    d.updated_by,
                    exact_only.then_some(d.version),
                )
            })
        };
        assert_eq!(strip(lossy), strip(clean), "{id}");
    }
    assert_eq!(
        s.clean.collections(&s.site).await.unwrap(),
        s.clean.collections(&clean_site).await.unwrap(),
        "counters"
    );
}

/// `create`, `update_if`, `delete`, `delete_if` (the calls that are exact under losses,
/// versions included).
async fn random_exact_writes_match_a_run_without_losses(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    run_with_and_without_losses(emulator, cell, 0x5eed_0001, true).await;
}

/// Every write call; versions may differ where a `put` or `update` was resent (documented),
/// everything else is equal.
async fn random_writes_match_a_run_without_losses(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    run_with_and_without_losses(emulator, cell, 0x5eed_0002, false).await;
}

macro_rules! on_both_emulators {
    ($($case:ident),* $(,)?) => {
        mod dynoxide {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Emulator::Dynoxide, &super::DYNOXIDE).await;
                }
            )*
        }
        mod moto {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Emulator::Moto, &super::MOTO).await;
                }
            )*
        }
    };
}

on_both_emulators!(
    create_succeeds_once,
    restore_succeeds_once,
    update_if_succeeds_once,
    put_loses_nothing,
    update_loses_nothing,
    delete_reports_its_own_delete,
    counter_answers_are_not_counted_twice,
    real_refusals_stay_refusals,
    failures_map_to_their_kinds,
    racing_writers_with_losses_never_both_win,
    random_exact_writes_match_a_run_without_losses,
    random_writes_match_a_run_without_losses,
);
