//! SQLite files from the command line (docs/contract.md, "The command line" and "Change
//! feed"): a command that only reads changes nothing in the file, a file of another program
//! is refused unless shared, lock waits that end well say nothing, the feed is pruned by
//! the writing commands themselves, and a change cursor of another file is refused.

mod support;

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use support::exit::INVALID;
use support::{Sandbox, expect};

impl Sandbox {
    /// `docstore --site s ARGS`.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut command = self.docstore(["--site", "s"]);
        command.args(args);
        command
    }

    /// `docstore --site s ARGS`, spawned to be waited for (its output piped).
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.std_docstore(["--site", "s"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Runs and asserts the exit code; returns the output.
    fn run(&self, args: &[&str], code: i32) -> Output {
        expect(self.cmd(args), code)
    }

    /// Every file of the sandbox directory with its bytes.
    fn files(&self) -> BTreeMap<String, Vec<u8>> {
        files_of(self.dir())
    }
}

fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(entry.path()).unwrap())
        })
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The cursor of the last line `watch --jsonl` printed.
fn last_cursor(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().expect("watch printed a change");
    let change: serde_json::Value = serde_json::from_str(line).unwrap();
    change["cursor"].as_str().unwrap().to_owned()
}

#[test]
fn a_change_cursor_of_another_file_is_invalid_not_expired() {
    let sandbox = Sandbox::new();
    let (one, two) = (sandbox.sqlite("one.db"), sandbox.sqlite("two.db"));
    for store in [&one, &two] {
        sandbox.run(&["--store", store, "create", "t", "a", "{}"], 0);
    }
    let watch = ["watch", "--from", "start", "--until-idle", "--jsonl"];
    let cursor = last_cursor(&sandbox.run(&[&["--store", one.as_str()][..], &watch].concat(), 0));
    let after = ["watch", "--after", &cursor, "--until-idle", "--jsonl"];
    let refused = sandbox.run(&[&["--store", two.as_str()][..], &after].concat(), INVALID);
    assert!(
        stderr(&refused).contains("belongs to another store"),
        "{}",
        stderr(&refused)
    );
    // The cursor still works on its own store.
    sandbox.run(&[&["--store", one.as_str()][..], &after].concat(), 0);
}

