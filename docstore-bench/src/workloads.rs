//! The workloads, each run on a docstore subject and on its baseline one after the other,
//! so both see the same machine at (nearly) the same moment.
//!
//! Single documents, in one collection per subject, ids `0..ops`: `create`, `get`, `put`,
//! `update`, `update_if`, then 16 tasks updating distinct documents and the same document,
//! then `delete`. Every write's returned version is checked against the expected one, so
//! both subjects provably did the same thing. Beside `create` and `get`, the same calls
//! through a typed [`docstore::Collection`] ([`TYPED`]: timed between the raw docstore run
//! and the baseline's, and compared with that same baseline run). Then, on a preloaded
//! collection: the selective query (filter, sort, limit 20; both answers compared) and a walk
//! of the whole collection page by page.

use crate::adapter::TypedDocstore;
use crate::data::{self, Rng, patch};
use crate::dynamo::RequestCounter;
use crate::measure::{Figures, Latencies, timed};
use crate::peak::PeakWindow;
use crate::subject::{Subject, WalkPosition};
use crate::{BenchError, BenchResult};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sizes of one backend's run.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Operations of each single-document workload (= documents created).
    pub ops: usize,
    /// Documents in the query collection.
    pub query_docs: usize,
    /// Timed runs of the selective query.
    pub query_runs: usize,
    /// Page size of the walk.
    pub page_size: usize,
    /// Concurrent tasks of the concurrency workloads.
    pub tasks: usize,
    /// Updates per task in the concurrency workloads.
    pub task_ops: usize,
    /// A workload stops early after this long.
    pub max_time: Duration,
}

/// One side of a comparison: a subject, the collection its single-document workloads use,
/// and (DynamoDB) the request counter of its client.
#[derive(Clone)]
pub struct Side {
    /// The system under test.
    pub subject: Arc<dyn Subject>,
    /// Its own collection for the single-document workloads.
    pub point_collection: String,
    /// The collection holding the preloaded query documents.
    pub query_collection: String,
    /// Counts the requests its client sends (DynamoDB only).
    pub requests: Option<RequestCounter>,
    /// The same store through the typed front end, for the typed rows (docstore sides only).
    pub typed: Option<TypedDocstore>,
}

/// The workloads that also run through a typed [`docstore::Collection`], each as a row
/// `"<workload>, typed"` right after the raw one.
pub const TYPED: [&str; 2] = ["create", "get"];

/// One workload's figures on both sides.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The workload's name.
    pub workload: String,
    /// What one operation is.
    pub unit: String,
    /// The docstore side.
    pub docstore: Figures,
    /// The hand-written baseline.
    pub baseline: Figures,
    /// docstore ops/s divided by baseline ops/s (1.0: as fast; below 1: slower).
    pub ratio: f64,
    /// Whether both sides gave the same answer (queries only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_answer: Option<bool>,
    /// Every round's ratio, in run order, when the run was repeated (`--repeat`); the figures
    /// above are the round with the median ratio.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratio_runs: Vec<f64>,
    /// The fewest DynamoDB requests per operation the table layout allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_requests_per_op: Option<f64>,
    /// Typed rows: typed ops/s divided by the raw docstore row's ops/s in the same round
    /// (what the typed layer costs over the untyped `Store` calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typed_vs_raw: Option<f64>,
    /// Typed rows: every round's `typed_vs_raw`, in run order, when the run was repeated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub typed_vs_raw_runs: Vec<f64>,
}

impl Comparison {
    /// Puts the two sides' figures of `workload` side by side.
    pub fn new(workload: &str, unit: &str, docstore: Figures, baseline: Figures) -> Self {
        let ratio = if baseline.ops_per_sec > 0.0 {
            docstore.ops_per_sec / baseline.ops_per_sec
        } else {
            0.0
        };
        Comparison {
            workload: workload.to_owned(),
            unit: unit.to_owned(),
            docstore,
            baseline,
            ratio,
            same_answer: None,
            ratio_runs: Vec::new(),
            min_requests_per_op: None,
            typed_vs_raw: None,
            typed_vs_raw_runs: Vec::new(),
        }
    }
}

/// The state one side carries from workload to workload: the versions it left.
struct State {
    versions: Vec<u64>,
}

