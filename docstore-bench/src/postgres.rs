//! One round of the PostgreSQL section: docstore-postgres through the front end against the
//! hand-written [`PostgresBaseline`], each in a fresh schema of the same server (checked to
//! be the same schema), the query collection bulk-loaded into both; the common workloads,
//! then concurrent creates in one collection and across as many collections as tasks, with
//! the lock waits sampled (see [`crate::contention`]).

use crate::baselines::postgres::{PostgresBaseline, schema};
use crate::contention::{self, Waits};
use crate::data::{self, ACTOR, QUERY_COLLECTION, SITE, now_nanos};
use crate::report::Section;
use crate::workloads::{Comparison, Side, Spec};
use crate::{BenchResult, run};
use docstore::{Index, IndexSet, Store, StoreOptions};
use docstore_postgres::PostgresStore;
use std::sync::Arc;
use tokio_postgres::Client;

/// One round's section, and what its concurrent creates waited for.
pub struct Round {
    /// The comparisons.
    pub section: Section,
    /// One line per concurrent-create workload and side: the lock waits sampled.
    pub waits: Vec<String>,
}

/// `url` with `?schema=` (or `&schema=`) `schema`, as docstore-postgres reads it.
fn with_schema(url: &str, schema: &str) -> String {
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}schema={schema}")
}

/// A client of its own on `url`.
pub async fn connect(url: &str) -> BenchResult<Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// The index an application would declare for the selective query: `status` and `category`
/// pinned, then `score` descending, the query's order, so docstore-postgres reads it in the
/// query's order and stops at the page (`priority` checked on the entries read). The core
/// planner serves no order from an index whose fields do not follow it, so an index ending in
/// `priority` would leave the query to the scan.
pub fn indexes() -> BenchResult<IndexSet> {
    let index = Index::parse(
        QUERY_COLLECTION,
        "by_status_category",
        ["status", "category", "-score"],
    )?;
    Ok(IndexSet::new([index])?)
}

/// Inserts documents `0..count` (generation 0) into `collection` of schema `schema`, with
/// the row and the counter docstore-postgres's creates leave (no change rows), 1000 a
/// statement, then `ANALYZE`s the table.
pub async fn bulk_load(
    client: &Client,
    schema: &str,
    collection: &str,
    count: usize,
) -> BenchResult<()> {
    let s = format!("\"{schema}\"");
    let insert = client
        .prepare(&format!(
            "INSERT INTO {s}.documents (site, collection, id, data, created_at, updated_at, \
             created_by, updated_by, version) SELECT $1, $2, i, d::jsonb, $3, $3, $4, $4, 1 \
             FROM unnest($5::text[], $6::text[]) AS t (i, d)"
        ))
        .await?;
    let now = now_nanos();
    for start in (0..count).step_by(1000) {
        let numbers = start..count.min(start + 1000);
        let ids: Vec<String> = numbers.clone().map(data::id).collect();
        let bodies = numbers
            .map(|n| serde_json::to_string(&data::document(n, 0)))
            .collect::<Result<Vec<_>, _>>()?;
        client
            .execute(&insert, &[&SITE, &collection, &now, &ACTOR, &ids, &bodies])
            .await?;
    }
    let n = count as i64;
    client
        .execute(
            &format!(
                "INSERT INTO {s}.counters (site, collection, n) VALUES ($1, $2, $3) \
                 ON CONFLICT (site, collection) DO UPDATE SET n = {s}.counters.n + $3"
            ),
            &[&SITE, &collection, &n],
        )
        .await?;
    client
        .batch_execute(&format!("ANALYZE {s}.documents"))
        .await?;
    Ok(())
}

