//! Runs the `hot_collection` bench small (4 writers, 2 s a run, no speed targets) through
//! dynoxide and checks what it prints: the three layouts' rows, `count()` equal to the
//! documents stored for both store layouts, and a successful exit (its own checks passed).
//! No timing thresholds.

use std::process::Command;

#[test]
fn a_small_run_counts_every_document_it_stores() {
    let endpoint = std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run through \
             `scripts/with-dynamodb-emulators cargo test -p docstore-bench`"
        )
    });
    let output = Command::new(env!("CARGO_BIN_EXE_hot_collection"))
        .args(["--endpoint", &endpoint])
        .args(["--writers", "4", "--seconds", "2", "--min-speedup", "0"])
        .args(["--min-floor-share", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|line| line.starts_with("| 4 |"))
        .map(|line| line.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    for (row, layout) in rows.iter().zip(["before", "after", "raw PutItem"]) {
        assert!(row[2].starts_with(layout), "{stdout}");
        let created: u64 = row[3].parse().unwrap();
        assert!(created > 0, "{stdout}");
        let stored: u64 = row[12].parse().unwrap();
        assert_eq!(stored, created, "{stdout}");
        if layout != "raw PutItem" {
            assert_eq!(row[11], row[12], "count() is what is stored: {stdout}");
        }
    }
    assert!(
        stdout.contains("4 writers: after / before creates/s"),
        "{stdout}"
    );
}
