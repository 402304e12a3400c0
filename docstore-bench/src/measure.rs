//! Timing: per-operation latencies, their percentiles, and a timed run of a workload.

use crate::BenchResult;
use crate::peak::PeakWindow;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Latencies of single operations, in nanoseconds.
#[derive(Clone, Debug, Default)]
pub struct Latencies(Vec<u64>);

impl Latencies {
    /// Room for `n` operations.
    pub fn with_capacity(n: usize) -> Self {
        Latencies(Vec::with_capacity(n))
    }

    /// Records one operation.
    pub fn record(&mut self, elapsed: Duration) {
        self.0.push(elapsed.as_nanos().min(u64::MAX as u128) as u64);
    }

    /// Adds another set.
    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    /// How many operations were recorded.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `p`-th percentile (`0.0..=1.0`, nearest rank), in microseconds.
    pub fn percentile_us(&mut self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let rank = ((p * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len());
        self.0[rank - 1] as f64 / 1000.0
    }
}

/// The figures of one subject on one workload.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figures {
    /// Operations completed.
    pub ops: u64,
    /// Wall time of the whole workload, in seconds.
    pub seconds: f64,
    /// Operations per second of wall time.
    pub ops_per_sec: f64,
    /// Median latency of one operation, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// How far the process's resident memory rose above its level before the workload, at
    /// its highest (KiB); absent where it cannot be measured.
    pub peak_mem_kib: Option<u64>,
    /// DynamoDB requests per operation, by operation name (resends included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_op: Option<BTreeMap<String, f64>>,
    /// Microseconds per operation spent waiting for DynamoDB's answers, by operation name
    /// (from handing a request to the HTTP client to its answer's arrival).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_wait_us_per_op: Option<BTreeMap<String, f64>>,
}

impl Figures {
    /// The figures of a run of `ops` operations in `elapsed` with these latencies.
    pub fn new(mut latencies: Latencies, elapsed: Duration, peak_mem_kib: Option<u64>) -> Self {
        let ops = latencies.len() as u64;
        let seconds = elapsed.as_secs_f64();
        Figures {
            ops,
            seconds,
            ops_per_sec: if seconds > 0.0 {
                ops as f64 / seconds
            } else {
                0.0
            },
            p50_us: latencies.percentile_us(0.50),
            p99_us: latencies.percentile_us(0.99),
            peak_mem_kib,
            requests_per_op: None,
            request_wait_us_per_op: None,
        }
    }

    /// All DynamoDB requests per operation.
    pub fn total_requests_per_op(&self) -> Option<f64> {
        self.requests_per_op.as_ref().map(|r| r.values().sum())
    }
}

/// Runs `op(0)`, `op(1)`, ... up to `n` operations, stopping early once `max` has passed;
/// times each and the whole, and the memory peak.
pub async fn timed(
    n: usize,
    max: Duration,
    mut op: impl AsyncFnMut(usize) -> BenchResult<()>,
) -> BenchResult<Figures> {
    let window = PeakWindow::open();
    let mut latencies = Latencies::with_capacity(n);
    let started = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        op(i).await?;
        latencies.record(t.elapsed());
        if started.elapsed() > max {
            break;
        }
    }
    settle_allocator();
    let elapsed = started.elapsed();
    Ok(Figures::new(latencies, elapsed, window.growth_kib()))
}

/// A request glibc's allocator serves as a large block: above its 1 KiB small-block range,
/// below its 128 KiB threshold for mapping memory of its own.
const LARGE_REQUEST: usize = 64 * 1024;

/// Has the allocator do now the work the workload's frees left pending, so that the
/// workload's time includes it. glibc keeps small freed blocks in fast bins and merges them
/// all, in one pass, at the next large request or large free — whoever makes it. A side that
/// freed many small blocks would otherwise hand that pass to the next workload or to the
/// other side (tens of milliseconds after 50 000 memory-store deletes), and which one got
/// it would depend on which made the first large request, not on what each side freed.
pub fn settle_allocator() {
    std::hint::black_box(Vec::<u8>::with_capacity(LARGE_REQUEST));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut l = Latencies::default();
        for us in 1..=100 {
            l.record(Duration::from_micros(us));
        }
        assert_eq!(l.percentile_us(0.5), 50.0);
        assert_eq!(l.percentile_us(0.99), 99.0);
        assert_eq!(l.percentile_us(1.0), 100.0);
        assert_eq!(Latencies::default().percentile_us(0.5), 0.0);
    }
}
