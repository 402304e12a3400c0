//! The command line, round two (docs/contract.md, "The command line"): output that stays parseable on failure, `import
//! --site` checked up front, read-only stores, honest hints and checks, plain JSON in.

mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::process::Output;
use support::exit::{INVALID, USAGE};
use support::{Sandbox, expect};

impl Sandbox {
    /// `docstore --store <store> ARGS`.
    fn cmd(&self, store: &str, args: &[&str]) -> Command {
        let mut command = self.docstore(["--store", store]);
        command.args(args);
        command
    }

    /// Runs and asserts the exit code; returns the output.
    fn run(&self, store: &str, args: &[&str], code: i32) -> Output {
        expect(self.cmd(store, args), code)
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

/// Export lines of `count` documents of site `site`.
fn export_lines(site: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            serde_json::json!({"site": site, "collection": "t", "id": format!("d{i}"),
                "data": {}, "created_at": 1, "updated_at": 2, "created_by": "a",
                "updated_by": "a", "version": 1})
            .to_string()
                + "\n"
        })
        .collect()
}

#[test]
fn import_refuses_an_invalid_site_before_reading_or_creating_anything() {
    let sandbox = Sandbox::new();
    let store = sandbox.sqlite("never.db");
    for site in ["bad name", ""] {
        for (flag, env) in [(true, false), (false, true)] {
            let mut cmd = sandbox.cmd(&store, &[]);
            if flag {
                cmd.args(["--site", site]);
            }
            if env {
                cmd.env("DOCSTORE_SITE", site);
            }
            let output = cmd
                .arg("import")
                .write_stdin(export_lines("s", 2))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            // `DOCSTORE_SITE=` is no site at all, as if unset: the usage error naming --site.
            let code = if env && site.is_empty() {
                USAGE
            } else {
                INVALID
            };
            assert_eq!(output.status.code(), Some(code), "{site:?}: {stderr}");
            assert!(output.stdout.is_empty(), "{site:?}");
            assert!(stderr.contains("--site"), "{stderr}");
        }
    }
    assert!(!sandbox.path("never.db").exists());
}

#[test]
fn import_into_a_site_no_line_is_for_says_so_once_with_a_count() {
    let sandbox = Sandbox::new();
    let input = sandbox.path("other.jsonl");
    std::fs::write(
        &input,
        export_lines("other", 300) + &export_lines("third", 2),
    )
    .unwrap();
    let store = sandbox.sqlite("d.db");
    let output = sandbox.run(
        &store,
        &["--site", "s", "import", input.to_str().unwrap()],
        10,
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        summary["other_sites"],
        serde_json::json!({"other": 300, "third": 2})
    );
    assert_eq!(summary["skipped"], serde_json::json!([]));
    assert!(output.stdout.len() < 200, "{}", output.stdout.len());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("skipped 302 lines").count(), 1, "{stderr}");
    assert!(!stderr.contains("skipped line"), "{stderr}");
    assert!(
        stderr.contains("skipped 302 lines of other sites (\"other\": 300, \"third\": 2)"),
        "{stderr}"
    );
    assert!(stderr.lines().count() <= 3, "{stderr}");
}

/// The user id `nobody` runs as, when the tests run as root (root writes any file).
const NOBODY: &str = "65534";

/// Whether this process can write a file whose mode forbids it (root can: chmod is then not
/// enough to make a file read-only for it).
fn writes_protected_files(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let probe = dir.join("probe");
    std::fs::write(&probe, "").unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o444)).unwrap();
    let writable = std::fs::OpenOptions::new().write(true).open(&probe).is_ok();
    std::fs::remove_file(&probe).unwrap();
    writable
}

#[test]
fn a_read_only_sqlite_file_can_be_exported_copied_and_checked() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("ro.db");
    sandbox.run(&store, &["--site", "s", "create", "u", "z", "{}"], 0);
    // Both the file and its folder read-only: SQLite can write neither the file nor a journal.
    let read_only = std::fs::Permissions::from_mode(0o555);
    std::fs::set_permissions(sandbox.path("ro.db"), read_only.clone()).unwrap();
    let as_root = writes_protected_files(sandbox.dir());
    std::fs::set_permissions(sandbox.dir(), read_only).unwrap();
    let cases: [(&[&str], usize); 4] = [
        (&["export"], 4),
        (&["export", "--collection", "t"], 3),
        (&["copy", "--to", "memory:"], 1),
        (&["fsck"], 0),
    ];
    for (args, stdout_lines) in cases {
        let binary = assert_cmd::cargo::cargo_bin("docstore");
        let mut cmd = if as_root {
            let mut cmd = std::process::Command::new("setpriv");
            cmd.args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"])
                .arg(binary);
            cmd
        } else {
            std::process::Command::new(binary)
        };
        let output = cmd
            .current_dir(sandbox.dir())
            .env_remove("DOCSTORE_URL")
            .args(["--store", &store, "--site", "s"])
            .args(args)
            .output()
            .expect("setpriv runs the command as nobody when the tests run as root");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(stdout.lines().count(), stdout_lines, "{args:?}: {stdout}");
        assert_parseable(&output.stdout, &format!("{args:?}"));
    }
}

