//! What a user met trying the CLI on SQLite: a whole-store `fsck` that skipped a site left
//! with a counter and no document, a delete whose feed entry lost `--actor`, an export into a
//! closed standard output that said it succeeded, batch writes numbered two ways, text that
//! is not UTF-8 reported as an I/O failure, and empty environment variables read three ways.

mod support;

use assert_cmd::Command;
use serde_json::{Value, json};
use std::process::Output;
use support::exit::{COUNTERS_DIFFER, FAILURE, INVALID, SKIPPED};
use support::{Sandbox, expect, stdout_json};

impl Sandbox {
    fn store(&self) -> String {
        self.sqlite("d.db")
    }

    /// `docstore --store <the sandbox's store> ARGS`.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = self.docstore(["--store", &self.store()]);
        command.args(args);
        command
    }

    /// [`Sandbox::command`] as a `std` command (to choose its standard output).
    fn std_command(&self, args: &[&str]) -> std::process::Command {
        let mut command = self.std_docstore(["--store", &self.store()]);
        command.args(args);
        command
    }

    fn run(&self, args: &[&str], code: i32) -> Output {
        expect(self.command(args), code)
    }

    fn json(&self, args: &[&str], code: i32) -> Value {
        stdout_json(&self.run(args, code))
    }

    fn stderr(&self, args: &[&str], code: i32) -> String {
        String::from_utf8(self.run(args, code).stderr).unwrap()
    }

    /// Runs `docstore --store <store> ARGS` through `sh -c` with standard output closed
    /// (`>&-`): a `Stdio::null()` child would still have a standard output.
    fn with_stdout_closed(&self, args: &str) -> Output {
        let binary = assert_cmd::cargo::cargo_bin("docstore");
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "'{}' --store '{}' --site s {args} >&-",
                binary.display(),
                self.store()
            ))
            .current_dir(self.dir())
            .env_remove("DOCSTORE_URL")
            .env_remove("DOCSTORE_SITE")
            .output()
            .unwrap()
    }
}

// ---- fsck of every site visits a site left with a counter and no document ----

#[test]
fn a_whole_store_fsck_finds_a_counter_left_in_a_site_without_documents() {
    let sb = Sandbox::new();
    sb.run(&["--site", "drift", "create", "t", "a", "{}"], 0);
    sb.run(&["--site", "kept", "create", "t", "a", "{}"], 0);
    let conn = rusqlite::Connection::open(sb.path("d.db")).unwrap();
    conn.execute(
        "UPDATE collections SET documents = 2 WHERE site = 'drift'",
        [],
    )
    .unwrap();
    drop(conn);
    sb.run(&["--site", "drift", "delete", "t", "a"], 0);
    assert_eq!(sb.json(&["--site", "drift", "count"], 0), json!(1));

    let output = sb.run(&["fsck"], COUNTERS_DIFFER);
    let found: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        found,
        [
            json!({"site": "drift", "collection": "t", "counter": 1, "documents": 0,
                "repaired": false})
        ]
    );
    assert_eq!(
        sb.json(&["sites"], 0),
        json!([{"site": "drift", "count": 1}, {"site": "kept", "count": 1}]),
        "`sites` lists the site its counter keeps, with the count `count` gives"
    );
    sb.run(&["fsck", "--repair"], 0);
    assert_eq!(sb.json(&["--site", "drift", "count"], 0), json!(0));
    assert_eq!(
        sb.json(&["sites"], 0),
        json!([{"site": "kept", "count": 1}])
    );
    assert!(sb.stderr(&["fsck"], 0).contains("0 counters differed"));
}

// ---- the actor of a delete ----

