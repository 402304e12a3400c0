//! The tenant scope: one site, and nothing beyond it.

use super::Store;
use super::WriteCall;
use super::collection::{Collection, encode, patch_data};
use super::feed::ChangeStream;
use crate::batch::{Write, WriteOutcome};
use crate::document::validate_actor;
use crate::driver::Origin;
use crate::feed::{ChangePage, FeedScope, FeedStart};
use crate::key::{Key, validate_site};
use crate::{Error, Result};
use serde::Serialize;
use std::sync::Arc;

/// One tenant of a [`Store`]: every call reachable from a `Site` — its collections, their
/// queries, streams and cursors, its batches and counts — reads and writes this site only.
/// Hand a request handler a `Site`, not the store.
///
/// Cheap to clone. Writes are stamped with the site's actor (empty unless set with
/// [`with_actor`](Self::with_actor)).
///
/// ```
/// # async fn demo(store: &docstore::Store) -> docstore::Result<()> {
/// let acme = store.site("acme")?.with_actor("alice")?;
/// let notes = acme.collection::<docstore::Data>("notes")?;
/// notes.create("n-1", &docstore::object(serde_json::json!({"text": "hi"}))?).await?;
/// assert_eq!(acme.count().await?, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Site {
    store: Store,
    name: Arc<str>,
    actor: Arc<str>,
}

impl Site {
    pub(crate) fn new(store: Store, name: &str) -> Result<Self> {
        validate_site(name)?;
        Ok(Site {
            store,
            name: name.into(),
            actor: "".into(),
        })
    }

    /// The site's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The actor this site's writes are stamped with.
    pub fn actor(&self) -> &str {
        &self.actor
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The same site, writing as `actor` (0–256 bytes of UTF-8 without control characters,
    /// else [`Error::InvalidArgument`]): recorded as `updated_by` (and `created_by`).
    pub fn with_actor(&self, actor: &str) -> Result<Self> {
        validate_actor(actor)?;
        Ok(Site {
            store: self.store.clone(),
            name: self.name.clone(),
            actor: actor.into(),
        })
    }

    /// The collection `name` of this site, read and written as values of `T`.
    pub fn collection<T>(&self, name: &str) -> Result<Collection<T>> {
        Collection::new(self.clone(), name)
    }

    /// The site's collections holding at least one document, by name, with their counts.
    pub async fn collections(&self) -> Result<Vec<(String, u64)>> {
        self.store.collections(&self.name).await
    }

    /// The number of documents in the site.
    pub async fn count(&self) -> Result<u64> {
        self.store.count(&self.name).await
    }

    /// Reads at most `limit` (1 to [`MAX_CHANGE_PAGE`](crate::feed::MAX_CHANGE_PAGE))
    /// changes of this site after `start`, oldest first.
    ///
    /// ```
    /// # async fn demo(site: &docstore::Site) -> docstore::Result<()> {
    /// let mut start = docstore::FeedStart::Oldest;
    /// loop {
    ///     let page = site.changes(&start, 100).await?;
    ///     for change in &page.changes {
    ///         println!("{} {} v{}", change.kind, change.key, change.version);
    ///     }
    ///     start = docstore::FeedStart::After(page.next);
    ///     if page.caught_up {
    ///         break;
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn changes(&self, start: &FeedStart, limit: usize) -> Result<ChangePage> {
        self.store
            .scoped_changes(&self.feed_scope(), start, limit)
            .await
    }

    /// Every change of this site from `start`, waiting for new ones: see [`ChangeStream`].
    pub fn watch(&self, start: FeedStart) -> ChangeStream {
        ChangeStream::new(self.store.clone(), self.feed_scope(), start)
    }

    fn feed_scope(&self) -> FeedScope {
        FeedScope::site(&self.name).expect("a site's name is valid")
    }

    /// An empty atomic batch over this site's collections.
    pub fn batch(&self) -> SiteBatch {
        SiteBatch {
            site: self.clone(),
            writes: Vec::new(),
            refused: None,
        }
    }
}

/// Writes to any collections of one site, applied all or nothing by
/// [`commit`](Self::commit) (see [`Store::write_all`] for the limits and errors).
///
/// Each adding call takes the typed collection the write is for; a write whose input is bad —
/// a value that is not a JSON object, an invalid id, a collection of another site — is
/// reported by `commit` as [`Error::Batch`] with its position, and nothing is written.
///
/// ```
/// # async fn demo(site: &docstore::Site) -> docstore::Result<()> {
/// use serde_json::json;
/// let open = site.collection::<serde_json::Value>("open")?;
/// let done = site.collection::<serde_json::Value>("done")?;
/// let ticket = open.get("T-1").await?.expect("exists");
/// // Move the ticket: both writes happen, or neither.
/// site.batch()
///     .create(&done, "T-1", &ticket.value)
///     .delete_if(&open, "T-1", ticket.version)
///     .commit()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a batch does nothing until it is committed"]
pub struct SiteBatch {
    site: Site,
    writes: Vec<Write>,
    /// The first write that could not be built: its position and why.
    refused: Option<(usize, Error)>,
}

impl SiteBatch {
    /// Adds a write built from `collection`, `id` and the key; the first failure is kept for
    /// `commit`.
    fn add<T>(
        mut self,
        collection: &Collection<T>,
        id: &str,
        write: impl FnOnce(Key) -> Result<Write>,
    ) -> Self {
        let index = self.writes.len();
        let built = self
            .check_scope(collection)
            .and_then(|()| write(collection.key(id)?));
        match built {
            Ok(write) => self.writes.push(write),
            // Only the first refusal is reported, and nothing is sent after one, so the
            // positions of later writes do not matter.
            Err(err) => {
                self.refused.get_or_insert((index, err));
            }
        }
        self
    }

    fn check_scope<T>(&self, collection: &Collection<T>) -> Result<()> {
        let theirs = collection.site();
        if theirs.name() != self.site.name()
            || !Arc::ptr_eq(theirs.store().driver(), self.site.store().driver())
        {
            return Err(Error::invalid(format!(
                "collection {} belongs to site {:?} of its store; this batch is of site {:?}",
                collection.name(),
                theirs.name(),
                self.site.name()
            )));
        }
        Ok(())
    }

    /// Creates `id` holding `value`.
    pub fn create<T: Serialize + 'static>(
        self,
        collection: &Collection<T>,
        id: &str,
        value: &T,
    ) -> Self {
        self.add(collection, id, |key| {
            Ok(Write::create(key, encode(value, "the value")?))
        })
    }

    /// Creates or replaces `id` with `value`.
    pub fn put<T: Serialize + 'static>(
        self,
        collection: &Collection<T>,
        id: &str,
        value: &T,
    ) -> Self {
        self.add(collection, id, |key| {
            Ok(Write::put(key, encode(value, "the value")?))
        })
    }

