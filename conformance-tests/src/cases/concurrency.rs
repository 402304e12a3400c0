//! Many tasks on one store at once: nothing lost, exactly one winner, exact counters.

use crate::Harness;
use crate::support::{Ctx, obj};
use docstore::{Error, Store};
use serde_json::json;

/// 16 tasks x 25 `update`s of one document, each adding its own key: all 400 keys are
/// there and the version is 401.
pub async fn concurrent_updates_lose_nothing(h: &dyn Harness) {
    let ctx = Ctx::new(h, "conc").await;
    let key = ctx.key("c", "hot");
    ctx.store.create(&key, obj(json!({})), "").await.unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|task| {
            let (store, key) = (ctx.store.clone(), key.clone());
            tokio::spawn(async move {
                for i in 0..25 {
                    let patch = obj(json!({ format!("t{task}_{i}"): i }));
                    store
                        .update(&key, &patch, &format!("task{task}"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let doc = ctx.store.get(&key).await.unwrap().unwrap();
    assert_eq!(doc.data.len(), 400, "keys lost");
    for task in 0..16 {
        for i in 0..25 {
            assert_eq!(doc.data[&format!("t{task}_{i}")], json!(i));
        }
    }
    assert_eq!(doc.version, 401);
}

/// Runs `attempt(store, task)` for 8 tasks at once and returns the tasks whose call
/// succeeded; every failure must be one `is_loss` accepts.
async fn race<T, F>(
    store: &Store,
    attempt: impl Fn(Store, usize) -> F,
    is_loss: impl Fn(&Error) -> bool,
) -> Vec<usize>
where
    F: Future<Output = docstore::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let call = attempt(store.clone(), task);
            tokio::spawn(async move { call.await.map(|_| task) })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(task) => winners.push(task),
            Err(err) => assert!(is_loss(&err), "unexpected {err:?}"),
        }
    }
    winners
}

/// 8 tasks race `update_if` on the same version: exactly one wins, the rest get
/// `Conflict { current: 2 }`, and the winner's patch is the stored one.
pub async fn racing_update_if_has_one_winner(h: &dyn Harness) {
    let ctx = Ctx::new(h, "conc").await;
    let key = ctx.key("c", "race");
    let initial = obj(json!({"winner": null}));
    ctx.store.create(&key, initial, "").await.unwrap();
    let winners = race(
        &ctx.store,
        |store, task| {
            let key = key.clone();
            async move {
                store
                    .update_if(&key, &obj(json!({"winner": task})), 1, "")
                    .await
            }
        },
        |err| matches!(err, Error::Conflict { current: 2 }),
    )
    .await;
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let doc = ctx.store.get(&key).await.unwrap().unwrap();
    assert_eq!(
        (doc.version, doc.data["winner"].clone()),
        (2, json!(winners[0]))
    );
}

/// 8 tasks race `create` of one id: exactly one wins, the rest get `AlreadyExists`.
pub async fn racing_create_has_one_winner(h: &dyn Harness) {
    let ctx = Ctx::new(h, "conc").await;
    let key = ctx.key("c", "race");
    let winners = race(
        &ctx.store,
        |store, task| {
            let key = key.clone();
            async move { store.create(&key, obj(json!({"by": task})), "").await }
        },
        |err| matches!(err, Error::AlreadyExists),
    )
    .await;
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let doc = ctx.store.get(&key).await.unwrap().unwrap();
    assert_eq!(
        (doc.version, doc.data["by"].clone()),
        (1, json!(winners[0]))
    );
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 1);
}

/// Concurrent creates and deletes over two collections leave exact counters.
pub async fn counters_exact_under_concurrency(h: &dyn Harness) {
    let ctx = Ctx::new(h, "conc").await;
    async fn work(store: Store, site: String, task: usize) {
        for i in 0..12 {
            let collection = if i % 2 == 0 { "even" } else { "odd" };
            let key = docstore::Key::new(&site, collection, format!("{task}-{i}")).unwrap();
            store.create(&key, obj(json!({})), "").await.unwrap();
            if i % 3 == 0 {
                assert!(store.delete(&key).await.unwrap());
            }
        }
    }
    let tasks: Vec<_> = (0..8)
        .map(|task| tokio::spawn(work(ctx.store.clone(), ctx.site.clone(), task)))
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // Per task: even i in 0..12 is 6 creates, 2 deleted (0, 6); odd: 6 creates, 2 deleted (3, 9).
    assert_eq!(
        ctx.store.collections(&ctx.site).await.unwrap(),
        vec![("even".to_string(), 32), ("odd".to_string(), 32)]
    );
    assert_eq!(ctx.store.count(&ctx.site).await.unwrap(), 64);
}

/// Concurrent `put`s of one new id count the document once and end at version 8.
pub async fn concurrent_puts_create_once(h: &dyn Harness) {
    let ctx = Ctx::new(h, "conc").await;
    let key = ctx.key("c", "p");
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let (store, key) = (ctx.store.clone(), key.clone());
            tokio::spawn(async move { store.put(&key, obj(json!({"by": task})), "").await })
        })
        .collect();
    let mut versions = Vec::new();
    for task in tasks {
        versions.push(task.await.unwrap().unwrap().version);
    }
    versions.sort();
    assert_eq!(versions, (1..=8).collect::<Vec<u64>>());
    assert_eq!(ctx.store.get(&key).await.unwrap().unwrap().version, 8);
    assert_eq!(
        ctx.store.collections(&ctx.site).await.unwrap(),
        vec![("c".to_string(), 1)]
    );
}
