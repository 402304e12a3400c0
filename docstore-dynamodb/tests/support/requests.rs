//! An SDK interceptor counting the requests sent, per operation (resends included), and the
//! items their answers say were read.

use aws_sdk_dynamodb::config::interceptors::{
    BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Requests sent, by operation name (`"GetItem"`, ...), and items read.
#[derive(Clone, Debug, Default)]
pub struct Requests(Arc<Mutex<BTreeMap<String, u32>>>, Arc<Mutex<u64>>);

impl Requests {
    /// The items read since the last call (a `Query`'s or `Scan`'s `ScannedCount`, the items
    /// a `BatchGetItem` or `GetItem` returned), and starts counting again. Reads of the
    /// table's index records are included (a few items every few seconds).
    pub fn take_items(&self) -> u64 {
        std::mem::take(&mut *self.1.lock().unwrap())
    }

    /// The counts since the last call, and starts counting again.
    pub fn take(&self) -> BTreeMap<String, u32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Like [`take`](Self::take), without the reads of the index records and of the layout
    /// record (once per store).
    pub fn take_calls(&self) -> BTreeMap<String, u32> {
        let mut taken = self.take();
        taken.remove(INDEX_RECORDS);
        taken.remove(LAYOUT_RECORD);
        taken
    }
}

/// How [`Requests`] names a store's read of the table's layout record.
pub const LAYOUT_RECORD: &str = "layout record";

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
        if operation == "GetItem" && body.windows(17).any(|w| w == b"__docstore#layout") {
            operation = LAYOUT_RECORD.to_owned();
        }
        *self.0.lock().unwrap().entry(operation).or_default() += 1;
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        if let Some(Ok(output)) = context.output_or_error() {
            *self.1.lock().unwrap() += items_read(output);
        }
        Ok(())
    }
}

/// The items an answer says were read: `ScannedCount`, or the items returned.
fn items_read(output: &aws_smithy_runtime_api::client::interceptors::context::Output) -> u64 {
    use aws_sdk_dynamodb::operation;
    let count = |n: i32| u64::try_from(n).unwrap_or(0);
    if let Some(query) = output.downcast_ref::<operation::query::QueryOutput>() {
        return count(query.scanned_count);
    }
    if let Some(scan) = output.downcast_ref::<operation::scan::ScanOutput>() {
        return count(scan.scanned_count);
    }
    if let Some(batch) = output.downcast_ref::<operation::batch_get_item::BatchGetItemOutput>() {
        return batch
            .responses
            .iter()
            .flat_map(|tables| tables.values())
            .map(|items| items.len() as u64)
            .sum();
    }
    output
        .downcast_ref::<operation::get_item::GetItemOutput>()
        .map_or(0, |get| u64::from(get.item.is_some()))
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
