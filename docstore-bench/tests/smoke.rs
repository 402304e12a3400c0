//! Runs the binary at tiny sizes, twice per backend, on memory and SQLite (the change feed on
//! and off; and the PoloDB peer when built) and checks the report: every workload on every
//! backend, both sides with operations done at a positive rate, ratios finite and positive,
//! the same answers. No timing thresholds. The run itself fails (and so this test) when the
//! SQLite baseline's schema is not the one docstore-sqlite creates.

use serde_json::Value;
use std::process::Command;

/// Runs the binary with `args`, its files in `dir` (`report.json`, `report.md`); its standard
/// output, once it has succeeded.
fn run_bench(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_docstore-bench"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .arg("--json")
        .arg(dir.join("report.json"))
        .arg("--markdown")
        .arg(dir.join("report.md"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

const WORKLOADS: [&str; 14] = [
    "create",
    "create, typed",
    "get",
    "get, typed",
    "put",
    "update",
    "update_if",
    "update_if x10 in one batch",
    "update_if x10 as 10 single calls",
    "update, 4 tasks, distinct docs",
    "update, 4 tasks, same doc",
    "delete",
    "query: filter + sort + limit 20 over 600 docs",
    "walk 600 docs, pages of 50",
];

#[test]
fn every_workload_reports_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let mut backends = vec!["memory", "sqlite"];
    if cfg!(feature = "polodb") {
        backends.push("polodb");
    }
    let backends_arg = backends.join(",");
    let stdout = run_bench(
        dir.path(),
        &[
            &["--backends", &backends_arg][..],
            &["--memory-ops", "60", "--sqlite-ops", "60"],
            &[
                "--query-docs",
                "600",
                "--query-runs",
                "2",
                "--page-size",
                "50",
            ],
            &["--tasks", "4", "--task-ops", "5", "--evaluator-docs", "300"],
            &["--repeat", "2"],
        ]
        .concat(),
    );
    assert!(stdout.contains("ratio"), "{stdout}");
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(markdown.contains("| create (op) |"), "{markdown}");
    assert!(markdown.contains("| create, typed (op) |"), "{markdown}");
    assert!(
        markdown.contains("ops/s (same round): create "),
        "{markdown}"
    );

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let sections = report["sections"].as_array().unwrap();
    let names: Vec<&str> = sections
        .iter()
        .map(|s| s["backend"].as_str().unwrap())
        .collect();
    // SQLite reports twice: the change feed on and off, each against its own baseline.
    assert_eq!(names.len(), backends.len() + 2, "{names:?}");
    assert_eq!(names[1..3], ["sqlite", "sqlite, feed off"], "{names:?}");
    assert_eq!(names.last(), Some(&"evaluator"));
    for section in sections {
        let rows = section["rows"].as_array().unwrap();
        if section["backend"] != "evaluator" {
            let workloads: Vec<&str> = rows
                .iter()
                .map(|r| r["workload"].as_str().unwrap())
                .collect();
            assert_eq!(workloads, WORKLOADS, "{}", section["backend"]);
        } else {
            assert_eq!(rows.len(), 6);
        }
        for row in rows {
            let what = format!("{} / {}", section["backend"], row["workload"]);
            for side in ["docstore", "baseline"] {
                let figures = &row[side];
                assert!(figures["ops"].as_u64().unwrap() > 0, "{what} {side}");
                assert!(
                    figures["ops_per_sec"].as_f64().unwrap() > 0.0,
                    "{what} {side}"
                );
                let (p50, p99) = (
                    figures["p50_us"].as_f64().unwrap(),
                    figures["p99_us"].as_f64().unwrap(),
                );
                assert!(p50 >= 0.0 && p99 >= p50, "{what} {side}");
            }
            let ratio = row["ratio"].as_f64().unwrap();
            assert!(ratio.is_finite() && ratio > 0.0, "{what}: {ratio}");
            if section["backend"] != "evaluator" {
                // Two rounds: the reported one is the median (here: the higher) of both.
                let runs = row["ratio_runs"].as_array().unwrap();
                assert_eq!(runs.len(), 2, "{what}");
                assert!(runs.iter().any(|r| r.as_f64() == Some(ratio)), "{what}");
            }
            if row["workload"].as_str().unwrap().ends_with(", typed") {
                let vs_raw = row["typed_vs_raw"].as_f64().unwrap();
                assert!(vs_raw.is_finite() && vs_raw > 0.0, "{what}: {vs_raw}");
            }
            if let Some(same) = row.get("same_answer") {
                assert_eq!(same, &Value::Bool(true), "{what}");
            }
        }
    }
}

/// The DynamoDB section at tiny sizes on the emulator `scripts/with-dynamodb-emulators`
/// started: every workload on both sides, the query and the walk giving the same answers over
/// the query collection spread across the table's partition keys (the walk counts each
/// document once on each side).
#[test]
fn dynamodb_reports_on_both_sides_with_the_same_answers() {
    let endpoint = std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run through \
         `scripts/with-dynamodb-emulators cargo test -p docstore-bench`",
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    run_bench(
        dir.path(),
        &[
            &["--backends", "dynamodb", "--dynamodb-endpoint", &endpoint][..],
            &["--dynamodb-ops", "10", "--dynamodb-task-ops", "2"],
            &["--dynamodb-query-docs", "300", "--dynamodb-query-runs", "1"],
            &["--page-size", "40", "--tasks", "2", "--skip-evaluator"],
        ]
        .concat(),
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["sections"][0]["rows"].as_array().unwrap();
    let answered: Vec<&str> = rows
        .iter()
        .filter(|row| row["same_answer"] == Value::Bool(true))
        .map(|row| row["workload"].as_str().unwrap())
        .collect();
    assert_eq!(answered.len(), 2, "{answered:?}");
    for row in rows {
        let what = row["workload"].as_str().unwrap();
        assert_ne!(row["same_answer"], Value::Bool(false), "{what}");
        for side in ["docstore", "baseline"] {
            assert!(row[side]["ops"].as_u64().unwrap() > 0, "{what} {side}");
        }
    }
    let walk = rows
        .iter()
        .find(|row| row["workload"].as_str().unwrap().starts_with("walk"));
    assert_eq!(walk.unwrap()["baseline"]["ops"], 300, "{walk:?}");
}
