//! What a resumed `import` or `copy` costs on DynamoDB (dynoxide), counted in requests: the
//! real `docstore` binary talks to the emulator through a relay that counts the DynamoDB
//! operations it forwards (`X-Amz-Target`). Lines whose documents are stored are found with
//! one `BatchGetItem` per batch, not one `TransactWriteItems` each. Run through
//! `scripts/with-dynamodb-emulators` (as `scripts/test` does), which sets
//! DOCSTORE_DYNOXIDE_ENDPOINT; without it these tests fail rather than skip.

use assert_cmd::Command;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

fn endpoint() -> String {
    std::env::var("DOCSTORE_DYNOXIDE_ENDPOINT").expect(
        "DOCSTORE_DYNOXIDE_ENDPOINT is not set: run the tests through \
         scripts/with-dynamodb-emulators (scripts/test does)",
    )
}

/// DynamoDB operations forwarded so far, by name (`"BatchGetItem"`, ...).
#[derive(Clone, Default)]
struct Requests(Arc<Mutex<BTreeMap<String, u32>>>);

impl Requests {
    /// The counts since the last call, and starts counting again.
    fn take(&self) -> BTreeMap<String, u32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Counts every complete `X-Amz-Target` header at the start of `pending`, leaving what
    /// may be the beginning of the next one.
    fn count_in(&self, pending: &mut Vec<u8>) {
        const HEADER: &[u8] = b"x-amz-target: dynamodb_20120810.";
        loop {
            let lower = pending.to_ascii_lowercase();
            let Some(at) = lower.windows(HEADER.len()).position(|w| w == HEADER) else {
                let keep = pending.len().saturating_sub(HEADER.len());
                pending.drain(..keep);
                return;
            };
            let name_at = at + HEADER.len();
            let Some(length) = pending[name_at..].iter().position(|b| *b == b'\r') else {
                pending.drain(..at);
                return;
            };
            let name = String::from_utf8_lossy(&pending[name_at..name_at + length]).into_owned();
            *self.0.lock().unwrap().entry(name).or_default() += 1;
            pending.drain(..name_at + length);
        }
    }
}

/// A TCP relay to dynoxide counting the requests of every connection; returns its endpoint.
fn counting_relay(requests: &Requests) -> String {
    let target = endpoint().trim_start_matches("http://").to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let requests = requests.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let server = TcpStream::connect(&target).unwrap();
            let (mut answers_from, mut answers_to) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut answers_from, &mut answers_to);
                let _ = answers_to.shutdown(Shutdown::Write);
            });
            let requests = requests.clone();
            std::thread::spawn(move || forward_counting(client, server, &requests));
        }
    });
    format!("http://{address}")
}

/// Copies the client's bytes to the server, counting the requests among them.
fn forward_counting(mut client: TcpStream, mut server: TcpStream, requests: &Requests) {
    let mut buffer = vec![0; 64 * 1024];
    let mut pending = Vec::new();
    loop {
        let read = match client.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        pending.extend_from_slice(&buffer[..read]);
        requests.count_in(&mut pending);
        if server.write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Write);
}

fn docstore(store: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::cargo_bin("docstore").unwrap();
    cmd.env_remove("DOCSTORE_URL")
        .env("AWS_ACCESS_KEY_ID", "docstore-test")
        .env("AWS_SECRET_ACCESS_KEY", "docstore-test")
        .args(["--store", store, "--site", "s"])
        .args(args);
    cmd.output().unwrap()
}

