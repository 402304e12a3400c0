//! Input a stranger could send: nothing aborts the process, and bad input is exit 6 (invalid
//! argument) with nothing written (docs/contract.md, "Hostile input").

mod support;

use std::process::Output;
use support::Sandbox;
use support::exit::{INVALID, NOT_FOUND, SKIPPED};

impl Sandbox {
    /// `docstore --store sqlite:db.sqlite --site s ARGS` in the sandbox directory.
    fn run(&self, args: &[&str]) -> Output {
        self.docstore(["--store", "sqlite:db.sqlite", "--site", "s"])
            .args(args)
            .output()
            .unwrap()
    }

    /// Writes `text` to a file in the sandbox; gives `@path` for a command's argument.
    fn at_file(&self, name: &str, text: &str) -> String {
        format!("@{}", self.file(name, text))
    }
}

fn assert_exit(output: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    stderr
}

#[test]
fn a_query_nested_beyond_the_limit_is_invalid_and_the_process_survives() {
    let sb = Sandbox::new();
    assert_exit(&sb.run(&["put", "c", "d", r#"{"a": 1}"#]), 0);
    let parens = format!("{}exists a{}", "(".repeat(20_000), ")".repeat(20_000));
    let nots = format!("{}exists a", "not ".repeat(100_000));
    for (name, text) in [("parens.txt", parens), ("nots.txt", nots)] {
        let query = sb.at_file(name, &text);
        let stderr = assert_exit(&sb.run(&["query", "c", &query]), INVALID);
        assert!(stderr.contains("nested more than 64"), "{name}: {stderr}");
    }
}

#[test]
fn a_document_that_names_a_key_twice_is_invalid_and_nothing_is_written() {
    let sb = Sandbox::new();
    let stderr = assert_exit(&sb.run(&["create", "c", "d", r#"{"x":1,"x":2}"#]), INVALID);
    assert!(stderr.contains("appears twice"), "{stderr}");
    assert_exit(&sb.run(&["get", "c", "d"]), NOT_FOUND);
    let patch = sb.at_file("patch.json", r#"{"a": {"b": 1, "b": 2}}"#);
    assert_exit(&sb.run(&["put", "c", "d", r#"{"a": 0}"#]), 0);
    let stderr = assert_exit(&sb.run(&["update", "c", "d", &patch]), INVALID);
    assert!(stderr.contains("appears twice"), "{stderr}");
    let got = sb.run(&["get", "c", "d"]);
    let doc: serde_json::Value = serde_json::from_slice(&assert_output(&got)).unwrap();
    assert_eq!(doc["data"], serde_json::json!({"a": 0}), "{doc}");
}

fn assert_output(output: &Output) -> Vec<u8> {
    assert_exit(output, 0);
    output.stdout.clone()
}

/// An import line longer than any document line can be (16 MiB) is read through and skipped
/// with its reason, never held whole; the next line is imported. Exit 10: lines were skipped.
#[test]
fn an_import_line_past_the_bound_is_skipped_and_the_next_one_imported() {
    let sb = Sandbox::new();
    let long = format!("{{\"_id\": \"a\", \"x\": \"{}\"}}\n", "y".repeat(17 << 20));
    let input = format!("{long}{{\"_id\": \"b\"}}\n");
    let output = sb
        .docstore(["--store", "sqlite:db.sqlite", "--site", "s"])
        .args(["import", "--id-field", "_id", "--collection", "c"])
        .write_stdin(input)
        .output()
        .unwrap();
    let stderr = assert_exit(&output, SKIPPED);
    assert!(stderr.contains("longer than 16777216 bytes"), "{stderr}");
    assert_exit(&sb.run(&["get", "c", "b"]), 0);
    assert_exit(&sb.run(&["get", "c", "a"]), NOT_FOUND);
}

/// A document file larger than any input can hold (64 MiB) is refused before it is read
/// whole: exit 7 (too large).
#[test]
fn an_input_file_past_the_bound_is_too_large() {
    let sb = Sandbox::new();
    let huge = sb.at_file("huge.json", &" ".repeat((64 << 20) + 1));
    let stderr = assert_exit(&sb.run(&["put", "c", "d", &huge]), 7);
    assert!(stderr.contains("larger than"), "{stderr}");
}
