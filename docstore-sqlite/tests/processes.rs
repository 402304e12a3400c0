//! Several processes on one database file: concurrent writers lose nothing and never see a
//! busy error, and a writer killed with SIGKILL leaves an intact file holding every write it
//! acknowledged. The child processes are this test binary itself, started with a role in
//! the environment (see [`child_entry`]).

use docstore::{Key, Store};
use docstore_sqlite::SqliteStore;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const ROLE: &str = "DOCSTORE_SQLITE_TEST_ROLE";
const DB: &str = "DOCSTORE_SQLITE_TEST_DB";
const UPDATES_PER_PROCESS: usize = 500;

fn shared_key() -> Key {
    Key::new("procs", "docs", "shared").unwrap()
}

fn numbered_key(i: u64) -> Key {
    Key::new("procs", "log", format!("{i:08}")).unwrap()
}

/// Entry point of the child processes the tests below start; it does nothing when the test
/// binary runs normally (no role in the environment).
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let path = std::env::var(DB).expect("the parent names the database");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = Store::new(SqliteStore::open(&path).expect("open"));
        match role.split_once(':') {
            Some(("update", tag)) => {
                // Start together with the other writer: wait for the parent's go file.
                let go = Path::new(&path).with_extension("go");
                for _ in 0..10_000 {
                    if go.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                for i in 0..UPDATES_PER_PROCESS {
                    let patch = docstore::object(json!({ format!("{tag}-{i}"): i })).unwrap();
                    // Any error, a busy one included, fails the child and so the test.
                    store.update(&shared_key(), &patch, tag).await.unwrap();
                }
            }
            Some(("append", _)) => {
                let mut out = std::io::stdout().lock();
                // Bounded: the parent kills it long before.
                for i in 0..1_000_000u64 {
                    let data = docstore::object(json!({"i": i, "pad": "x".repeat(200)})).unwrap();
                    store.create(&numbered_key(i), data, "child").await.unwrap();
                    writeln!(out, "ack {i}").unwrap();
                    out.flush().unwrap();
                }
            }
            _ => panic!("unknown role {role}"),
        }
    });
}

/// The number in an acknowledgement line. The first one shares its line with libtest's
/// `test child_entry ... ` (printed before the test runs when it runs single-threaded), so
/// the number is looked for after the last "ack ", not at the start of the line.
fn ack(line: &str) -> Option<u64> {
    let (_, number) = line.rsplit_once("ack ")?;
    number.trim().parse().ok()
}

fn spawn(role: &str, db: &Path, stdout: Stdio) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DB, db)
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the child")
}

#[tokio::test(flavor = "multi_thread")]
async fn two_processes_updating_one_document_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let store = Store::new(SqliteStore::open(&db).unwrap());
    store
        .create(
            &shared_key(),
            docstore::object(json!({})).unwrap(),
            "parent",
        )
        .await
        .unwrap();

    let children = [
        spawn("update:A", &db, Stdio::null()),
        spawn("update:B", &db, Stdio::null()),
    ];
    std::fs::write(db.with_extension("go"), b"").unwrap();
    // Read while they write: readers never wait for writers, and see whole versions.
    let mut last_version = 1;
    for _ in 0..50 {
        let doc = store.get(&shared_key()).await.unwrap().unwrap();
        assert!(doc.version >= last_version);
        assert_eq!(doc.data.len() as u64, doc.version - 1);
        last_version = doc.version;
    }
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a child failed");
    }

    let doc = store.get(&shared_key()).await.unwrap().unwrap();
    for tag in ["A", "B"] {
        for i in 0..UPDATES_PER_PROCESS {
            assert_eq!(doc.data[&format!("{tag}-{i}")], json!(i), "{tag}-{i} lost");
        }
    }
    assert_eq!(doc.data.len(), 2 * UPDATES_PER_PROCESS);
    assert_eq!(doc.version, 1 + 2 * UPDATES_PER_PROCESS as u64);
    assert_eq!(store.count("procs").await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_writer_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("killed.db");
    // Create the file first, so the child does not pay for it.
    drop(SqliteStore::open(&db).unwrap());

    let mut child = spawn("append:_", &db, Stdio::piped());
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked: Vec<u64> = Vec::new();
    while acked.len() < 300 {
        let line = lines
            .next()
            .expect("the child stopped early")
            .expect("read the child's output");
        acked.extend(ack(&line));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished");
    // Acknowledgements already in the pipe count too.
    for line in lines {
        acked.extend(ack(&line.unwrap()));
    }

    let conn = rusqlite::Connection::open(&db).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(conn);

    let store = Store::new(SqliteStore::open(&db).unwrap());
    for i in &acked {
        let doc = store.get(&numbered_key(*i)).await.unwrap();
        let doc = doc.unwrap_or_else(|| panic!("acknowledged write {i} lost"));
        assert_eq!(doc.data["i"], json!(i));
    }
    // Counters agree with the rows, whatever the kill interrupted.
    let count = store.count("procs").await.unwrap();
    let all = store
        .query("procs", "log", &docstore::Query::new())
        .await
        .unwrap();
    assert_eq!(count, all.documents.len() as u64);
    assert!(count >= acked.len() as u64);
    assert!(
        count <= acked.len() as u64 + 1,
        "at most the unacknowledged one"
    );
}
