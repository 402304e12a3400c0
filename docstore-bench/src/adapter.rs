//! A docstore [`Store`] as a benchmark [`Subject`]: each call is what an application writes,
//! a [`Key`] built from its three names and one trait call through `Store`. And the same
//! store through the typed front end ([`TypedDocstore`]: a [`Collection`] of [`Ticket`]s),
//! for the typed rows.

use crate::BenchResult;
use crate::data::{ACTOR, SITE, TOP, Ticket, selective_query};
use crate::subject::{Subject, WalkPage, WalkPosition};
use async_trait::async_trait;
use docstore::{Collection, Cursor, Data, Key, Query, Site, Store};

/// A docstore store as an application with its own serde type uses it: the benchmark's site,
/// writing as the benchmark's actor, each collection a [`Collection<Ticket>`]. The typed
/// rows time its `create` and `get` calls against the raw rows' baseline.
#[derive(Clone, Debug)]
pub struct TypedDocstore {
    site: Site,
}

impl TypedDocstore {
    /// The benchmark's site of `store`, writing as the benchmark's actor.
    pub fn new(store: &Store) -> BenchResult<Self> {
        Ok(TypedDocstore {
            site: store.site(SITE)?.with_actor(ACTOR)?,
        })
    }

    /// The collection `name`, read and written as [`Ticket`]s (made once, before a
    /// workload's clock starts).
    pub fn collection(&self, name: &str) -> BenchResult<Collection<Ticket>> {
        Ok(self.site.collection(name)?)
    }
}

/// Any docstore backend, driven through the front end's [`Store`].
#[derive(Clone, Debug)]
pub struct DocstoreSubject {
    store: Store,
    top: Query,
}

impl DocstoreSubject {
    /// Wraps `store`.
    pub fn new(store: Store) -> Self {
        DocstoreSubject {
            store,
            top: selective_query(),
        }
    }

    /// The wrapped store.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

fn key(collection: &str, id: &str) -> BenchResult<Key> {
    Ok(Key::new(SITE, collection, id)?)
}

#[async_trait]
impl Subject for DocstoreSubject {
    async fn create(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        Ok(self
            .store
            .create(&key(collection, id)?, data, ACTOR)
            .await?
            .version)
    }

    async fn get(&self, collection: &str, id: &str) -> BenchResult<bool> {
        Ok(self.store.get(&key(collection, id)?).await?.is_some())
    }

    async fn put(&self, collection: &str, id: &str, data: Data) -> BenchResult<u64> {
        Ok(self
            .store
            .put(&key(collection, id)?, data, ACTOR)
            .await?
            .version)
    }

    async fn update(&self, collection: &str, id: &str, patch: &Data) -> BenchResult<u64> {
        Ok(self
            .store
            .update(&key(collection, id)?, patch, ACTOR)
            .await?
            .version)
    }

    async fn update_if(
        &self,
        collection: &str,
        id: &str,
        patch: &Data,
        expected: u64,
    ) -> BenchResult<u64> {
        Ok(self
            .store
            .update_if(&key(collection, id)?, patch, expected, ACTOR)
            .await?
            .version)
    }

    async fn delete(&self, collection: &str, id: &str) -> BenchResult<bool> {
        Ok(self.store.delete(&key(collection, id)?).await?)
    }

    async fn update_if_many(
        &self,
        collection: &str,
        writes: &[(String, Data, u64)],
    ) -> BenchResult<Vec<u64>> {
        let batch = writes
            .iter()
            .map(|(id, patch, expected)| {
                Ok(docstore::Write::update_if(
                    key(collection, id)?,
                    patch.clone(),
                    *expected,
                ))
            })
            .collect::<BenchResult<Vec<_>>>()?;
        let outcomes = self.store.write_all(&batch, ACTOR).await?;
        Ok(outcomes
            .into_iter()
            .map(|o| o.into_document().map_or(0, |d| d.version))
            .collect())
    }

    async fn top(&self, collection: &str) -> BenchResult<Vec<String>> {
        let page = self.store.query(SITE, collection, &self.top).await?;
        debug_assert!(page.documents.len() <= TOP);
        Ok(page.documents.into_iter().map(|d| d.id).collect())
    }

    async fn walk_page(
        &self,
        collection: &str,
        page_size: usize,
        after: WalkPosition,
    ) -> BenchResult<WalkPage> {
        let query = Query::new().limit(page_size).after(after.map(Cursor::from));
        let page = self.store.query(SITE, collection, &query).await?;
        Ok(WalkPage {
            documents: page.documents.len(),
            next: page.next.map(|c| c.as_str().to_owned()),
        })
    }
}
