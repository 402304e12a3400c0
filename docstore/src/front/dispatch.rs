//! The one way the front end reaches the driver: every call under the store's
//! [`RetryPolicy`](crate::retry::RetryPolicy), a write under one identity for the whole call
//! (`docs/contract.md`, "Retries").

use crate::driver::{Driver, Origin};
use crate::feed::{ChangeCursor, ChangePage, FeedScope, FeedStart};
use crate::identity::WriteId;
use crate::retry::{Retries, RetryPolicy};
use crate::{Error, Result};
use futures_util::future::BoxFuture;
use std::sync::Arc;

/// The driver as the front end calls it. Reads go through [`read`](Self::read), writes
/// through [`write`](Self::write); the feed's reads keep the driver's names
/// ([`changes`](Self::changes), [`wait_for_changes`](Self::wait_for_changes)).
#[derive(Clone, Debug)]
pub(crate) struct Dispatch {
    driver: Arc<dyn Driver>,
}

/// The identity of one logical write, the same for every try of it.
#[derive(Debug)]
pub(crate) enum CallIdentity<'a> {
    /// The caller's ([`WriteCall::write_id`](super::WriteCall::write_id)).
    Caller(&'a WriteId),
    /// Drawn for this call, because the driver may lose a write's answer: sent with every try
    /// (and handed to the caller with an `Unavailable`).
    Drawn(WriteId),
    /// None sent: the driver never applies a write that ends `Unavailable`
    /// ([`Driver::may_lose_answers`]), so a try without one is safe to repeat. An identity is
    /// drawn only for an error that hands it to the caller.
    Unsent,
}

impl CallIdentity<'_> {
    /// The identity each try sends, if any.
    pub(crate) fn sent(&self) -> Option<&WriteId> {
        match self {
            CallIdentity::Caller(id) => Some(id),
            CallIdentity::Drawn(id) => Some(id),
            CallIdentity::Unsent => None,
        }
    }

    /// The origin of each try: `actor`, with the identity sent.
    pub(crate) fn origin<'o>(&'o self, actor: &'o str) -> Origin<'o> {
        Origin {
            actor,
            write_id: self.sent(),
            expiry: crate::driver::Expiry::Keep,
        }
    }

    /// `err`, when it is `Unavailable`, carrying the identity a repeat of the call must give.
    pub(crate) fn mark(&self, err: Error) -> Error {
        if !err.is_retryable() {
            return err;
        }
        let id = self.sent().cloned().unwrap_or_else(WriteId::random);
        err.with_write_id(id)
    }
}

impl Dispatch {
    pub(crate) fn new(driver: Arc<dyn Driver>) -> Self {
        Dispatch { driver }
    }

    /// The driver itself.
    pub(crate) fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }

    /// The store's options.
    pub(crate) fn options(&self) -> &crate::StoreOptions {
        self.driver.options()
    }

    /// The store's retry policy.
    pub(crate) fn policy(&self) -> &RetryPolicy {
        &self.driver.options().retry
    }

    /// The identity of a write whose caller gave `caller`.
    pub(crate) fn identity<'a>(&self, caller: Option<&'a WriteId>) -> CallIdentity<'a> {
        match caller {
            Some(id) => CallIdentity::Caller(id),
            // Drawn even when the policy retries nothing: the error hands it to the caller,
            // whose repeat must find the try whose answer was lost.
            None if self.driver.may_lose_answers() => CallIdentity::Drawn(WriteId::random()),
            None => CallIdentity::Unsent,
        }
    }

    /// Runs the read `call`, again while it ends `Unavailable`, under the policy.
    pub(crate) async fn read<'f, R>(
        &'f self,
        call: impl FnMut(&'f dyn Driver) -> BoxFuture<'f, Result<R>>,
    ) -> Result<R> {
        let mut retries = self.policy().start();
        self.read_within(&mut retries, call).await
    }

    /// [`read`](Self::read) within `retries`, which a longer call (`modify`) shares.
    pub(crate) async fn read_within<'f, R>(
        &'f self,
        retries: &mut Retries,
        mut call: impl FnMut(&'f dyn Driver) -> BoxFuture<'f, Result<R>>,
    ) -> Result<R> {
        let driver: &'f dyn Driver = &*self.driver;
        loop {
            match call(driver).await {
                Err(err) if err.is_retryable() && retries.wait().await => continue,
                other => return other,
            }
        }
    }

    /// Runs the write `call` (which sends `identity`), again while it ends `Unavailable`,
    /// under the policy; the last `Unavailable` carries the identity.
    pub(crate) async fn write<'f, R>(
        &'f self,
        identity: &CallIdentity<'_>,
        call: impl FnMut(&'f dyn Driver) -> BoxFuture<'f, Result<R>>,
    ) -> Result<R> {
        let mut retries = self.policy().start();
        self.write_within(&mut retries, identity, call).await
    }

    /// [`write`](Self::write) within `retries`, which a longer call (`modify`) shares.
    pub(crate) async fn write_within<'f, R>(
        &'f self,
        retries: &mut Retries,
        identity: &CallIdentity<'_>,
        call: impl FnMut(&'f dyn Driver) -> BoxFuture<'f, Result<R>>,
    ) -> Result<R> {
        self.read_within(retries, call)
            .await
            .map_err(|err| identity.mark(err))
    }

    /// [`write`](Self::write) of a call that hands the driver `data` by value: copied for
    /// each try when another may follow, moved into the only try when none can (no retries,
    /// or a driver whose writes never end `Unavailable`).
    pub(crate) async fn write_data<'f, T: Clone, R>(
        &'f self,
        identity: &CallIdentity<'_>,
        data: T,
        call: impl FnMut(&'f dyn Driver, T) -> BoxFuture<'f, Result<R>>,
    ) -> Result<R> {
        let mut retries = self.policy().start();
        self.write_data_within(&mut retries, identity, data, call)
            .await
    }

    /// [`write_data`](Self::write_data) within `retries`, which a longer call (`modify`)
    /// shares.
    pub(crate) async fn write_data_within<'f, T: Clone, R>(
        &'f self,
        retries: &mut Retries,
        identity: &CallIdentity<'_>,
        data: T,
        mut call: impl FnMut(&'f dyn Driver, T) -> BoxFuture<'f, Result<R>>,
    ) -> Result<R> {
        if self.policy().retries() && self.driver.writes_may_be_unavailable() {
            let again = |driver| call(driver, data.clone());
            return self.write_within(retries, identity, again).await;
        }
        let driver: &'f dyn Driver = &*self.driver;
        call(driver, data).await.map_err(|err| identity.mark(err))
    }

    /// A page of the driver's feed, read again while it ends `Unavailable`.
    pub(crate) async fn changes(
        &self,
        scope: &FeedScope,
        start: &FeedStart,
        limit: usize,
    ) -> Result<ChangePage> {
        self.read(|driver| driver.changes(scope, start, limit))
            .await
    }

    /// The driver's wait for changes after `after`, again while it ends `Unavailable`.
    pub(crate) async fn wait_for_changes(&self, after: &ChangeCursor) -> Result<()> {
        self.read(|driver| driver.wait_for_changes(after)).await
    }
}
