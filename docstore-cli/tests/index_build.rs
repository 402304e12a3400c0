//! `docstore index build` (DynamoDB only) on the emulator (dynoxide): progress lines on a
//! standard error that is not a terminal, `-q` for none, and Ctrl-C saying how far the build
//! got and how to resume, with exit code 130 (docs/contract.md, "The command line"). Run
//! through `scripts/with-dynamodb-emulators` (as `scripts/test` does), which sets
//! DOCSTORE_DYNOXIDE_ENDPOINT; without it these tests fail rather than skip.

#![cfg(unix)]

use assert_cmd::Command;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::process::Stdio;

/// The exit code of a command stopped by Ctrl-C.
const INTERRUPTED: i32 = 130;

/// A store URL of a new table on the emulator.
fn new_table() -> String {
    let endpoint = std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run the tests through \
         scripts/with-dynamodb-emulators (scripts/test does)",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let table = format!("cli-build-{}-{nanos}", std::process::id());
    format!("dynamodb://{table}?region=us-east-1&endpoint={endpoint}")
}

fn docstore(store: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("docstore"));
    cmd.env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .env("AWS_ACCESS_KEY_ID", "docstore-test")
        .env("AWS_SECRET_ACCESS_KEY", "docstore-test")
        .args(["--store", store, "--site", "s"])
        .args(args);
    cmd
}

/// Runs `docstore ARGS` with `stdin`, asserts success; returns standard output and error.
fn ok(store: &str, args: &[&str], stdin: &str) -> (String, String) {
    let mut cmd = Command::from_std(docstore(store, args));
    let out = cmd.write_stdin(stdin).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// A table holding `documents` documents of `tickets` (`{"n": i, "status": ...}`).
fn table_with(documents: usize) -> String {
    let store = new_table();
    ok(&store, &["create-table"], "");
    let lines: String = (0..documents)
        .map(|i| {
            let status = if i % 2 == 0 { "open" } else { "done" };
            json!({"site": "s", "collection": "tickets", "id": format!("t{i:04}"),
                "data": {"n": i, "status": status}, "created_at": 1, "updated_at": 1,
                "created_by": "a", "updated_by": "a", "version": 1})
            .to_string()
                + "\n"
        })
        .collect();
    ok(&store, &["import"], &lines);
    store
}

fn state_of(store: &str, name: &str) -> Value {
    let (listed, _) = ok(store, &["index", "list"], "");
    listed
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|index| index["name"] == name)
        .map_or(Value::Null, |index| index["state"].clone())
}

#[test]
fn a_build_on_a_non_terminal_prints_progress_lines_and_q_silences_them() {
    let store = table_with(450);
    ok(&store, &["index", "add", "tickets", "by_n", "n"], "");
    ok(
        &store,
        &["index", "add", "tickets", "by_status", "status"],
        "",
    );
    // Every page (--progress-interval 0) of the table's 450 documents and counters: three.
    let args = [
        "index",
        "build",
        "tickets",
        "by_n",
        "--progress-interval",
        "0",
    ];
    let (built, stderr) = ok(&store, &args, "");
    assert!(built.contains("\"built\""), "{built}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines[0].starts_with("index build tickets by_n (0 s): waiting until every writer"),
        "{stderr}"
    );
    let pages: Vec<&&str> = lines
        .iter()
        .filter(|line| line.contains("items scanned"))
        .collect();
    assert!(pages.len() >= 3, "{stderr}");
    assert!(
        pages
            .last()
            .unwrap()
            .contains("450 documents given their key"),
        "{stderr}"
    );
    // -q: no progress, the outcome still said.
    let args = ["-q", "index", "build", "tickets", "by_status"];
    let (built, stderr) = ok(
        &store,
        &[&args[..], &["--progress-interval", "0"]].concat(),
        "",
    );
    assert!(built.contains("\"built\""), "{built}");
    assert!(
        !stderr.contains("waiting") && !stderr.contains("items scanned"),
        "{stderr}"
    );
    assert!(stderr.contains("is built"), "{stderr}");
}

#[test]
fn ctrl_c_during_an_index_build_says_how_far_it_got_and_how_to_resume() {
    let store = table_with(5);
    ok(
        &store,
        &["index", "add", "tickets", "by_status", "status"],
        "",
    );
    // Just added, the build first waits until every writer maintains the index.
    let mut child = docstore(&store, &["index", "build", "tickets", "by_status"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.contains("waiting until every writer"), "{first}");
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut said = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(INTERRUPTED), "{said}");
    assert!(
        said.contains("interrupted: index build stopped (0 items scanned")
            && said.contains("stays building")
            && said.contains("index build tickets by_status` to resume"),
        "{said}"
    );
    assert_eq!(state_of(&store, "by_status"), json!("building"));
    // Run again, it finishes.
    ok(&store, &["index", "build", "tickets", "by_status"], "");
    assert_eq!(state_of(&store, "by_status"), json!("built"));
}
