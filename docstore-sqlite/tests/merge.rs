//! `update` merges inside SQLite (`jsonb_patch` on the stored JSONB, see `rows::merge`): the
//! result must be exactly `docstore::merge_patch`'s, and its size exactly
//! `docstore::document::data_size` of it, on data chosen to differ where a JSON text
//! round trip could (escapes, non-ASCII, control characters, number forms, nesting, nulls,
//! objects replacing scalars and the reverse).

use docstore::document::data_size;
use docstore::{Data, Error, Key, Store, StoreOptions};
use docstore_sqlite::SqliteStore;
use serde_json::json;

fn obj(value: serde_json::Value) -> Data {
    docstore::object(value).unwrap()
}

/// (stored data, patch) pairs.
fn cases() -> Vec<(Data, Data)> {
    let stored = obj(json!({
        "s": "quote \" backslash \\ slash / tab \t newline \n nul \u{0} bell \u{7} del \u{7f}",
        "u": "é 漢字 😀 \u{2028} \u{fffd}",
        "big": 18446744073709551615u64,
        "neg": -9223372036854775808i64,
        "f": 0.1,
        "tiny": 5e-324,
        "huge": 1.7976931348623157e308,
        "negzero": -0.0,
        "arr": [1, "two", {"three": [3.5, null, true]}],
        "nested": {"a": {"b": {"c": 1, "d": "x"}}, "keep": false},
        "key with \"quotes\" and \\": 1,
        "é": {"漢": 2},
        "scalar": 7,
    }));
    vec![
        (stored.clone(), Data::new()),
        (
            stored.clone(),
            obj(json!({
                "s": null,
                "u": "new \u{1} \" \\ 😀",
                "nested": {"a": {"b": {"c": null, "e": [null, {"z": null}]}}, "keep": null},
                "arr": {"now": "an object", "gone": null},
                "scalar": {"x": {"y": null, "w": 1e300}},
                "added": {"deep": {"deeper": {"n": null, "m": -1.5e-300}}},
                "é": {"漢": null, "字": "\u{7f}"},
                "key with \"quotes\" and \\": [1, 2],
                "missing": null,
            })),
        ),
        (
            stored.clone(),
            obj(
                json!({"nested": 3, "arr": [], "big": 1, "f": 1e21, "new\nline": "\u{1f}", "grow": "a string long enough to make this merge larger than what is stored"}),
            ),
        ),
        (
            Data::new(),
            obj(json!({"a": {"b": null, "c": {}}, "d": null, "e": ""})),
        ),
    ]
}

#[tokio::test]
async fn sqlite_merge_is_merge_patch_with_the_exact_size() {
    let mut refused = 0;
    for (i, (stored, patch)) in cases().into_iter().enumerate() {
        let mut expected = stored.clone();
        docstore::merge_patch(&mut expected, &patch);
        let size = data_size(&expected);
        // At the limit the update is written; one byte under, refused with the exact size.
        for (limit, fits) in [(size, true), (size - 1, false)] {
            let options = StoreOptions::default().with_max_doc_bytes(limit.max(data_size(&stored)));
            let store = Store::new(SqliteStore::in_memory_with_options(options).unwrap());
            let key = Key::new("s", "c", format!("case-{i}")).unwrap();
            store.create(&key, stored.clone(), "a").await.unwrap();
            let merged = store.update(&key, &patch, "b").await;
            if fits || limit < data_size(&stored) {
                let doc = merged.unwrap();
                assert_eq!(doc.data, expected, "case {i}");
                assert_eq!(doc.version, 2);
                let read = store.get(&key).await.unwrap().unwrap();
                assert_eq!(
                    read, doc,
                    "case {i}: what update returned is what is stored"
                );
            } else {
                match merged.unwrap_err() {
                    Error::TooLarge { size: reported, .. } => {
                        assert_eq!(reported, size, "case {i}");
                        refused += 1;
                    }
                    other => panic!("case {i}: {other:?}"),
                }
                let read = store.get(&key).await.unwrap().unwrap();
                assert_eq!(
                    (read.version, &read.data),
                    (1, &stored),
                    "case {i}: unchanged"
                );
            }
        }
    }
    // The cases that grow the data were refused one byte under their size.
    assert!(refused >= 2, "{refused}");
}

/// The same through `write_all` (`Update` and `UpdateIf` in one batch).
#[tokio::test]
async fn batch_merges_are_merge_patch() {
    let store = Store::new(SqliteStore::in_memory().unwrap());
    let mut writes = Vec::new();
    let mut expected = Vec::new();
    for (i, (stored, patch)) in cases().into_iter().enumerate() {
        let key = Key::new("s", "c", format!("case-{i}")).unwrap();
        store.create(&key, stored.clone(), "a").await.unwrap();
        let mut merged = stored;
        docstore::merge_patch(&mut merged, &patch);
        expected.push(merged);
        writes.push(match i % 2 {
            0 => docstore::Write::update(key, patch),
            _ => docstore::Write::update_if(key, patch, 1),
        });
    }
    let outcomes = store.write_all(&writes, "b").await.unwrap();
    for (i, (outcome, expected)) in outcomes.iter().zip(&expected).enumerate() {
        assert_eq!(&outcome.document().unwrap().data, expected, "case {i}");
    }
}
