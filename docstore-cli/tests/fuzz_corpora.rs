//! The fuzz targets' corpora and crash cases, replayed as ordinary tests on stable: every file
//! of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through the entry point
//! its target fuzzes (`docstore_cli::fuzzing`), which panics when a malformed input is not
//! refused with the precise error or an accepted one does not read back as itself. Plus
//! property tests that feed the same entry points generated text near the query grammar,
//! deeply nested queries and cursors (fuzz/README.md).

use docstore_cli::fuzzing::{self, TARGETS, Target};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

/// Each input runs on a thread of its own, named after its file, so a panic is reported
/// with the file and a stack overflow (which ends the process) names it too. The stack is
/// the size of the main thread's, where the fuzzers run the inputs.
const STACK_BYTES: usize = 8 << 20;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `fuzz/<kind>/<target>/`, sorted; none when the folder does not exist.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind).join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a readable folder").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `entry` on the file at `path`: `Err` with the panic's message when it panics.
fn replay(entry: fn(&[u8]), path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).expect("a readable input");
    std::thread::Builder::new()
        .name(path.display().to_string())
        .stack_size(STACK_BYTES)
        .spawn(move || entry(&bytes))
        .expect("a thread")
        .join()
        .map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()
        })
}

#[test]
fn every_fuzz_target_has_a_corpus() {
    for target in TARGETS.iter().map(|target| target.name) {
        assert!(
            !inputs("corpus", target).is_empty(),
            "fuzz/corpus/{target} is empty: run the target (fuzz/README.md) and commit its \
             minimized corpus"
        );
        assert!(
            fuzz_dir()
                .join(format!("fuzz_targets/{target}.rs"))
                .is_file(),
            "no fuzz target fuzz/fuzz_targets/{target}.rs"
        );
    }
}

/// The failures among `target`'s inputs, and how many inputs it has.
fn replay_target(target: &Target) -> (Vec<String>, usize) {
    let mut failures = Vec::new();
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        for path in inputs(kind, target.name) {
            replayed += 1;
            if let Err(message) = replay(target.run, &path) {
                failures.push(format!("{}: {message}", path.display()));
            }
        }
    }
    (failures, replayed)
}

#[test]
fn fuzz_corpora_and_crash_cases_replay_cleanly() {
    // The targets side by side: the corpora hold thousands of inputs.
    let outcomes: Vec<(Vec<String>, usize)> = std::thread::scope(|scope| {
        let replays: Vec<_> = TARGETS
            .iter()
            .map(|target| scope.spawn(move || replay_target(target)))
            .collect();
        replays
            .into_iter()
            .map(|replay| replay.join().expect("a replay"))
            .collect()
    });
    let replayed: usize = outcomes.iter().map(|(_, count)| count).sum();
    let failures: Vec<String> = outcomes.into_iter().flat_map(|(f, _)| f).collect();
    assert!(
        replayed > 0,
        "no fuzz inputs found under {}",
        fuzz_dir().display()
    );
    assert!(
        failures.is_empty(),
        "{} of {replayed} fuzz inputs fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Text made of the query language's words, operators, values and brackets.
    #[test]
    fn query_text_near_the_grammar(text in docstore::strategies::query_text()) {
        fuzzing::query_text(text.as_bytes());
    }

    /// Filters nested far deeper than any limit, in every bracket the grammar has.
    #[test]
    fn deeply_nested_query_text(text in docstore::strategies::deep_query_text()) {
        fuzzing::query_text(text.as_bytes());
    }

    /// Query JSON nested deeper than the filter limit.
    #[test]
    fn deeply_nested_query_json(depth in 1usize..400) {
        let filter = format!("{}{{\"exists\": \"a\"}}{}", "{\"not\": ".repeat(depth), "}".repeat(depth));
        fuzzing::query_json(format!("{{\"filter\": {filter}}}").as_bytes());
    }

    /// Query cursors: real encodings of arbitrary positions, and those cut or changed.
    #[test]
    fn query_cursors(text in docstore::strategies::cursor_text()) {
        fuzzing::query_cursor(text.as_bytes());
    }

    /// Feed cursors of every backend's format, well-formed or not.
    #[test]
    fn feed_cursors(text in docstore::strategies::change_cursor_text()) {
        fuzzing::feed_cursor(text.as_bytes());
    }
}
