//! [`WriteCall`]: a write that has not started yet, so the caller can still give it an
//! identity before awaiting it.

use crate::Result;
use crate::identity::WriteId;
use futures_util::future::BoxFuture;
use std::future::{Future, IntoFuture};

/// The body of a write: runs with the caller's identity, when it gave one.
type Body<'a, R> = Box<dyn FnOnce(Option<WriteId>) -> BoxFuture<'a, Result<R>> + Send + 'a>;

/// A write call, run by awaiting it: every write of [`Store`](crate::Store),
/// [`Collection`](crate::Collection) and [`SiteBatch`](crate::SiteBatch) returns one.
///
/// Awaited as it is, it writes as any call does. Given an identity first
/// ([`write_id`](Self::write_id)), it is safe to repeat: an application that saw
/// [`Error::Unavailable`](crate::Error::Unavailable) — the answer was lost, the write may or
/// may not have been applied — makes the same call again with the same identity, and gets
/// the first call's outcome instead of a second application, `AlreadyExists` or `NotFound`.
///
/// ```
/// use docstore::{Error, WriteId};
///
/// # async fn demo(tickets: &docstore::Collection<docstore::Data>, ticket: &docstore::Data) -> docstore::Result<()> {
/// // One identity per logical write, kept across its retries (in a job queue, say).
/// let write_id = WriteId::random();
/// let created = loop {
///     match tickets.create("T-7", ticket).write_id(write_id.clone()).await {
///         Err(Error::Unavailable { .. }) => continue, // back off, then the same call again
///         other => break other?,
///     }
/// };
/// assert_eq!(created.version, 1); // created once, however many tries it took
/// # Ok(())
/// # }
/// ```
#[must_use = "a write call does nothing until it is awaited"]
pub struct WriteCall<'a, R> {
    write_id: Option<WriteId>,
    body: Body<'a, R>,
}

impl<'a, R: 'a> WriteCall<'a, R> {
    /// A call that runs `body` when awaited.
    pub(crate) fn new<F>(body: impl FnOnce(Option<WriteId>) -> F + Send + 'a) -> Self
    where
        F: Future<Output = Result<R>> + Send + 'a,
    {
        WriteCall {
            write_id: None,
            body: Box::new(move |write_id| Box::pin(body(write_id))),
        }
    }

    /// Gives the write the caller's identity, which makes it safe to repeat.
    ///
    /// A call repeated with the same identity — after an answer was lost, by this process
    /// or another — applies nothing more and answers with the document its first call wrote
    /// (as it stands now, when other writes followed it) while the document still keeps the
    /// identity: among its last 16 writes'
    /// ([`KEPT_WRITE_IDS`](crate::identity::KEPT_WRITE_IDS)), and for a delete within 24
    /// hours ([`DELETE_IDS_KEPT_FOR`](crate::identity::DELETE_IDS_KEPT_FOR)); a repeated
    /// delete never removes a document created since. An identity names one call: giving it
    /// to a different write makes that write a repeat, which applies nothing.
    pub fn write_id(mut self, write_id: WriteId) -> Self {
        self.write_id = Some(write_id);
        self
    }
}

impl<'a, R: 'a> IntoFuture for WriteCall<'a, R> {
    type Output = Result<R>;
    type IntoFuture = BoxFuture<'a, Result<R>>;

    fn into_future(self) -> Self::IntoFuture {
        (self.body)(self.write_id)
    }
}

impl<R> std::fmt::Debug for WriteCall<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteCall")
            .field("write_id", &self.write_id)
            .finish_non_exhaustive()
    }
}
