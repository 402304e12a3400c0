//! Every write — single calls and batches alike — as one transaction in two round trips:
//! `BEGIN` with one locking read per key (`SELECT … FOR UPDATE` of the document and its
//! identities, keys in key order, so two writers never wait for each other in turn); the
//! core decides each write on what they hold ([`docstore::request::Request::decide`]); then
//! the document writes, the counters, the write identities, the change rows and `COMMIT` in
//! one pipeline ([`crate::pipeline`]). Every statement is prepared once per connection and
//! reads or writes one key through the primary key, but the change insert. A race with
//! another writer (a key inserted meanwhile, a deadlock) runs the transaction again.

use crate::error::Fail;
use crate::json::Body;
use crate::pipeline::{Open, Sent};
use crate::rows::{self, KeyArrays};
use crate::store::Inner;
use docstore::batch::Decision;
use docstore::identity::KeptIds;
use docstore::request::{Answer, KeptChange, QuotaCount, Request};
use docstore::{Document, Error, Key};
use futures_util::future::try_join_all;
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
        match transaction(inner, &client, request).await {
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
    let (open, mut read) = read(inner, client, request).await?;
    let current: Vec<Option<Document>> = request
        .keys()
        .map(|key| read.documents.remove(key))
        .collect();
    let now = inner.now();
    if request.is_repeat(&current, |key| read.kept.get(key), now) {
        return Ok(Answer::Repeat(current));
    }
    let mut quota = QuotaCount::new(inner.options.max_docs_per_site, |site| {
        read.counts.get(site).copied().unwrap_or(0)
    });
    let decisions = request.decide(&current, now, inner.options.max_doc_bytes, &mut quota)?;
    let plan = Plan::new(inner, request, &current, &decisions, (&read.kept, now))?;
    plan.send(client).await?;
    open.committed();
    Ok(Answer::applied(decisions))
}

