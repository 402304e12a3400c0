//! Lost answers, for real: a fault-injecting HTTP client lets each write reach the emulator and
//! then loses its answer (an HTTP 500 or a dropped connection), so the SDK sends it again —
//! with and without another writer changing the document between the lost attempt and the
//! resend. Every write call must report its own applied write once, with the document as it
//! wrote it and one version step; never a false refusal; `delete` and `delete_if` never touch
//! a document created after them; counters stay exact. Run on both emulators: dynoxide
//! honours `TransactWriteItems`' client request token (a resend of a committed transaction
//! answers success), moto ignores it (the resend fails its condition), so on moto the write
//! identities — on the item, and on the counter item for a delete — carry the proof.

mod support;

use docstore::config::CounterMode;
use docstore::{Document, Error, Key, RecountMode, Store, StoreOptions, WriteId};
use serde_json::json;
use support::faults::{Faults, Loss, Refusal};
use support::{Emulator, ensure_table, obj, site, store_on, store_with_counters};
use tokio::sync::OnceCell;

static DYNOXIDE: OnceCell<String> = OnceCell::const_new();
static MOTO: OnceCell<String> = OnceCell::const_new();

const LOSSES: [Loss; 2] = [Loss::ServerError, Loss::Dropped];
const MODES: [CounterMode; 2] = [CounterMode::Exact, CounterMode::Fast];
/// The operation a `delete` or `delete_if` is sent as, in both counter modes: the delete
/// goes with its stamp (the change feed's actor and time) in one `TransactWriteItems`; fast
/// counters move the counter after it with an `UpdateItem`.
const DELETES: &str = "TransactWriteItems";

/// A store whose answers are lost as `Faults` says, a clean store on the same table, and a
/// fresh site.
struct Setup {
    emulator: Emulator,
    lossy: Store,
    clean: Store,
    faults: Faults,
    site: String,
    mode: CounterMode,
}

/// Options for a store whose requests go through a fault script: no background sweep, whose
/// own requests (the expiry registry's read) would take the faults meant for the case's.
fn quiet_options() -> StoreOptions {
    StoreOptions::default().with_sweep_interval(None)
}

/// A store on `table` through `client` (a faulty one) with [`quiet_options`].
fn lossy_store(
    emulator: Emulator,
    client: aws_sdk_dynamodb::Client,
    table: &str,
) -> docstore_dynamodb::DynamoStore {
    let config = support::config_for(emulator, table);
    docstore_dynamodb::DynamoStore::from_client(
        client,
        emulator.streams(),
        &config,
        quiet_options(),
    )
    .expect("valid settings")
}

impl Setup {
    async fn new(emulator: Emulator, cell: &'static OnceCell<String>) -> Self {
        Self::with_mode(emulator, cell, CounterMode::Exact).await
    }

    async fn with_mode(
        emulator: Emulator,
        cell: &'static OnceCell<String>,
        mode: CounterMode,
    ) -> Self {
        let table = ensure_table(cell, emulator, "lost").await;
        let faults = Faults::default();
        // One try per call: these cases check what the driver answers after the SDK's own
        // resends; the store's retry policy, which repeats a call that ended `Unavailable`,
        // is checked by the conformance family `retries`.
        let config = docstore::config::DynamoDbConfig {
            counters: mode,
            ..support::config_for(emulator, &table)
        };
        let one_try = quiet_options().with_retry(docstore::retry::RetryPolicy::NONE);
        let lossy = docstore_dynamodb::DynamoStore::from_client(
            emulator.faulty_client(&faults),
            emulator.streams(),
            &config,
            one_try,
        )
        .expect("valid settings");
        Setup {
            emulator,
            lossy: Store::new(lossy),
            clean: Store::new(store_with_counters(
                emulator,
                emulator.client(),
                &table,
                mode,
            )),
            faults,
            site: site("lost"),
            mode,
        }
    }

    fn key(&self, id: &str) -> Key {
        Key::new(&self.site, "c", id).unwrap()
    }

    /// The operation a create is sent as in this counter mode.
    fn counted(&self, fast: &str) -> String {
        match self.mode {
            CounterMode::Exact => "TransactWriteItems".to_owned(),
            _ => fast.to_owned(),
        }
    }

    fn lose(&self, operation: &str, loss: Loss) {
        self.faults.lose_next(operation, loss);
    }

