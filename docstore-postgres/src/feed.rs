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
use docstore::Error;
use docstore::feed::{
    Change, ChangeCursor, ChangePage, Commits, FeedBounds, FeedScope, FeedStart, NumberedFeed,
    StoredChange,
};
use futures_util::StreamExt;
use std::time::Duration;

/// The driver tag of PostgreSQL cursors.
const DRIVER: &str = "postgres";

/// How often a watcher reads the head when no notification came.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// An advisory lock key of the store: `what` for the schema ([`stable_hash`]).
///
/// [`stable_hash`]: docstore::driver::stable_hash
pub(crate) fn lock_key(what: &str, schema: &str) -> i64 {
    docstore::driver::stable_hash(format!("docstore:{what}:{schema}").as_bytes()) as i64
}

/// One store's feed: its id, lock, channel, and the wake-up of this process's watchers.
#[derive(Debug)]
pub(crate) struct Feed {
    numbered: NumberedFeed,
    pub(crate) lock_key: i64,
    pub(crate) channel: String,
    pub(crate) commits: Commits,
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
            numbered: NumberedFeed::new(DRIVER, "PostgreSQL", feed_id),
            lock_key: lock_key("feed", schema),
            channel: format!("docstore_{schema}"),
            commits: Commits::default(),
            listener: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn position(&self, cursor: &ChangeCursor) -> Result<i64, Error> {
        let position = self.numbered.position(cursor)?;
        i64::try_from(position).map_err(|_| Error::invalid("change cursor: position out of range"))
    }

    /// A page of `scope`'s changes after `start`, in one snapshot.
    pub(crate) async fn page(
        &self,
        client: &mut deadpool_postgres::Client,
        sql: &crate::sql::Reads,
        (scope, start, limit): (&FeedScope, &FeedStart, usize),
    ) -> Result<ChangePage, Fail> {
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let row = tx.query_one(&sql.head, &[]).await?;
        let position =
            |column| u64::try_from(row.get::<_, i64>(column)).map_err(|_| corrupt("position"));
        let bounds = FeedBounds {
            head: position(0)?,
            pruned: position(1)?,
        };
        let after = self.numbered.start(start, bounds)? as i64;
        let statement = tx.prepare_cached(&sql.changes).await?;
        let (site, collection) = (scope.site_name(), scope.collection_name());
        let rows = tx
            .query(&statement, &[&after, &site, &collection, &(limit as i64)])
            .await?;
        let changes = rows
            .iter()
            .map(|row| self.change(row))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self
            .numbered
            .page(changes, limit, bounds.head, bounds.head)?)
    }

    fn change(&self, row: &tokio_postgres::Row) -> Result<Change, Fail> {
        let version = u64::try_from(row.try_get::<_, i64>(5)?).map_err(|_| corrupt("version"))?;
        let position = u64::try_from(row.try_get::<_, i64>(3)?).map_err(|_| corrupt("position"))?;
        let body: Option<&str> = row.try_get(6)?;
        let key = rows::key(row)?;
        let previous: Option<&str> = row.try_get(12)?;
        let previous = previous
            .map(|text| docstore::feed::parse_previous(key.id(), text))
            .transpose()?;
        let stored = StoredChange {
            key,
            kind: row.try_get(4)?,
            version,
            time: row.try_get(9)?,
            actor: row.try_get(10)?,
            data: body.map(crate::json::parse).transpose()?,
            created_at: row.try_get(7)?,
            created_by: row.try_get(8)?,
            expires_at: row.try_get(11)?,
            previous,
        };
        Ok(stored.into_change(self.numbered.cursor(position))?)
    }

    /// Hears other processes' notifications, once per store (a connection of its own that
    /// `LISTEN`s), as commits.
    pub(crate) fn listen(&self, config: &tokio_postgres::Config) {
        let (config, channel, commits) =
            (config.clone(), self.channel.clone(), self.commits.clone());
        self.listener
            .get_or_init(move || tokio::spawn(listen(config, channel, commits)));
    }
}

/// Listens on `channel` and wakes the watchers at each notification, for as long as the
/// connection lasts (watchers poll the head meanwhile).
async fn listen(config: tokio_postgres::Config, channel: String, commits: Commits) {
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
                Some(Ok(tokio_postgres::AsyncMessage::Notification(_))) => commits.committed(),
                Some(Ok(_)) => {}
                _ => return,
            },
        }
    }
}
