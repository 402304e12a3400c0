//! Deadlines: an endpoint that accepts connections and never answers gives `Unavailable`
//! within the configured deadline, for reads and writes, never a hang. Needs no emulator: the
//! black hole is a local listener.

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use docstore::config::DynamoDbConfig;
use docstore::{Error, Key, Store, StoreOptions};
use docstore_dynamodb::DynamoStore;
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

fn store(endpoint: &str) -> DynamoStore {
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
        ..DynamoDbConfig::new("t")
    };
    DynamoStore::from_client(client, &config, StoreOptions::default()).unwrap()
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
    let store = store(&black_hole());
    let key = Key::new("s", "c", "i").unwrap();
    let started = Instant::now();
    let err = store
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
        ..DynamoDbConfig::new("t")
    };
    let err = DynamoStore::from_client(client, &config, StoreOptions::default()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("timeout")),
        "{err}"
    );
}
