//! # docstore-cli
//!
//! The `docstore` command: every [`Store`](docstore::Store) call from a shell, plus `export`,
//! `import` and `copy` between stores, and `create-table` for DynamoDB. Run `docstore --help`.
//!
//! The library part holds the text query language ([`text_query`]) so that applications can
//! accept the same short queries their developers type.

pub mod args;
mod exit;
mod output;
mod record;
mod run;
pub mod text_query;
mod transfer;

pub use exit::{CliError, EXIT_CODES_HELP};
pub use run::run;
