//! The command line, as clap parses it.

use crate::exit::EXIT_CODES_HELP;
use crate::timefmt::TimeFormat;
use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The site of commands given no --site and no $DOCSTORE_SITE (except `import`, which needs
/// one).
pub const DEFAULT_SITE: &str = "default";

/// The actor of writes given no --actor and no $DOCSTORE_ACTOR.
pub const DEFAULT_ACTOR: &str = "docstore-cli";

/// The default store: a SQLite file in the working directory.
pub const DEFAULT_STORE: &str = "sqlite:docstore.db";

/// The environment variable naming the store when neither `--store` nor `--config` is given.
pub const STORE_ENV: &str = "DOCSTORE_URL";

/// Where the store comes from, strongest first.
pub const PRECEDENCE_HELP: &str = "\
Which store: --store URL or --config FILE (give at most one), else $DOCSTORE_URL, else
sqlite:docstore.db. Flags always beat environment variables (--site over $DOCSTORE_SITE,
--actor over $DOCSTORE_ACTOR); a variable set empty is the same as one not set. --config
reads only the [database] table of the file; a relative SQLite path in it is taken from the
file's folder (one in a URL, from the working directory).";

/// What a subcommand's help says of the global options, which it does not list.
pub const GLOBALS_HELP: &str = "\
Global options (--store, --config, --site, --actor, --time, --busy-timeout, -v, -q) work
with every command: `docstore --help` describes them.";

/// The clap command of [`Cli`], to parse with: a subcommand's help lists only its own
/// options and names the global ones once ([`GLOBALS_HELP`]); `docstore --help` describes
/// them. They are accepted before or after the subcommand, as before.
pub fn command() -> clap::Command {
    let top = <Cli as clap::CommandFactory>::command();
    let globals: Vec<clap::Arg> = top
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .map(|arg| arg.clone().hide(true))
        .collect();
    top.mut_subcommands(|sub| with_hidden_globals(sub, &globals))
}

/// `sub` and its subcommands with hidden copies of `globals` (clap then propagates nothing
/// over them) and [`GLOBALS_HELP`] after their help.
fn with_hidden_globals(sub: clap::Command, globals: &[clap::Arg]) -> clap::Command {
    globals
        .iter()
        .fold(sub, |sub, arg| sub.arg(arg.clone()))
        .after_help(GLOBALS_HELP)
        .mut_subcommands(|nested| with_hidden_globals(nested, globals))
}

/// Read, write and query documents in any docstore backend.
#[derive(Debug, Parser)]
#[command(
    name = "docstore",
    version,
    after_help = format!("{PRECEDENCE_HELP}\n\n{EXIT_CODES_HELP}")
)]
pub struct Cli {
    /// The store URL: memory:, sqlite:PATH or dynamodb://TABLE?region=R&endpoint=URL&max_scan=N
    /// [env: DOCSTORE_URL] [default: sqlite:docstore.db]. Commands that only read open a
    /// SQLite file read-only; a file holding another program's tables is refused (exit 6)
    /// unless the URL says sqlite:PATH?share_file=true.
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,

    /// A TOML file whose `[database]` table configures the store (backend, max_doc_bytes,
    /// sqlite.path, dynamodb.table, ...); every other table of the file is ignored.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The site (tenant) to work in [default: default]. `import` needs it given (or
    /// --all-sites): a bulk write never goes to a site nobody named.
    #[arg(long, env = "DOCSTORE_SITE", global = true)]
    pub site: Option<String>,

    /// The actor recorded as created_by / updated_by on writes (at most 256 bytes, no
    /// control characters).
    #[arg(long, env = "DOCSTORE_ACTOR", default_value = DEFAULT_ACTOR, global = true)]
    pub actor: String,

    /// How created_at / updated_at are printed: ns (unix nanoseconds, as stored) or rfc3339.
    /// Input accepts both everywhere.
    #[arg(long, value_enum, default_value_t = TimeFormat::Ns, global = true)]
    pub time: TimeFormat,

