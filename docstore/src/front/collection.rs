//! Typed collections: an application's own serde types in, [`Versioned`] values out.

use super::dispatch::CallIdentity;
use super::feed::{ChangeStream, TypedChange, TypedChangePage};
use super::{Site, WriteCall};
use crate::driver::{Expiry, Origin};
use crate::driver::{Explain, Fetched, Page};
use crate::feed::{FeedScope, FeedStart};
use crate::key::{Key, validate_collection};
use crate::query::{Cursor, Filter, Query};
use crate::retry::Retries;
use crate::{Data, Document};
use crate::{Error, Result};
use futures_core::Stream;
use futures_util::{StreamExt, TryStreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::any::Any;
use std::marker::PhantomData;

/// How often [`Collection::modify`] reads, changes and writes before it gives up with
/// [`Error::Conflict`]: every round that loses to another writer means that writer won, so
/// with `n` writers on one document each call gets through within `n` rounds.
pub const MODIFY_TRIES: u32 = 100;

/// A stored value with its metadata: what a typed [`Collection`] reads and writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Versioned<T> {
    /// The document id within its collection.
    pub id: String,
    /// The value, decoded from the document's data.
    pub value: T,
    /// 1 after the first write, plus exactly 1 for every successful write: what
    /// [`Collection::update_if`], [`Collection::replace_if`] and [`Collection::delete_if`]
    /// expect.
    pub version: u64,
    /// Unix nanoseconds (UTC) of the first write.
    pub created_at: i64,
    /// Unix nanoseconds (UTC) of the last write.
    pub updated_at: i64,
    /// The actor of the first write.
    pub created_by: String,
    /// The actor of the last write.
    pub updated_by: String,
    /// When the document expires (unix nanoseconds of the store's clock); `None`: never
    /// (`docs/contract.md`, "Expiry").
    pub expires_at: Option<i64>,
}

impl<T> Versioned<T> {
    /// The value, without the metadata.
    pub fn into_value(self) -> T {
        self.value
    }

    /// The same metadata with another value.
    fn with_value<U>(self, value: U) -> Versioned<U> {
        Versioned {
            id: self.id,
            value,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: self.created_by,
            updated_by: self.updated_by,
            expires_at: self.expires_at,
        }
    }
}

/// A document from its data with the metadata: what a backend reading the metadata once,
/// for a document or for its text ([`Fetched::Text`]), makes of the first.
///
/// ```
/// use docstore::{Data, Document, Versioned};
///
/// let read = Versioned {
///     id: "T-1".to_owned(),
///     value: Data::new(),
///     version: 2,
///     created_at: 10,
///     updated_at: 20,
///     created_by: "ann".to_owned(),
///     updated_by: "bob".to_owned(),
///     expires_at: None,
/// };
/// let doc = Document::from(read);
/// assert_eq!((doc.id.as_str(), doc.version, doc.updated_by.as_str()), ("T-1", 2, "bob"));
/// ```
impl From<Versioned<Data>> for Document {
    fn from(read: Versioned<Data>) -> Self {
        Document {
            id: read.id,
            data: read.value,
            created_at: read.created_at,
            updated_at: read.updated_at,
            created_by: read.created_by,
            updated_by: read.updated_by,
            version: read.version,
            expires_at: read.expires_at,
        }
    }
}

/// One page of a typed query: the values in the query's order, the cursor of the next page
/// (`None` on the last) and whether the backend stopped early ([`Page::exhausted_scan`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TypedPage<T> {
    /// The matching values of this page.
    pub items: Vec<Versioned<T>>,
    /// Where the next page starts (hand it back with [`Query::after`]).
    pub next: Option<Cursor>,
    /// True when the answer may be missing documents (see [`Page::exhausted_scan`]).
    pub exhausted_scan: bool,
}

