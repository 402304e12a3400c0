//! The change feed in PostgreSQL: table `changes`, one row per committed write, inserted by
//! the write itself as the last statement of its transaction.
//!
//! - **Positions follow commit order.** A sequence number is drawn at insert, not at commit,
//!   so two writers could commit in the other order than they drew, and a reader that went by
//!   the highest position seen would skip the slower one forever. So every writer takes one
//!   transaction-scoped advisory lock of the store just before it draws its positions, and
//!   holds it to its commit: the next writer draws only after the previous one committed,
//!   PostgreSQL releasing the lock after the commit is visible. A reader that sees position
//!   `p` therefore sees every position below it, and reading `position > cursor` gives every
//!   committed change exactly once. The price: writers of one store commit one at a time from
//!   their change insert to their commit (`COMMIT` follows the change insert in the write's
//!   pipeline, so no round trip to the client in between); their reads, locks and document
//!   writes still run side by side.
//! - **Cursors** are `postgres:FEED.POSITION`, `FEED` the random id the schema was created
//!   with: a cursor of another store is [`Error::InvalidArgument`].
//! - **Retention**: see the `retention` module; a cursor before what is kept is
//!   [`Error::CursorExpired`].
//! - **Waking**: writes `pg_notify` the store's channel in their transaction (delivered at
//!   commit); a store's first `watch` opens one connection that `LISTEN`s on it, and this
//!   process's commits wake watchers directly. Watchers also look at the head every second,
//!   should a notification be lost with its connection.

use crate::error::{Fail, corrupt};
use crate::rows;
use docstore::feed::{Change, ChangeCursor, ChangeKind, ChangePage, FeedScope, FeedStart};
use docstore::{Document, Error};
use futures_util::StreamExt;
use std::time::Duration;
use tokio::sync::watch;

/// The driver tag of PostgreSQL cursors.
const DRIVER: &str = "postgres";

/// How often a watcher reads the head when no notification came.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// An advisory lock key of the store: `what` for the schema, as a stable 64-bit hash (FNV-1a).
pub(crate) fn lock_key(what: &str, schema: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in format!("docstore:{what}:{schema}").bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

/// One store's feed: its id, lock, channel, and the wake-up of this process's watchers.
#[derive(Debug)]
pub(crate) struct Feed {
    feed_id: String,
    pub(crate) lock_key: i64,
    pub(crate) channel: String,
    commits: watch::Sender<u64>,
    listener: std::sync::OnceLock<tokio::task::JoinHandle<()>>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.get() {
            listener.abort();
        }
    }
}

impl Feed {
    pub(crate) fn new(schema: &str, feed_id: String) -> Self {
        Feed {
            feed_id,
            lock_key: lock_key("feed", schema),
            channel: format!("docstore_{schema}"),
            commits: watch::channel(0).0,
            listener: std::sync::OnceLock::new(),
        }
    }

