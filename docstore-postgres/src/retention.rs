//! Feed retention: changes older than the retention by the store clock are removed from the
//! front of the feed, and `meta.pruned_through` records the last position removed, so that a
//! cursor before it is [`CursorExpired`](docstore::Error::CursorExpired), never a silent gap
//! (`docs/contract.md`, "Change feed").
//!
//! Only a prefix is ever removed: up to the first change still young, so a change with an
//! older time behind a younger one (another process's clock) waits with it. Each chunk is one
//! transaction that locks the `meta` row, so pruners of several processes take turns. A
//! writer in flight holds positions above every committed one (see the `feed` module), so a
//! chunk never removes a position that is not yet committed.

use crate::error::Fail;
use crate::store::Inner;
use std::sync::Weak;
use std::time::Duration;

/// Retention when the URL does not set `feed_retention_hours`: 7 days, as SQLite's.
pub(crate) const DEFAULT: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often a store prunes its feed in the background.
const INTERVAL: Duration = Duration::from_secs(60);

/// Changes removed by one transaction at most.
const CHUNK: i64 = 1_000;

/// One chunk: `$1` is the cutoff (changes at or after it are young). Returns the position
/// pruned through, or no row when nothing was old.
const PRUNE_CHUNK: &str = "
    WITH mark AS (SELECT pruned_through FROM {s}.meta FOR UPDATE),
    young AS (SELECT coalesce(min(position), 9223372036854775807) AS first
              FROM {s}.changes WHERE time >= $1),
    doomed AS (SELECT max(position) AS last FROM (SELECT position FROM {s}.changes, mark, young
               WHERE position > mark.pruned_through AND position < young.first
               ORDER BY position LIMIT $2) chunk),
    removed AS (DELETE FROM {s}.changes WHERE position <= (SELECT last FROM doomed))
    UPDATE {s}.meta SET pruned_through = greatest(pruned_through, doomed.last) FROM doomed
    WHERE doomed.last IS NOT NULL RETURNING doomed.last";

/// Removes every change older than the retention, a chunk a transaction; how many chunks ran.
pub(crate) async fn prune(inner: &Inner) -> Result<u64, Fail> {
    let retention = i64::try_from(inner.retention.as_nanos()).unwrap_or(i64::MAX);
    let cutoff = inner.now().saturating_sub(retention);
    let client = inner.pool.get().await.map_err(crate::error::pool)?;
    let sql = PRUNE_CHUNK.replace("{s}", &inner.sql.schema);
    let statement = client.prepare_cached(&sql).await?;
    let mut chunks = 0;
    while client
        .query_opt(&statement, &[&cutoff, &CHUNK])
        .await?
        .is_some()
    {
        chunks += 1;
    }
    Ok(chunks)
}

/// Prunes the store's feed at once and then every minute, for as long as the store lives.
pub(crate) fn spawn(inner: Weak<Inner>) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(INTERVAL);
        loop {
            ticks.tick().await;
            let Some(inner) = inner.upgrade() else { return };
            if let Err(fail) = prune(&inner).await {
                tracing::warn!(error = %fail.into_error(), "pruning the change feed failed");
            }
        }
    });
}
