//! Progress on standard error: `-q` silences it; where standard error is not a terminal (a
//! log file, CI), a long command prints a line now and then instead of a progress bar
//! (docs/contract.md, "The command line").

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether `-q` / `--quiet` was given.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Sets whether progress is silenced (`-q`), once the command line is read.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether progress is silenced (`-q`).
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// The default of `--progress-interval`: a line every 10 seconds.
pub const DEFAULT_INTERVAL_SECS: u64 = 10;

/// Progress lines on a standard error that is not a terminal: the first at once, then one
/// every `every` at most, each prefixed with what runs and the time elapsed.
pub struct Lines {
    /// What runs, e.g. "index build tickets by_status".
    what: String,
    /// The least time between two lines (zero: a line for every report).
    every: Duration,
    started: Instant,
    /// When the last line was printed.
    last: Option<Instant>,
}

impl Lines {
    /// Lines about `what`, at most one every `every`.
    pub fn new(what: impl Into<String>, every: Duration) -> Self {
        Lines {
            what: what.into(),
            every,
            started: Instant::now(),
            last: None,
        }
    }

    /// Prints `status` when the last line is `every` old (or there was none yet).
    pub fn report(&mut self, status: impl FnOnce() -> String) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < self.every)
        {
            return;
        }
        self.last = Some(now);
        let elapsed = now.duration_since(self.started).as_secs();
        eprintln!("{} ({elapsed} s): {}", self.what, status());
    }
}
