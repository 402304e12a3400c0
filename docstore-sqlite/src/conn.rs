//! The connections: one writer thread that commits queued writes in groups, a pool of
//! readers that never wait for it, the retry loop that turns another process's locks into
//! waiting instead of errors, and the open path (no write lock when the schema is current;
//! read-only when the file or its directory cannot be written).

use crate::busy::Deadline;
use crate::checkpoint::Checkpointer;
use crate::error::Fail;
use crate::options::SqliteOptions;
use crate::schema;
use docstore::feed::Commits;
use docstore::{Error, Result};
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::oneshot;

/// How many times an operation that found the database locked (after waiting the busy
/// timeout each time) is run again before `Unavailable` is returned.
const BUSY_ATTEMPTS: u32 = 4;

/// The most queued writes one transaction commits together.
const MAX_GROUP: usize = 64;

/// The connections of one store.
#[derive(Debug)]
pub(crate) struct Connections {
    /// The writer connection. The writer thread locks it for each group; an in-memory
    /// database also reads through it.
    writer: Arc<Mutex<Connection>>,
    /// Where writes are queued for the writer thread (`None` once dropped, or for a
    /// read-only store).
    queue: Option<mpsc::Sender<Box<dyn Job>>>,
    /// Writes queued and not yet taken by the writer thread.
    queued: Arc<AtomicUsize>,
    /// Write calls in progress (in place or queued).
    active: AtomicUsize,
    /// The writer thread, joined on drop so the file is closed when the store is gone.
    thread: Option<JoinHandle<()>>,
    /// File databases read through their own connections (WAL: readers see the last commit
    /// and never wait for the writer); an in-memory database reads through the writer.
    readers: Option<Readers>,
    /// Why the store is read-only, when it is.
    read_only: Option<String>,
    options: SqliteOptions,
    /// Runs the WAL checkpoints beside the writes (a writable file database only).
    _checkpointer: Option<Checkpointer>,
    /// Bumped after every commit of a write on this store's writer connection: what wakes
    /// this process's feed watchers. Sent by whichever thread committed, so a write whose
    /// caller stopped waiting still wakes them.
    commits: Commits,
}

#[derive(Debug)]
struct Readers {
    /// How to open another reader.
    open: ReaderOpen,
    idle: Mutex<Vec<Connection>>,
}

#[derive(Clone, Debug)]
enum ReaderOpen {
    /// Read-write flags on the path (the usual case).
    ReadWrite(PathBuf),
    /// Read-write flags on the path (never creating it) and `PRAGMA query_only`: a store
    /// that only reads, in a directory it can write, so that SQLite removes the `-wal` and
    /// `-shm` files it needs while reading once the last connection closes (a connection
    /// opened read-only cannot, and would leave them behind).
    QueryOnly(PathBuf),
    /// `SQLITE_OPEN_READ_ONLY` on the path.
    ReadOnly(PathBuf),
    /// A read-only `file:` URI with `immutable=1` (a read-only directory holding no `-shm`).
    Immutable(String),
}

impl ReaderOpen {
    fn open(&self) -> rusqlite::Result<Connection> {
        let rw = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let ro = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        match self {
            ReaderOpen::ReadWrite(path) => Connection::open_with_flags(path, rw),
            ReaderOpen::QueryOnly(path) => {
                let conn = Connection::open_with_flags(path, rw)?;
                conn.pragma_update(None, "query_only", true)?;
                Ok(conn)
            }
            ReaderOpen::ReadOnly(path) => Connection::open_with_flags(path, ro),
            ReaderOpen::Immutable(uri) => {
                Connection::open_with_flags(uri, ro | OpenFlags::SQLITE_OPEN_URI)
            }
        }
    }
}

/// A queued write: run on the writer thread inside the group's transaction, answered after
/// the commit.
trait Job: Send {
    /// Runs the write on `conn`, keeping its value or its refusal for the answer.
    fn run(&mut self, conn: &Connection) -> Ran;
    /// Sends the outcome of the last `run` (after the commit).
    fn answer(self: Box<Self>);
    /// Sends `err` instead (the write could not be committed).
    fn answer_error(self: Box<Self>, err: Error);
}