/// One collection of one site, read and written as values of `T`: any type that serializes
/// to a JSON object and deserializes from one (and [`Data`] for raw JSON).
///
/// Get one from [`Site::collection`]. Cheap to clone. Writes are stamped with the site's actor
/// ([`Site::with_actor`]). A value that does not serialize to a JSON object is
/// [`Error::InvalidArgument`]; a stored document that does not deserialize into `T` is
/// [`Error::Decode`] naming its key (never a panic, never skipped).
///
/// ```
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Ticket {
///     title: String,
///     status: String,
///     assignee: Option<String>,
/// }
///
/// # async fn demo(store: &docstore::Store) -> docstore::Result<()> {
/// let tickets = store.site("acme")?.with_actor("alice")?.collection::<Ticket>("tickets")?;
/// let ticket = Ticket { title: "Printer on fire".into(), status: "open".into(), assignee: None };
/// tickets.create("T-1", &ticket).await?;
/// let done = tickets.modify("T-1", |t| t.status = "closed".into()).await?;
/// assert_eq!(done.version, 2);
/// # Ok(())
/// # }
/// ```
pub struct Collection<T> {
    site: Site,
    name: String,
    value: PhantomData<fn() -> T>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Collection {
            site: self.site.clone(),
            name: self.name.clone(),
            value: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Collection<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("site", &self.site.name())
            .field("name", &self.name)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T> Collection<T> {
    pub(crate) fn new(site: Site, name: &str) -> Result<Self> {
        validate_collection(name)?;
        Ok(Collection {
            site,
            name: name.to_owned(),
            value: PhantomData,
        })
    }

    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The site the collection belongs to.
    pub fn site(&self) -> &Site {
        &self.site
    }

    /// The same collection, writing as `actor` (0–256 bytes of UTF-8 without control
    /// characters).
    pub fn with_actor(&self, actor: &str) -> Result<Self> {
        Ok(Collection {
            site: self.site.with_actor(actor)?,
            name: self.name.clone(),
            value: PhantomData,
        })
    }

    /// The key of `id` in this collection.
    pub fn key(&self, id: &str) -> Result<Key> {
        Key::new(self.site.name(), &self.name, id)
    }
}

/// Serializes `value` as document data (a [`Data`] value is taken as it is); anything but a
/// JSON object is [`Error::InvalidArgument`] naming `what`.
pub(crate) fn encode<V: Serialize + 'static>(value: &V, what: &str) -> Result<Data> {
    match (value as &dyn Any).downcast_ref::<Data>() {
        Some(data) => Ok(data.clone()),
        None => to_object(value, what),
    }
}

/// A merge patch from any `Serialize` that gives a JSON object.
pub(crate) fn patch_data(patch: &impl Serialize) -> Result<Data> {
    to_object(patch, "a merge patch")
}

/// `value` serialized as a JSON object; anything else is [`Error::InvalidArgument`] naming
/// `what`.
fn to_object(value: &impl Serialize, what: &str) -> Result<Data> {
    match serde_json::to_value(value) {
        Ok(Value::Object(data)) => Ok(data.into()),
        Ok(other) => Err(Error::invalid(format!(
            "{what} must serialize to a JSON object, not {}",
            crate::document::kind_name(&other)
        ))),
        Err(err) => Err(Error::invalid(format!(
            "{what} does not serialize to JSON: {err}"
        ))),
    }
}

/// Deserializes the data of the document at `key` as `T` ([`Error::Decode`] naming the key);
/// for `T = Data` the data itself, without a copy or an allocation. Data shared with the
/// store (the memory backend's answers) is read in place, never copied first.
fn decode<T: DeserializeOwned + 'static>(key: KeyText<'_>, data: Data) -> Result<T> {
    let mut slot = Some(data);
    if let Some(same) = (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
        return Ok(same.take().expect("filled just above"));
    }
    let decoded = match slot.expect("not taken: T is not Data").try_unwrap() {
        Ok(map) => serde_json::from_value(Value::Object(map)),
        Err(shared) => T::deserialize(&*shared),
    };
    decoded.map_err(|err| decode_error(key, err))
}

/// JSON text the store wrote (an object) as a `T`, parsed once. Its depth is bounded by the
/// writes ([`MAX_DEPTH`](crate::document::MAX_DEPTH)), within serde_json's recursion limit
/// (`text_as_deep_as_a_document_may_be_decodes`).
fn decode_text<T: DeserializeOwned>(key: KeyText<'_>, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|err| decode_error(key, err))
}

/// The [`Error::Decode`] of the document at `key`.
fn decode_error(key: KeyText<'_>, err: serde_json::Error) -> Error {
    Error::Decode {
        key: key.to_string(),
        message: err.to_string(),
    }
}

/// The document of `site`/`collection` as a `Versioned<T>`, its data decoded.
pub(super) fn versioned<T: DeserializeOwned + 'static>(
    site: &str,
    collection: &str,
    doc: Document,
) -> Result<Versioned<T>> {
    let key = KeyText {
        site,
        collection,
        id: &doc.id,
    };
    Ok(Versioned {
        value: decode(key, doc.data)?,
        id: doc.id,
        version: doc.version,
        created_at: doc.created_at,
        updated_at: doc.updated_at,
        created_by: doc.created_by,
        updated_by: doc.updated_by,
        expires_at: doc.expires_at,
    })
}