/// The version a write left: `got` after checking it is `expected`, or `expected` itself
/// for a subject without versions.
fn check_version(subject: &dyn Subject, id: usize, got: u64, expected: u64) -> BenchResult<u64> {
    if subject.tracks_versions() && got != expected {
        return Err(format!("document {id}: version {got}, expected {expected}").into());
    }
    Ok(expected)
}

/// Runs `work` on `side` with its request counter reset before and read after.
async fn counted(
    side: &Side,
    work: impl AsyncFnOnce() -> BenchResult<Figures>,
) -> BenchResult<Figures> {
    if let Some(counter) = &side.requests {
        counter.take();
    }
    let mut figures = work().await?;
    if let Some(counter) = &side.requests {
        let ops = figures.ops.max(1) as f64;
        let requests = counter.take();
        figures.requests_per_op = Some(
            requests
                .iter()
                .map(|(op, r)| (op.clone(), r.count as f64 / ops))
                .collect(),
        );
        figures.request_wait_us_per_op = Some(
            requests
                .iter()
                .map(|(op, r)| (op.clone(), r.waiting.as_secs_f64() * 1e6 / ops))
                .collect(),
        );
    }
    Ok(figures)
}

/// A shuffled order of `0..n`, the same for every subject.
fn order(n: usize, seed: u64) -> Vec<usize> {
    let mut ids: Vec<usize> = (0..n).collect();
    Rng::new(seed).shuffle(&mut ids);
    ids
}

/// The single-document and concurrency workloads on both sides.
pub async fn point_workloads(
    spec: &Spec,
    docstore: &Side,
    baseline: &Side,
) -> BenchResult<Vec<Comparison>> {
    let mut states = [
        State {
            versions: Vec::new(),
        },
        State {
            versions: Vec::new(),
        },
    ];
    let mut out = Vec::new();
    for workload in [
        "create",
        "get",
        "put",
        "update",
        "update_if",
        "update_if x10 in one batch",
        "update_if x10 as 10 single calls",
        "update, 16 tasks, distinct docs",
        "update, 16 tasks, same doc",
        "delete",
    ] {
        let [docstore_state, baseline_state] = &mut states;
        let raw = point_workload(workload, spec, docstore, docstore_state).await?;
        let typed = match &docstore.typed {
            Some(typed) if TYPED.contains(&workload) => {
                let created = docstore_state.versions.len();
                Some(typed_workload(workload, spec, docstore, typed, created).await?)
            }
            _ => None,
        };
        let base = point_workload(workload, spec, baseline, baseline_state).await?;
        let unit = if workload.contains("x10") {
            "10 writes"
        } else {
            "op"
        };
        let name = workload.replace("16", &spec.tasks.to_string());
        let raw_ops_per_sec = raw.ops_per_sec;
        out.push(Comparison::new(&name, unit, raw, base.clone()));
        if let Some(typed) = typed {
            let mut row = Comparison::new(&format!("{name}, typed"), unit, typed, base);
            row.typed_vs_raw =
                (raw_ops_per_sec > 0.0).then(|| row.docstore.ops_per_sec / raw_ops_per_sec);
            out.push(row);
        }
    }
    Ok(out)
}

/// A [`TYPED`] workload through `typed`'s [`docstore::Collection<data::Ticket>`], on the
/// docstore side after its raw run (which `created` documents): `create` makes the same
/// documents as [`data::Ticket`]s in a collection of its own (removed again afterwards,
/// untimed, so the workloads after it see the store the raw run left); `get` reads the raw
/// run's documents in the raw run's order.
async fn typed_workload(
    workload: &str,
    spec: &Spec,
    side: &Side,
    typed: &TypedDocstore,
    created: usize,
) -> BenchResult<Figures> {
    let max = spec.max_time;
    match workload {
        "create" => {
            let coll = typed.collection(&format!("{}-typed", side.point_collection))?;
            let tickets: Vec<data::Ticket> = (0..spec.ops).map(|n| data::ticket(n, 0)).collect();
            let mut made = 0;
            let figures = counted(side, async || {
                timed(spec.ops, max, async |i| {
                    let v = coll.create(&data::id(i), &tickets[i]).await?.version;
                    check_version(side.subject.as_ref(), i, v, 1)?;
                    made += 1;
                    Ok(())
                })
                .await
            })
            .await?;
            for i in 0..made {
                coll.delete(&data::id(i)).await?;
            }
            Ok(figures)
        }
        "get" => {
            let coll = typed.collection(&side.point_collection)?;
            let ids = order(created, 1);
            counted(side, async || {
                timed(spec.ops, max, async |i| {
                    let n = ids[i % created];
                    if coll.get(&data::id(n)).await?.is_none() {
                        return Err(format!("document {n} missing").into());
                    }
                    Ok(())
                })
                .await
            })
            .await
        }
        other => Err(format!("no typed workload {other}").into()),
    }
}