/// How a job's run went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ran {
    /// It wrote (its changes stay unless the transaction fails).
    Wrote,
    /// It refused or failed: its changes must be rolled back; the outcome holds the error.
    Refused,
    /// Another connection's lock stopped it: worth running again.
    Busy,
}

struct TypedJob<T, F> {
    op: F,
    outcome: Option<Result<T, Fail>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Job for TypedJob<T, F>
where
    T: Send,
    F: FnMut(&Connection) -> Result<T, Fail> + Send,
{
    fn run(&mut self, conn: &Connection) -> Ran {
        let outcome = (self.op)(conn);
        let ran = match &outcome {
            Ok(_) => Ran::Wrote,
            Err(fail) if fail.is_busy() => Ran::Busy,
            Err(_) => Ran::Refused,
        };
        self.outcome = Some(outcome);
        ran
    }

    fn answer(self: Box<Self>) {
        let outcome = match self.outcome {
            Some(Ok(value)) => Ok(value),
            Some(Err(fail)) => Err(fail.into_error()),
            None => Err(Error::Backend {
                message: "sqlite writer: the write never ran".into(),
                source: None,
            }),
        };
        // The caller may have gone away (its future dropped); the write stands.
        let _ = self.reply.send(outcome);
    }

    fn answer_error(self: Box<Self>, err: Error) {
        let _ = self.reply.send(Err(err));
    }
}

impl Connections {
    /// Opens (creating if needed) the database file. When the schema is current nothing is
    /// locked: the journal mode and `user_version` are read first, and WAL is switched on or
    /// the schema migrated only when needed. A file (or directory) that cannot be written
    /// opens read-only, with the cause kept for the error every write then returns. A file
    /// holding another program's tables is refused unless shared; a read-only store of a
    /// file that is missing or holds no docstore tables is an empty store.
    pub(crate) fn open_file(path: PathBuf, options: SqliteOptions) -> Result<Self> {
        let opened = retry_busy(options.busy_timeout, || open_writer(&path, &options))?;
        let Opened {
            mut conn,
            read_only,
            readers,
        } = opened;
        // Short commits only: see the `checkpoint` module for why not with fsync per commit.
        let checkpointer = match (&read_only, &readers) {
            (None, Some(how)) if options.durability == crate::options::Durability::Normal => {
                let (how, options) = (how.clone(), options.clone());
                let open = move || open_configured(&how, &options);
                let started = Checkpointer::start(&mut conn, open);
                Some(started.map_err(|err| Fail::from(err).into_error())?)
            }
            _ => None,
        };
        let readers = readers.map(|open| Readers {
            open,
            idle: Mutex::new(Vec::new()),
        });
        let mut connections = Self::start(conn, readers, read_only, options);
        connections._checkpointer = checkpointer;
        Ok(connections)
    }

    /// A private in-memory database (gone when the store is dropped).
    pub(crate) fn open_memory(options: SqliteOptions) -> Result<Self> {
        let conn = retry_busy(options.busy_timeout, || {
            let mut conn = Connection::open_in_memory()?;
            schema::configure(&mut conn, &options)?;
            schema::configure_writer(&conn)?;
            schema::migrate(&mut conn)?;
            Ok(conn)
        })?;
        Ok(Self::start(conn, None, None, options))
    }

    fn start(
        conn: Connection,
        readers: Option<Readers>,
        read_only: Option<String>,
        options: SqliteOptions,
    ) -> Self {
        let writer = Arc::new(Mutex::new(conn));
        let queued = Arc::new(AtomicUsize::new(0));
        let commits = Commits::default();
        let (queue, thread) = if read_only.is_none() {
            let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
            let conn = Arc::clone(&writer);
            let taken = Arc::clone(&queued);
            let committed = commits.clone();
            let busy_timeout = options.busy_timeout;
            let thread = std::thread::Builder::new()
                .name("docstore-sqlite-writer".into())
                .spawn(move || writer_loop(&conn, &rx, &taken, &committed, busy_timeout))
                .expect("spawning the sqlite writer thread");
            (Some(tx), Some(thread))
        } else {
            (None, None)
        };
        Connections {
            writer,
            queue,
            queued,
            active: AtomicUsize::new(0),
            thread,
            readers,
            read_only,
            options,
            _checkpointer: None,
            commits,
        }
    }

