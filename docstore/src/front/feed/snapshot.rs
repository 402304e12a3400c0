//! [`FeedStart::Snapshot`]: every document of a scope as it stands, then every change after
//! them, exactly once each, under one cursor (`docs/contract.md`, "Change feed", "Starting
//! from a snapshot") — read over any driver's feed and queries.
//!
//! A snapshot stands at a [`FeedPosition`]: `L`, the driver's feed position, and the mark
//! `B`, the last key (site, collection, id) whose document the snapshot has passed. What the
//! consumer holds then is exact for every key up to `B` as of `L`, and nothing for the keys
//! after `B`. One page moves both forward:
//!
//! 1. **Catch up**: the feed after `L`, handing out the changes of keys up to `B` (a change
//!    of a later key shows in a document read later).
//! 2. **Chunk**: the next documents after `B` in key order (an id-order query per
//!    collection), up to the page's room; its last key is the new mark `B'`.
//! 3. **Window**: the feed after `L` once more, up to its end as it stands after the chunk
//!    was read (`caught_up`), keeping the changes of keys up to `B'`. A document of the chunk
//!    whose key has a change in the window may show any state between `L` and the window's
//!    end, so it is not handed out: its changes are. A document without one is the state it
//!    had through the window.
//! 4. **Hand out** the chunk's other documents ([`ChangeKind::Existing`](crate::ChangeKind),
//!    cursor `(L, its key)`), then the window's changes in feed order (cursor `(their
//!    position, B')`).
//!
//! Every cursor says exactly what was handed out before it, so a consumer that saves any of
//! them and starts again after it goes on with nothing lost or repeated. When the chunk
//! reaches the end of the scope, the mark is [`SnapshotMark::Done`] and the cursors are the
//! feed's own (bound to the scope).
//!
//! The window's claim that a document read before its end shows no change after `L` but the
//! ones in the window holds when the feed shows every commit by the time a read finds it
//! caught up: memory and SQLite; on DynamoDB, a stream record that shows up later than the
//! window's end can repeat a version the snapshot handed out (`docs/contract.md`).

use super::{Store, following};
use crate::Result;
use crate::feed::{
    Change, ChangeCursor, ChangePage, FeedPosition, FeedScope, FeedStart, MAX_CHANGE_PAGE,
    SnapshotMark,
};
use crate::key::Key;
use crate::query::Query;
use crate::{Data, Document};
use std::collections::HashSet;

/// The most feed reads the catch-up makes before it reads the next chunk anyway (the window
/// reads what it left).
const CATCH_UP_READS: usize = 16;

/// The most feed reads (of [`MAX_CHANGE_PAGE`] changes) the window makes to reach the
/// feed's end; writers faster than that leave the page to the catch-up, and the chunk is read
/// again next time.
const WINDOW_READS: usize = 100;

/// A page of `scope`'s snapshot from `position` (its mark not [`SnapshotMark::Done`]).
pub(super) async fn page(
    store: &Store,
    scope: &FeedScope,
    position: FeedPosition,
    limit: usize,
) -> Result<ChangePage> {
    let mut page = Page {
        scope,
        limit,
        changes: Vec::new(),
    };
    let FeedPosition {
        driver: mut feed,
        snapshot: mark,
    } = position;
    // 1. Catch up.
    for _ in 0..CATCH_UP_READS {
        let read = store
            .driver_changes(scope, &FeedStart::After(feed.clone()), page.room())
            .await?;
        for change in read.changes {
            if mark.covers(&change.key) {
                page.hand_out(change, &mark);
            }
        }
        feed = read.next;
        if page.is_full() {
            return Ok(page.cut(&feed, &mark));
        }
        if read.caught_up {
            break;
        }
    }
    // 2. Chunk.
    let chunk = documents_after(store, scope, &mark, page.room()).await?;
    // 3. Window.
    let Some(window) = window(store, scope, &feed, &chunk.mark).await? else {
        return Ok(page.cut(&feed, &mark));
    };
    // 4. Hand out.
    let changed: HashSet<&Key> = window.changes.iter().map(|c| &c.key).collect();
    let mut last = mark.clone();
    for (key, document) in chunk.documents {
        if changed.contains(&key) {
            continue;
        }
        last = SnapshotMark::After(key.clone());
        let cursor = at(scope, &feed, &last);
        page.changes.push(Change::existing(key, document, cursor));
    }
    if page.is_full() {
        // Every document fitted (the chunk took the room); a window change may not have.
        return Ok(page.cut(&feed, &last));
    }
    for change in window.changes {
        page.hand_out(change, &chunk.mark);
        if page.is_full() {
            let next = page.changes.last().map(|c| c.cursor.clone());
            return Ok(ChangePage {
                changes: page.changes,
                next: next.expect("a full page holds a change"),
                caught_up: false,
            });
        }
    }
    let caught_up = chunk.mark == SnapshotMark::Done;
    Ok(ChangePage {
        caught_up,
        ..page.cut(&window.end, &chunk.mark)
    })
}

/// The changes a page hands out so far.
struct Page<'a> {
    scope: &'a FeedScope,
    limit: usize,
    changes: Vec<Change>,
}