async fn point_workload(
    workload: &str,
    spec: &Spec,
    side: &Side,
    state: &mut State,
) -> BenchResult<Figures> {
    // Inputs are made before the clock starts, in each workload.
    match workload {
        "create" => create(spec, side, state).await,
        "get" => get(spec, side, state).await,
        "put" => put(spec, side, state).await,
        "update" | "update_if" => update(spec, side, state, workload).await,
        "update_if x10 in one batch" => update_if_in_batches(spec, side, state).await,
        "update_if x10 as 10 single calls" => update_if_as_single_calls(spec, side, state).await,
        "update, 16 tasks, distinct docs" | "update, 16 tasks, same doc" => {
            updates_in_tasks(spec, side, state, workload).await
        }
        "delete" => delete(spec, side, state).await,
        other => Err(format!("unknown workload {other}").into()),
    }
}

/// Creates `spec.ops` documents, each checked to be at version 1.
async fn create(spec: &Spec, side: &Side, state: &mut State) -> BenchResult<Figures> {
    let subject = &side.subject;
    let coll = side.point_collection.as_str();
    let max = spec.max_time;
    let mut docs: Vec<Option<docstore::Data>> =
        (0..spec.ops).map(|n| Some(data::document(n, 0))).collect();
    let versions = &mut state.versions;
    counted(side, async || {
        timed(spec.ops, max, async |i| {
            let doc = docs[i].take().expect("each document once");
            let v = subject.create(coll, &data::id(i), doc).await?;
            versions.push(check_version(subject.as_ref(), i, v, 1)?);
            Ok(())
        })
        .await
    })
    .await
}

/// Reads the created documents in a shuffled order.
async fn get(spec: &Spec, side: &Side, state: &mut State) -> BenchResult<Figures> {
    let subject = &side.subject;
    let coll = side.point_collection.as_str();
    let max = spec.max_time;
    let created = state.versions.len();
    let ids = order(created, 1);
    counted(side, async || {
        timed(spec.ops, max, async |i| {
            let n = ids[i % created];
            if !subject.get(coll, &data::id(n)).await? {
                return Err(format!("document {n} missing").into());
            }
            Ok(())
        })
        .await
    })
    .await
}

/// Replaces every created document once.
async fn put(spec: &Spec, side: &Side, state: &mut State) -> BenchResult<Figures> {
    let subject = &side.subject;
    let coll = side.point_collection.as_str();
    let max = spec.max_time;
    let ids = order(state.versions.len(), 2);
    let mut docs: Vec<Option<docstore::Data>> =
        ids.iter().map(|&n| Some(data::document(n, 1))).collect();
    let versions = &mut state.versions;
    counted(side, async || {
        timed(ids.len(), max, async |i| {
            let n = ids[i];
            let doc = docs[i].take().expect("each document once");
            let v = subject.put(coll, &data::id(n), doc).await?;
            versions[n] = check_version(subject.as_ref(), n, v, versions[n] + 1)?;
            Ok(())
        })
        .await
    })
    .await
}

/// Merges a patch into every created document once: `update`, or `update_if` at the
/// version the workload knows when `workload` says so.
async fn update(
    spec: &Spec,
    side: &Side,
    state: &mut State,
    workload: &str,
) -> BenchResult<Figures> {
    let subject = &side.subject;
    let coll = side.point_collection.as_str();
    let max = spec.max_time;
    let conditional = workload == "update_if";
    let ids = order(state.versions.len(), if conditional { 4 } else { 3 });
    let patches: Vec<docstore::Data> = (0..ids.len()).map(|k| patch(k as u64)).collect();
    let versions = &mut state.versions;
    counted(side, async || {
        timed(ids.len(), max, async |i| {
            let n = ids[i];
            let id = data::id(n);
            let v = if conditional {
                subject
                    .update_if(coll, &id, &patches[i], versions[n])
                    .await?
            } else {
                subject.update(coll, &id, &patches[i]).await?
            };
            versions[n] = check_version(subject.as_ref(), n, v, versions[n] + 1)?;
            Ok(())
        })
        .await
    })
    .await
}

