//! Every write — single calls and batches alike — as one transaction in two round trips:
//! `BEGIN` with one locking read per key (`SELECT … FOR UPDATE` of the document and its
//! identities, keys in key order, so two writers never wait for each other in turn); the
//! core decides each write on what they hold ([`docstore::request::Request::decide`]) and
//! lists what the request writes, in order ([`docstore::request::Plan`]); each of those
//! effects becomes its statement here, and the document writes, the write identities, the
//! unique claims, the counters, the change rows and `COMMIT` go in one pipeline
//! ([`crate::pipeline`]). Every statement is prepared once per connection and
//! reads or writes one key through the primary key, but the change insert. A race with
//! another writer (a key inserted meanwhile, a deadlock) runs the transaction again. An
//! expired document at a key is removed first, with its change (`docs/contract.md`,
//! "Expiry"); a unique value claimed twice fails the transaction ([`crate::unique`]).

use crate::error::Fail;
use crate::json::Body;
use crate::pipeline::{Open, Sent};
use crate::rows::{self, KeyArrays};
use crate::store::Inner;
use docstore::driver::{Swept, sweep_in_chunks};
use docstore::identity::KeptIds;
use docstore::request::{Answer, Effect, Found, Logged, Plan, QuotaCount, Request};
use docstore::{Document, Error, Key};
use futures_util::future::try_join_all;
use std::collections::{BTreeSet, HashMap};
use tokio_postgres::types::ToSql;

/// How many times a transaction that raced another writer runs before the write gives up
/// ([`Error::Unavailable`]).
const MAX_ATTEMPTS: usize = 32;

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
    let kept = |key: &Key| read.kept.get(key);
    let indexes = &inner.options.indexes;
    let plan = Plan::new(request, &decisions, &found, kept, indexes, now);
    match Statements::of(inner, &plan)?.send(client).await {
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
    let (open, read) = read(inner, &client, keys.iter().collect(), now).await?;
    let found = keys.iter().map(|key| (key, read.documents.get(key)));
    let plan = Plan::expiring(found, &inner.options.indexes, now);
    Statements::of(inner, &plan)?.send(&client).await?;
    open.committed();
    inner.feed.commits.committed();
    Ok(plan.expired())
}

/// Removes up to `limit` expired documents, longest expired first, in transactions of at most
/// [`SWEEP_CHUNK`](docstore::driver::SWEEP_CHUNK) (`docs/contract.md`, "Expiry"); how many it
/// removed.
pub(crate) async fn sweep(inner: &Inner, limit: usize) -> Result<usize, Fail> {
    sweep_in_chunks(limit, |chunk| async move {
        let client = inner.pool.get().await.map_err(crate::error::pool)?;
        let statement = client.prepare_cached(&inner.sql.read.expired).await?;
        let params: [&(dyn ToSql + Sync); 2] = [&inner.now(), &(chunk as i64)];
        let keys = client.query(&statement, &params).await?;
        drop(client);
        let keys: Vec<Key> = keys.iter().map(rows::key).collect::<Result<_, _>>()?;
        let removed = remove_expired(inner, &keys).await?;
        Ok(Swept {
            found: keys.len(),
            removed,
        })
    })
    .await
}

