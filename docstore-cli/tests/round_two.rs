//! The command line, round two (issue 20): output that stays parseable on failure, `import
//! --site` checked up front, read-only stores, honest hints and checks, plain JSON in.

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;

/// The exit code of an invalid argument (`docstore --help` lists them).
const INVALID: i32 = 6;

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `docstore --store <store> ARGS` in the sandbox directory, no environment settings.
    fn cmd(&self, store: &str, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("docstore").unwrap();
        cmd.current_dir(self.dir.path())
            .env_remove("DOCSTORE_URL")
            .env_remove("DOCSTORE_SITE")
            .args(["--store", store])
            .args(args);
        cmd
    }

    fn sqlite(&self, name: &str) -> String {
        format!("sqlite:{}", self.path(name).display())
    }

    /// Runs and asserts the exit code; returns the output.
    fn run(&self, store: &str, args: &[&str], code: i32) -> Output {
        let output = self.cmd(store, args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: stderr {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// A store at `name` with documents a, b, c in collection t of site s.
    fn store_with_documents(&self, name: &str) -> String {
        let store = self.sqlite(name);
        for id in ["a", "b", "c"] {
            self.run(&store, &["--site", "s", "create", "t", id, r#"{"x":1}"#], 0);
        }
        store
    }
}

/// Every line of `stdout` is a whole JSON value (one object, or JSON lines), or it is empty.
fn assert_parseable(stdout: &[u8], what: &str) {
    let text = String::from_utf8_lossy(stdout);
    let whole = serde_json::from_str::<Value>(&text).is_ok();
    let lines = text
        .lines()
        .all(|line| serde_json::from_str::<Value>(line).is_ok());
    assert!(
        text.trim().is_empty() || whole || lines,
        "{what}: stdout is not JSON: {text:?}"
    );
}

#[test]
fn a_query_failing_at_its_first_page_prints_nothing_on_stdout() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("q.db");
    let first = sandbox.run(&store, &["--site", "s", "query", "t", "limit 1"], 0);
    let page: Value = serde_json::from_slice(&first.stdout).unwrap();
    let cursor = page["next"].as_str().unwrap().to_owned();
    let nested = format!("{}x = 1", "not ".repeat(70));
    let cases: Vec<Vec<&str>> = vec![
        vec!["t", "limit 0"],
        vec!["t", "--cursor", "garbage"],
        vec!["t", "order by x desc limit 1", "--cursor", &cursor],
        vec!["bad name"],
        vec!["t", &nested],
    ];
    for case in &cases {
        for extra in [
            &[][..],
            &["--all"][..],
            &["--jsonl"][..],
            &["--all", "--jsonl"][..],
        ] {
            let mut args = vec!["--site", "s", "query"];
            args.extend(case);
            args.extend(extra);
            let output = sandbox.run(&store, &args, INVALID);
            assert_parseable(&output.stdout, &format!("{args:?}"));
            assert!(output.stdout.is_empty(), "{args:?}: {:?}", output.stdout);
        }
    }
}
