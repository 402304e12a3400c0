//! Daily use of the command line (docs/contract.md, "The command line"): a query read from a
//! file or standard input, `--consistent`, a store never copied onto itself, a config file's
//! relative SQLite path, `index add`'s hint, subcommand help, batch positions, nothing said
//! twice on a terminal.

mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::process::Output;
use support::exit::{INTERRUPTED, INVALID, UNAVAILABLE};
use support::{Sandbox, expect};

impl Sandbox {
    /// `docstore --site s ARGS`.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut command = self.docstore(["--site", "s"]);
        command.args(args);
        command
    }

    /// Runs with `stdin` and asserts the exit code; returns the output.
    fn run_with(&self, args: &[&str], stdin: &str, code: i32) -> Output {
        let mut command = self.cmd(args);
        command.write_stdin(stdin);
        expect(command, code)
    }

    fn run(&self, args: &[&str], code: i32) -> Output {
        self.run_with(args, "", code)
    }

    /// A store at `name` with documents a (n 1), b (n 2), c (n 3) in collection t.
    fn store_with_documents(&self, name: &str) -> String {
        let store = self.sqlite(name);
        for (n, id) in ["a", "b", "c"].iter().enumerate() {
            let data = format!(r#"{{"n":{}}}"#, n + 1);
            self.run(&["--store", &store, "create", "t", id, &data], 0);
        }
        store
    }
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&output.stdout));
    })
}

fn ids(answer: &Value) -> Vec<&str> {
    answer["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect()
}

#[test]
fn a_query_is_read_from_a_file_or_standard_input() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("q.db");
    let text = "n >= 2\norder by n desc\n";
    std::fs::write(sandbox.path("q.txt"), text).unwrap();
    let inline = json(&sandbox.run(&["--store", &store, "query", "t", text], 0));
    assert_eq!(ids(&inline), ["c", "b"]);
    let from_file = json(&sandbox.run(&["--store", &store, "query", "t", "@q.txt"], 0));
    assert_eq!(from_file, inline);
    for stdin in ["@-", "-"] {
        let piped = json(&sandbox.run_with(&["--store", &store, "query", "t", stdin], text, 0));
        assert_eq!(piped, inline, "{stdin}");
    }
    // explain reads its query the same way.
    let plan = sandbox.run(&["--store", &store, "explain", "t", "@q.txt"], 0);
    assert!(json(&plan).get("estimated_reads").is_some());
    // An error in a query from a file points at its line and column.
    std::fs::write(sandbox.path("bad.txt"), "n >= 2\nand = 3\n").unwrap();
    let bad = sandbox.run(&["--store", &store, "query", "t", "@bad.txt"], INVALID);
    assert!(bad.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("line 2"), "{stderr}");
    // A missing file is an I/O error naming it.
    let missing = sandbox.run(&["--store", &store, "query", "t", "@nope.txt"], 1);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nope.txt"));
}

#[test]
fn a_busy_timeout_bounds_the_wait_for_another_process_lock() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("busy.db");
    let holder = rusqlite::Connection::open(sandbox.path("busy.db")).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = std::time::Instant::now();
    let args = [
        "--store",
        &store,
        "--busy-timeout",
        "100",
        "put",
        "t",
        "d",
        "{}",
    ];
    let output = sandbox.run(&args, UNAVAILABLE);
    // The default (5000 ms per attempt) would wait far longer.
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    assert!(output.stdout.is_empty());
    holder.execute_batch("ROLLBACK").unwrap();
    sandbox.run(&args, 0);
}

#[test]
fn copying_a_store_onto_itself_is_refused() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("self.db");
    std::fs::create_dir(sandbox.path("sub")).unwrap();
    let before = std::fs::read(sandbox.path("self.db")).unwrap();
    // The same file by another spelling of its path.
    let to = format!("sqlite:{}", sandbox.path("sub/../self.db").display());
    for to in [store.as_str(), "sqlite:self.db", to.as_str()] {
        let output = sandbox.run(&["--store", &store, "copy", "--to", to], INVALID);
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("store being copied"), "{stderr}");
    }
    assert_eq!(std::fs::read(sandbox.path("self.db")).unwrap(), before);
    // Another file is a copy as before.
    sandbox.run(
        &[
            "--store",
            &store,
            "copy",
            "--to",
            &sandbox.sqlite("other.db"),
        ],
        0,
    );
}

