//! DynamoDB's time to live on the table's `expires` attribute: what removes delete records
//! and stamps once their window is over, and expired documents no sweep removed
//! ([`crate::expiring`]). [`DynamoStore::create_table`] enables it; [`DynamoStore::enable_ttl`]
//! (`docstore ttl enable`) does for a table made before.

use crate::deleted::EXPIRES;
use crate::store::DynamoStore;
use aws_sdk_dynamodb::types::{TimeToLiveSpecification, TimeToLiveStatus};
use docstore::{Error, Result};

/// What [`DynamoStore::enable_ttl`] found or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TtlEnabled {
    /// `true` when this call enabled time to live; `false` when it was already on (or being
    /// turned on) for `expires`, and nothing was changed.
    pub newly_enabled: bool,
}

impl DynamoStore {
    /// Enables DynamoDB's time to live on the attribute `expires`; idempotent. Time to live
    /// on another attribute is refused with [`Error::InvalidArgument`] (a table has at most
    /// one: switching is the table owner's decision). Without it, delete records and stamps
    /// stay after their window (reads ignore them) and an expired document that no sweep
    /// removed stays until one does.
    pub async fn enable_ttl(&self) -> Result<TtlEnabled> {
        let described = self
            .client
            .describe_time_to_live()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| self.error("DescribeTimeToLive", e))?;
        let current = described.time_to_live_description();
        let status = current.and_then(|d| d.time_to_live_status());
        let attribute = current.and_then(|d| d.attribute_name());
        let on = matches!(
            status,
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        );
        match (on, attribute) {
            (true, Some(EXPIRES)) => {
                return Ok(TtlEnabled {
                    newly_enabled: false,
                });
            }
            (true, other) => {
                return Err(Error::invalid(format!(
                    "table `{}` has time to live on attribute {:?}; docstore needs it on \
                     `{EXPIRES}`: disable it first if that is what you want",
                    self.table,
                    other.unwrap_or_default()
                )));
            }
            (false, _) => {}
        }
        self.update_ttl().await?;
        Ok(TtlEnabled {
            newly_enabled: true,
        })
    }

    /// Turns time to live on for `expires`.
    pub(crate) async fn update_ttl(&self) -> Result<()> {
        let spec = TimeToLiveSpecification::builder()
            .attribute_name(EXPIRES)
            .enabled(true)
            .build()
            .expect("name and flag are set");
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(spec)
            .send()
            .await
            .map_err(|e| self.error("UpdateTimeToLive", e))?;
        Ok(())
    }
}
