//! Typed collections: an application's serde types round trip exactly, a stored document
//! that does not fit is a decode error naming it, `replace_if` stores a value whole, and
//! `modify` applies every change exactly once under contention.

use crate::Harness;
use crate::support::{Ctx, property_cases};
use docstore::{Data, Error, Filter, Query};
use futures_util::TryStreamExt;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRunner};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An enum stored as its serde form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Open,
    Closed,
}

/// What an application stores: plain fields, integers past 2^53, options, an enum, and
/// untyped JSON values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Ticket {
    title: String,
    status: Status,
    big: u64,
    small: i64,
    ratio: f64,
    assignee: Option<String>,
    tags: Vec<String>,
    extra: Value,
    nested: Value,
}

fn ticket(n: u64) -> Ticket {
    Ticket {
        title: format!("ticket {n}"),
        status: Status::Open,
        big: u64::MAX - n,
        small: i64::MIN + n as i64,
        ratio: 0.1 + n as f64,
        assignee: None,
        tags: vec!["a".into(), "é\"\\".into()],
        extra: json!({"deep": [1, 1.0, null, {"x": 9_007_199_254_740_993u64}]}),
        nested: Value::Null,
    }
}

/// Values come back exactly as they went in, through every typed read: get, get_many,
/// query, stream and the write's own answer.
pub async fn typed_values_round_trip(h: &dyn Harness) {
    let ctx = Ctx::new(h, "typed").await;
    let tickets = ctx
        .store
        .site(&ctx.site)
        .unwrap()
        .with_actor("alice")
        .unwrap()
        .collection::<Ticket>("tickets")
        .unwrap();
    let written = tickets.create("T-1", &ticket(1)).await.unwrap();
    assert_eq!(written.value, ticket(1));
    assert_eq!((written.version, written.created_by.as_str()), (1, "alice"));
    let read = tickets.get("T-1").await.unwrap().unwrap();
    assert_eq!(read, written);
    let with_some = Ticket {
        assignee: Some("sam".into()),
        status: Status::Closed,
        ..ticket(2)
    };
    tickets.put("T-2", &with_some).await.unwrap();
    let many = tickets.get_many(&["T-2", "T-1", "nope"]).await.unwrap();
    assert_eq!(many[0].as_ref().unwrap().value, with_some);
    assert_eq!(many[1].as_ref().unwrap().value, ticket(1));
    assert!(many[2].is_none());
    let page = tickets.query(&Query::new()).await.unwrap();
    let values: Vec<Ticket> = page.items.into_iter().map(|v| v.value).collect();
    assert_eq!(values, [ticket(1), with_some.clone()]);
    let streamed: Vec<_> = tickets
        .stream(&Query::new().limit(1))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(streamed.len(), 2);
    assert_eq!(streamed[1].value, with_some);
}

/// Every awkward value of `docstore::strategies::data()` survives a trip through a struct
/// with `serde_json::Value` fields.
pub async fn awkward_values_round_trip_through_a_struct(h: &dyn Harness) {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        first: Value,
        second: Value,
    }
    let ctx = Ctx::new(h, "awkward").await;
    let holders = ctx
        .store
        .site(&ctx.site)
        .unwrap()
        .collection::<Holder>("h")
        .unwrap();
    let mut runner = TestRunner::new(Config {
        cases: property_cases(32),
        ..Config::default()
    });
    let strategy = (docstore::strategies::data(), docstore::strategies::data());
    for i in 0..property_cases(32) {
        let (first, second) = strategy.new_tree(&mut runner).unwrap().current();
        let holder = Holder {
            first: Value::from(first),
            second: Value::from(second),
        };
        let id = format!("h{i}");
        let written = holders.create(&id, &holder).await.unwrap();
        assert_eq!(written.value, holder);
        assert_eq!(holders.get(&id).await.unwrap().unwrap().value, holder);
    }
}