    /// Loses the next answer of `operation` after `then` ran on the clean store.
    fn lose_then<F, Fut>(&self, operation: &str, loss: Loss, then: F)
    where
        F: FnOnce(Store) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.faults
            .lose_next_then(operation, loss, then(self.clean.clone()));
    }

    fn assert_lost(&self, expected: usize) {
        assert!(
            self.faults.script_done(),
            "the scripted loss never happened: {:?}",
            self.faults.injected()
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

    /// Counters agree with the documents.
    async fn assert_counters_exact(&self, what: &str) {
        let recount = self
            .clean
            .recount(&self.site, RecountMode::Report)
            .await
            .unwrap();
        assert_eq!(recount.changes, vec![], "{what}: counters drifted");
    }

    /// Whether the emulator answers a resent committed transaction with success.
    fn honours_tokens(&self) -> bool {
        self.emulator.honours_request_tokens()
    }
}

/// A write whose first attempt is applied but loses its answer, and whose resends are then
/// throttled until the SDK gives up, was applied: the call reports it applied, once — never
/// a failure, never a second application (a fresh read-modify-write) — and counts it once.
async fn a_lost_answer_then_throttled_resends_count_as_applied(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    for mode in MODES {
        let s = Setup::with_mode(emulator, cell, mode).await;
        let lose_then_throttle = |operation: &str| {
            let faults = s.faults.clone();
            let operation_owned = operation.to_owned();
            s.faults
                .lose_next_then(operation, Loss::ServerError, async move {
                    // The SDK's two resends (3 attempts in all) are throttled.
                    for _ in 0..2 {
                        faults.refuse(
                            &operation_owned,
                            Refusal {
                                status: 400,
                                code: "ThrottlingException",
                                always: false,
                            },
                        );
                    }
                });
        };
        let at = |what: &str| format!("{mode:?}: {what}");

        lose_then_throttle(&s.counted("PutItem"));
        let created = s.lossy.create(&s.key("a"), obj(json!({"n": 1})), "c").await;
        let created = created.unwrap_or_else(|e| panic!("{}: {e}", at("create")));
        assert_eq!(s.stored("a").await, Some(created), "{}", at("create"));
        s.assert_counters_exact(&at("create")).await;

        lose_then_throttle("PutItem");
        let updated = s
            .lossy
            .update(&s.key("a"), &obj(json!({"u": 1})), "u")
            .await;
        let updated = updated.unwrap_or_else(|e| panic!("{}: {e}", at("update")));
        assert_eq!(updated.version, 2, "{}: one step", at("update"));
        assert_eq!(s.stored("a").await, Some(updated), "{}", at("update"));

        lose_then_throttle("TransactWriteItems");
        let deleted = s.lossy.delete(&s.key("a")).await;
        assert!(
            deleted.unwrap_or_else(|e| panic!("{}: {e}", at("delete"))),
            "{}",
            at("delete")
        );
        assert_eq!(s.stored("a").await, None);
        s.assert_counters_exact(&at("delete")).await;

        lose_then_throttle("TransactWriteItems");
        let batch = [
            docstore::Write::create(s.key("b"), obj(json!({"b": 1}))),
            docstore::Write::create(s.key("c"), obj(json!({"c": 1}))),
        ];
        let committed = s.lossy.write_all(&batch, "batch").await;
        committed.unwrap_or_else(|e| panic!("{}: {e}", at("batch")));
        assert_eq!(
            s.stored("b").await.map(|d| d.version),
            Some(1),
            "{}",
            at("batch")
        );
        s.assert_counters_exact(&at("batch")).await;
        assert!(s.faults.script_done(), "{}: every loss happened", at("all"));
    }
}

/// No other writer: every write call, in both counter modes, reports its own applied write
/// once, as it wrote it, one version step, counted once.
async fn every_write_succeeds_once(emulator: Emulator, cell: &'static OnceCell<String>) {
    for mode in MODES {
        for loss in LOSSES {
            let s = Setup::with_mode(emulator, cell, mode).await;
            let at = format!("{mode:?} {loss:?}");
            let mut lost = 0;
            let mut check = |what: &str| {
                lost += 1;
                s.assert_lost(lost);
                format!("{at}: {what}")
            };

            s.lose(&s.counted("PutItem"), loss);
            let created = s.lossy.create(&s.key("a"), obj(json!({"n": 1})), "c").await;
            let what = check("create");
            let created = created.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(created.version, 1, "{what}");
            assert_eq!(s.stored("a").await, Some(created.clone()), "{what}");

            let restored = Document {
                expires_at: None,
                id: "r".into(),
                data: obj(json!({"r": 1})),
                created_at: 10,
                updated_at: 20,
                created_by: "x".into(),
                updated_by: "y".into(),
                version: 7,
            };
            s.lose(&s.counted("PutItem"), loss);
            let result = s.lossy.restore(&s.key("r"), &restored).await;
            let what = check("restore");
            result.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(s.stored("r").await, Some(restored), "{what}");

            s.lose("PutItem", loss);
            let put = s.lossy.put(&s.key("a"), obj(json!({"p": 1})), "p").await;
            let what = check("put (replace)");
            let put = put.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!((put.version, put.created_by.as_str()), (2, "c"), "{what}");
            assert_eq!(s.stored("a").await, Some(put), "{what}");

            s.lose(&s.counted("PutItem"), loss);
            let put = s.lossy.put(&s.key("b"), obj(json!({"p": 2})), "p").await;
            let what = check("put (create)");
            let put = put.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(put.version, 1, "{what}");
            assert_eq!(s.stored("b").await, Some(put), "{what}");

            s.lose("PutItem", loss);
            let updated = s
                .lossy
                .update(&s.key("a"), &obj(json!({"u": [1], "p": null})), "u")
                .await;
            let what = check("update");
            let updated = updated.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(updated.version, 3, "{what}: one step");
            assert_eq!(updated.data, obj(json!({"u": [1]})), "{what}");
            assert_eq!(s.stored("a").await, Some(updated), "{what}");

            s.lose("PutItem", loss);
            let updated = s
                .lossy
                .update_if(&s.key("a"), &obj(json!({"i": true})), 3, "i")
                .await;
            let what = check("update_if");
            let updated = updated.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(updated.version, 4, "{what}: one step");
            assert_eq!(s.stored("a").await, Some(updated), "{what}");
            assert_eq!(s.counters().await, vec![("c".to_owned(), 3)], "{at}");

            s.lose(DELETES, loss);
            let deleted = s.lossy.delete(&s.key("a")).await;
            let what = check("delete");
            assert!(deleted.unwrap_or_else(|e| panic!("{what}: {e}")), "{what}");
            s.lose(DELETES, loss);
            let deleted = s.lossy.delete_if(&s.key("b"), 1).await;
            let what = check("delete_if");
            deleted.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(s.stored("a").await, None, "{at}");
            assert_eq!(s.stored("b").await, None, "{at}");
            assert_eq!(s.counters().await, vec![("c".to_owned(), 1)], "{at}");
            s.assert_counters_exact(&at).await;
        }
    }
}

/// Another writer changes the document after a lost attempt and before its resend: the
/// resend still recognises its own write in the item's history and reports it once, as it
/// wrote it (never `Unavailable` for `update_if`, never a second application of `put` or `update`).
async fn own_writes_are_recognised_after_other_writers(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    for mode in MODES {
        for loss in LOSSES {
            let s = Setup::with_mode(emulator, cell, mode).await;
            let at = format!("{mode:?} {loss:?}");
            let (a, b, c, d) = (s.key("a"), s.key("b"), s.key("c"), s.key("d"));

            // create, then someone updates it.
            let other = a.clone();
            s.lose_then(&s.counted("PutItem"), loss, move |clean| async move {
                clean
                    .update(&other, &obj(json!({"o": 1})), "o")
                    .await
                    .unwrap();
            });
            let created = s.lossy.create(&a, obj(json!({"n": 1})), "c").await;
            let created = created.unwrap_or_else(|e| panic!("{at}: create: {e}"));
            assert_eq!(
                (created.version, created.data.clone()),
                (1, obj(json!({"n": 1})))
            );
            let now = s.stored("a").await.unwrap();
            assert_eq!(
                (now.version, now.data),
                (2, obj(json!({"n": 1, "o": 1}))),
                "{at}"
            );

            // put (replace), then someone updates it.
            let other = a.clone();
            s.lose_then("PutItem", loss, move |clean| async move {
                clean
                    .update(&other, &obj(json!({"o": 2})), "o")
                    .await
                    .unwrap();
            });
            let put = s.lossy.put(&a, obj(json!({"p": 1})), "p").await;
            let put = put.unwrap_or_else(|e| panic!("{at}: put: {e}"));
            assert_eq!(put.version, 3, "{at}: put applied once");
            let now = s.stored("a").await.unwrap();
            assert_eq!(
                (now.version, now.data),
                (4, obj(json!({"p": 1, "o": 2}))),
                "{at}"
            );

            // update, then someone else's put.
            let other = a.clone();
            s.lose_then("PutItem", loss, move |clean| async move {
                clean.put(&other, obj(json!({"q": 1})), "q").await.unwrap();
            });
            let updated = s.lossy.update(&a, &obj(json!({"u": 1})), "u").await;
            let updated = updated.unwrap_or_else(|e| panic!("{at}: update: {e}"));
            assert_eq!(updated.version, 5, "{at}: update applied once");
            assert_eq!(updated.data, obj(json!({"p": 1, "o": 2, "u": 1})), "{at}");
            assert_eq!(
                s.stored("a").await.unwrap().version,
                6,
                "{at}: not re-applied"
            );

            // update_if, then someone's update.
            let other = a.clone();
            s.lose_then("PutItem", loss, move |clean| async move {
                clean
                    .update(&other, &obj(json!({"r": 1})), "r")
                    .await
                    .unwrap();
            });
            let updated = s.lossy.update_if(&a, &obj(json!({"i": 1})), 6, "i").await;
            let updated = updated.unwrap_or_else(|e| panic!("{at}: update_if: {e}"));
            assert_eq!(updated.version, 7, "{at}");
            assert_eq!(s.stored("a").await.unwrap().version, 8, "{at}");

            // put that creates, then someone's update.
            let other = b.clone();
            s.lose_then(&s.counted("PutItem"), loss, move |clean| async move {
                clean
                    .update(&other, &obj(json!({"o": 1})), "o")
                    .await
                    .unwrap();
            });
            let put = s.lossy.put(&b, obj(json!({"p": 1})), "p").await;
            let put = put.unwrap_or_else(|e| panic!("{at}: put (create): {e}"));
            assert_eq!((put.version, put.created_by.as_str()), (1, "p"), "{at}");
            assert_eq!(s.stored("b").await.unwrap().version, 2, "{at}");

            // delete, then someone creates the id again: the new document is never touched.
            s.clean
                .create(&c, obj(json!({"old": 1})), "x")
                .await
                .unwrap();
            let other = c.clone();
            s.lose_then(DELETES, loss, move |clean| async move {
                clean
                    .create(&other, obj(json!({"new": 1})), "y")
                    .await
                    .unwrap();
            });
            let deleted = s.lossy.delete(&c).await;
            match (mode, s.honours_tokens(), deleted) {
                (CounterMode::Exact, false, Err(Error::Unavailable { .. })) => {
                    // Emulator limitation: moto ignores the client request token (the store
                    // is told so), the resend of the committed delete is refused, and the
                    // counter's last mover is the new create: nothing proves the outcome.
                    // DynamoDB (and dynoxide) answer the resend with success.
                }
                (_, _, Ok(true)) => {}
                (_, _, other) => panic!("{at}: delete: {other:?}"),
            }
            let now = s.stored("c").await.expect("the new document survives");
            assert_eq!(
                (now.version, now.data, now.created_by.as_str()),
                (1, obj(json!({"new": 1})), "y"),
                "{at}"
            );

            // delete_if, the same: never a refusal after deleting, never the new document.
            s.clean
                .create(&d, obj(json!({"old": 1})), "x")
                .await
                .unwrap();
            let other = d.clone();
            s.lose_then(DELETES, loss, move |clean| async move {
                clean
                    .create(&other, obj(json!({"new": 1})), "y")
                    .await
                    .unwrap();
            });
            let deleted = s.lossy.delete_if(&d, 1).await;
            match (mode, s.honours_tokens(), deleted) {
                (CounterMode::Exact, false, Err(Error::Unavailable { .. })) => {} // moto: as above
                (_, _, Ok(())) => {}
                (_, _, other) => panic!("{at}: delete_if: {other:?}"),
            }
            let now = s.stored("d").await.expect("the new document survives");
            assert_eq!((now.version, now.created_by.as_str()), (1, "y"), "{at}");

            s.assert_lost(7);
            assert_eq!(s.counters().await, vec![("c".to_owned(), 4)], "{at}");
            s.assert_counters_exact(&at).await;
        }
    }
}

/// A create whose document was deleted and created again by others before the resend:
/// dynoxide's token says it was applied. Emulator limitation: moto ignores the token and the
/// counter's last mover is the other create, so nothing can tell there: `Unavailable`, never a
/// false `AlreadyExists`. The counter stays exact either way.
async fn create_after_delete_and_recreate(emulator: Emulator, cell: &'static OnceCell<String>) {
    for loss in LOSSES {
        let s = Setup::new(emulator, cell).await;
        let key = s.key("a");
        let other = key.clone();
        s.lose_then("TransactWriteItems", loss, move |clean| async move {
            assert!(clean.delete(&other).await.unwrap());
            clean
                .create(&other, obj(json!({"by": "other"})), "o")
                .await
                .unwrap();
        });
        let created = s.lossy.create(&key, obj(json!({"by": "me"})), "me").await;
        match (s.honours_tokens(), created) {
            (true, Ok(doc)) => assert_eq!(doc.created_by, "me"),
            (false, Err(Error::Unavailable { .. })) => {}
            (_, other) => panic!("{loss:?}: {other:?}"),
        }
        s.assert_lost(1);
        assert_eq!(s.stored("a").await.unwrap().created_by, "o");
        assert_eq!(s.counters().await, vec![("c".to_owned(), 1)]);
        s.assert_counters_exact("recreate").await;
    }
}

/// `write_all` is one `TransactWriteItems`: a lost answer, with or without another writer
/// changing one of its documents before the resend, is reported as success once (dynoxide:
/// by the token; moto: by the batch's identity in the items' histories), every write applied
/// once, counters exact.
async fn batches_succeed_once_after_a_lost_answer(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    use docstore::{Write, WriteOutcome};
    for loss in LOSSES {
        for other_writer in [false, true] {
            let s = Setup::new(emulator, cell).await;
            let at = format!("{loss:?}, other writer: {other_writer}");
            s.clean
                .create(&s.key("b"), obj(json!({"b": 1})), "")
                .await
                .unwrap();
            s.clean
                .create(&s.key("c"), obj(json!({"c": 1})), "")
                .await
                .unwrap();
            let batch = [
                Write::create(s.key("a"), obj(json!({"a": 1}))),
                Write::update_if(s.key("b"), obj(json!({"b": 2})), 1),
                Write::delete_if(s.key("c"), 1),
            ];
            if other_writer {
                let b = s.key("b");
                s.lose_then("TransactWriteItems", loss, move |clean| async move {
                    clean.update(&b, &obj(json!({"o": 1})), "o").await.unwrap();
                });
            } else {
                s.lose("TransactWriteItems", loss);
            }
            let outcomes = s
                .lossy
                .write_all(&batch, "batch")
                .await
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            s.assert_lost(1);
            assert!(
                matches!(&outcomes[0], WriteOutcome::Written(d) if d.version == 1),
                "{at}"
            );
            assert!(
                matches!(&outcomes[1], WriteOutcome::Written(d) if d.version == 2),
                "{at}"
            );
            assert_eq!(outcomes[2], WriteOutcome::Deleted, "{at}");
            assert_eq!(
                s.stored("a").await.unwrap().version,
                1,
                "{at}: applied once"
            );
            let b = s.stored("b").await.unwrap();
            assert_eq!(
                b.version,
                if other_writer { 3 } else { 2 },
                "{at}: applied once"
            );
            assert_eq!(s.stored("c").await, None, "{at}");
            assert_eq!(s.counters().await, vec![("c".to_owned(), 2)], "{at}");
            s.assert_counters_exact(&at).await;
        }
    }
}

/// `get_many` over more than one `BatchGetItem` (150 keys: chunks of 100) asks again for the
/// keys DynamoDB left unprocessed (here: every key of the first three requests), with backoff,
/// and returns every document in the keys' order.
async fn get_many_asks_again_for_unprocessed_keys(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    use docstore::Write;
    let s = Setup::new(emulator, cell).await;
    let keys: Vec<Key> = (0..150).map(|n| s.key(&format!("d{n:03}"))).collect();
    for chunk in keys.chunks(50) {
        let writes: Vec<Write> = chunk
            .iter()
            .filter(|k| k.id() != "d007")
            .map(|k| Write::create(k.clone(), obj(json!({"id": k.id()}))))
            .collect();
        s.clean.write_all(&writes, "").await.unwrap();
    }
    let mut asked = keys.clone();
    asked.reverse();
    s.faults.unprocess_next(3);
    let docs = s.lossy.get_many(&asked).await.unwrap();
    assert_eq!(
        s.faults.injected().len(),
        3,
        "the unprocessed answers were given"
    );
    assert_eq!(docs.len(), 150);
    for (key, doc) in asked.iter().zip(&docs) {
        match doc {
            None => assert_eq!(key.id(), "d007"),
            Some(doc) => assert_eq!(doc.id, key.id()),
        }
    }
}

/// Fast counters: a lost counter answer is never resent, so the counter moves once.
async fn counter_answers_are_not_counted_twice(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    for loss in LOSSES {
        let s = Setup::with_mode(emulator, cell, CounterMode::Fast).await;
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
        s.lose(&s.counted("PutItem"), loss);
        let err = s
            .lossy
            .create(&s.key("a"), obj(json!({})), "")
            .await
            .unwrap_err();
        match (s.honours_tokens(), &err) {
            (true, Error::AlreadyExists) => {}
            // Emulator limitation: without the client request token nothing tells a refused
            // first attempt from one that was applied and then replaced by others.
            (false, Error::Unavailable { .. }) => {}
            _ => panic!("{loss:?}: {err}"),
        }
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
    // Fast counters: the throttled counter ADD is sent again.
    let s = Setup::with_mode(emulator, cell, CounterMode::Fast).await;
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
    // Exact counters: a throttled transaction is sent again.
    let s = Setup::new(emulator, cell).await;
    s.faults.refuse(
        "TransactWriteItems",
        Refusal {
            status: 400,
            code: "ThrottlingException",
            always: false,
        },
    );
    s.lossy
        .create(&s.key("a"), obj(json!({})), "")
        .await
        .unwrap();
    assert_eq!(s.counters().await, vec![("c".to_owned(), 1)]);
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
            let store = Store::new(lossy_store(
                emulator,
                emulator.faulty_client(&faults),
                &table,
            ));
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
    let clean = Store::new(store_on(
        emulator.client(),
        emulator.streams(),
        &table,
        10,
        StoreOptions::default(),
    ));
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

fn ops(seed: u64, count: usize) -> Vec<Op> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let id = format!("d{}", rng.next(6));
            let n = rng.next(1000) as i64;
            match rng.next(8) {
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
async fn apply(store: &Store, site: &str, op: &Op, versions: bool) -> String {
    let key = |id: &str| Key::new(site, "c", id).unwrap();
    let show = |result: docstore::Result<Document>| match result {
        Ok(doc) => format!(
            "ok {} {} {}",
            serde_json::Value::from(doc.data),
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
        Error::NotFound { .. } => "NotFound".into(),
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
    let ops = ops(seed, 300);
    for (i, op) in ops.iter().enumerate() {
        let clean = apply(&s.clean, &clean_site, op, exact_only).await;
        let lossy = apply(&s.lossy, &s.site, op, exact_only).await;
        let refused_create_answer_lost = [(&clean, &lossy), (&lossy, &clean)]
            .iter()
            .any(|(one, other)| *one == "AlreadyExists" && other.contains("backend unavailable"));
        if !emulator.honours_request_tokens()
            && matches!(op, Op::Create(..))
            && refused_create_answer_lost
        {
            // Emulator limitation (moto ignores the token): a refused create whose answer was
            // lost cannot be told from one applied and replaced. On the lossy store the loss is
            // injected; the clean store meets one too when moto answers a request with an
            // error and the SDK resends it. The documents compared at the end show it changed
            // nothing.
            continue;
        }
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

/// Every write call, sequentially, with 30 % of write answers lost: the same answers,
/// versions included, and the same documents and counters as without losses.
async fn random_writes_match_a_run_without_losses(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    run_with_and_without_losses(emulator, cell, 0x5eed_0001, true).await;
    run_with_and_without_losses(emulator, cell, 0x5eed_0002, true).await;
}

/// How a call of the concurrent run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Done,
    Refused,
    /// `Unavailable`: the call could not know whether its lost attempt was applied.
    Unknown,
}

fn answer<T>(result: &docstore::Result<T>) -> Answer {
    match result {
        Ok(_) => Answer::Done,
        Err(Error::Unavailable { .. }) => Answer::Unknown,
        Err(_) => Answer::Refused,
    }
}

/// What the run saw, summed over the tasks.
#[derive(Debug, Default)]
struct Tally {
    calls: usize,
    calls_with_a_loss: usize,
    unknown: usize,
    /// Calls whose answer differs from what the design allows (false errors, wrong
    /// documents): must stay empty.
    wrong: Vec<String>,
    /// (key, call id, answer) of the writes on shared and churned documents.
    shared: Vec<(String, String, Answer)>,
    churn: Vec<(String, String, &'static str, Answer)>,
}

/// What the model keeps of a document: data, version, `created_by`.
type Shape = (docstore::Data, u64, String);

/// A task's own documents, modelled exactly.
type Model = std::collections::HashMap<String, Shape>;

fn doc_shape(doc: &Document) -> Shape {
    (doc.data.clone(), doc.version, doc.created_by.clone())
}

/// One task's calls: on its own documents (the model predicts every answer exactly), on the
/// shared documents (updates that each add their own mark), and on the churned ids (creates
/// and deletes by everyone).
async fn task_run(
    tokens: bool,
    store: Store,
    faults: Faults,
    site: String,
    task: u64,
    seed: u64,
    ops: usize,
) -> Tally {
    let mut rng = Rng(seed);
    let mut model = Model::new();
    let mut tally = Tally::default();
    let own = format!("own{task}");
    for call in 0..ops {
        let call_id = format!("t{task}c{call}");
        let lost_before = faults.injected().len();
        let what = rng.next(10);
        let (answer, owned) = if what < 5 {
            let id = format!("o{}", rng.next(3));
            let key = Key::new(&site, &own, &id).unwrap();
            let current = model.get(&id).cloned();
            let n = json!(call_id.clone());
            let (got, expected): (docstore::Result<Option<Shape>>, _) = match rng.next(6) {
                0 => {
                    let data = obj(json!({"n": n}));
                    let expected = match &current {
                        Some(_) => Err("AlreadyExists"),
                        None => Ok(Some((data.clone(), 1, call_id.clone()))),
                    };
                    let got = store.create(&key, data, &call_id).await;
                    (got.map(|d| Some(doc_shape(&d))), expected)
                }
                1 => {
                    let data = obj(json!({"n": n}));
                    let expected = Ok(Some(match &current {
                        Some((_, v, by)) => (data.clone(), v + 1, by.clone()),
                        None => (data.clone(), 1, call_id.clone()),
                    }));
                    let got = store.put(&key, data, &call_id).await;
                    (got.map(|d| Some(doc_shape(&d))), expected)
                }
                kind @ (2 | 3) => {
                    let patch = obj(json!({"u": {call_id.clone(): true}}));
                    let expected = match &current {
                        None => Err("NotFound"),
                        Some((data, v, by)) => {
                            let mut data = data.clone();
                            docstore::merge_patch(&mut data, &patch);
                            Ok(Some((data, v + 1, by.clone())))
                        }
                    };
                    let got = if kind == 2 {
                        store.update(&key, &patch, &call_id).await
                    } else {
                        let v = current.as_ref().map_or(1, |c| c.1);
                        store.update_if(&key, &patch, v, &call_id).await
                    };
                    (got.map(|d| Some(doc_shape(&d))), expected)
                }
                4 => {
                    let expected = Ok(None);
                    let got = store.delete(&key).await;
                    let got = match got {
                        Ok(deleted) if deleted == current.is_some() => Ok(None),
                        Ok(deleted) => Err(Error::invalid(format!("delete said {deleted}"))),
                        Err(e) => Err(e),
                    };
                    (got, expected)
                }
                _ => {
                    let expected = match &current {
                        None => Err("NotFound"),
                        Some(_) => Ok(None),
                    };
                    let v = current.as_ref().map_or(1, |c| c.1);
                    let got = store.delete_if(&key, v).await.map(|()| None);
                    (got, expected)
                }
            };
            let answer = answer(&got);
            let matches = match (&got, &expected) {
                (Ok(doc), Ok(want)) => doc == want,
                (Err(Error::AlreadyExists), Err("AlreadyExists"))
                | (Err(Error::NotFound { .. }), Err("NotFound")) => true,
                // Emulator limitation (moto ignores the client request token): a refused
                // create whose answer was lost cannot be told from one applied and replaced.
                (Err(Error::Unavailable { .. }), Err("AlreadyExists")) => {
                    !tokens && faults.injected().len() > lost_before
                }
                _ => false,
            };
            if !matches {
                tally.wrong.push(format!(
                    "{call_id} on own {id}: got {got:?}, expected {expected:?}"
                ));
            }
            // The model follows what the store did (only changes on success).
            match (&got, &expected) {
                (Ok(Some(doc)), _) => {
                    model.insert(id.clone(), doc.clone());
                }
                (Ok(None), _) => {
                    model.remove(&id);
                }
                _ => {}
            }
            (answer, true)
        } else if what < 8 {
            let id = format!("s{}", rng.next(3));
            let key = Key::new(&site, "shared", &id).unwrap();
            let patch = obj(json!({"marks": {call_id.clone(): true}}));
            let got = if what == 5 {
                store.update(&key, &patch, &call_id).await
            } else {
                let v = store.get(&key).await.unwrap().map_or(1, |d| d.version);
                store.update_if(&key, &patch, v, &call_id).await
            };
            if let Err(err) = &got
                && !matches!(err, Error::Conflict { .. } | Error::Unavailable { .. })
            {
                tally.wrong.push(format!("{call_id} on shared {id}: {err}"));
            }
            tally.shared.push((id, call_id.clone(), answer(&got)));
            (answer(&got), false)
        } else {
            let id = format!("k{}", rng.next(2));
            let key = Key::new(&site, "churn", &id).unwrap();
            let (kind, got) = match rng.next(3) {
                0 => {
                    let got = store
                        .create(&key, obj(json!({"by": call_id.clone()})), &call_id)
                        .await;
                    if let Err(err) = &got
                        && !matches!(err, Error::AlreadyExists | Error::Unavailable { .. })
                    {
                        tally.wrong.push(format!("{call_id} create {id}: {err}"));
                    }
                    let answer = answer(&got);
                    ("create", answer)
                }
                1 => match store.delete(&key).await {
                    Ok(true) => ("delete", Answer::Done),
                    Ok(false) => ("delete", Answer::Refused),
                    Err(Error::Unavailable { .. }) => ("delete", Answer::Unknown),
                    Err(err) => {
                        tally.wrong.push(format!("{call_id} delete {id}: {err}"));
                        ("delete", Answer::Refused)
                    }
                },
                _ => {
                    let v = store.get(&key).await.unwrap().map_or(1, |d| d.version);
                    let got = store.delete_if(&key, v).await;
                    if let Err(err) = &got
                        && !matches!(
                            err,
                            Error::NotFound { .. }
                                | Error::Conflict { .. }
                                | Error::Unavailable { .. }
                        )
                    {
                        tally.wrong.push(format!("{call_id} delete_if {id}: {err}"));
                    }
                    ("delete", answer(&got))
                }
            };
            tally.churn.push((id, call_id.clone(), kind, got));
            (got, false)
        };
        let lost = faults.injected().len() > lost_before;
        tally.calls += 1;
        tally.calls_with_a_loss += usize::from(lost);
        if answer == Answer::Unknown {
            tally.unknown += 1;
            if !lost || (owned && tokens) {
                tally.wrong.push(format!(
                    "{call_id}: Unavailable without a reason (lost: {lost}, own document: {owned})"
                ));
            }
        }
    }
    // The task's own documents are exactly the model.
    for i in 0..3 {
        let id = format!("o{i}");
        let stored = store
            .get(&Key::new(&site, &own, &id).unwrap())
            .await
            .unwrap()
            .map(|d| doc_shape(&d));
        if stored.as_ref() != model.get(&id) {
            tally.wrong.push(format!(
                "task {task} {id}: stored {stored:?}, model {:?}",
                model.get(&id)
            ));
        }
    }
    tally
}

/// 16 tasks write at once, 30 % of their write answers lost (500s and dropped connections),
/// on their own documents, on shared documents and on ids that are created and deleted by
/// everyone. Compared with a model at the end: no false error, no lost write, no double
/// application, counters equal to the documents, and `Unavailable` only where the design
/// says (a call whose answer was lost, on a document others wrote to in the window).
async fn concurrent_writers_with_losses_match_the_model(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    const TASKS: u64 = 16;
    const OPS: usize = 30;
    for seed in [0xc0ffee_u64, 0xbadcafe] {
        let table = ensure_table(cell, emulator, "lost").await;
        let site = site("model");
        let clean = Store::new(store_on(
            emulator.client(),
            emulator.streams(),
            &table,
            10_000,
            StoreOptions::default(),
        ));
        for i in 0..3 {
            let key = Key::new(&site, "shared", format!("s{i}")).unwrap();
            clean
                .create(&key, obj(json!({"marks": {}})), "init")
                .await
                .unwrap();
        }
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let faults = Faults::default();
                faults.lose_randomly(0.3, seed ^ ((task + 1) * 0x9e37_79b9));
                let store = Store::new(lossy_store(
                    emulator,
                    emulator.faulty_client(&faults),
                    &table,
                ));
                let site = site.clone();
                let tokens = emulator.honours_request_tokens();
                tokio::spawn(task_run(
                    tokens,
                    store,
                    faults,
                    site,
                    task,
                    seed + task,
                    OPS,
                ))
            })
            .collect();
        let mut all = Tally::default();
        for task in tasks {
            let tally = task.await.unwrap();
            all.calls += tally.calls;
            all.calls_with_a_loss += tally.calls_with_a_loss;
            all.unknown += tally.unknown;
            all.wrong.extend(tally.wrong);
            all.shared.extend(tally.shared);
            all.churn.extend(tally.churn);
        }
        let mut lost_writes = 0;
        let mut double_applied = 0;
        // Shared documents: every update that said done is there once, every refused one
        // is not, and each applied update moved the version by exactly one.
        for i in 0..3 {
            let id = format!("s{i}");
            let doc = clean
                .get(&Key::new(&site, "shared", &id).unwrap())
                .await
                .unwrap()
                .unwrap();
            let marks = doc.data["marks"].as_object().unwrap();
            for (key, call, answer) in all.shared.iter().filter(|(k, _, _)| *k == id) {
                match answer {
                    Answer::Done if !marks.contains_key(call) => {
                        lost_writes += 1;
                        all.wrong
                            .push(format!("{call} on {key}: done but not there"));
                    }
                    Answer::Refused if marks.contains_key(call) => {
                        all.wrong
                            .push(format!("{call} on {key}: refused but applied"));
                    }
                    _ => {}
                }
            }
            if doc.version != 1 + marks.len() as u64 {
                double_applied += doc.version - 1 - marks.len() as u64;
                all.wrong.push(format!(
                    "{id}: version {} after {} applied updates",
                    doc.version,
                    marks.len()
                ));
            }
        }
        // Churned ids: creations that said done, less deletions that said done, is whether
        // a document is there, give or take the calls that could not tell.
        for i in 0..2 {
            let id = format!("k{i}");
            let doc = clean
                .get(&Key::new(&site, "churn", &id).unwrap())
                .await
                .unwrap();
            let count = |kind: &str, answer: Answer| {
                all.churn
                    .iter()
                    .filter(|(k, _, c, a)| *k == id && *c == kind && *a == answer)
                    .count() as i64
            };
            let balance = i64::from(doc.is_some()) - count("create", Answer::Done)
                + count("delete", Answer::Done);
            let (may_create, may_delete) = (
                count("create", Answer::Unknown),
                count("delete", Answer::Unknown),
            );
            if !(-may_delete..=may_create).contains(&balance) {
                all.wrong.push(format!(
                    "{id}: {} creates and {} deletes said done, {may_create}/{may_delete} \
                     could not tell, and the document is {}",
                    count("create", Answer::Done),
                    count("delete", Answer::Done),
                    if doc.is_some() { "there" } else { "gone" }
                ));
            }
            if let Some(doc) = doc {
                let creator = all
                    .churn
                    .iter()
                    .find(|(k, c, kind, _)| *k == id && *c == doc.created_by && *kind == "create");
                if !matches!(creator, Some((_, _, _, Answer::Done | Answer::Unknown))) {
                    all.wrong
                        .push(format!("{id}: created by {creator:?}, which was refused"));
                }
            }
        }
        let recount = clean.recount(&site, RecountMode::Report).await.unwrap();
        println!(
            "{emulator:?} seed {seed:#x}: {} calls, {} with a lost answer, {} Unavailable \
             ({:.1} % of the calls with a loss), {} wrong, {lost_writes} lost writes, \
             {double_applied} double applications, counter differences {:?}",
            all.calls,
            all.calls_with_a_loss,
            all.unknown,
            100.0 * all.unknown as f64 / all.calls_with_a_loss.max(1) as f64,
            all.wrong.len(),
            recount.changes
        );
        assert!(all.wrong.is_empty(), "{:#?}", all.wrong);
        assert_eq!(recount.changes, vec![], "counters equal the documents");
        // The design's prediction: the shared documents are only updated, never deleted, and
        // far fewer than 15 writes fit between a lost attempt and its resend, so the history
        // settles every update there. With the client request token honoured, every create
        // and delete is settled too: no `Unavailable` at all. Without it (moto), only creates
        // and deletes whose proof was displaced may answer it.
        let shared_unknown = all
            .shared
            .iter()
            .filter(|(_, _, a)| *a == Answer::Unknown)
            .count();
        assert_eq!(shared_unknown, 0, "updates settled by the history");
        if emulator.honours_request_tokens() {
            assert_eq!(all.unknown, 0, "every lost answer settled");
        }
        assert!(all.calls_with_a_loss >= 60, "the run lost answers");
    }
}

/// The caller's write identity is the one the item keeps: a call whose answer the SDK lost
/// (and settled itself), made again by the app with the same identity — after a crash before
/// it saw the answer, say — gets the first outcome: never `AlreadyExists` or a second version
/// step, and a delete made again spares a document created since.
async fn app_retries_with_a_write_id_get_the_first_outcome(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    let s = Setup::new(emulator, cell).await;
    let key = s.key("a");
    let id = WriteId::random();
    s.lose(&s.counted("PutItem"), Loss::ServerError);
    let data = obj(json!({"n": 1}));
    let first = s
        .lossy
        .create(&key, data.clone(), "c")
        .write_id(id.clone())
        .await
        .unwrap();
    let again = s.clean.create(&key, data, "c").write_id(id).await.unwrap();
    assert_eq!(again, first, "create");

    let id = WriteId::random();
    s.lose("PutItem", Loss::Dropped);
    let patch = obj(json!({"u": 1}));
    let first = s
        .lossy
        .update(&key, &patch, "u")
        .write_id(id.clone())
        .await
        .unwrap();
    s.clean
        .update(&key, &obj(json!({"other": 1})), "o")
        .await
        .unwrap();
    let again = s
        .clean
        .update(&key, &patch, "u")
        .write_id(id)
        .await
        .unwrap();
    assert_eq!(
        (first.version, again.version),
        (2, 3),
        "update: applied once"
    );
    assert_eq!(again.data, obj(json!({"n": 1, "u": 1, "other": 1})));

    let id = WriteId::random();
    s.lose("PutItem", Loss::ServerError);
    let patch = obj(json!({"i": 1}));
    let first = s
        .lossy
        .update_if(&key, &patch, 3, "i")
        .write_id(id.clone())
        .await
        .unwrap();
    let again = s
        .clean
        .update_if(&key, &patch, 3, "i")
        .write_id(id)
        .await
        .unwrap();
    assert_eq!(again, first, "update_if: not a Conflict with its own write");

    let id = WriteId::random();
    // A delete with a caller identity goes with its record, in a transaction.
    s.lose("TransactWriteItems", Loss::ServerError);
    assert!(s.lossy.delete(&key).write_id(id.clone()).await.unwrap());
    s.clean
        .create(&key, obj(json!({"new": 1})), "n")
        .await
        .unwrap();
    assert!(s.clean.delete(&key).write_id(id).await.unwrap(), "delete");
    assert_eq!(s.stored("a").await.unwrap().data, obj(json!({"new": 1})));
    s.assert_lost(4);
    s.assert_counters_exact("app retries").await;
}

/// The change feed of writes whose answers were lost: read from the oldest record and
/// replayed into an empty store (a table of its own: this crate's tests do not depend on the
/// memory backend), it rebuilds the source's documents exactly, and each document's changes
/// are one valid history — every create at version 1 on a free id, every update one version
/// on, every delete of the version standing — so no (key, version) comes twice: a resend
/// recognised as its own gives no second change, and a lost answer no missing one.
async fn a_replica_from_the_feed_of_lost_answers_equals_the_source(
    emulator: Emulator,
    _shared: &'static OnceCell<String>,
) {
    // A table of its own: the feed is read from the stream's start, which on the shared
    // table holds every other case's writes.
    static OWN_DYNOXIDE: OnceCell<String> = OnceCell::const_new();
    static OWN_MOTO: OnceCell<String> = OnceCell::const_new();
    let cell = match emulator {
        Emulator::Dynoxide => &OWN_DYNOXIDE,
        Emulator::Moto => &OWN_MOTO,
    };
    for mode in MODES {
        let s = Setup::with_mode(emulator, cell, mode).await;
        s.faults.lose_randomly(0.3, 0x5eed_0003);
        for op in ops(0x5eed_0003, 150) {
            apply(&s.lossy, &s.site, &op, true).await;
        }
        let injected = s.faults.injected();
        assert!(
            injected.len() >= 10,
            "{mode:?}: too few losses: {}",
            injected.len()
        );

        let scope = docstore::feed::FeedScope::site(&s.site).unwrap();
        let mut start = docstore::FeedStart::Oldest;
        let mut changes = Vec::new();
        for _ in 0..100 {
            let page = s.clean.changes(&scope, &start, 37).await.unwrap();
            if let Some(last) = page.changes.last() {
                start = docstore::FeedStart::After(last.cursor.clone());
            }
            let done = page.caught_up && page.changes.is_empty();
            changes.extend(page.changes);
            if done {
                break;
            }
        }

        assert!(changes.len() >= 50, "{mode:?}: {} changes", changes.len());
        let mut standing: std::collections::HashMap<String, u64> = Default::default();
        for change in &changes {
            let id = change.key.id().to_owned();
            let at = format!("{mode:?}: {} {} v{}", id, change.kind, change.version);
            match change.kind {
                docstore::ChangeKind::Created => {
                    assert_eq!(standing.get(&id), None, "{at}: created over a document");
                    assert_eq!(change.version, 1, "{at}");
                }
                docstore::ChangeKind::Updated => {
                    assert_eq!(standing.get(&id), Some(&(change.version - 1)), "{at}");
                }
                docstore::ChangeKind::Deleted => {
                    assert_eq!(standing.get(&id), Some(&change.version), "{at}");
                }
                docstore::ChangeKind::Existing => panic!("{at}: a feed read from the oldest"),
                docstore::ChangeKind::Expired => panic!("{at}: nothing here expires"),
            }
            match change.kind {
                docstore::ChangeKind::Deleted | docstore::ChangeKind::Expired => {
                    standing.remove(&id)
                }
                _ => standing.insert(id, change.version),
            };
        }

        let table = support::fresh_table("replica");
        let replica = store_on(
            emulator.client(),
            emulator.streams(),
            &table,
            10_000,
            StoreOptions::default(),
        );
        replica.create_table().await.unwrap();
        let replica = Store::new(replica);
        for change in &changes {
            replica.replay(change).await.unwrap();
        }
        for id in 0..6 {
            let key = s.key(&format!("d{id}"));
            let source = s.clean.get(&key).await.unwrap();
            assert_eq!(replica.get(&key).await.unwrap(), source, "{mode:?}: d{id}");
            assert_eq!(
                standing.get(key.id()).copied(),
                source.map(|d| d.version),
                "{mode:?}: d{id}: the feed's last change is the document"
            );
        }
    }
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
    every_write_succeeds_once,
    a_lost_answer_then_throttled_resends_count_as_applied,
    app_retries_with_a_write_id_get_the_first_outcome,
    own_writes_are_recognised_after_other_writers,
    create_after_delete_and_recreate,
    batches_succeed_once_after_a_lost_answer,
    get_many_asks_again_for_unprocessed_keys,
    counter_answers_are_not_counted_twice,
    real_refusals_stay_refusals,
    failures_map_to_their_kinds,
    racing_writers_with_losses_never_both_win,
    random_writes_match_a_run_without_losses,
    concurrent_writers_with_losses_match_the_model,
    a_replica_from_the_feed_of_lost_answers_equals_the_source,
);
