//! The real `docstore` binary against SQLite files and memory.

use assert_cmd::Command;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn url(&self, name: &str) -> String {
        format!("sqlite:{}", self.path(name).display())
    }

    /// `docstore --store <db> --site s ARGS`, run in the sandbox directory.
    fn cmd(&self, db: &str, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("docstore").unwrap();
        cmd.current_dir(self.dir.path())
            .env_remove("DOCSTORE_URL")
            .env_remove("DOCSTORE_SITE")
            .args(["--store", &self.url(db), "--site", "s", "--actor", "tester"])
            .args(args);
        cmd
    }

    /// Runs and parses standard output as JSON, asserting the exit code.
    fn json(&self, db: &str, args: &[&str], code: i32) -> Value {
        let output = self.cmd(db, args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: stderr {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
    }

    fn stderr(&self, db: &str, args: &[&str], code: i32) -> String {
        let output = self.cmd(db, args).output().unwrap();
        assert_eq!(output.status.code(), Some(code), "{args:?}");
        String::from_utf8(output.stderr).unwrap()
    }
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
    let summary = sb.json("src.db", &["copy", "--to", &sb.url("dst.db")], 0);
    assert_eq!(summary["imported"], json!(1_200));
    let export =
        |db: &str| String::from_utf8(sb.cmd(db, &["export"]).output().unwrap().stdout).unwrap();
    assert_eq!(export("dst.db"), export("src.db"));
    let only = sb.json(
        "src.db",
        &["copy", "--to", &sb.url("only.db"), "--collection", "odd"],
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