#[test]
fn a_relative_sqlite_path_in_a_config_file_is_taken_from_its_folder() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path("conf")).unwrap();
    let config = sandbox.path("conf/app.toml");
    std::fs::write(
        &config,
        "[database]\nbackend = \"sqlite\"\n[database.sqlite]\npath = \"app.db\"\n",
    )
    .unwrap();
    let config = config.display().to_string();
    sandbox.run(&["--config", &config, "create", "t", "a", "{}"], 0);
    assert!(sandbox.path("conf/app.db").exists());
    assert!(!sandbox.path("app.db").exists());
    let got = json(&sandbox.run(&["--config", &config, "get", "t", "a"], 0));
    assert_eq!(got["id"], "a");
}

#[test]
fn consistent_asks_query_and_explain_for_a_strongly_consistent_answer() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("c.db");
    let query = "n >= 2 order by n";
    let plain = json(&sandbox.run(&["--store", &store, "query", "t", query], 0));
    let args = ["--store", &store, "query", "t", query, "--consistent"];
    assert_eq!(json(&sandbox.run(&args, 0)), plain);
    let args = ["--store", &store, "explain", "t", query, "--consistent"];
    assert_eq!(json(&sandbox.run(&args, 0))["strongly_consistent"], true);
}

#[test]
fn subcommand_help_lists_its_own_options_and_names_the_global_ones_once() {
    let sandbox = Sandbox::new();
    let top = String::from_utf8(sandbox.run(&["--help"], 0).stdout).unwrap();
    for global in [
        "--store",
        "--config",
        "--actor",
        "--busy-timeout",
        "--verbose",
    ] {
        assert!(top.contains(global), "{global} in {top}");
    }
    for sub in [
        &["get", "--help"][..],
        &["query", "-h"],
        &["index", "add", "--help"],
    ] {
        let help = String::from_utf8(sandbox.run(sub, 0).stdout).unwrap();
        for global in [
            "--store <URL>",
            "--actor <ACTOR>",
            "--busy-timeout <MS>",
            "--verbose",
        ] {
            assert!(!help.contains(global), "{sub:?} lists {global}: {help}");
        }
        assert!(help.contains("docstore --help"), "{sub:?}: {help}");
    }
    assert!(
        String::from_utf8(sandbox.run(&["query", "--help"], 0).stdout)
            .unwrap()
            .contains("--consistent")
    );
    // Global options still work after the subcommand, and at every level.
    let store = sandbox.sqlite("g.db");
    sandbox.run(
        &["create", "t", "a", "{}", "--store", &store, "--actor", "me"],
        0,
    );
    let got = json(&sandbox.run(&["get", "t", "a", "--store", &store], 0));
    assert_eq!(got["created_by"], "me");
    let listed = sandbox.run(
        &["index", "list", "--store", &store, "--time", "rfc3339"],
        0,
    );
    assert!(listed.status.success());
}