// ---- hints and checks that say what is true ----

#[test]
fn import_and_batch_read_at_file_and_at_dash_as_their_hint_says() {
    let sandbox = Sandbox::new();
    let source = sandbox.store_with_documents("from.db");
    let export = sandbox.run(&source, &["--site", "s", "export"], 0).stdout;
    std::fs::write(sandbox.path("e.jsonl"), &export).unwrap();
    let store = sandbox.sqlite("to.db");
    sandbox.run(&store, &["--site", "s", "import", "@e.jsonl"], 0);
    let again = sandbox
        .cmd(&store, &["--site", "s", "import", "@-"])
        .write_stdin(export)
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(summary["already_present"], 3, "{summary}");
    let check = r#"[{"op":"check","collection":"t","id":"a","version":1}]"#;
    std::fs::write(sandbox.path("b.json"), check).unwrap();
    sandbox.run(&store, &["--site", "s", "batch", "@b.json"], 0);
    let from_stdin = sandbox
        .cmd(&store, &["--site", "s", "batch", "@-"])
        .write_stdin(check)
        .output()
        .unwrap();
    assert_eq!(from_stdin.status.code(), Some(0));
}

#[test]
fn read_commands_never_create_a_database_file() {
    let sandbox = Sandbox::new();
    let check = r#"{"op":"check","collection":"c","id":"a","version":null}"#;
    let batch = sandbox
        .cmd(&sandbox.sqlite("nodb5.db"), &["batch"])
        .write_stdin(check)
        .output()
        .unwrap();
    assert_eq!(batch.status.code(), Some(1));
    assert!(!sandbox.path("nodb5.db").exists());
    let list = sandbox.run(&sandbox.sqlite("missing.db"), &["index", "list"], 1);
    let stderr = String::from_utf8_lossy(&list.stderr);
    assert!(stderr.contains("no SQLite database at"), "{stderr}");
    assert!(!sandbox.path("missing.db").exists());
}

#[test]
fn a_condition_on_version_0_is_an_invalid_argument() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("v.db");
    for args in [
        &["--site", "s", "update-if", "t", "a", "0", "{}"][..],
        &["--site", "s", "delete-if", "t", "a", "0"][..],
    ] {
        let output = sandbox.run(&store, args, INVALID);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("at least 1"), "{stderr}");
    }
}

#[test]
fn export_with_rfc3339_time_writes_rfc3339_that_imports_the_same() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("t.db");
    let plain = sandbox.run(&store, &["--site", "s", "export"], 0).stdout;
    let args = ["--site", "s", "--time", "rfc3339", "export"];
    let rfc = sandbox.run(&store, &args, 0).stdout;
    let first: Value =
        serde_json::from_str(String::from_utf8_lossy(&rfc).lines().next().unwrap()).unwrap();
    let created = first["created_at"].as_str().expect("an RFC 3339 string");
    assert!(created.ends_with('Z') && created.contains('T'), "{created}");
    std::fs::write(sandbox.path("rfc.jsonl"), &rfc).unwrap();
    let copy = sandbox.sqlite("copy.db");
    sandbox.run(&copy, &["--site", "s", "import", "rfc.jsonl"], 0);
    assert_eq!(
        sandbox.run(&copy, &["--site", "s", "export"], 0).stdout,
        plain
    );
}

#[test]
fn fsck_without_a_site_checks_every_site() {
    let sandbox = Sandbox::new();
    let store = sandbox.store_with_documents("f.db");
    sandbox.run(&store, &["--site", "other", "create", "u", "z", "{}"], 0);
    let output = sandbox.run(&store, &["fsck"], 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("2 sites, 2 collections with documents; 0 counters differed"),
        "{stderr}"
    );
    let output = sandbox.run(&store, &["--site", "s", "fsck"], 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("1 collections with documents"), "{stderr}");
}
