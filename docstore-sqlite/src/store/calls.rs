//! The calls [`Driver::apply`] dispatches a request to ([`Call`]), one function each: a
//! single call's statements in one immediate transaction, a batch's in another.

use super::*;
use docstore::request::{Call, Request};

impl SqliteStore {
    /// The request by the function of its call; `restore` answers the document as given.
    pub(super) async fn apply_call(&self, request: Request<'_>) -> Result<Answer> {
        let origin = request.origin();
        Ok(match request.call() {
            Call::Create { key, data } => {
                Answer::written(self.create(key, data.clone(), origin).await?)
            }
            Call::Put { key, data } => Answer::written(self.put(key, data.clone(), origin).await?),
            Call::Update {
                key,
                patch,
                expected,
            } => Answer::written(self.update(key, patch, expected, origin).await?),
            Call::ReplaceIf {
                key,
                data,
                expected,
            } => Answer::written(self.replace_if(key, data.clone(), expected, origin).await?),
            Call::Delete { key, expected } => {
                Answer::deleted(self.delete(key, expected, origin).await?)
            }
            Call::Restore { key, document } => {
                self.restore(key, document, origin).await?;
                Answer::written(document.clone())
            }
            Call::Batch(batch) => Answer::Applied(self.write_all(&batch, origin).await?),
        })
    }

    async fn create(&self, key: &Key, data: Data, origin: Origin<'_>) -> Result<Document> {
        let text = rows::text(&data)?;
        let claims = Claims::of(&self.inner.indexes, key, &data);
        let (owned_key, actor, expiry) = (key.clone(), origin.actor.to_owned(), origin.expiry);
        let op = move |inner: &Inner, conn: &Connection| {
            inner.check_absent(conn, &owned_key)?;
            let by = By {
                actor: &actor,
                expiry,
            };
            let doc = inner.insert_new(conn, &owned_key, &text, by)?;
            claims.check(conn, inner, &owned_key)?;
            Ok(Written::Fresh(doc))
        };
        let written = self.write_once(key, origin.write_id, op, Written::Repeat);
        Ok(written.await?.with_data(data))
    }

    async fn put(&self, key: &Key, data: Data, origin: Origin<'_>) -> Result<Document> {
        let text = rows::text(&data)?;
        let claims = Claims::of(&self.inner.indexes, key, &data);
        let (owned_key, actor, expiry) = (key.clone(), origin.actor.to_owned(), origin.expiry);
        let op = move |inner: &Inner, conn: &Connection| {
            let by = By {
                actor: &actor,
                expiry,
            };
            let doc = inner.put(conn, &owned_key, &text, by)?;
            claims.check(conn, inner, &owned_key)?;
            Ok(Written::Fresh(doc))
        };
        let written = self.write_once(key, origin.write_id, op, Written::Repeat);
        Ok(written.await?.with_data(data))
    }

    async fn update(
        &self,
        key: &Key,
        patch: &Data,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let check = crate::unique::PatchCheck::of(&self.inner.indexes, key, patch);
        let (owned_key, patch) = (key.clone(), rows::Patch::new(patch)?);
        let (actor, expiry) = (origin.actor.to_owned(), origin.expiry);
        let op = move |inner: &Inner, conn: &Connection| {
            let by = By {
                actor: &actor,
                expiry,
            };
            let merged = inner.patch(conn, &owned_key, &patch, expected_version, by)?;
            check.check(conn, inner, &owned_key)?;
            Ok(merged)
        };
        let repeat = |doc: Document| rows::Merged::parsed(doc, 0);
        written(self.write_once(key, origin.write_id, op, repeat).await?)
    }

    async fn replace_if(
        &self,
        key: &Key,
        data: Data,
        expected_version: u64,
        origin: Origin<'_>,
    ) -> Result<Document> {
        let text = rows::text(&data)?;
        let claims = Claims::of(&self.inner.indexes, key, &data);
        let (owned_key, actor, expiry) = (key.clone(), origin.actor.to_owned(), origin.expiry);
        let op = move |inner: &Inner, conn: &Connection| {
            let current = rows::load_metadata(conn, &owned_key, inner.now())?
                .ok_or_else(|| Error::not_found(&owned_key))?;
            if current.version != expected_version {
                return Err(Error::Conflict {
                    current: current.version,
                }
                .into());
            }
            let by = By {
                actor: &actor,
                expiry,
            };
            let doc = inner.replace(conn, &owned_key, current, Data::new(), &text, by)?;
            claims.check(conn, inner, &owned_key)?;
            Ok(Written::Fresh(doc))
        };
        let written = self.write_once(key, origin.write_id, op, Written::Repeat);
        Ok(written.await?.with_data(data))
    }

    async fn delete(
        &self,
        key: &Key,
        expected_version: Option<u64>,
        origin: Origin<'_>,
    ) -> Result<bool> {
        let (owned_key, id) = (key.clone(), origin.write_id.cloned());
        let actor = origin.actor.to_owned();
        let deleted = self
            .write(move |inner, conn| {
                let call = (id.as_ref(), actor.as_str());
                remove_once(inner, conn, &owned_key, expected_version, call)
            })
            .await?;
        docstore::driver::delete_answer(key, expected_version, deleted)
    }

    async fn restore(&self, key: &Key, document: &Document, origin: Origin<'_>) -> Result<()> {
        let text = rows::text(&document.data)?;
        let claims = Claims::of(&self.inner.indexes, key, &document.data);
        let (owned_key, metadata) = (key.clone(), rows::without_data(document));
        let op = move |inner: &Inner, conn: &Connection| {
            inner.restore(conn, &owned_key, &metadata, &text)?;
            claims.check(conn, inner, &owned_key)
        };
        self.write_once(key, origin.write_id, op, drop).await
    }

    /// One immediate transaction: the writes in order, the counters through the same
    /// triggers; the first failing write rolls everything back.
    async fn write_all(
        &self,
        batch: &CheckedBatch<'_>,
        origin: Origin<'_>,
    ) -> Result<Vec<WriteOutcome>> {
        let writes = batch.writes();
        let (steps, bytes) = crate::batch::prepare(batch)?;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let (actor, id) = (origin.actor.to_owned(), origin.write_id.cloned());
        let applied = self
            .write_off_the_runtime(move |inner, conn| {
                crate::batch::apply_once(inner, conn, &steps, &actor, bytes, id.as_ref())
            })
            .await?;
        match applied {
            Answer::Applied(mut outcomes) => {
                crate::batch::attach_data(writes, &mut outcomes);
                Ok(outcomes)
            }
            // A repeat answers with the documents as they stand.
            repeat => repeat.into_outcomes(writes),
        }
    }
}
