//! `import --max-errors N` (docs/contract.md, "The command line"): the import stops at its
//! N-th rejected line with the exit code of that rejection's kind and says how to resume;
//! without it, the import goes on to the end (exit 10).

use assert_cmd::Command;
use serde_json::json;

/// Exit codes (`docstore --help` lists them).
const USAGE: i32 = 2;
const INVALID: i32 = 6;
const QUOTA_EXCEEDED: i32 = 8;
const SKIPPED: i32 = 10;

fn docstore(store: &str, args: &[&str], stdin: &str) -> std::process::Output {
    Command::cargo_bin("docstore")
        .unwrap()
        .env_remove("DOCSTORE_URL")
        .env_remove("DOCSTORE_SITE")
        .args(["--store", store, "--site", "s"])
        .args(args)
        .write_stdin(stdin)
        .output()
        .unwrap()
}

fn line(i: usize) -> String {
    json!({"site": "s", "collection": "t", "id": format!("d{i:02}"), "data": {"i": i},
        "created_at": 1, "updated_at": 1, "created_by": "a", "updated_by": "a", "version": 1})
    .to_string()
        + "\n"
}

fn count(store: &str) -> u64 {
    let out = docstore(store, &["count"], "");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn an_import_over_the_quota_stops_at_the_first_rejected_line_with_max_errors_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let store = format!("sqlite:{}?max_docs_per_site=3", path.display());
    let lines: String = (0..10).map(line).collect();
    let out = docstore(&store, &["import", "--max-errors", "1"], &lines);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(QUOTA_EXCEEDED), "{stderr}");
    assert_eq!(stderr.matches("skipped line").count(), 1, "{stderr}");
    assert!(
        stderr.contains("import stopped at line 4: 1 lines rejected (--max-errors 1")
            && stderr.contains("run the same import again to resume"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(count(&store), 3);
    // Without --max-errors, every rejected line is said and the import goes on to the end.
    let out = docstore(&store, &["import"], &lines);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(SKIPPED), "{stderr}");
    assert_eq!(stderr.matches("skipped line").count(), 7, "{stderr}");
    // At least one rejected line.
    let out = docstore(&store, &["import", "--max-errors", "0"], &lines);
    assert_eq!(out.status.code(), Some(USAGE));
}

#[test]
fn unreadable_lines_spend_max_errors_too_and_a_rerun_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("u.db").display());
    let input = format!(
        "{}not json\n{}{{\"site\": \"s\"}}\n{}{}",
        line(0),
        line(1),
        line(2),
        line(3)
    );
    let out = docstore(&store, &["import", "--max-errors", "2"], &input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(INVALID), "{stderr}");
    assert!(stderr.contains("import stopped at line 4"), "{stderr}");
    assert!(count(&store) <= 2, "nothing after line 4 is read");
    // Plain documents (--id-field) rejected while reading count as well.
    let plain = "{\"_id\": \"a\"}\n{\"x\": 1}\n{\"_id\": 7}\n{\"_id\": \"b\"}\n";
    let args = ["import", "--id-field", "_id", "--collection", "p"];
    let out = docstore(&store, &[&args[..], &["--max-errors", "2"]].concat(), plain);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(INVALID), "{stderr}");
    assert!(stderr.contains("import stopped at line 3"), "{stderr}");
    // Without the unreadable lines, the same import finishes what the first one began.
    let good: String = (0..4).map(line).collect();
    let out = docstore(&store, &["import", "--max-errors", "1"], &good);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = docstore(&store, &["count", "t"], "");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "4");
}