#[test]
fn a_delete_records_its_actor_on_the_feed() {
    let sb = Sandbox::new();
    for id in ["a", "b"] {
        sb.run(&["--site", "s", "create", "t", id, "{}"], 0);
    }
    sb.run(&["--site", "s", "--actor", "alice", "delete", "t", "a"], 0);
    sb.run(
        &["--site", "s", "--actor", "bob", "delete-if", "t", "b", "1"],
        0,
    );
    let output = sb.run(
        &[
            "--site",
            "s",
            "watch",
            "--from",
            "start",
            "--until-idle",
            "--jsonl",
        ],
        0,
    );
    let deletes: Vec<(String, String)> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|change| change["kind"] == "deleted")
        .map(|change| {
            let field = |name: &str| change[name].as_str().unwrap().to_owned();
            (field("id"), field("actor"))
        })
        .collect();
    assert_eq!(
        deletes,
        [("a".into(), "alice".into()), ("b".into(), "bob".into())]
    );
}

// ---- standard output that cannot be written ----

#[test]
fn an_export_into_a_closed_standard_output_fails_without_a_success_summary() {
    let sb = Sandbox::new();
    sb.run(&["--site", "s", "create", "t", "a", "{}"], 0);
    let output = sb.with_stdout_closed("export");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(FAILURE), "{stderr}");
    assert!(!stderr.contains("exported"), "{stderr}");
    assert!(stderr.contains("standard output"), "{stderr}");
    // One-answer commands fail the same way.
    let output = sb.with_stdout_closed("get t a");
    assert_eq!(output.status.code(), Some(FAILURE));
    // Export into a file needs no standard output.
    let output = sb.with_stdout_closed("export -o out.jsonl");
    assert_eq!(output.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("exported 1 documents"),
        "{output:?}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn an_export_into_a_full_disk_fails() {
    let sb = Sandbox::new();
    sb.run(&["--site", "s", "create", "t", "a", "{}"], 0);
    let output = sb
        .std_command(&["--site", "s", "export"])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(FAILURE), "{stderr}");
    assert!(!stderr.contains("exported"), "{stderr}");
    // Standard output redirected to /dev/null is a standard output that works.
    let output = sb
        .std_command(&["--site", "s", "export"])
        .stdout(std::fs::File::create("/dev/null").unwrap())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

// ---- batch writes counted from 1 everywhere ----

#[test]
fn batch_messages_count_writes_from_one() {
    let sb = Sandbox::new();
    let repeated = sb.file(
        "repeated.jsonl",
        [
            r#"{"op": "put", "collection": "t", "id": "a", "data": {}}"#,
            "",
            r#"{"op": "put", "collection": "t", "id": "b", "data": {}}"#,
            r#"{"op": "check", "collection": "t", "id": "a", "version": null}"#,
        ]
        .join("\n"),
    );
    let stderr = sb.stderr(&["--site", "acme", "batch", &repeated], INVALID);
    assert!(
        stderr
            .contains("batch write 3 (line 4) repeats the key acme/t/a of batch write 1 (line 1)"),
        "{stderr}"
    );
    let array = sb.file(
        "array.json",
        json!([
            {"op": "create", "collection": "t", "id": "x", "data": {}},
            {"op": "put", "collection": "t", "id": "x", "data": {}},
        ])
        .to_string(),
    );
    let stderr = sb.stderr(&["--site", "acme", "batch", &array], INVALID);
    assert!(
        stderr.contains("batch write 2 repeats the key acme/t/x of batch write 1"),
        "{stderr}"
    );
    // The first write failing is write 1 in every message.
    sb.run(&["--site", "acme", "create", "t", "a", "{}"], 0);
    let create = sb.file(
        "create.jsonl",
        r#"{"op": "create", "collection": "t", "id": "a", "data": {}}"#,
    );
    let stderr = sb.stderr(&["--site", "acme", "batch", &create], 4);
    assert!(
        stderr.contains("batch write 1 (line 1) (acme/t/a); nothing was written"),
        "{stderr}"
    );
}

// ---- text that is not UTF-8 is invalid input ----

