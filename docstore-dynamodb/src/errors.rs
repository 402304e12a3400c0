//! SDK failures as [`docstore::Error`]s.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use docstore::Error;

/// Error codes DynamoDB uses for throttling: the request was refused, not applied.
const THROTTLING: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
];

/// How a failed request relates to the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Refused before it was applied (throttling): sending it again is safe.
    NotApplied,
    /// Perhaps applied (5xx, timeout, lost connection): the answer was lost.
    Unknown,
    /// Refused for good (validation, missing table, ...).
    Permanent,
}

/// What kind of failure `err` is.
pub(crate) fn classify<E>(err: &SdkError<E, HttpResponse>) -> Failure
where
    E: ProvideErrorMetadata,
{
    match err {
        SdkError::ConstructionFailure(_) => Failure::Permanent,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Failure::Unknown
        }
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            if err.code().is_some_and(|code| THROTTLING.contains(&code)) {
                Failure::NotApplied
            } else if status >= 500 {
                Failure::Unknown
            } else {
                Failure::Permanent
            }
        }
        _ => Failure::Unknown,
    }
}

/// Maps an SDK failure of `operation` on `table` (after the SDK's own retries) to a docstore
/// error: throttling, timeouts, I/O and 5xx are [`Error::Unavailable`]; a missing table is
/// [`Error::Backend`] naming it; anything else is [`Error::Backend`].
pub(crate) fn map_sdk_error<E>(
    table: &str,
    operation: &str,
    err: SdkError<E, HttpResponse>,
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let code = err.code().unwrap_or("").to_owned();
    let detail = err.message().unwrap_or("").to_owned();
    if code == "ResourceNotFoundException" {
        return Error::backend(
            format!(
                "DynamoDB table `{table}` does not exist (or is not active) at this endpoint and \
                 region; create it, e.g. with DynamoStore::create_table"
            ),
            err,
        );
    }
    if code == "ValidationException" && detail.contains("size") {
        return Error::invalid(format!("DynamoDB refused the item: {detail}"));
    }
    let message = if code.is_empty() {
        format!("DynamoDB {operation} on `{table}` failed")
    } else {
        format!("DynamoDB {operation} on `{table}` failed: {code}: {detail}")
    };
    match classify(&err) {
        Failure::NotApplied | Failure::Unknown => Error::unavailable(message, err),
        Failure::Permanent => Error::backend(message, err),
    }
}
