//! Ctrl-C during a long command says what is done and how to resume, and exits 130
//! (docs/contract.md, "The command line"): `copy --follow` in its copy stage and `export`
//! here, on SQLite; `index build` (DynamoDB only) in tests/index_build.rs.

#![cfg(target_os = "linux")]

use assert_cmd::Command;
use serde_json::{Value, json};
use std::process::{Child, Stdio};

/// The exit code of a command stopped by Ctrl-C.
const INTERRUPTED: i32 = 130;

fn docstore(store: &str, args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    cmd.env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", store, "--site", "s"])
        .args(args);
    cmd
}

fn ok(store: &str, args: &[&str], stdin: &str) -> Value {
    let out = docstore(store, args).write_stdin(stdin).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether process `pid` has a thread named `name` (Linux's /proc).
fn has_thread(pid: u32, name: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
    })
}

/// Sends `child` SIGINT once its thread watching for Ctrl-C runs (or after 5 s without
/// one); returns its standard error and exit code.
fn interrupt(child: Child) -> (String, Option<i32>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !has_thread(child.id(), "ctrl-c") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (stderr, output.status.code())
}

#[test]
fn ctrl_c_while_copy_follow_copies_says_what_is_committed_and_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let source = format!("sqlite:{}", dir.path().join("source.db").display());
    let destination_file = dir.path().join("destination.db");
    let destination = format!("sqlite:{}", destination_file.display());
    let lines: String = (0..120)
        .map(|i| {
            json!({"site": "s", "collection": "t", "id": format!("d{i:03}"), "data": {"i": i},
                "created_at": 1, "updated_at": 1, "created_by": "a", "updated_by": "a",
                "version": 1})
            .to_string()
                + "\n"
        })
        .collect();
    ok(&source, &["import"], &lines);
    // The destination exists (a document of another site), and another process holds its
    // write lock: the copy stage waits on its first batch.
    let created = Command::cargo_bin("docstore")
        .unwrap()
        .env_remove("DOCSTORE_URL")
        .args([
            "--store",
            &destination,
            "--site",
            "other",
            "put",
            "t",
            "x",
            "{}",
        ])
        .output()
        .unwrap();
    assert!(created.status.success());
    let holder = rusqlite::Connection::open(&destination_file).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("docstore"))
        .env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", &source, "--site", "s", "--busy-timeout", "60000"])
        .args(["copy", "--to", &destination, "--follow"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stopped in the copy stage: its first batch waits for the lock.
    let (stderr, code) = interrupt(child);
    assert_eq!(code, Some(INTERRUPTED), "{stderr}");
    assert!(
        stderr.contains("copy --follow stopped while copying")
            && stderr.contains("with at least 0 documents committed")
            && stderr.contains("Run the same copy --follow again to resume"),
        "{stderr}"
    );
    assert!(!stderr.contains("following the feed of"), "{stderr}");
    holder.execute_batch("COMMIT").unwrap();
    // Run again, it copies, follows until idle and verifies every document.
    let live = ok(
        &source,
        &["copy", "--to", &destination, "--follow", "--until-idle"],
        "",
    );
    assert_eq!(
        (&live["imported"], &live["verified"], &live["mismatched"]),
        (&json!(120), &json!(120), &json!([])),
        "{live}"
    );
}

/// `export` into a pipe nobody reads blocks once the pipe is full; Ctrl-C then says how far
/// it got and that the output is incomplete, and exits 130 (it died of the signal and said
/// nothing before).
#[test]
fn ctrl_c_during_export_says_the_output_is_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("big.db").display());
    let lines: String = (0..3_000)
        .map(|n| {
            format!(
                "{}\n",
                json!({"id": format!("d{n:04}"), "text": "x".repeat(100)})
            )
        })
        .collect();
    ok(
        &store,
        &["import", "--id-field", "id", "--collection", "c"],
        &lines,
    );
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("docstore"))
        .env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", &store, "--site", "s", "export"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Nobody reads standard output until the signal is sent: the export fills the pipe
    // (64 KiB, a few hundred lines of 3 000) and waits.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (stderr, code) = interrupt(child);
    assert_eq!(code, Some(INTERRUPTED), "{stderr}");
    assert!(stderr.contains("export: interrupted after"), "{stderr}");
    assert!(stderr.contains("incomplete"), "{stderr}");
}
