//! The real `docstore` binary against SQLite files and memory.

mod support;

use assert_cmd::Command;
use serde_json::{Value, json};
use std::path::Path;
use support::{Sandbox, expect};

impl Sandbox {
    /// `docstore --store <db> --site s --actor tester ARGS`, run in the sandbox directory.
    fn cmd(&self, db: &str, args: &[&str]) -> Command {
        let mut command = self.docstore(self.flags(db));
        command.args(args);
        command
    }

    /// The same command as [`Sandbox::cmd`], as a `std` command (to spawn it).
    fn spawnable(&self, db: &str, args: &[&str]) -> std::process::Command {
        let mut command = self.std_docstore(self.flags(db));
        command.args(args);
        command
    }

    fn flags(&self, db: &str) -> [String; 6] {
        [
            "--store",
            &self.sqlite(db),
            "--site",
            "s",
            "--actor",
            "tester",
        ]
        .map(str::to_owned)
    }

    /// Runs and parses standard output as JSON (null when it is not), asserting the exit
    /// code.
    fn json(&self, db: &str, args: &[&str], code: i32) -> Value {
        let output = expect(self.cmd(db, args), code);
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
    }

    fn stderr(&self, db: &str, args: &[&str], code: i32) -> String {
        String::from_utf8(expect(self.cmd(db, args), code).stderr).unwrap()
    }
}

/// An export line.
fn line(site: &str, collection: &str, id: &str, data: Value) -> String {
    json!({"site": site, "collection": collection, "id": id, "data": data, "created_at": 10,
        "updated_at": 20, "created_by": "a", "updated_by": "b", "version": 2})
    .to_string()
}

