//! The command line, as clap parses it.

use crate::exit::EXIT_CODES_HELP;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The default store: a SQLite file in the working directory.
pub const DEFAULT_STORE: &str = "sqlite:docstore.db";

/// Read, write and query documents in any docstore backend.
#[derive(Debug, Parser)]
#[command(name = "docstore", version, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// The store URL: memory:, sqlite:PATH or dynamodb://TABLE?region=R&endpoint=URL&max_scan=N
    /// [default: sqlite:docstore.db]
    #[arg(long, env = "DOCSTORE_URL", global = true, conflicts_with = "config")]
    pub store: Option<String>,

    /// A TOML file with a [database] table (backend, max_doc_bytes, sqlite.path,
    /// dynamodb.table, ...), instead of --store.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,

    /// The site (tenant) to work in.
    #[arg(long, env = "DOCSTORE_SITE", default_value = "default", global = true)]
    pub site: String,

    /// The actor recorded as created_by / updated_by on writes.
    #[arg(
        long,
        env = "DOCSTORE_ACTOR",
        default_value = "docstore-cli",
        global = true
    )]
    pub actor: String,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a document (exit code 3 when there is none).
    Get {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
    },
    /// Create a document; fails with exit code 4 when the id exists.
    Create {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The data as a JSON object; read from standard input when absent or "-".
        data: Option<String>,
    },
    /// Create or replace a document.
    Put {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The data as a JSON object; read from standard input when absent or "-".
        data: Option<String>,
    },
    /// Apply a JSON merge patch (RFC 7386), retrying on concurrent writes.
    Update {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The patch as a JSON object; read from standard input when absent or "-".
        patch: Option<String>,
    },
    /// Apply a merge patch only if the document is at VERSION (exit code 5 otherwise).
    UpdateIf {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The version the document must be at.
        version: u64,
        /// The patch as a JSON object; read from standard input when absent or "-".
        patch: Option<String>,
    },
    /// Delete a document; prints whether there was one.
    Delete {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
    },
    /// Delete a document only if it is at VERSION.
    DeleteIf {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The version the document must be at.
        version: u64,
    },
    /// Query a collection, e.g. `docstore query tickets 'status = "open" and priority >= 3
    /// order by $updated_at desc limit 20'`, or with a JSON query object.
    Query {
        /// The collection.
        collection: String,
        /// The query: text form or JSON (starting with '{'); all documents when absent.
        query: Option<String>,
        /// Continue after this cursor (the "next" of the previous page).
        #[arg(long)]
        cursor: Option<String>,
        /// Follow every page and print all matches (with LIMIT as the page size).
        #[arg(long)]
        all: bool,
    },
    /// List the site's collections with their document counts.
    Collections,
    /// Print the number of documents in the site.
    Count,
    /// Write the site's documents as JSON lines (one document with its metadata per line).
    Export {
        /// Only these collections (repeatable); all when absent.
        #[arg(long)]
        collection: Vec<String>,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Read JSON lines written by export and restore every document with its metadata.
    /// Documents whose id exists are skipped, so an interrupted import can simply be run again.
    Import {
        /// The file to read; standard input when absent or "-".
        input: Option<PathBuf>,
    },
    /// Copy the site's documents, metadata included, to another store.
    Copy {
        /// The destination store URL.
        #[arg(long)]
        to: String,
        /// Only these collections (repeatable); all when absent.
        #[arg(long)]
        collection: Vec<String>,
    },
    /// Create the DynamoDB table the store names (on-demand billing).
    CreateTable,
}