/// A document that does not fit the type is `Error::Decode` naming its key — from `get`,
/// from a query page and as an item of a stream, which goes on after it.
pub async fn a_document_that_does_not_fit_is_a_decode_error(h: &dyn Harness) {
    let ctx = Ctx::new(h, "decode").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let raw = site.collection::<Data>("tickets").unwrap();
    raw.create("bad", &docstore::object(json!({"title": 5})).unwrap())
        .await
        .unwrap();
    let tickets = site.collection::<Ticket>("tickets").unwrap();
    tickets.create("good", &ticket(1)).await.unwrap();
    let names_the_key = |err: &Error| match err {
        Error::Decode { key, message } => {
            key.ends_with("/tickets/bad") && key.starts_with(&ctx.site) && !message.is_empty()
        }
        _ => false,
    };
    let got = tickets.get("bad").await.unwrap_err();
    assert!(names_the_key(&got), "{got}");
    let page = tickets.query(&Query::new()).await.unwrap_err();
    assert!(names_the_key(&page), "{page}");
    let items: Vec<_> =
        futures_util::StreamExt::collect::<Vec<_>>(tickets.stream(&Query::new())).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(names_the_key(items[0].as_ref().unwrap_err()));
    assert_eq!(items[1].as_ref().unwrap().id, "good");
    // The stored document is untouched.
    assert_eq!(raw.get("bad").await.unwrap().unwrap().value["title"], 5);
}

