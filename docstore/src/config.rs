//! Configuration types for choosing a backend, shared by every crate that opens a store.
//!
//! The keys are those of the original design, so an application can nest [`Config`] in its
//! own configuration file. Unknown keys are errors, so a typo never silently means a default.
//!
//! ```
//! use docstore::config::{Backend, Config};
//!
//! let config: Config = serde_json::from_value(serde_json::json!({
//!     "database": {
//!         "backend": "dynamodb",
//!         "max_doc_bytes": 100000,
//!         "dynamodb": { "table": "docs", "region": "eu-west-1" }
//!     }
//! })).unwrap();
//! assert_eq!(config.database.backend, Backend::Dynamodb);
//! assert_eq!(config.database.dynamodb.unwrap().max_scan, 10_000);
//! ```

use crate::options::{DEFAULT_MAX_DOC_BYTES, StoreOptions};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The default number of items a DynamoDB query reads before it stops.
pub const DEFAULT_MAX_SCAN: usize = 10_000;

/// The top level: everything sits under `database`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The store settings.
    pub database: DatabaseConfig,
}

/// `database.*`: which backend, its limits and its own settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `database.backend`: `memory`, `sqlite` or `dynamodb`.
    pub backend: Backend,
    /// `database.max_doc_bytes`: the largest serialized document data (default 390 000).
    #[serde(default = "default_max_doc_bytes")]
    pub max_doc_bytes: usize,
    /// `database.max_docs_per_site`: the soft per-site quota (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_docs_per_site: Option<u64>,
    /// `database.sqlite.*`, used when `backend = "sqlite"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqlite: Option<SqliteConfig>,
    /// `database.dynamodb.*`, used when `backend = "dynamodb"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamodb: Option<DynamoDbConfig>,
}

/// The backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// In process memory; gone when the process ends.
    Memory,
    /// One SQLite file.
    Sqlite,
    /// One DynamoDB table.
    Dynamodb,
}

/// `database.sqlite.*`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// `database.sqlite.path`: the database file.
    pub path: PathBuf,
}

/// `database.dynamodb.*`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamoDbConfig {
    /// `database.dynamodb.table`: the table name.
    pub table: String,
    /// `database.dynamodb.region` (default: the standard AWS region chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// `database.dynamodb.endpoint`: an explicit endpoint, for emulators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `database.dynamodb.max_scan`: items a query reads at most (default 10 000).
    #[serde(default = "default_max_scan")]
    pub max_scan: usize,
}

impl DatabaseConfig {
    /// The backend-independent settings as [`StoreOptions`] (with the system clock).
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions::default()
            .with_max_doc_bytes(self.max_doc_bytes)
            .with_max_docs_per_site(self.max_docs_per_site)
    }
}

fn default_max_doc_bytes() -> usize {
    DEFAULT_MAX_DOC_BYTES
}

fn default_max_scan() -> usize {
    DEFAULT_MAX_SCAN
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_apply() {
        let config: Config =
            serde_json::from_value(json!({"database": {"backend": "memory"}})).unwrap();
        assert_eq!(config.database.max_doc_bytes, 390_000);
        assert_eq!(config.database.max_docs_per_site, None);
        assert_eq!(config.database.store_options().max_doc_bytes, 390_000);
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = serde_json::from_value::<Config>(
            json!({"database": {"backend": "sqlite", "sqlite": {"pth": "x"}}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("pth"), "{err}");
        let err = serde_json::from_value::<Config>(json!({"database": {"backend": "mongo"}}))
            .unwrap_err();
        assert!(err.to_string().contains("mongo"), "{err}");
    }
}