    /// How long a SQLite store waits for a lock another process holds, in milliseconds,
    /// before the command fails with exit code 9 (overrides busy_timeout_ms; default 5000;
    /// also bounds the retries of a call, retry.budget_ms, so it bounds the whole wait).
    #[arg(long, global = true, value_name = "MS")]
    pub busy_timeout: Option<u64>,

    /// Show the library's logs on standard error: -v info, -vv debug, -vvv trace (warnings
    /// are always shown). RUST_LOG (e.g. RUST_LOG=docstore_dynamodb=debug) overrides.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,

    /// No progress on standard error: neither the progress bars of export, import and copy
    /// on a terminal nor the progress lines of index build. Errors and warnings are still
    /// said.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line of `matches` (from [`command`]), with an environment variable set
    /// empty taken as not set, as `$DOCSTORE_URL` is: `DOCSTORE_SITE=` is the default site (or
    /// every site for `fsck`), `DOCSTORE_ACTOR=` the default actor. An empty flag (`--site ""`)
    /// is still what the user typed, and refused where it is invalid.
    pub fn from_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut cli = <Self as clap::FromArgMatches>::from_arg_matches(matches)?;
        let empty_from_env = |id: &str| {
            matches.value_source(id) == Some(clap::parser::ValueSource::EnvVariable)
                && matches
                    .get_one::<String>(id)
                    .is_some_and(|value| value.is_empty())
        };
        if empty_from_env("site") {
            cli.site = None;
        }
        if empty_from_env("actor") {
            DEFAULT_ACTOR.clone_into(&mut cli.actor);
        }
        Ok(cli)
    }
}

/// What `import` does with a line whose id is already stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OnExisting {
    /// Keep the stored document (an interrupted import can simply be run again).
    #[default]
    Skip,
    /// Replace the stored document when the line is newer: a higher version, or the same
    /// version written later (updated_at).
    Newer,
    /// Always replace the stored document with the line.
    Overwrite,
    /// Stop at the first line whose id is stored (exit code 4).
    Fail,
}

/// Where `watch` starts without --after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum FeedFrom {
    /// The oldest change the store keeps.
    Start,
    /// The end of the feed: only changes committed from now on.
    #[default]
    Now,
    /// Every document as it stands (kind "existing"), then every later change, each once:
    /// a new consumer that must see every document. Every line's cursor resumes it.
    Snapshot,
}

/// `docstore streams ...`.
#[derive(Debug, Subcommand)]
pub enum StreamsAction {
    /// Enable the stream (new and old images) on an existing table; prints its ARN and
    /// whether it was already on. The feed shows writes from then on: nothing written
    /// before is in it.
    Enable,
}