impl Page<'_> {
    /// How many more changes fit (at least 1 until [`is_full`](Self::is_full)).
    fn room(&self) -> usize {
        self.limit - self.changes.len()
    }

    fn is_full(&self) -> bool {
        self.changes.len() >= self.limit
    }

    /// Hands out a change of the driver's feed, its cursor at its position with `mark`.
    fn hand_out(&mut self, mut change: Change, mark: &SnapshotMark) {
        change.cursor = at(self.scope, &change.cursor, mark);
        self.changes.push(change);
    }

    /// The page so far, going on at `feed` with `mark` (not caught up: the snapshot goes on,
    /// or the feed may hold more).
    fn cut(self, feed: &ChangeCursor, mark: &SnapshotMark) -> ChangePage {
        let next = at(self.scope, feed, mark);
        ChangePage {
            changes: self.changes,
            next,
            caught_up: false,
        }
    }
}

/// The cursor of `scope`'s feed at the driver's `feed` position with the snapshot at `mark`.
fn at(scope: &FeedScope, feed: &ChangeCursor, mark: &SnapshotMark) -> ChangeCursor {
    match mark {
        SnapshotMark::Done => following(scope, feed),
        _ => FeedPosition {
            driver: feed.clone(),
            snapshot: mark.clone(),
        }
        .encode(scope),
    }
}

/// The documents of a chunk, in key order, and the mark after them.
struct Chunk {
    documents: Vec<(Key, Document)>,
    /// The last key read, or [`SnapshotMark::Done`] when the scope has no more documents.
    mark: SnapshotMark,
}

/// Up to `room` documents of `scope` after `mark`, in key order (sites, collections and ids
/// by their names' bytes, as the drivers order ids).
async fn documents_after(
    store: &Store,
    scope: &FeedScope,
    mark: &SnapshotMark,
    room: usize,
) -> Result<Chunk> {
    let from = match mark {
        SnapshotMark::After(key) => Some(key),
        _ => None,
    };
    let mut documents = Vec::new();
    for site in sites_from(store, scope, from).await? {
        for collection in collections_from(store, scope, &site, from).await? {
            let after = from
                .filter(|key| key.site() == site && key.collection() == collection)
                .map(Key::id);
            let wanted = room - documents.len();
            let (read, more) = read_ids_after(store, &site, &collection, after, wanted).await?;
            documents.extend(read);
            if more || documents.len() == room {
                let last = documents
                    .last()
                    .map(|(key, _): &(Key, Document)| key.clone());
                let mark = last.map_or(SnapshotMark::Done, SnapshotMark::After);
                return Ok(Chunk { documents, mark });
            }
        }
    }
    Ok(Chunk {
        documents,
        mark: SnapshotMark::Done,
    })
}

/// The sites to read, from the mark's on, by name.
async fn sites_from(store: &Store, scope: &FeedScope, from: Option<&Key>) -> Result<Vec<String>> {
    let mut sites = match scope.site_name() {
        Some(site) => vec![site.to_owned()],
        None => store.sites().await?,
    };
    sites.sort();
    sites.retain(|site| from.is_none_or(|key| site.as_str() >= key.site()));
    Ok(sites)
}

/// The collections of `site` to read, from the mark's on, by name.
async fn collections_from(
    store: &Store,
    scope: &FeedScope,
    site: &str,
    from: Option<&Key>,
) -> Result<Vec<String>> {
    let mut collections = match scope.collection_name() {
        Some(collection) => vec![collection.to_owned()],
        None => store
            .collections(site)
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect(),
    };
    collections.sort();
    if let Some(key) = from.filter(|key| key.site() == site) {
        collections.retain(|collection| collection.as_str() >= key.collection());
    }
    Ok(collections)
}

/// Up to `limit` documents of a collection after id `after`, in id order, and whether more
/// may follow.
async fn read_ids_after(
    store: &Store,
    site: &str,
    collection: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<(Key, Document)>, bool)> {
    let first_page = Query::new().limit(limit).consistent(true);
    let query = match after {
        None => first_page,
        Some(id) => {
            let compiled = first_page.compile_for(site, collection)?;
            let cursor = compiled.cursor_after(&Document::first(id, Data::new(), "", 0));
            first_page.after(Some(cursor))
        }
    };
    let page = store.query(site, collection, &query).await?;
    let more = page.next.is_some() && !page.documents.is_empty();
    let documents = page
        .documents
        .into_iter()
        .map(|doc| Ok((Key::new(site, collection, doc.id.clone())?, doc)))
        .collect::<Result<Vec<_>>>()?;
    Ok((documents, more))
}

/// The changes of a window: every change after a position up to the feed's end as it stood
/// after the chunk was read, of the keys up to the chunk's mark.
struct Window {
    changes: Vec<Change>,
    end: ChangeCursor,
}

/// Reads the window after `feed`; `None` when the feed did not reach its end in
/// [`WINDOW_READS`] reads.
async fn window(
    store: &Store,
    scope: &FeedScope,
    feed: &ChangeCursor,
    mark: &SnapshotMark,
) -> Result<Option<Window>> {
    let mut window = Window {
        changes: Vec::new(),
        end: feed.clone(),
    };
    for _ in 0..WINDOW_READS {
        let start = FeedStart::After(window.end.clone());
        let read = store.driver_changes(scope, &start, MAX_CHANGE_PAGE).await?;
        window
            .changes
            .extend(read.changes.into_iter().filter(|c| mark.covers(&c.key)));
        window.end = read.next;
        if read.caught_up {
            return Ok(Some(window));
        }
    }
    Ok(None)
}