#[test]
fn a_batch_names_a_write_by_its_position_and_line_both_from_1() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("b.db");
    // Line 1 is blank: the second write is on line 3.
    let lines = "\n{\"op\":\"check\",\"collection\":\"t\",\"id\":\"a\",\"version\":1}\n\
                 {\"op\":\"create\",\"collection\":\"t\",\"id\":\"b\",\"data\":{}}\n";
    let out = sandbox.run_with(&["--store", &store, "batch"], lines, 4);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("batch write 2 (line 3) (s/t/b)"),
        "{stderr}"
    );
    let bad = "{\"op\":\"check\",\"collection\":\"t\",\"id\":\"a\",\"version\":1}\n\n\
               {\"op\":\"remove\",\"collection\":\"t\",\"id\":\"a\"}\n";
    let out = sandbox.run_with(&["--store", &store, "batch"], bad, INVALID);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("batch write 2 (line 3):"), "{stderr}");
    // In an array, the position from 1.
    let array = r#"[{"op":"check","collection":"t","id":"a","version":1},
        {"op":"create","collection":"t","id":"b","data":{}}]"#;
    let out = sandbox.run_with(&["--store", &store, "batch"], array, 4);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("batch write 2 (s/t/b)"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_during_an_import_says_what_is_committed_and_how_to_resume() {
    use std::io::Write as _;
    let sandbox = Sandbox::new();
    let store = sandbox.sqlite("i.db");
    let line = |i: usize| {
        format!(
            "{{\"site\":\"s\",\"collection\":\"t\",\"id\":\"d{i:04}\",\"data\":{{}},\
             \"created_at\":1,\"updated_at\":1,\"created_by\":\"a\",\"updated_by\":\"a\",\
             \"version\":1}}\n"
        )
    };
    let mut child = sandbox
        .std_docstore(["--store", &store, "--site", "s", "import"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines: String = (0..350).map(line).collect();
    stdin.write_all(lines.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The import waits for more input with three full batches of 100 sent: they are written
    // meanwhile (the last 50 lines wait for their batch to fill or the input to end).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let count = sandbox.cmd(&["--store", &store, "count"]).output().unwrap();
        let count = String::from_utf8_lossy(&count.stdout).trim().parse::<u64>();
        if count.as_ref().is_ok_and(|&count| count >= 300) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the batches sent were not written while the input stalled: {count:?} stored"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status();
    assert!(kill.unwrap().success());
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(output.status.code(), Some(INTERRUPTED));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The count said is a lower bound of what is stored: never more.
    let stored = sandbox.run(&["--store", &store, "count"], 0);
    let stored: u64 = String::from_utf8_lossy(&stored.stdout)
        .trim()
        .parse()
        .unwrap();
    let said: u64 = stderr
        .split("with at least ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no count: {stderr}"));
    assert!(said <= stored, "said {said}, stored {stored}: {stderr}");
    assert!(stderr.contains("Run the same import again"), "{stderr}");
    // Run again, it finishes the import.
    sandbox.run_with(&["--store", &store, "import"], &lines, 0);
    let count = sandbox.run(&["--store", &store, "count"], 0);
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "350");
}

/// A command that gives up waiting for another process's lock says so once, in its error;
/// one whose wait ends well says nothing without -v (docs/contract.md, "The command line").
#[test]
fn a_wait_for_another_process_lock_is_said_once() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("wait.db");
    let holder = rusqlite::Connection::open(sandbox.path("wait.db")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let args = [
        "--store",
        &store,
        "--busy-timeout",
        "300",
        "put",
        "t",
        "d",
        "{}",
    ];
    let output = sandbox.run(&args, UNAVAILABLE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = stderr.matches("stayed locked").count();
    assert_eq!(said, 1, "{stderr}");
    assert!(!stderr.contains("waiting for a lock"), "{stderr}");
    // Released while the command waits: it goes on and succeeds.
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        holder.execute_batch("COMMIT").unwrap();
    });
    let args = [
        "--store",
        &store,
        "--busy-timeout",
        "20000",
        "-v",
        "put",
        "t",
        "d",
        "{}",
    ];
    let output = sandbox.run(&args, 0);
    release.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("waiting for a lock").count(), 1, "{stderr}");
    // No lock held: nothing said.
    let output = sandbox.run(&[&args[..4], &args[5..]].concat(), 0);
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `docstore ARGS` (site s) on a terminal: standard output and standard error both a
/// pseudo-terminal, as `script` (util-linux) gives them; what the terminal showed.
fn on_a_terminal(sandbox: &Sandbox, args: &[&str]) -> String {
    let binary = assert_cmd::cargo::cargo_bin("docstore");
    let mut line = vec![binary.display().to_string(), "--site".into(), "s".into()];
    line.extend(
        args.iter()
            .map(|arg| format!("'{}'", arg.replace('\'', r"'\''"))),
    );
    let output = std::process::Command::new("script")
        .current_dir(sandbox.dir())
        .env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args([
            "--quiet",
            "--return",
            "--command",
            &line.join(" "),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n")
}

/// On a terminal an import's summary and a plan are shown once (the JSON); in a pipe the
/// sentence on standard error is said as well, for the person watching.
#[test]
fn nothing_is_said_twice_on_a_terminal() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("t.db");
    let lines = sandbox.run(&["--store", &store, "export"], 0).stdout;
    let input = sandbox.path("in.jsonl");
    std::fs::write(&input, lines).unwrap();
    let import = ["--store", &store, "import", input.to_str().unwrap()];

    let piped = sandbox.run(&import, 0);
    let said = String::from_utf8_lossy(&piped.stderr);
    assert!(said.contains("already present 3"), "{said}");
    let shown = on_a_terminal(&sandbox, &import);
    assert_eq!(shown.matches("already_present").count(), 1, "{shown}");
    assert!(!shown.contains("already present 3"), "said twice: {shown}");

    let explain = ["--store", &store, "explain", "t", "n = 1"];
    let piped = sandbox.run(&explain, 0);
    assert!(!piped.stderr.is_empty(), "the plan in words, in a pipe");
    let shown = on_a_terminal(&sandbox, &explain);
    let plan = String::from_utf8_lossy(&piped.stderr);
    assert!(!shown.contains(plan.trim()), "said twice: {shown}");
    assert!(shown.contains("estimated_reads"), "{shown}");
}

/// A list of records is JSON lines on a terminal too (one record per line, as `export`,
/// `fsck` and `watch` print); one answer is one JSON value.
#[test]
fn a_list_is_json_lines_on_a_terminal_too() {
    let sandbox = Sandbox::new();
    let config = sandbox.path("app.toml");
    std::fs::write(
        &config,
        "[database]\nbackend = \"sqlite\"\n[database.sqlite]\npath = \"app.db\"\n\
         [[database.indexes]]\ncollection = \"t\"\nname = \"by_n\"\nfields = [\"n\"]\n\
         [[database.indexes]]\ncollection = \"t\"\nname = \"by_m\"\nfields = [\"-m\"]\n",
    )
    .unwrap();
    let config = config.display().to_string();
    sandbox.run(&["--config", &config, "create", "t", "a", r#"{"n":1}"#], 0);
    let shown = on_a_terminal(&sandbox, &["--config", &config, "index", "list"]);
    let lines: Vec<Value> = shown
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {shown}")))
        .collect();
    assert_eq!(lines.len(), 2, "{shown}");
    assert_eq!(lines[0]["name"], "by_n");
}

/// A unique index on the command line: a create taking a held value is exit 14 naming the
/// holder and writes nothing; documents sharing a value through a hand edit of the file are a
/// `shared` line of `fsck`, exit 12, also after `--repair` (never repaired).
#[test]
fn a_unique_index_refuses_a_held_value_and_fsck_reports_shared_values() {
    let sandbox = Sandbox::new();
    let config = sandbox.path("app.toml");
    std::fs::write(
        &config,
        "[database]\nbackend = \"sqlite\"\n[database.sqlite]\npath = \"app.db\"\n\
         [[database.indexes]]\ncollection = \"users\"\nname = \"by_email\"\n\
         fields = [\"email\"]\nunique = true\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let run = |args: &[&str], code: i32| {
        let mut all = vec!["--config", config.as_str()];
        all.extend_from_slice(args);
        sandbox.run(&all, code)
    };
    run(&["create", "users", "a", r#"{"email":"x"}"#], 0);
    let refused = run(&["create", "users", "b", r#"{"email":"x"}"#], 14);
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("by_email") && message.contains("document a"),
        "{message}"
    );
    run(&["get", "users", "b"], 3);
    run(&["create", "users", "b", r#"{"email":"y"}"#], 0);
    run(&["fsck"], 0);

    let conn = rusqlite::Connection::open(sandbox.path("app.db")).unwrap();
    // Both rows made to hold "x" behind the store's back: the index table says so too.
    let entry_of_a: Vec<u8> = conn
        .query_row(
            "SELECT entry_key FROM index_entries WHERE entry_id = 'a'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut entry_of_b = entry_of_a[..entry_of_a.len() - 3].to_vec(); // claim + string tag
    entry_of_b.extend_from_slice(b"b\0\0");
    conn.execute(
        "UPDATE index_entries SET entry_key = ?1 WHERE entry_id = 'b'",
        [entry_of_b],
    )
    .unwrap();
    drop(conn);
    for args in [&["fsck"][..], &["fsck", "--repair"]] {
        let output = run(args, 12);
        let line: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            line,
            serde_json::json!({"site": "s", "collection": "users", "unique_index": "by_email",
                               "problem": "shared", "ids": ["a", "b"], "repaired": false})
        );
    }
}

/// `create --expires-after` prints the document's expiry (memory, SQLite); `get` in
/// another process shows it, and a `put --expires-after 0` makes the document read as
/// deleted at once (exit 3), swept or not.
#[test]
fn expires_after_sets_the_expiry() {
    let sandbox = Sandbox::new();
    let created = json(&sandbox.run(
        &[
            "--store",
            "memory:",
            "create",
            "sessions",
            "s",
            "{}",
            "--expires-after",
            "60",
        ],
        0,
    ));
    let expires_at = created["expires_at"].as_i64().expect("an expiry");
    let created_at = created["created_at"].as_i64().unwrap();
    assert_eq!(expires_at - created_at, 60_000_000_000);
    let store = sandbox.sqlite("s.db");
    let created = json(&sandbox.run(
        &[
            "--store",
            &store,
            "create",
            "sessions",
            "s",
            "{}",
            "--expires-after",
            "3600",
        ],
        0,
    ));
    let expires_at = created["expires_at"].as_i64().expect("an expiry");
    let created_at = created["created_at"].as_i64().unwrap();
    assert_eq!(expires_at - created_at, 3_600_000_000_000);
    let got = json(&sandbox.run(&["--store", &store, "get", "sessions", "s"], 0));
    assert_eq!(got["expires_at"].as_i64(), Some(expires_at));
    let args = [
        "--store",
        &store,
        "put",
        "sessions",
        "s",
        "{}",
        "--expires-after",
        "0",
    ];
    sandbox.run(&args, 0);
    sandbox.run(&["--store", &store, "get", "sessions", "s"], 3);
    let count = sandbox.run(&["--store", &store, "count", "sessions"], 0);
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "0");
}