/// docstore-postgres (declaring [`indexes`]) and the baseline, each opened on a schema of its
/// own; the baseline's schema also gets the declared index's key function and expression
/// index, as docstore-postgres lays them down, so the two schemas stay equal (the baseline's
/// hand-written query does not call the key function: it reads the application's index).
pub async fn open_sides(
    url: &str,
    store_schema: &str,
    baseline_schema: &str,
) -> BenchResult<(PostgresStore, PostgresBaseline)> {
    let options = || BenchResult::Ok(StoreOptions::default().with_indexes(indexes()?));
    let driver =
        PostgresStore::open_with_options(&with_schema(url, store_schema), options()?).await?;
    let baseline = PostgresBaseline::open(url, baseline_schema).await?;
    drop(PostgresStore::open_with_options(&with_schema(url, baseline_schema), options()?).await?);
    Ok((driver, baseline))
}

/// The application's index for the selective query in both `schemas` (store's first; the
/// baseline's statement reads it, docstore reads its own declared index), the schemas
/// checked equal, `docs` query documents bulk-loaded into each, and `store` checked to read
/// them as its own.
pub async fn load_query_collection(
    admin: &Client,
    store: &Store,
    docs: usize,
    schemas: [&str; 2],
) -> BenchResult<()> {
    for schema in schemas {
        schema::create_app_index(admin, schema, QUERY_COLLECTION).await?;
    }
    schema::check_same(admin, schemas[0], schemas[1]).await?;
    for schema in schemas {
        bulk_load(admin, schema, QUERY_COLLECTION, docs).await?;
    }
    data::check_bulk_loaded(store, "docstore-postgres", docs).await?;
    Ok(())
}

/// One round on the server at `url`, in schemas named after `round` (dropped afterwards).
pub async fn round(spec: &Spec, url: &str, round: usize) -> BenchResult<Round> {
    let tag = format!("{}_{round}", std::process::id());
    let (store_schema, baseline_schema) = (
        format!("bench_docstore_{tag}"),
        format!("bench_baseline_{tag}"),
    );
    let admin = connect(url).await?;
    let (driver, baseline) = open_sides(url, &store_schema, &baseline_schema).await?;
    let store = Store::new(driver.clone());
    let result = async {
        load_query_collection(
            &admin,
            &store,
            spec.query_docs,
            [&store_schema, &baseline_schema],
        )
        .await?;
        let docstore = run::docstore_side(&store, None)?;
        let baseline = run::side(Arc::new(baseline), "baseline", None);
        let mut rows = run::both(spec, &docstore, &baseline).await?;
        let mut waits = Vec::new();
        for spread in [false, true] {
            let (row, seen) = creates_row(spec, (&docstore, &baseline), spread, url).await?;
            waits.extend(seen);
            rows.push(row);
        }
        Ok(Round {
            section: Section {
                backend: "postgres".to_owned(),
                description: format!(
                    "PostgresStore through Store vs raw tokio-postgres (deadpool, 16 \
                     connections) on docstore-postgres's schema, same server; {} ops per \
                     workload, {} query documents",
                    spec.ops, spec.query_docs
                ),
                rows,
            },
            waits,
        })
    }
    .await;
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{store_schema}\" CASCADE; \
             DROP SCHEMA IF EXISTS \"{baseline_schema}\" CASCADE"
        ))
        .await?;
    result
}

/// Concurrent creates on both sides, in one collection or spread over one per task: the row,
/// and each side's lock waits.
async fn creates_row(
    spec: &Spec,
    (docstore, baseline): (&Side, &Side),
    spread: bool,
    url: &str,
) -> BenchResult<(Comparison, Vec<String>)> {
    let sizes = (spec.tasks, spec.task_ops);
    let (ours, our_waits) = contention::creates(docstore, sizes, spread, url).await?;
    let (theirs, their_waits) = contention::creates(baseline, sizes, spread, url).await?;
    let name = match spread {
        false => format!("create, {} tasks, one collection", spec.tasks),
        true => format!("create, {} tasks, {} collections", spec.tasks, spec.tasks),
    };
    let told = |side: &str, waits: &Waits| format!("{name}, {side}: {}", waits.describe());
    let waits = vec![told("docstore", &our_waits), told("baseline", &their_waits)];
    Ok((Comparison::new(&name, "op", ours, theirs), waits))
}