/// A typed read of `site`/`collection` ([`Driver::get_text`](crate::driver::Driver::get_text))
/// as a `Versioned<T>`: [`versioned`] for a document, its text decoded once otherwise.
fn fetched<T: DeserializeOwned + 'static>(
    site: &str,
    collection: &str,
    fetched: Fetched,
) -> Result<Versioned<T>> {
    let text = match fetched {
        Fetched::Document(doc) => return versioned(site, collection, doc),
        Fetched::Text(text) => text,
    };
    let key = KeyText {
        site,
        collection,
        id: &text.id,
    };
    let value = decode_text(key, &text.value)?;
    Ok(text.with_value(value))
}

/// `site/collection/id`, as [`Key`] prints it, without building a key (only an error
/// message needs the text).
#[derive(Clone, Copy)]
struct KeyText<'a> {
    site: &'a str,
    collection: &'a str,
    id: &'a str,
}

impl std::fmt::Display for KeyText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.site, self.collection, self.id)
    }
}

impl<T> Collection<T>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn versioned(&self, doc: Document) -> Result<Versioned<T>> {
        versioned(self.site.name(), &self.name, doc)
    }

    fn store(&self) -> &super::Store {
        self.site.store()
    }

    fn actor(&self) -> &str {
        self.site.actor()
    }

    /// The key of `id` and `value` as document data: the input of a write that stores a value.
    fn key_and_value(&self, id: &str, value: &T) -> Result<(Key, Data)> {
        Ok((self.key(id)?, encode(value, "the value")?))
    }

    /// Creates the document `id` holding `value`, at version 1;
    /// [`Error::AlreadyExists`] if the id is taken.
    pub fn create(&self, id: &str, value: &T) -> WriteCall<'_, Versioned<T>> {
        let input = self.key_and_value(id, value);
        WriteCall::new(move |write_id, expiry| async move {
            let (key, data) = input?;
            let origin = Origin::with(self.actor(), &write_id)
                .expiring(self.store().expiry(&key, expiry, true)?);
            self.versioned(self.store().create_with(&key, data, origin).await?)
        })
    }

    /// Reads the document `id` (`None` when there is none).
    pub async fn get(&self, id: &str) -> Result<Option<Versioned<T>>> {
        let key = self.key(id)?;
        let read = self.store().get_text(&key).await?;
        read.map(|read| fetched(self.site.name(), &self.name, read))
            .transpose()
    }

    /// Reads several documents, one `Option` per id in the ids' order (strongly consistent;
    /// an id given twice is [`Error::InvalidArgument`]).
    pub async fn get_many(&self, ids: &[&str]) -> Result<Vec<Option<Versioned<T>>>> {
        let keys = ids
            .iter()
            .map(|id| self.key(id))
            .collect::<Result<Vec<_>>>()?;
        let docs = self.store().get_many(&keys).await?;
        docs.into_iter()
            .map(|doc| doc.map(|doc| self.versioned(doc)).transpose())
            .collect()
    }

    /// Creates or replaces the document `id` with `value` (a replaced one keeps its
    /// `created_*` fields; its version grows by one).
    pub fn put(&self, id: &str, value: &T) -> WriteCall<'_, Versioned<T>> {
        let input = self.key_and_value(id, value);
        WriteCall::new(move |write_id, expiry| async move {
            let (key, data) = input?;
            let origin = Origin::with(self.actor(), &write_id)
                .expiring(self.store().expiry(&key, expiry, true)?);
            self.versioned(self.store().put_with(&key, data, origin).await?)
        })
    }

    /// Merges `patch` (anything that serializes to a JSON object: an RFC 7386 merge patch,
    /// `null` removing a field) into the document `id`; [`Error::NotFound`] without one.
    pub fn update(&self, id: &str, patch: &impl Serialize) -> WriteCall<'_, Versioned<T>> {
        self.merge(id, patch, None)
    }

    /// [`update`](Self::update) if the document is still at `expected_version`;
    /// [`Error::Conflict`] with the current version otherwise.
    pub fn update_if(
        &self,
        id: &str,
        patch: &impl Serialize,
        expected_version: u64,
    ) -> WriteCall<'_, Versioned<T>> {
        self.merge(id, patch, Some(expected_version))
    }

    /// `update` (`expected_version: None`) and `update_if`.
    fn merge(
        &self,
        id: &str,
        patch: &impl Serialize,
        expected_version: Option<u64>,
    ) -> WriteCall<'_, Versioned<T>> {
        let input = self.key(id).and_then(|key| Ok((key, patch_data(patch)?)));
        WriteCall::new(move |write_id, expiry| async move {
            let (key, patch) = input?;
            let origin = Origin::with(self.actor(), &write_id)
                .expiring(self.store().expiry(&key, expiry, false)?);
            let store = self.store();
            let doc = store
                .update_with(&key, &patch, expected_version, origin)
                .await?;
            self.versioned(doc)
        })
    }

    /// Replaces the document `id` with `value` if it is still at `expected_version`
    /// (`created_*` kept, version one more): [`Error::NotFound`], or [`Error::Conflict`] with
    /// the current version. Every field of `value` is stored as `create` stores it (a `None`
    /// is `null`), which a merge patch cannot do.
    pub fn replace_if(
        &self,
        id: &str,
        value: &T,
        expected_version: u64,
    ) -> WriteCall<'_, Versioned<T>> {
        let input = self.key_and_value(id, value);
        WriteCall::new(move |write_id, expiry| async move {
            let (key, data) = input?;
            let origin = Origin::with(self.actor(), &write_id)
                .expiring(self.store().expiry(&key, expiry, true)?);
            let store = self.store();
            self.versioned(
                store
                    .replace_if_with(&key, data, expected_version, origin)
                    .await?,
            )
        })
    }

    /// Reads the document `id`, lets `change` edit its value and writes it back with
    /// [`replace_if`](Self::replace_if) at the version read; when another writer got in
    /// between, reads again and calls `change` again on the new value, at most
    /// [`MODIFY_TRIES`] times ([`Error::Conflict`] after that). So `change` may run more
    /// than once: it should only edit the value it is given. [`Error::NotFound`] without a
    /// document.
    ///
    /// A change that leaves the value equal (serialized, as JSON values) writes nothing: the
    /// call answers the document as it stands, its version unmoved, with no change on the feed
    /// — so an idempotent change ("close the ticket") repeated on a closed ticket costs one
    /// read.
    ///
    /// Exactly one change is applied per call, lost answers included: the whole call —
    /// its reads and writes, every round — retries [`Error::Unavailable`] under one budget,
    /// the store's [`RetryPolicy`](crate::retry::RetryPolicy), and every write of the call
    /// carries one identity (the caller's, given with [`WriteCall::write_id`], or one drawn
    /// for the call), so a write that was applied is recognised instead of made twice. When
    /// the budget ends, the `Unavailable` carries that identity ([`Error::write_id`]): the
    /// one correct way to try again later is the same `modify` with it, which applies the
    /// change only if no try of the first call did. A new `modify` without it may apply the
    /// change twice.
    ///
    /// ```
    /// # async fn demo(counters: &docstore::Collection<docstore::Data>) -> docstore::Result<()> {
    /// use docstore::Error;
    ///
    /// let add_hit = |page: &mut docstore::Data| {
    ///     let n = page.get("hits").and_then(|n| n.as_u64()).unwrap_or(0);
    ///     page.insert("hits".into(), (n + 1).into());
    /// };
    /// let hits = match counters.modify("home", add_hit).await {
    ///     // The store's retries ran out: later (a queued job, say), the same call with the
    ///     // identity it used counts the hit once, whichever of its tries were applied.
    ///     Err(err @ Error::Unavailable { .. }) => {
    ///         let id = err.write_id().cloned().expect("a write's Unavailable carries one");
    ///         counters.modify("home", add_hit).write_id(id).await?
    ///     }
    ///     other => other?,
    /// };
    /// # Ok(())
    /// # }
    /// ```
    pub fn modify<'a>(
        &'a self,
        id: &str,
        change: impl FnMut(&mut T) + Send + 'a,
    ) -> WriteCall<'a, Versioned<T>> {
        let key = self.key(id);
        WriteCall::new(move |write_id, expiry| async move {
            let dispatch = &self.store().driver;
            let identity = dispatch.identity(write_id.as_ref());
            let mut retries = dispatch.policy().start();
            let key = key?;
            let expiry = self.store().expiry(&key, expiry, false)?;
            self.modify_with(&key, change, (&identity, expiry), &mut retries)
                .await
                .map_err(|err| identity.mark(err))
        })
    }

    /// The rounds of `modify`, every read and write within `retries`.
    async fn modify_with(
        &self,
        key: &Key,
        mut change: impl FnMut(&mut T) + Send,
        (identity, expiry): (&CallIdentity<'_>, Expiry),
        retries: &mut Retries,
    ) -> Result<Versioned<T>> {
        let dispatch = &self.store().driver;
        let origin = identity.origin(self.actor()).expiring(expiry);
        let mut current = 0;
        for _ in 0..MODIFY_TRIES {
            let doc = dispatch
                .read_within(retries, |driver| driver.get(key))
                .await?
                .ok_or_else(|| Error::not_found(key))?;
            let mut read = self.versioned(doc)?;
            let unchanged = encode(&read.value, "the value read")?;
            change(&mut read.value);
            let data = encode(&read.value, "the changed value")?;
            if data == unchanged {
                return Ok(read);
            }
            let bound = self.store().check_written(&data, origin)?;
            let version = read.version;
            let written = dispatch.write_data_within(retries, identity, data, |driver, data| {
                super::requests::replace_if(driver, key, (data, version, bound), origin)
            });
            match written.await {
                Ok(doc) => return self.versioned(doc),
                Err(Error::Conflict { current: now }) => current = now,
                Err(err) => return Err(err),
            }
        }
        Err(Error::Conflict { current })
    }

    /// Deletes the document `id`; `true` when there was one.
    pub fn delete(&self, id: &str) -> WriteCall<'_, bool> {
        let key = self.key(id);
        WriteCall::new(move |write_id, _| async move {
            let origin = Origin::with(self.site.actor(), &write_id);
            self.store().delete_with(&key?, None, origin).await
        })
    }

    /// Deletes the document `id` if it is still at `expected_version`: [`Error::NotFound`],
    /// or [`Error::Conflict`] with the current version.
    pub fn delete_if(&self, id: &str, expected_version: u64) -> WriteCall<'_, ()> {
        let key = self.key(id);
        WriteCall::new(move |write_id, _| async move {
            let origin = Origin::with(self.site.actor(), &write_id);
            let key = key?;
            let deleted = self
                .store()
                .delete_with(&key, Some(expected_version), origin);
            deleted.await.map(drop)
        })
    }

    /// One page of `query`'s answer over this collection.
    pub async fn query(&self, query: &Query) -> Result<TypedPage<T>> {
        let page = self
            .store()
            .query(self.site.name(), &self.name, query)
            .await?;
        self.typed_page(page)
    }

    fn typed_page(&self, page: Page) -> Result<TypedPage<T>> {
        Ok(TypedPage {
            items: page
                .documents
                .into_iter()
                .map(|doc| self.versioned(doc))
                .collect::<Result<_>>()?,
            next: page.next,
            exhausted_scan: page.exhausted_scan,
        })
    }

    /// Every match of `query`, in its order, page by page in bounded memory (the query's
    /// `limit` is the page size): see [`DocumentStream`](super::DocumentStream) for the
    /// guarantees. A document that does not decode is an [`Error::Decode`] item, and the
    /// stream goes on after it.
    ///
    /// ```
    /// use futures_util::TryStreamExt;
    ///
    /// # async fn demo(tickets: &docstore::Collection<docstore::Data>) -> docstore::Result<()> {
    /// let query = docstore::Query::parse(r#"status = "open" order by priority desc"#)?;
    /// let mut open = tickets.stream(&query);
    /// while let Some(ticket) = open.try_next().await? {
    ///     println!("{}: {:?}", ticket.id, ticket.value.get("title"));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(
        &self,
        query: &Query,
    ) -> impl Stream<Item = Result<Versioned<T>>> + Send + Unpin + 'static {
        let (site, collection) = (self.site.name().to_owned(), self.name.clone());
        self.store()
            .stream(self.site.name(), &self.name, query)
            .map(move |doc| doc.and_then(|doc| versioned(&site, &collection, doc)))
    }

    /// Says how [`query`](Self::query) would run `query`.
    pub async fn explain(&self, query: &Query) -> Result<Explain> {
        self.store()
            .explain(self.site.name(), &self.name, query)
            .await
    }

    /// The number of documents in the collection (from its counter).
    pub async fn count(&self) -> Result<u64> {
        let collections = self.store().collections(self.site.name()).await?;
        Ok(collections
            .into_iter()
            .find(|(name, _)| *name == self.name)
            .map_or(0, |(_, n)| n))
    }

    /// Reads at most `limit` (1 to [`MAX_CHANGE_PAGE`](crate::feed::MAX_CHANGE_PAGE))
    /// changes of this collection after `start`, each decoded into `T`.
    pub async fn changes(&self, start: &FeedStart, limit: usize) -> Result<TypedChangePage<T>> {
        let page = self
            .store()
            .scoped_changes(&self.feed_scope(), start, limit)
            .await?;
        Ok(TypedChangePage::decode(page))
    }

    /// Every change of this collection from `start`, decoded into `T`, waiting for new ones
    /// (see [`ChangeStream`](super::ChangeStream)). A document that does not decode is a
    /// change like any other, with its cursor, whose [`value`](TypedChange::value) is the
    /// [`Error::Decode`]; an error item is a failed read.
    ///
    /// ```
    /// use futures_util::TryStreamExt;
    ///
    /// # async fn demo(tickets: &docstore::Collection<docstore::Data>) -> docstore::Result<()> {
    /// let mut changes = tickets.watch(docstore::FeedStart::Snapshot);
    /// while let Some(change) = changes.try_next().await? {
    ///     match change.value {
    ///         Ok(Some(ticket)) => println!("{} is now v{}", ticket.id, ticket.version),
    ///         Ok(None) => println!("{} was deleted", change.id),
    ///         Err(undecodable) => eprintln!("skipped: {undecodable}"),
    ///     }
    ///     // save change.cursor: a restart goes on after it
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn watch(
        &self,
        start: FeedStart,
    ) -> impl Stream<Item = Result<TypedChange<T>>> + Send + Unpin + 'static {
        ChangeStream::new(self.store().clone(), self.feed_scope(), start)
            .map(|change| change.map(TypedChange::decode))
    }

    fn feed_scope(&self) -> FeedScope {
        FeedScope::collection(self.site.name(), &self.name).expect("names checked when built")
    }

    /// The number of documents matching `filter`, counted by walking them (no decoding).
    pub async fn count_matching(&self, filter: &Filter) -> Result<u64> {
        let query = Query::new().filter(filter.clone());
        self.store()
            .stream(self.site.name(), &self.name, &query)
            .try_fold(0u64, |n, _| async move { Ok(n + 1) })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    const KEY: KeyText<'static> = KeyText {
        site: "s",
        collection: "c",
        id: "d",
    };

    #[derive(Debug, Deserialize, PartialEq)]
    struct Ticket {
        title: String,
        score: f64,
    }

    #[test]
    fn text_decodes_as_the_parsed_data_does() {
        let text = r#"{"title":"hello","score":1.5,"extra":[1,{"x":null}]}"#;
        let data: Data = serde_json::from_str(text).unwrap();
        let via_map: Ticket = decode(KEY, data.clone()).unwrap();
        assert_eq!(decode_text::<Ticket>(KEY, text).unwrap(), via_map);
        assert_eq!(decode_text::<Data>(KEY, text).unwrap(), data);
    }

    #[test]
    fn text_that_does_not_fit_names_the_key() {
        let err = decode_text::<Ticket>(KEY, r#"{"title":5,"score":1}"#).unwrap_err();
        assert!(
            matches!(&err, Error::Decode { key, .. } if key == "s/c/d"),
            "{err}"
        );
    }

    #[test]
    fn text_as_deep_as_a_document_may_be_decodes() {
        let wrap = |inner: Value| crate::object(serde_json::json!({ "a": inner })).unwrap();
        let mut deepest = wrap(Value::from(1));
        loop {
            let deeper = wrap(Value::Object((*deepest).clone()));
            if crate::document::check_depth(&deeper).is_err() {
                break;
            }
            deepest = deeper;
        }
        let text = serde_json::to_string(&deepest).unwrap();
        assert!(
            text.matches('{').count() >= crate::document::MAX_DEPTH,
            "{text}"
        );
        assert_eq!(decode_text::<Data>(KEY, &text).unwrap(), deepest);
    }
}
