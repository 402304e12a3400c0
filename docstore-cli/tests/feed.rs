//! `docstore watch` and `docstore copy --follow` with the real binary on SQLite files, and a
//! live copy from SQLite to the DynamoDB emulator (run through
//! `scripts/with-dynamodb-emulators`, which sets DOCSTORE_DYNOXIDE_ENDPOINT; without it that
//! test fails rather than skips).

use assert_cmd::Command;
use docstore::{Key, Query};
use futures_util::TryStreamExt;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// `docstore --store URL --site s ARGS`.
fn docstore(store: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("docstore"));
    cmd.env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .env("AWS_ACCESS_KEY_ID", "docstore-test")
        .env("AWS_SECRET_ACCESS_KEY", "docstore-test")
        .args(["--store", store, "--site", "s", "--actor", "tester"])
        .args(args);
    cmd
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

/// Runs a command to its end; its JSON lines, asserting the exit code.
fn lines(store: &str, args: &[&str], code: i32) -> Vec<Value> {
    let output = Command::from_std(docstore(store, args))
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn create(store: &str, id: &str, n: usize) {
    let data = json!({ "n": n }).to_string();
    lines(store, &["create", "t", id, &data], 0);
}

fn ids(changes: &[Value]) -> Vec<String> {
    changes
        .iter()
        .map(|change| change["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Reads JSON lines of a spawned command's standard output until `n` were read.
fn read_lines(reader: &mut impl BufRead, n: usize) -> Vec<Value> {
    (0..n)
        .map(|_| {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).unwrap() > 0, "the output ended");
            serde_json::from_str(&line).unwrap()
        })
        .collect()
}

/// Waits for a child to end (at most a minute); its exit code.
fn wait(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    panic!("the command did not end");
}

#[test]
fn watch_prints_every_change_with_a_cursor_that_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_url(&dir.path().join("feed.db"));
    for i in 0..5 {
        create(&store, &format!("d{i}"), i);
    }
    lines(&store, &["update", "t", "d1", r#"{"m": 1}"#], 0);
    lines(&store, &["delete", "t", "d2"], 0);
    let args = ["watch", "--from", "start", "--until-idle", "--jsonl"];
    let all = lines(&store, &args, 0);
    assert_eq!(ids(&all), ["d0", "d1", "d2", "d3", "d4", "d1", "d2"]);
    let kinds: Vec<&str> = all.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[4..], ["created", "updated", "deleted"]);
    assert_eq!(all[5]["document"]["data"], json!({"n": 1, "m": 1}));
    assert_eq!(
        (all[6]["version"].clone(), all[6]["document"].clone()),
        (json!(1), Value::Null)
    );
    assert_eq!(all[0]["actor"], "tester");
    for start in [0, 3, 6] {
        let cursor = all[start]["cursor"].as_str().unwrap();
        let args = ["watch", "--after", cursor, "--until-idle", "--jsonl"];
        assert_eq!(lines(&store, &args, 0), all[start + 1..], "after {start}");
    }
    let in_t = lines(
        &store,
        &["watch", "t", "--from", "start", "--until-idle"],
        0,
    );
    let without_cursors = |changes: &[Value]| -> Vec<Value> {
        let mut changes = changes.to_vec();
        changes
            .iter_mut()
            .for_each(|c| drop(c.as_object_mut().unwrap().remove("cursor")));
        changes
    };
    assert_eq!(
        without_cursors(&in_t),
        without_cursors(&all),
        "the collection's feed"
    );
    // A cursor belongs to the feed that printed it: the site's is refused on the collection's.
    let site_cursor = all[0]["cursor"].as_str().unwrap();
    lines(
        &store,
        &["watch", "t", "--after", site_cursor, "--until-idle"],
        6,
    );
    // A snapshot: the documents as they stand, then what follows, resumable from any line.
    let snapshot = lines(&store, &["watch", "--from", "snapshot", "--until-idle"], 0);
    let kinds: Vec<&str> = snapshot
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        (ids(&snapshot), kinds),
        (
            vec!["d0", "d1", "d3", "d4"]
                .into_iter()
                .map(String::from)
                .collect(),
            vec!["existing"; 4]
        )
    );
    let cursor = snapshot[1]["cursor"].as_str().unwrap();
    create(&store, "d5", 5);
    let resumed = lines(&store, &["watch", "--after", cursor, "--until-idle"], 0);
    assert_eq!(ids(&resumed), ["d3", "d4", "d5"]);
    let in_u = lines(
        &store,
        &["watch", "u", "--from", "start", "--until-idle"],
        0,
    );
    assert!(in_u.is_empty(), "another collection's feed is empty");
    let other_site = docstore(&store, &["watch", "--from", "start", "--until-idle"])
        .args(["--site", "other"])
        .output()
        .unwrap();
    assert!(other_site.status.success());
    assert!(other_site.stdout.is_empty(), "another site's feed is empty");
    let bad = lines(
        &store,
        &["watch", "--after", "sqlite:nonsense", "--until-idle"],
        6,
    );
    assert!(bad.is_empty());
}

#[test]
fn watch_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_url(&dir.path().join("pipe.db"));
    for i in 0..3 {
        create(&store, &format!("d{i}"), i);
    }
    let mut watch = docstore(&store, &["watch", "--from", "start", "--jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(watch.stdout.take().unwrap());
    assert_eq!(ids(&read_lines(&mut reader, 3)), ["d0", "d1", "d2"]);
    drop(reader); // `| head -3` exits
    create(&store, "d3", 3); // the next line the watcher writes meets the closed pipe
    assert_eq!(wait(&mut watch), Some(0));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut watch.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(stderr, "", "quiet");
}

#[test]
fn a_killed_watch_resumes_from_its_last_printed_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_url(&dir.path().join("kill.db"));
    create(&store, "before", 0); // `watch` opens only an existing store
    let mut watch = docstore(&store, &["watch", "--from", "now", "--jsonl"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(watch.stdout.take().unwrap());
    std::thread::sleep(Duration::from_millis(500)); // let it take its position
    for i in 0..6 {
        create(&store, &format!("d{i:02}"), i);
    }
    let seen = read_lines(&mut reader, 4);
    watch.kill().unwrap(); // SIGKILL: no chance to flush anything more
    watch.wait().unwrap();
    for i in 6..10 {
        create(&store, &format!("d{i:02}"), i);
    }
    let cursor = seen[3]["cursor"].as_str().unwrap();
    let rest = lines(
        &store,
        &["watch", "--after", cursor, "--until-idle", "--jsonl"],
        0,
    );
    let mut all = ids(&seen);
    all.extend(ids(&rest));
    let expected: Vec<String> = (0..10).map(|i| format!("d{i:02}")).collect();
    assert_eq!(all, expected, "nothing lost or repeated");
}

/// Every document of site `s`, by collection and id, from the store at `url`.
fn documents(url: &str) -> Vec<(String, docstore::Document)> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = docstore_any::open_url(url).await.unwrap();
        let mut all = Vec::new();
        for (collection, _) in store.collections("s").await.unwrap() {
            let docs: Vec<_> = store
                .stream("s", &collection, &Query::new())
                .try_collect()
                .await
                .unwrap();
            all.extend(docs.into_iter().map(|doc| (collection.clone(), doc)));
        }
        all
    })
}

