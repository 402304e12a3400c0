//! Consistent `BatchGetItem`s: up to [`MAX_KEYS`] items per request, the keys DynamoDB leaves
//! unprocessed (throttling, or an answer past 16 MB) asked for again with jittered backoff.
//! What `get_many` and the feed's delete stamps both read through.

use crate::item::Item;
use crate::send::build_error;
use crate::store::DynamoStore;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use docstore::{Error, Result};

/// `BatchGetItem` takes at most 100 keys.
pub(crate) const MAX_KEYS: usize = 100;

/// How many requests one read sends before giving up on keys still left unprocessed.
const MAX_TRIES: u32 = 50;

impl DynamoStore {
    /// The items at `keys` that exist, in no particular order, each read strongly
    /// consistently (not one snapshot: at slightly different moments). `keys` are at most
    /// [`MAX_KEYS`], each once (DynamoDB refuses a request naming a key twice); `what` names
    /// them in the [`Error::Unavailable`] of a read left unprocessed [`MAX_TRIES`] times.
    pub(crate) async fn batch_get(&self, keys: Vec<Item>, what: &str) -> Result<Vec<Item>> {
        debug_assert!(keys.len() <= MAX_KEYS);
        let mut found = Vec::with_capacity(keys.len());
        let mut pending = keys;
        let mut backoff = self.backoff();
        let mut tries = 0;
        while !pending.is_empty() {
            if tries == MAX_TRIES || (tries > 0 && !backoff.wait().await) {
                return Err(self.left_unprocessed(what));
            }
            tries += 1;
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true)
                .build()
                .map_err(build_error)?;
            let output = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(|e| self.error("BatchGetItem", e))?;
            if let Some(items) = output.responses.and_then(|mut r| r.remove(&self.table)) {
                found.extend(items);
            }
            pending = output
                .unprocessed_keys
                .and_then(|mut u| u.remove(&self.table))
                .map(|k| k.keys)
                .unwrap_or_default();
        }
        Ok(found)
    }

    fn left_unprocessed(&self, what: &str) -> Error {
        Error::Unavailable {
            message: format!(
                "DynamoDB BatchGetItem on `{}` left {what} unprocessed {MAX_TRIES} times \
                 (throttled)",
                self.table
            ),
            source: None,
            write_id: None,
        }
    }
}
