//! Declared indexes on SQLite: built at open over existing documents, recorded in the file,
//! contradictions refused, hostile paths kept inside quoted literals, and the query plan
//! using the index table's key.

use docstore::query::evaluate;
use docstore::{Document, Error, Filter, Index, IndexSet, Key, Query, Store, StoreOptions};
use docstore_sqlite::SqliteStore;
use futures_util::TryStreamExt;
use serde_json::json;

fn options(indexes: Vec<Index>) -> StoreOptions {
    StoreOptions::default().with_indexes(IndexSet::new(indexes).unwrap())
}

async fn walk(store: &Store, stored: &[Document], query: &Query) {
    let mut cursor = None;
    let mut walked = Vec::new();
    loop {
        let paged = query.clone().after(cursor);
        let got = store.query("s", "c", &paged).await.unwrap();
        assert_eq!(
            got.documents,
            paged
                .compile_for("s", "c")
                .unwrap()
                .evaluate(stored)
                .documents,
            "{paged:?}"
        );
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
    assert_eq!(walked, whole.documents);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_are_built_at_open_and_used() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("idx.db");
    let mut stored = Vec::new();
    {
        let store = Store::new(SqliteStore::open(&db).unwrap());
        for i in 0..200 {
            let status = ["open", "closed"][i % 2];
            let data = json!({"status": status, "priority": i % 100, "score": (i * 7) % 31});
            let key = Key::new("s", "c", format!("d{i:03}")).unwrap();
            stored.push(
                store
                    .create(&key, docstore::object(data).unwrap(), "a")
                    .await
                    .unwrap(),
            );
        }
    }
    let index = Index::parse("c", "by_status_score", ["status", "-score"]).unwrap();
    let store =
        Store::new(SqliteStore::open_with_options(&db, options(vec![index.clone()])).unwrap());
    let query = Query::new()
        .filter(Filter::eq("status", "open").and(Filter::gte("priority", 50)))
        .order_by_desc("score")
        .limit(7);
    let plan = store.explain("s", "c", &query).await.unwrap();
    assert_eq!(plan.index.as_deref(), Some("by_status_score"), "{plan}");
    // The range read walks the index table's primary key: no scan, no sort.
    assert!(
        plan.key_range
            .contains("SEARCH index_entries USING PRIMARY KEY (index_id=? AND entry_site=? AND entry_key>? AND entry_key<?)"),
        "{plan}"
    );
    assert!(!plan.key_range.contains("TEMP B-TREE"), "{plan}");
    walk(&store, &stored, &query).await;
    // Writes after the build move the entries (triggers, same transaction).
    let key = Key::new("s", "c", "d001").unwrap();
    let doc = store
        .update(
            &key,
            &docstore::object(json!({"status": "open", "score": 99})).unwrap(),
            "b",
        )
        .await
        .unwrap();
    stored.retain(|d| d.id != "d001");
    stored.push(doc);
    store
        .delete(&Key::new("s", "c", "d002").unwrap())
        .await
        .unwrap();
    stored.retain(|d| d.id != "d002");
    walk(&store, &stored, &query).await;
    drop(store);
    // Reopening with the same declaration builds nothing and serves the same answers;
    // the same name with other fields is refused, naming the index.
    let store = Store::new(SqliteStore::open_with_options(&db, options(vec![index])).unwrap());
    walk(&store, &stored, &query).await;
    drop(store);
    let other = Index::parse("c", "by_status_score", ["status", "score"]).unwrap();
    match SqliteStore::open_with_options(&db, options(vec![other])) {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("\"by_status_score\""), "{message}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // Without the declaration the index is not read (it stays maintained in the file).
    let store = Store::new(SqliteStore::open(&db).unwrap());
    assert_eq!(store.explain("s", "c", &query).await.unwrap().index, None);
    walk(&store, &stored, &query).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_stay_inside_literals() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hostile.db");
    let paths = [
        "it's",
        r#"a"b"#,
        "x'); DROP TABLE documents; --",
        "y -- comment",
        "é.'ü'",
        "semi;colon",
    ];
    let indexes: Vec<Index> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| Index::new("c", format!("h{i}"), [docstore::Order::desc(*p)]))
        .collect();
    let store = Store::new(SqliteStore::open_with_options(&db, options(indexes.clone())).unwrap());
    let mut stored = Vec::new();
    for i in 0..30 {
        let data = json!({
            "it's": i % 5, "a\"b": format!("v{}", i % 3), "x'); DROP TABLE documents; --": i,
            "y -- comment": -(i as i64), "é": {"'ü'": i % 4}, "semi;colon": i % 2 == 0,
        });
        let key = Key::new("s", "c", format!("h{i:02}")).unwrap();
        stored.push(
            store
                .create(&key, docstore::object(data).unwrap(), "a")
                .await
                .unwrap(),
        );
    }
    for (i, path) in paths.iter().enumerate() {
        let query = Query::new().order_by_desc(*path).limit(4);
        let plan = store.explain("s", "c", &query).await.unwrap();
        assert_eq!(plan.index, Some(format!("h{i}")), "{path}: {plan}");
        walk(&store, &stored, &query).await;
    }
    drop(store);
    // The file is intact and the declarations were recorded verbatim.
    let store = Store::new(SqliteStore::open_with_options(&db, options(indexes)).unwrap());
    walk(
        &store,
        &stored,
        &Query::new().order_by_desc("it's").limit(3),
    )
    .await;
    let conn = rusqlite::Connection::open(&db).unwrap();
    let fields: Vec<String> = conn
        .prepare("SELECT fields FROM indexes ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(fields.len(), paths.len());
    assert!(fields[2].contains("DROP TABLE documents"), "{fields:?}");
    let count: i64 = conn
        .query_row("SELECT count(*) FROM documents", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 30);
}

/// Walks every page of `query` and returns the documents walked and how many document rows
/// the walk read (`SqliteStore::documents_read`).
async fn walk_counting(sqlite: &SqliteStore, query: &Query) -> (usize, u64) {
    let store = Store::new(sqlite.clone());
    let before = sqlite.documents_read();
    let mut cursor = None;
    let mut walked = 0;
    loop {
        let page = store
            .query("s", "c", &query.clone().after(cursor))
            .await
            .unwrap();
        walked += page.documents.len();
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    (walked, sqlite.documents_read() - before)
}

/// The tickets of the walk tests: 4 000, a quarter of them open (998), five archived.
const TICKETS: usize = 4_000;

async fn write_tickets(store: &Store) {
    let writes: Vec<docstore::Write> = (0..TICKETS)
        .map(|i| {
            let status = match i {
                _ if i % 997 == 0 => "archived",
                _ if i % 4 == 0 => "open",
                _ => "closed",
            };
            docstore::Write::create(
                Key::new("s", "c", format!("t{i:05}")).unwrap(),
                docstore::object(json!({"status": status, "score": (i * 7) % 100})).unwrap(),
            )
        })
        .collect();
    for chunk in writes.chunks(50) {
        store.write_all(chunk, "a").await.unwrap();
    }
}

/// Streams `query` (`Store::stream`, what `query --all` does) and returns the documents
/// walked and how many document rows the walk read.
async fn stream_counting(sqlite: &SqliteStore, query: &Query) -> (Vec<Document>, u64) {
    let store = Store::new(sqlite.clone());
    let before = sqlite.documents_read();
    let walked: Vec<Document> = store.stream("s", "c", query).try_collect().await.unwrap();
    (walked, sqlite.documents_read() - before)
}

/// A walk in an order no index follows reads the matches once and sorts them once: about
/// the collection (finding the matches in id order stops at each page, so it reads the
/// matches and what the filter skips) plus the matches (read again by id, a page at a time),
/// not pages × collection (each page's statement sorting every row again). With the index
/// declared the walk reads each match about once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_walk_reads_the_collection_once_without_an_index() {
    let by_score = Query::new()
        .filter(Filter::eq("status", "open"))
        .order_by_desc("score")
        .limit(100);
    for declared in [
        vec![],
        vec![Index::parse("c", "by_status_score", ["status", "-score"]).unwrap()],
    ] {
        let indexed = !declared.is_empty();
        let sqlite = SqliteStore::in_memory_with_options(options(declared)).unwrap();
        let store = Store::new(sqlite.clone());
        write_tickets(&store).await;
        let plan = store.explain("s", "c", &by_score).await.unwrap();
        assert_eq!(plan.walk_sorts_once(), !indexed, "{plan}");
        let (walked, read) = stream_counting(&sqlite, &by_score).await;
        let stored: Vec<Document> = store
            .stream("s", "c", &Query::new())
            .try_collect::<Vec<_>>()
            .await
            .unwrap();
        let expected = evaluate(
            &stored,
            &Query {
                limit: None,
                ..by_score.clone()
            },
        )
        .unwrap();
        assert_eq!(walked, expected.documents);
        let matches = walked.len() as u64;
        assert_eq!(matches, 998);
        let bound = if indexed {
            2 * matches
        } else {
            TICKETS as u64 + 2 * matches
        };
        assert!(
            read <= bound,
            "indexed: {indexed}; {read} rows for {matches} matches"
        );
    }
}

/// An index that pins `status` but orders by `-score` would read and sort all open tickets
/// for every page of an id-order walk (`docs/contract.md`, "Indexes": an index never makes a
/// query costlier): the walk reads O(matches) rows in total, as without the index, not
/// pages × range; a rare status is still read through the index, by its few entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_order_walk_reads_each_match_about_once_with_a_sorting_index_declared() {
    let sqlite = SqliteStore::in_memory_with_options(options(vec![
        Index::parse("c", "by_status_score", ["status", "-score"]).unwrap(),
    ]))
    .unwrap();
    let store = Store::new(sqlite.clone());
    write_tickets(&store).await;
    let open = Query::new().filter(Filter::eq("status", "open")).limit(100);
    let (matches, read) = walk_counting(&sqlite, &open).await;
    assert_eq!(matches, 998);
    // Each page reads its documents and the one after; sorting the range per page would
    // read about 10 pages × 996 rows.
    assert!(
        read <= 2 * matches as u64,
        "{read} rows for {matches} matches"
    );
    let plan = store.explain("s", "c", &open).await.unwrap();
    assert_eq!(plan.index, None, "{plan}");
    assert_eq!(plan.candidates.len(), 2, "{plan}");
    assert_eq!(
        plan.candidates[1].index.as_deref(),
        Some("by_status_score"),
        "{plan}"
    );
    assert!(plan.why.is_some(), "{plan}");
    let rare = Query::new()
        .filter(Filter::eq("status", "archived"))
        .limit(2);
    let (matches, read) = walk_counting(&sqlite, &rare).await;
    assert_eq!(matches, 5);
    assert!(
        read <= 4 * matches as u64,
        "{read} rows for {matches} matches"
    );
    let plan = store.explain("s", "c", &rare).await.unwrap();
    assert_eq!(plan.index.as_deref(), Some("by_status_score"), "{plan}");
    assert_eq!(plan.reading, docstore::index::Reading::SortsRange, "{plan}");
    assert!(
        !plan.walk_sorts_once(),
        "an id-order walk goes page by page: {plan}"
    );
    // Ordered by score, the index reads in order: each page its own rows and one more.
    let by_score = Query::new()
        .filter(Filter::eq("status", "open"))
        .order_by_desc("score")
        .limit(100);
    let (matches, read) = walk_counting(&sqlite, &by_score).await;
    assert_eq!(matches, 998);
    assert!(
        read <= 2 * matches as u64,
        "{read} rows for {matches} matches"
    );
}

/// Declaring a unique index over documents that share a value refuses the declaration,
/// naming the pairs, and builds nothing; once the values are distinct it builds and is
/// enforced. Uniqueness is part of the recorded declaration: the same name declared plain
/// is a contradiction.
#[tokio::test]
async fn a_unique_declaration_over_duplicates_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.db");
    let plain = Store::new(SqliteStore::open(&path).unwrap());
    for (site, id, email) in [
        ("s", "a", "x"),
        ("s", "b", "x"),
        ("s", "c", "y"),
        ("t", "d", "x"),
    ] {
        let key = Key::new(site, "users", id).unwrap();
        let data = docstore::object(json!({ "email": email })).unwrap();
        plain.create(&key, data, "").await.unwrap();
    }
    let unique = || {
        options(vec![
            Index::parse("users", "by_email", ["email"])
                .unwrap()
                .unique(),
        ])
    };
    let refused = SqliteStore::open_with_options(&path, unique()).unwrap_err();
    match &refused {
        Error::InvalidArgument(message) => {
            assert!(message.contains("s/users/a and s/users/b"), "{message}");
            assert!(message.contains("1 pairs"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Nothing was recorded: once the values are distinct, the declaration builds.
    let b = Key::new("s", "users", "b").unwrap();
    plain
        .update(&b, &docstore::object(json!({"email": "z"})).unwrap(), "")
        .await
        .unwrap();
    let store = Store::new(SqliteStore::open_with_options(&path, unique()).unwrap());
    let taken = store
        .create(
            &Key::new("s", "users", "e").unwrap(),
            docstore::object(json!({"email": "y"})).unwrap(),
            "",
        )
        .await;
    assert!(
        matches!(taken, Err(Error::UniqueViolation { ref holder, .. }) if holder == "c"),
        "{taken:?}"
    );
    let as_plain = options(vec![Index::parse("users", "by_email", ["email"]).unwrap()]);
    let contradiction = SqliteStore::open_with_options(&path, as_plain).unwrap_err();
    assert!(
        contradiction.to_string().contains("(unique)"),
        "{contradiction}"
    );
}

/// Documents that share a unique value through a change from outside the store (a
/// hand-edited file) are what `recount` (`docstore fsck`) reports, in id order, and never
/// repairs.
#[tokio::test]
async fn recount_reports_documents_sharing_a_unique_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let declared = |index: Index| options(vec![index]);
    let plain = Index::parse("users", "by_email", ["email"]).unwrap();
    let store = Store::new(SqliteStore::open_with_options(&path, declared(plain.clone())).unwrap());
    for (id, email) in [("c", "x"), ("a", "x"), ("b", "y")] {
        let key = Key::new("s", "users", id).unwrap();
        store
            .create(
                &key,
                docstore::object(json!({ "email": email })).unwrap(),
                "",
            )
            .await
            .unwrap();
    }
    drop(store);
    // The file edited by hand: the index recorded unique over documents sharing a value.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE indexes SET is_unique = 1", [])
        .unwrap();
    drop(conn);
    let store =
        Store::new(SqliteStore::open_with_options(&path, declared(plain.unique())).unwrap());
    let shared = docstore::UniqueProblem::Shared {
        collection: "users".into(),
        index: "by_email".into(),
        ids: vec!["a".into(), "c".into()],
    };
    for mode in [docstore::RecountMode::Report, docstore::RecountMode::Repair] {
        let found = store.recount("s", mode).await.unwrap().unique;
        assert_eq!(found, std::slice::from_ref(&shared));
    }
    assert_eq!(
        store
            .recount("t", docstore::RecountMode::Report)
            .await
            .unwrap()
            .unique,
        []
    );
}

/// A document of the next test, created through `store`.
async fn ticket(store: &Store, id: &str, status: &str, score: i64) -> Document {
    let data = docstore::object(json!({"status": status, "score": score})).unwrap();
    let key = Key::new("s", "c", id).unwrap();
    store.create(&key, data, "a").await.unwrap()
}

/// A page read from an index in the query's order with no filter left over: a page that
/// ends the matches has no next; one more match gives it a next (its row read, not parsed),
/// and the page after it holds that match alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_in_index_order_has_a_next_exactly_when_a_match_follows() {
    let index = Index::parse("c", "by_status_score", ["status", "-score"]).unwrap();
    let sqlite = SqliteStore::in_memory_with_options(options(vec![index])).unwrap();
    let store = Store::new(sqlite.clone());
    let mut stored = Vec::new();
    for (i, score) in [5, 9, 7].into_iter().enumerate() {
        stored.push(ticket(&store, &format!("open{i}"), "open", score).await);
        stored.push(ticket(&store, &format!("closed{i}"), "closed", score).await);
    }
    let query = Query::new()
        .filter(Filter::eq("status", "open"))
        .order_by_desc("score")
        .limit(3);
    let plan = store.explain("s", "c", &query).await.unwrap();
    assert_eq!(plan.index.as_deref(), Some("by_status_score"), "{plan}");
    let page = store.query("s", "c", &query).await.unwrap();
    let scores: Vec<_> = page
        .documents
        .iter()
        .map(|d| d.data["score"].clone())
        .collect();
    assert_eq!(scores, [json!(9), json!(7), json!(5)]);
    assert_eq!(page.next, None, "three matches, a page of three");
    stored.push(ticket(&store, "open3", "open", 1).await);
    let before = sqlite.documents_read();
    let page = store.query("s", "c", &query).await.unwrap();
    assert_eq!(page.documents.len(), 3);
    assert_eq!(
        sqlite.documents_read() - before,
        4,
        "the page and the row after it"
    );
    let next = page.next.expect("a fourth match follows the page");
    let rest = store
        .query("s", "c", &query.clone().after(Some(next)))
        .await;
    let rest = rest.unwrap();
    assert_eq!(rest.documents.len(), 1);
    assert_eq!(rest.documents[0].id, "open3");
    assert_eq!(rest.next, None);
    walk(&store, &stored, &query).await;
}