/// Opens the transaction and locks and reads `keys` in the same pipeline.
async fn read<'c>(
    inner: &Inner,
    client: &'c deadpool_postgres::Client,
    keys: BTreeSet<&Key>,
    now: i64,
) -> Result<(Open<'c>, Read), Fail> {
    let (lock, count) = futures_util::future::try_join(
        client.prepare_cached(&inner.sql.write.lock),
        client.prepare_cached(&inner.sql.read.site_count),
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

/// A statement's parameter, owned by the statements until the pipeline is sent.
type Param = Box<dyn ToSql + Sync + Send>;

/// Parameters as [`Param`]s.
macro_rules! params {
    ($($param:expr),* $(,)?) => { vec![$(Box::new($param) as Param),*] };
}

/// A key's names as the first three parameters of a statement.
fn names(key: &Key) -> Vec<Param> {
    params![
        key.site().to_owned(),
        key.collection().to_owned(),
        key.id().to_owned()
    ]
}

/// The statements of a [`Plan`], in its order, the change rows as one statement last.
struct Statements<'s> {
    inner: &'s Inner,
    statements: Vec<(&'s str, Vec<Param>)>,
}

impl<'s> Statements<'s> {
    /// Each effect of `plan` as its statement (the changes as one).
    fn of(inner: &'s Inner, plan: &Plan<'_>) -> Result<Self, Fail> {
        let sql = &inner.sql.write;
        let mut statements = Vec::with_capacity(plan.effects().len());
        let mut changes = ChangeRows::default();
        let mut kept = KeptRows::gathered(plan);
        // The text of each stored document by its write's position, for its change row.
        let mut texts = HashMap::new();
        for effect in plan.effects() {
            match effect {
                Effect::KeepIds { key, kept: ids } if kept.is_some() => {
                    kept.as_mut().expect("gathered").push(key, ids);
                }
                Effect::Store {
                    position,
                    key,
                    document,
                    creates,
                } => {
                    let body = Body::of(&document.data);
                    statements.push(store(sql, key, document, *creates, &body)?);
                    texts.insert(*position, body.text);
                }
                Effect::Log(change) => {
                    let body = change.document.and_then(|_| texts.remove(&change.position));
                    changes.push(change, body);
                }
                other => statements.push(statement(sql, &inner.columns, other)),
            }
        }
        if let Some(kept) = kept {
            statements.push((sql.keep_many_ids.as_str(), kept.params()));
        }
        let log = match changes.kinds.len() {
            0 => None,
            1 => Some(&sql.log_change),
            _ => Some(&sql.log_changes),
        };
        if let Some(log) = log {
            statements.push((log.as_str(), changes.params(inner)));
        }
        Ok(Statements { inner, statements })
    }

    /// The statements of a single update (document, identities, change) as the one
    /// statement that does all three ([`crate::fused`]): one answer to wait for, not three.
    fn fuse(&mut self) {
        let sql = &self.inner.sql.write;
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

    /// Sends every statement and `COMMIT` in one pipeline (each prepared once per
    /// connection). A statement that fails aborts the transaction, and its `COMMIT` with it;
    /// one that could not be sent keeps `COMMIT` from going.
    async fn send(mut self, client: &deadpool_postgres::Client) -> Result<(), Fail> {
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

/// The insert (`creates`) or update storing `d` at `key`, `body` its data's text.
fn store<'s>(
    sql: &'s crate::sql::Writes,
    key: &Key,
    d: &Document,
    creates: bool,
    body: &Body,
) -> Result<(&'s str, Vec<Param>), Fail> {
    let mut params = names(key);
    params.extend(params![body.jsonb(), body.raw(), d.updated_at]);
    params.extend(params![d.updated_by.clone(), rows::version(d.version)?]);
    params.extend(params![d.expires_at]);
    if !creates {
        return Ok((&sql.update, params));
    }
    params.extend(params![d.created_at, d.created_by.clone()]);
    Ok((&sql.insert, params))
}

/// The statement of `effect`, one that neither stores a document nor logs a change.
fn statement<'s>(
    sql: &'s crate::sql::Writes,
    columns: &crate::keys::Columns,
    effect: &Effect<'_>,
) -> (&'s str, Vec<Param>) {
    let with_key = |statement: &'s String, key: &Key, more: Vec<Param>| {
        let mut params = names(key);
        params.extend(more);
        (statement.as_str(), params)
    };
    match effect {
        Effect::Remove { key } => with_key(&sql.delete, key, params![]),
        Effect::ForgetIds { key } => with_key(&sql.forget_ids, key, params![]),
        Effect::KeepIds { key, kept } => {
            let kept = params![kept.ids.encode(), kept.deleted_at];
            with_key(&sql.keep_ids, key, kept)
        }
        Effect::PruneIds { before } => (&sql.prune_ids, params![*before]),
        Effect::ReleaseAll { key } => with_key(&sql.release_claims, key, params![]),
        Effect::Release { key, index } => {
            let index = params![columns.name(index).into_owned()];
            with_key(&sql.release_claim, key, index)
        }
        Effect::Claim { key, index, value } => {
            let claim = params![columns.name(index).into_owned(), value.clone()];
            with_key(&sql.claim, key, claim)
        }
        Effect::Count {
            site,
            collection,
            delta,
        } => {
            let counted = params![site.to_string(), collection.to_string(), *delta];
            (&sql.count, counted)
        }
        Effect::Store { .. } | Effect::Log(_) => unreachable!("mapped by Statements::of"),
    }
}

/// The identities a request keeps at several keys, as the parallel arrays of
/// `keep_many_ids`: one statement for a batch instead of one a key.
struct KeptRows {
    keys: KeyArrays,
    ids: Vec<String>,
    deleted_at: Vec<Option<i64>>,
}

impl KeptRows {
    /// Empty rows to gather `plan`'s identities in, when it keeps them at more than one key
    /// and each key once, with nothing forgotten or pruned: then no other statement of the
    /// plan touches those rows, and sending them together after the documents changes no
    /// outcome. `None`: one statement a key, in the plan's order.
    fn gathered(plan: &Plan<'_>) -> Option<Self> {
        let mut keys = BTreeSet::new();
        for effect in plan.effects() {
            match effect {
                Effect::KeepIds { key, .. } if keys.insert(*key) => {}
                Effect::KeepIds { .. } | Effect::ForgetIds { .. } | Effect::PruneIds { .. } => {
                    return None;
                }
                _ => {}
            }
        }
        (keys.len() > 1).then(|| KeptRows {
            keys: KeyArrays::default(),
            ids: Vec::with_capacity(keys.len()),
            deleted_at: Vec::with_capacity(keys.len()),
        })
    }

    fn push(&mut self, key: &Key, kept: &KeptIds) {
        self.keys.push(key);
        self.ids.push(kept.ids.encode());
        self.deleted_at.push(kept.deleted_at);
    }

    fn params(self) -> Vec<Param> {
        let keys = self.keys;
        params![
            keys.sites,
            keys.collections,
            keys.ids,
            self.ids,
            self.deleted_at
        ]
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