/// A value that is not a JSON object, or a patch that is not one, is `InvalidArgument` and
/// writes nothing.
pub async fn values_that_are_not_objects_are_refused(h: &dyn Harness) {
    let ctx = Ctx::new(h, "notobject").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let numbers = site.collection::<i64>("n").unwrap();
    assert!(matches!(
        numbers.create("one", &1).await,
        Err(Error::InvalidArgument(_))
    ));
    let lists = site.collection::<Vec<u8>>("n").unwrap();
    assert!(matches!(
        lists.put("list", &vec![1, 2]).await,
        Err(Error::InvalidArgument(_))
    ));
    let raw = site.collection::<Data>("n").unwrap();
    raw.create("doc", &Data::new()).await.unwrap();
    assert!(matches!(
        raw.update("doc", &json!([1])).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(site.count().await.unwrap(), 1);
    assert_eq!(raw.get("doc").await.unwrap().unwrap().version, 1);
}

/// `replace_if` replaces the whole value (fields left out are gone, `None` is stored as
/// `null` exactly as `create` stores it), keeps `created_*`, moves the version by one, and
/// refuses a stale version or a missing document, changing nothing.
pub async fn replace_if_stores_the_value_whole(h: &dyn Harness) {
    let ctx = Ctx::new(h, "replace").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let tickets = site
        .with_actor("ann")
        .unwrap()
        .collection::<Ticket>("t")
        .unwrap();
    let raw = site.collection::<Data>("t").unwrap();
    raw.create(
        "T-1",
        &docstore::object(json!({"title": "old", "leftover": true})).unwrap(),
    )
    .await
    .unwrap();
    let replaced = tickets.replace_if("T-1", &ticket(1), 1).await.unwrap();
    assert_eq!(replaced.value, ticket(1));
    assert_eq!(replaced.version, 2);
    assert_eq!(
        (replaced.created_by.as_str(), replaced.updated_by.as_str()),
        ("", "ann")
    );
    let stored = raw.get("T-1").await.unwrap().unwrap();
    assert!(!stored.value.contains_key("leftover"), "{:?}", stored.value);
    assert_eq!(stored.value["assignee"], Value::Null);
    assert_eq!(stored.created_at, replaced.created_at);
    // `None` is a stored null for a query, after a create and after a replace alike.
    tickets.create("T-2", &ticket(2)).await.unwrap();
    let nulls = tickets
        .count_matching(&Filter::eq("assignee", Value::Null))
        .await
        .unwrap();
    assert_eq!(nulls, 2);

    assert!(matches!(
        tickets.replace_if("T-1", &ticket(3), 1).await,
        Err(Error::Conflict { current: 2 })
    ));
    assert!(matches!(
        tickets.replace_if("nope", &ticket(3), 1).await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(tickets.get("T-1").await.unwrap().unwrap().value, ticket(1));
    assert_eq!(site.count().await.unwrap(), 2);
}

/// A filter value can be any `Serialize`: an enum finds the documents holding its serde
/// form.
pub async fn filters_take_any_serializable_value(h: &dyn Harness) {
    let ctx = Ctx::new(h, "serfilter").await;
    let tickets = ctx
        .store
        .site(&ctx.site)
        .unwrap()
        .collection::<Ticket>("t")
        .unwrap();
    tickets.create("open", &ticket(1)).await.unwrap();
    let closed = Ticket {
        status: Status::Closed,
        ..ticket(2)
    };
    tickets.create("closed", &closed).await.unwrap();
    let query = Query::new().filter(Filter::eq("status", Status::Closed));
    let page = tickets.query(&query).await.unwrap();
    let ids: Vec<&str> = page.items.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["closed"]);
    let any = Query::new().filter(Filter::is_in("status", [Status::Open, Status::Closed]));
    assert_eq!(tickets.query(&any).await.unwrap().items.len(), 2);
}

/// `modify` from 16 tasks at once on one document: every change applied exactly once.
pub async fn modify_under_contention_loses_nothing(h: &dyn Harness) {
    const TASKS: u64 = 16;
    const EACH: u64 = 5;
    let ctx = Ctx::new(h, "modify").await;
    let counters = ctx
        .store
        .site(&ctx.site)
        .unwrap()
        .collection::<Data>("c")
        .unwrap();
    counters
        .create("hits", &docstore::object(json!({"n": 0})).unwrap())
        .await
        .unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let counters = counters.clone();
            tokio::spawn(async move {
                for _ in 0..EACH {
                    counters
                        .modify("hits", |doc| {
                            let n = doc["n"].as_u64().unwrap();
                            doc.insert("n".into(), (n + 1).into());
                        })
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let done = counters.get("hits").await.unwrap().unwrap();
    assert_eq!(done.value["n"], TASKS * EACH);
    assert_eq!(done.version, TASKS * EACH + 1);
    assert!(matches!(
        counters.modify("missing", |_| {}).await,
        Err(Error::NotFound { .. })
    ));
}

/// A `modify` whose change leaves the value equal (an idempotent "close it", run on a closed
/// ticket) writes nothing: it answers the current version, and neither the version, the
/// writer nor the feed moves (`docs/contract.md`, "Operations").
pub async fn a_modify_that_changes_nothing_writes_nothing(h: &dyn Harness) {
    let ctx = Ctx::new(h, "noop").await;
    let site = ctx.store.site(&ctx.site).unwrap();
    let tickets = site.collection::<Ticket>("tickets").unwrap();
    let as_bob = site.with_actor("bob").unwrap();
    let bobs = as_bob.collection::<Ticket>("tickets").unwrap();
    let created = tickets.create("t", &ticket(1)).await.unwrap();

    let mut calls = 0;
    let unchanged = bobs
        .modify("t", |t| {
            calls += 1;
            t.status = Status::Open;
        })
        .await
        .unwrap();
    assert_eq!(calls, 1);
    assert_eq!(unchanged, created, "the current version, as it is");
    assert_eq!(tickets.get("t").await.unwrap(), Some(created.clone()));

    let closed = bobs
        .modify("t", |t| t.status = Status::Closed)
        .await
        .unwrap();
    assert_eq!((closed.version, closed.value.status), (2, Status::Closed));
    site.collection::<Data>("marker")
        .unwrap()
        .create("end", &Data::new())
        .await
        .unwrap();
    let versions = feed_versions_of(&site, "t", "end").await;
    assert_eq!(versions, [1, 2], "one change per write, none for the no-op");
}

/// The versions in the changes of document `id` on `site`'s feed, from its oldest change up
/// to the first change of `marker` (written last), waiting for them as a feed may lag.
async fn feed_versions_of(site: &docstore::Site, id: &str, marker: &str) -> Vec<u64> {
    let mut watch = site.watch(docstore::FeedStart::Oldest);
    let read = async {
        let mut versions = Vec::new();
        while let Some(change) = watch.try_next().await.unwrap() {
            match change.key.id() {
                seen if seen == marker => break,
                seen if seen == id => versions.push(change.version),
                _ => {}
            }
        }
        versions
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), read)
        .await
        .unwrap_or_else(|_| panic!("no change of {marker} within 60 s"))
}