    /// Merges `patch` into `id`.
    pub fn update<T>(self, collection: &Collection<T>, id: &str, patch: &impl Serialize) -> Self {
        self.add(collection, id, |key| {
            Ok(Write::update(key, patch_data(patch)?))
        })
    }

    /// Merges `patch` into `id` if it is at `expected_version`.
    pub fn update_if<T>(
        self,
        collection: &Collection<T>,
        id: &str,
        patch: &impl Serialize,
        expected_version: u64,
    ) -> Self {
        self.add(collection, id, |key| {
            Ok(Write::update_if(key, patch_data(patch)?, expected_version))
        })
    }

    /// Deletes `id` if it is at `expected_version`.
    pub fn delete_if<T>(self, collection: &Collection<T>, id: &str, expected_version: u64) -> Self {
        self.add(collection, id, |key| {
            Ok(Write::delete_if(key, expected_version))
        })
    }

    /// Requires `id` to be at `version` (`None`: to be absent), writing nothing to it.
    pub fn check<T>(self, collection: &Collection<T>, id: &str, version: Option<u64>) -> Self {
        self.add(collection, id, |key| Ok(Write::check(key, version)))
    }

    /// The writes added so far.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// Whether no write was added.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Applies every write, or none: one outcome per write, in order. Give the call an
    /// identity ([`WriteCall::write_id`]) to make the batch safe to repeat.
    pub fn commit(self) -> WriteCall<'static, Vec<WriteOutcome>> {
        WriteCall::new(move |write_id, expiry| async move {
            if let Some((index, err)) = self.refused {
                return Err(crate::batch::failed(index, err));
            }
            let origin = Origin::with(&self.site.actor, &write_id);
            let store = &self.site.store;
            store.write_all_with(&self.writes, origin, expiry).await
        })
    }
}
