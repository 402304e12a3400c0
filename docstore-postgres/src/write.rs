//! Every write — single calls and batches alike — as one transaction in two round trips:
//! `BEGIN` with one locking read per key (`SELECT … FOR UPDATE` of the document and its
//! identities, keys in key order, so two writers never wait for each other in turn); the
//! core decides each write on what they hold ([`docstore::request::Request::decide`]); then
//! the document writes, the counters, the write identities, the change rows and `COMMIT` in
//! one pipeline ([`crate::pipeline`]). Every statement is prepared once per connection and
//! reads or writes one key through the primary key, but the change insert. A race with
//! another writer (a key inserted meanwhile, a deadlock) runs the transaction again. An
//! expired document at a key is removed first, with its change (`docs/contract.md`,
//! "Expiry"); a unique value claimed twice fails the transaction ([`crate::unique`]).

use crate::error::Fail;
use crate::json::Body;
use crate::pipeline::{Open, Sent};
use crate::rows::{self, KeyArrays};
use crate::store::Inner;
use docstore::batch::Decision;
use docstore::identity::KeptIds;
use docstore::index::unique;
use docstore::request::{Answer, Found, KeptChange, Logged, QuotaCount, Request};
use docstore::{Document, Error, Key};
use futures_util::future::try_join_all;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tokio_postgres::types::ToSql;

/// How many times a transaction that raced another writer runs before the write gives up
/// ([`Error::Unavailable`]).
const MAX_ATTEMPTS: usize = 32;

/// The most expired documents one transaction of the sweep removes.
const SWEEP_CHUNK: usize = 200;

/// Runs `request` in a transaction, again after a race.
pub(crate) async fn run(inner: &Inner, request: &Request<'_>) -> Result<Answer, Error> {
    if let Some(answer) = crate::create::run(inner, request)
        .await
        .map_err(Fail::into_error)?
    {
        inner.feed.commits.committed();
        return Ok(answer);
    }
    let mut attempt = 1;
    loop {
        let client = inner.pool.get().await.map_err(crate::error::pool)?;
        let result = transaction(inner, &client, request).await;
        drop(client);
        match result {
            Err(Fail::Stale(keys)) if attempt < MAX_ATTEMPTS => {
                match remove_expired(inner, &keys).await {
                    Err(fail) if !fail.is_race() => return Err(fail.into_error()),
                    _ => attempt += 1,
                }
            }
            Err(fail) if fail.is_race() && attempt < MAX_ATTEMPTS => attempt += 1,
            Ok(answer) => {
                inner.feed.commits.committed();
                return Ok(answer);
            }
            Err(fail) => return Err(fail.into_error()),
        }
    }
}

/// What a request's keys hold, read and locked at the start of its transaction, and with
/// `max_docs_per_site` what each of its sites counts (soft: creates racing in other
/// transactions are not counted).
struct Read {
    documents: HashMap<Key, Document>,
    kept: HashMap<Key, KeptIds>,
    counts: HashMap<String, u64>,
}

async fn transaction(
    inner: &Inner,
    client: &deadpool_postgres::Client,
    request: &Request<'_>,
) -> Result<Answer, Fail> {
    let now = inner.now();
    let (open, mut read) = read(inner, client, request.keys().collect(), now).await?;
    let found = request.keys().map(|key| read.documents.remove(key));
    let found = Found::at(found.collect(), now);
    if request.is_repeat(&found.current, |key| read.kept.get(key), now) {
        return Ok(Answer::Repeat(found.current));
    }
    let mut quota = QuotaCount::new(inner.options.max_docs_per_site, |site| {
        read.counts.get(site).copied().unwrap_or(0)
    });
    let decisions = request.decide(&found.current, now, inner.options.max_doc_bytes, &mut quota)?;
    let mut plan = Plan::new(inner, now);
    let mut bodies: Vec<Option<Body>> = decisions
        .iter()
        .map(|decision| match decision {
            Decision::Store { document, .. } => Some(Body::of(&document.data)),
            _ => None,
        })
        .collect();
    let mut order: Vec<usize> = (0..decisions.len()).collect();
    order.sort_by_key(|&i| request.ops()[i].key());
    for i in order {
        let key = request.ops()[i].key();
        // An expired document's identities went with it.
        let kept = match &found.expired[i] {
            Some(_) => {
                plan.expire(key);
                None
            }
            None => read.kept.get(key),
        };
        let write = (&decisions[i], found.current[i].as_ref(), bodies[i].as_ref());
        plan.write(request, key, write, kept)?;
    }
    for change in request.changes(&decisions, &found, now) {
        let body = change.document.and(bodies[change.position].take());
        plan.changes.push(&change, body.map(|body| body.text));
    }
    match plan.send(client).await {
        Err(violation) if violation.is_unique_violation() => {
            drop(open);
            let judged = crate::unique::judge(inner, client, request, &decisions, now).await;
            return Err(match judged {
                Ok(Some(fail)) | Err(fail) => fail,
                Ok(None) => violation,
            });
        }
        sent => sent?,
    }
    open.committed();
    Ok(Answer::applied(decisions))
}

