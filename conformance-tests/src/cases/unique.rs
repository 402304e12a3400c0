//! Unique indexes (`docs/contract.md`, "Unique indexes"): one holder per value within a site's
//! collection, on every write path, atomically, under races and lost answers.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::index::{Index, IndexSet};
use docstore::{Data, Document, Error, FeedStart, Key, Store, StoreOptions, Write, WriteId};
use docstore_testing::{CallKind, Fault, FaultyDriver, Plan};
use serde_json::{Value, json};
use std::sync::Arc;

/// `users`: `by_email` (unique), `by_team_role` (unique over two fields), `by_age` (plain).
fn options() -> StoreOptions {
    StoreOptions::default().with_indexes(
        IndexSet::new([
            Index::parse("users", "by_email", ["email"])
                .unwrap()
                .unique(),
            Index::parse("users", "by_team_role", ["team", "-role"])
                .unwrap()
                .unique(),
            Index::parse("users", "by_age", ["age"]).unwrap(),
        ])
        .unwrap(),
    )
}

/// The case's store, or `None` on a backend that does not enforce unique indexes yet
/// ([`Capabilities::unique_indexes`](crate::Capabilities::unique_indexes): it refuses them,
/// which its own tests check).
async fn open(h: &dyn Harness, tag: &str) -> Option<Ctx> {
    if !h.capabilities().unique_indexes {
        return None;
    }
    Some(Ctx::with_options(h, tag, options()).await)
}

fn user(ctx: &Ctx, id: &str) -> Key {
    ctx.key("users", id)
}

/// Panics unless `result` is the refusal naming `index`, `value` and `holder`.
fn assert_refused<T: std::fmt::Debug>(
    result: docstore::Result<T>,
    index: &str,
    value: Value,
    holder: &str,
) {
    match result {
        Err(Error::UniqueViolation {
            index: i,
            value: v,
            holder: h,
        }) => assert_eq!((i.as_str(), v, h.as_str()), (index, value, holder)),
        other => panic!("expected UniqueViolation({index}, {holder}), got {other:?}"),
    }
}

async fn get(store: &Store, key: &Key) -> Option<Document> {
    store.get(key).await.unwrap()
}

/// Every single-document write path refuses a value another document holds, names the index,
/// the value and the holder, changes nothing and shows nothing on the feed.
pub async fn a_held_value_is_refused_on_every_write_path(h: &dyn Harness) {
    let Some(ctx) = open(h, "uniq-paths").await else {
        return;
    };
    let store = &ctx.store;
    let (a, b) = (user(&ctx, "a"), user(&ctx, "b"));
    store
        .create(&a, obj(json!({"email": "x"})), "")
        .await
        .unwrap();
    let b_doc = store
        .create(&b, obj(json!({"email": "y"})), "")
        .await
        .unwrap();
    let site = store.site(&ctx.site).unwrap();
    let before = site.changes(&FeedStart::Now, 1).await.unwrap().next;

    let taken = obj(json!({"email": "x", "age": 3}));
    assert_refused(
        store.create(&user(&ctx, "c"), taken.clone(), "").await,
        "by_email",
        json!("x"),
        "a",
    );
    assert_refused(
        store.put(&user(&ctx, "c"), taken.clone(), "").await,
        "by_email",
        json!("x"),
        "a",
    );
    assert_refused(
        store.put(&b, taken.clone(), "").await,
        "by_email",
        json!("x"),
        "a",
    );
    assert_refused(
        store.update(&b, &obj(json!({"email": "x"})), "").await,
        "by_email",
        json!("x"),
        "a",
    );
    assert_refused(
        store
            .update_if(&b, &obj(json!({"email": "x"})), 1, "")
            .await,
        "by_email",
        json!("x"),
        "a",
    );
    assert_refused(
        store.replace_if(&b, taken.clone(), 1, "").await,
        "by_email",
        json!("x"),
        "a",
    );
    let restored = Document::first("c", taken.clone(), "r", 1);
    assert_refused(
        store.restore(&user(&ctx, "c"), &restored).await,
        "by_email",
        json!("x"),
        "a",
    );
    let users = store.site(&ctx.site).unwrap().with_actor("app").unwrap();
    let users = users.collection::<Data>("users").unwrap();
    let modified = users
        .modify("b", |data| {
            data.insert("email".into(), json!("x"));
        })
        .await;
    assert_refused(modified, "by_email", json!("x"), "a");

    assert_eq!(get(store, &b).await, Some(b_doc));
    assert_eq!(get(store, &user(&ctx, "c")).await, None);
    assert_eq!(store.count(&ctx.site).await.unwrap(), 2);
    let after = site.changes(&FeedStart::After(before), 10).await.unwrap();
    assert!(
        after.changes.is_empty(),
        "refusals on the feed: {:?}",
        after.changes
    );
}

