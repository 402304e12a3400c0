//! Unique indexes on DynamoDB (`docs/contract.md`, "Unique indexes"): guard items written in
//! the document's own `TransactWriteItems` refuse a second holder on every write path, free
//! a value when it changes or its document goes, move values inside a batch, count against a
//! batch's 100 actions, never show as documents, hold under 16 racing writers and under lost
//! answers, and are written by an index build that refuses documents sharing a value. Run
//! on both emulators.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use docstore::UniqueProblem;
use docstore::batch::Write;
use docstore::index::{Index, IndexSet};
use docstore::{Error, Key, RecountMode, Store, StoreOptions};
use docstore_dynamodb::{DynamoStore, IndexState};
use serde_json::{Value, json};
use support::faults::{Faults, Loss};
use support::{Emulator, fresh_table, obj, site};
use tokio::sync::OnceCell;

static DYNOXIDE: OnceCell<String> = OnceCell::const_new();
static MOTO: OnceCell<String> = OnceCell::const_new();

/// `users.by_email(email) unique` and `users.by_team_role(team, role) unique`.
fn options() -> StoreOptions {
    StoreOptions::default().with_indexes(
        IndexSet::new([
            Index::parse("users", "by_email", ["email"])
                .unwrap()
                .unique(),
            Index::parse("users", "by_team_role", ["team", "role"])
                .unwrap()
                .unique(),
        ])
        .unwrap(),
    )
}

/// A store (default client) on the binary's table made with [`options`]' indexes.
async fn store(emulator: Emulator, cell: &'static OnceCell<String>) -> Store {
    let table = cell
        .get_or_init(|| async {
            let table = fresh_table("uniq");
            let driver = DynamoStore::from_client(
                emulator.client(),
                emulator.streams(),
                &support::config_for(emulator, &table),
                options(),
            )
            .unwrap();
            driver.create_table().await.unwrap();
            table
        })
        .await;
    Store::new(
        DynamoStore::from_client(
            emulator.client(),
            emulator.streams(),
            &support::config_for(emulator, table),
            options(),
        )
        .unwrap(),
    )
}

fn key(site: &str, id: &str) -> Key {
    Key::new(site, "users", id).unwrap()
}

/// The holder a refusal names, or a panic naming what came instead.
fn holder(result: docstore::Result<impl std::fmt::Debug>, index: &str, value: Value) -> String {
    match result {
        Err(Error::UniqueViolation {
            index: got_index,
            value: got_value,
            holder,
        }) => {
            assert_eq!((got_index.as_str(), got_value), (index, value));
            holder
        }
        other => panic!("expected a unique violation of {index}, got {other:?}"),
    }
}

