//! The store's calls as write requests: the front end builds the one [`Request`] each call
//! is and hands it to [`Driver::apply`], the driver's one write entry point, then turns the
//! [`Answer`] into the call's result.

use crate::Result;
use crate::batch::{CheckedBatch, Write, WriteOutcome};
use crate::driver::{Driver, Origin};
use crate::key::Key;
use crate::request::{Op, Request};
use crate::{Data, Document};
use futures_util::future::BoxFuture;

/// `create`, `put`, `update`, `update_if` and `restore`: `write` alone; the document it
/// stored (or, for a repeat, as it stands). `size_bound`: what the front end's check of
/// data stored whole found ([`Request::with_data_size_bound`]).
pub(super) fn write<'f>(
    driver: &'f dyn Driver,
    write: Write,
    origin: Origin<'f>,
    size_bound: Option<usize>,
) -> BoxFuture<'f, Result<Document>> {
    Box::pin(async move {
        let mut request = Request::single(Op::Write(&write), origin);
        if let Some(bound) = size_bound {
            request = request.with_data_size_bound(bound);
        }
        driver.apply(request).await?.into_document()
    })
}

/// `replace_if`: `data` replaces the document at `key` if it is at `expected`; `size_bound`
/// as for [`write`].
pub(super) fn replace_if<'f>(
    driver: &'f dyn Driver,
    key: &'f Key,
    (data, expected, size_bound): (Data, u64, usize),
    origin: Origin<'f>,
) -> BoxFuture<'f, Result<Document>> {
    Box::pin(async move {
        let op = Op::ReplaceIf {
            key,
            data: &data,
            expected,
        };
        let request = Request::single(op, origin).with_data_size_bound(size_bound);
        driver.apply(request).await?.into_document()
    })
}

/// `delete` (`expected: None`) and `delete_if`: whether a document was removed.
pub(super) fn delete<'f>(
    driver: &'f dyn Driver,
    key: &'f Key,
    expected: Option<u64>,
    origin: Origin<'f>,
) -> BoxFuture<'f, Result<bool>> {
    Box::pin(async move {
        let op = Op::Delete { key, expected };
        let answer = driver.apply(Request::single(op, origin)).await?;
        answer.into_deleted(key, expected)
    })
}

/// `write_all`: the checked, non-empty `batch`; one outcome per write.
pub(super) fn batch<'f>(
    driver: &'f dyn Driver,
    batch: &'f CheckedBatch<'f>,
    origin: Origin<'f>,
) -> BoxFuture<'f, Result<Vec<WriteOutcome>>> {
    Box::pin(async move {
        let answer = driver.apply(Request::batch(batch, origin)).await?;
        answer.into_outcomes(batch.writes())
    })
}
