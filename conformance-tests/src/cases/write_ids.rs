//! Caller write identities: an app that retries a call after its answer was lost, with the
//! identity it gave the first call, gets the first call's outcome and no second application
//! — for every write kind, after other writers got in between, and for deletes even after the
//! document was created again.
//!
//! The lost answers come from `docstore-testing`'s wrapper above the driver (the write is
//! applied, then its answer is replaced by `Unavailable`), the way an app sees a timeout.

use crate::Harness;
use crate::support::Ctx;
use docstore::retry::RetryPolicy;
use docstore::{Collection, Data, Document, Error, RecountMode, Store, Write, WriteId};
use docstore_testing::{CallKind, Fault, FaultyDriver, Plan};
use serde_json::{Value, json};
use std::sync::Arc;

fn data(value: Value) -> Data {
    docstore::object(value).expect("an object")
}

/// The case's store, wrapped so that the first call of `kind` is applied and then loses its
/// answer, which reaches the app: the store above the wrapper does not retry.
fn losing_first(ctx: &Ctx, kind: CallKind) -> Store {
    let plan = Plan::new().on_nth(kind, 1, Fault::LostAnswer);
    let faulty = FaultyDriver::new(ctx.store.clone(), plan).with_retry(RetryPolicy::NONE);
    Store::from_driver(Arc::new(faulty))
}

fn collection(store: &Store, ctx: &Ctx) -> Collection<Data> {
    let site = store.site(&ctx.site).unwrap().with_actor("app").unwrap();
    site.collection::<Data>("c").unwrap()
}

fn lost<T: std::fmt::Debug>(answer: docstore::Result<T>, what: &str) {
    assert!(
        matches!(answer, Err(Error::Unavailable { .. })),
        "{what}: the first call's answer should be lost, got {answer:?}"
    );
}

async fn stored(ctx: &Ctx, id: &str) -> Option<Document> {
    let key = docstore::Key::new(&ctx.site, "c", id).unwrap();
    ctx.store.get(&key).await.unwrap()
}

async fn assert_counted(ctx: &Ctx, expected: u64, what: &str) {
    assert_eq!(
        ctx.store.count(&ctx.site).await.unwrap(),
        expected,
        "{what}"
    );
    let recount = ctx
        .store
        .recount(&ctx.site, RecountMode::Report)
        .await
        .unwrap();
    assert_eq!(recount.changes, vec![], "{what}: counters drifted");
}

/// `create`, `put` (creating and replacing), `update`, `update_if`, `replace_if` and
/// `restore`: the first call is applied and its answer lost; the same call again with the
/// same identity answers with the document as the first wrote it, and nothing moves twice.
pub async fn a_repeated_write_answers_as_the_first(h: &dyn Harness) {
    let ctx = Ctx::new(h, "wid").await;
    let cases: [(CallKind, &str); 7] = [
        (CallKind::Create, "create"),
        (CallKind::Put, "put (create)"),
        (CallKind::Put, "put (replace)"),
        (CallKind::Update, "update"),
        (CallKind::UpdateIf, "update_if"),
        (CallKind::ReplaceIf, "replace_if"),
        (CallKind::Restore, "restore"),
    ];
    for (kind, what) in cases {
        let store = losing_first(&ctx, kind);
        let docs = collection(&store, &ctx);
        let id = WriteId::random();
        lost(
            repeatable(&docs, &store, &ctx, what, id.clone()).await,
            what,
        );
        let after_first = stored(&ctx, target(what)).await;
        let again = repeatable(&docs, &store, &ctx, what, id).await;
        let again = again.unwrap_or_else(|err| panic!("{what}: the repeat failed: {err}"));
        assert_eq!(
            after_first,
            Some(again.clone()),
            "{what}: the first call's document"
        );
        assert_eq!(
            stored(&ctx, target(what)).await,
            Some(again),
            "{what}: written once"
        );
    }
    let a = stored(&ctx, "a").await.unwrap();
    // create, put, update, update_if, replace_if on "a": versions 1..=5 one step each.
    assert_eq!(a.version, 5, "{a:?}");
    assert_eq!(a.data, data(json!({"r": true})), "{a:?}");
    assert_counted(&ctx, 3, "a, b and r").await;
}

/// The id a case of [`a_repeated_write_answers_as_the_first`] writes.
fn target(what: &str) -> &'static str {
    match what {
        "put (create)" => "b",
        "restore" => "r",
        _ => "a",
    }
}

