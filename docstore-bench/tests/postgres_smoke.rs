//! The `postgres` backend at tiny sizes, against a real server: run under
//! `scripts/with-postgres` (which `scripts/test` does), as
//! `scripts/with-postgres cargo test -p docstore-bench --test postgres_smoke -- --ignored`.
//! Ignored otherwise (the workspace's tests run without a server); with `--ignored` and no
//! server, each test fails saying how to run it. The run fails (and so the first test) when
//! the baseline's schema is not the one docstore-postgres creates; the second test checks
//! that the schema check sees a drift.

use docstore_bench::baselines::postgres::{PostgresBaseline, schema};
use serde_json::Value;
use std::process::Command;

const NEEDS_SERVER: &str = "needs a PostgreSQL server: scripts/with-postgres cargo test -p \
                            docstore-bench --test postgres_smoke -- --ignored";

const WORKLOADS: [&str; 16] = [
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
    "create, 4 tasks, one collection",
    "create, 4 tasks, 4 collections",
];

fn url() -> String {
    std::env::var("DOCSTORE_POSTGRES_URL")
        .unwrap_or_else(|_| panic!("DOCSTORE_POSTGRES_URL is not set: this test {NEEDS_SERVER}"))
}

#[test]
#[ignore = "needs a PostgreSQL server (scripts/with-postgres ... -- --ignored)"]
fn every_workload_reports_on_both_sides() {
    let url = url();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_docstore-bench"))
        .args(["--backends", "postgres", "--postgres-url", &url])
        .args(["--postgres-ops", "60", "--postgres-query-docs", "600"])
        .args(["--query-runs", "2", "--page-size", "50"])
        .args(["--tasks", "4", "--postgres-task-ops", "5"])
        .args(["--repeat", "2", "--skip-evaluator"])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let sections = report["sections"].as_array().unwrap();
    assert_eq!(sections.len(), 1, "{sections:?}");
    assert_eq!(sections[0]["backend"], "postgres");
    let rows = sections[0]["rows"].as_array().unwrap();
    let workloads: Vec<&str> = rows
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(workloads, WORKLOADS);
    for row in rows {
        let what = row["workload"].as_str().unwrap();
        for side in ["docstore", "baseline"] {
            let figures = &row[side];
            assert!(figures["ops"].as_u64().unwrap() > 0, "{what} {side}");
            assert!(figures["ops_per_sec"].as_f64().unwrap() > 0.0, "{what}");
            let p99 = figures["p99_us"].as_f64().unwrap();
            assert!(p99 >= figures["p50_us"].as_f64().unwrap(), "{what} {side}");
        }
        let ratio = row["ratio"].as_f64().unwrap();
        assert!(ratio.is_finite() && ratio > 0.0, "{what}: {ratio}");
        assert_eq!(row["ratio_runs"].as_array().unwrap().len(), 2, "{what}");
        if let Some(same) = row.get("same_answer") {
            assert_eq!(same, &Value::Bool(true), "{what}");
        }
    }
    // Each round, each concurrent-create workload, each side: what it waited for.
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let waits = notes
        .iter()
        .filter(|n| n.contains(": counter row: "))
        .count();
    assert_eq!(waits, 2 * 2 * 2, "{notes:#?}");
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server (scripts/with-postgres ... -- --ignored)"]
async fn a_baseline_schema_that_drifts_fails_the_check() {
    let url = url();
    let tag = std::process::id();
    let (ours, theirs) = (format!("drift_store_{tag}"), format!("drift_base_{tag}"));
    let store = docstore_postgres::PostgresStore::open(&format!("{url}?schema={ours}"))
        .await
        .unwrap();
    drop(PostgresBaseline::open(&url, &theirs).await.unwrap());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    schema::check_same(&client, &ours, &theirs).await.unwrap();

    client
        .batch_execute(&format!(
            "CREATE INDEX documents_by_data ON \"{theirs}\".documents USING gin (data)"
        ))
        .await
        .unwrap();
    let err = schema::check_same(&client, &ours, &theirs)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Only in the baseline's:\n  index documents_by_data"),
        "{err}"
    );

    client
        .batch_execute(&format!(
            "DROP INDEX \"{theirs}\".documents_by_data; \
             ALTER TABLE \"{theirs}\".changes ALTER COLUMN body TYPE bytea USING body::bytea"
        ))
        .await
        .unwrap();
    let err = schema::check_same(&client, &ours, &theirs)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("column changes.body #7 text"), "{err}");
    assert!(err.contains("column changes.body #7 bytea"), "{err}");

    store.drop_schema().await.unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA \"{theirs}\" CASCADE"))
        .await
        .unwrap();
}
