//! How `docstore batch` takes its writes (docs/contract.md, "The command line"): inline JSON
//! as `create`, `put` and `update` take theirs, `@FILE`, a bare file path, or standard input;
//! and its help states the batch limits.

use assert_cmd::Command;
use serde_json::{Value, json};

fn docstore(db: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    cmd.env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", db, "--site", "s"])
        .args(args);
    cmd.output().unwrap()
}

fn ok(db: &str, args: &[&str]) -> Value {
    let out = docstore(db, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_batch_given_inline_is_json_as_for_put() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("b.db").display());
    let array = json!([
        {"op": "create", "collection": "acct", "id": "a", "data": {"balance": 10}},
        {"op": "create", "collection": "acct", "id": "b", "data": {"balance": 0}},
    ])
    .to_string();
    let outcomes = ok(&db, &["batch", &array]);
    assert_eq!(outcomes[1]["written"]["id"], "b", "{outcomes}");
    // JSON lines inline too (one object, with white space before it).
    let line = json!({"op": "update", "collection": "acct", "id": "a", "patch": {"balance": 3}});
    let outcomes = ok(&db, &["batch", &format!("  {line}\n")]);
    assert_eq!(outcomes[0]["written"]["data"], json!({"balance": 3}));
    // Invalid inline JSON is exit 6 naming the batch, not a missing file.
    let out = docstore(&db, &["batch", "[{\"op\": "]);
    assert_eq!(out.status.code(), Some(6));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not valid JSON"), "{stderr}");
    // A bare file path is still a file.
    let file = dir.path().join("writes.json");
    std::fs::write(
        &file,
        json!([{"op": "check", "collection": "acct", "id": "b", "version": 1}]).to_string(),
    )
    .unwrap();
    let outcomes = ok(&db, &["batch", file.to_str().unwrap()]);
    assert_eq!(outcomes, json!([{"checked": true}]));
}

#[test]
fn batch_help_states_the_limits() {
    let out = Command::cargo_bin("docstore")
        .unwrap()
        .args(["batch", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("at most 50 writes"), "{help}");
    assert!(help.contains("3 000 000 bytes"), "{help}");
}
