//! What the command-line tests share: the exit codes they check, and a sandbox directory the
//! real `docstore` binary runs in, inheriting none of the environment's docstore settings.

// Each test file uses a part of this module.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Exit codes (`docstore --help` lists them; the numbers are the contract these tests check).
pub mod exit {
    /// A backend or I/O error.
    pub const FAILURE: i32 = 1;
    /// A bad command line.
    pub const USAGE: i32 = 2;
    /// No document at the key.
    pub const NOT_FOUND: i32 = 3;
    /// An invalid argument.
    pub const INVALID: i32 = 6;
    /// A store that stayed busy or unavailable.
    pub const UNAVAILABLE: i32 = 9;
    /// An import that skipped lines.
    pub const SKIPPED: i32 = 10;
    /// `fsck` found counters that disagree with the documents.
    pub const COUNTERS_DIFFER: i32 = 12;
    /// Interrupted (SIGINT).
    pub const INTERRUPTED: i32 = 130;
}

/// The environment variables no test's command inherits: each test says what it sets.
const INHERITED_NEVER: [&str; 4] = [
    "DOCSTORE_URL",
    "DOCSTORE_SITE",
    "DOCSTORE_ACTOR",
    "RUST_LOG",
];

/// A temporary directory the binary runs in, removed with the sandbox.
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The store URL of the SQLite file `name` in the sandbox.
    pub fn sqlite(&self, name: &str) -> String {
        format!("sqlite:{}", self.path(name).display())
    }

    /// Writes `bytes` to the file `name` in the sandbox; its path.
    pub fn file(&self, name: &str, bytes: impl AsRef<[u8]>) -> String {
        let path = self.path(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_owned()
    }

    /// `docstore ARGS`, run in the sandbox directory.
    pub fn docstore(&self, args: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Command {
        let mut command = Command::cargo_bin("docstore").unwrap();
        command.current_dir(self.dir.path());
        for name in INHERITED_NEVER {
            command.env_remove(name);
        }
        command.args(args);
        command
    }

    /// [`Sandbox::docstore`] as a `std` command (to spawn it, or to choose its streams).
    pub fn std_docstore(
        &self,
        args: impl IntoIterator<Item = impl AsRef<OsStr>>,
    ) -> std::process::Command {
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("docstore"));
        command.current_dir(self.dir.path());
        for name in INHERITED_NEVER {
            command.env_remove(name);
        }
        command.args(args);
        command
    }
}

/// Runs `command` and asserts its exit code (the failure shows its standard error); its
/// output.
pub fn expect(mut command: Command, code: i32) -> Output {
    let output = command.output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(code),
        "{command:?}: stderr {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Standard output as one JSON value; a panic naming the text when it is not one.
pub fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&output.stdout)))
}