    /// This store's commits, for the feed's watchers.
    pub(crate) fn commits(&self) -> &Commits {
        &self.commits
    }

    /// Runs `op` in an immediate transaction and returns after its commit; a failed write
    /// changes nothing.
    ///
    /// When no write is queued and the writer connection is free, the calling thread runs
    /// it in place (as `blocking` does: no thread hop, so a lone writer pays nothing for the
    /// queue). Otherwise it is queued for the writer thread, which runs it together with the
    /// other queued writes in one transaction (each in its own savepoint, so a failing write
    /// never fails another) while the caller's task waits without holding a thread.
    ///
    /// The caller registers with [`Connections::begin_write`] and, when alone, calls
    /// [`Connections::write_in_place`] inside [`blocking`]; else this.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        op: impl FnMut(&Connection) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T> {
        if let Some(reason) = &self.read_only {
            return Err(read_only_error(reason));
        }
        self.enqueue(op).await
    }

    /// Registers a write call until the returned guard is dropped, and says whether it may
    /// run in place: the store is writable, no other write call is in progress (so nothing
    /// is queued and no group is waiting to form) and the writer connection is free. Under
    /// concurrent writers every call is queued, so they commit in groups.
    pub(crate) fn begin_write(&self) -> (ActiveWrite<'_>, bool) {
        let others = self.active.fetch_add(1, Ordering::AcqRel);
        let alone = others == 0
            && self.read_only.is_none()
            && self.queued.load(Ordering::Acquire) == 0
            && !self.writer.is_locked();
        (ActiveWrite(&self.active), alone)
    }

    /// The fast path of [`Connections::write`]: `op` alone in one immediate transaction on
    /// the writer connection, from the calling thread. (If the writer thread took the
    /// connection in the instant since the check, this waits for its group, as every write
    /// did before the writer thread existed.)
    pub(crate) fn write_in_place<T>(
        &self,
        op: &mut impl FnMut(&Connection) -> Result<T, Fail>,
    ) -> Result<T> {
        let mut conn = self.writer.lock();
        let written = retry_busy(self.options.busy_timeout, || {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = op(&tx)?;
            tx.commit()?;
            Ok(value)
        });
        if written.is_ok() {
            self.commits.committed();
        }
        written
    }

    /// Whether commits are short: `synchronous=NORMAL` (no fsync), so a write takes tens of
    /// µs and runs on the calling thread ([`Connections::write_on_this_thread`]).
    pub(crate) fn short_commits(&self) -> bool {
        self.options.durability == crate::Durability::Normal
    }

    /// `op` alone in one immediate transaction on the calling thread, waiting for the writer
    /// connection as a mutex-guarded call would (`synchronous=NORMAL`: other writers of this
    /// store hold it for tens of µs each), spinning for about one write before it sleeps
    /// ([`crate::spin`]). The thread is not handed back to the async runtime
    /// meanwhile, exactly as with hand-written `rusqlite` behind a mutex: under as many
    /// concurrent writers as the runtime has threads, at most that many writes are in
    /// progress, so a write waits for at most a few others (a task switch, a thread hop or a
    /// group commit would each make it wait for more).
    ///
    /// `None` when another process holds the database's write lock: nothing ran, and the
    /// caller waits for it off the runtime's threads ([`blocking`]), since that wait can last
    /// the busy timeout.
    pub(crate) fn write_on_this_thread<T>(
        &self,
        op: &mut impl FnMut(&Connection) -> Result<T, Fail>,
    ) -> Option<Result<T>> {
        if let Some(reason) = &self.read_only {
            return Some(Err(read_only_error(reason)));
        }
        let mut conn = crate::spin::lock(&self.writer);
        let impatient = crate::busy::Impatient::start();
        let began = conn.transaction_with_behavior(TransactionBehavior::Immediate);
        drop(impatient);
        let fail = match began {
            Ok(tx) => {
                let result = op(&tx).and_then(|value| {
                    tx.commit()?;
                    self.commits.committed();
                    Ok(value)
                });
                return Some(result.map_err(Fail::into_error));
            }
            Err(err) => Fail::from(err),
        };
        if fail.is_busy() {
            None
        } else {
            Some(Err(fail.into_error()))
        }
    }

