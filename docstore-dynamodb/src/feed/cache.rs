//! What a store remembers between feed reads, so that a page read costs GetShardIterator and
//! GetRecords per shard and not also a DescribeTable and a DescribeStream: the stream's ARN,
//! and the stream's shard list for [`SHARD_LIST_TTL`].
//!
//! Both are hints, refreshed when they may be wrong:
//! - the ARN until a Streams call says the stream is gone (`ResourceNotFoundException`), a
//!   cursor names another stream, or [`DynamoStore::enable_stream`](crate::DynamoStore::enable_stream)
//!   turns a stream on;
//! - the shard list for at most [`SHARD_LIST_TTL`], and at once when a read finds a shard
//!   closed (its children are then listed) or a cursor names a shard the list does not hold
//!   (a newer one, seen by another reader).
//!
//! A stale list only delays new shards: a shard appears when another closes (a split, or
//! DynamoDB's rollover about every 4 hours), and a closing shard's reader relists at once.

use super::shards::ShardInfo;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a listed set of shards is reused. Short against a shard's life (hours), long
/// against a poll (`feed_poll_ms`, 1 s by default): a watcher describes the stream about
/// once per 10 polls instead of every poll.
pub(crate) const SHARD_LIST_TTL: Duration = Duration::from_secs(10);

/// A store's feed cache (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct FeedCache {
    arn: Mutex<Option<String>>,
    shards: Mutex<Option<Listed>>,
}

/// A stream's shards as listed at `at`.
#[derive(Debug)]
struct Listed {
    stream_arn: String,
    shards: Vec<ShardInfo>,
    at: Instant,
}

impl FeedCache {
    /// The stream ARN last seen.
    pub(crate) fn arn(&self) -> Option<String> {
        self.arn.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Remembers the stream ARN.
    pub(crate) fn set_arn(&self, arn: &str) {
        *self.arn.lock().unwrap_or_else(|e| e.into_inner()) = Some(arn.to_owned());
    }

    /// Forgets the ARN and the shards (the stream may be another one now).
    pub(crate) fn forget(&self) {
        *self.arn.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.forget_shards();
    }

    /// The shards of `stream_arn` when listed less than [`SHARD_LIST_TTL`] ago.
    pub(crate) fn shards(&self, stream_arn: &str) -> Option<Vec<ShardInfo>> {
        let listed = self.shards.lock().unwrap_or_else(|e| e.into_inner());
        listed
            .as_ref()
            .filter(|l| l.stream_arn == stream_arn && l.at.elapsed() < SHARD_LIST_TTL)
            .map(|l| l.shards.clone())
    }

    /// Remembers the shards of `stream_arn`, listed now.
    pub(crate) fn set_shards(&self, stream_arn: &str, shards: &[ShardInfo]) {
        *self.shards.lock().unwrap_or_else(|e| e.into_inner()) = Some(Listed {
            stream_arn: stream_arn.to_owned(),
            shards: shards.to_vec(),
            at: Instant::now(),
        });
    }

    /// Forgets the shards: the next read lists them again.
    pub(crate) fn forget_shards(&self) {
        *self.shards.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}
