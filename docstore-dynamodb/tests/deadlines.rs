//! Deadlines: an endpoint that accepts connections and never answers gives `Unavailable`
//! within the configured deadline, for reads and writes, never a hang. Needs no emulator: the
//! black hole is a local listener.

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use docstore::config::DynamoDbConfig;
use docstore::{Error, Key, StoreOptions};
use docstore_dynamodb::DynamoStore;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A listener on loopback that accepts every connection and never writes a byte; it lives
/// as long as the test process.
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

/// A listener that answers the store's reads of the table's layout record and index records (with none) and
/// never answers anything else: the write itself is what times out.
fn black_hole_for_writes() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(value) =
                            line.to_ascii_lowercase().strip_prefix("content-length:")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let body = String::from_utf8_lossy(&body);
                    // The store's reads of its own records (the table's layout, its index
                    // records) are answered; writes are not.
                    let answer = if body.contains("__docstore#indexes") {
                        r#"{"Count":0,"Items":[],"ScannedCount":0}"#
                    } else if body.contains("__docstore#layout") {
                        r#"{"Item":{"pk":{"S":"__docstore#layout"},"sk":{"S":"table"},"partitions":{"N":"8"}}}"#
                    } else {
                        // Hold the connection, never answer.
                        std::thread::sleep(Duration::from_secs(3_600));
                        return;
                    };
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n\
                         content-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if reader.get_mut().write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{address}")
}

/// A Streams client for `endpoint` (the feed is not read here; the constructor needs one).
fn streams(endpoint: &str) -> docstore_dynamodb::aws_sdk_dynamodbstreams::Client {
    use docstore_dynamodb::aws_sdk_dynamodbstreams as streams;
    streams::Client::from_conf(
        streams::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(Credentials::new("k", "s", None, None, "test"))
            .build(),
    )
}

fn store(endpoint: &str) -> docstore::Store {
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(Credentials::new("k", "s", None, None, "test"))
            .build(),
    );
    let config = DynamoDbConfig {
        timeout_ms: 200,
        operation_timeout_ms: 1_000,
        connect_timeout_ms: 200,
        ..DynamoDbConfig::new("docs")
    };
    docstore::Store::new(
        DynamoStore::from_client(client, streams(endpoint), &config, StoreOptions::default())
            .unwrap(),
    )
}

/// Generous against the 1 s operation deadline: the point is that the call ends, not how fast.
const WITHIN: Duration = Duration::from_secs(10);

#[tokio::test]
async fn reads_end_unavailable_within_the_deadline() {
    let store = store(&black_hole());
    let started = Instant::now();
    let err = store
        .get(&Key::new("s", "c", "i").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(started.elapsed() < WITHIN, "{:?}", started.elapsed());
    let started = Instant::now();
    let err = store.count("s").await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(started.elapsed() < WITHIN, "{:?}", started.elapsed());
}

#[tokio::test]
async fn writes_end_unavailable_within_the_deadline() {
    // Even the read of the index records before a write ends in time; nothing was sent, so
    // the error does not say the write may have been applied.
    let unreachable = store(&black_hole());
    let key = Key::new("s", "c", "i").unwrap();
    let started = Instant::now();
    let err = unreachable
        .create(&key, docstore::object(serde_json::json!({})).unwrap(), "a")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(started.elapsed() < WITHIN, "{:?}", started.elapsed());

    let writes_lost = store(&black_hole_for_writes());
    let started = Instant::now();
    let err = writes_lost
        .create(&key, docstore::object(serde_json::json!({})).unwrap(), "a")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(
        err.to_string().contains("may or may not have been applied"),
        "a write that timed out says its outcome is unknown: {err}"
    );
    assert!(started.elapsed() < WITHIN, "{:?}", started.elapsed());
}

#[test]
fn zero_deadlines_are_refused() {
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .build(),
    );
    let config = DynamoDbConfig {
        operation_timeout_ms: 0,
        ..DynamoDbConfig::new("docs")
    };
    let streams = streams("http://127.0.0.1:1");
    let err =
        DynamoStore::from_client(client, streams, &config, StoreOptions::default()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("timeout")),
        "{err}"
    );
}