/// Every write path refuses a value another document holds, changes nothing when it does,
/// and lets a document write its own value again; changing the field or deleting the
/// document frees the value; missing and `null` fields claim nothing.
async fn every_path_refuses_a_held_value(emulator: Emulator, cell: &'static OnceCell<String>) {
    let store = store(emulator, cell).await;
    let site = site("uniq");
    let ann = obj(json!({"email": "ann@x", "team": 1, "role": "lead"}));
    store
        .create(&key(&site, "u1"), ann.clone(), "t")
        .await
        .unwrap();
    let email = || json!("ann@x");
    let taken = store.create(&key(&site, "u2"), ann.clone(), "t").await;
    assert_eq!(holder(taken, "by_email", email()), "u1");
    assert_eq!(store.get(&key(&site, "u2")).await.unwrap(), None);
    assert_eq!(store.count(&site).await.unwrap(), 1);
    let put = store
        .put(&key(&site, "u2"), obj(json!({"email": "ann@x"})), "t")
        .await;
    assert_eq!(holder(put, "by_email", email()), "u1");
    let bob = store
        .create(&key(&site, "u2"), obj(json!({"email": "bob@x"})), "t")
        .await
        .unwrap();
    let update = store
        .update(&key(&site, "u2"), &obj(json!({"email": "ann@x"})), "t")
        .await;
    assert_eq!(holder(update, "by_email", email()), "u1");
    let team = store
        .update_if(
            &key(&site, "u2"),
            &obj(json!({"team": 1, "role": "lead"})),
            1,
            "t",
        )
        .await;
    assert_eq!(holder(team, "by_team_role", json!([1, "lead"])), "u1");
    let replace = store
        .replace_if(&key(&site, "u2"), obj(json!({"email": "ann@x"})), 1, "t")
        .await;
    assert_eq!(holder(replace, "by_email", email()), "u1");
    assert_eq!(store.get(&key(&site, "u2")).await.unwrap(), Some(bob));
    let restored = docstore::Document::first("u3", obj(json!({"email": "ann@x"})), "t", 5);
    let restore = store.restore(&key(&site, "u3"), &restored).await;
    assert_eq!(holder(restore, "by_email", email()), "u1");

    // Its own value again, other fields changed: no guard touched, no refusal.
    store
        .update(&key(&site, "u1"), &obj(json!({"note": "hi"})), "t")
        .await
        .unwrap();
    store
        .put(&key(&site, "u1"), ann.clone(), "t")
        .await
        .unwrap();
    // Changing the field frees the old value; deleting the document frees its values.
    store
        .update(&key(&site, "u1"), &obj(json!({"email": "ann2@x"})), "t")
        .await
        .unwrap();
    store
        .update(&key(&site, "u2"), &obj(json!({"email": "ann@x"})), "t")
        .await
        .unwrap();
    store.delete(&key(&site, "u1")).await.unwrap();
    store
        .create(
            &key(&site, "u4"),
            obj(json!({"team": 1, "role": "lead"})),
            "t",
        )
        .await
        .unwrap();
    // Missing and null fields are not constrained.
    for id in ["n1", "n2"] {
        let data = obj(json!({"email": null, "team": 1}));
        store.create(&key(&site, id), data, "t").await.unwrap();
    }
    assert_eq!(store.count(&site).await.unwrap(), 4);
    // Guards are no collection of the site, and the counters agree with the documents.
    assert_eq!(
        store.collections(&site).await.unwrap(),
        vec![("users".to_owned(), 4)]
    );
    let recount = store
        .recount(&site, docstore::RecountMode::Report)
        .await
        .unwrap();
    assert_eq!(recount.changes, vec![]);
}

