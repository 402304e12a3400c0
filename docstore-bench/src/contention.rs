//! Concurrent creates on PostgreSQL, and what they wait for: `tasks` tasks creating documents
//! in one collection (every create moves the same counter row) or each in a collection of its
//! own, while a sampler reads `pg_stat_activity` every [`SAMPLE_EVERY`] and counts the
//! sessions waiting for a lock by the statement they wait in — the counter row's upsert, or
//! the change row's insert (the feed's advisory lock, taken by every writer of a store).

use crate::measure::{Figures, Latencies};
use crate::peak::PeakWindow;
use crate::workloads::Side;
use crate::{BenchError, BenchResult, data};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the sampler looks at the waiting sessions.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// The sessions of this database waiting for a lock, with the statement they are in.
/// A wait for an advisory lock (the feed's) is marked [`ADVISORY`]: one statement may take
/// both the counter row and the feed's lock (docstore-postgres's one-statement create).
const WAITING: &str = "SELECT CASE WHEN wait_event = 'advisory' THEN 'advisory: ' ELSE '' END \
     || query FROM pg_stat_activity WHERE datname = current_database() \
     AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()";

/// How [`WAITING`] marks a session waiting for an advisory lock.
const ADVISORY: &str = "advisory: ";

/// What the sampler saw during one workload.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Waits {
    /// Samples taken.
    pub samples: u64,
    /// Sessions waiting in the counter upsert, summed over the samples.
    pub counter: u64,
    /// Samples with at least one session waiting in the counter upsert.
    pub counter_samples: u64,
    /// Sessions waiting in the change insert (the feed's advisory lock), summed.
    pub feed: u64,
    /// Samples with at least one session waiting in the change insert.
    pub feed_samples: u64,
    /// Sessions waiting for a lock in any other statement, summed.
    pub other: u64,
}

impl Waits {
    fn record(&mut self, statements: &[String]) {
        let on_feed = |q: &&String| q.starts_with(ADVISORY) || !q.contains(".counters");
        let feed = statements
            .iter()
            .filter(|q| q.contains(".changes") && on_feed(q))
            .count() as u64;
        let counter = statements
            .iter()
            .filter(|q| q.contains(".counters") && !q.starts_with(ADVISORY))
            .count() as u64;
        self.samples += 1;
        self.counter += counter;
        self.counter_samples += u64::from(counter > 0);
        self.feed += feed;
        self.feed_samples += u64::from(feed > 0);
        self.other += statements.len() as u64 - counter - feed;
    }

    /// `counter row: 5.1 sessions waiting on average (waiting in 98% of 812 samples); feed
    /// lock: ...`.
    pub fn describe(&self) -> String {
        let n = self.samples.max(1) as f64;
        format!(
            "counter row: {:.1} sessions waiting on average (someone waiting in {:.0}% of {} \
             samples); feed lock: {:.1} waiting ({:.0}%); other locks: {:.1}",
            self.counter as f64 / n,
            100.0 * self.counter_samples as f64 / n,
            self.samples,
            self.feed as f64 / n,
            100.0 * self.feed_samples as f64 / n,
            self.other as f64 / n,
        )
    }
}

/// Samples the waiting sessions on its own connection to `url` until `stop` is set.
async fn sample(url: String, stop: Arc<AtomicBool>) -> BenchResult<Waits> {
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let waiting = client.prepare(WAITING).await?;
    let mut waits = Waits::default();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let rows = client.query(&waiting, &[]).await?;
        let statements: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
        waits.record(&statements);
    }
    drop(client);
    let _ = connection.await;
    Ok(waits)
}

/// `tasks` tasks each creating `per_task` documents, all in one collection or each in its own
/// (`spread`), on `side`, sampled through `url`; one operation is one create.
pub async fn creates(
    side: &Side,
    (tasks, per_task): (usize, usize),
    spread: bool,
    url: &str,
) -> BenchResult<(Figures, Waits)> {
    let base = format!(
        "{}-creates-{}",
        side.point_collection,
        if spread { "spread" } else { "one" }
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample(url.to_owned(), Arc::clone(&stop)));
    let window = PeakWindow::open();
    let started = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let subject = Arc::clone(&side.subject);
        let collection = if spread {
            format!("{base}-{t}")
        } else {
            base.clone()
        };
        let documents: Vec<docstore::Data> = (0..per_task)
            .map(|k| data::document(t * per_task + k, 0))
            .collect();
        handles.push(tokio::spawn(async move {
            let mut latencies = Latencies::with_capacity(per_task);
            for (k, document) in documents.into_iter().enumerate() {
                let id = data::id(t * per_task + k);
                let op = Instant::now();
                subject.create(&collection, &id, document).await?;
                latencies.record(op.elapsed());
            }
            Ok::<_, BenchError>(latencies)
        }));
    }
    let mut latencies = Latencies::with_capacity(tasks * per_task);
    for handle in handles {
        latencies.extend(handle.await??);
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let waits = sampler.await??;
    Ok((Figures::new(latencies, elapsed, window.growth_kib()), waits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_told_apart_by_statement() {
        let mut waits = Waits::default();
        waits.record(&[
            "INSERT INTO \"s\".counters AS c ...".to_owned(),
            "INSERT INTO \"s\".counters AS c ...".to_owned(),
            "WITH lock AS MATERIALIZED (...) INSERT INTO \"s\".changes ...".to_owned(),
            "SELECT ... FOR UPDATE".to_owned(),
        ]);
        // One statement moving the counter and logging the change: by the lock it waits for.
        let create = "WITH ... INSERT INTO \"s\".counters ... INSERT INTO \"s\".changes ...";
        let mut fused = Waits::default();
        fused.record(&[create.to_owned(), format!("{ADVISORY}{create}")]);
        assert_eq!((fused.counter, fused.feed, fused.other), (1, 1, 0));
        waits.record(&[]);
        assert_eq!(
            (waits.samples, waits.counter, waits.counter_samples),
            (2, 2, 1)
        );
        assert_eq!((waits.feed, waits.feed_samples, waits.other), (1, 1, 1));
        let told = waits.describe();
        assert!(
            told.starts_with("counter row: 1.0 sessions waiting"),
            "{told}"
        );
        assert!(told.contains("in 50% of 2 samples"), "{told}");
    }
}
