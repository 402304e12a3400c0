//! The real `docstore` binary moving documents between SQLite and the DynamoDB emulator
//! (dynoxide). Run through `scripts/with-dynamodb-emulators` (as `scripts/test` does), which
//! sets DOCSTORE_DYNOXIDE_ENDPOINT; without it these tests fail rather than skip.

use assert_cmd::Command;
use serde_json::{Value, json};

fn endpoint() -> String {
    std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run the tests through \
         scripts/with-dynamodb-emulators (scripts/test does)",
    )
}

fn dynamodb_url(table: &str) -> String {
    format!(
        "dynamodb://{table}?region=us-east-1&endpoint={}",
        endpoint()
    )
}

fn docstore(store: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    cmd.env_remove("DOCSTORE_URL")
        .env("AWS_ACCESS_KEY_ID", "docstore-test")
        .env("AWS_SECRET_ACCESS_KEY", "docstore-test")
        .args(["--store", store, "--site", "s"])
        .args(args);
    cmd.output().unwrap()
}

fn ok(store: &str, args: &[&str]) -> String {
    let out = docstore(store, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn unique_table() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    format!("cli-{}-{}", std::process::id(), nanos.as_nanos())
}

#[test]
fn export_import_and_copy_round_trip_through_dynamodb() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("src.db").display());
    let lines: Vec<String> = (0..150)
        .map(|i| {
            let collection = ["a", "b", "c"][i % 3];
            json!({"site": "s", "collection": collection, "id": format!("doc-{i:03}"),
                "data": {"i": i, "big": u64::MAX, "f": 1.0, "text": "é\"\\", "nested": {"k": [i, null]}},
                "created_at": 1_600_000_000_000_000_000i64 + i as i64, "updated_at": 1_700_000_000_000_000_000i64,
                "created_by": "gen", "updated_by": format!("u{i}"), "version": 1 + i % 4})
            .to_string()
        })
        .collect();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    ok(&sqlite, &["import", input.to_str().unwrap()]);
    let original = ok(&sqlite, &["export"]);
    assert_eq!(original.lines().count(), 150);

    // SQLite -> DynamoDB with copy.
    let table = unique_table();
    let dynamodb = dynamodb_url(&table);
    assert_eq!(
        serde_json::from_str::<Value>(&ok(&dynamodb, &["create-table"])).unwrap(),
        json!({"table": table, "status": "created"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&ok(&dynamodb, &["create-table"])).unwrap(),
        json!({"table": table, "status": "exists"})
    );
    let summary: Value = serde_json::from_str(&ok(&sqlite, &["copy", "--to", &dynamodb])).unwrap();
    assert_eq!(summary["imported"], json!(150));
    assert_eq!(
        ok(&dynamodb, &["export"]),
        original,
        "SQLite -> DynamoDB changed documents"
    );
    assert_eq!(ok(&dynamodb, &["count"]).trim(), "150");

    // DynamoDB -> SQLite with export | import.
    let back = format!("sqlite:{}", dir.path().join("back.db").display());
    let dump = dir.path().join("dump.jsonl");
    ok(&dynamodb, &["export", "--output", dump.to_str().unwrap()]);
    ok(&back, &["import", dump.to_str().unwrap()]);
    assert_eq!(
        ok(&back, &["export"]),
        original,
        "DynamoDB -> SQLite changed documents"
    );

    // Import into DynamoDB is resumable too.
    let table2 = unique_table();
    let dynamodb2 = dynamodb_url(&table2);
    ok(&dynamodb2, &["create-table"]);
    ok(&dynamodb2, &["import", dump.to_str().unwrap()]);
    let again: Value =
        serde_json::from_str(&ok(&dynamodb2, &["import", dump.to_str().unwrap()])).unwrap();
    assert_eq!(
        (again["imported"].clone(), again["already_present"].clone()),
        (json!(0), json!(150))
    );
    assert_eq!(ok(&dynamodb2, &["export"]), original);
}