/// Commands that wait for another process's lock and then succeed print nothing at the
/// default verbosity (the wait is an `info` line, shown from `-v` on); one that gives up
/// says so once, in its error.
#[test]
fn lock_waits_that_end_well_are_said_only_with_v() {
    let sandbox = Sandbox::new();
    let store = sandbox.sqlite("busy.db");
    sandbox.run(&["--store", &store, "create", "t", "a", "{}"], 0);
    let holder = rusqlite::Connection::open(sandbox.path("busy.db")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let updates: Vec<_> = (0..6)
        .map(|n| {
            let data = format!(r#"{{"n{n}":{n}}}"#);
            let verbose = if n == 0 { "-v" } else { "--busy-timeout=20000" };
            let args = ["--store", &store, verbose, "update", "t", "a", &data];
            sandbox.spawn(&args)
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    holder.execute_batch("COMMIT").unwrap();
    for (n, update) in updates.into_iter().enumerate() {
        let output = update.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        if n == 0 {
            assert!(
                stderr(&output).contains("waiting for a lock"),
                "{}",
                stderr(&output)
            );
        } else {
            assert_eq!(stderr(&output), "", "update {n}");
        }
    }
    let got = sandbox.run(&["--store", &store, "get", "t", "a"], 0);
    let document: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(document["version"], 7, "{document}");

    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let args = [
        "--store",
        &store,
        "--busy-timeout",
        "300",
        "put",
        "t",
        "b",
        "{}",
    ];
    let started = std::time::Instant::now();
    let failed = sandbox.run(&args, 9);
    let waited = started.elapsed();
    let said = stderr(&failed);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("locked") && said.contains("300 ms"), "{said}");
    // --busy-timeout bounds the whole wait (it once waited 4 x 300 ms): a correctness
    // bound with room for the process's start, not a speed target.
    let timeout = std::time::Duration::from_millis(300);
    assert!(waited >= timeout && waited < 3 * timeout, "{waited:?}");
}

/// A file written only by CLI commands (each a short process) has its feed pruned by the
/// writes themselves: with `feed_retention_hours=0` every change but the newest is gone
/// after the next write, and `watch --from start` begins at that newest one.
#[test]
fn cli_writes_prune_the_feed() {
    let sandbox = Sandbox::new();
    let store = format!("{}?feed_retention_hours=0", sandbox.sqlite("pruned.db"));
    for id in ["a", "b", "c"] {
        sandbox.run(&["--store", &store, "create", "t", id, "{}"], 0);
    }
    let watch = [
        "--store",
        &store,
        "watch",
        "--from",
        "start",
        "--until-idle",
        "--jsonl",
    ];
    let output = sandbox.run(&watch, 0);
    let ids: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["id"].to_string())
        .collect();
    assert_eq!(ids, [r#""c""#]);
    let conn = rusqlite::Connection::open(sandbox.path("pruned.db")).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM changes", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}

/// A database another program made (`users` with a row), as sqlite3 would leave it.
fn foreign_file(path: &Path) {
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); \
             INSERT INTO users (name) VALUES ('ann');",
        )
        .unwrap();
}

/// Every command that only reads, on site s of `store`.
fn reading_commands(store: &str) -> Vec<Vec<String>> {
    let commands: [&[&str]; 11] = [
        &["get", "t", "a"],
        &["count"],
        &["query", "t", "n = 1"],
        &["collections"],
        &["sites"],
        &["export"],
        &["fsck"],
        &["explain", "t", "n = 1"],
        &["get-many", "t", "a", "b"],
        &["watch", "--from", "start", "--until-idle"],
        &["index", "list"],
    ];
    commands
        .iter()
        .map(|args| {
            let mut line = vec!["--store".to_owned(), store.to_owned()];
            line.extend(args.iter().map(|arg| (*arg).to_owned()));
            line
        })
        .collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A file of another program: every reading command is refused (exit 6, naming the table),
/// `index list` (which never opens the file) aside, a write too, and the directory holds
/// exactly the same files with the same bytes after each.
#[test]
fn a_file_of_another_program_is_refused_and_never_changed() {
    let sandbox = Sandbox::new();
    foreign_file(&sandbox.path("other.db"));
    let store = sandbox.sqlite("other.db");
    let before = sandbox.files();
    for args in reading_commands(&store) {
        let args = strs(&args);
        let output = sandbox.cmd(&args).output().unwrap();
        if args.contains(&"index") {
            assert_eq!(
                output.status.code(),
                Some(0),
                "{args:?}: {}",
                stderr(&output)
            );
        } else {
            assert_eq!(
                output.status.code(),
                Some(INVALID),
                "{args:?}: {}",
                stderr(&output)
            );
            assert!(
                stderr(&output).contains("another program (users)"),
                "{}",
                stderr(&output)
            );
        }
        assert!(sandbox.files() == before, "{args:?} changed the directory");
    }
    for write in [
        &["put", "t", "a", "{}"][..],
        &["fsck", "--repair"],
        &["delete", "t", "a"],
    ] {
        let args = [&["--store", store.as_str()][..], write].concat();
        let refused = sandbox.run(&args, INVALID);
        assert!(
            stderr(&refused).contains("share_file"),
            "{}",
            stderr(&refused)
        );
        assert!(sandbox.files() == before, "{args:?} changed the directory");
    }
}

/// With `share_file=true` reading commands see an empty store and change nothing; the
/// first write adds docstore's tables beside `users`, which keeps its row.
#[test]
fn a_shared_file_is_read_as_empty_and_written_beside_the_other_tables() {
    let sandbox = Sandbox::new();
    foreign_file(&sandbox.path("shared.db"));
    let store = format!("{}?share_file=true", sandbox.sqlite("shared.db"));
    let before = sandbox.files();
    for args in reading_commands(&store) {
        let args = strs(&args);
        let output = sandbox.cmd(&args).output().unwrap();
        let code = if args.contains(&"get") { 3 } else { 0 };
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(sandbox.files() == before, "{args:?} changed the directory");
    }
    let count = sandbox.run(&["--store", &store, "count"], 0);
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "0");
    sandbox.run(&["--store", &store, "put", "t", "a", "{}"], 0);
    let count = sandbox.run(&["--store", &store, "count"], 0);
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "1");
    let conn = rusqlite::Connection::open(sandbox.path("shared.db")).unwrap();
    let name: String = conn
        .query_row("SELECT name FROM users", [], |row| row.get(0))
        .unwrap();
    assert_eq!(name, "ann");
}

/// A docstore file: reading commands leave the directory exactly as they found it (no
/// schema, journal mode or file changes; SQLite's -wal and -shm gone again at exit).
#[test]
fn reading_commands_leave_a_docstore_file_as_it_was() {
    let sandbox = Sandbox::new();
    let store = sandbox.sqlite("docs.db");
    for id in ["a", "b"] {
        sandbox.run(&["--store", &store, "create", "t", id, r#"{"n":1}"#], 0);
    }
    let before = sandbox.files();
    for args in reading_commands(&store) {
        let args = strs(&args);
        sandbox.run(&args, 0);
        assert!(sandbox.files() == before, "{args:?} changed the directory");
    }
}