    /// Queues `op` for the writer thread and waits for its answer.
    async fn enqueue<T: Send + 'static>(
        &self,
        op: impl FnMut(&Connection) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(TypedJob {
            op,
            outcome: None,
            reply,
        });
        let queue = self.queue.as_ref().expect("a writable store has a queue");
        self.queued.fetch_add(1, Ordering::AcqRel);
        if queue.send(job).is_err() {
            return Err(writer_gone());
        }
        answer.await.map_err(|_| writer_gone())?
    }

    /// Runs `op` on the writer connection right now, outside the writer thread's queue (at
    /// open, before any write is queued), retrying while another process holds a lock.
    pub(crate) fn with_writer<T>(
        &self,
        mut op: impl FnMut(&mut Connection, bool) -> Result<T, Fail>,
    ) -> Result<T> {
        let writable = self.read_only.is_none();
        let mut conn = self.writer.lock();
        retry_busy(self.options.busy_timeout, || op(&mut conn, writable))
    }

    /// Runs `op` on a read connection.
    pub(crate) fn read<T>(&self, mut op: impl FnMut(&Connection) -> Result<T, Fail>) -> Result<T> {
        let Some(readers) = &self.readers else {
            let conn = self.writer.lock();
            return retry_busy(self.options.busy_timeout, || op(&conn));
        };
        let conn = match readers.idle.lock().pop() {
            Some(conn) => conn,
            None => self.open_reader(&readers.open)?,
        };
        let result = retry_busy(self.options.busy_timeout, || op(&conn));
        let mut idle = readers.idle.lock();
        if idle.len() < self.options.max_idle_readers {
            idle.push(conn);
        }
        result
    }

    /// The options the store was opened with.
    pub(crate) fn options(&self) -> &SqliteOptions {
        &self.options
    }

    /// The writer connection, for work beside the writes (feed pruning); `None` for a
    /// read-only store.
    pub(crate) fn writer_when_writable(&self) -> Option<Arc<Mutex<Connection>>> {
        self.read_only.is_none().then(|| Arc::clone(&self.writer))
    }

    fn open_reader(&self, how: &ReaderOpen) -> Result<Connection> {
        open_configured(how, &self.options)
    }
}

/// A write call in progress (see [`Connections::begin_write`]).
pub(crate) struct ActiveWrite<'a>(&'a AtomicUsize);

impl Drop for ActiveWrite<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Connections {
    fn drop(&mut self) {
        // Closing the queue ends the writer thread once it has answered what was queued.
        self.queue.take();
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

fn writer_gone() -> Error {
    Error::Backend {
        message: "the sqlite writer thread stopped".into(),
        source: None,
    }
}

fn read_only_error(reason: &str) -> Error {
    Error::Backend {
        message: format!("the store is read-only: {reason}"),
        source: None,
    }
}

/// The writer thread: takes the next write, then every write queued meanwhile (up to
/// [`MAX_GROUP`]), and commits them in one transaction.
fn writer_loop(
    conn: &Mutex<Connection>,
    queue: &mpsc::Receiver<Box<dyn Job>>,
    queued: &AtomicUsize,
    commits: &Commits,
    busy_timeout: Duration,
) {
    let mut group: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_GROUP);
    while let Ok(first) = queue.recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let mut conn = conn.lock();
        // Taken: from now on a new write may run in place once the connection is free.
        queued.fetch_sub(group.len(), Ordering::AcqRel);
        commit_group(&mut conn, &mut group, &Deadline::start(busy_timeout));
        // Maybe every write of the group refused: a watcher woken for nothing reads again.
        commits.committed();
    }
}

