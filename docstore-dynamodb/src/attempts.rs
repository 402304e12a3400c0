//! Counting the attempts the SDK made for one request, to tell a genuine condition failure
//! from one caused by our own earlier attempt whose answer was lost.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use docstore::BoxError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// An interceptor for one request that counts how often the SDK sent it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attempts(Arc<AtomicU32>);

impl Attempts {
    /// How many times the request was sent so far.
    pub(crate) fn sent(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }

    /// Whether an earlier attempt may have reached the table and lost its answer.
    pub(crate) fn resent(&self) -> bool {
        self.sent() > 1
    }
}

impl Intercept for Attempts {
    fn name(&self) -> &'static str {
        "docstore-dynamodb attempt counter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}