/// Removes the documents at `keys` that are expired once locked, each with its change, in one
/// transaction, and the unique claims left at keys holding no document; how many documents
/// it removed.
pub(crate) async fn remove_expired(inner: &Inner, keys: &[Key]) -> Result<usize, Fail> {
    let client = inner.pool.get().await.map_err(crate::error::pool)?;
    let now = inner.now();
    let (open, mut read) = read(inner, &client, keys.iter().collect(), now).await?;
    let mut plan = Plan::new(inner, now);
    let mut removed = 0;
    for key in keys.iter().collect::<BTreeSet<_>>() {
        match read.documents.remove(key) {
            Some(doc) if doc.is_expired(now) => {
                plan.expire(key);
                plan.changes
                    .push(&Logged::expired(removed, key, &doc), None);
                removed += 1;
            }
            Some(_) => {}
            None => plan.release_all(key),
        }
    }
    plan.send(&client).await?;
    open.committed();
    inner.feed.commits.committed();
    Ok(removed)
}

/// Removes up to `limit` expired documents, longest expired first, in transactions of at most
/// [`SWEEP_CHUNK`] (`docs/contract.md`, "Expiry"); how many it removed.
pub(crate) async fn sweep(inner: &Inner, limit: usize) -> Result<usize, Fail> {
    let mut swept = 0;
    while swept < limit {
        let chunk = SWEEP_CHUNK.min(limit - swept);
        let client = inner.pool.get().await.map_err(crate::error::pool)?;
        let statement = client.prepare_cached(&inner.sql.expired).await?;
        let params: [&(dyn ToSql + Sync); 2] = [&inner.now(), &(chunk as i64)];
        let keys = client.query(&statement, &params).await?;
        drop(client);
        let keys: Vec<Key> = keys.iter().map(rows::key).collect::<Result<_, _>>()?;
        swept += remove_expired(inner, &keys).await?;
        if keys.len() < chunk {
            break;
        }
    }
    Ok(swept)
}

/// Opens the transaction and locks and reads `keys` in the same pipeline.
async fn read<'c>(
    inner: &Inner,
    client: &'c deadpool_postgres::Client,
    keys: BTreeSet<&Key>,
    now: i64,
) -> Result<(Open<'c>, Read), Fail> {
    let (lock, count) = futures_util::future::try_join(
        client.prepare_cached(&inner.sql.lock),
        client.prepare_cached(&inner.sql.site_count),
    )
    .await?;
    let names: Vec<[&str; 3]> = keys
        .iter()
        .map(|key| [key.site(), key.collection(), key.id()])
        .collect();
    let sites: Vec<&str> = match inner.options.max_docs_per_site {
        Some(_) => keys.iter().map(|key| key.site()).collect::<BTreeSet<_>>(),
        None => BTreeSet::new(),
    }
    .into_iter()
    .collect();
    let key_params: Vec<[&(dyn ToSql + Sync); 3]> = names
        .iter()
        .map(|[s, c, i]| [s as _, c as _, i as _])
        .collect();
    let site_params: Vec<[&(dyn ToSql + Sync); 2]> =
        sites.iter().map(|s| [s as _, &now as _]).collect();
    let (open, begin) = Open::begin(client).await;
    let mut locked = Vec::with_capacity(names.len());
    for params in &key_params {
        locked.push(Sent::now(client.query_one(&lock, params)).await);
    }
    let mut counted = Vec::with_capacity(sites.len());
    for params in &site_params {
        counted.push(Sent::now(client.query_one(&count, params)).await);
    }
    begin.answer().await?;
    let mut read = Read {
        documents: HashMap::new(),
        kept: HashMap::new(),
        counts: HashMap::new(),
    };
    for (key, sent) in keys.into_iter().zip(locked) {
        let (document, kept) = rows::locked(&sent.answer().await?)?;
        if let Some(document) = document {
            read.documents.insert(key.clone(), document);
        }
        if let Some(kept) = kept {
            read.kept.insert(key.clone(), kept);
        }
    }
    for (site, sent) in sites.iter().zip(counted) {
        let count: i64 = sent.answer().await?.try_get(0)?;
        read.counts.insert((*site).to_owned(), count as u64);
    }
    Ok((open, read))
}

/// A statement's parameter, owned by the plan until the pipeline is sent.
type Param = Box<dyn ToSql + Sync + Send>;