/// A document missing a field of the index, or holding null there, claims nothing; two
/// fields claim their tuple.
pub async fn missing_and_null_values_are_not_constrained(h: &dyn Harness) {
    let Some(ctx) = open(h, "uniq-null").await else {
        return;
    };
    let store = &ctx.store;
    for (id, data) in [
        ("a", json!({})),
        ("b", json!({})),
        ("c", json!({"email": null, "team": 1})),
        ("d", json!({"email": null, "team": 1, "role": null})),
        ("e", json!({"team": 1, "role": "dev"})),
        ("f", json!({"team": 2, "role": "dev"})),
        ("g", json!({"team": 1, "role": "ops"})),
    ] {
        store.create(&user(&ctx, id), obj(data), "").await.unwrap();
    }
    let clash = store
        .create(&user(&ctx, "h"), obj(json!({"team": 1, "role": "dev"})), "")
        .await;
    assert_refused(clash, "by_team_role", json!([1, "dev"]), "e");
    // A plain index constrains nothing.
    store
        .create(&user(&ctx, "i"), obj(json!({"age": 5})), "")
        .await
        .unwrap();
    store
        .create(&user(&ctx, "j"), obj(json!({"age": 5})), "")
        .await
        .unwrap();
    assert_eq!(store.count(&ctx.site).await.unwrap(), 9);
}

/// A document may write its own value again; changing the field or deleting the document
/// frees the value for another.
pub async fn values_are_kept_rewritten_and_released(h: &dyn Harness) {
    let Some(ctx) = open(h, "uniq-release").await else {
        return;
    };
    let store = &ctx.store;
    let (a, b, c) = (user(&ctx, "a"), user(&ctx, "b"), user(&ctx, "c"));
    store
        .create(&a, obj(json!({"email": "x"})), "")
        .await
        .unwrap();
    store
        .put(&a, obj(json!({"email": "x", "age": 1})), "")
        .await
        .unwrap();
    store.update(&a, &obj(json!({"age": 2})), "").await.unwrap();
    store
        .update(&a, &obj(json!({"email": "x2"})), "")
        .await
        .unwrap();
    store
        .create(&b, obj(json!({"email": "x"})), "")
        .await
        .unwrap();
    assert!(store.delete(&b).await.unwrap());
    store
        .create(&c, obj(json!({"email": "x"})), "")
        .await
        .unwrap();
    store
        .update(&c, &obj(json!({"email": null})), "")
        .await
        .unwrap();
    store
        .create(&b, obj(json!({"email": "x"})), "")
        .await
        .unwrap();
    assert_eq!(get(store, &b).await.unwrap().data["email"], json!("x"));
}

/// One value per site and collection; numbers are one value whatever their form.
pub async fn values_are_per_site_and_collection_and_equal_by_value(h: &dyn Harness) {
    let Some(ctx) = open(h, "uniq-scope").await else {
        return;
    };
    let Some(other) = open(h, "uniq-scope-other").await else {
        return;
    };
    let store = &ctx.store;
    store
        .create(&user(&ctx, "a"), obj(json!({"email": 1})), "")
        .await
        .unwrap();
    other
        .store
        .create(&user(&other, "a2"), obj(json!({"email": 1})), "")
        .await
        .unwrap();
    store
        .create(&ctx.key("admins", "a3"), obj(json!({"email": 1})), "")
        .await
        .unwrap();
    let float = store
        .create(&user(&ctx, "b"), obj(json!({"email": 1.0})), "")
        .await;
    assert_refused(float, "by_email", json!(1.0), "a");
    store
        .create(&user(&ctx, "b"), obj(json!({"email": "1"})), "")
        .await
        .unwrap();
}