/// Runs a command that must succeed; its standard output as JSON.
fn ok(store: &str, args: &[&str]) -> Value {
    let out = docstore(store, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn unique_table() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    format!("resume-{}-{}", std::process::id(), nanos.as_nanos())
}

/// `n` export lines of site `s`, collections `a` and `b`.
fn lines(n: usize) -> String {
    (0..n)
        .map(|i| {
            let collection = ["a", "b"][i % 2];
            json!({"site": "s", "collection": collection, "id": format!("doc-{i:04}"),
                "data": {"i": i, "text": "a line of a resumed import ".repeat(40)},
                "created_at": 1_600_000_000_000_000_000i64 + i as i64,
                "updated_at": 1_700_000_000_000_000_000i64, "created_by": "gen",
                "updated_by": "gen", "version": 1 + i % 3})
            .to_string()
                + "\n"
        })
        .collect()
}

fn count(requests: &BTreeMap<String, u32>, operation: &str) -> u32 {
    requests.get(operation).copied().unwrap_or(0)
}

/// Whether `requests` are what `lines` stored documents should cost: a `BatchGetItem` per
/// batch of 50, at most a refused batch (its read and, on some stores, its write) per batch
/// in flight (4) before the import knows it is resuming, and a few reads of the index
/// records: about 2 requests per hundred lines, where a `TransactWriteItems` per line was
/// sent before.
fn costs_a_read_per_batch(requests: &BTreeMap<String, u32>, lines: usize) -> bool {
    let batches = lines.div_ceil(50) as u32;
    let total: u32 = requests.values().sum();
    count(requests, "TransactWriteItems") <= 4
        && count(requests, "BatchGetItem") <= batches + 4
        && total <= batches + 12
}

/// The summary's counts: (imported, already_present, skipped).
fn outcome(summary: &Value) -> (u64, u64, usize) {
    (
        summary["imported"].as_u64().unwrap(),
        summary["already_present"].as_u64().unwrap(),
        summary["skipped"].as_array().unwrap().len(),
    )
}

/// Re-running an import whose 600 lines are all stored sends a few requests per hundred
/// lines (a `BatchGetItem` per batch of 50), not a `TransactWriteItems` per line; a run
/// resumed halfway writes the missing half in batches; `--on-existing newer` and
/// `overwrite` over equal documents cost the same reads and no write.
#[test]
fn a_resumed_import_reads_stored_lines_in_batches() {
    const LINES: usize = 600;
    let requests = Requests::default();
    let relay = counting_relay(&requests);
    let table = unique_table();
    let store = format!("dynamodb://{table}?region=us-east-1&endpoint={relay}");
    ok(&store, &["create-table"]);
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.jsonl");
    let half = dir.path().join("half.jsonl");
    let input = lines(LINES);
    std::fs::write(&all, &input).unwrap();
    let first_half: String = input
        .lines()
        .take(LINES / 2)
        .map(|l| l.to_owned() + "\n")
        .collect();
    std::fs::write(&half, first_half).unwrap();
    let (all, half) = (all.to_str().unwrap(), half.to_str().unwrap());

    requests.take();
    let fresh = ok(&store, &["import", half]);
    assert_eq!(outcome(&fresh), (300, 0, 0), "{fresh}");
    let fresh_requests = requests.take();
    // A batch of 50 restores on DynamoDB: the keys read (BatchGetItem), then one
    // TransactWriteItems.
    assert_eq!(
        count(&fresh_requests, "TransactWriteItems"),
        6,
        "{fresh_requests:?}"
    );

    // Resumed halfway: 300 lines stored, 300 to write.
    let resumed = ok(&store, &["import", all]);
    assert_eq!(outcome(&resumed), (300, 300, 0), "{resumed}");
    let resumed_requests = requests.take();
    eprintln!(
        "fresh, 300 lines: {fresh_requests:?}; resumed at 300 of {LINES}: {resumed_requests:?}"
    );
    let writes = count(&resumed_requests, "TransactWriteItems");
    assert!(
        (6..=6 + 4).contains(&writes),
        "300 new lines in batches of 50, and at most a batch refused per batch in flight: \
         {resumed_requests:?}"
    );

    // Everything stored: reads only (after at most one refused batch per batch in flight).
    for on_existing in ["skip", "newer", "overwrite"] {
        let again = ok(&store, &["import", all, "--on-existing", on_existing]);
        assert_eq!(
            outcome(&again),
            (0, LINES as u64, 0),
            "{on_existing}: {again}"
        );
        let again_requests = requests.take();
        eprintln!("--on-existing {on_existing}, {LINES} stored lines: {again_requests:?}");
        assert!(
            costs_a_read_per_batch(&again_requests, LINES),
            "{on_existing}: {LINES} stored lines cost {again_requests:?}"
        );
    }
    assert_eq!(ok(&store, &["count"]), json!(LINES));
}

/// A copy run again onto a destination holding every document reads the destination in
/// batches instead of writing each document.
#[test]
fn a_resumed_copy_reads_the_destination_in_batches() {
    const LINES: usize = 400;
    let requests = Requests::default();
    let relay = counting_relay(&requests);
    let table = unique_table();
    let destination = format!("dynamodb://{table}?region=us-east-1&endpoint={relay}");
    ok(&destination, &["create-table"]);
    let dir = tempfile::tempdir().unwrap();
    let source = format!("sqlite:{}", dir.path().join("source.db").display());
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines(LINES)).unwrap();
    ok(&source, &["import", input.to_str().unwrap()]);

    let first = ok(&source, &["copy", "--to", &destination]);
    assert_eq!(outcome(&first), (LINES as u64, 0, 0), "{first}");
    requests.take();
    let again = ok(&source, &["copy", "--to", &destination]);
    assert_eq!(outcome(&again), (0, LINES as u64, 0), "{again}");
    let again_requests = requests.take();
    eprintln!("copy again, {LINES} stored documents: {again_requests:?}");
    assert!(
        costs_a_read_per_batch(&again_requests, LINES),
        "{LINES} stored documents cost {again_requests:?}"
    );
}
