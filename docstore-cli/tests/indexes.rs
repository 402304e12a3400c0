//! `docstore explain` and `docstore index list|add|build|drop` with the real binary: on the
//! DynamoDB emulator (dynoxide, through `scripts/with-dynamodb-emulators`, which sets
//! DOCSTORE_DYNOXIDE_ENDPOINT; without it these tests fail rather than skip) and on SQLite.

use assert_cmd::Command;
use serde_json::{Value, json};

fn endpoint() -> String {
    std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run the tests through \
         scripts/with-dynamodb-emulators (scripts/test does)",
    )
}

fn docstore(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("docstore")
        .unwrap()
        .env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .env("AWS_ACCESS_KEY_ID", "docstore-test")
        .env("AWS_SECRET_ACCESS_KEY", "docstore-test")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = docstore(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn dynamodb_indexes_from_config_then_added_built_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let table = format!("cli-idx-{}-{nanos}", std::process::id());
    let config = dir.path().join("app.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[app]
name = "tickets"

[database]
backend = "dynamodb"

[database.dynamodb]
table = "{table}"
region = "us-east-1"
endpoint = "{}"
max_scan = 5

[[database.indexes]]
collection = "tickets"
name = "by_priority"
fields = ["-priority"]
"#,
            endpoint()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let with = |args: &[&str]| {
        let mut all = vec!["--config", config, "--site", "s"];
        all.extend_from_slice(args);
        ok(&all)
    };
    with(&["create-table"]);
    for n in 0..20 {
        with(&[
            "create",
            "tickets",
            &format!("t{n:02}"),
            &json!({"priority": n, "status": if n % 2 == 0 { "open" } else { "done" }}).to_string(),
        ]);
    }
    let listed = json_lines(&with(&["index", "list"]));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], "by_priority");
    assert_eq!(listed[0]["state"], "built");
    assert_eq!(listed[0]["partitions"], 8, "the index's GSI partitions");

    // Served by the index past max_scan 5: the true top 3.
    let plan = json_lines(&with(&[
        "explain",
        "tickets",
        "order by priority desc limit 3",
    ]));
    assert_eq!(plan[0]["index"], "by_priority", "{plan:?}");
    assert_eq!(plan[0]["strongly_consistent"], false);
    let page = with(&[
        "query",
        "tickets",
        "order by priority desc limit 3",
        "--jsonl",
    ]);
    let priorities: Vec<Value> = json_lines(&page)
        .iter()
        .map(|d| d["data"]["priority"].clone())
        .collect();
    assert_eq!(priorities, vec![json!(19), json!(18), json!(17)], "{page}");

    // Another index, added to the table that holds documents, then built.
    let added = json_lines(&with(&[
        "index",
        "add",
        "tickets",
        "by_status",
        "status",
        "-priority",
    ]));
    assert_eq!(added[0]["state"], "building");
    let not_yet = json_lines(&with(&[
        "explain",
        "tickets",
        r#"status = "open" order by priority desc"#,
    ]));
    assert_ne!(
        not_yet[0]["index"], "by_status",
        "not used before it is built"
    );
    let built = json_lines(&with(&["index", "build", "tickets", "by_status"]));
    assert_eq!(built[0]["state"], "built");
    let served = json_lines(&with(&[
        "explain",
        "tickets",
        r#"status = "open" order by priority desc limit 2"#,
    ]));
    assert_eq!(served[0]["index"], "by_status");
    let page = with(&[
        "query",
        "tickets",
        r#"status = "open" order by priority desc limit 2"#,
        "--jsonl",
    ]);
    let ids: Vec<Value> = json_lines(&page).iter().map(|d| d["id"].clone()).collect();
    assert_eq!(ids, vec![json!("t18"), json!("t16")]);

    with(&["index", "drop", "tickets", "by_status"]);
    let listed = json_lines(&with(&["index", "list"]));
    assert_eq!(listed.len(), 1, "{listed:?}");
}

#[test]
fn sqlite_explain_and_declared_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("app.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[database]
backend = "sqlite"

[database.sqlite]
path = "{}"

[[database.indexes]]
collection = "tickets"
name = "by_priority"
fields = ["-priority"]
"#,
            dir.path().join("app.db").display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    ok(&[
        "--config",
        config,
        "create",
        "tickets",
        "t1",
        r#"{"priority": 1}"#,
    ]);
    let listed = json_lines(&ok(&["--config", config, "index", "list"]));
    assert_eq!(listed[0]["name"], "by_priority");
    let plan = json_lines(&ok(&[
        "--config",
        config,
        "explain",
        "tickets",
        "order by priority desc limit 3",
    ]));
    assert_eq!(plan[0]["index"], "by_priority", "{plan:?}");
    assert_eq!(plan[0]["strongly_consistent"], true);
    // Every plan weighed, the chosen one first, and why it won.
    let candidates = plan[0]["candidates"].as_array().expect("candidates");
    assert_eq!(candidates.len(), 2, "{plan:?}");
    assert_eq!(candidates[0]["index"], "by_priority", "{plan:?}");
    assert_eq!(candidates[0]["reading"], "stops_at_page", "{plan:?}");
    assert_eq!(candidates[1]["index"], Value::Null, "{plan:?}");
    assert_eq!(candidates[1]["reading"], "sorts_collection", "{plan:?}");
    assert!(plan[0]["why"].is_string(), "{plan:?}");
    let out = docstore(&[
        "--config",
        config,
        "index",
        "build",
        "tickets",
        "by_priority",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("declared in --config"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
