//! Every write — single calls and batches alike — as one transaction: lock the documents it
//! touches (`SELECT … FOR UPDATE`, in key order), let the core decide each write on what they
//! hold ([`docstore::request::Request::decide`]), then send the document writes (`UPDATE … WHERE
//! version = $n`, `INSERT`, `DELETE`), the counters, the write identities and the change rows
//! in one pipeline, and commit. A race with another writer (a key inserted meanwhile, a
//! deadlock) runs the transaction again.

use crate::error::Fail;
use crate::json::Body;
use crate::rows::{self, KeyArrays};
use crate::store::Inner;
use docstore::batch::Decision;
use docstore::identity::KeptIds;
use docstore::request::{Answer, KeptChange, QuotaCount, Request};
use docstore::{Document, Error, Key};
use futures_util::future::try_join_all;
use std::collections::{BTreeMap, HashMap};
use tokio_postgres::types::ToSql;

/// How many times a transaction that raced another writer runs before the write gives up
/// ([`Error::Unavailable`]).
const MAX_ATTEMPTS: usize = 32;

/// Runs `request` in a transaction, again after a race.
pub(crate) async fn run(inner: &Inner, request: &Request<'_>) -> Result<Answer, Error> {
    let mut attempt = 1;
    loop {
        let mut client = inner.pool.get().await.map_err(crate::error::pool)?;
        match transaction(inner, &mut client, request).await {
            Err(fail) if fail.is_race() && attempt < MAX_ATTEMPTS => attempt += 1,
            Ok(answer) => {
                inner.feed.committed();
                return Ok(answer);
            }
            Err(fail) => return Err(fail.into_error()),
        }
    }
}

async fn transaction(
    inner: &Inner,
    client: &mut deadpool_postgres::Client,
    request: &Request<'_>,
) -> Result<Answer, Fail> {
    let tx = client.transaction().await?;
    let sql = &inner.sql;
    let arrays = KeyArrays::of(request.keys());
    let keys: [&(dyn ToSql + Sync); 3] = [&arrays.sites, &arrays.collections, &arrays.ids];
    let lock = tx.prepare_cached(&sql.lock_for_write).await?;
    let (documents, kept) = match request.id() {
        Some(_) => {
            let kept = tx.prepare_cached(&sql.kept).await?;
            futures_util::future::try_join(tx.query(&lock, &keys), tx.query(&kept, &keys)).await?
        }
        None => (tx.query(&lock, &keys).await?, Vec::new()),
    };
    let mut stored = HashMap::new();
    for row in &documents {
        stored.insert(rows::key(row)?, rows::document(row, 2)?);
    }
    let mut kept_ids = HashMap::new();
    for row in &kept {
        kept_ids.insert(rows::key(row)?, rows::kept(row)?);
    }
    let current: Vec<Option<Document>> = request.keys().map(|key| stored.remove(key)).collect();
    let now = inner.now();
    if request.is_repeat(&current, |key| kept_ids.get(key), now) {
        return Ok(Answer::Repeat(current));
    }
    let counts = site_counts(inner, &tx, request).await?;
    let mut quota = QuotaCount::new(inner.options.max_docs_per_site, |site| {
        counts.get(site).copied().unwrap_or(0)
    });
    let decisions = request.decide(&current, now, inner.options.max_doc_bytes, &mut quota)?;
    let plan = Plan::new(inner, request, &current, &decisions, (&kept_ids, now))?;
    plan.send(&tx).await?;
    tx.commit().await?;
    Ok(Answer::applied(decisions))
}

/// With `max_docs_per_site`, the documents of each site a request may create in (counted
/// from the counters: soft, creates racing in other transactions are not counted).
async fn site_counts(
    inner: &Inner,
    tx: &deadpool_postgres::Transaction<'_>,
    request: &Request<'_>,
) -> Result<HashMap<String, u64>, Fail> {
    let mut counts = HashMap::new();
    if inner.options.max_docs_per_site.is_none() {
        return Ok(counts);
    }
    for key in request.keys() {
        if !counts.contains_key(key.site()) {
            let row = tx.query_one(&inner.sql.site_count, &[&key.site()]).await?;
            counts.insert(key.site().to_owned(), row.get::<_, i64>(0) as u64);
        }
    }
    Ok(counts)
}

/// One statement of the pipeline, with its parameters, and whether it must touch one row.
struct Statement<'s> {
    sql: &'s str,
    params: Vec<Box<dyn ToSql + Sync + Send>>,
    one_row: bool,
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
                (Decision::Store { document, creates }, previous) => {
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
                        plan.push(&sql.insert, params, false);
                        *counters.entry((key.site(), key.collection())).or_default() += 1;
                    } else {
                        let previous = previous.as_ref().expect("an update has its document");
                        params.push(Box::new(document.updated_at));
                        params.push(Box::new(document.updated_by.clone()));
                        params.push(Box::new(rows::version(document.version)?));
                        params.push(Box::new(rows::version(previous.version)?));
                        plan.push(&sql.update, params, true);
                    }
                    bodies[i] = Some(body.text);
                }
                (Decision::Remove, Some(previous)) => {
                    let mut params = names();
                    params.push(Box::new(rows::version(previous.version)?));
                    plan.push(&sql.delete, params, true);
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
            // A check constraint holds the inserted row too: a decrement cannot be an upsert.
            let statement = if delta > 0 {
                &sql.count_into
            } else {
                &sql.count_down
            };
            plan.push(statement, params, delta < 0);
        }
        if !changes.kinds.is_empty() {
            plan.push(&sql.log_changes, changes.params(inner), false);
        }
        Ok(plan)
    }

    fn push(&mut self, sql: &'s str, params: Vec<Box<dyn ToSql + Sync + Send>>, one_row: bool) {
        self.statements.push(Statement {
            sql,
            params,
            one_row,
        });
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
            KeptChange::Forget => return self.push(&sql.forget_ids, names(), false),
            KeptChange::Keep(kept) => kept,
        };
        let mut params = names();
        params.push(Box::new(kept.ids.encode()));
        params.push(Box::new(kept.deleted_at));
        self.push(&sql.keep_ids, params, false);
        if kept.deleted_at.is_some() {
            let horizon = now.saturating_sub(docstore::identity::DELETE_IDS_KEPT_FOR_NANOS);
            self.push(&sql.prune_ids, vec![Box::new(horizon)], false);
        }
    }

    /// Sends every statement in one pipeline (prepared once per connection); an update or
    /// delete that found its row changed is a race.
    async fn send(self, tx: &deadpool_postgres::Transaction<'_>) -> Result<(), Fail> {
        let prepared =
            try_join_all(self.statements.iter().map(|s| tx.prepare_cached(s.sql))).await?;
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
        let sent = prepared
            .iter()
            .zip(&params)
            .map(|(statement, params)| tx.execute(statement, params));
        let counts = try_join_all(sent).await?;
        for (statement, count) in self.statements.iter().zip(counts) {
            if statement.one_row && count != 1 {
                return Err(Fail::Raced);
            }
        }
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