#[test]
fn a_missing_table_is_a_clear_error() {
    let out = docstore(&dynamodb_url(&unique_table()), &["count"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cli-"),
        "the error names the table: {stderr}"
    );
    // Said for someone at a shell: the command to run, no Rust API, no debug dump.
    assert!(stderr.contains("docstore --store"), "{stderr}");
    assert!(stderr.contains("create-table"), "{stderr}");
    assert!(!stderr.contains("DynamoStore::"), "{stderr}");
    assert!(!stderr.contains("ErrorMetadata"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// A query past `max_scan` warns on stderr once (the CLI's own words; the library's log line
/// only with -v) and exits 11 unless --allow-partial; `--all` sorts the whole answer once.
#[test]
fn a_partial_answer_is_warned_about_and_has_its_own_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..30)
        .map(|i| {
            json!({"site": "s", "collection": "c", "id": format!("d{i:02}"), "data": {"n": i},
                "created_at": 1, "updated_at": 1, "created_by": "g", "updated_by": "g",
                "version": 1})
            .to_string()
        })
        .collect();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines.join("\n")).unwrap();
    let table = unique_table();
    ok(&dynamodb_url(&table), &["create-table"]);
    ok(&dynamodb_url(&table), &["import", input.to_str().unwrap()]);
    let small = format!("{}&max_scan=10", dynamodb_url(&table));

    let out = docstore(&small, &["query", "c", "order by n desc limit 5"]);
    assert_eq!(out.status.code(), Some(11));
    let page: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["exhausted_scan"], json!(true));
    assert_eq!(
        page["documents"][0]["id"],
        json!("d09"),
        "the partial answer is still shown"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("warning: partial answer").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("max_scan = 10"), "{stderr}");
    assert!(
        !stderr.contains("stopped reading at max_scan"),
        "the library's log says it a second time: {stderr}"
    );
    assert!(stderr.contains("--allow-partial"), "{stderr}");
    assert!(
        stderr.contains("[[database.indexes]]") && stderr.contains(r#"fields = ["-n"]"#),
        "names the index that would serve the query: {stderr}"
    );

    let out = docstore(
        &small,
        &["query", "c", "order by n desc limit 5", "--allow-partial"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: partial answer"));

    let out = docstore(
        &small,
        &[
            "-v",
            "query",
            "c",
            "order by n desc limit 5",
            "--allow-partial",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopped reading at max_scan"),
        "with -v, the library's log: {stderr}"
    );

    // A walk of every page (`--all`) reads the matches once in id order, exact at any size,
    // and sorts them once: the whole answer, in order, no warning.
    let out = docstore(
        &small,
        &["query", "c", "order by n desc limit 2", "--all", "--jsonl"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let walked: Vec<i64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["data"]["n"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(walked, (0..30).rev().collect::<Vec<i64>>());
    // Queries in id order are exact at any size: no warning, exit 0.
    let out = docstore(
        &small,
        &["query", "c", "n >= 0 limit 4", "--all", "--jsonl"],
    );
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 30);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

#[test]
fn dropping_an_index_the_table_does_not_hold_is_not_found() {
    let url = dynamodb_url(&unique_table());
    ok(&url, &["create-table"]);
    let out = docstore(&url, &["index", "drop", "items", "nope"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("no index `nope` of `items`"), "{stderr}");
}

/// A table name DynamoDB would refuse is refused when the store is opened: one message
/// naming the rule, the exit code of an invalid argument, nothing sent.
#[test]
fn a_bad_table_name_is_one_clear_error() {
    for table in ["t", "has%20space"] {
        let out = docstore(&dynamodb_url(table), &["count"]);
        assert_eq!(out.status.code(), Some(6), "{table}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{table}: {stderr}");
        assert!(
            stderr.contains("3 to 255 characters, each a letter, digit, '_', '-' or '.'"),
            "{table}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{table}");
    }
}

#[test]
fn sites_and_a_whole_store_export_through_dynamodb() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = ["alpha", "beta", "gamma"]
        .iter()
        .enumerate()
        .flat_map(|(n, site)| {
            (0..=n).map(move |i| {
                let collection = ["t", "u"][i % 2];
                json!({"site": site, "collection": collection, "id": format!("d{i}"),
                    "data": {"i": i}, "created_at": 1_600_000_000_000_000_000i64,
                    "updated_at": 1_700_000_000_000_000_000i64, "created_by": "gen",
                    "updated_by": "gen", "version": 2})
                .to_string()
            })
        })
        .collect();
    let input = dir.path().join("all.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let table = unique_table();
    let dynamodb = dynamodb_url(&table);
    ok(&dynamodb, &["create-table"]);
    ok(
        &dynamodb,
        &["import", "--all-sites", input.to_str().unwrap()],
    );

    let sites: Value = serde_json::from_str(&ok(&dynamodb, &["sites"])).unwrap();
    assert_eq!(
        sites,
        json!([{"site": "alpha", "count": 1}, {"site": "beta", "count": 2},
               {"site": "gamma", "count": 3}])
    );
    let exported = ok(&dynamodb, &["export", "--all-sites"]);
    assert_eq!(exported.lines().count(), 6, "{exported}");
    let backup = dir.path().join("backup.jsonl");
    std::fs::write(&backup, &exported).unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("restored.db").display());
    ok(
        &sqlite,
        &["import", "--all-sites", backup.to_str().unwrap()],
    );
    assert_eq!(ok(&sqlite, &["export", "--all-sites"]), exported);
}

/// `index add` names the next command with the store options it was given, and says nothing
/// of building an index that is built already.
#[test]
fn the_index_add_hint_repeats_the_store_options() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("app.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nbackend = \"dynamodb\"\n[database.dynamodb]\ntable = \"{}\"\n\
             region = \"us-east-1\"\nendpoint = \"{}\"\n[[database.indexes]]\n\
             collection = \"tickets\"\nname = \"by_priority\"\nfields = [\"-priority\"]\n",
            unique_table(),
            endpoint()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let add = |args: &[&str]| {
        let out = docstore_with_config(config, args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
    };
    add(&["create-table"]);
    let building = add(&["index", "add", "tickets", "by_status", "status"]);
    let next = format!("`docstore --config {config} index build tickets by_status`");
    assert!(building.contains(&next), "{building}");
    let built = add(&["index", "add", "tickets", "by_priority"]);
    assert!(!built.contains("index build"), "{built}");
}

fn docstore_with_config(config: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    cmd.env_remove("DOCSTORE_URL")
        .env("AWS_ACCESS_KEY_ID", "docstore-test")
        .env("AWS_SECRET_ACCESS_KEY", "docstore-test")
        .args(["--config", config])
        .args(args);
    cmd.output().unwrap()
}