/// Runs `group` in one immediate transaction and answers every job after the commit.
///
/// A single write runs as it always did (its failure rolls the transaction back). Several
/// run each inside a savepoint: a failing one is rolled back to its savepoint and answered
/// with its error, the others commit. When the database stays busy past every retry, or the
/// commit itself fails, each write runs again alone in its own transaction, so every caller
/// gets the answer its own write deserves (all under `deadline`: a group that waited the
/// busy timeout out is not waited for again, write by write).
fn commit_group(conn: &mut Connection, group: &mut Vec<Box<dyn Job>>, deadline: &Deadline) {
    if group.len() > 1 {
        match run_together(conn, group, deadline) {
            Ok(()) => {
                for job in group.drain(..) {
                    job.answer();
                }
                return;
            }
            Err(fail) => {
                tracing::debug!(?fail, "group commit failed, running its writes one by one");
            }
        }
    }
    for mut job in group.drain(..) {
        match run_alone(conn, job.as_mut(), deadline) {
            Ok(()) => job.answer(),
            Err(Some(err)) => job.answer_error(err),
            // The job refused: its own outcome holds the error, nothing was written.
            Err(None) => job.answer(),
        }
    }
}

/// The error a busy database gives, for a group stopped by one busy write.
fn busy() -> Fail {
    Fail::Sql(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
        None,
    ))
}

