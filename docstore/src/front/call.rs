//! [`WriteCall`]: a write that has not started yet, so the caller can still give it an
//! identity before awaiting it.

use crate::Result;
use crate::identity::WriteId;
use futures_util::future::BoxFuture;
use std::future::{Future, IntoFuture};
use std::time::Duration;

/// The body of a write: runs with the caller's identity and expiry, when it gave them.
type Body<'a, R> =
    Box<dyn FnOnce(Option<WriteId>, Option<CallExpiry>) -> BoxFuture<'a, Result<R>> + Send + 'a>;

/// The expiry a caller gave a write ([`WriteCall::expires_at`] and its siblings), before the
/// store resolves it against its clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallExpiry {
    /// At this instant, unix nanoseconds.
    At(i64),
    /// This long after the write.
    After(Duration),
    /// Never.
    Never,
}

/// A write call, run by awaiting it: every write of [`Store`](crate::Store),
/// [`Collection`](crate::Collection) and [`SiteBatch`](crate::SiteBatch) returns one.
///
/// Awaited, it runs under the store's [`RetryPolicy`](crate::retry::RetryPolicy): an
/// [`Error::Unavailable`](crate::Error::Unavailable) is retried with every try carrying one
/// write identity — the caller's, given with [`write_id`](Self::write_id), or one the store
/// draws — so a try whose answer was lost is recognised by the next instead of applied twice.
/// An `Unavailable` that still comes back means the budget ended and the write may or may not
/// have been applied; it carries the identity ([`Error::write_id`](crate::Error::write_id)).
/// The one correct way to try again later is the same call with that identity: it gets the
/// first call's outcome instead of a second application, `AlreadyExists` or `NotFound`.
///
/// ```
/// use docstore::{Error, WriteId};
///
/// # async fn demo(tickets: docstore::Collection<docstore::Data>, ticket: docstore::Data) -> docstore::Result<()> {
/// let created = match tickets.create("T-7", &ticket).await {
///     Err(err @ Error::Unavailable { .. }) => {
///         // Keep the identity with the job; repeat the call with it, here in another task.
///         let id: WriteId = err.write_id().cloned().expect("a write's Unavailable has one");
///         let later = tokio::spawn(async move { tickets.create("T-7", &ticket).write_id(id).await });
///         later.await.expect("the task ran")?
///     }
///     other => other?,
/// };
/// assert_eq!(created.version, 1); // created once, however many tries it took
/// # Ok(())
/// # }
/// ```
#[must_use = "a write call does nothing until it is awaited"]
pub struct WriteCall<'a, R> {
    write_id: Option<WriteId>,
    expiry: Option<CallExpiry>,
    body: Body<'a, R>,
}

impl<'a, R: 'a> WriteCall<'a, R> {
    /// A call that runs `body` when awaited.
    pub(crate) fn new<F>(
        body: impl FnOnce(Option<WriteId>, Option<CallExpiry>) -> F + Send + 'a,
    ) -> Self
    where
        F: Future<Output = Result<R>> + Send + 'a,
    {
        WriteCall {
            write_id: None,
            expiry: None,
            body: Box::new(move |write_id, expiry| Box::pin(body(write_id, expiry))),
        }
    }

    /// Makes the document the write stores expire at `at` (unix nanoseconds of the store's
    /// clock): from then on it reads, counts and holds unique values as if deleted, and a
    /// sweep removes it (`docs/contract.md`, "Expiry"). Without it a write keeps the
    /// document's expiry, except that `create`, `put` and `replace_if` apply the
    /// collection's default ([`StoreOptions::with_expiry`](crate::StoreOptions::with_expiry))
    /// when it has one. Deletes ignore it; `restore` keeps its document's.
    pub fn expires_at(mut self, at: i64) -> Self {
        self.expiry = Some(CallExpiry::At(at));
        self
    }

    /// Makes the document the write stores expire `after` this long, counted from the
    /// write on the store's clock (see [`expires_at`](Self::expires_at)).
    ///
    /// ```
    /// # async fn demo(sessions: docstore::Collection<docstore::Data>) -> docstore::Result<()> {
    /// use std::time::Duration;
    ///
    /// let token = docstore::object(serde_json::json!({"user": "ann"}))?;
    /// let created = sessions.create("s-1", &token).expires_after(Duration::from_secs(900)).await?;
    /// assert!(created.expires_at.is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn expires_after(mut self, after: Duration) -> Self {
        self.expiry = Some(CallExpiry::After(after));
        self
    }

    /// Makes the document the write stores never expire (removing an expiry it had, and
    /// overriding the collection's default).
    pub fn never_expires(mut self) -> Self {
        self.expiry = Some(CallExpiry::Never);
        self
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
        (self.body)(self.write_id, self.expiry)
    }
}

impl<R> std::fmt::Debug for WriteCall<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteCall")
            .field("write_id", &self.write_id)
            .field("expiry", &self.expiry)
            .finish_non_exhaustive()
    }
}