/// Parameters as [`Param`]s.
macro_rules! params {
    ($($param:expr),* $(,)?) => { vec![$(Box::new($param) as Param),*] };
}

/// Everything a request writes after its decisions, in the order it is sent: the documents
/// and their identities in key order, the unique claims released, then those claimed (so a
/// request may move a value between its documents), the counters, then the change rows (the
/// feed's lock is taken last, to be held for the least time).
struct Plan<'s> {
    inner: &'s Inner,
    now: i64,
    statements: Vec<(&'s str, Vec<Param>)>,
    releases: Vec<(&'s str, Vec<Param>)>,
    claims: Vec<(&'s str, Vec<Param>)>,
    counters: BTreeMap<(String, String), i64>,
    changes: ChangeRows,
}

/// A key's names as the first three parameters of a statement.
fn names(key: &Key) -> Vec<Param> {
    params![
        key.site().to_owned(),
        key.collection().to_owned(),
        key.id().to_owned()
    ]
}

impl<'s> Plan<'s> {
    fn new(inner: &'s Inner, now: i64) -> Self {
        Plan {
            inner,
            now,
            statements: Vec::new(),
            releases: Vec::new(),
            claims: Vec::new(),
            counters: BTreeMap::new(),
            changes: ChangeRows::default(),
        }
    }

    /// Removes the expired document at `key` with its identities and unique claims, before
    /// the write on its key (`docs/contract.md`, "Expiry"; its change is the caller's).
    fn expire(&mut self, key: &Key) {
        let sql = &self.inner.sql;
        self.statements.push((&sql.delete, names(key)));
        self.statements.push((&sql.forget_ids, names(key)));
        self.release_all(key);
        self.count(key, -1);
    }

    /// Releases every claim of the document at `key` when its collection has unique indexes.
    fn release_all(&mut self, key: &Key) {
        let indexes = self.inner.options.indexes.for_collection(key.collection());
        if indexes.iter().any(|index| index.is_unique()) {
            self.releases
                .push((&self.inner.sql.release_claims, names(key)));
        }
    }

    fn count(&mut self, key: &Key, delta: i64) {
        let collection = (key.site().to_owned(), key.collection().to_owned());
        *self.counters.entry(collection).or_default() += delta;
    }

    /// The statements of write `decision` at `key`, where `current` was (the live document),
    /// `body` the text of the document it stores and `kept` the identities the key keeps.
    fn write(
        &mut self,
        request: &Request<'_>,
        key: &Key,
        (decision, current, body): (&Decision, Option<&Document>, Option<&Body>),
        kept: Option<&KeptIds>,
    ) -> Result<(), Fail> {
        let sql = &self.inner.sql;
        let mut params = names(key);
        let statement = match (decision, body) {
            (
                Decision::Store {
                    document: d,
                    creates,
                },
                Some(body),
            ) => {
                params.extend(params![body.jsonb(), body.raw(), d.updated_at]);
                params.extend(params![d.updated_by.clone(), rows::version(d.version)?]);
                params.extend(params![d.expires_at]);
                if !creates {
                    Some(&sql.update)
                } else {
                    params.extend(params![d.created_at, d.created_by.clone()]);
                    Some(&sql.insert)
                }
            }
            (Decision::Remove, _) if current.is_some() => Some(&sql.delete),
            _ => None,
        };
        if let Some(statement) = statement {
            self.statements.push((statement, params));
        }
        self.count(key, decision.counter_delta());
        self.claims(key, decision, current);
        self.identities(request, key, decision, kept);
        Ok(())
    }

    /// Claims the unique values the write gives its document and releases those it drops
    /// ([`crate::unique`]).
    fn claims(&mut self, key: &Key, decision: &Decision, current: Option<&Document>) {
        let after = match decision {
            Decision::Store { document, .. } => Some(document),
            Decision::Remove => None,
            Decision::Keep => return,
        };
        let indexes = self.inner.options.indexes.for_collection(key.collection());
        let sql = &self.inner.sql;
        for (index, claim) in unique::claim_changes(indexes, current, after) {
            let mut params = names(key);
            params.extend(params![crate::keys::name(index.declaration())]);
            if let Some(claim) = claim {
                let mut claimed = names(key);
                claimed.extend(params![crate::keys::name(index.declaration()), claim]);
                self.claims.push((&sql.claim, claimed));
            }
            self.releases.push((&sql.release_claim, params));
        }
    }

    /// The statements of a single update (document, identities, change) as the one
    /// statement that does all three ([`crate::fused`]): one answer to wait for, not three.
    fn fuse(&mut self) {
        let sql = &self.inner.sql;
        let Some(fused) = &sql.update_fused else {
            return;
        };
        let is = |i: usize, statement: &str| std::ptr::eq(self.statements[i].0, statement);
        let shape = self.statements.len() == 3
            && is(0, &sql.update)
            && is(1, &sql.keep_ids)
            && is(2, &sql.log_change);
        if shape {
            let params = self.statements.drain(..).flat_map(|(_, p)| p).collect();
            self.statements.push((fused.as_str(), params));
        }
    }

    /// Keeps the caller's identity on a key the request wrote or deleted; a delete without
    /// one forgets the key's identities (they were the deleted document's).
    fn identities(
        &mut self,
        request: &Request<'_>,
        key: &Key,
        decision: &Decision,
        kept: Option<&KeptIds>,
    ) {
        let sql = &self.inner.sql;
        let kept = match request.kept_after(decision, kept, self.now) {
            KeptChange::Unchanged => return,
            KeptChange::Forget => return self.statements.push((&sql.forget_ids, names(key))),
            KeptChange::Keep(kept) => kept,
        };
        let mut params = names(key);
        params.extend(params![kept.ids.encode(), kept.deleted_at]);
        self.statements.push((&sql.keep_ids, params));
        if kept.deleted_at.is_some() {
            let horizon = self
                .now
                .saturating_sub(docstore::identity::DELETE_IDS_KEPT_FOR_NANOS);
            self.statements.push((&sql.prune_ids, params![horizon]));
        }
    }

    /// Sends every statement, the counters, the change rows and `COMMIT` in one pipeline
    /// (each prepared once per connection). A statement that fails aborts the transaction,
    /// and its `COMMIT` with it; one that could not be sent keeps `COMMIT` from going.
    async fn send(mut self, client: &deadpool_postgres::Client) -> Result<(), Fail> {
        let sql = &self.inner.sql;
        self.statements.append(&mut self.releases);
        self.statements.append(&mut self.claims);
        for ((site, collection), delta) in std::mem::take(&mut self.counters) {
            if delta != 0 {
                self.statements
                    .push((&sql.count, params![site, collection, delta]));
            }
        }
        let log = match self.changes.kinds.len() {
            0 => None,
            1 => Some(&sql.log_change),
            _ => Some(&sql.log_changes),
        };
        if let Some(log) = log {
            let changes = std::mem::take(&mut self.changes).params(self.inner);
            self.statements.push((log, changes));
        }
        self.fuse();
        let prepared = try_join_all(
            self.statements
                .iter()
                .map(|(sql, _)| client.prepare_cached(sql)),
        )
        .await?;
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = self
            .statements
            .iter()
            .map(|(_, params)| params.iter().map(|p| p.as_ref() as _).collect())
            .collect();
        let mut sent = Vec::with_capacity(prepared.len());
        for (statement, params) in prepared.iter().zip(&params) {
            sent.push(Sent::now(client.execute(statement, params)).await);
        }
        let commit = match sent.iter_mut().any(Sent::failed) {
            true => None,
            false => Some(Sent::now(client.batch_execute("COMMIT")).await),
        };
        for statement in sent {
            statement.answer().await?;
        }
        commit
            .expect("sent when every statement was")
            .answer()
            .await?;
        Ok(())
    }
}

/// The change rows of a request, in its order, as the parallel arrays of `log_changes`.
#[derive(Default)]
struct ChangeRows {
    keys: KeyArrays,
    kinds: Vec<&'static str>,
    versions: Vec<i64>,
    bodies: Vec<Option<String>>,
    created: Vec<Option<i64>>,
    creators: Vec<Option<String>>,
    times: Vec<i64>,
    actors: Vec<String>,
    expires: Vec<Option<i64>>,
    previous: Vec<Option<String>>,
}

impl ChangeRows {
    /// The row of `change`, `body` the text of the document it stored.
    fn push(&mut self, change: &Logged<'_>, body: Option<String>) {
        let document = change.document;
        self.keys.push(change.key);
        self.kinds.push(change.kind.as_str());
        self.versions.push(change.version as i64);
        self.bodies.push(body);
        self.created.push(document.map(|d| d.created_at));
        self.creators.push(document.map(|d| d.created_by.clone()));
        self.times.push(change.time);
        self.actors.push(change.actor.to_owned());
        self.expires.push(document.and_then(|d| d.expires_at));
        let previous = change.previous.map(docstore::feed::previous_text);
        self.previous.push(previous);
    }

    fn params(self, inner: &Inner) -> Vec<Param> {
        let feed = &inner.feed;
        let keys = self.keys;
        let mut params = params![feed.lock_key, feed.channel.clone(), keys.sites];
        params.extend(params![
            keys.collections,
            keys.ids,
            self.kinds,
            self.versions
        ]);
        params.extend(params![
            self.bodies,
            self.created,
            self.creators,
            self.times
        ]);
        params.extend(params![self.actors, self.expires, self.previous]);
        params
    }
}
