//! The server's index keys (`sql/keys.sql` and each index's generated function) against the
//! core's encoding (`docstore::index::key`): for every document the server keys, the bytes
//! are the ones `CompiledIndex::key` gives, so an index read in key order is the contract's
//! total order; documents it cannot key (kept in `raw`, or an object in an indexed field)
//! get the empty key. Declared fields with hostile names (quotes, backslashes, dollar quotes,
//! SQL comments) stay literals. Run under `scripts/with-postgres`.

use docstore::index::{Index, IndexSet};
use docstore::{Store, StoreOptions};
use docstore_postgres::PostgresStore;
use serde_json::{Value, json};

const HOSTILE: &str = "it's a \\ $body$ --;\"x";

mod common;

fn url(schema: &str) -> String {
    format!("{}?schema={schema}", common::server())
}

/// The name is part of every store's schema (its key column and B-tree): a change to it
/// would build every declared index again under another name.
#[test]
fn an_index_keeps_its_name() {
    use docstore::Order;
    let index = Index::new(
        "tickets",
        "by_status",
        [Order::asc("status"), Order::desc("score")],
    );
    assert_eq!(docstore_postgres::index_name(&index), "ix_aa81de405f1c7ef7");
}

/// Values of every kind, numbers at the encoding's edges.
fn values() -> Vec<Value> {
    let mut values = vec![
        json!(null),
        json!(false),
        json!(true),
        json!(0),
        json!(-0.0),
        json!(0.0),
        json!(1),
        json!(1.0),
        json!(-1),
        json!(0.1),
        json!(-2.5),
        json!(1e300),
        json!(-1e-300),
        json!(9007199254740992u64),
        json!(9007199254740993u64),
        json!(-9007199254740993i64),
        json!(u64::MAX),
        json!(u64::MAX - 1),
        json!(i64::MIN),
        json!(i64::MIN + 1),
        json!(i64::MAX),
        json!(1.5e19),
        json!(-9.3e18),
        json!(123456789012345678u64),
        json!(""),
        json!("a"),
        json!("ab"),
        json!("é\u{1F600}"),
        json!("nul\u{0}in"),
        // Backslashes: the server takes a string's bytes through `bytea` input, whose escape
        // character it is; `\x` starts its hex format.
        json!("\\x41"),
        json!("a\\b\\\\c\\"),
        json!([]),
        json!([1, "a", [null, true]]),
        json!([{"o": 1}]),
        json!({"o": 1}),
    ];
    for n in [2u64.pow(60) + 1, 2u64.pow(63) + 3, 2u64.pow(62) - 1] {
        values.push(json!(n));
        values.push(json!(-(n as i128).min(i64::MAX as i128) as i64));
    }
    values
}

fn holds_object(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Object(_)) => true,
        Some(Value::Array(items)) => items.iter().any(|v| holds_object(Some(v))),
        _ => false,
    }
}