/// `update_if` of 10 distinct documents in one batch, in a shuffled order; one op = one
/// batch.
async fn update_if_in_batches(spec: &Spec, side: &Side, state: &mut State) -> BenchResult<Figures> {
    let subject = &side.subject;
    let coll = side.point_collection.as_str();
    let max = spec.max_time;
    let ids = order(state.versions.len(), 6);
    let batches: Vec<&[usize]> = ids.chunks_exact(10).collect();
    let versions = &mut state.versions;
    counted(side, async || {
        timed(batches.len(), max, async |i| {
            let writes: Vec<(String, docstore::Data, u64)> = batches[i]
                .iter()
                .enumerate()
                .map(|(k, &n)| (data::id(n), patch((i * 10 + k) as u64), versions[n]))
                .collect();
            let got = subject.update_if_many(coll, &writes).await?;
            for (&n, v) in batches[i].iter().zip(got) {
                versions[n] = check_version(subject.as_ref(), n, v, versions[n] + 1)?;
            }
            Ok(())
        })
        .await
    })
    .await
}

/// The same batches of 10 as [`update_if_in_batches`], each write its own call (and on the
/// baseline its own transaction); one op = ten calls.
async fn update_if_as_single_calls(
    spec: &Spec,
    side: &Side,
    state: &mut State,
) -> BenchResult<Figures> {
    let subject = &side.subject;
    let coll = side.point_collection.as_str();
    let max = spec.max_time;
    let ids = order(state.versions.len(), 6);
    let batches: Vec<&[usize]> = ids.chunks_exact(10).collect();
    let versions = &mut state.versions;
    counted(side, async || {
        timed(batches.len(), max, async |i| {
            for (k, &n) in batches[i].iter().enumerate() {
                let patch = patch((i * 10 + k) as u64);
                let v = subject
                    .update_if(coll, &data::id(n), &patch, versions[n])
                    .await?;
                versions[n] = check_version(subject.as_ref(), n, v, versions[n] + 1)?;
            }
            Ok(())
        })
        .await
    })
    .await
}

/// [`concurrent_updates`] of distinct documents, or all of the same one (`workload` says
/// which).
async fn updates_in_tasks(
    spec: &Spec,
    side: &Side,
    state: &mut State,
    workload: &str,
) -> BenchResult<Figures> {
    let same = workload.ends_with("same doc");
    let tasks = spec.tasks.min(state.versions.len());
    let figures = counted(side, async || {
        concurrent_updates(side, tasks, spec.task_ops, same).await
    })
    .await?;
    // Versions moved by an amount the workload knows.
    if same {
        state.versions[0] += figures.ops;
    } else {
        for v in state.versions.iter_mut().take(tasks) {
            *v += spec.task_ops as u64;
        }
    }
    Ok(figures)
}

/// Deletes every document, in a shuffled order.
async fn delete(spec: &Spec, side: &Side, state: &mut State) -> BenchResult<Figures> {
    let subject = &side.subject;
    let coll = side.point_collection.as_str();
    let max = spec.max_time;
    let ids = order(state.versions.len(), 5);
    counted(side, async || {
        timed(ids.len(), max, async |i| {
            let n = ids[i];
            if !subject.delete(coll, &data::id(n)).await? {
                return Err(format!("document {n} was not there to delete").into());
            }
            Ok(())
        })
        .await
    })
    .await
}

