//! Counting the attempts the SDK made for one request, to tell a genuine condition failure
//! from one caused by our own earlier attempt whose answer was lost.

use aws_sdk_dynamodb::config::interceptors::{
    BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use docstore::BoxError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// An interceptor for one request that counts how often the SDK sent it and remembers
/// whether an attempt's answer was lost.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attempts(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    sent: AtomicU32,
    lost: AtomicBool,
}

impl Attempts {
    /// How many times the request was sent so far.
    pub(crate) fn sent(&self) -> u32 {
        self.0.sent.load(Ordering::SeqCst)
    }

    /// Whether an earlier attempt may have reached the table and lost its answer.
    pub(crate) fn resent(&self) -> bool {
        self.sent() > 1
    }

    /// Whether an attempt ended without an answer from DynamoDB (a timeout, a dropped
    /// connection) or with a 5xx, which DynamoDB documents as "may have succeeded": that
    /// attempt may have been applied, whatever the request's last answer says. An attempt
    /// answered with a 4xx (throttling, a conflict, a failed condition) was not applied.
    pub(crate) fn may_have_applied(&self) -> bool {
        self.0.lost.load(Ordering::SeqCst)
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
        self.0.sent.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let answered = context
            .response()
            .is_some_and(|response| response.status().as_u16() < 500);
        if !answered {
            self.0.lost.store(true, Ordering::SeqCst);
        }
        Ok(())
    }
}
