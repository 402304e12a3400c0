//! The `docstore` command against an endpoint that accepts connections and never answers:
//! it ends within the configured deadline with the "unavailable" exit code, never hangs.
//! Needs no emulator: the black hole is a local listener.

use assert_cmd::Command;
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// The exit code for `Unavailable` (`docstore --help` lists them).
const UNAVAILABLE: i32 = 9;

fn black_hole() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    format!("http://{address}")
}

#[test]
fn a_black_holed_endpoint_gives_unavailable_within_the_deadline() {
    let url = format!(
        "dynamodb://docs?region=us-east-1&endpoint={}&timeout_ms=200&operation_timeout_ms=1000\
         &connect_timeout_ms=200",
        black_hole()
    );
    for args in [
        &["get", "c", "id"][..],
        &["create", "c", "id", "{}"][..],
        &["count"][..],
    ] {
        let started = Instant::now();
        let out = Command::cargo_bin("docstore")
            .unwrap()
            .env_remove("DOCSTORE_URL")
            .env("AWS_ACCESS_KEY_ID", "docstore-test")
            .env("AWS_SECRET_ACCESS_KEY", "docstore-test")
            .args(["--store", &url, "--site", "s"])
            .args(args)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(UNAVAILABLE), "{args:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{args:?} took {:?}",
            started.elapsed()
        );
    }
}