/// One call of the write `what` with identity `id`, as the document it answers with.
async fn repeatable(
    docs: &Collection<Data>,
    store: &Store,
    ctx: &Ctx,
    what: &str,
    id: WriteId,
) -> docstore::Result<Document> {
    let as_document = |v: docstore::Versioned<Data>| Document {
        expires_at: None,
        id: v.id,
        data: v.value,
        created_at: v.created_at,
        updated_at: v.updated_at,
        created_by: v.created_by,
        updated_by: v.updated_by,
        version: v.version,
    };
    let written = match what {
        "create" => docs.create("a", &data(json!({"n": 1}))).write_id(id).await,
        "put (create)" => docs.put("b", &data(json!({"b": 1}))).write_id(id).await,
        "put (replace)" => {
            docs.put("a", &data(json!({"n": 1, "p": 1})))
                .write_id(id)
                .await
        }
        "update" => docs.update("a", &json!({"u": 1})).write_id(id).await,
        "update_if" => docs.update_if("a", &json!({"i": 1}), 3).write_id(id).await,
        "replace_if" => {
            let value = data(json!({"r": true}));
            docs.replace_if("a", &value, 4).write_id(id).await
        }
        "restore" => {
            let key = docstore::Key::new(&ctx.site, "c", "r").unwrap();
            let doc = Document {
                expires_at: None,
                id: "r".into(),
                data: data(json!({"restored": 1})),
                created_at: 10,
                updated_at: 20,
                created_by: "x".into(),
                updated_by: "y".into(),
                version: 7,
            };
            store.restore(&key, &doc).write_id(id).await?;
            return Ok(stored(ctx, "r").await.expect("restored"));
        }
        other => unreachable!("no write {other}"),
    };
    written.map(as_document)
}

/// A repeat after other writers changed the document applies nothing and answers with the
/// document as it stands (which holds the first call's change once).
pub async fn a_repeat_after_other_writes_applies_nothing(h: &dyn Harness) {
    let ctx = Ctx::new(h, "wid").await;
    let plain = collection(&ctx.store, &ctx);
    plain.create("a", &data(json!({"n": 0}))).await.unwrap();
    let store = losing_first(&ctx, CallKind::Update);
    let docs = collection(&store, &ctx);
    let id = WriteId::random();
    lost(
        docs.update("a", &json!({"mine": 1}))
            .write_id(id.clone())
            .await,
        "update",
    );
    plain.update("a", &json!({"theirs": 1})).await.unwrap();
    let again = docs
        .update("a", &json!({"mine": 1}))
        .write_id(id)
        .await
        .unwrap();
    assert_eq!(again.version, 3, "one step each: {again:?}");
    assert_eq!(again.value, data(json!({"n": 0, "mine": 1, "theirs": 1})));
    assert_eq!(stored(&ctx, "a").await.unwrap().version, 3);
}

/// `delete` and `delete_if`: a repeat answers as the first call did, and removes nothing —
/// not even a document created at the key since.
pub async fn a_repeated_delete_spares_a_new_document(h: &dyn Harness) {
    let ctx = Ctx::new(h, "wid").await;
    let plain = collection(&ctx.store, &ctx);
    plain.create("a", &data(json!({"n": 1}))).await.unwrap();
    plain.create("b", &data(json!({"n": 1}))).await.unwrap();

    let store = losing_first(&ctx, CallKind::Delete);
    let docs = collection(&store, &ctx);
    let id = WriteId::random();
    lost(docs.delete("a").write_id(id.clone()).await, "delete");
    assert_eq!(
        stored(&ctx, "a").await,
        None,
        "the first delete was applied"
    );
    assert!(
        docs.delete("a").write_id(id.clone()).await.unwrap(),
        "answers as the first"
    );
    plain.create("a", &data(json!({"new": 1}))).await.unwrap();
    assert!(
        docs.delete("a").write_id(id).await.unwrap(),
        "answers as the first"
    );
    assert_eq!(
        stored(&ctx, "a").await.unwrap().data,
        data(json!({"new": 1}))
    );

    let store = losing_first(&ctx, CallKind::DeleteIf);
    let docs = collection(&store, &ctx);
    let id = WriteId::random();
    lost(
        docs.delete_if("b", 1).write_id(id.clone()).await,
        "delete_if",
    );
    docs.delete_if("b", 1).write_id(id.clone()).await.unwrap();
    plain.create("b", &data(json!({"new": 2}))).await.unwrap();
    docs.delete_if("b", 1).write_id(id).await.unwrap();
    assert_eq!(
        stored(&ctx, "b").await.unwrap().data,
        data(json!({"new": 2}))
    );
    assert_counted(&ctx, 2, "both created again").await;

    // Without an identity a delete is a new call: it removes what stands.
    assert!(plain.delete("a").await.unwrap());
}

