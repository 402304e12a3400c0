//! An SDK interceptor counting the requests sent, per operation (resends included).

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Requests sent, by operation name (`"GetItem"`, ...).
#[derive(Clone, Debug, Default)]
pub struct Requests(Arc<Mutex<BTreeMap<String, u32>>>);

impl Requests {
    /// The counts since the last call, and starts counting again.
    pub fn take(&self) -> BTreeMap<String, u32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Intercept for Requests {
    fn name(&self) -> &'static str {
        "request counter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        let operation = cfg
            .load::<Metadata>()
            .map_or("unknown", |m| m.name())
            .to_owned();
        *self.0.lock().unwrap().entry(operation).or_default() += 1;
        Ok(())
    }
}

/// `[("GetItem", 1), ...]` as the map `take` returns.
pub fn counts(expected: &[(&str, u32)]) -> BTreeMap<String, u32> {
    expected
        .iter()
        .map(|(op, n)| ((*op).to_owned(), *n))
        .collect()
}
