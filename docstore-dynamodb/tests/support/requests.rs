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

    /// Like [`take`](Self::take), without the reads of the index records.
    pub fn take_calls(&self) -> BTreeMap<String, u32> {
        let mut taken = self.take();
        taken.remove(INDEX_RECORDS);
        taken
    }
}

impl Intercept for Requests {
    fn name(&self) -> &'static str {
        "request counter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        let mut operation = cfg
            .load::<Metadata>()
            .map_or("unknown", |m| m.name())
            .to_owned();
        // The store's read of the table's index records (at most every few seconds) is
        // counted apart from the calls' own requests.
        let body = context.request().body().bytes().unwrap_or_default();
        if operation == "Query" && body.windows(18).any(|w| w == b"__docstore#indexes") {
            operation = INDEX_RECORDS.to_owned();
        }
        *self.0.lock().unwrap().entry(operation).or_default() += 1;
        Ok(())
    }
}

/// The name under which reads of the table's index records are counted.
pub const INDEX_RECORDS: &str = "Query (index records)";

/// `[("GetItem", 1), ...]` as the map `take` returns.
pub fn counts(expected: &[(&str, u32)]) -> BTreeMap<String, u32> {
    expected
        .iter()
        .map(|(op, n)| ((*op).to_owned(), *n))
        .collect()
}
