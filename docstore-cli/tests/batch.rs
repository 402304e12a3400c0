//! `docstore batch` (atomic writes) and `docstore get-many`, with the real binary on SQLite.

use assert_cmd::Command;
use serde_json::{Value, json};

fn docstore(db: &str, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    cmd.env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", db, "--site", "s"])
        .args(args);
    if let Some(stdin) = stdin {
        cmd.write_stdin(stdin);
    }
    cmd.output().unwrap()
}

fn ok(db: &str, args: &[&str], stdin: Option<&str>) -> Value {
    let out = docstore(db, args, stdin);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_batch_applies_all_or_nothing_and_get_many_reads_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("b.db").display());
    // JSON lines on standard input: a new store file is allowed (batch writes).
    let batch = [
        json!({"op": "create", "collection": "acct", "id": "a", "data": {"balance": 10}}),
        json!({"op": "create", "collection": "acct", "id": "b", "data": {"balance": 0}}),
        json!({"op": "check", "collection": "acct", "id": "c", "version": null}),
    ]
    .map(|w| w.to_string())
    .join("\n");
    let outcomes = ok(&db, &["batch"], Some(&batch));
    assert_eq!(outcomes[0]["written"]["version"], 1);
    assert_eq!(outcomes[2], json!({"checked": true}));

    // A transfer as a JSON array in a file.
    let transfer = json!([
        {"op": "update_if", "collection": "acct", "id": "a", "patch": {"balance": 3}, "version": 1},
        {"op": "update_if", "collection": "acct", "id": "b", "patch": {"balance": 7}, "version": 1},
    ]);
    let file = dir.path().join("transfer.json");
    std::fs::write(&file, transfer.to_string()).unwrap();
    let outcomes = ok(&db, &["batch", file.to_str().unwrap()], None);
    assert_eq!(outcomes[1]["written"]["data"], json!({"balance": 7}));

    // The same transfer again: the first write is stale, nothing is written, exit 5 (conflict).
    let out = docstore(&db, &["batch", file.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("batch write 1 (") && stderr.contains("nothing was written"),
        "{stderr}"
    );
    let docs = ok(&db, &["get-many", "acct", "b", "missing", "a"], None);
    assert_eq!(docs[0]["data"], json!({"balance": 7}));
    assert_eq!(docs[1], Value::Null);
    assert_eq!(
        (
            docs[2]["data"]["balance"].clone(),
            docs[2]["version"].clone()
        ),
        (json!(3), json!(2))
    );

    // A bad write is refused before anything is written, naming its position (from 1).
    let out = docstore(
        &db,
        &["batch"],
        Some(
            r#"[{"op": "create", "collection": "acct", "id": "z", "data": {}}, {"op": "remove", "collection": "acct", "id": "a"}]"#,
        ),
    );
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("batch write 2:"));
    assert_eq!(ok(&db, &["get-many", "acct", "z"], None), json!([null]));
}