#[test]
fn text_that_is_not_utf8_is_invalid_input_naming_where() {
    let sb = Sandbox::new();
    let data = sb.file("data.json", b"{\"name\": \"caf\xe9\"}");
    let at_data = format!("@{data}");
    for command in ["put", "create"] {
        let stderr = sb.stderr(&["--site", "s", command, "t", "a", &at_data], INVALID);
        assert!(stderr.contains("not UTF-8"), "{command}: {stderr}");
    }
    let mut piped = sb.command(&["--site", "s", "put", "t", "a", "-"]);
    piped.write_stdin(b"{\"a\":\n \"\xff\"}".to_vec());
    let stderr = String::from_utf8(expect(piped, INVALID).stderr).unwrap();
    assert!(stderr.contains("line 2"), "{stderr}");
    sb.run(&["--site", "s", "put", "t", "a", "{}"], 0);
    let patch = format!("@{}", sb.file("patch.json", b"{\"x\": \"\xc3\"}"));
    sb.run(&["--site", "s", "update", "t", "a", &patch], INVALID);

    let query = format!("@{}", sb.file("q.txt", b"name = \"caf\xe9\""));
    for command in ["query", "explain"] {
        let stderr = sb.stderr(&["--site", "s", command, "t", &query], INVALID);
        assert!(stderr.contains("not UTF-8"), "{command}: {stderr}");
    }
    let batch = sb.file(
        "batch.jsonl",
        b"{\"op\": \"put\", \"collection\": \"t\", \"id\": \"\xe9\", \"data\": {}}",
    );
    let stderr = sb.stderr(&["--site", "s", "batch", &batch], INVALID);
    assert!(stderr.contains("not UTF-8"), "{stderr}");

    // An import line that is not UTF-8 is a skipped line naming its number, in both forms.
    let line = |id: &str| {
        json!({"site": "s", "collection": "t", "id": id, "data": {}, "created_at": 1,
               "updated_at": 1, "created_by": "x", "updated_by": "x", "version": 1})
        .to_string()
    };
    let mut export = format!("{}\n", line("ok")).into_bytes();
    export.extend_from_slice(b"{\"site\": \"s\", \"id\": \"\xe9\"}\n");
    let export = sb.file("export.jsonl", export);
    let summary = sb.json(&["--site", "s", "import", &export], SKIPPED);
    assert_eq!(summary["skipped"][0]["line"], json!(2), "{summary}");
    let plain = sb.file("plain.jsonl", b"{\"k\": \"p1\"}\n{\"k\": \"\xe9\"}\n");
    let summary = sb.json(
        &[
            "--site",
            "s",
            "import",
            "--id-field",
            "k",
            "--collection",
            "p",
            &plain,
        ],
        SKIPPED,
    );
    assert_eq!(summary["skipped"][0]["line"], json!(2), "{summary}");
    // A plain JSON array is read whole: bytes that are not UTF-8 refuse it all.
    let array = sb.file("plain.json", b"[{\"k\": \"q1\"}, {\"k\": \"\xe9\"}]");
    let stderr = sb.stderr(
        &[
            "--site",
            "s",
            "import",
            "--id-field",
            "k",
            "--collection",
            "q",
            &array,
        ],
        INVALID,
    );
    assert!(stderr.contains("not UTF-8"), "{stderr}");
    assert_eq!(sb.json(&["--site", "s", "count", "q"], 0), json!(0));
}

// ---- empty environment variables ----

#[test]
fn an_empty_environment_variable_is_the_same_as_an_unset_one() {
    let sb = Sandbox::new();
    let mut create = sb.command(&["--site", "s", "create", "t", "a", "{}"]);
    create.env("DOCSTORE_ACTOR", "");
    let output = expect(create, 0);
    let document: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["created_by"], "docstore-cli", "the default actor");

    let mut count = sb.command(&["count"]);
    count.env("DOCSTORE_SITE", "");
    let output = expect(count, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap().trim(), "0");
    let mut fsck = sb.command(&["fsck"]);
    fsck.env("DOCSTORE_SITE", "");
    let output = expect(fsck, 0);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("1 sites,"),
        "an empty $DOCSTORE_SITE checks every site: {output:?}"
    );
    // A flag given empty is still refused.
    sb.run(&["--site", "", "count"], INVALID);
    sb.run(&["--actor", "", "--site", "s", "put", "t", "b", "{}"], 0);
}
