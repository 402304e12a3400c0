//! Runs the expiry sweep bench at a tiny size: it must sweep every expired document and
//! report that no read saw one (the bench itself fails otherwise). No timing thresholds.

use std::process::Command;

#[test]
fn the_sweep_removes_every_expired_document_unseen() {
    let output = Command::new(env!("CARGO_BIN_EXE_expiry_sweep"))
        .args(["--expiring", "1200", "--kept", "40", "--readers", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("swept 1200 of 1200 expired documents"),
        "{stdout}"
    );
    assert!(stdout.contains("; 0 saw an expired document"), "{stdout}");
}