/// `tasks` tasks each doing `per_task` updates, on document `t` (distinct) or all on
/// document 0 (same).
async fn concurrent_updates(
    side: &Side,
    tasks: usize,
    per_task: usize,
    same: bool,
) -> BenchResult<Figures> {
    let window = PeakWindow::open();
    let started = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let subject = Arc::clone(&side.subject);
        let coll = side.point_collection.clone();
        let id = data::id(if same { 0 } else { t });
        handles.push(tokio::spawn(async move {
            let mut latencies = Latencies::with_capacity(per_task);
            for k in 0..per_task {
                let patch = patch((t * per_task + k) as u64);
                let op = Instant::now();
                subject.update(&coll, &id, &patch).await?;
                latencies.record(op.elapsed());
            }
            crate::measure::settle_allocator();
            Ok::<_, BenchError>(latencies)
        }));
    }
    let mut latencies = Latencies::with_capacity(tasks * per_task);
    for handle in handles {
        latencies.extend(handle.await??);
    }
    Ok(Figures::new(
        latencies,
        started.elapsed(),
        window.growth_kib(),
    ))
}

/// The selective query and the walk, on both sides' preloaded collections.
pub async fn query_workloads(
    spec: &Spec,
    docstore: &Side,
    baseline: &Side,
) -> BenchResult<Vec<Comparison>> {
    // Untimed runs first, a tenth of the timed ones (at least one): they warm caches and
    // (on PostgreSQL) get past the first executions of a prepared statement, which the
    // server plans anew each time before it settles on a generic plan. The first gives the
    // answers to compare.
    let answers = [
        docstore.subject.top(&docstore.query_collection).await?,
        baseline.subject.top(&baseline.query_collection).await?,
    ];
    for _ in 1..(spec.query_runs / 10).max(1) {
        for side in [docstore, baseline] {
            side.subject.top(&side.query_collection).await?;
        }
    }
    let mut figures = Vec::new();
    for side in [docstore, baseline] {
        figures.push(
            counted(side, async || {
                timed(spec.query_runs, spec.max_time, async |_| {
                    side.subject.top(&side.query_collection).await.map(drop)
                })
                .await
            })
            .await?,
        );
    }
    let baseline_top = figures.pop().expect("two sides");
    let docstore_top = figures.pop().expect("two sides");
    let mut top = Comparison::new(
        &format!(
            "query: filter + sort + limit {} over {} docs",
            data::TOP,
            spec.query_docs
        ),
        "query",
        docstore_top,
        baseline_top,
    );
    top.same_answer = Some(answers[0] == answers[1] && !answers[0].is_empty());

    let mut walks = Vec::new();
    let mut walked = Vec::new();
    for side in [docstore, baseline] {
        let mut total = 0;
        walks.push(
            counted(side, async || {
                walk(side, spec.page_size, spec.max_time, &mut total).await
            })
            .await?,
        );
        walked.push(total);
    }
    let baseline_walk = walks.pop().expect("two sides");
    let docstore_walk = walks.pop().expect("two sides");
    let mut name = format!("walk {} docs, pages of {}", spec.query_docs, spec.page_size);
    if walked.iter().any(|&n| n < spec.query_docs) {
        name.push_str(&format!(
            " (stopped after {} s: walked {} / {})",
            spec.max_time.as_secs(),
            walked[0],
            walked[1]
        ));
    }
    let mut walk = Comparison::new(&name, "doc; latency per page", docstore_walk, baseline_walk);
    // A walk stopped early (a slow peer) has no answer to compare.
    walk.same_answer = (!name.contains("stopped")).then_some(walked[0] == walked[1]);
    Ok(vec![top, walk])
}

/// Walks the whole query collection of `side` page by page; one operation is one page.
/// Stops early after `max`. One operation is one document; the latencies are per page.
async fn walk(
    side: &Side,
    page_size: usize,
    max: Duration,
    total: &mut usize,
) -> BenchResult<Figures> {
    let window = PeakWindow::open();
    let mut latencies = Latencies::default();
    let started = Instant::now();
    let mut after: WalkPosition = None;
    loop {
        let t = Instant::now();
        let page = side
            .subject
            .walk_page(&side.query_collection, page_size, after.take())
            .await?;
        latencies.record(t.elapsed());
        *total += page.documents;
        match page.next {
            Some(next) if started.elapsed() < max => after = Some(next),
            _ => break,
        }
    }
    crate::measure::settle_allocator();
    let elapsed = started.elapsed();
    let mut figures = Figures::new(latencies, elapsed, window.growth_kib());
    figures.ops = *total as u64;
    figures.ops_per_sec = *total as f64 / elapsed.as_secs_f64().max(1e-9);
    Ok(figures)
}