/// Batches move and swap values, refuse two claims of one value at the first such write, and
/// refuse a value held outside at the claiming write's position.
async fn batches_move_swap_and_refuse(emulator: Emulator, cell: &'static OnceCell<String>) {
    let store = store(emulator, cell).await;
    let site = site("uniqb");
    for (id, email) in [("a", "x"), ("b", "y"), ("h", "held")] {
        let data = obj(json!({ "email": email }));
        store.create(&key(&site, id), data, "t").await.unwrap();
    }
    let email = |e: &str| obj(json!({ "email": e }));
    // Swap a and b.
    store
        .write_all(
            &[
                Write::update(key(&site, "a"), email("y")),
                Write::update(key(&site, "b"), email("x")),
            ],
            "t",
        )
        .await
        .unwrap();
    // Move x from b (deleted) to c (created).
    store
        .write_all(
            &[
                Write::create(key(&site, "c"), email("x")),
                Write::delete_if(key(&site, "b"), 2),
            ],
            "t",
        )
        .await
        .unwrap();
    // Two writes claiming one value: the first is refused, naming the second.
    let twice = store
        .write_all(
            &[
                Write::create(key(&site, "d"), email("z")),
                Write::create(key(&site, "e"), email("z")),
            ],
            "t",
        )
        .await;
    match twice {
        Err(Error::Batch { index: 0, source }) => {
            assert_eq!(holder(Err::<(), _>(*source), "by_email", json!("z")), "e");
        }
        other => panic!("{other:?}"),
    }
    // A value held outside the batch: refused at the claiming write, nothing written.
    let outside = store
        .write_all(
            &[
                Write::create(key(&site, "f"), email("free")),
                Write::create(key(&site, "g"), email("held")),
            ],
            "t",
        )
        .await;
    match outside {
        Err(Error::Batch { index: 1, source }) => {
            assert_eq!(
                holder(Err::<(), _>(*source), "by_email", json!("held")),
                "h"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(&key(&site, "f")).await.unwrap(), None);
    let stored = |id: &'static str| {
        let store = store.clone();
        let site = site.clone();
        async move {
            store
                .get(&key(&site, id))
                .await
                .unwrap()
                .map(|d| d.data["email"].clone())
        }
    };
    assert_eq!(stored("a").await, Some(json!("y")));
    assert_eq!(stored("c").await, Some(json!("x")));
    assert_eq!(stored("b").await, None);
    // The freed value f wanted is still free.
    store
        .create(&key(&site, "f"), email("free"), "t")
        .await
        .unwrap();
}

/// A batch's guards count against the 100 actions of its transaction: 50 creates claiming
/// two values each need 150 and are refused with `InvalidArgument` naming the count.
async fn guards_count_in_the_batch_limit(emulator: Emulator, cell: &'static OnceCell<String>) {
    let store = store(emulator, cell).await;
    let site = site("uniql");
    let writes = |n: usize| -> Vec<Write> {
        (0..n)
            .map(|i| {
                let data = obj(json!({"email": format!("{i}@x"), "team": i, "role": "r"}));
                Write::create(key(&site, &format!("d{i}")), data)
            })
            .collect()
    };
    match store.write_all(&writes(50), "t").await {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("100 unique-index guards"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.count(&site).await.unwrap(), 0);
    // 25 writes with 50 guards and their (at most 25) counter shards fit.
    store.write_all(&writes(25), "t").await.unwrap();
    assert_eq!(store.count(&site).await.unwrap(), 25);
}

/// 16 tasks creating documents with one value: exactly one wins, the others name it; then
/// 16 tasks updating 16 other documents to one value: exactly one wins.
async fn racing_writers_leave_one_holder(emulator: Emulator, cell: &'static OnceCell<String>) {
    let store = store(emulator, cell).await;
    let site = site("uniqr");
    let racers = |ids: Vec<String>, update: bool| {
        let tasks: Vec<_> = ids
            .into_iter()
            .map(|id| {
                let (store, key) = (store.clone(), key(&site, &id));
                tokio::spawn(async move {
                    let data = obj(json!({"email": "race@x"}));
                    match update {
                        true => store.update(&key, &data, "t").await.map(|_| id),
                        false => store.create(&key, data, "t").await.map(|_| id),
                    }
                })
            })
            .collect();
        futures_util::future::join_all(tasks)
    };
    let results = racers((0..16).map(|i| format!("c{i:02}")).collect(), false).await;
    let (won, lost) = outcomes(results);
    assert_eq!(won.len(), 1, "{won:?}");
    assert!(lost.iter().all(|holder| *holder == won[0]), "{lost:?}");
    store.delete(&key(&site, &won[0])).await.unwrap();
    for i in 0..16 {
        let data = obj(json!({"email": format!("own{i}@x")}));
        store
            .create(&key(&site, &format!("u{i:02}")), data, "t")
            .await
            .unwrap();
    }
    let results = racers((0..16).map(|i| format!("u{i:02}")).collect(), true).await;
    let (won, lost) = outcomes(results);
    assert_eq!(won.len(), 1, "{won:?}");
    assert!(lost.iter().all(|holder| *holder == won[0]), "{lost:?}");
}

/// The winners and the holders the losers were refused with.
fn outcomes(
    results: Vec<Result<docstore::Result<String>, tokio::task::JoinError>>,
) -> (Vec<String>, Vec<String>) {
    let mut won = Vec::new();
    let mut lost = Vec::new();
    for result in results {
        match result.unwrap() {
            Ok(id) => won.push(id),
            Err(Error::UniqueViolation { holder, .. }) => lost.push(holder),
            Err(other) => panic!("{other}"),
        }
    }
    (won, lost)
}

/// A write whose answer is lost is resent by the SDK: the resend meets its own committed
/// guard and document and reports success, never a violation of its own value.
async fn a_resend_is_not_refused_by_its_own_guard(
    emulator: Emulator,
    cell: &'static OnceCell<String>,
) {
    let clean = store(emulator, cell).await;
    let table = cell.get().unwrap();
    let faults = Faults::default();
    let lossy = Store::new(
        DynamoStore::from_client(
            emulator.faulty_client(&faults),
            emulator.streams(),
            &support::config_for(emulator, table),
            options().with_retry(docstore::retry::RetryPolicy::NONE),
        )
        .unwrap(),
    );
    let site = site("uniqlost");
    for loss in [Loss::ServerError, Loss::Dropped] {
        let id = format!("{loss:?}");
        let data = obj(json!({ "email": format!("{id}@x") }));
        faults.lose_next("TransactWriteItems", loss);
        let created = lossy.create(&key(&site, &id), data.clone(), "t").await;
        assert_eq!(created.unwrap().version, 1, "{loss:?} create");
        faults.lose_next("TransactWriteItems", loss);
        let moved = obj(json!({ "email": format!("{id}-2@x") }));
        let updated = lossy.update(&key(&site, &id), &moved, "t").await;
        assert_eq!(updated.unwrap().version, 2, "{loss:?} update");
        // The old value is free, the new one held.
        clean
            .create(&key(&site, &format!("{id}-other")), data, "t")
            .await
            .unwrap();
        let taken = clean.create(&key(&site, "late"), moved.clone(), "t").await;
        assert_eq!(holder(taken, "by_email", moved["email"].clone()), id);

        // A batch moving the value to a new document, and a delete freeing the other's.
        let batch_id = format!("{id}-batch");
        faults.lose_next("TransactWriteItems", loss);
        let batch = lossy
            .write_all(
                &[
                    Write::create(key(&site, &batch_id), moved.clone()),
                    Write::delete_if(key(&site, &id), 2),
                ],
                "t",
            )
            .await;
        batch.unwrap_or_else(|e| panic!("{loss:?} batch: {e}"));
        faults.lose_next("TransactWriteItems", loss);
        let other = format!("{id}-other");
        assert!(lossy.delete(&key(&site, &other)).await.unwrap(), "{loss:?}");
        let taken = clean.create(&key(&site, "late"), moved.clone(), "t").await;
        assert_eq!(holder(taken, "by_email", moved["email"].clone()), batch_id);
        let freed = obj(json!({ "email": format!("{id}@x") }));
        clean
            .create(&key(&site, &format!("{id}-new")), freed, "t")
            .await
            .unwrap();
    }
    assert_eq!(faults.injected().len(), 8, "{:?}", faults.injected());
}

/// With fast counters a write that claims or gives up a value is a transaction without the
/// counter, which moves right after it: counts stay exact.
async fn fast_counters_count_guarded_writes(emulator: Emulator, cell: &'static OnceCell<String>) {
    store(emulator, cell).await;
    let table = cell.get().unwrap();
    let config = docstore::config::DynamoDbConfig {
        counters: docstore::config::CounterMode::Fast,
        ..support::config_for(emulator, table)
    };
    let fast = Store::new(
        DynamoStore::from_client(emulator.client(), emulator.streams(), &config, options())
            .unwrap(),
    );
    let site = site("uniqfast");
    for id in ["a", "b"] {
        let data = obj(json!({ "email": format!("{id}@x") }));
        fast.create(&key(&site, id), data, "t").await.unwrap();
    }
    let taken = fast
        .put(&key(&site, "c"), obj(json!({"email": "a@x"})), "t")
        .await;
    assert_eq!(holder(taken, "by_email", json!("a@x")), "a");
    fast.put(&key(&site, "c"), obj(json!({"email": "c@x"})), "t")
        .await
        .unwrap();
    assert!(fast.delete(&key(&site, "a")).await.unwrap());
    fast.create(&key(&site, "d"), obj(json!({"email": "a@x"})), "t")
        .await
        .unwrap();
    assert_eq!(fast.count(&site).await.unwrap(), 3);
    let recount = fast.recount(&site, RecountMode::Report).await.unwrap();
    assert_eq!(recount.changes, vec![]);
}

/// `build_index` of a unique index over stored documents writes their guards and enforces the
/// index; documents sharing a value make it refuse, naming them, and leave it unbuilt.
async fn a_build_writes_guards_and_refuses_duplicates(
    emulator: Emulator,
    _cell: &'static OnceCell<String>,
) {
    let table = fresh_table("uniqbuild");
    let config = support::config_for(emulator, &table);
    let plain = DynamoStore::from_client(
        emulator.client(),
        emulator.streams(),
        &config,
        StoreOptions::default(),
    )
    .unwrap();
    plain.create_table().await.unwrap();
    let plain = Store::new(plain);
    let site = site("uniqbuild");
    for (id, email, nick) in [
        ("a", "x", "n1"),
        ("b", "y", "n2"),
        ("c", "z", "n2"),
        ("d", "w", "n2"),
    ] {
        let data = obj(json!({"email": email, "nick": nick}));
        plain.create(&key(&site, id), data, "t").await.unwrap();
    }
    let admin = DynamoStore::from_client(
        emulator.client(),
        emulator.streams(),
        &config,
        StoreOptions::default(),
    )
    .unwrap();
    let by_email = Index::parse("users", "by_email", ["email"])
        .unwrap()
        .unique();
    let declaring = |index: &Index| {
        Store::new(
            DynamoStore::from_client(
                emulator.client(),
                emulator.streams(),
                &config,
                StoreOptions::default().with_indexes(IndexSet::new([index.clone()]).unwrap()),
            )
            .unwrap(),
        )
    };
    // Declared unique but not on the table yet: writes of the collection are refused, not
    // left unguarded.
    let unheld = declaring(&by_email)
        .create(&key(&site, "e"), obj(json!({"email": "y"})), "t")
        .await;
    match unheld {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("does not hold"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // A guard left naming b for a's value (as a guard written by a lost-and-recreated index
    // would): the build sees b does not claim it and takes it over for a.
    let stale = stale_guard(&site, &by_email, json!({"email": "x"}), "b");
    emulator
        .client()
        .put_item()
        .table_name(&table)
        .set_item(Some(stale))
        .send()
        .await
        .unwrap();
    admin.add_index(&by_email).await.unwrap();
    let built = admin
        .build_index("users", "by_email", |_| {})
        .await
        .unwrap();
    assert_eq!(built.state, IndexState::Built);
    assert!(built.index.unique);
    let taken = declaring(&by_email)
        .create(&key(&site, "e"), obj(json!({"email": "y"})), "t")
        .await;
    assert_eq!(holder(taken, "by_email", json!("y")), "b");
    let taken = declaring(&by_email)
        .create(&key(&site, "e"), obj(json!({"email": "x"})), "t")
        .await;
    assert_eq!(holder(taken, "by_email", json!("x")), "a");

    let by_nick = Index::parse("users", "by_nick", ["nick"]).unwrap().unique();
    admin.add_index(&by_nick).await.unwrap();
    match admin.build_index("users", "by_nick", |_| {}).await {
        Err(Error::InvalidArgument(message)) => {
            assert!(
                message.contains("2 pairs of documents share a value"),
                "{message}"
            );
            for id in ["b", "c", "d"] {
                assert!(message.contains(&format!("{site}/users/{id}")), "{message}");
            }
        }
        other => panic!("{other:?}"),
    }
    let listed = admin.list_indexes().await.unwrap();
    let nick = listed.iter().find(|i| i.index.name == "by_nick").unwrap();
    assert_eq!(nick.state, IndexState::Building);
    // Dropping a unique index deletes its guards (the build wrote some before refusing).
    let nick_guards = |guards: Vec<(String, String, String)>| {
        guards
            .into_iter()
            .filter(|g| g.1.starts_with("users#by_nick#"))
            .count()
    };
    assert!(nick_guards(guard_items(emulator, &table, &site).await) > 0);
    admin.drop_index("users", "by_nick").await.unwrap();
    assert_eq!(nick_guards(guard_items(emulator, &table, &site).await), 0);
    // Declaring it non-unique where the table holds it unique is refused.
    let contradicting = DynamoStore::from_client(
        emulator.client(),
        emulator.streams(),
        &config,
        StoreOptions::default().with_indexes(
            IndexSet::new([Index::parse("users", "by_email", ["email"]).unwrap()]).unwrap(),
        ),
    )
    .unwrap();
    let err = Store::new(contradicting)
        .create(&key(&site, "f"), obj(json!({"email": "q"})), "t")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // Guards are no site's documents.
    assert_eq!(plain.sites().await.unwrap(), vec![site.clone()]);
    assert_eq!(plain.count(&site).await.unwrap(), 4);
}

/// The guard item of `data`'s value of `index` naming `holder`, as the crate docs lay it out
/// (computed here on its own, so a change to the layout fails the tests).
fn stale_guard(
    site: &str,
    index: &Index,
    data: Value,
    holder: &str,
) -> std::collections::HashMap<String, AttributeValue> {
    use sha2::{Digest, Sha256};
    let set = IndexSet::new([index.clone()]).unwrap();
    let compiled = &set.for_collection(&index.collection)[0];
    let claim = compiled
        .claim(&docstore::Document::first("any", obj(data), "", 0))
        .unwrap();
    let digest = Sha256::digest(&claim);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let spread = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    let pk = match spread % support::PARTITIONS {
        0 => format!("{site}#__unique"),
        p => format!("{site}#__unique#{p}"),
    };
    let sk = format!("{}#{}#{hex}", index.collection, index.name);
    std::collections::HashMap::from([
        ("pk".to_owned(), AttributeValue::S(pk)),
        ("sk".to_owned(), AttributeValue::S(sk)),
        ("holder".to_owned(), AttributeValue::S(holder.to_owned())),
    ])
}

/// The site's guard items (scanned with a plain client): (partition key, sort key, holder).
async fn guard_items(emulator: Emulator, table: &str, site: &str) -> Vec<(String, String, String)> {
    let text = |item: &std::collections::HashMap<String, AttributeValue>, name: &str| {
        item[name].as_s().unwrap().clone()
    };
    let mut found = Vec::new();
    let mut start = None;
    loop {
        let page = emulator
            .client()
            .scan()
            .table_name(table)
            .filter_expression("begins_with(pk, :guards)")
            .expression_attribute_values(":guards", AttributeValue::S(format!("{site}#__unique")))
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        for item in page.items() {
            found.push((text(item, "pk"), text(item, "sk"), text(item, "holder")));
        }
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return found,
        }
    }
}

/// `recount` (what `docstore fsck` runs) checks guards against documents: a missing guard is
/// written, an orphan deleted, and documents sharing a value (after a guard was removed
/// outside docstore) are reported and left alone; `check_unique` returns what it found.
async fn recount_checks_and_repairs_guards(emulator: Emulator, cell: &'static OnceCell<String>) {
    let store = store(emulator, cell).await;
    let table = cell.get().unwrap().clone();
    let site = site("uniqfsck");
    for (id, email) in [("m", "missing@x"), ("s1", "shared@x")] {
        let data = obj(json!({ "email": email }));
        store.create(&key(&site, id), data, "t").await.unwrap();
    }
    store
        .create(&key(&site, "gone"), obj(json!({"email": "gone@x"})), "t")
        .await
        .unwrap();
    let client = emulator.client();
    let delete_guard = |holder: &'static str| {
        let (client, table, site) = (client.clone(), table.clone(), site.clone());
        async move {
            let guards = guard_items(emulator, &table, &site).await;
            let (pk, sk, _) = guards.iter().find(|g| g.2 == holder).unwrap();
            client
                .delete_item()
                .table_name(&table)
                .key("pk", AttributeValue::S(pk.clone()))
                .key("sk", AttributeValue::S(sk.clone()))
                .send()
                .await
                .unwrap();
            (pk.clone(), sk.clone())
        }
    };
    // m's guard lost; s1's guard lost and s2 then takes the value; gone's document removed
    // without its guard.
    delete_guard("m").await;
    delete_guard("s1").await;
    store
        .create(&key(&site, "s2"), obj(json!({"email": "shared@x"})), "t")
        .await
        .unwrap();
    let gone = store.get(&key(&site, "gone")).await.unwrap().unwrap();
    let document_pk = support::document_pk(&site, "users", "gone");
    client
        .delete_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(document_pk))
        .key("sk", AttributeValue::S(gone.id.clone()))
        .send()
        .await
        .unwrap();

    let checker = DynamoStore::from_client(
        emulator.client(),
        emulator.streams(),
        &support::config_for(emulator, &table),
        options(),
    )
    .unwrap();
    let mut problems = checker
        .check_unique(&site, RecountMode::Report)
        .await
        .unwrap();
    problems.sort_by_key(|p| format!("{p:?}"));
    let expected = vec![
        UniqueProblem::Missing {
            collection: "users".into(),
            index: "by_email".into(),
            id: "m".into(),
        },
        UniqueProblem::Orphan {
            collection: "users".into(),
            index: "by_email".into(),
            holder: "gone".into(),
        },
        UniqueProblem::Shared {
            collection: "users".into(),
            index: "by_email".into(),
            ids: vec!["s1".into(), "s2".into()],
        },
    ];
    assert_eq!(problems, expected);
    // Report changes nothing; repair (through recount, as fsck --repair) fixes the first two.
    assert_eq!(
        checker
            .check_unique(&site, RecountMode::Report)
            .await
            .unwrap()
            .len(),
        3
    );
    store.recount(&site, RecountMode::Repair).await.unwrap();
    let left = checker
        .check_unique(&site, RecountMode::Report)
        .await
        .unwrap();
    assert_eq!(left, vec![expected[2].clone()]);
    // The repaired guards hold: m's value is refused again, gone's is free.
    let taken = store
        .create(&key(&site, "m2"), obj(json!({"email": "missing@x"})), "t")
        .await;
    assert_eq!(holder(taken, "by_email", json!("missing@x")), "m");
    store
        .create(&key(&site, "g2"), obj(json!({"email": "gone@x"})), "t")
        .await
        .unwrap();
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
    every_path_refuses_a_held_value,
    batches_move_swap_and_refuse,
    guards_count_in_the_batch_limit,
    racing_writers_leave_one_holder,
    a_resend_is_not_refused_by_its_own_guard,
    a_build_writes_guards_and_refuses_duplicates,
    recount_checks_and_repairs_guards,
    fast_counters_count_guarded_writes,
);
