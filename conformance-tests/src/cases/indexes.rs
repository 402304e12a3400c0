//! Declared indexes never change an answer, only its cost: with and without them every page
//! equals the reference evaluator's; `explain` names the index for a servable query (on a
//! backend whose harness says it serves queries by index) and a scan otherwise; `consistent:
//! true` is strongly consistent.
//!
//! Index names are derived from their fields, so one name always means the same fields:
//! backends that record declarations in a shared database never see a contradiction.

use crate::Harness;
use crate::support::{Ctx, obj, property_cases_on};
use docstore::query::evaluate;
use docstore::{
    Data, Document, Error, Filter, Index, IndexSet, Key, ManualClock, Query, StoreOptions, Write,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use std::sync::Arc;

const START: i64 = 1_700_000_000_000_000_000;

/// A declaration of `fields` (text form) on `collection`, named after its fields.
pub fn index(collection: &str, fields: &[&str]) -> Index {
    let name: Vec<String> = fields
        .iter()
        .map(|f| {
            f.replace('-', "D")
                .replace('$', "S")
                .replace('.', "P")
                .replace('\\', "B")
        })
        .collect();
    Index::parse(collection, name.join("_"), fields).expect("suite indexes are valid")
}

fn options(indexes: Vec<Index>) -> StoreOptions {
    StoreOptions::default().with_indexes(IndexSet::new(indexes).expect("distinct indexes"))
}

/// Walks every page of `query` and checks each against the evaluator over `stored`.
async fn check_walk(
    ctx: &Ctx,
    collection: &str,
    stored: &[Document],
    query: &Query,
    knows_last: bool,
) {
    let mut cursor = None;
    let mut walked = Vec::new();
    for _ in 0..=stored.len() + 1 {
        let paged = query.clone().after(cursor);
        let expected = paged
            .compile_for(&ctx.site, collection)
            .unwrap()
            .evaluate(stored);
        let got = ctx
            .store
            .query(&ctx.site, collection, &paged)
            .await
            .unwrap();
        assert_eq!(got.documents, expected.documents, "{paged:?}");
        assert!(!got.exhausted_scan, "{paged:?}");
        if knows_last || expected.next.is_some() {
            assert_eq!(got.next.is_some(), expected.next.is_some(), "{paged:?}");
        }
        walked.extend(got.documents);
        match got.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let whole = evaluate(
        stored,
        &Query {
            limit: None,
            ..query.clone()
        },
    )
    .unwrap();
    assert_eq!(walked, whole.documents, "walk of {query:?}");
}

/// Tickets with status, priority and score, some fields missing or of other kinds.
async fn tickets(ctx: &Ctx, n: usize) -> Vec<Document> {
    let mut stored = Vec::new();
    for i in 0..n {
        let status = ["open", "closed", "open", "pending"][i % 4];
        let mut data =
            json!({"status": status, "priority": (i * 37) % 100, "score": (i * 11) % 23});
        match i % 9 {
            0 => data["score"] = json!(null),
            1 => {
                data.as_object_mut().unwrap().remove("score");
            }
            2 => data["priority"] = json!("high"),
            3 => data["score"] = json!(((i * 11) % 23) as f64),
            _ => {}
        }
        let doc = ctx
            .store
            .create(&ctx.key("tickets", &format!("t{i:03}")), obj(data), "suite")
            .await
            .unwrap();
        stored.push(doc);
    }
    stored
}

fn ticket_queries() -> Vec<Query> {
    vec![
        Query::new()
            .filter(Filter::eq("status", "open").and(Filter::gte("priority", 50)))
            .order_by_desc("score")
            .limit(7),
        Query::new()
            .filter(Filter::eq("status", "open"))
            .order_by("score")
            .limit(5),
        Query::new()
            .filter(Filter::eq("status", "open"))
            .order_by_desc("score")
            .order_by_desc("$id")
            .limit(4),
        Query::new()
            .filter(Filter::is_in("status", ["open", "pending"]))
            .order_by_desc("score")
            .limit(6),
        Query::new()
            .filter(Filter::gte("priority", 20).and(Filter::lt("priority", 70)))
            .order_by("priority")
            .limit(9),
        Query::new().filter(Filter::prefix("status", "op")).limit(9),
        Query::new().order_by_desc("priority").limit(3),
        Query::new().filter(Filter::eq("status", "nobody")).limit(3),
        Query::new().filter(Filter::is_in("status", Vec::<String>::new())),
    ]
}

fn ticket_indexes() -> Vec<Index> {
    vec![
        index("tickets", &["status", "-score"]),
        index("tickets", &["priority"]),
        index("tickets", &["status"]),
    ]
}

/// A selective indexed query and its neighbours give the reference pages, walked by cursor, with the
/// indexes declared and without.
pub async fn indexed_pages_equal_the_reference(h: &dyn Harness) {
    let knows_last = h.capabilities().knows_last_page;
    for indexes in [Vec::new(), ticket_indexes()] {
        let ctx = Ctx::with_options(h, "idxpages", options(indexes)).await;
        let stored = tickets(&ctx, 60).await;
        for query in ticket_queries() {
            check_walk(&ctx, "tickets", &stored, &query, knows_last).await;
        }
    }
}

/// Every write path moves index keys: after creates, puts, updates, conditional writes,
/// deletes, restores and batches, served queries still equal the evaluator.
pub async fn every_write_keeps_indexes_exact(h: &dyn Harness) {
    let knows_last = h.capabilities().knows_last_page;
    let ctx = Ctx::with_options(h, "idxwrites", options(ticket_indexes())).await;
    let mut stored = tickets(&ctx, 24).await;
    let key = |id: &str| ctx.key("tickets", id);
    let replace = |doc: Document, stored: &mut Vec<Document>| {
        stored.retain(|d| d.id != doc.id);
        stored.push(doc);
    };
    let s = &ctx.store;
    replace(
        s.put(
            &key("t001"),
            obj(json!({"status": "open", "score": 99})),
            "a",
        )
        .await
        .unwrap(),
        &mut stored,
    );
    replace(
        s.put(
            &key("new1"),
            obj(json!({"status": "open", "score": 50, "priority": 60})),
            "a",
        )
        .await
        .unwrap(),
        &mut stored,
    );
    replace(
        s.update(
            &key("t002"),
            &obj(json!({"status": "pending", "score": 1})),
            "a",
        )
        .await
        .unwrap(),
        &mut stored,
    );
    let v = stored.iter().find(|d| d.id == "t004").unwrap().version;
    replace(
        s.update_if(&key("t004"), &obj(json!({"score": null})), v, "a")
            .await
            .unwrap(),
        &mut stored,
    );
    assert!(s.delete(&key("t006")).await.unwrap());
    stored.retain(|d| d.id != "t006");
    let v = stored.iter().find(|d| d.id == "t008").unwrap().version;
    s.delete_if(&key("t008"), v).await.unwrap();
    stored.retain(|d| d.id != "t008");
    let restored = Document {
        expires_at: None,
        id: "r1".into(),
        data: obj(json!({"status": "open", "score": 7, "priority": 90})),
        created_at: START,
        updated_at: START,
        created_by: "x".into(),
        updated_by: "x".into(),
        version: 3,
    };
    s.restore(&key("r1"), &restored).await.unwrap();
    stored.push(restored);
    let v = stored.iter().find(|d| d.id == "t010").unwrap().version;
    let outcomes = s
        .write_all(
            &[
                Write::create(key("b1"), obj(json!({"status": "open", "score": 3}))),
                Write::update(key("t012"), obj(json!({"status": "closed"}))),
                Write::delete_if(key("t010"), v),
                Write::put(key("t014"), obj(json!({"status": "open", "score": 22}))),
            ],
            "batch",
        )
        .await
        .unwrap();
    stored.retain(|d| d.id != "t010");
    for outcome in outcomes {
        if let docstore::WriteOutcome::Written(doc) = outcome {
            replace(doc, &mut stored);
        }
    }
    // A failing batch moves nothing.
    let failed = s
        .write_all(
            &[
                Write::put(key("t016"), obj(json!({"status": "open", "score": -1}))),
                Write::create(key("t018"), Data::new()),
            ],
            "batch",
        )
        .await;
    assert!(matches!(failed, Err(Error::Batch { index: 1, .. })));
    for query in ticket_queries() {
        check_walk(&ctx, "tickets", &stored, &query, knows_last).await;
    }
}

/// `explain` names the index for servable queries (when the backend serves queries by
/// index), a scan for the others, and says strongly consistent for `consistent: true`.
pub async fn explain_names_the_index_or_a_scan(h: &dyn Harness) {
    let serves = h.capabilities().secondary_indexes;
    let ctx = Ctx::with_options(h, "idxexplain", options(ticket_indexes())).await;
    tickets(&ctx, 12).await;
    let explain = |q: Query| {
        let ctx = &ctx;
        async move { ctx.store.explain(&ctx.site, "tickets", &q).await.unwrap() }
    };
    let served = explain(ticket_queries()[0].clone()).await;
    if serves {
        assert_eq!(served.index.as_deref(), Some("status_Dscore"), "{served}");
        assert!(served.estimated_reads.is_some_and(|n| n <= 12), "{served}");
        assert_eq!(served.read_limit, None, "{served}");
    }
    let by_priority = explain(Query::new().order_by_desc("priority").limit(3)).await;
    if serves {
        assert_eq!(
            by_priority.index.as_deref(),
            Some("priority"),
            "{by_priority}"
        );
    }
    for scan in [
        Query::new().order_by("title"),
        Query::new().filter(Filter::eq("title", "x")),
        Query::new(),
    ] {
        let plan = explain(scan.clone()).await;
        assert_eq!(plan.index, None, "{scan:?}: {plan}");
    }
    // Another collection's indexes never serve.
    let other = ctx
        .store
        .explain(&ctx.site, "other", &ticket_queries()[0])
        .await
        .unwrap();
    assert_eq!(other.index, None, "{other}");
    for query in ticket_queries() {
        let plan = explain(query.consistent(true)).await;
        assert!(plan.strongly_consistent, "{plan}");
        assert!(!plan.to_string().is_empty());
    }
    // Bad queries are refused as `query` refuses them.
    let bad = ctx
        .store
        .explain(
            &ctx.site,
            "tickets",
            &Query::new().after(Some("garbage".into())),
        )
        .await;
    assert!(matches!(bad, Err(Error::InvalidArgument(_))), "{bad:?}");
    let bad = ctx
        .store
        .explain(&ctx.site, "tickets", &Query::new().limit(0))
        .await;
    assert!(matches!(bad, Err(Error::InvalidArgument(_))), "{bad:?}");
    let bad = ctx.store.explain("__bad", "tickets", &Query::new()).await;
    assert!(matches!(bad, Err(Error::InvalidArgument(_))), "{bad:?}");
}

/// A `consistent: true` query sees every write that finished before it, served or not.
pub async fn consistent_queries_see_every_write(h: &dyn Harness) {
    let ctx = Ctx::with_options(h, "idxconsistent", options(ticket_indexes())).await;
    let query = ticket_queries()[1].clone().limit(100).consistent(true);
    let mut expected = Vec::new();
    for i in 0..15 {
        let doc = ctx
            .store
            .create(
                &ctx.key("tickets", &format!("c{i:02}")),
                obj(json!({"status": "open", "score": i % 4})),
                "w",
            )
            .await
            .unwrap();
        expected.push(doc);
        let page = ctx.store.query(&ctx.site, "tickets", &query).await.unwrap();
        assert_eq!(
            page.documents,
            evaluate(&expected, &query).unwrap().documents
        );
    }
    let plan = ctx
        .store
        .explain(&ctx.site, "tickets", &query)
        .await
        .unwrap();
    assert!(plan.strongly_consistent, "{plan}");
}

/// Index fields drawn from the strategies' paths, either direction, no field twice.
fn index_fields() -> impl Strategy<Value = Vec<&'static str>> {
    let field = prop::sample::select(vec![
        "a",
        "-a",
        "n",
        "-n",
        "s",
        "-s",
        "a.n",
        "-b",
        r"\$x",
        "$version",
        "-$updated_by",
        "$created_at",
    ]);
    prop::collection::vec(field, 1..4).prop_map(|fields| {
        let mut out: Vec<&'static str> = Vec::new();
        for f in fields {
            if !out
                .iter()
                .any(|o| o.trim_start_matches('-') == f.trim_start_matches('-'))
            {
                out.push(f);
            }
        }
        out
    })
}

/// Queries that such indexes often serve: equalities, lists, ranges and prefixes on those
/// fields, orders on them, and sometimes any filter of the strategies.
fn indexable_query() -> impl Strategy<Value = Query> {
    let path = prop::sample::select(vec![
        "a",
        "n",
        "s",
        "a.n",
        "b",
        r"\$x",
        "$version",
        "$updated_by",
        "$created_at",
    ]);
    let scalar = docstore::strategies::scalar;
    let leaf = prop_oneof![
        3 => (path.clone(), scalar()).prop_map(|(f, v)| Filter::eq(f, v)),
        1 => (path.clone(), prop::collection::vec(scalar(), 0..3)).prop_map(|(f, v)| Filter::In(f.into(), v)),
        1 => (path.clone(), scalar()).prop_map(|(f, v)| Filter::gte(f, v)),
        1 => (path.clone(), scalar()).prop_map(|(f, v)| Filter::gt(f, v)),
        1 => (path.clone(), scalar()).prop_map(|(f, v)| Filter::lt(f, v)),
        1 => (path.clone(), scalar()).prop_map(|(f, v)| Filter::lte(f, v)),
        1 => (path.clone(), docstore::strategies::string()).prop_map(|(f, p)| Filter::prefix(f, p)),
        1 => docstore::strategies::filter(1),
    ];
    let order = prop::collection::vec(
        (path, any::<bool>()).prop_map(|(f, d)| docstore::Order {
            field: f.into(),
            descending: d,
        }),
        0..3,
    );
    (
        prop::collection::vec(leaf, 0..3),
        order,
        prop::option::of(any::<bool>()),
        prop::option::of(1usize..5),
    )
        .prop_map(|(leaves, mut order, id_tail, limit)| {
            if let Some(descending) = id_tail {
                order.push(docstore::Order {
                    field: "$id".into(),
                    descending,
                });
            }
            Query {
                filter: (!leaves.is_empty()).then(|| Filter::all(leaves)),
                order,
                limit,
                ..Query::default()
            }
        })
}

/// Random documents x random queries x random index declarations: every page equals the
/// reference evaluator's, and walks give the unpaged answer once.
pub async fn random_indexed_queries_match_the_reference_evaluator(h: &dyn Harness) {
    let handle = tokio::runtime::Handle::current();
    let knows_last = h.capabilities().knows_last_page;
    let mut runner = TestRunner::new(Config {
        cases: property_cases_on(h, 128),
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec(index_fields(), 1..3),
        prop::collection::vec(
            (docstore::strategies::data(), 0i64..3, any::<bool>()),
            0..14,
        ),
        prop::collection::vec(indexable_query(), 1..4),
    );
    let result = tokio::task::block_in_place(|| {
        runner.run(&strategy, |(fields, docs, queries)| {
            handle.block_on(async {
                let mut indexes: Vec<Index> = Vec::new();
                for f in &fields {
                    let candidate = index("q", f);
                    let mut with = indexes.clone();
                    with.push(candidate);
                    if IndexSet::new(with.clone()).is_ok() {
                        indexes = with;
                    }
                }
                let clock = Arc::new(ManualClock::new(START));
                let options = options(indexes).with_clock(clock.clone());
                let ctx = Ctx::with_options(h, "idxprop", options).await;
                let mut stored: Vec<Document> = Vec::new();
                for (i, (data, tick, touch)) in docs.into_iter().enumerate() {
                    clock.advance(tick);
                    let key: Key = ctx.key("q", &format!("d{}", (i * 5) % 14));
                    let actor = ["", "ann", "bob"][i % 3];
                    let mut doc = ctx.store.put(&key, data, actor).await.unwrap();
                    if touch {
                        doc = ctx
                            .store
                            .update(&key, &Data::new(), "toucher")
                            .await
                            .unwrap();
                    }
                    stored.retain(|d| d.id != doc.id);
                    stored.push(doc);
                }
                for query in queries {
                    let mut cursor = None;
                    let mut walked = Vec::new();
                    let mut ended = false;
                    for _ in 0..=stored.len() + 1 {
                        let paged = query.clone().after(cursor);
                        let expected = paged.compile_for(&ctx.site, "q").unwrap().evaluate(&stored);
                        let got = ctx.store.query(&ctx.site, "q", &paged).await.unwrap();
                        prop_assert_eq!(&got.documents, &expected.documents, "{:?}", paged);
                        if knows_last || expected.next.is_some() {
                            prop_assert_eq!(
                                got.next.is_some(),
                                expected.next.is_some(),
                                "{:?}",
                                paged
                            );
                        }
                        walked.extend(got.documents);
                        match got.next {
                            Some(next) => cursor = Some(next),
                            None => {
                                ended = true;
                                break;
                            }
                        }
                    }
                    prop_assert!(ended, "the walk of {:?} did not end", query);
                    let whole = evaluate(
                        &stored,
                        &Query {
                            limit: None,
                            ..query.clone()
                        },
                    )
                    .unwrap();
                    prop_assert_eq!(&walked, &whole.documents, "{:?}", query);
                }
                Ok(())
            })
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}
