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
    let mut attempt = 1;
    loop {
        let client = inner.pool.get().await.map_err(crate::error::pool)?;
        match transaction(inner, &client, request).await {
            Err(fail) if fail.is_race() && attempt < MAX_ATTEMPTS => attempt += 1,
            Ok(answer) => {
                inner.feed.committed();
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

/// One statement of the pipeline, with its parameters.
struct Statement<'s> {
    sql: &'s str,
    params: Vec<Box<dyn ToSql + Sync + Send>>,
}

/// Everything a request writes after its decisions, in the order it is sent.
struct Plan<'s> {
    statements: Vec<Statement<'s>>,
}

/// The change rows of a request, as the parallel arrays of `log_changes`.
#[derive(Default)]
struct ChangeRows {
    keys: KeyArrays,
    kinds: Vec<String>,
    versions: Vec<i64>,
    bodies: Vec<Option<String>>,
    created_at: Vec<Option<i64>>,
    created_by: Vec<Option<String>>,
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
        };
        let mut counters: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        let mut changes = ChangeRows::default();
        let mut bodies: Vec<Option<String>> = vec![None; decisions.len()];
        let mut order: Vec<usize> = (0..decisions.len()).collect();
        order.sort_by_key(|&i| request.ops()[i].key());
        // Documents in key order (so two transactions never wait for each other in turn).
        for &i in &order {
            let key = request.ops()[i].key();
            let names = || -> Vec<Box<dyn ToSql + Sync + Send>> {
                vec![
                    Box::new(key.site().to_owned()),
                    Box::new(key.collection().to_owned()),
                    Box::new(key.id().to_owned()),
                ]
            };
            match (&decisions[i], &current[i]) {
                (Decision::Store { document, creates }, _) => {
                    let body = Body::of(&document.data);
                    let mut params = names();
                    params.push(Box::new(body.jsonb()));
                    params.push(Box::new(body.raw()));
                    if *creates {
                        params.push(Box::new(document.created_at));
                        params.push(Box::new(document.updated_at));
                        params.push(Box::new(document.created_by.clone()));
                        params.push(Box::new(document.updated_by.clone()));
                        params.push(Box::new(rows::version(document.version)?));
                        plan.push(&sql.insert, params);
                        *counters.entry((key.site(), key.collection())).or_default() += 1;
                    } else {
                        params.push(Box::new(document.updated_at));
                        params.push(Box::new(document.updated_by.clone()));
                        params.push(Box::new(rows::version(document.version)?));
                        plan.push(&sql.update, params);
                    }
                    bodies[i] = Some(body.text);
                }
                (Decision::Remove, Some(_)) => {
                    plan.push(&sql.delete, names());
                    *counters.entry((key.site(), key.collection())).or_default() -= 1;
                }
                _ => {}
            }
            plan.identities(sql, request, &decisions[i], (kept.get(key), now), names);
        }
        // The changes in the request's order.
        for (i, decision) in decisions.iter().enumerate() {
            let key = request.ops()[i].key();
            match (decision, &current[i]) {
                (Decision::Store { document, creates }, _) => {
                    let body = bodies[i].take().expect("a stored document has its body");
                    changes.stored(key, document, *creates, body);
                }
                (Decision::Remove, Some(previous)) => {
                    changes.deleted(key, previous.version, now, request.actor());
                }
                _ => {}
            }
        }
        for ((site, collection), delta) in counters.into_iter().filter(|(_, d)| *d != 0) {
            let params: Vec<Box<dyn ToSql + Sync + Send>> = vec![
                Box::new(site.to_owned()),
                Box::new(collection.to_owned()),
                Box::new(delta),
            ];
            plan.push(&sql.count, params);
        }
        if !changes.kinds.is_empty() {
            plan.push(&sql.log_changes, changes.params(inner));
        }
        Ok(plan)
    }

    fn push(&mut self, sql: &'s str, params: Vec<Box<dyn ToSql + Sync + Send>>) {
        self.statements.push(Statement { sql, params });
    }

    /// Keeps the caller's identity on a key the request wrote or deleted; a delete without
    /// one forgets the key's identities (they were the deleted document's).
    fn identities(
        &mut self,
        sql: &'s crate::sql::Statements,
        request: &Request<'_>,
        decision: &Decision,
        (kept, now): (Option<&KeptIds>, i64),
        names: impl Fn() -> Vec<Box<dyn ToSql + Sync + Send>>,
    ) {
        let kept = match request.kept_after(decision, kept, now) {
            KeptChange::Unchanged => return,
            KeptChange::Forget => return self.push(&sql.forget_ids, names()),
            KeptChange::Keep(kept) => kept,
        };
        let mut params = names();
        params.push(Box::new(kept.ids.encode()));
        params.push(Box::new(kept.deleted_at));
        self.push(&sql.keep_ids, params);
        if kept.deleted_at.is_some() {
            let horizon = now.saturating_sub(docstore::identity::DELETE_IDS_KEPT_FOR_NANOS);
            self.push(&sql.prune_ids, vec![Box::new(horizon)]);
        }
    }

    /// Sends every statement and `COMMIT` in one pipeline (each prepared once per
    /// connection). A statement that fails aborts the transaction, and its `COMMIT` with it;
    /// one that could not be sent keeps `COMMIT` from going.
    async fn send(self, client: &deadpool_postgres::Client) -> Result<(), Fail> {
        let prepared =
            try_join_all(self.statements.iter().map(|s| client.prepare_cached(s.sql))).await?;
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = self
            .statements
            .iter()
            .map(|s| {
                s.params
                    .iter()
                    .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                    .collect()
            })
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
    fn stored(&mut self, key: &Key, document: &Document, creates: bool, body: String) {
        self.push(
            key,
            if creates { "created" } else { "updated" },
            document.version,
        );
        self.bodies.push(Some(body));
        self.created_at.push(Some(document.created_at));
        self.created_by.push(Some(document.created_by.clone()));
        self.times.push(document.updated_at);
        self.actors.push(document.updated_by.clone());
    }

    fn deleted(&mut self, key: &Key, version: u64, now: i64, actor: &str) {
        self.push(key, "deleted", version);
        self.bodies.push(None);
        self.created_at.push(None);
        self.created_by.push(None);
        self.times.push(now);
        self.actors.push(actor.to_owned());
    }

    fn push(&mut self, key: &Key, kind: &str, version: u64) {
        self.keys.sites.push(key.site().to_owned());
        self.keys.collections.push(key.collection().to_owned());
        self.keys.ids.push(key.id().to_owned());
        self.kinds.push(kind.to_owned());
        self.versions.push(version as i64);
    }

    fn params(self, inner: &Inner) -> Vec<Box<dyn ToSql + Sync + Send>> {
        vec![
            Box::new(inner.feed.lock_key),
            Box::new(inner.feed.channel.clone()),
            Box::new(self.keys.sites),
            Box::new(self.keys.collections),
            Box::new(self.keys.ids),
            Box::new(self.kinds),
            Box::new(self.versions),
            Box::new(self.bodies),
            Box::new(self.created_at),
            Box::new(self.created_by),
            Box::new(self.times),
            Box::new(self.actors),
        ]
    }
}
