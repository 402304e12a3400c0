//! Where a reader of the stream stands — a [`Frontier`]: the stream's ARN and, for every
//! shard it knew of, how far it read — and its cursor text.
//!
//! A cursor is `dynamodb:` and the URL-safe base64 (no padding) of
//! `1\n<stream arn>\n<shard id> <position>\n…`, a position being `-` (nothing read yet), `*`
//! (read to its end) or the sequence number of the last record read. Shards created after
//! the cursor are not in it: they are read from their start. The text depends only on the
//! position, so the cursor of a change is the same whenever the change is read.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use docstore::feed::ChangeCursor;
use docstore::{Error, Result};
use std::collections::BTreeMap;

/// The driver tag of DynamoDB cursors.
pub(crate) const DRIVER: &str = "dynamodb";

/// The version of the encoding, first in the text.
const VERSION: &str = "1";

/// How far a reader read one shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ShardPosition {
    /// Nothing read yet: the shard is read from its oldest record.
    Unread,
    /// Read up to and including the record with this sequence number.
    After(String),
    /// Read to its end: the shard is closed (split, or the stream disabled).
    Finished,
}

/// A reader's position in one stream: a position per shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Frontier {
    /// The stream read: a cursor of another stream (another table, or the stream enabled
    /// again) cannot be continued here.
    pub(crate) stream_arn: String,
    /// Shard id → how far it was read. Shards not here are read from their start.
    pub(crate) shards: BTreeMap<String, ShardPosition>,
}

impl Frontier {
    /// The start of `stream_arn`: every shard from its oldest record.
    pub(crate) fn oldest(stream_arn: &str) -> Self {
        Frontier {
            stream_arn: stream_arn.to_owned(),
            shards: BTreeMap::new(),
        }
    }

    /// How far `shard` was read.
    pub(crate) fn position(&self, shard: &str) -> &ShardPosition {
        self.shards.get(shard).unwrap_or(&ShardPosition::Unread)
    }

    /// Whether `shard` was read to its end.
    pub(crate) fn finished(&self, shard: &str) -> bool {
        self.position(shard) == &ShardPosition::Finished
    }

    /// The cursor of this frontier.
    pub(crate) fn cursor(&self) -> ChangeCursor {
        let mut text = format!("{VERSION}\n{}\n", self.stream_arn);
        for (shard, position) in &self.shards {
            let position = match position {
                ShardPosition::Unread => "-",
                ShardPosition::After(sequence) => sequence,
                ShardPosition::Finished => "*",
            };
            text.push_str(&format!("{shard} {position}\n"));
        }
        ChangeCursor::new(DRIVER, URL_SAFE_NO_PAD.encode(text))
    }

    /// Reads a cursor [`cursor`](Self::cursor) wrote: [`Error::InvalidArgument`] for one of
    /// another driver or text that is not one.
    pub(crate) fn parse(cursor: &ChangeCursor) -> Result<Self> {
        let malformed = || Error::invalid("change cursor: not a cursor a DynamoDB store wrote");
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor.position_for(DRIVER)?)
            .map_err(|_| malformed())?;
        let text = String::from_utf8(bytes).map_err(|_| malformed())?;
        // Every line ends with `\n` alone, and no part holds a control character: anything
        // else would read as a position whose cursor text is not this text.
        let body = text.strip_suffix('\n').ok_or_else(malformed)?;
        if body.chars().any(|c| c.is_control() && c != '\n') {
            return Err(malformed());
        }
        let mut lines = body.split('\n');
        if lines.next() != Some(VERSION) {
            return Err(malformed());
        }
        let stream_arn = lines.next().filter(|arn| !arn.is_empty());
        let mut frontier = Frontier::oldest(stream_arn.ok_or_else(malformed)?);
        for line in lines {
            let (shard, position) = line.split_once(' ').ok_or_else(malformed)?;
            let position = match position {
                "-" => ShardPosition::Unread,
                "*" => ShardPosition::Finished,
                digits if is_sequence_number(digits) => ShardPosition::After(digits.to_owned()),
                _ => return Err(malformed()),
            };
            if shard.is_empty() || frontier.shards.insert(shard.to_owned(), position).is_some() {
                return Err(malformed());
            }
        }
        Ok(frontier)
    }
}

/// DynamoDB Streams sequence numbers: 21 to 40 decimal digits.
fn is_sequence_number(text: &str) -> bool {
    (21..=40).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let mut frontier = Frontier::oldest("arn:aws:dynamodb:r:1:table/t/stream/x");
        frontier.shards.insert("a".into(), ShardPosition::Finished);
        frontier.shards.insert("b".into(), ShardPosition::Unread);
        let sequence = "1".repeat(21);
        frontier
            .shards
            .insert("c".into(), ShardPosition::After(sequence));
        let cursor = frontier.cursor();
        let text = cursor.to_string();
        assert!(text.starts_with("dynamodb:"), "{text}");
        let parsed = ChangeCursor::parse(&text).unwrap();
        assert_eq!(Frontier::parse(&parsed).unwrap(), frontier);
    }

    /// The text is split at `\n` alone: a carriage return is no line end, and no stream ARN
    /// or shard id holds one, so a cursor with one is refused instead of read as another
    /// position (whose cursor text would differ).
    #[test]
    fn carriage_returns_are_refused() {
        for text in [
            "1\narn*\r",
            "1\narn\r\n",
            "1\narn\nshard -\r\n",
            "1\na\u{1}rn\n",
        ] {
            let cursor = ChangeCursor::new(DRIVER, URL_SAFE_NO_PAD.encode(text));
            let err = Frontier::parse(&cursor).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{text:?}: {err}");
        }
    }

    #[test]
    fn garbage_is_invalid() {
        let garbage = [
            "dynamodb:garbage!!",
            "dynamodb:aGVsbG8",         // "hello"
            "dynamodb:Mgp4Cg",          // version 2
            "dynamodb:MQphcm4KYyAxMgo", // "1\narn\nc 12\n": too short a number
            "memory:1.1",
        ];
        for text in garbage {
            let cursor = ChangeCursor::parse(text).unwrap();
            let err = Frontier::parse(&cursor).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{text}: {err}");
        }
    }
}
