//! The table's stream as a [`ShardSource`]: DescribeStream for the shards, GetShardIterator
//! and GetRecords for the records, and Streams' errors as docstore errors.

use super::cursor::ShardPosition;
use super::shards::ShardInfo;
use super::walk::{Fetched, Sequenced, ShardSource};
use crate::errors::map_sdk_error;
use crate::store::DynamoStore;
use aws_sdk_dynamodbstreams::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use docstore::{Error, Result};

/// The most records one GetRecords returns (the service's own limit).
const RECORDS_PER_READ: i32 = 1000;

/// How many empty answers a read from a shard's start follows before it takes the shard as
/// read to its end: Streams documents that a new iterator may need several calls to reach
/// the part of a shard that holds records. A read after a sequence number starts right
/// there and takes one empty answer as the end.
const EMPTY_READS_FROM_START: usize = 3;

/// The stream `stream_arn` of `store`'s table.
pub(crate) struct StreamSource<'a> {
    pub(crate) store: &'a DynamoStore,
    pub(crate) stream_arn: &'a str,
}

impl ShardSource for StreamSource<'_> {
    type Record = Record;

    async fn shards(&self) -> Result<Vec<ShardInfo>> {
        let cache = &self.store.feed_cache;
        if let Some(shards) = cache.shards(self.stream_arn) {
            return Ok(shards);
        }
        let shards = self.describe_shards().await?;
        cache.set_shards(self.stream_arn, &shards);
        Ok(shards)
    }

    fn forget_shards(&self) {
        self.store.feed_cache.forget_shards();
    }

    async fn fetch(
        &self,
        shard: &str,
        position: &ShardPosition,
        start: Option<&str>,
    ) -> Result<Fetched<Record>> {
        let mut iterator = self.iterator(shard, position, start).await?;
        let empty_reads = match position {
            ShardPosition::Unread => EMPTY_READS_FROM_START,
            _ => 1,
        };
        for _ in 0..empty_reads {
            let Some(current) = iterator else {
                return Ok(Fetched {
                    records: Vec::new(),
                    closed: true,
                });
            };
            let read = self
                .store
                .streams
                .get_records()
                .shard_iterator(current)
                .limit(RECORDS_PER_READ)
                .send()
                .await
                .map_err(|e| self.error("GetRecords", e))?;
            iterator = read.next_shard_iterator;
            let records = sequenced(read.records.unwrap_or_default());
            if !records.is_empty() {
                return Ok(Fetched {
                    records,
                    closed: iterator.is_none(),
                });
            }
        }
        Ok(Fetched {
            records: Vec::new(),
            closed: iterator.is_none(),
        })
    }
}

impl StreamSource<'_> {
    /// Every shard the stream lists now (DescribeStream, paged).
    async fn describe_shards(&self) -> Result<Vec<ShardInfo>> {
        let mut shards = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let described = self
                .store
                .streams
                .describe_stream()
                .stream_arn(self.stream_arn)
                .set_exclusive_start_shard_id(after.clone())
                .send()
                .await
                .map_err(|e| self.error("DescribeStream", e))?;
            let Some(description) = described.stream_description else {
                return Ok(shards);
            };
            for shard in description.shards.unwrap_or_default() {
                if let Some(id) = shard.shard_id {
                    shards.push(ShardInfo {
                        id,
                        parent: shard.parent_shard_id,
                        start: shard
                            .sequence_number_range
                            .and_then(|range| range.starting_sequence_number),
                    });
                }
            }
            // Emulators ignore the paging and never set this; AWS pages at 100 shards.
            match description.last_evaluated_shard_id {
                Some(last) if Some(&last) != after.as_ref() => after = Some(last),
                _ => return Ok(shards),
            }
        }
    }

    /// An iterator at `position` of `shard` (an unread one at `start`, its first sequence
    /// number, or else at the trim horizon); `None` for a shard with nothing to read (not
    /// expected, but the API allows it).
    async fn iterator(
        &self,
        shard: &str,
        position: &ShardPosition,
        start: Option<&str>,
    ) -> Result<Option<String>> {
        let request = self
            .store
            .streams
            .get_shard_iterator()
            .stream_arn(self.stream_arn)
            .shard_id(shard);
        let request = match position {
            ShardPosition::After(sequence) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(sequence),
            ShardPosition::Unread => match start {
                Some(first) => request
                    .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
                    .sequence_number(first),
                None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            },
            ShardPosition::Finished => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        let answer = request
            .send()
            .await
            .map_err(|e| self.error("GetShardIterator", e))?;
        Ok(answer.shard_iterator)
    }

    /// A failed Streams call as a docstore error: trimmed records and a stream or shard that
    /// is gone mean the reader's position is lost ([`Error::CursorExpired`]).
    fn error<E>(&self, operation: &str, err: SdkError<E, HttpResponse>) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match err.code() {
            Some("TrimmedDataAccessException") => Error::CursorExpired(format!(
                "DynamoDB Streams trimmed the records after this cursor (24-hour retention) \
                 in stream {}",
                self.stream_arn
            )),
            Some("ResourceNotFoundException") => {
                // The stream or a shard is gone: list both again next time.
                self.store.feed_cache.forget();
                Error::CursorExpired(format!(
                    "DynamoDB Streams {operation}: stream {} or one of its shards is gone",
                    self.stream_arn
                ))
            }
            _ => map_sdk_error(&self.store.table, operation, err),
        }
    }
}

/// Records with their sequence numbers (a record without one cannot be positioned after,
/// and Streams always sets it).
fn sequenced(records: Vec<Record>) -> Vec<Sequenced<Record>> {
    records
        .into_iter()
        .filter_map(|record| {
            let sequence = record.dynamodb.as_ref()?.sequence_number.clone()?;
            Some(Sequenced { sequence, record })
        })
        .collect()
}