#[tokio::test]
async fn the_server_keys_documents_as_the_core_does() {
    let run = std::process::id();
    let schema = format!("keys_{run:x}");
    let hostile = HOSTILE
        .replace('\\', "\\\\")
        .replace('.', "\\.")
        .replace('$', "\\$");
    let indexes = IndexSet::new([
        Index::parse("c", "by_n", ["n", "-$updated_at"]).unwrap(),
        Index::parse("c", "by_n_desc", ["-n"]).unwrap(),
        Index::parse(
            "c",
            "hostile",
            [format!("deep.{hostile}"), "$version".into()],
        )
        .unwrap(),
    ])
    .unwrap();
    let driver = PostgresStore::open_with_options(
        &url(&schema),
        StoreOptions::default().with_indexes(indexes.clone()),
    )
    .await
    .unwrap();
    let store = Store::new(driver.clone());
    for (i, value) in values().into_iter().enumerate() {
        let data = json!({"n": value, "deep": {HOSTILE: value}});
        let key = docstore::Key::new("s", "c", format!("d{i:03}")).unwrap();
        store
            .create(&key, docstore::object(data).unwrap(), "t")
            .await
            .unwrap();
    }
    // An id with backslashes (every key ends with the id's bytes).
    store
        .create(
            &docstore::Key::new("s", "c", "\\x41\\").unwrap(),
            docstore::object(json!({"n": "\\"})).unwrap(),
            "t",
        )
        .await
        .unwrap();
    store
        .create(
            &docstore::Key::new("s", "c", "missing").unwrap(),
            docstore::object(json!({})).unwrap(),
            "t",
        )
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(
        &url(&schema).replace(&format!("?schema={schema}"), ""),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let (mut checked, mut compared) = (0, 0);
    for index in indexes.iter() {
        let name = docstore_postgres::index_name(index.declaration());
        // The key column queries read, and the function computing it now.
        let sql = format!(
            "SELECT id, {name}, \"{schema}\".{name}(collection, data, raw, id, created_at, \
             updated_at, created_by, updated_by, version) FROM \"{schema}\".documents \
             WHERE collection = 'c' ORDER BY id"
        );
        for row in client.query(&sql, &[]).await.unwrap() {
            let (id, key): (String, Vec<u8>) = (row.get(0), row.get(1));
            assert_eq!(
                Some(&key),
                row.get::<_, Option<Vec<u8>>>(2).as_ref(),
                "{name}: {id}"
            );
            let doc = store
                .get(&docstore::Key::new("s", "c", &id).unwrap())
                .await
                .unwrap()
                .unwrap();
            if key.is_empty() {
                let fields = index.fields().iter().map(|(path, _)| path.resolve(&doc));
                let unkeyable = fields.into_iter().any(|v| holds_object(v.as_deref()))
                    || serde_json::to_string(&doc.data)
                        .unwrap()
                        .contains("\\u0000")
                    || serde_json::to_string(&doc.data).unwrap().contains("-0.0");
                assert!(unkeyable, "{name} gave {id} ({:?}) the empty key", doc.data);
            } else {
                assert_eq!(key, index.key(&doc), "{name}: {id} ({:?})", doc.data);
                compared += 1;
            }
            checked += 1;
        }
    }
    assert!(
        checked > 100 && compared > 80,
        "checked {checked} keys, {compared} not empty"
    );
    // Served by the expression index, as the cached statement's generic plan reads it.
    let query = docstore::Query::new().order_by_desc("n").limit(3);
    let explain = store.explain("s", "c", &query).await.unwrap();
    let chosen = indexes
        .for_collection("c")
        .iter()
        .find(|i| Some(i.name()) == explain.index.as_deref());
    let function = docstore_postgres::index_name(chosen.expect("served by an index").declaration());
    assert!(
        explain
            .key_range
            .contains(&format!("Index Scan Backward using {function}")),
        "{explain}"
    );
    println!("{explain}");
    let query = docstore::Query::new()
        .filter(docstore::Filter::gt(format!("deep.{hostile}"), 1))
        .limit(3);
    let explain = store.explain("s", "c", &query).await.unwrap();
    assert_eq!(explain.index.as_deref(), Some("hostile"), "{explain}");
    assert!(
        explain.key_range.contains("Index Scan using ix_"),
        "{explain}"
    );
    println!("{explain}");
    driver.drop_schema().await.unwrap();
}

/// A schema laid down before key columns — each declared index an expression index over its
/// key function — gets the column and its B-tree at the next open declaring the index, with
/// the keys of the documents already there, and its queries read the column's index.
#[tokio::test]
async fn an_expression_index_of_an_earlier_version_becomes_a_key_column() {
    let url = common::schema_url("keys_upgrade");
    let schema = url.rsplit("schema=").next().unwrap().to_owned();
    let indexes = IndexSet::new([Index::parse("c", "by_n", ["n"]).unwrap()]).unwrap();
    let options = || StoreOptions::default().with_indexes(indexes.clone());
    let driver = PostgresStore::open_with_options(&url, options())
        .await
        .unwrap();
    let store = Store::new(driver.clone());
    for n in 0..300 {
        let key = docstore::Key::new("s", "c", format!("d{n:03}")).unwrap();
        let data = docstore::object(json!({"n": 299 - n})).unwrap();
        store.create(&key, data, "t").await.unwrap();
    }
    let name = docstore_postgres::index_name(indexes.iter().next().unwrap().declaration());
    let args = "collection, data, raw, id, created_at, updated_at, created_by, updated_by, version";
    let (client, connection) = tokio_postgres::connect(&common::server(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    // The earlier layout: no column; the index over the function.
    let earlier = format!(
        "DROP INDEX \"{schema}\".{name}; ALTER TABLE \"{schema}\".documents DROP COLUMN {name}; \
         CREATE INDEX {name} ON \"{schema}\".documents (site, \"{schema}\".{name}({args})) \
         WHERE \"{schema}\".{name}({args}) IS NOT NULL"
    );
    client.batch_execute(&earlier).await.unwrap();
    drop((store, driver));

    let driver = PostgresStore::open_with_options(&url, options())
        .await
        .unwrap();
    let store = Store::new(driver.clone());
    let query = docstore::Query::new().order_by("n").limit(5);
    let page = store.query("s", "c", &query).await.unwrap();
    let ids: Vec<&str> = page.documents.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["d299", "d298", "d297", "d296", "d295"]);
    let explain = store.explain("s", "c", &query).await.unwrap();
    assert!(
        explain
            .key_range
            .contains(&format!("Index Scan using {name}")),
        "{explain}"
    );
    let definition: String = client
        .query_one(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
            &[&schema, &name],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        definition.ends_with(&format!("(site, {name}) WHERE ({name} IS NOT NULL)")),
        "{definition}"
    );
    driver.drop_schema().await.unwrap();
}