/// `docstore ttl ...`.
#[derive(Debug, Subcommand)]
pub enum TtlAction {
    /// Enable DynamoDB's time to live on the attribute `expires` of an existing table;
    /// prints whether it was already on. It removes delete records once their window is
    /// over, and expired documents no sweep removed a day after their expiry.
    Enable,
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
        /// The data: a JSON object, @FILE to read it from a file, or - (or @-) for standard
        /// input, which is also read when DATA is absent and standard input is not a terminal.
        data: Option<String>,
        /// The document expires this many seconds after the write (printed as
        /// "expires_at"): from then on it reads as deleted.
        #[arg(long, value_name = "SECONDS")]
        expires_after: Option<u64>,
    },
    /// Create or replace a document.
    Put {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The data: a JSON object, @FILE, or - / @- for standard input (see `create`).
        data: Option<String>,
        /// The document expires this many seconds after the write (see `create`).
        #[arg(long, value_name = "SECONDS")]
        expires_after: Option<u64>,
    },
    /// Apply a JSON merge patch (RFC 7386), retrying on concurrent writes.
    Update {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The patch: a JSON object, @FILE, or - / @- for standard input (see `create`).
        patch: Option<String>,
    },
    /// Apply a merge patch only if the document is at VERSION (exit code 5 otherwise).
    UpdateIf {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The version the document must be at (at least 1).
        version: u64,
        /// The patch: a JSON object, @FILE, or - / @- for standard input (see `create`).
        patch: Option<String>,
    },
    /// Delete a document; prints whether there was one. The change feed records --actor as
    /// who deleted it.
    Delete {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
    },
    /// Delete a document only if it is at VERSION (recorded as by --actor, as `delete`).
    DeleteIf {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The version the document must be at (at least 1).
        version: u64,
    },
    /// Query a collection, e.g. `docstore query tickets 'status = "open" and priority >= 3
    /// order by $updated_at desc limit 20'`, or with a JSON query object.
    ///
    /// Prints `{"documents": [...], "next": CURSOR, "exhausted_scan": BOOL}`, or with --jsonl one
    /// document per line. A partial answer (DynamoDB stopped at max_scan) is printed, warned
    /// about on standard error and ends with exit code 11 unless --allow-partial.
    Query {
        /// The collection.
        collection: String,
        /// The query: text form or JSON (starting with '{'), @FILE to read it from a file, or
        /// - (or @-) for standard input; all documents when absent.
        query: Option<String>,
        /// Continue after this cursor (the "next" of the previous page).
        #[arg(long)]
        cursor: Option<String>,
        /// Follow every page and print all matches, page by page as they arrive (LIMIT is the
        /// page size; 1000 when absent).
        #[arg(long)]
        all: bool,
        /// One document per line (JSON Lines) instead of one object; the next page's cursor,
        /// if any, goes to standard error.
        #[arg(long)]
        jsonl: bool,
        /// Accept a partial answer (exhausted_scan) with exit code 0; it is still warned about.
        #[arg(long)]
        allow_partial: bool,
        /// A strongly consistent answer: never read an eventually consistent index (a DynamoDB
        /// GSI), so every write finished before the query is seen. SQLite and memory always
        /// answer so.
        #[arg(long)]
        consistent: bool,
    },
    /// List the site's collections with their document counts.
    Collections,
    /// List the store's sites (every site holding a document, or a counter that is not 0:
    /// one `fsck` should look at) with their document counts:
    /// one JSON array of {"site", "count"}, by name, as `collections` lists collections.
    /// On DynamoDB this scans the table's keys (its layout keeps no list of sites).
    Sites,
    /// Print the number of documents in the site, or in one collection.
    Count {
        /// Only this collection.
        collection: Option<String>,
    },
    /// Write the site's documents as JSON lines (one document with its metadata per line;
    /// timestamps as --time says, and import reads both forms).
    Export {
        /// Only these collections (repeatable); all when absent.
        #[arg(long)]
        collection: Vec<String>,
        /// Every site's documents (a whole-store backup), site by site in name order;
        /// `import --all-sites` restores it. --site is then not used.
        #[arg(long)]
        all_sites: bool,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Read JSON lines written by export and restore every document with its metadata.
    ///
    /// Only lines of the site named by --site (or $DOCSTORE_SITE; one of them is required and
    /// must be a valid site name, checked before reading) are written; lines of other sites
    /// are counted per site in "other_sites" and said once (exit code 10), unless --all-sites
    /// restores every line into its own site. A UTF-8 byte order mark is accepted; a line that
    /// is not UTF-8 or not a document is skipped with its line number, and the import goes
    /// on.
    Import {
        /// The file to read (or @FILE); standard input when absent, "-" or "@-".
        input: Option<PathBuf>,
        /// Restore every line into the site it names (a whole-store restore); --site is then
        /// not used.
        #[arg(long, conflicts_with = "id_field")]
        all_sites: bool,
        /// Read plain JSON documents (JSON lines, or one JSON array) instead of export lines,
        /// each id taken from this top-level field (a string): new documents of --collection
        /// in the --site site, version 1, created now by --actor. The field is kept in the
        /// stored data, so `export | jq -c .data` gives the documents back as they came. A
        /// document without the field, whose field is not a string or not a valid id, or
        /// that is not an object is skipped with its line number (in an array, its position).
        #[arg(long, value_name = "FIELD", requires = "collection")]
        id_field: Option<String>,
        /// With --id-field: the collection the documents go into.
        #[arg(long, requires = "id_field")]
        collection: Option<String>,
        /// What to do with a line whose id is already stored.
        #[arg(long, value_enum, default_value_t = OnExisting::Skip)]
        on_existing: OnExisting,
        /// Stop at the N-th rejected line (not UTF-8, not a document, or refused by the
        /// store: too large, over the quota, ...), with the exit code of its kind (8 for
        /// the quota); lines of other sites do not count. Without it the import goes on
        /// to the end. Run the same import again to resume.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_errors: Option<u64>,
    },
    /// Copy the site's documents, metadata included, to another store.
    ///
    /// With --follow, a live migration: the site's change feed is read from before the copy
    /// starts, and after the copy every change is applied to the destination until Ctrl-C (or
    /// --until-idle); then every document's version is compared in both stores (exit code 10
    /// when one differs). Ctrl-C while copying or comparing says what is committed and how to
    /// go on, and exits 130 (as it does for a plain copy); run the same command to resume.
    Copy {
        /// The destination store URL.
        #[arg(long)]
        to: String,
        /// Only these collections (repeatable); all when absent.
        #[arg(long)]
        collection: Vec<String>,
        /// After the copy, apply the source's changes to the destination until Ctrl-C, then
        /// verify.
        #[arg(long)]
        follow: bool,
        /// With --follow: stop once the feed has had nothing new for 2 seconds.
        #[arg(long, requires = "follow")]
        until_idle: bool,
    },
    /// Print the site's changes (or one collection's) as they are committed: one JSON object
    /// per change with its "cursor", "kind" (created, updated, deleted), "site",
    /// "collection", "id", "version", "time", "actor" and "document" (null for a delete).
    /// Waits for new changes until Ctrl-C (or --until-idle); a closed pipe ends it quietly.
    /// Resume after the last change handled with --after CURSOR: nothing lost or repeated.
    Watch {
        /// Only this collection.
        collection: Option<String>,
        /// Start after this change (its "cursor").
        #[arg(long, value_name = "CURSOR", conflicts_with = "from")]
        after: Option<String>,
        /// Start at the oldest change the store keeps (start), at the end of the feed
        /// (now), or with every document as it stands, then the changes after (snapshot).
        #[arg(long, value_enum, default_value_t = FeedFrom::Now)]
        from: FeedFrom,
        /// Every site's changes (the whole store) instead of the --site site's.
        #[arg(long, conflicts_with = "collection")]
        all_sites: bool,
        /// One change per line (JSON Lines), also on a terminal.
        #[arg(long)]
        jsonl: bool,
        /// Stop once the feed has had nothing new for 2 seconds, instead of waiting.
        #[arg(long)]
        until_idle: bool,
    },
    /// Check the site's collection counters and unique indexes against its documents and
    /// print every difference as a JSON line ({"site", "collection", "counter", "documents",
    /// "repaired"} for a counter; {"site", "collection", "unique_index", "problem": "missing" |
    /// "orphan" | "shared", "ids", "repaired"} for a unique index); exit code 12 when a
    /// difference stands (documents sharing a unique value are never repaired). Without
    /// --site (and $DOCSTORE_SITE) every site of the store is checked.
    Fsck {
        /// Set every differing counter to the true number of documents and write the missing
        /// unique-index records (DynamoDB guards), delete the left-over ones.
        #[arg(long)]
        repair: bool,
    },
    /// Create the DynamoDB table the store names (on-demand billing), with a GSI for every
    /// index declared in --config and the stream the change feed reads; prints whether it was
    /// created or already existed.
    CreateTable,
    /// The DynamoDB stream behind `watch` and `copy --follow` (tables made by create-table
    /// have it already).
    Streams {
        /// What to do.
        #[command(subcommand)]
        action: StreamsAction,
    },
    /// DynamoDB's time to live on the table (tables made by create-table have it already).
    Ttl {
        /// What to do.
        #[command(subcommand)]
        action: TtlAction,
    },
    /// Apply writes atomically, all or nothing: a JSON array (or JSON lines) of
    /// `{"op": "create|put|update|update_if|delete_if|check", "collection", "id", "data" |
    /// "patch", "version"}` in the --site site; prints the outcomes in order. When one write
    /// fails nothing is written, and the error names it with its kind's exit code. Messages
    /// count writes from 1, and name their line (from 1) in JSON lines.
    ///
    /// A batch holds at most 50 writes and writes at most 3 000 000 bytes (key names plus
    /// the data it stores); a larger one is refused whole (exit 6): split it, or use
    /// `import` for bulk loads (not atomic as a whole, resumable).
    Batch {
        /// The writes: JSON text (starting with '[' or '{', as DATA of `put`), @FILE or a
        /// file name, or - / @- for standard input (also read when absent). A batch of checks
        /// alone never creates a SQLite file.
        input: Option<PathBuf>,
    },
    /// Print several documents of a collection at once: a JSON array in the ids' order, null
    /// where there is none.
    GetMany {
        /// The collection.
        collection: String,
        /// The document ids.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// How the store would run a query: the index serving it (or a scan), the key range,
    /// about how many documents it reads, and whether the answer is strongly consistent.
    Explain {
        /// The collection.
        collection: String,
        /// The query: text (`status = "open" order by priority desc limit 20`) or a JSON
        /// Query, @FILE, or - / @- for standard input; everything when absent.
        query: Option<String>,
        /// Plan a strongly consistent query (see `query --consistent`).
        #[arg(long)]
        consistent: bool,
    },
    /// The indexes a DynamoDB table holds: list them, add one, build it over the documents
    /// written before it (resumable, with progress, while applications keep writing), drop
    /// one. SQLite and memory stores build the indexes declared in --config when they open.
    Index {
        /// What to do.
        #[command(subcommand)]
        action: IndexAction,
    },
}

/// `docstore index ...`.
#[derive(Debug, Subcommand)]
pub enum IndexAction {
    /// Print the indexes the store holds (DynamoDB: from the table, with slot and state;
    /// SQLite and memory: the declared ones), one JSON object each.
    List,
    /// Add an index to the DynamoDB table (creates its GSI); queries use it once built.
    Add {
        /// The collection it is declared for (in every site).
        collection: String,
        /// The index name.
        name: String,
        /// At most one document of a site's collection may hold each value of its fields
        /// (documents missing one, or holding null, are not constrained); refused, naming
        /// up to 10 pairs, when documents already share a value (on DynamoDB by `index
        /// build`, which then leaves the index building).
        #[arg(long)]
        unique: bool,
        /// Its fields, most significant first, `-` for descending (`status -$updated_at`);
        /// when none are given, the declaration of that name in --config.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        fields: Vec<String>,
    },
    /// Give the documents written before the index was added their keys, then mark it built.
    ///
    /// Progress goes to standard error: a spinner on a terminal, else a line every
    /// --progress-interval seconds (-q for none). Ctrl-C (exit 130) says how far it got; run
    /// it again to resume from the last position it recorded.
    Build {
        /// The collection.
        collection: String,
        /// The index name.
        name: String,
        /// When standard error is not a terminal, the least time between two progress
        /// lines, in seconds (0: one line per page of 200 items read).
        #[arg(
            long,
            value_name = "SECONDS",
            default_value_t = crate::progress::DEFAULT_INTERVAL_SECS
        )]
        progress_interval: u64,
    },
    /// Drop an index from the DynamoDB table (and its GSI when nothing else uses it).
    Drop {
        /// The collection.
        collection: String,
        /// The index name.
        name: String,
    },
}

impl Command {
    /// Whether the command may create a new SQLite database file (`create`, `put`, `import`,
    /// `batch` unless it only checks); every other command refuses
    /// to run on a file that does not exist (a mistyped path is an error, not an empty store).
    pub fn creates_database(&self) -> bool {
        matches!(
            self,
            Command::Create { .. }
                | Command::Put { .. }
                | Command::Import { .. }
                | Command::Batch { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    #[test]
    fn the_command_is_consistent_and_globals_parse_after_the_subcommand() {
        command().debug_assert();
        let matches = command()
            .try_get_matches_from([
                "docstore",
                "index",
                "list",
                "--site",
                "s",
                "--busy-timeout",
                "7",
            ])
            .unwrap();
        let cli = Cli::from_arg_matches(&matches).unwrap();
        assert_eq!(
            (cli.site.as_deref(), cli.busy_timeout),
            (Some("s"), Some(7))
        );
    }
}
