//! `write_all` and `get_many` on DynamoDB (placeholder until the backend implements them with
//! `TransactWriteItems` and `BatchGetItem`).

use crate::store::DynamoStore;
use docstore::{Document, Error, Key, Result, Write, WriteOutcome};

impl DynamoStore {
    /// Applies a batch atomically (not yet implemented on DynamoDB).
    pub(crate) async fn write_all_items(
        &self,
        _writes: &[Write],
        _actor: &str,
    ) -> Result<Vec<WriteOutcome>> {
        Err(Error::Backend {
            message: "write_all: not yet implemented on DynamoDB".into(),
            source: None,
        })
    }

    /// Reads several documents (not yet implemented on DynamoDB).
    pub(crate) async fn get_many_items(&self, _keys: &[Key]) -> Result<Vec<Option<Document>>> {
        Err(Error::Backend {
            message: "get_many: not yet implemented on DynamoDB".into(),
            source: None,
        })
    }
}
