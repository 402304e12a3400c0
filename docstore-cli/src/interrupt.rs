//! What a long command says when Ctrl-C stops it — what is done, what state things are in
//! and how to resume — and what a full disk during `import` or `copy` says
//! (docs/contract.md, "The command line").

use crate::exit::{CliError, INTERRUPTED};
use std::future::Future as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Documents of this process's `import` or `copy` whose write is settled and counted in its
/// summary: committed (written or replaced) or found stored already. What Ctrl-C reports, as a
/// lower bound: batches committed while the command waited on its input are counted when it
/// reads their answers.
static SETTLED: AtomicU64 = AtomicU64::new(0);

/// Counts one more document settled (see [`SETTLED`]); called once its batch is committed.
pub fn settled_one() {
    SETTLED.fetch_add(1, Ordering::Relaxed);
}

/// The documents settled so far (see [`SETTLED`]).
pub fn settled() -> u64 {
    SETTLED.load(Ordering::Relaxed)
}

/// What Ctrl-C says now, made when it comes; `None` while the command stops on Ctrl-C by
/// itself (`copy --follow` while it follows the feed).
type Explain = Box<dyn Fn() -> Option<String> + Send>;

/// The command's current [`Explain`]; `None` until a long command starts.
static EXPLAIN: Mutex<Option<Explain>> = Mutex::new(None);

/// Whether the thread watching for Ctrl-C runs (it is started once).
static WATCHING: std::sync::Once = std::sync::Once::new();

/// From now until the process ends (or the next call), Ctrl-C (SIGINT) prints what `explain`
/// says and ends the process with [`INTERRUPTED`]; when `explain` says `None`, the command
/// handles that Ctrl-C itself. A thread of its own watches for the signal, so it is said
/// even while the command waits on its input; the signal's handler is in place when this
/// returns.
pub fn explain_ctrl_c(explain: impl Fn() -> Option<String> + Send + 'static) {
    *EXPLAIN.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(explain));
    WATCHING.call_once(|| {
        let (ready, registered) = std::sync::mpsc::channel();
        let watcher = std::thread::Builder::new()
            .name("ctrl-c".into())
            .spawn(move || watch_ctrl_c(&ready));
        // Without the watcher, Ctrl-C simply ends the process as before.
        if watcher.is_ok() {
            let _ = registered.recv();
        }
    });
}

/// Ctrl-C during `import` or `copy` (`command`): what is committed and how to resume.
pub fn explain_transfer(command: &'static str) {
    explain_ctrl_c(move || Some(interrupted_message(command, settled())));
}

/// Waits for every Ctrl-C on a runtime of its own; says `ready` once the handler is in place.
fn watch_ctrl_c(ready: &std::sync::mpsc::Sender<()>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        let _ = ready.send(());
        return;
    };
    runtime.block_on(async {
        let mut ready = Some(ready);
        loop {
            let signal = tokio::signal::ctrl_c();
            tokio::pin!(signal);
            // The first poll installs the handler; a signal cannot have come before it.
            let first =
                std::future::poll_fn(|cx| std::task::Poll::Ready(signal.as_mut().poll(cx))).await;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            let caught = match first {
                std::task::Poll::Ready(result) => result.is_ok(),
                std::task::Poll::Pending => signal.await.is_ok(),
            };
            if !caught {
                return;
            }
            let explain = EXPLAIN.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(message) = explain.as_ref().and_then(|explain| explain()) {
                eprintln!("\n{message}");
                std::process::exit(INTERRUPTED);
            }
        }
    });
}

/// What Ctrl-C during `command` (`import` or `copy`) leaves, `settled` documents in, and how
/// to go on.
fn interrupted_message(command: &str, settled: u64) -> String {
    format!(
        "interrupted: {command} stopped with at least {settled} documents committed or found \
         stored. Every batch written so far is committed whole (a batch is written all or \
         nothing: no document is half-written). Run the same {command} again to resume: what \
         is stored already is skipped without a write"
    )
}

/// SQLite's message for `SQLITE_FULL`.
const DISK_FULL: &str = "database or disk is full";

/// A full disk during `command`, said with what it leaves and how to go on (SQLite rolls the
/// failed batch back; the file stays intact); any other error is left as it is.
pub fn explain_disk_full(err: CliError, command: &str) -> CliError {
    if !err.message.contains(DISK_FULL) {
        return err;
    }
    CliError::new(
        err.code,
        format!(
            "{command} stopped: the disk is full ({}). The database file is intact: the batch \
             being written was rolled back and every batch before it is committed. Free some \
             space, then run the same {command} again: it resumes, skipping what is stored",
            err.message
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit;

    #[test]
    fn a_full_disk_says_the_file_is_intact_and_how_to_resume() {
        let full = CliError::new(
            exit::FAILURE,
            "backend error: sqlite failed: database or disk is full",
        );
        let said = explain_disk_full(full, "import");
        assert_eq!(said.code, exit::FAILURE);
        assert!(said.message.contains("database or disk is full"), "{said}");
        assert!(said.message.contains("file is intact"), "{said}");
        assert!(said.message.contains("run the same import again"), "{said}");
        let other = explain_disk_full(
            CliError::new(exit::ALREADY_EXISTS, "already exists"),
            "import",
        );
        assert_eq!(
            (other.code, other.message.as_str()),
            (exit::ALREADY_EXISTS, "already exists")
        );
    }

    #[test]
    fn an_interrupt_says_what_is_committed_and_how_to_resume() {
        let said = interrupted_message("copy", 1200);
        assert!(
            said.contains("with at least 1200 documents committed"),
            "{said}"
        );
        assert!(said.contains("Run the same copy again"), "{said}");
    }
}