/// Writes to site `s` of the SQLite file at `path` every few milliseconds for `duration`:
/// creates, updates and deletes; the number of writes.
fn keep_writing(path: &Path, duration: Duration) -> usize {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = docstore_any::open_url(&sqlite_url(path)).await.unwrap();
        let deadline = Instant::now() + duration;
        let mut writes = 0;
        while Instant::now() < deadline {
            let key =
                |i: usize| Key::new("s", ["a", "b"][i % 2], format!("live-{}", i % 40)).unwrap();
            let data = docstore::object(json!({ "w": writes })).unwrap();
            match writes % 5 {
                4 => drop(store.delete(&key(writes / 5)).await.unwrap()),
                _ => drop(store.put(&key(writes), data, "writer").await.unwrap()),
            }
            writes += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        writes
    })
}

/// Copies a SQLite store that a writer keeps writing to `destination`, following the feed
/// until it has been idle; both stores must then hold the same documents, each with every
/// piece of metadata.
fn live_copy_equals_the_source(destination: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let source = sqlite_url(&path);
    for i in 0..200 {
        create(&source, &format!("pre-{i:03}"), i);
    }
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || keep_writing(&path, Duration::from_secs(4)))
    };
    let copy = lines(
        &source,
        &["copy", "--to", destination, "--follow", "--until-idle"],
        0,
    );
    let writes = writer.join().unwrap();
    assert!(writes > 100, "{writes} writes");
    assert!(copy[0]["followed"].as_u64().unwrap() > 0, "{copy:?}");
    assert_eq!(copy[0]["mismatched"], json!([]), "{copy:?}");
    assert_eq!(documents(&source), documents(destination));
}