    /// Wakes this process's watchers after a commit.
    pub(crate) fn committed(&self) {
        self.commits.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn position(&self, cursor: &ChangeCursor) -> Result<i64, Error> {
        let position = cursor.numbered_position(DRIVER, "PostgreSQL", &self.feed_id)?;
        i64::try_from(position).map_err(|_| Error::invalid("change cursor: position out of range"))
    }

    fn cursor(&self, position: i64) -> ChangeCursor {
        ChangeCursor::numbered(DRIVER, &self.feed_id, position as u64)
    }

    /// A page of `scope`'s changes after `start`, in one snapshot.
    pub(crate) async fn page(
        &self,
        client: &mut deadpool_postgres::Client,
        sql: &crate::sql::Statements,
        (scope, start, limit): (&FeedScope, &FeedStart, usize),
    ) -> Result<ChangePage, Fail> {
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let bounds = tx.query_one(&sql.head, &[]).await?;
        let (head, pruned): (i64, i64) = (bounds.get(0), bounds.get(1));
        let after = match start {
            FeedStart::Oldest => pruned,
            FeedStart::Now => head,
            FeedStart::After(cursor) => self.position(cursor)?,
            FeedStart::Snapshot => return Err(FeedStart::snapshot_refused().into()),
        };
        if after < pruned {
            return Err(Error::CursorExpired(format!(
                "changes up to position {pruned} were pruned (retention); the cursor is at \
                 {after}: resync from the start"
            ))
            .into());
        }
        if after > head {
            return Err(Error::invalid(format!(
                "change cursor at position {after}: this store's feed ends at {head}"
            ))
            .into());
        }
        let statement = tx.prepare_cached(&sql.changes).await?;
        let (site, collection) = (scope.site_name(), scope.collection_name());
        let rows = tx
            .query(&statement, &[&after, &site, &collection, &(limit as i64)])
            .await?;
        let changes = rows
            .iter()
            .map(|row| self.change(row))
            .collect::<Result<Vec<_>, _>>()?;
        let last = match rows.last() {
            Some(row) if rows.len() == limit => row.try_get(3)?,
            _ => head,
        };
        Ok(ChangePage {
            changes,
            next: self.cursor(last),
            caught_up: last == head,
        })
    }

    fn change(&self, row: &tokio_postgres::Row) -> Result<Change, Fail> {
        let key = rows::key(row)?;
        let cursor = self.cursor(row.try_get(3)?);
        let kind: &str = row.try_get(4)?;
        let version = u64::try_from(row.try_get::<_, i64>(5)?).map_err(|_| corrupt("version"))?;
        let (time, actor): (i64, String) = (row.try_get(9)?, row.try_get(10)?);
        let kind = match kind {
            "deleted" => return Ok(Change::deleted(key, version, time, actor, cursor)),
            "expired" => {
                let change = Change::deleted(key, version, time, actor, cursor);
                let kind = ChangeKind::Expired;
                return Ok(Change { kind, ..change });
            }
            "created" => ChangeKind::Created,
            "updated" => ChangeKind::Updated,
            other => return Err(corrupt(format!("change kind {other:?}")).into()),
        };
        let body: Option<&str> = row.try_get(6)?;
        let document = Document {
            id: key.id().to_owned(),
            data: crate::json::parse(body.unwrap_or("{}"))?,
            created_at: row.try_get::<_, Option<i64>>(7)?.unwrap_or(time),
            updated_at: time,
            created_by: row.try_get::<_, Option<String>>(8)?.unwrap_or_default(),
            updated_by: actor,
            version,
            expires_at: row.try_get(11)?,
        };
        Ok(Change::stored(key, kind, document, cursor))
    }

    /// Subscribes to this process's commits and, once per store, to other processes'
    /// notifications (a connection of its own that `LISTEN`s).
    pub(crate) fn subscribe(&self, config: &tokio_postgres::Config) -> watch::Receiver<u64> {
        let receiver = self.commits.subscribe();
        let (config, channel, commits) =
            (config.clone(), self.channel.clone(), self.commits.clone());
        self.listener
            .get_or_init(move || tokio::spawn(listen(config, channel, commits)));
        receiver
    }
}

/// Listens on `channel` and wakes the watchers at each notification, for as long as the
/// connection lasts (watchers poll the head meanwhile).
async fn listen(config: tokio_postgres::Config, channel: String, commits: watch::Sender<u64>) {
    let Ok((client, mut connection)) = config.connect(tokio_postgres::NoTls).await else {
        return;
    };
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement = format!("LISTEN \"{channel}\"");
    let listen = client.batch_execute(&statement);
    tokio::pin!(listen);
    let mut listening = false;
    loop {
        tokio::select! {
            done = &mut listen, if !listening => {
                if done.is_err() { return; }
                listening = true;
            }
            message = messages.next() => match message {
                Some(Ok(tokio_postgres::AsyncMessage::Notification(_))) => {
                    commits.send_modify(|n| *n = n.wrapping_add(1));
                }
                Some(Ok(_)) => {}
                _ => return,
            },
        }
    }
}
