//! The real `docstore` binary on `postgres://` URLs: export, import and copy between SQLite
//! and PostgreSQL both ways, a resumable import, `watch` with resumable cursors and a live
//! `copy --follow` into PostgreSQL. They need a server: `scripts/test` runs them under
//! `scripts/with-postgres` with `--ignored` (which sets DOCSTORE_POSTGRES_URL); run that way
//! without it, they fail rather than skip.

use assert_cmd::Command;
use docstore::Key;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A schema of its own on the test server, so tests never see each other's documents.
fn postgres_url(name: &str) -> String {
    let base = std::env::var("DOCSTORE_POSTGRES_URL").expect(
        "DOCSTORE_POSTGRES_URL is not set: run these tests under scripts/with-postgres \
         (scripts/test does)",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{base}?schema=cli_{name}_{}_{nanos:x}", std::process::id())
}

fn docstore(store: &str, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("docstore")
        .unwrap()
        .env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", store, "--site", "s", "--actor", "tester"])
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

/// Runs a command that must succeed; its standard output.
fn ok(store: &str, args: &[&str]) -> String {
    let out = docstore(store, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// 120 documents in three collections, with values PostgreSQL's JSONB cannot hold verbatim
/// (`-0.0`, `\u0000`) and integers past `i64`, as an export file.
fn export_lines() -> String {
    let lines: Vec<String> = (0..120)
        .map(|i| {
            let collection = ["a", "b", "c"][i % 3];
            json!({"site": "s", "collection": collection, "id": format!("doc-{i:03}"),
                "data": {"i": i, "big": u64::MAX, "f": 1.0, "neg_zero": -0.0,
                         "text": "é\"\\\u{0}", "nested": {"k": [i, null]}},
                "created_at": 1_600_000_000_000_000_000i64 + i as i64,
                "updated_at": 1_700_000_000_000_000_000i64,
                "created_by": "gen", "updated_by": format!("u{i}"), "version": 1 + i % 4})
            .to_string()
        })
        .collect();
    lines.join("\n") + "\n"
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/with-postgres cargo test -p docstore-cli --test postgres -- --ignored"]
fn export_import_and_copy_round_trip_through_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, export_lines()).unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("src.db").display());
    ok(&sqlite, &["import", input.to_str().unwrap()]);
    let original = ok(&sqlite, &["export"]);
    assert_eq!(original.lines().count(), 120);

    let postgres = postgres_url("copy");
    let summary: Value = serde_json::from_str(&ok(&sqlite, &["copy", "--to", &postgres])).unwrap();
    assert_eq!(summary["imported"], json!(120), "{summary}");
    assert_eq!(
        ok(&postgres, &["export"]),
        original,
        "SQLite -> PostgreSQL changed documents"
    );
    assert_eq!(ok(&postgres, &["count"]).trim(), "120");

    let dump = dir.path().join("dump.jsonl");
    ok(&postgres, &["export", "--output", dump.to_str().unwrap()]);
    let back = format!("sqlite:{}", dir.path().join("back.db").display());
    ok(&back, &["import", dump.to_str().unwrap()]);
    assert_eq!(
        ok(&back, &["export"]),
        original,
        "PostgreSQL -> SQLite changed documents"
    );

    let again = postgres_url("import");
    ok(&again, &["import", dump.to_str().unwrap()]);
    let second: Value =
        serde_json::from_str(&ok(&again, &["import", dump.to_str().unwrap()])).unwrap();
    assert_eq!(
        (
            second["imported"].clone(),
            second["already_present"].clone()
        ),
        (json!(0), json!(120)),
        "an import run again adds nothing: {second}"
    );
    assert_eq!(ok(&again, &["export"]), original);
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/with-postgres cargo test -p docstore-cli --test postgres -- --ignored"]
fn watch_on_postgres_resumes_exactly_after_any_cursor() {
    let store = postgres_url("watch");
    for i in 0..4 {
        ok(
            &store,
            &[
                "create",
                "t",
                &format!("d{i}"),
                &json!({ "n": i }).to_string(),
            ],
        );
    }
    ok(&store, &["update", "t", "d1", r#"{"m": 1}"#]);
    ok(&store, &["delete", "t", "d2"]);
    let all = json_lines(&ok(
        &store,
        &["watch", "--from", "start", "--until-idle", "--jsonl"],
    ));
    let seen: Vec<(String, String)> = all
        .iter()
        .map(|change| {
            let text = |field: &str| change[field].as_str().unwrap().to_owned();
            (text("kind"), text("id"))
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("created", "d0"),
        ("created", "d1"),
        ("created", "d2"),
        ("created", "d3"),
        ("updated", "d1"),
        ("deleted", "d2"),
    ]
    .iter()
    .map(|(kind, id)| (kind.to_string(), id.to_string()))
    .collect();
    assert_eq!(seen, expected);
    assert_eq!(all[4]["document"]["data"], json!({"n": 1, "m": 1}));
    assert_eq!(all[0]["actor"], "tester");
    for start in [0, 2, 5] {
        let cursor = all[start]["cursor"].as_str().unwrap();
        let after = ok(
            &store,
            &["watch", "--after", cursor, "--until-idle", "--jsonl"],
        );
        assert_eq!(json_lines(&after), all[start + 1..], "after change {start}");
    }
    let bad = docstore(
        &store,
        &["watch", "--after", "sqlite:nonsense", "--until-idle"],
    );
    assert_eq!(
        bad.status.code(),
        Some(6),
        "another backend's cursor is refused"
    );
}

/// A live copy from SQLite into PostgreSQL while a writer keeps writing the source: after
/// the feed went idle, both hold the same documents with every piece of metadata.
#[test]
#[ignore = "needs a PostgreSQL server: scripts/with-postgres cargo test -p docstore-cli --test postgres -- --ignored"]
fn copy_follow_into_postgres_ends_equal() {
    let dir = tempfile::tempdir().unwrap();
    let source = format!("sqlite:{}", dir.path().join("live.db").display());
    for i in 0..100 {
        ok(
            &source,
            &[
                "create",
                "t",
                &format!("pre-{i:03}"),
                &json!({ "n": i }).to_string(),
            ],
        );
    }
    let writer = {
        let source = source.clone();
        std::thread::spawn(move || keep_writing(&source, Duration::from_secs(3)))
    };
    let destination = postgres_url("follow");
    let copy = json_lines(&ok(
        &source,
        &["copy", "--to", &destination, "--follow", "--until-idle"],
    ));
    let writes = writer.join().unwrap();
    assert!(writes > 50, "{writes} writes");
    assert!(copy[0]["followed"].as_u64().unwrap() > 0, "{copy:?}");
    assert_eq!(copy[0]["mismatched"], json!([]), "{copy:?}");
    assert_eq!(
        ok(&destination, &["export"]),
        ok(&source, &["export"]),
        "the live copy differs from its source"
    );
}

/// Writes to site `s` of the store at `url` every few milliseconds for `duration`: puts and
/// deletes over 40 ids; the number of writes.
fn keep_writing(url: &str, duration: Duration) -> usize {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = docstore_any::open_url(url).await.unwrap();
        let deadline = Instant::now() + duration;
        let mut writes = 0;
        while Instant::now() < deadline {
            let key = Key::new("s", "t", format!("live-{}", writes % 40)).unwrap();
            if writes % 5 == 4 {
                store.delete(&key).await.unwrap();
            } else {
                let data = docstore::object(json!({ "w": writes })).unwrap();
                drop(store.put(&key, data, "writer").await.unwrap());
            }
            writes += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        writes
    })
}