fn reasons(summary: &Value) -> Vec<(u64, String)> {
    summary["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["line"].as_u64().unwrap(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_store_call_from_the_command_line() {
    let sb = Sandbox::new();
    let created = sb.json(
        "a.db",
        &["create", "tickets", "T-1", r#"{"status":"open","p":3}"#],
        0,
    );
    assert_eq!(
        (created["version"].clone(), created["created_by"].clone()),
        (json!(1), json!("tester"))
    );
    assert_eq!(
        sb.json("a.db", &["create", "tickets", "T-1", "{}"], 4),
        Value::Null
    );
    let got = sb.json("a.db", &["get", "tickets", "T-1"], 0);
    assert_eq!(got["data"], json!({"status": "open", "p": 3}));
    sb.json("a.db", &["get", "tickets", "nope"], 3);
    let updated = sb.json(
        "a.db",
        &["update", "tickets", "T-1", r#"{"p":null,"tag":"x"}"#],
        0,
    );
    assert_eq!(updated["data"], json!({"status": "open", "tag": "x"}));
    sb.json(
        "a.db",
        &["update-if", "tickets", "T-1", "1", r#"{"a":1}"#],
        5,
    );
    let v3 = sb.json(
        "a.db",
        &["update-if", "tickets", "T-1", "2", r#"{"a":1}"#],
        0,
    );
    assert_eq!(v3["version"], json!(3));
    let put = sb.json(
        "a.db",
        &["put", "tickets", "T-2", r#"{"status":"closed","p":1}"#],
        0,
    );
    assert_eq!(put["version"], json!(1));
    assert_eq!(sb.json("a.db", &["count"], 0), json!(2));
    assert_eq!(
        sb.json("a.db", &["collections"], 0),
        json!([{"collection": "tickets", "count": 2}])
    );
    sb.json("a.db", &["delete-if", "tickets", "T-2", "7"], 5);
    assert_eq!(
        sb.json("a.db", &["delete-if", "tickets", "T-2", "1"], 0),
        json!({"deleted": true})
    );
    assert_eq!(
        sb.json("a.db", &["delete", "tickets", "T-2"], 0),
        json!({"deleted": false})
    );
    sb.json("a.db", &["update", "tickets", "T-2", "{}"], 3);
    // Bad input: a non-object body, invalid JSON, invalid names.
    sb.json("a.db", &["create", "tickets", "T-3", "[1]"], 6);
    sb.json("a.db", &["create", "tickets", "T-3", "{nope"], 6);
    sb.json("a.db", &["create", "bad#name", "T-3", "{}"], 6);
    assert_eq!(sb.json("a.db", &["count"], 0), json!(1));
}

#[test]
fn data_can_come_from_standard_input() {
    let sb = Sandbox::new();
    let output = sb
        .cmd("a.db", &["create", "c", "d"])
        .write_stdin(r#"{"from":"stdin"}"#)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        sb.json("a.db", &["get", "c", "d"], 0)["data"],
        json!({"from": "stdin"})
    );
}

#[test]
fn queries_in_text_and_json() {
    let sb = Sandbox::new();
    for (id, status, p) in [
        ("a", "open", 1),
        ("b", "open", 5),
        ("c", "closed", 9),
        ("d", "open", 3),
    ] {
        sb.json(
            "q.db",
            &[
                "create",
                "t",
                id,
                &json!({"status": status, "p": p}).to_string(),
            ],
            0,
        );
    }
    let ids = |v: &Value| -> Vec<String> {
        v["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let page = sb.json(
        "q.db",
        &[
            "query",
            "t",
            r#"status = "open" and p >= 3 order by p desc"#,
        ],
        0,
    );
    assert_eq!(ids(&page), ["b", "d"]);
    let json_query = r#"{"filter": {"eq": ["status", "closed"]}}"#;
    assert_eq!(ids(&sb.json("q.db", &["query", "t", json_query], 0)), ["c"]);
    let first = sb.json("q.db", &["query", "t", "order by p limit 2"], 0);
    assert_eq!(ids(&first), ["a", "d"]);
    let cursor = first["next"].as_str().unwrap().to_owned();
    let second = sb.json(
        "q.db",
        &["query", "t", "order by p limit 2", "--cursor", &cursor],
        0,
    );
    assert_eq!(ids(&second), ["b", "c"]);
    assert_eq!(second["next"], Value::Null);
    assert_eq!(
        ids(&sb.json("q.db", &["query", "t", "limit 1", "--all"], 0)),
        ["a", "b", "c", "d"]
    );
    let err = sb.stderr("q.db", &["query", "t", "status = "], 6);
    assert!(err.contains("column 10"), "{err}");
    sb.json("q.db", &["query", "t", "limit 1", "--cursor", "garbage"], 6);
}

#[test]
fn export_then_import_round_trips_every_document() {
    let sb = Sandbox::new();
    let docs = [
        ("c1", "x", json!({"n": u64::MAX, "f": 1.0, "s": "é\"\n"})),
        ("c1", "y", json!({"nested": {"a": [1, null]}})),
        ("c2", "z", json!({})),
    ];
    for (collection, id, data) in &docs {
        sb.json("src.db", &["create", collection, id, &data.to_string()], 0);
    }
    sb.json("src.db", &["update", "c1", "y", r#"{"more": true}"#], 0);
    let export = sb.path("dump.jsonl");
    sb.cmd("src.db", &["export", "--output", export.to_str().unwrap()])
        .assert()
        .success();
    let lines = std::fs::read_to_string(&export).unwrap();
    assert_eq!(lines.lines().count(), 3);

    let summary = sb.json("dst.db", &["import", export.to_str().unwrap()], 0);
    assert_eq!(
        (
            summary["imported"].clone(),
            summary["already_present"].clone()
        ),
        (json!(3), json!(0))
    );
    // Resumable: a second run skips what is there.
    let again = sb.json("dst.db", &["import", export.to_str().unwrap()], 0);
    assert_eq!(
        (again["imported"].clone(), again["already_present"].clone()),
        (json!(0), json!(3))
    );

    let reexport = sb.cmd("dst.db", &["export"]).output().unwrap();
    assert!(reexport.status.success());
    assert_eq!(
        String::from_utf8(reexport.stdout).unwrap(),
        lines,
        "documents differ after the round trip"
    );
    let y = sb.json("dst.db", &["get", "c1", "y"], 0);
    assert_eq!(y["version"], json!(2));
}

#[test]
fn import_reports_what_it_skipped_and_why() {
    let sb = Sandbox::new();
    let good = json!({"site": "s", "collection": "c", "id": "ok", "data": {}, "created_at": 1,
        "updated_at": 2, "created_by": "a", "updated_by": "b", "version": 3});
    let mut bad_name = good.clone();
    bad_name["collection"] = json!("bad#c");
    let mut bad_version = good.clone();
    bad_version["id"] = json!("v0");
    bad_version["version"] = json!(0);
    let input = [
        good.to_string(),
        "not json".into(),
        bad_name.to_string(),
        String::new(),
        bad_version.to_string(),
    ]
    .join("\n");
    let path = sb.path("in.jsonl");
    std::fs::write(&path, input).unwrap();
    let summary = sb.json("d.db", &["import", path.to_str().unwrap()], 10);
    assert_eq!(summary["imported"], json!(1));
    let lines: Vec<u64> = summary["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [2, 3, 5]);
    assert_eq!(sb.json("d.db", &["get", "c", "ok"], 0)["version"], json!(3));
}

#[test]
fn copy_moves_a_site_to_another_store() {
    let sb = Sandbox::new();
    // One process for the many writes: import a generated file (more than two export pages).
    let lines: Vec<String> = (0..1_200)
        .map(|i| {
            json!({"site": "s", "collection": if i % 2 == 0 { "even" } else { "odd" }, "id": format!("d{i:04}"),
                "data": {"i": i}, "created_at": i, "updated_at": i + 5, "created_by": "gen",
                "updated_by": "gen", "version": 1 + i % 3}).to_string()
        })
        .collect();
    let path = sb.path("gen.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    sb.json("src.db", &["import", path.to_str().unwrap()], 0);
    let summary = sb.json("src.db", &["copy", "--to", &sb.sqlite("dst.db")], 0);
    assert_eq!(summary["imported"], json!(1_200));
    let export =
        |db: &str| String::from_utf8(sb.cmd(db, &["export"]).output().unwrap().stdout).unwrap();
    assert_eq!(export("dst.db"), export("src.db"));
    let only = sb.json(
        "src.db",
        &["copy", "--to", &sb.sqlite("only.db"), "--collection", "odd"],
        0,
    );
    assert_eq!(only["imported"], json!(600));
}

#[test]
fn config_file_and_memory_store() {
    let sb = Sandbox::new();
    let config = sb.path("docstore.toml");
    std::fs::write(&config, format!("[database]\nbackend = \"sqlite\"\nmax_doc_bytes = 20\n[database.sqlite]\npath = {:?}\n", sb.path("cfg.db").display().to_string())).unwrap();
    let run = |args: &[&str]| {
        let mut cmd = Command::cargo_bin("docstore").unwrap();
        cmd.env_remove("DOCSTORE_URL")
            .args(["--config", config.to_str().unwrap()])
            .args(args);
        cmd.output().unwrap()
    };
    assert!(run(&["create", "c", "small", "{}"]).status.success());
    assert_eq!(
        run(&[
            "create",
            "c",
            "big",
            &json!({"p": "x".repeat(30)}).to_string()
        ])
        .status
        .code(),
        Some(7)
    );
    assert!(Path::new(&sb.path("cfg.db")).exists());
    std::fs::write(
        &config,
        "[database]\nbackend = \"sqlite\"\nmax_doc_byte = 20\n",
    )
    .unwrap();
    let typo = run(&["count"]);
    assert_eq!(typo.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("max_doc_byte"));

    let mut memory = Command::cargo_bin("docstore").unwrap();
    let out = memory
        .args(["--store", "memory:", "create", "c", "d", "{}"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut unknown = Command::cargo_bin("docstore").unwrap();
    let out = unknown
        .args(["--store", "mongo://x", "count"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mongo"));
}

#[test]
fn help_documents_the_exit_codes() {
    let out = Command::cargo_bin("docstore")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("Exit codes") && help.contains("5   version conflict"),
        "{help}"
    );
}

// ---- an import writes only into the site the user names ----

#[test]
fn import_never_writes_into_a_site_the_user_did_not_name() {
    let sb = Sandbox::new();
    let input = [
        line("s", "c", "one", json!({})),
        line("other", "c", "two", json!({})),
        line("s", "c", "three", json!({})),
    ]
    .join("\n");
    let path = sb.file("in.jsonl", input);
    // --site zzz: no line is for zzz, so nothing is written anywhere.
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    let out = cmd
        .env_remove("DOCSTORE_URL")
        .args([
            "--store",
            &sb.sqlite("d.db"),
            "--site",
            "zzz",
            "import",
            &path,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["imported"], json!(0));
    assert_eq!(summary["other_sites"], json!({"s": 2, "other": 1}));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipped 3 lines of other sites"),
        "{stderr}"
    );
    for site in ["s", "other", "zzz"] {
        let mut cmd = Command::cargo_bin("docstore").unwrap();
        let count = cmd
            .args(["--store", &sb.sqlite("d.db"), "--site", site, "count"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "0", "{site}");
    }
    // No site named: nothing is written, not even into the default site.
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    let out = cmd
        .env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", &sb.sqlite("d.db"), "import", &path])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--site"));
    // --site s: the lines of s; the line of another site is counted, not written.
    let summary = sb.json("d.db", &["import", &path], 10);
    assert_eq!(summary["imported"], json!(2));
    assert_eq!(summary["other_sites"], json!({"other": 1}));
    // --all-sites: a whole-store restore puts each line into its own site.
    let summary = sb.json("all.db", &["import", "--all-sites", &path], 0);
    assert_eq!(summary["imported"], json!(3));
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    let got = cmd
        .args([
            "--store",
            &sb.sqlite("all.db"),
            "--site",
            "other",
            "get",
            "c",
            "two",
        ])
        .output()
        .unwrap();
    assert!(got.status.success());
}

// ---- item 3: data nested as deep as the store allows survives export and import ----

/// A JSON object whose deepest value sits at `depth` (the object itself is level 1).
fn nested(depth: usize) -> String {
    format!(
        "{{\"a\":{}1{}}}",
        "[".repeat(depth - 2),
        "]".repeat(depth - 2)
    )
}

#[test]
fn the_deepest_documents_round_trip_through_export_and_import() {
    let sb = Sandbox::new();
    let deepest = sb.file("deep.json", nested(docstore::document::MAX_DEPTH + 1));
    sb.json(
        "src.db",
        &["create", "c", "deep", &format!("@{deepest}")],
        0,
    );
    let too_deep = sb.file("deeper.json", nested(docstore::document::MAX_DEPTH + 2));
    let err = sb.stderr(
        "src.db",
        &["create", "c", "deeper", &format!("@{too_deep}")],
        6,
    );
    assert!(err.contains("nested more than 127"), "{err}");
    let dump = sb.path("dump.jsonl");
    sb.cmd("src.db", &["export", "-o", dump.to_str().unwrap()])
        .assert()
        .success();
    let summary = sb.json("dst.db", &["import", dump.to_str().unwrap()], 0);
    assert_eq!(summary["imported"], json!(1));
    assert_eq!(
        sb.json("dst.db", &["get", "c", "deep"], 0)["data"],
        sb.json("src.db", &["get", "c", "deep"], 0)["data"]
    );
}

// ---- item 4: bad bytes cost one line, with its number; a BOM costs nothing ----

#[test]
fn invalid_utf8_skips_its_line_and_the_import_goes_on() {
    let sb = Sandbox::new();
    let mut input = b"\xEF\xBB\xBF".to_vec();
    input.extend(line("s", "c", "l1", json!({"n": 1})).as_bytes());
    input.extend(b"\r\n");
    input.extend(line("s", "c", "l2", json!({})).as_bytes());
    input.extend(b"\n{\"site\": \"s\", \"bad\": \"\xFF\xFE\"}\n");
    input.extend(line("s", "c", "l4", json!({})).as_bytes());
    input.extend(b"\n");
    let path = sb.file("in.jsonl", input);
    let out = sb.cmd("d.db", &["import", &path]).output().unwrap();
    assert_eq!(out.status.code(), Some(10));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["imported"], json!(3));
    let skipped = reasons(&summary);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0, 3);
    assert!(skipped[0].1.contains("not UTF-8"), "{skipped:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("skipped line 3: not UTF-8"), "{stderr}");
    assert!(
        stderr.contains("skipped 1"),
        "a summary on stderr: {stderr}"
    );
    sb.json("d.db", &["get", "c", "l1"], 0);
}

// ---- item 5: numbers that cannot be stored exactly are refused ----

#[test]
fn numbers_that_would_be_rounded_are_refused() {
    let sb = Sandbox::new();
    sb.json("d.db", &["create", "c", "ok", "{}"], 0);
    let huge = format!("{{\"n\": {}}}", "1".repeat(100));
    for data in [
        r#"{"n": 18446744073709551616}"#,
        &huge,
        r#"{"x": {"f": 1e-400}}"#,
    ] {
        let err = sb.stderr("d.db", &["put", "c", "n", data], 6);
        assert!(
            err.contains("cannot be stored exactly") || err.contains("too small"),
            "{err}"
        );
    }
    sb.json(
        "d.db",
        &["update", "c", "ok", r#"{"n": -9223372036854775809}"#],
        6,
    );
    sb.json("d.db", &["get", "c", "n"], 3);
    // The largest exact values still pass, and an import line is checked the same way.
    let ok = sb.json(
        "d.db",
        &[
            "put",
            "c",
            "n",
            r#"{"u": 18446744073709551615, "f": 5e-324}"#,
        ],
        0,
    );
    assert_eq!(ok["data"], json!({"u": u64::MAX, "f": 5e-324}));
    let path = sb.file(
        "in.jsonl",
        line("s", "c", "big", json!({})).replace("{}", r#"{"n": 18446744073709551616}"#),
    );
    let summary = sb.json("d.db", &["import", &path], 10);
    assert!(reasons(&summary)[0].1.contains("cannot be stored exactly"));
    sb.stderr("d.db", &["query", "c", "n = 1e-400"], 6);
}

// ---- item 6: --config reads the [database] table of any file; flags beat the environment ----

#[test]
fn config_reads_the_database_table_of_an_app_file_and_beats_the_environment() {
    let sb = Sandbox::new();
    let app = sb.file(
        "app.toml",
        format!(
            "title = \"my app\"\n[server]\nport = 8080\n\n[database]\nbackend = \"sqlite\"\n\
             [database.sqlite]\npath = {:?}\n\n[logging]\nlevel = \"info\"\n",
            sb.path("app.db").display().to_string()
        ),
    );
    let run = |args: &[&str]| {
        let mut cmd = Command::cargo_bin("docstore").unwrap();
        cmd.env("DOCSTORE_URL", sb.sqlite("env.db"))
            .env_remove("DOCSTORE_SITE")
            .args(args);
        cmd.output().unwrap()
    };
    let out = run(&["--config", &app, "create", "c", "x", "{}"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sb.path("app.db").exists() && !sb.path("env.db").exists());
    // --store beats $DOCSTORE_URL too; both flags at once is a usage error.
    let out = run(&["--store", &sb.sqlite("flag.db"), "create", "c", "x", "{}"]);
    assert!(out.status.success());
    assert!(sb.path("flag.db").exists() && !sb.path("env.db").exists());
    let out = run(&["--store", &sb.sqlite("flag.db"), "--config", &app, "count"]);
    assert_eq!(out.status.code(), Some(2));
    // Without flags the environment chooses.
    let out = run(&["create", "c", "x", "{}"]);
    assert!(out.status.success());
    assert!(sb.path("env.db").exists());
    // A file without [database] says so.
    let none = sb.file("none.toml", "[server]\nport = 1\n");
    let out = run(&["--config", &none, "count"]);
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no [database] table"));
}

// ---- item 7: surprises: memory:, mistyped paths, create-table ----

#[test]
fn memory_warns_and_read_commands_never_create_a_database() {
    let sb = Sandbox::new();
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    let out = cmd
        .env_remove("DOCSTORE_URL")
        .args(["--store", "memory:", "count"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("keeps nothing"));
    for args in [
        &["get", "c", "x"][..],
        &["count"],
        &["query", "c"],
        &["export"],
        &["update", "c", "x", "{}"],
    ] {
        let err = sb.stderr("typo.db", args, 1);
        assert!(
            err.contains("no SQLite database at") && err.contains("typo.db"),
            "{err}"
        );
        assert!(!sb.path("typo.db").exists(), "{args:?} created the file");
    }
    sb.json("typo.db", &["create", "c", "x", "{}"], 0);
    sb.json("typo.db", &["get", "c", "x"], 0);
}

// ---- item 8: pipelines ----

#[test]
fn query_prints_json_lines_and_closed_pipes_end_quietly() {
    let sb = Sandbox::new();
    let lines: Vec<String> = (0..3000)
        .map(|i| {
            line(
                "s",
                "c",
                &format!("d{i:05}"),
                json!({"i": i, "pad": "x".repeat(100)}),
            )
        })
        .collect();
    let path = sb.file("in.jsonl", lines.join("\n"));
    sb.json("d.db", &["import", &path], 0);
    let out = sb
        .cmd("d.db", &["query", "c", "i < 3 order by i desc", "--jsonl"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let ids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["d00002", "d00001", "d00000"]);
    let out = sb
        .cmd("d.db", &["query", "c", "limit 2", "--jsonl"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("next page: --cursor "));
    let all = sb
        .cmd("d.db", &["query", "c", "limit 7", "--all", "--jsonl"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&all.stdout).lines().count(), 3000);
    // The one-object form of --all is the same JSON as before, now streamed.
    let page = sb.json("d.db", &["query", "c", "i >= 2990", "--all"], 0);
    assert_eq!(page["documents"].as_array().unwrap().len(), 10);
    assert_eq!(
        (page["next"].clone(), page["exhausted_scan"].clone()),
        (Value::Null, json!(false))
    );
    let empty = sb.json("d.db", &["query", "c", "i < 0", "--all"], 0);
    assert_eq!(empty["documents"], json!([]));

    // `export | head -1` and `query --all --jsonl | head -1`: exit 0, nothing on stderr.
    for args in [&["export"][..], &["query", "c", "--all", "--jsonl"]] {
        let mut child = sb
            .spawnable("d.db", args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
        assert!(first.contains("d00000"));
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    }
}

/// The peak resident memory of a child, in KiB, polled from /proc while it runs.
fn peak_rss_kib(mut child: std::process::Child) -> (u64, std::process::ExitStatus, u64) {
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        std::io::BufRead::lines(std::io::BufReader::new(stdout)).count() as u64
    });
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_file)
            && let Some(hwm) = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))
        {
            peak = peak.max(
                hwm.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .unwrap_or(0),
            );
        }
        if let Some(status) = child.try_wait().unwrap() {
            return (peak, status, reader.join().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn query_all_streams_in_flat_memory_over_100_000_documents() {
    let sb = Sandbox::new();
    let pad = "x".repeat(1000);
    sb.json(
        "big.db",
        &["create", "c", "seed", &json!({"pad": pad}).to_string()],
        0,
    );
    // 100 000 copies of the seed row, written straight into the file (fast).
    let conn = rusqlite::Connection::open(sb.path("big.db")).unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
         INSERT INTO documents SELECT site, collection, printf('d%06d', i), data, created_at,
             updated_at, created_by, updated_by, version, expires_at FROM documents, n \
         WHERE id = 'seed'",
    )
    .unwrap();
    drop(conn);
    for args in [
        &["query", "c", "--all", "--jsonl"][..],
        &["query", "c", "--all"],
    ] {
        let child = sb
            .spawnable("big.db", args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (peak, status, lines) = peak_rss_kib(child);
        assert!(status.success(), "{args:?}");
        if args.len() == 4 {
            assert_eq!(lines, 100_001);
        }
        // 100 000 documents of 1 KB are over 100 MB; a page of 1000 is about 1 MB.
        assert!(
            peak > 0 && peak < 64 * 1024,
            "{args:?}: peak RSS {peak} KiB"
        );
    }
}

// ---- item 9: count COLLECTION, RFC 3339, key-naming errors, @file, no silent wait,
// ---- --on-existing ----

#[test]
fn count_of_one_collection_and_rfc3339_timestamps() {
    let sb = Sandbox::new();
    sb.json("d.db", &["create", "a", "1", "{}"], 0);
    sb.json("d.db", &["create", "a", "2", "{}"], 0);
    sb.json("d.db", &["create", "b", "1", "{}"], 0);
    assert_eq!(sb.json("d.db", &["count", "a"], 0), json!(2));
    assert_eq!(sb.json("d.db", &["count", "none"], 0), json!(0));
    assert_eq!(sb.json("d.db", &["count"], 0), json!(3));
    sb.json("d.db", &["count", "bad#name"], 6);

    let doc = sb.json("d.db", &["--time", "rfc3339", "get", "a", "1"], 0);
    let created = doc["created_at"].as_str().unwrap().to_owned();
    assert!(created.ends_with('Z') && created.contains('T'), "{created}");
    // Import lines and queries take RFC 3339 as well as nanoseconds.
    let path = sb.file(
        "in.jsonl",
        line("s", "t", "old", json!({}))
            .replace(
                "\"created_at\":10",
                "\"created_at\":\"2001-02-03T04:05:06.000000007Z\"",
            )
            .replace(
                "\"updated_at\":20",
                "\"updated_at\":\"2001-02-03T04:05:06.5-01:00\"",
            ),
    );
    sb.json("d.db", &["import", &path], 0);
    let old = sb.json("d.db", &["get", "t", "old"], 0);
    assert_eq!(old["created_at"], json!(981_173_106_000_000_007i64));
    assert_eq!(old["updated_at"], json!(981_176_706_500_000_000i64));
    let page = sb.json(
        "d.db",
        &[
            "query",
            "t",
            r#"$created_at < "2001-02-03T04:05:06.000000008Z""#,
        ],
        0,
    );
    assert_eq!(page["documents"].as_array().unwrap().len(), 1);
    let page = sb.json(
        "d.db",
        &["query", "t", r#"$created_at < "2001-02-03T04:05:06Z""#],
        0,
    );
    assert_eq!(page["documents"], json!([]));
    sb.stderr("d.db", &["query", "t", r#"$updated_at > "yesterday""#], 6);
}

#[test]
fn errors_name_the_key_and_data_comes_from_files() {
    let sb = Sandbox::new();
    sb.json("d.db", &["create", "c", "x", "{}"], 0);
    for args in [
        &["update", "c", "nope", "{}"][..],
        &["update-if", "c", "nope", "1", "{}"],
        &["delete-if", "c", "nope", "1"],
        &["get", "c", "nope"],
    ] {
        let err = sb.stderr("d.db", args, 3);
        assert!(err.contains("s/c/nope"), "{args:?}: {err}");
    }
    let err = sb.stderr("d.db", &["update-if", "c", "x", "7", "{}"], 5);
    assert!(err.contains("s/c/x") && err.contains("version 1"), "{err}");

    // Data beyond what one argument may hold (128 KiB on Linux) from a file, and from
    // standard input with @-.
    let big = json!({"text": "y".repeat(300_000)}).to_string();
    let file = sb.file("big.json", &big);
    sb.json("d.db", &["put", "c", "big", &format!("@{file}")], 0);
    assert_eq!(
        sb.json("d.db", &["get", "c", "big"], 0)["data"].to_string(),
        big
    );
    let out = sb
        .cmd("d.db", &["update", "c", "big", "@-"])
        .write_stdin(r#"{"more": 1}"#)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = sb.stderr("d.db", &["create", "c", "y", "@missing.json"], 1);
    assert!(err.contains("missing.json"), "{err}");
}

#[test]
fn missing_data_on_a_terminal_is_a_usage_error_not_a_wait() {
    let sb = Sandbox::new();
    let bin = assert_cmd::cargo::cargo_bin("docstore");
    // `script` gives the command a terminal as standard input.
    let command = format!(
        "timeout 10 {} --store {} create c x; echo \"rc=$?\"",
        bin.display(),
        sb.sqlite("d.db")
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("rc=2"), "{text}");
    assert!(text.contains("DATA is missing"), "{text}");
}

#[test]
fn import_replaces_older_documents_when_asked() {
    let sb = Sandbox::new();
    let record = |id: &str, version: u64, updated_at: i64, v: i64| {
        json!({"site": "s", "collection": "c", "id": id, "data": {"v": v}, "created_at": 1,
            "updated_at": updated_at, "created_by": "a", "updated_by": "b", "version": version})
        .to_string()
    };
    let stored = [
        record("a", 2, 20, 0),
        record("b", 5, 50, 0),
        record("c", 3, 30, 0),
    ];
    sb.json(
        "d.db",
        &["import", &sb.file("old.jsonl", stored.join("\n"))],
        0,
    );
    // a: newer version; b: older version; c: same version, later write; d: new.
    let incoming = [
        record("a", 3, 25, 1),
        record("b", 4, 60, 1),
        record("c", 3, 31, 1),
        record("d", 1, 1, 1),
    ];
    let path = sb.file("new.jsonl", incoming.join("\n"));
    let skip = sb.json("d.db", &["import", &path], 0);
    assert_eq!(
        (skip["imported"].clone(), skip["already_present"].clone()),
        (json!(1), json!(3))
    );
    let newer = sb.json("d.db", &["import", "--on-existing", "newer", &path], 0);
    assert_eq!(
        (newer["replaced"].clone(), newer["already_present"].clone()),
        (json!(2), json!(2)),
        "{newer}"
    );
    let v = |id: &str| sb.json("d.db", &["get", "c", id], 0);
    assert_eq!(
        (v("a")["version"].clone(), v("a")["data"]["v"].clone()),
        (json!(3), json!(1))
    );
    assert_eq!(v("b")["version"], json!(5));
    assert_eq!(v("c")["updated_at"], json!(31));
    let overwrite = sb.json("d.db", &["import", "--on-existing", "overwrite", &path], 0);
    assert_eq!(
        overwrite["replaced"],
        json!(1),
        "only b differs now: {overwrite}"
    );
    assert_eq!(v("b")["version"], json!(4));
    let err = sb.stderr("d.db", &["import", "--on-existing", "fail", &path], 4);
    assert!(err.contains("line 1") && err.contains("s/c/a"), "{err}");
}

// ---- item 10: text queries ----

#[test]
fn text_queries_quote_literal_keys_and_point_at_lines() {
    let sb = Sandbox::new();
    sb.json("d.db", &["create", "c", "dotted", r#"{"a.b": 1}"#], 0);
    sb.json("d.db", &["create", "c", "nested", r#"{"a": {"b": 1}}"#], 0);
    let ids = |query: &str| -> Vec<String> {
        sb.json("d.db", &["query", "c", query], 0)["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids("`a.b` = 1"), ["dotted"]);
    assert_eq!(ids("a.b = 1"), ["nested"]);
    let err = sb.stderr("d.db", &["query", "c", "a = 1\n  and b >=\n  limit 2"], 6);
    assert!(err.contains("line 3 column 3"), "{err}");
    assert!(
        err.contains("\n    limit 2\n    ^ line 3"),
        "the caret sits under its line: {err}"
    );
    let err = sb.stderr("d.db", &["query", "c", "limit 99999999999999999999"], 6);
    assert!(err.contains("too large"), "{err}");
}

// ---- item 11: the actor is checked ----

#[test]
fn actors_with_control_characters_or_over_256_bytes_are_refused() {
    let sb = Sandbox::new();
    sb.json("d.db", &["create", "c", "ok", "{}"], 0);
    let as_actor = |actor: &str| {
        let mut cmd = Command::cargo_bin("docstore").unwrap();
        cmd.env_remove("DOCSTORE_URL")
            .args([
                "--store",
                &sb.sqlite("d.db"),
                "--site",
                "s",
                "--actor",
                actor,
            ])
            .args(["put", "c", "ok", "{}"]);
        cmd.output().unwrap()
    };
    for actor in ["bad\u{7}actor".to_owned(), "x".repeat(257)] {
        let out = as_actor(&actor);
        assert_eq!(out.status.code(), Some(6), "{actor:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("actor"));
    }
    assert_eq!(sb.json("d.db", &["get", "c", "ok"], 0)["version"], json!(1));
    assert!(as_actor(&"é".repeat(128)).status.success());
    assert!(as_actor("").status.success());
}

// ---- item 12: the contract is in the repository ----

#[test]
fn the_readme_points_at_the_contract_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.contains("docs/contract.md"));
    assert!(
        !readme.contains("`DESIGN.md`"),
        "the README still sends users to DESIGN.md"
    );
    let contract = std::fs::read_to_string(root.join("docs/contract.md"))
        .unwrap()
        .to_lowercase();
    for topic in [
        "error",
        "write identit",
        "max_scan",
        "order by",
        "actor",
        "counter",
        "fsck",
    ] {
        assert!(
            contract.contains(topic),
            "docs/contract.md says nothing of {topic}"
        );
    }
}

// ---- fsck, and export/copy finding collections whatever the counters say ----

#[test]
fn fsck_reports_and_repairs_drifted_counters_and_export_finds_every_collection() {
    let sb = Sandbox::new();
    for (c, id) in [("a", "1"), ("a", "2"), ("b", "1"), ("hidden", "1")] {
        sb.json("d.db", &["create", c, id, "{}"], 0);
    }
    assert!(
        sb.stderr("d.db", &["fsck"], 0)
            .contains("0 counters differed"),
        "a clean site"
    );
    let conn = rusqlite::Connection::open(sb.path("d.db")).unwrap();
    conn.execute_batch(
        "UPDATE collections SET documents = 7 WHERE site = 's' AND collection = 'a';
         DELETE FROM collections WHERE site = 's' AND collection = 'hidden';",
    )
    .unwrap();
    drop(conn);
    // The counters lie, but export and copy count the documents themselves.
    let export = sb.cmd("d.db", &["export"]).output().unwrap();
    assert!(export.status.success());
    let exported = String::from_utf8(export.stdout).unwrap();
    assert_eq!(exported.lines().count(), 4);
    assert!(exported.contains("\"collection\":\"hidden\""));
    let copied = sb.json("d.db", &["copy", "--to", &sb.sqlite("copy.db")], 0);
    assert_eq!(copied["imported"], json!(4));

    let out = sb.cmd("d.db", &["fsck"]).output().unwrap();
    assert_eq!(out.status.code(), Some(12));
    let changes: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        changes,
        [
            json!({"site": "s", "collection": "a", "counter": 7, "documents": 2,
                   "repaired": false}),
            json!({"site": "s", "collection": "hidden", "counter": null, "documents": 1,
                   "repaired": false}),
        ]
    );
    let out = sb.cmd("d.db", &["fsck", "--repair"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 2);
    sb.json("d.db", &["fsck"], 0);
    assert_eq!(
        sb.json("d.db", &["collections"], 0),
        json!([{"collection": "a", "count": 2}, {"collection": "b", "count": 1},
               {"collection": "hidden", "count": 1}])
    );
}
