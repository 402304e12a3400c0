//! The whole store at once — `sites`, `export --all-sites | import --all-sites`, `fsck` of
//! every site — and plain JSON in (`import --id-field`).

mod support;

use serde_json::{Value, json};
use std::process::Output;
use support::exit::{INVALID, SKIPPED};
use support::{Sandbox, expect, stdout_json};

impl Sandbox {
    /// `docstore --store <store> ARGS`; asserts the exit code.
    fn run(&self, store: &str, args: &[&str], code: i32) -> Output {
        let mut command = self.docstore(["--store", store]);
        command.args(args);
        expect(command, code)
    }

    fn json(&self, store: &str, args: &[&str], code: i32) -> Value {
        stdout_json(&self.run(store, args, code))
    }

    /// A store with three sites: documents in two collections, some updated, by two actors.
    fn three_sites(&self, name: &str) -> String {
        let store = self.sqlite(name);
        for site in ["alpha", "beta", "gamma"] {
            for (collection, id) in [("t", "1"), ("t", "2"), ("u", "x")] {
                let data = format!(r#"{{"site":"{site}","n":[1,{{"deep":null}}]}}"#);
                let args = [
                    "--site", site, "--actor", "ann", "create", collection, id, &data,
                ];
                self.run(&store, &args, 0);
            }
            let args = [
                "--site",
                site,
                "--actor",
                "bob",
                "update",
                "t",
                "2",
                r#"{"m":2}"#,
            ];
            self.run(&store, &args, 0);
        }
        store
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn sites_lists_every_site_holding_a_document_with_its_count() {
    let sandbox = Sandbox::new();
    let store = sandbox.three_sites("s.db");
    sandbox.run(&store, &["--site", "beta", "delete", "u", "x"], 0);
    assert_eq!(
        sandbox.json(&store, &["sites"], 0),
        json!([
            {"site": "alpha", "count": 3},
            {"site": "beta", "count": 2},
            {"site": "gamma", "count": 3},
        ])
    );
    for (collection, id) in [("t", "1"), ("t", "2")] {
        sandbox.run(&store, &["--site", "beta", "delete", collection, id], 0);
    }
    let sites = sandbox.json(&store, &["sites"], 0);
    assert_eq!(
        sites,
        json!([{"site": "alpha", "count": 3}, {"site": "gamma", "count": 3}])
    );
    assert_eq!(sandbox.json("memory:", &["sites"], 0), json!([]));
}

#[test]
fn export_all_sites_then_import_all_sites_round_trips_byte_for_byte() {
    let sandbox = Sandbox::new();
    let store = sandbox.three_sites("from.db");
    let first = sandbox.run(&store, &["export", "--all-sites"], 0).stdout;
    let text = String::from_utf8(first.clone()).unwrap();
    assert_eq!(text.lines().count(), 9, "{text}");
    for site in ["alpha", "beta", "gamma"] {
        let lines = text
            .lines()
            .filter(|l| l.contains(&format!(r#""site":"{site}""#)))
            .count();
        assert_eq!(lines, 3, "{site}: {text}");
    }
    std::fs::write(sandbox.path("all.jsonl"), &first).unwrap();

    let copy = sandbox.sqlite("to.db");
    let summary = sandbox.json(&copy, &["import", "--all-sites", "all.jsonl"], 0);
    assert_eq!(summary["imported"], 9);
    let second = sandbox.run(&copy, &["export", "--all-sites"], 0).stdout;
    assert_eq!(String::from_utf8(second).unwrap(), text);

    // One collection of every site; --output writes the same bytes a pipe gets.
    let args = [
        "export",
        "--all-sites",
        "--collection",
        "u",
        "--output",
        "u.jsonl",
    ];
    sandbox.run(&copy, &args, 0);
    let only_u = std::fs::read_to_string(sandbox.path("u.jsonl")).unwrap();
    let expected: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(r#""collection":"u""#))
        .collect();
    assert_eq!(only_u.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn fsck_without_a_site_checks_and_repairs_every_site() {
    let sandbox = Sandbox::new();
    let store = sandbox.three_sites("f.db");
    let clean = sandbox.run(&store, &["fsck"], 0);
    assert!(
        stderr(&clean).contains("3 sites, 6 collections with documents; 0 counters differed"),
        "{}",
        stderr(&clean)
    );
    let conn = rusqlite::Connection::open(sandbox.path("f.db")).unwrap();
    conn.execute_batch(
        "UPDATE collections SET documents = 9 WHERE site = 'alpha' AND collection = 't';
         DELETE FROM collections WHERE site = 'gamma';",
    )
    .unwrap();
    drop(conn);

    let output = sandbox.run(&store, &["fsck"], 12);
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let row = |site: &str, collection: &str, counter: Value, documents: u64| {
        json!({"site": site, "collection": collection, "counter": counter,
               "documents": documents, "repaired": false})
    };
    assert_eq!(
        lines,
        [
            row("alpha", "t", json!(9), 2),
            row("gamma", "t", Value::Null, 2),
            row("gamma", "u", Value::Null, 1),
        ]
    );
    sandbox.run(&store, &["fsck", "--repair"], 0);
    sandbox.run(&store, &["fsck"], 0);
    // With --site, only that site.
    let output = sandbox.run(&store, &["--site", "beta", "fsck"], 0);
    assert!(
        stderr(&output).starts_with("2 collections with documents"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn plain_json_lines_import_with_their_ids_and_bad_lines_said_precisely() {
    let sandbox = Sandbox::new();
    let store = sandbox.sqlite("p.db");
    let input = [
        r#"{"_id":"a","name":"first","tags":["x"]}"#,
        r#"{"name":"no id"}"#,
        "",
        r#"{"_id":42}"#,
        r#"{"_id":"b","name":"second"}"#,
        r#"{"_id":"bad\u0001id"}"#,
        r#"["not","an","object"]"#,
        "{not json",
    ]
    .join("\n");
    std::fs::write(sandbox.path("plain.jsonl"), input).unwrap();
    let args = [
        "--site",
        "s",
        "--actor",
        "loader",
        "import",
        "--id-field",
        "_id",
        "--collection",
        "people",
        "plain.jsonl",
    ];
    let output = sandbox.run(&store, &args, SKIPPED);
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["imported"], 2, "{summary}");
    let skipped: Vec<(u64, String)> = summary["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["line"].as_u64().unwrap(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let lines: Vec<u64> = skipped.iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [2, 4, 6, 7, 8], "{skipped:?}");
    assert_eq!(skipped[0].1, r#"no "_id" field (--id-field)"#);
    assert!(
        skipped[1].1.contains("is a number, not a string"),
        "{skipped:?}"
    );
    assert!(skipped[2].1.contains("control characters"), "{skipped:?}");
    assert!(
        skipped[3].1.contains("not a JSON object but an array"),
        "{skipped:?}"
    );
    assert!(skipped[4].1.starts_with("not JSON"), "{skipped:?}");
    assert!(stderr(&output).contains("skipped line 2: no \"_id\" field"));

    // Stored as new documents, the id field kept in the data.
    let a = sandbox.json(&store, &["--site", "s", "get", "people", "a"], 0);
    assert_eq!(a["id"], "a");
    assert_eq!(a["version"], 1);
    assert_eq!(a["created_by"], "loader");
    assert_eq!(
        a["data"],
        json!({"_id": "a", "name": "first", "tags": ["x"]})
    );
    assert_eq!(
        sandbox.json(&store, &["--site", "s", "count", "people"], 0),
        2
    );

    // --on-existing as for export lines: skip by default, overwrite replaces.
    std::fs::write(
        sandbox.path("again.jsonl"),
        r#"{"_id":"a","name":"changed"}"#,
    )
    .unwrap();
    let base = [
        "--site",
        "s",
        "import",
        "--id-field",
        "_id",
        "--collection",
        "people",
    ];
    let summary = sandbox.json(&store, &[&base[..], &["again.jsonl"]].concat(), 0);
    assert_eq!(summary["already_present"], 1);
    let overwrite = [&base[..], &["--on-existing", "overwrite", "again.jsonl"]].concat();
    let summary = sandbox.json(&store, &overwrite, 0);
    assert_eq!(summary["replaced"], 1);
    let a = sandbox.json(&store, &["--site", "s", "get", "people", "a"], 0);
    assert_eq!(a["data"], json!({"_id": "a", "name": "changed"}));
}

#[test]
fn a_plain_json_array_imports_and_a_broken_one_writes_nothing() {
    let sandbox = Sandbox::new();
    let store = sandbox.sqlite("arr.db");
    let array = "\u{feff}\n  [{\"key\":\"k1\",\"n\":1},\n{\"n\":2},\n{\"key\":\"k2\"}, null]";
    std::fs::write(sandbox.path("docs.json"), array).unwrap();
    let args = [
        "--site",
        "s",
        "import",
        "--id-field",
        "key",
        "--collection",
        "c",
        "docs.json",
    ];
    let summary = sandbox.json(&store, &args, SKIPPED);
    assert_eq!(summary["imported"], 2);
    let skipped = summary["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 2, "{summary}");
    assert_eq!(skipped[0]["line"], 2);
    assert_eq!(skipped[1]["line"], 4);
    assert!(skipped[1]["reason"].as_str().unwrap().contains("but null"));
    let k1 = sandbox.json(&store, &["--site", "s", "get", "c", "k1"], 0);
    assert_eq!(k1["data"], json!({"key": "k1", "n": 1}));

    std::fs::write(sandbox.path("broken.json"), r#"[{"key":"k3"}"#).unwrap();
    let args = [
        "--site",
        "s",
        "import",
        "--id-field",
        "key",
        "--collection",
        "c",
        "broken.json",
    ];
    let output = sandbox.run(&store, &args, INVALID);
    assert!(
        stderr(&output).contains("not one JSON array"),
        "{}",
        stderr(&output)
    );
    assert_eq!(sandbox.json(&store, &["--site", "s", "count", "c"], 0), 2);
}

#[test]
fn plain_import_arguments_are_checked_before_anything_is_written() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path("one.jsonl"), r#"{"_id":"a"}"#).unwrap();
    let store = sandbox.sqlite("never.db");
    // --collection is required with --id-field, and --id-field with --collection.
    sandbox.run(
        &store,
        &["--site", "s", "import", "--id-field", "_id", "one.jsonl"],
        2,
    );
    sandbox.run(
        &store,
        &["--site", "s", "import", "--collection", "c", "one.jsonl"],
        2,
    );
    let args = [
        "import",
        "--all-sites",
        "--id-field",
        "_id",
        "--collection",
        "c",
        "one.jsonl",
    ];
    sandbox.run(&store, &args, 2);
    let bad = [
        "--site",
        "s",
        "import",
        "--id-field",
        "_id",
        "--collection",
        "bad name",
    ];
    let output = sandbox.run(&store, &[&bad[..], &["one.jsonl"]].concat(), INVALID);
    assert!(
        stderr(&output).contains("--collection"),
        "{}",
        stderr(&output)
    );
    let empty = [
        "--site",
        "s",
        "import",
        "--id-field",
        "",
        "--collection",
        "c",
        "one.jsonl",
    ];
    sandbox.run(&store, &empty, INVALID);
    assert!(!sandbox.path("never.db").exists(), "no store was created");
}
