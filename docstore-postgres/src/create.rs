//! A `create` as one statement, in one round trip: the insert goes first, and only a key that
//! turns out taken costs the read.
//!
//! On an empty key a create's outcome is known before anything is read: the core decides it
//! on no document ([`Request::decide`]), and a create is a repeat only of a standing
//! document ([`Request::is_repeat`]). So one statement — committed on its own, no `BEGIN` —
//! does what the transaction of [`crate::write`] would: locks the key's kept identities,
//! inserts the document, moves the collection's counter, keeps the call's identity ahead of
//! what the key kept ([`KeptIds::written`](docstore::identity::KeptIds::written), computed by
//! the server from the row it locked) and logs the change under the feed's lock, in that
//! order (the order every write takes its locks in, so no two writers wait for each other in
//! turn). When the key holds a document the insert fails, nothing is applied, and the
//! request runs as every other write does: read, then decided (`AlreadyExists`, or a repeat of
//! a create whose answer was lost).
//!
//! Not taken for a site under a document quota (its count must be read), for a collection
//! with a unique index, for a document with an expiry, or for a call without an identity.

use crate::error::Fail;
use crate::json::Body;
use crate::store::Inner;
use docstore::Document;
use docstore::batch::Decision;
use docstore::identity::KEPT_WRITE_IDS;
use docstore::request::{Answer, Call, QuotaCount, Request};
use tokio_postgres::types::ToSql;

/// The statement, for the store's schema `s` (quoted). Parameters: `$1`–`$3` the key, `$4`
/// the JSONB text, `$5` the exact text when JSONB cannot hold it, `$6`/`$7` updated at/by,
/// `$8` the version, `$9`/`$10` created at/by, `$11` the call's identity, `$12` the feed's
/// lock, `$13` its channel. Each step reads the one before, so they run in this order.
pub(crate) fn statement(s: &str) -> String {
    let key = "site = $1::text AND collection = $2::text AND id = $3::text";
    format!(
        "WITH kept_before AS MATERIALIZED (SELECT 1 FROM {s}.write_ids WHERE {key} FOR UPDATE), \
         document AS (INSERT INTO {s}.documents (site, collection, id, data, raw, updated_at, \
         updated_by, version, created_at, created_by) SELECT $1::text, $2::text, $3::text, \
         $4::text::jsonb, $5::text, $6::bigint, $7::text, $8::bigint, $9::bigint, $10::text \
         FROM (SELECT count(*) FROM kept_before) AS locked RETURNING 1), \
         counted AS (INSERT INTO {s}.counters AS c (site, collection, n) \
         SELECT $1::text, $2::text, 1 FROM document \
         ON CONFLICT (site, collection) DO UPDATE SET n = c.n + 1 RETURNING 1), \
         kept AS (INSERT INTO {s}.write_ids AS w (site, collection, id, ids, deleted_at) \
         SELECT $1::text, $2::text, $3::text, $11::text, NULL FROM counted \
         ON CONFLICT (site, collection, id) DO UPDATE SET ids = array_to_string(\
         (ARRAY[$11::text] || string_to_array(w.ids, ' '))[1:{KEPT_WRITE_IDS}], ' '), \
         deleted_at = NULL RETURNING 1), \
         lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($12::bigint), \
         pg_notify($13::text, '') FROM kept) \
         INSERT INTO {s}.changes (position, site, collection, id, kind, version, body, \
         created_at, created_by, time, actor) SELECT nextval('{s}.change_positions'), \
         $1::text, $2::text, $3::text, 'created', $8::bigint, coalesce($5::text, $4::text), \
         $9::bigint, $10::text, $6::bigint, $7::text FROM lock"
    )
}

/// The answer of `request` when it is a create this path takes and its key was empty;
/// `None` when the path does not apply or the key is taken (nothing was written: the caller
/// runs the transaction).
pub(crate) async fn run(inner: &Inner, request: &Request<'_>) -> Result<Option<Answer>, Fail> {
    let (Call::Create { key, .. }, Some(id)) = (request.call(), request.id()) else {
        return Ok(None);
    };
    let unique = inner.options.indexes.for_collection(key.collection());
    if inner.options.max_docs_per_site.is_some() || unique.iter().any(|i| i.is_unique()) {
        return Ok(None);
    }
    let empty: [Option<Document>; 1] = [None];
    let mut quota = QuotaCount::unlimited();
    let max_bytes = inner.options.max_doc_bytes;
    let Ok(decisions) = request.decide(&empty, inner.now(), max_bytes, &mut quota) else {
        return Ok(None);
    };
    let [Decision::Store { document: doc, .. }] = decisions.as_slice() else {
        return Ok(None);
    };
    if doc.expires_at.is_some() {
        return Ok(None);
    }
    let body = Body::of(&doc.data);
    let (data, raw, version) = (body.jsonb(), body.raw(), crate::rows::version(doc.version)?);
    let feed = &inner.feed;
    let params: [&(dyn ToSql + Sync); 13] = [
        &key.site(),
        &key.collection(),
        &key.id(),
        &data,
        &raw,
        &doc.updated_at,
        &doc.updated_by,
        &version,
        &doc.created_at,
        &doc.created_by,
        &id.as_str(),
        &feed.lock_key,
        &feed.channel,
    ];
    let client = inner.pool.get().await.map_err(crate::error::pool)?;
    let statement = client.prepare_cached(&inner.sql.write.create).await?;
    match client.execute(&statement, &params).await {
        Ok(_) => Ok(Some(Answer::applied(decisions))),
        Err(err) => {
            let fail = Fail::from(err);
            if fail.is_race() { Ok(None) } else { Err(fail) }
        }
    }
}