/// A batch that creates, updates and deletes: repeated with its identity after a lost
/// answer, it applies nothing more and answers from the documents as they stand.
pub async fn a_repeated_batch_answers_as_the_first(h: &dyn Harness) {
    let ctx = Ctx::new(h, "wid").await;
    let plain = collection(&ctx.store, &ctx);
    plain.create("u", &data(json!({"n": 1}))).await.unwrap();
    plain.create("d", &data(json!({"n": 1}))).await.unwrap();
    let store = losing_first(&ctx, CallKind::WriteAll);
    let key = |id: &str| docstore::Key::new(&ctx.site, "c", id).unwrap();
    let writes = vec![
        Write::create(key("new"), data(json!({"n": 1}))),
        Write::update_if(key("u"), data(json!({"n": 2})), 1),
        Write::delete_if(key("d"), 1),
    ];
    let id = WriteId::random();
    lost(
        store.write_all(&writes, "app").write_id(id.clone()).await,
        "write_all",
    );
    let again = store.write_all(&writes, "app").write_id(id).await.unwrap();
    assert_eq!(again.len(), 3);
    assert_eq!(again[0].document(), stored(&ctx, "new").await.as_ref());
    assert_eq!(again[1].document().map(|d| d.version), Some(2));
    assert!(
        matches!(again[2], docstore::WriteOutcome::Deleted),
        "{again:?}"
    );
    assert_eq!(stored(&ctx, "u").await.unwrap().version, 2, "applied once");
    assert_counted(&ctx, 2, "new and u").await;
}

/// `modify` applies its change exactly once when a write's answer is lost: it sends the write
/// again with the same identity, which finds it applied.
pub async fn modify_applies_once_under_lost_answers(h: &dyn Harness) {
    let ctx = Ctx::new(h, "wid").await;
    let plain = collection(&ctx.store, &ctx);
    plain.create("x", &data(json!({"n": 0}))).await.unwrap();
    // The store's own retries (the default policy) resend it.
    let plan = Plan::new().on_nth(CallKind::ReplaceIf, 1, Fault::LostAnswer);
    let store = Store::from_driver(Arc::new(FaultyDriver::new(ctx.store.clone(), plan)));
    let docs = collection(&store, &ctx);
    let mut calls = 0;
    let done = docs
        .modify("x", |doc| {
            calls += 1;
            let n = doc["n"].as_i64().unwrap();
            doc.insert("n".into(), (n + 1).into());
        })
        .await
        .unwrap();
    assert_eq!((done.version, &done.value["n"]), (2, &json!(1)), "{done:?}");
    assert_eq!(
        calls, 1,
        "the change was made once and resent, not made again"
    );
    assert_eq!(stored(&ctx, "x").await.unwrap().version, 2);
}

/// A client's own key (`WriteId::from_key`: an HTTP `Idempotency-Key`, an order reference)
/// is a write identity: the request retried with the same key, its identity derived anew,
/// answers as the first try and applies once; another key is another write.
pub async fn a_client_key_is_a_write_identity(h: &dyn Harness) {
    let ctx = Ctx::new(h, "wid").await;
    let key = |text: &str| WriteId::from_key(text).unwrap();
    let order = data(json!({"order": 8812, "paid": false}));

    let store = losing_first(&ctx, CallKind::Create);
    let docs = collection(&store, &ctx);
    let first = docs.create("o", &order).write_id(key("order-8812")).await;
    lost(first, "create");
    let retried = docs.create("o", &order).write_id(key("order-8812")).await;
    let retried = retried.unwrap_or_else(|err| panic!("the retry failed: {err}"));
    assert_eq!((retried.version, &retried.value), (1, &order));

    let store = losing_first(&ctx, CallKind::Update);
    let docs = collection(&store, &ctx);
    let pay = json!({"paid": true});
    lost(
        docs.update("o", &pay).write_id(key("order-8812/pay")).await,
        "update",
    );
    let paid = docs.update("o", &pay).write_id(key("order-8812/pay")).await;
    assert_eq!(paid.unwrap().version, 2, "the payment applied once");

    let other = docs.create("o", &order).write_id(key("order-8813")).await;
    assert!(
        matches!(other, Err(Error::AlreadyExists)),
        "another key is another write: {other:?}"
    );
    assert_eq!(stored(&ctx, "o").await.unwrap().version, 2);
    assert_counted(&ctx, 1, "o").await;
}