/// Opens the transaction and reads what the request needs in the same pipeline.
async fn read<'c>(
    inner: &Inner,
    client: &'c deadpool_postgres::Client,
    request: &Request<'_>,
) -> Result<(Open<'c>, Read), Fail> {
    let (lock, count) = futures_util::future::try_join(
        client.prepare_cached(&inner.sql.lock),
        client.prepare_cached(&inner.sql.site_count),
    )
    .await?;
    let keys: BTreeSet<&Key> = request.keys().collect();
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
    let site_params: Vec<[&(dyn ToSql + Sync); 1]> = sites.iter().map(|s| [s as _]).collect();
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
/// and their identities in key order, the counters, then the change rows (the feed's lock is
/// taken last, to be held for the least time).
struct Plan<'s> {
    statements: Vec<(&'s str, Vec<Param>)>,
    changes: ChangeRows,
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
}

impl<'s> Plan<'s> {
    fn new(
        inner: &'s Inner,
        request: &Request<'_>,
        current: &[Option<Document>],
        decisions: &[Decision],
        (kept, now): (&HashMap<Key, KeptIds>, i64),
    ) -> Result<Self, Fail> {
        let sql = &inner.sql;
        let mut plan = Plan {
            statements: Vec::new(),
            changes: ChangeRows::default(),
        };
        let mut bodies: Vec<Option<Body>> = decisions
            .iter()
            .map(|decision| match decision {
                Decision::Store { document, .. } => Some(Body::of(&document.data)),
                _ => None,
            })
            .collect();
        let mut counters: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        let mut order: Vec<usize> = (0..decisions.len()).collect();
        order.sort_by_key(|&i| request.ops()[i].key());
        for &i in &order {
            let (key, decision) = (request.ops()[i].key(), &decisions[i]);
            let names = || {
                params![
                    key.site().to_owned(),
                    key.collection().to_owned(),
                    key.id().to_owned()
                ]
            };
            let mut params = names();
            let statement = match (decision, &bodies[i]) {
                (
                    Decision::Store {
                        document: d,
                        creates,
                    },
                    Some(body),
                ) => {
                    params.extend(params![body.jsonb(), body.raw(), d.updated_at]);
                    params.extend(params![d.updated_by.clone(), rows::version(d.version)?]);
                    if !creates {
                        Some(&sql.update)
                    } else {
                        params.extend(params![d.created_at, d.created_by.clone()]);
                        Some(&sql.insert)
                    }
                }
                (Decision::Remove, _) if current[i].is_some() => Some(&sql.delete),
                _ => None,
            };
            if let Some(statement) = statement {
                plan.statements.push((statement, params));
            }
            *counters.entry((key.site(), key.collection())).or_default() +=
                decision.counter_delta();
            plan.identities(sql, request, decision, (kept.get(key), now), names);
        }
        for ((site, collection), delta) in counters.into_iter().filter(|(_, d)| *d != 0) {
            let params = params![site.to_owned(), collection.to_owned(), delta];
            plan.statements.push((&sql.count, params));
        }
        for (i, decision) in decisions.iter().enumerate() {
            let (key, body) = (
                request.ops()[i].key(),
                bodies[i].take().map(|body| body.text),
            );
            let write = (decision, current[i].as_ref());
            plan.changes.push(key, write, body, (request.actor(), now));
        }
        let log = match plan.changes.kinds.len() {
            0 => return Ok(plan),
            1 => &sql.log_change,
            _ => &sql.log_changes,
        };
        let changes = std::mem::take(&mut plan.changes).params(inner);
        plan.statements.push((log, changes));
        plan.fuse(sql);
        Ok(plan)
    }

    /// The statements of a single update (document, identities, change) as the one
    /// statement that does all three ([`crate::fused`]): one answer to wait for, not three.
    fn fuse(&mut self, sql: &'s crate::sql::Statements) {
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
        sql: &'s crate::sql::Statements,
        request: &Request<'_>,
        decision: &Decision,
        (kept, now): (Option<&KeptIds>, i64),
        names: impl Fn() -> Vec<Param>,
    ) {
        let kept = match request.kept_after(decision, kept, now) {
            KeptChange::Unchanged => return,
            KeptChange::Forget => return self.statements.push((&sql.forget_ids, names())),
            KeptChange::Keep(kept) => kept,
        };
        let mut params = names();
        params.extend(params![kept.ids.encode(), kept.deleted_at]);
        self.statements.push((&sql.keep_ids, params));
        if kept.deleted_at.is_some() {
            let horizon = now.saturating_sub(docstore::identity::DELETE_IDS_KEPT_FOR_NANOS);
            self.statements.push((&sql.prune_ids, params![horizon]));
        }
    }

    /// Sends every statement and `COMMIT` in one pipeline (each prepared once per
    /// connection). A statement that fails aborts the transaction, and its `COMMIT` with it;
    /// one that could not be sent keeps `COMMIT` from going.
    async fn send(self, client: &deadpool_postgres::Client) -> Result<(), Fail> {
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

impl ChangeRows {
    /// The change of a write by `actor` (none for a check or a delete of nothing), `body` the
    /// text of the document it stored.
    fn push(
        &mut self,
        key: &Key,
        (decision, previous): (&Decision, Option<&Document>),
        body: Option<String>,
        (actor, now): (&str, i64),
    ) {
        match (decision, previous) {
            (Decision::Store { document, creates }, _) => {
                self.kinds
                    .push(if *creates { "created" } else { "updated" });
                self.versions.push(document.version as i64);
                self.created.push(Some(document.created_at));
                self.creators.push(Some(document.created_by.clone()));
                self.times.push(document.updated_at);
                self.actors.push(document.updated_by.clone());
            }
            (Decision::Remove, Some(previous)) => {
                self.kinds.push("deleted");
                self.versions.push(previous.version as i64);
                self.created.push(None);
                self.creators.push(None);
                self.times.push(now);
                self.actors.push(actor.to_owned());
            }
            _ => return,
        }
        self.keys.push(key);
        self.bodies.push(body);
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
        params.extend(params![self.actors]);
        params
    }
}
