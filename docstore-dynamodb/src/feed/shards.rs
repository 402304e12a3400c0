//! Which shards to read, in which order: pure functions over the stream's shard list and a
//! [`Frontier`], so the split logic is tested without a service (both emulators keep one
//! shard per table, which never splits).
//!
//! DynamoDB Streams splits a shard into children; a record of an item is in the child only
//! after every record of that item in the parent, so a parent is read to its end before its
//! children (a child whose parent is no longer listed has aged out of the stream and is read
//! at once). Shards that are ready together hold different items and are read in shard id
//! order.

use super::cursor::{Frontier, ShardPosition};
use docstore::{Error, Result};

/// A shard as the stream lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ShardInfo {
    /// The shard's id.
    pub(crate) id: String,
    /// The shard it was split from, when the stream says.
    pub(crate) parent: Option<String>,
    /// The sequence number of its first record (`StartingSequenceNumber`), when the stream
    /// says: a cursor's reader starts a shard it has not read here, so that records trimmed
    /// since are an expired cursor and not a silent gap.
    pub(crate) start: Option<String>,
}

/// [`Error::CursorExpired`] when `frontier` cannot be continued on `stream_arn`: another
/// stream, or a shard it had not finished that the stream no longer lists (its records were
/// trimmed after 24 hours). A position in a listed shard whose records were trimmed is
/// refused by Streams itself (`TrimmedDataAccessException`).
pub(crate) fn check_retained(
    listed: &[ShardInfo],
    frontier: &Frontier,
    stream_arn: &str,
) -> Result<()> {
    if frontier.stream_arn != stream_arn {
        return Err(Error::CursorExpired(format!(
            "the cursor is of stream {}, and the table's stream is now {stream_arn} (another \
             table, or the stream was enabled again): read from the start or now",
            frontier.stream_arn
        )));
    }
    let gone = frontier.shards.iter().find(|(shard, position)| {
        **position != ShardPosition::Finished && !listed.iter().any(|s| &s.id == *shard)
    });
    match gone {
        Some((shard, _)) => Err(Error::CursorExpired(format!(
            "shard {shard} of the cursor is no longer in the stream (trimmed after 24 hours)"
        ))),
        None => Ok(()),
    }
}

/// Drops finished shards the stream no longer lists: they cannot come back, and cursors
/// stay small.
pub(crate) fn prune(listed: &[ShardInfo], frontier: &mut Frontier) {
    frontier
        .shards
        .retain(|shard, _| listed.iter().any(|s| &s.id == shard));
}

/// The shards to read now, in order: not finished, and their parent finished or no longer
/// listed.
pub(crate) fn ready(listed: &[ShardInfo], frontier: &Frontier) -> Vec<String> {
    let mut ready: Vec<String> = listed
        .iter()
        .filter(|shard| !frontier.finished(&shard.id))
        .filter(|shard| {
            shard.parent.as_deref().is_none_or(|parent| {
                frontier.finished(parent) || !listed.iter().any(|s| s.id == parent)
            })
        })
        .map(|shard| shard.id.clone())
        .collect();
    ready.sort();
    ready
}

/// Whether `shard` has a listed child: then it is closed (a split closes its parent).
pub(crate) fn has_child(listed: &[ShardInfo], shard: &str) -> bool {
    listed.iter().any(|s| s.parent.as_deref() == Some(shard))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> ShardInfo {
        ShardInfo {
            id: id.into(),
            parent: parent.map(Into::into),
            start: None,
        }
    }

    #[test]
    fn parents_come_before_children() {
        let listed = [
            shard("b", Some("a")),
            shard("c", Some("a")),
            shard("a", None),
            shard("d", Some("gone")),
        ];
        let mut frontier = Frontier::oldest("s");
        assert_eq!(ready(&listed, &frontier), ["a", "d"]);
        frontier.shards.insert("a".into(), ShardPosition::Finished);
        assert_eq!(ready(&listed, &frontier), ["b", "c", "d"]);
        assert!(has_child(&listed, "a") && !has_child(&listed, "b"));
    }

    #[test]
    fn unfinished_shards_that_are_gone_expire_the_cursor() {
        let listed = [shard("b", Some("a"))];
        let mut frontier = Frontier::oldest("s");
        frontier.shards.insert("a".into(), ShardPosition::Finished);
        check_retained(&listed, &frontier, "s").unwrap();
        prune(&listed, &mut frontier);
        assert!(frontier.shards.is_empty());
        frontier
            .shards
            .insert("x".into(), ShardPosition::After("1".repeat(21)));
        let expired = |r: Result<()>| matches!(r, Err(Error::CursorExpired(_)));
        assert!(expired(check_retained(&listed, &frontier, "s")));
        let frontier = Frontier::oldest("s");
        assert!(expired(check_retained(&listed, &frontier, "other")));
    }
}
