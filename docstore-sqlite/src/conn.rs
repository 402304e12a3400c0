//! The connections: one writer behind a lock, a pool of readers that never wait for it, and
//! the retry loop that turns another process's locks into waiting instead of errors.

use crate::error::Fail;
use crate::options::SqliteOptions;
use crate::schema;
use docstore::{Error, Result};
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use std::path::PathBuf;

/// How many times an operation that found the database locked (after waiting the busy
/// timeout each time) is run again before `Unavailable` is returned.
const BUSY_ATTEMPTS: u32 = 4;

/// The connections of one store.
#[derive(Debug)]
pub(crate) struct Connections {
    /// All writes go through this connection, one immediate transaction at a time.
    writer: Mutex<Connection>,
    /// File databases read through their own connections (WAL: readers see the last commit
    /// and never wait for the writer); an in-memory database reads through the writer.
    readers: Option<Readers>,
    options: SqliteOptions,
}

#[derive(Debug)]
struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Connections {
    /// Opens (creating if needed) the database file, switches it to WAL and migrates it.
    pub(crate) fn open_file(path: PathBuf, options: SqliteOptions) -> Result<Self> {
        let run = || -> Result<Self, Fail> {
            let mut writer = Connection::open(&path)?;
            schema::configure(&writer, &options)?;
            schema::enable_wal(&writer)?;
            schema::migrate(&mut writer)?;
            Ok(Connections {
                writer: Mutex::new(writer),
                readers: Some(Readers {
                    path: path.clone(),
                    idle: Mutex::new(Vec::new()),
                }),
                options: options.clone(),
            })
        };
        retry_busy(run)
    }

    /// A private in-memory database (gone when the store is dropped).
    pub(crate) fn open_memory(options: SqliteOptions) -> Result<Self> {
        let run = || -> Result<Self, Fail> {
            let mut writer = Connection::open_in_memory()?;
            schema::configure(&writer, &options)?;
            schema::migrate(&mut writer)?;
            Ok(Connections {
                writer: Mutex::new(writer),
                readers: None,
                options: options.clone(),
            })
        };
        retry_busy(run)
    }

    /// Runs `op` in an immediate transaction on the writer and commits when it succeeds;
    /// on failure the transaction is rolled back, so a failed write changes nothing.
    pub(crate) fn write<T>(
        &self,
        mut op: impl FnMut(&Transaction<'_>) -> Result<T, Fail>,
    ) -> Result<T> {
        let mut conn = self.writer.lock();
        retry_busy(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = op(&tx)?;
            tx.commit()?;
            Ok(value)
        })
    }

    /// Runs `op` on a read connection.
    pub(crate) fn read<T>(&self, mut op: impl FnMut(&Connection) -> Result<T, Fail>) -> Result<T> {
        let Some(readers) = &self.readers else {
            let conn = self.writer.lock();
            return retry_busy(|| op(&conn));
        };
        let conn = match readers.idle.lock().pop() {
            Some(conn) => conn,
            None => self.open_reader(&readers.path)?,
        };
        let result = retry_busy(|| op(&conn));
        let mut idle = readers.idle.lock();
        if idle.len() < self.options.max_idle_readers {
            idle.push(conn);
        }
        result
    }

    fn open_reader(&self, path: &PathBuf) -> Result<Connection> {
        retry_busy(|| {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = Connection::open_with_flags(path, flags)?;
            schema::configure(&conn, &self.options)?;
            Ok(conn)
        })
    }
}

/// Runs `op` again while it fails because another connection holds a lock (each attempt
/// already waited the busy timeout inside SQLite).
fn retry_busy<T>(mut op: impl FnMut() -> Result<T, Fail>) -> Result<T> {
    let mut attempt = 1;
    loop {
        match op() {
            Ok(value) => return Ok(value),
            Err(fail) if fail.is_busy() && attempt < BUSY_ATTEMPTS => {
                tracing::debug!(attempt, "sqlite busy, retrying the operation");
                attempt += 1;
            }
            Err(fail) => return Err(fail.into_error()),
        }
    }
}

/// Runs blocking SQLite work without stalling the async runtime.
///
/// On a multi-threaded Tokio runtime the calling worker hands its other tasks to another
/// thread and runs the work in place (`block_in_place`): no thread hop, so a point read costs
/// what it costs in synchronous code (measured 13x the throughput of `spawn_blocking`).
/// Elsewhere (a current-thread runtime) the work goes to Tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        return tokio::task::block_in_place(work);
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| Error::backend("the sqlite worker task failed", err))?
}