#[test]
fn copy_follow_between_sqlite_files_ends_equal() {
    let dir = tempfile::tempdir().unwrap();
    live_copy_equals_the_source(&sqlite_url(&dir.path().join("copy.db")));
}

#[test]
fn copy_follow_from_sqlite_to_dynamodb_ends_equal() {
    let endpoint = std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run the tests through \
         scripts/with-dynamodb-emulators (scripts/test does)",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let table = format!("follow-{}-{}", std::process::id(), nanos.as_nanos());
    let url = format!("dynamodb://{table}?region=us-east-1&endpoint={endpoint}");
    let created = docstore(&url, &["create-table"]).output().unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    live_copy_equals_the_source(&url);
}

/// A client of the emulator, for what the CLI does not do (turning a stream off).
async fn raw_client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::for_tests())
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

#[test]
fn streams_enable_turns_the_feed_on_for_an_existing_table() {
    let endpoint = std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run the tests through \
         scripts/with-dynamodb-emulators (scripts/test does)",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let table = format!("streams-{}-{}", std::process::id(), nanos.as_nanos());
    let url = format!("dynamodb://{table}?region=us-east-1&endpoint={endpoint}");
    lines(&url, &["create-table"], 0);
    let already = lines(&url, &["streams", "enable"], 0);
    assert_eq!(
        already[0]["status"], "already enabled",
        "create-table enables it"
    );
    // A table from before the feed: its stream off.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let off = aws_sdk_dynamodb::types::StreamSpecification::builder()
            .stream_enabled(false)
            .build()
            .unwrap();
        let client = raw_client(&endpoint).await;
        client
            .update_table()
            .table_name(&table)
            .stream_specification(off)
            .send()
            .await
            .unwrap();
    });
    create(&url, "before", 0);
    let refused = docstore(&url, &["watch", "--from", "start", "--until-idle"])
        .output()
        .unwrap();
    assert_ne!(refused.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("streams enable"), "{stderr}");
    let enabled = lines(&url, &["streams", "enable"], 0);
    assert_eq!(enabled[0]["status"], "enabled");
    create(&url, "after", 1);
    let changes = lines(
        &url,
        &["watch", "--from", "start", "--until-idle", "--jsonl"],
        0,
    );
    assert_eq!(
        ids(&changes),
        ["after"],
        "the feed starts when the stream was enabled"
    );
}

/// `docstore ttl enable` turns DynamoDB's time to live on `expires` on for a table made
/// without it (create-table enables it), and leaves it alone when it is on.
#[test]
fn ttl_enable_turns_time_to_live_on_for_an_existing_table() {
    let endpoint = std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run the tests through \
         scripts/with-dynamodb-emulators (scripts/test does)",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let table = format!("ttl-{}-{}", std::process::id(), nanos.as_nanos());
    let url = format!("dynamodb://{table}?region=us-east-1&endpoint={endpoint}");
    lines(&url, &["create-table"], 0);
    let already = lines(&url, &["ttl", "enable"], 0);
    assert_eq!(
        already[0]["status"], "already enabled",
        "create-table enables it"
    );
    // A table from before: time to live off.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let off = aws_sdk_dynamodb::types::TimeToLiveSpecification::builder()
            .attribute_name("expires")
            .enabled(false)
            .build()
            .unwrap();
        raw_client(&endpoint)
            .await
            .update_time_to_live()
            .table_name(&table)
            .time_to_live_specification(off)
            .send()
            .await
            .unwrap();
    });
    let enabled = lines(&url, &["ttl", "enable"], 0);
    assert_eq!(
        (&enabled[0]["status"], &enabled[0]["attribute"]),
        (&json!("enabled"), &json!("expires"))
    );
    let again = lines(&url, &["ttl", "enable"], 0);
    assert_eq!(again[0]["status"], "already enabled");
}
