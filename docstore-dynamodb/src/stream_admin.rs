//! The table's DynamoDB stream, which the change feed reads: the specification
//! [`DynamoStore::create_table`] creates tables with, and [`DynamoStore::enable_stream`] for
//! a table made without one (`docstore streams enable`).

use crate::store::DynamoStore;
use aws_sdk_dynamodb::types::{StreamSpecification, StreamViewType};
use docstore::{Error, Result};

/// What [`DynamoStore::enable_stream`] found or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEnabled {
    /// The stream's ARN (a new one each time a stream is enabled on the table).
    pub stream_arn: String,
    /// `true` when this call enabled the stream; `false` when it was already on, with new
    /// and old images (then nothing was changed).
    pub newly_enabled: bool,
}

/// The stream the feed needs: new *and* old images. The new image is the document a write
/// left; the old image is what a delete removed (the version it reports, and the revision
/// whose delete stamp names the deleting actor — see `stamps`) and what tells a real write
/// from a rewrite of internal attributes only (an index build), which moves neither the
/// version nor the write identity. With `NEW_IMAGE` a REMOVE record holds only the key.
pub(crate) fn stream_specification() -> StreamSpecification {
    StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(StreamViewType::NewAndOldImages)
        .build()
        .expect("the flag is set")
}

impl DynamoStore {
    /// Enables the table's DynamoDB stream (new and old images), which the change feed
    /// reads; idempotent: a table whose stream is already on is left as it is. Tables made
    /// by [`create_table`](Self::create_table) have it from the start.
    ///
    /// The feed of a table whose stream was enabled late starts at that moment: writes made
    /// before it are in no stream, and no feed read will ever show them (copy the table
    /// first if a consumer needs them). A stream that is on with another view type
    /// (`KEYS_ONLY`, `NEW_IMAGE`, `OLD_IMAGE`) is refused with
    /// [`Error::InvalidArgument`]: switching means disabling it (its records go) and enabling
    /// again, a new stream — a decision for the table's owner, not for this call.
    ///
    /// ```no_run
    /// # async fn demo(store: &docstore_dynamodb::DynamoStore) -> docstore::Result<()> {
    /// let enabled = store.enable_stream().await?;
    /// println!("stream {} (new: {})", enabled.stream_arn, enabled.newly_enabled);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn enable_stream(&self) -> Result<StreamEnabled> {
        let described = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| self.error("DescribeTable", e))?;
        let table = described.table();
        let spec = table.and_then(|t| t.stream_specification());
        if let Some(spec) = spec.filter(|spec| spec.stream_enabled()) {
            if spec.stream_view_type() != Some(&StreamViewType::NewAndOldImages) {
                return Err(Error::invalid(format!(
                    "the stream of DynamoDB table `{}` is on with view type {:?}; the change \
                     feed needs NEW_AND_OLD_IMAGES: disable the stream and run this again",
                    self.table,
                    spec.stream_view_type()
                )));
            }
            let arn = table.and_then(|t| t.latest_stream_arn());
            return Ok(StreamEnabled {
                stream_arn: arn.unwrap_or_default().to_owned(),
                newly_enabled: false,
            });
        }
        let updated = self
            .client
            .update_table()
            .table_name(&self.table)
            .stream_specification(stream_specification())
            .send()
            .await
            .map_err(|e| self.error("UpdateTable", e))?;
        self.wait_until_active(None).await?;
        let arn = updated
            .table_description()
            .and_then(|t| t.latest_stream_arn());
        let stream_arn = match arn {
            Some(arn) => arn.to_owned(),
            None => self.stream_arn().await?,
        };
        // A new stream: the feed reads it from now on.
        self.feed_cache.forget();
        Ok(StreamEnabled {
            stream_arn,
            newly_enabled: true,
        })
    }

    /// The ARN of the table's stream; [`Error::Backend`] saying how to enable it when the
    /// table has none.
    pub(crate) async fn stream_arn(&self) -> Result<String> {
        let described = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| self.error("DescribeTable", e))?;
        let table = described.table();
        let enabled = table
            .and_then(|t| t.stream_specification())
            .is_some_and(|spec| spec.stream_enabled());
        match table.and_then(|t| t.latest_stream_arn()) {
            Some(arn) if enabled => Ok(arn.to_owned()),
            _ => Err(Error::Backend {
                message: format!(
                    "DynamoDB table `{}` has no stream, so it has no change feed: enable it \
                     with `docstore streams enable` (DynamoStore::enable_stream); writes made \
                     before that are not in the feed",
                    self.table
                ),
                source: None,
            }),
        }
    }
}