fn run_together(
    conn: &mut Connection,
    group: &mut [Box<dyn Job>],
    deadline: &Deadline,
) -> Result<(), Fail> {
    let mut attempt = 1;
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate);
        let result = tx.map_err(Fail::from).and_then(|tx| {
            for job in group.iter_mut() {
                tx.execute_batch("SAVEPOINT docstore_write")?;
                match job.run(&tx) {
                    Ran::Wrote => tx.execute_batch("RELEASE docstore_write")?,
                    Ran::Busy => return Err(busy()),
                    Ran::Refused => {
                        tx.execute_batch("ROLLBACK TO docstore_write; RELEASE docstore_write")?
                    }
                }
            }
            tx.commit()?;
            Ok(())
        });
        match result {
            Err(fail) if fail.is_busy() && attempt < BUSY_ATTEMPTS && !deadline.passed() => {
                tracing::debug!(attempt, "sqlite busy, retrying the group");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Runs one job in its own immediate transaction, retrying while the database is busy.
/// `Err(Some)`: the transaction failed (the error to answer); `Err(None)`: the job refused
/// (its outcome holds the refusal), rolled back.
fn run_alone(
    conn: &mut Connection,
    job: &mut dyn Job,
    deadline: &Deadline,
) -> Result<(), Option<Error>> {
    let mut attempt = 1;
    loop {
        let result = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Fail::from)
            .and_then(|tx| match job.run(&tx) {
                Ran::Wrote => tx.commit().map_err(Fail::from).map(|()| Ran::Wrote),
                // Dropping the transaction rolls it back.
                other => Ok(other),
            });
        match result {
            Ok(Ran::Wrote) => return Ok(()),
            Ok(Ran::Busy) if attempt < BUSY_ATTEMPTS && !deadline.passed() => attempt += 1,
            Ok(Ran::Busy) => return Err(Some(busy().into_error_after_waiting(deadline.timeout))),
            Ok(_) => return Err(None),
            Err(fail) if fail.is_busy() && attempt < BUSY_ATTEMPTS && !deadline.passed() => {
                attempt += 1
            }
            Err(fail) => return Err(Some(fail.into_error_after_waiting(deadline.timeout))),
        }
        tracing::debug!(attempt, "sqlite busy, retrying the write");
    }
}

/// Another connection to the database (a reader, the checkpointer's), opened as `how` says
/// and configured like every connection.
fn open_configured(how: &ReaderOpen, options: &SqliteOptions) -> Result<Connection> {
    retry_busy(options.busy_timeout, || {
        let mut conn = how.open()?;
        schema::configure(&mut conn, options)?;
        Ok(conn)
    })
}

/// The writer connection as opened, and how readers open theirs (`None`: they read through
/// it, an in-memory stand-in for a store that does not exist yet).
struct Opened {
    conn: Connection,
    read_only: Option<String>,
    readers: Option<ReaderOpen>,
}

/// Opens the writer connection: read-write when possible (creating the file), taking the
/// write lock only to switch to WAL or migrate when that is needed; read-only, with the
/// reason, when the options ask for it or the file or its directory cannot be written.
fn open_writer(path: &Path, options: &SqliteOptions) -> Result<Opened, Fail> {
    if options.read_only {
        return open_for_reading(path, options);
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = match Connection::open_with_flags(path, flags) {
        Ok(conn) => conn,
        Err(err) if path.exists() && is_permission(&err) => {
            return open_read_only(path, options, not_writable(path, &err));
        }
        Err(err) => {
            return Err(Fail::Store(Error::backend(
                format!("cannot open {}: {}", path.display(), diagnose(path)),
                err,
            )));
        }
    };
    // SQLite opens a write-protected file read-only without a word.
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        drop(conn);
        let cause = not_writable(path, &"the file is write-protected");
        return open_read_only(path, options, cause);
    }
    schema::configure(&mut conn, options)?;
    schema::configure_writer(&conn)?;
    // Before anything in the file may change.
    match schema::check_owned(&conn, options, path) {
        Ok(_) => {}
        Err(Fail::Sql(err)) if is_permission(&err) => {
            drop(conn);
            return open_read_only(path, options, not_writable(path, &err));
        }
        Err(fail) => return Err(fail),
    }
    match schema::prepare(&mut conn) {
        Ok(()) => {}
        Err(Fail::Sql(err)) if is_permission(&err) => {
            drop(conn);
            return open_read_only(path, options, not_writable(path, &err));
        }
        Err(fail) => return Err(fail),
    }
    Ok(Opened {
        conn,
        read_only: None,
        readers: Some(ReaderOpen::ReadWrite(path.to_owned())),
    })
}

/// Opens `path` for a store that only reads ([`SqliteOptions::read_only`]): nothing in the
/// file changes and nothing is created. Read-write flags with `query_only` when this
/// process may write the file and its directory (SQLite then removes its `-wal` and `-shm`
/// files again at close), else SQLite's read-only open; a missing file, or one without
/// docstore's tables, is an empty store.
fn open_for_reading(path: &Path, options: &SqliteOptions) -> Result<Opened, Fail> {
    let reason = String::from("SqliteOptions::read_only is set");
    if !path.exists() {
        let why = format!(
            "{reason}, and there is no database at {} yet",
            path.display()
        );
        return open_empty(options, why);
    }
    let how = ReaderOpen::QueryOnly(path.to_owned());
    match open_checked(&how, path, options, &reason) {
        Ok((conn, readable)) => opened_read_only(conn, readable, how, path, options, reason),
        Err(Fail::Sql(err)) if is_permission(&err) => open_read_only(path, options, reason),
        Err(fail) => Err(fail),
    }
}

/// Opens a connection as `how` says, configured, and checks what its file holds
/// ([`schema::check_readable`]).
fn open_checked(
    how: &ReaderOpen,
    path: &Path,
    options: &SqliteOptions,
    reason: &str,
) -> Result<(Connection, schema::Readable), Fail> {
    let mut conn = how.open()?;
    schema::configure(&mut conn, options)?;
    let readable = schema::check_readable(&conn, options, path, reason)?;
    Ok((conn, readable))
}

/// A read-only store with nothing in it, for a file that does not exist yet or holds no
/// docstore tables: an in-memory database with the current schema (the file is never
/// touched). `reason` is what every write says.
fn open_empty(options: &SqliteOptions, reason: String) -> Result<Opened, Fail> {
    let mut conn = Connection::open_in_memory()?;
    schema::configure(&mut conn, options)?;
    schema::migrate(&mut conn)?;
    Ok(Opened {
        conn,
        read_only: Some(reason),
        readers: None,
    })
}

/// Opens `path` read-only: plainly when SQLite can use (or create) the WAL index, else as
/// an immutable file (a read-only directory without a `-shm` file, and no `-wal` holding
/// commits). The schema must be current: a read-only store cannot migrate it.
fn open_read_only(path: &Path, options: &SqliteOptions, reason: String) -> Result<Opened, Fail> {
    let plain = ReaderOpen::ReadOnly(path.to_owned());
    match open_checked(&plain, path, options, &reason) {
        Ok((conn, readable)) => {
            return opened_read_only(conn, readable, plain, path, options, reason);
        }
        Err(Fail::Sql(err)) if is_cant_open(&err) => {
            let wal = wal_path(path);
            if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
                return Err(Fail::Store(Error::backend(
                    format!(
                        "cannot read {}: {reason}, and its write-ahead log {} holds commits \
                         SQLite can only read with write access to the directory",
                        path.display(),
                        wal.display()
                    ),
                    err,
                )));
            }
        }
        Err(Fail::Sql(err)) => {
            return Err(Fail::Store(Error::backend(
                format!("cannot read {}: {reason}", path.display()),
                err,
            )));
        }
        Err(fail) => return Err(fail),
    }
    let immutable = ReaderOpen::Immutable(immutable_uri(path));
    let reason = format!("{reason} (opened as an immutable file)");
    match open_checked(&immutable, path, options, &reason) {
        Ok((conn, readable)) => opened_read_only(conn, readable, immutable, path, options, reason),
        Err(Fail::Sql(err)) => Err(Fail::Store(Error::backend(
            format!("cannot read {}: {reason}", path.display()),
            err,
        ))),
        Err(fail) => Err(fail),
    }
}