/// A batch is judged as it leaves the documents: it may move and swap values; two of its
/// writes claiming one value, or one claiming a value held outside it, fail it whole.
pub async fn batches_judge_claims_as_they_leave_the_documents(h: &dyn Harness) {
    let Some(ctx) = open(h, "uniq-batch").await else {
        return;
    };
    let store = &ctx.store;
    let k = |id: &str| user(&ctx, id);
    store
        .create(&k("a"), obj(json!({"email": "x"})), "")
        .await
        .unwrap();
    store
        .create(&k("b"), obj(json!({"email": "y"})), "")
        .await
        .unwrap();

    let twice = [
        Write::create(k("c"), obj(json!({"email": "z"}))),
        Write::create(k("d"), obj(json!({"email": "z"}))),
    ];
    match store.write_all(&twice, "").await {
        Err(Error::Batch { index: 0, source }) => {
            assert_refused::<()>(Err(*source), "by_email", json!("z"), "d")
        }
        other => panic!("{other:?}"),
    }
    let outside = [
        Write::create(k("c"), obj(json!({"email": "w"}))),
        Write::put(k("d"), obj(json!({"email": "y"}))),
    ];
    match store.write_all(&outside, "").await {
        Err(Error::Batch { index: 1, source }) => {
            assert_refused::<()>(Err(*source), "by_email", json!("y"), "b")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.count(&ctx.site).await.unwrap(), 2, "nothing applied");

    let swap = [
        Write::update(k("a"), obj(json!({"email": "y"}))),
        Write::update(k("b"), obj(json!({"email": "x"}))),
    ];
    store.write_all(&swap, "").await.unwrap();
    let moved = [
        Write::create(k("c"), obj(json!({"email": "x"}))),
        Write::delete_if(k("b"), 2),
    ];
    store.write_all(&moved, "").await.unwrap();
    let email = |doc: Option<Document>| doc.map(|d| d.data["email"].clone());
    assert_eq!(email(get(store, &k("a")).await), Some(json!("y")));
    assert_eq!(email(get(store, &k("c")).await), Some(json!("x")));
    assert_eq!(get(store, &k("b")).await, None);
    // The moved values are held: outside the batch they are refused again.
    assert_refused(
        store.create(&k("e"), obj(json!({"email": "x"})), "").await,
        "by_email",
        json!("x"),
        "c",
    );
}

/// 16 tasks claiming one value — creates of different ids, then updates of different
/// documents — leave exactly one holder; every other call is refused naming it.
pub async fn racing_claims_have_one_holder(h: &dyn Harness) {
    const TASKS: usize = 16;
    let Some(ctx) = open(h, "uniq-race").await else {
        return;
    };
    let creates = (0..TASKS).map(|i| {
        let (store, key) = (ctx.store.clone(), user(&ctx, &format!("c{i:02}")));
        tokio::spawn(async move { store.create(&key, obj(json!({"email": "same"})), "").await })
    });
    let results = futures_util::future::join_all(creates).await;
    let won: Vec<_> = results.into_iter().map(|r| r.unwrap()).collect();
    let winner = one_winner(&won);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);

    for i in 0..TASKS {
        let key = user(&ctx, &format!("u{i:02}"));
        ctx.store
            .create(&key, obj(json!({"email": format!("own{i}")})), "")
            .await
            .unwrap();
    }
    let updates = (0..TASKS).map(|i| {
        let (store, key) = (ctx.store.clone(), user(&ctx, &format!("u{i:02}")));
        tokio::spawn(async move {
            store
                .update(&key, &obj(json!({"email": "other"})), "")
                .await
        })
    });
    let results = futures_util::future::join_all(updates).await;
    let updated: Vec<_> = results.into_iter().map(|r| r.unwrap()).collect();
    let holder = one_winner(&updated);
    let holders = ctx
        .store
        .query(
            &ctx.site,
            "users",
            &docstore::Query::parse(r#"email = "other""#).unwrap(),
        )
        .await
        .unwrap()
        .documents;
    assert_eq!(
        holders.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        [holder.as_str()]
    );
    assert_ne!(winner, holder);
}

/// The one `Ok` of `results`, every other a refusal naming its id.
fn one_winner(results: &[docstore::Result<Document>]) -> String {
    let winners: Vec<&Document> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let winner = winners[0].id.clone();
    for result in results.iter().filter(|r| r.is_err()) {
        match result {
            Err(Error::UniqueViolation { holder, .. }) => assert_eq!(*holder, winner),
            other => panic!("{other:?}"),
        }
    }
    winner
}

/// A claim whose answer was lost is tried again under its identity and recognised: never
/// refused by its own value. A caller repeating a write with its identity is too.
pub async fn a_resent_claim_is_not_refused(h: &dyn Harness) {
    let Some(ctx) = open(h, "uniq-resend").await else {
        return;
    };
    let plan = Plan::new()
        .on_nth(CallKind::Create, 1, Fault::LostAnswer)
        .on_nth(CallKind::Update, 1, Fault::LostAnswer);
    let driver = Arc::new(FaultyDriver::new(ctx.store.clone(), plan));
    let store = Store::from_driver(driver);
    let created = store
        .create(&user(&ctx, "a"), obj(json!({"email": "x"})), "")
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    store
        .create(&user(&ctx, "b"), obj(json!({"email": "y"})), "")
        .await
        .unwrap();
    let updated = store
        .update(&user(&ctx, "b"), &obj(json!({"email": "z"})), "")
        .await
        .unwrap();
    assert_eq!(updated.version, 2);

    let id = WriteId::from_key("claim-c").unwrap();
    let first = ctx
        .store
        .create(&user(&ctx, "c"), obj(json!({"email": "w"})), "")
        .write_id(id.clone())
        .await
        .unwrap();
    let again = ctx
        .store
        .create(&user(&ctx, "c"), obj(json!({"email": "w"})), "")
        .write_id(id)
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 3);
}
