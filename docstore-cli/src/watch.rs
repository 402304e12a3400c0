//! `docstore watch`: the change feed on standard output, and the feed-following loop that
//! `watch` and `copy --follow` share.

use crate::exit::CliError;
use crate::output::Out;
use docstore::feed::{ChangePage, FeedScope, WATCH_PAGE};
use docstore::{Change, ChangeCursor, FeedStart, Store};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// How long `--until-idle` waits, once the feed is caught up, for a change that is committed
/// but not readable yet (DynamoDB Streams shows a commit a moment later) before it stops.
pub const IDLE_AFTER: Duration = Duration::from_secs(2);

/// When a follow ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// On Ctrl-C (or when the output closes).
    Interrupted,
    /// When the feed has had nothing new for [`IDLE_AFTER`].
    Idle,
}

/// Reads `scope`'s changes from `start` and hands each to `each`, waiting at the end of the
/// feed for new commits, until `until` (or Ctrl-C, always). Returns the cursor after the
/// last change handed over.
pub async fn follow(
    store: &Store,
    scope: &FeedScope,
    start: FeedStart,
    until: Until,
    mut each: impl AsyncFnMut(Change) -> Result<(), CliError>,
) -> Result<Option<ChangeCursor>, CliError> {
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut start = start;
    let mut last = None;
    let mut idle_since: Option<Instant> = None;
    loop {
        let page: ChangePage = tokio::select! {
            page = store.changes(scope, &start, WATCH_PAGE) => page?,
            _ = &mut interrupted => return Ok(last),
        };
        let at_end = page.changes.is_empty() && page.caught_up;
        for change in page.changes {
            last = Some(change.cursor.clone());
            each(change).await?;
        }
        let cursor = page.next;
        start = FeedStart::After(cursor.clone());
        if !at_end {
            idle_since = None;
            continue;
        }
        let idle = *idle_since.get_or_insert_with(Instant::now);
        if until == Until::Idle && idle.elapsed() >= IDLE_AFTER {
            return Ok(last);
        }
        let wait = store.wait_for_changes(&cursor);
        let patience = IDLE_AFTER
            .saturating_sub(idle.elapsed())
            .max(Duration::from_millis(50));
        tokio::select! {
            waited = wait => waited?,
            () = tokio::time::sleep(patience), if until == Until::Idle => {}
            _ = &mut interrupted => return Ok(last),
        }
    }
}

/// One change as `watch` prints it: the cursor to resume after it, what happened, where, and
/// the document as the write left it (null for a delete), timestamps as `--time` asks.
pub fn change_value(change: &Change, out: &Out) -> Value {
    json!({
        "cursor": change.cursor.as_str(),
        "kind": change.kind.as_str(),
        "site": change.key.site(),
        "collection": change.key.collection(),
        "id": change.key.id(),
        "version": change.version,
        "time": out.time_value(change.time),
        "actor": change.actor,
        "document": change.document.as_ref().map(|doc| out.document_value(doc)),
    })
}

/// `docstore watch`: prints each change of `scope` from `start`, one per line with `jsonl`
/// (else pretty on a terminal), flushed as it comes, so a consumer can stop at any line and
/// resume with its cursor.
pub async fn watch(
    store: &Store,
    scope: &FeedScope,
    start: FeedStart,
    until: Until,
    jsonl: bool,
    out: &mut Out,
) -> Result<(), CliError> {
    follow(store, scope, start, until, async |change| {
        let value = change_value(&change, out);
        if jsonl {
            out.line(&value)?;
        } else {
            out.value(&value)?;
        }
        out.flush()
    })
    .await
    .map(drop)
}