/// A read-only store of `conn`'s file, or an empty one when the file holds no docstore
/// tables yet.
fn opened_read_only(
    conn: Connection,
    readable: schema::Readable,
    how: ReaderOpen,
    path: &Path,
    options: &SqliteOptions,
    reason: String,
) -> Result<Opened, Fail> {
    match readable {
        schema::Readable::Current => Ok(Opened {
            conn,
            read_only: Some(reason),
            readers: Some(how),
        }),
        schema::Readable::NotYetAStore => {
            drop(conn);
            let why = format!(
                "{reason}, and {} holds no docstore tables yet",
                path.display()
            );
            open_empty(options, why)
        }
    }
}

fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// A `file:` URI for `path`, read-only and immutable, with every byte that is not
/// unreserved percent-encoded.
fn immutable_uri(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut uri = String::from("file:");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(*byte as char)
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    uri
}

fn is_permission(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(
            rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::PermissionDenied
                | rusqlite::ErrorCode::ReadOnly
        )
    )
}

fn is_cant_open(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
    )
}

/// Why `path` cannot be written, in words naming the file or the directory.
fn not_writable(path: &Path, err: &dyn std::fmt::Display) -> String {
    format!(
        "{} cannot be written ({}): {}",
        path.display(),
        err,
        diagnose(path)
    )
}

/// What the operating system says about writing `path` and creating files beside it.
fn diagnose(path: &Path) -> String {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return format!("the directory {} does not exist", dir.display());
    }
    if path.exists()
        && let Err(err) = std::fs::OpenOptions::new().append(true).open(path)
    {
        return format!("the file {} is not writable: {err}", path.display());
    }
    let probe = dir.join(format!(
        ".docstore-write-probe-{}",
        docstore::WriteId::random()
    ));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            format!(
                "the file and the directory {} are writable by this process",
                dir.display()
            )
        }
        Err(err) => format!(
            "the directory {} is not writable (SQLite creates its -wal and -shm files \
             there): {err}",
            dir.display()
        ),
    }
}

/// Runs `op` again while it fails because another connection holds a lock, until the busy
/// timeout (one deadline for every attempt: a lock that stayed held for all of it is not
/// waited for again) or [`BUSY_ATTEMPTS`] attempts.
fn retry_busy<T>(busy_timeout: Duration, mut op: impl FnMut() -> Result<T, Fail>) -> Result<T> {
    let deadline = Deadline::start(busy_timeout);
    let mut attempt = 1;
    loop {
        match op() {
            Ok(value) => return Ok(value),
            Err(fail) if fail.is_busy() && attempt < BUSY_ATTEMPTS && !deadline.passed() => {
                tracing::debug!(attempt, "sqlite busy, retrying the operation");
                attempt += 1;
            }
            Err(fail) => return Err(fail.into_error_after_waiting(busy_timeout)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immutable_uri_encodes_everything_but_unreserved_bytes() {
        let uri = immutable_uri(Path::new("/tmp/a b?c#d%e.db"));
        assert_eq!(uri, "file:/tmp/a%20b%3Fc%23d%25e.db?mode=ro&immutable=1");
    }
}
