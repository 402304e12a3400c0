//! Statements sent without waiting for the answers of the ones before, in the order given:
//! tokio-postgres writes a statement to the connection at its future's first poll and the
//! server answers in order, so `BEGIN` travels with a write's first reads and `COMMIT` with
//! its writes (two round trips a write). A transaction left open by an error or a cancelled
//! call is rolled back by [`Open`] without waiting.

use futures_util::FutureExt;
use futures_util::future::{MaybeDone, maybe_done};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

/// A statement on its way: written to the connection, its answer awaited later.
pub(crate) struct Sent<F: Future>(Pin<Box<MaybeDone<F>>>);

impl<T, E, F: Future<Output = Result<T, E>>> Sent<F> {
    /// Sends `statement` (polls it once) and returns without its answer.
    pub(crate) async fn now(statement: F) -> Self {
        let mut sent = Box::pin(maybe_done(statement));
        poll_fn(|cx| {
            let _ = sent.as_mut().poll(cx);
            Poll::Ready(())
        })
        .await;
        Sent(sent)
    }

    /// Whether it failed already, which it can only have done before reaching the server (a
    /// parameter that did not encode, a closed connection).
    pub(crate) fn failed(&mut self) -> bool {
        self.0.as_mut().output_mut().is_some_and(|r| r.is_err())
    }

    /// The server's answer.
    pub(crate) async fn answer(mut self) -> Result<T, E> {
        self.0.as_mut().await;
        self.0
            .as_mut()
            .take_output()
            .expect("a finished statement has its answer")
    }
}

/// A transaction `BEGIN` opened on `client`: dropped before [`Open::committed`], it sends
/// `ROLLBACK` without waiting for the answer (the connection's next user is answered after
/// it), so no connection goes back to the pool inside a transaction.
pub(crate) struct Open<'c> {
    client: &'c tokio_postgres::Client,
    committed: bool,
}

impl<'c> Open<'c> {
    /// Sends `BEGIN`.
    pub(crate) async fn begin(
        client: &'c tokio_postgres::Client,
    ) -> (
        Self,
        Sent<impl Future<Output = Result<(), tokio_postgres::Error>> + 'c>,
    ) {
        let sent = Sent::now(client.batch_execute("BEGIN")).await;
        let open = Open {
            client,
            committed: false,
        };
        (open, sent)
    }

    /// The transaction committed (its `COMMIT` answered): nothing to roll back.
    pub(crate) fn committed(mut self) {
        self.committed = true;
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let _ = self.client.batch_execute("ROLLBACK").now_or_never();
        }
    }
}
