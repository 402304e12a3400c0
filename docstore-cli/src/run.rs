//! Running one parsed command line.

use crate::args::{
    Cli, Command, DEFAULT_SITE, DEFAULT_STORE, FeedFrom, STORE_ENV, StreamsAction, TtlAction,
};
use crate::exit::{self, CliError};
use crate::live_copy;
use crate::output::Out;
use crate::plain::{PlainInput, PlainTarget};
use crate::store_identity;
use crate::timefmt;
use crate::transfer::{self, ImportOptions, Summary};
use crate::watch::{self, Until};
use docstore::config::{Backend, Config};
use docstore::document::MAX_DEPTH;
use docstore::feed::FeedScope;
use docstore::json;
use docstore::{ChangeCursor, Collection, Data, FeedStart, Filter, Key, Query, Store};
use futures_util::TryStreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::Path;

/// The page size of `query --all` when the query has no LIMIT.
const ALL_PAGE: usize = 1000;

/// Runs the command; the caller turns an error into its message and exit code.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    crate::progress::set_quiet(cli.quiet);
    let mut config = load_config(&cli)?;
    store_identity::set_busy_timeout(&mut config.database, cli.busy_timeout);
    if config.database.backend == Backend::Memory {
        warn_memory("the store");
    }
    if let Command::CreateTable = cli.command {
        return create_table(&config, &mut Out::new(cli.time)).await;
    }
    if let Command::Streams {
        action: StreamsAction::Enable,
    } = cli.command
    {
        return enable_stream(&config, &mut Out::new(cli.time)).await;
    }
    if let Command::Ttl {
        action: TtlAction::Enable,
    } = cli.command
    {
        return enable_ttl(&config, &mut Out::new(cli.time)).await;
    }
    check_import_site(&cli)?;
    check_plain_import(&cli)?;
    let batch = read_batch(&cli)?;
    let writes_something = batch.as_ref().is_none_or(|batch| {
        batch
            .writes
            .iter()
            .any(|write| !matches!(write, docstore::Write::Check { .. }))
    });
    if !(cli.command.creates_database() && writes_something) {
        refuse_missing_sqlite(&config)?;
    }
    if let Command::Index { action } = &cli.command {
        let mut out = Out::new(cli.time);
        let flags = store_identity::store_flags(&cli);
        crate::indexes::run(action, &config, &flags, &mut out).await?;
        return out.flush();
    }
    let store = open_store(&config, only_reads(&cli.command)).await?;
    let mut out = Out::new(cli.time);
    let result = execute(cli, batch, &config, &store, &mut out).await;
    let flushed = out.flush();
    result
        .and(flushed)
        .map_err(|err| explain_missing_table(err, &config))
}

/// What every command runs with: the open store, its configuration, and the command line's
/// site, actor and global flags.
struct Session<'a> {
    store: &'a Store,
    config: &'a Config,
    site: &'a str,
    actor: &'a str,
    time: timefmt::TimeFormat,
    busy_timeout: Option<u64>,
}

impl Session<'_> {
    fn key(&self, collection: &str, id: &str) -> Result<Key, CliError> {
        Ok(Key::new(self.site, collection, id)?)
    }
}

async fn execute(
    cli: Cli,
    batch: Option<crate::batch::Batch>,
    config: &Config,
    store: &Store,
    out: &mut Out,
) -> Result<(), CliError> {
    let session = Session {
        store,
        config,
        site: cli.site.as_deref().unwrap_or(DEFAULT_SITE),
        actor: cli.actor.as_str(),
        time: cli.time,
        busy_timeout: cli.busy_timeout,
    };
    match cli.command {
        command @ (Command::Get { .. }
        | Command::Create { .. }
        | Command::Put { .. }
        | Command::Update { .. }
        | Command::UpdateIf { .. }
        | Command::Delete { .. }
        | Command::DeleteIf { .. }) => document_command(&session, command, out).await,
        command @ (Command::Query { .. }
        | Command::Explain { .. }
        | Command::Collections
        | Command::Sites
        | Command::Count { .. }
        | Command::GetMany { .. }) => read_command(&session, command, out).await,
        command @ (Command::Export { .. } | Command::Import { .. } | Command::Copy { .. }) => {
            transfer_command(&session, command, out).await
        }
        command @ Command::Watch { .. } => watch_command(&session, command, out).await,
        Command::Fsck { repair } => {
            // Without `--site`, every site.
            crate::whole_store::fsck(store, cli.site.as_deref(), repair, out).await
        }
        Command::Batch { .. } => {
            let batch = batch.expect("a batch is read before the store opens");
            crate::batch::run(store, &batch, session.actor, out).await
        }
        Command::CreateTable
        | Command::Index { .. }
        | Command::Streams { .. }
        | Command::Ttl { .. } => {
            unreachable!("handled before opening the store")
        }
    }
}

/// A call on one document: get, create, put, update, update-if, delete, delete-if.
async fn document_command(
    session: &Session<'_>,
    command: Command,
    out: &mut Out,
) -> Result<(), CliError> {
    let (store, actor) = (session.store, session.actor);
    let written = |key: &Key, document: docstore::Result<docstore::Document>, out: &mut Out| {
        out.document(&document.map_err(|e| in_key(e, key))?)
    };
    match command {
        Command::Get { collection, id } => {
            let key = session.key(&collection, &id)?;
            match store.get(&key).await.map_err(|e| in_key(e, &key))? {
                Some(document) => out.document(&document),
                None => Err(CliError::new(exit::NOT_FOUND, format!("no document {key}"))),
            }
        }
        Command::Create {
            collection,
            id,
            data,
            expires_after,
        } => {
            let key = session.key(&collection, &id)?;
            let data = json_object(data, "DATA", "create")?;
            let document = expiring(store.create(&key, data, actor), expires_after).await;
            written(&key, document, out)
        }
        Command::Put {
            collection,
            id,
            data,
            expires_after,
        } => {
            let key = session.key(&collection, &id)?;
            let data = json_object(data, "DATA", "put")?;
            let document = expiring(store.put(&key, data, actor), expires_after).await;
            written(&key, document, out)
        }
        Command::Update {
            collection,
            id,
            patch,
        } => {
            let key = session.key(&collection, &id)?;
            let patch = json_object(patch, "PATCH", "update")?;
            written(&key, store.update(&key, &patch, actor).await, out)
        }
        Command::UpdateIf {
            collection,
            id,
            version,
            patch,
        } => {
            let key = session.key(&collection, &id)?;
            check_version(version)?;
            let patch = json_object(patch, "PATCH", "update-if")?;
            written(
                &key,
                store.update_if(&key, &patch, version, actor).await,
                out,
            )
        }
        Command::Delete { collection, id } => {
            let key = session.key(&collection, &id)?;
            let deleted = as_actor(store, &key, actor)?
                .delete(key.id())
                .await
                .map_err(|e| in_key(e, &key))?;
            out.value(&json!({ "deleted": deleted }))
        }
        Command::DeleteIf {
            collection,
            id,
            version,
        } => {
            let key = session.key(&collection, &id)?;
            check_version(version)?;
            as_actor(store, &key, actor)?
                .delete_if(key.id(), version)
                .await
                .map_err(|e| in_key(e, &key))?;
            out.value(&json!({ "deleted": true }))
        }
        _ => unreachable!("dispatched by execute"),
    }
}

/// A read of the site: query, explain, collections, sites, count, get-many.
async fn read_command(
    session: &Session<'_>,
    command: Command,
    out: &mut Out,
) -> Result<(), CliError> {
    let (store, site) = (session.store, session.site);
    match command {
        Command::Query {
            collection,
            query,
            cursor,
            all,
            jsonl,
            allow_partial,
            consistent,
        } => {
            let query = query_text(query, "query")?;
            let mut query = parse_query(query.as_deref())?;
            query.consistent |= consistent;
            if let Some(cursor) = cursor {
                query.cursor = Some(cursor.into());
            }
            if all && query.limit.is_none() {
                query.limit = Some(ALL_PAGE);
            }
            let shape = QueryOutput {
                all,
                jsonl,
                allow_partial,
                max_scan: max_scan(session.config),
            };
            run_query(store, site, &collection, query, shape, out).await
        }
        Command::Explain {
            collection,
            query,
            consistent,
        } => {
            let query = query_text(query, "explain")?;
            let mut query = parse_query(query.as_deref())?;
            query.consistent |= consistent;
            let plan = store.explain(site, &collection, &query).await?;
            crate::output::say(&plan);
            out.value(&explained(&plan))
        }
        Command::Collections => {
            let listing: Vec<Value> = store
                .collections(site)
                .await?
                .into_iter()
                .map(|(collection, count)| json!({ "collection": collection, "count": count }))
                .collect();
            out.value(&listing)
        }
        Command::Sites => crate::whole_store::list_sites(store, out).await,
        Command::Count { collection: None } => out.value(&store.count(site).await?),
        Command::Count {
            collection: Some(collection),
        } => {
            docstore::key::validate_collection(&collection)?;
            let count = store
                .collections(site)
                .await?
                .into_iter()
                .find(|(name, _)| *name == collection)
                .map_or(0, |(_, count)| count);
            out.value(&count)
        }
        Command::GetMany { collection, ids } => {
            crate::batch::get_many(store, site, &collection, &ids, out).await
        }
        _ => unreachable!("dispatched by execute"),
    }
}

/// `explain`'s JSON: the plan chosen, the candidates weighed, and why.
fn explained(plan: &docstore::Explain) -> Value {
    json!({
        "index": plan.index,
        "key_range": plan.key_range,
        "reading": plan.reading.name(),
        "walk": if plan.walk_sorts_once() { "sorts_once" } else { "page_by_page" },
        "estimated_reads": plan.estimated_reads,
        "read_limit": plan.read_limit,
        "strongly_consistent": plan.strongly_consistent,
        "candidates": plan.candidates.iter().map(|c| json!({
            "index": c.index,
            "reading": c.reading.name(),
            "estimated_reads": c.reads,
        })).collect::<Vec<_>>(),
        "why": plan.why,
    })
}

/// Documents in and out: export, import, copy.
async fn transfer_command(
    session: &Session<'_>,
    command: Command,
    out: &mut Out,
) -> Result<(), CliError> {
    match command {
        Command::Export {
            collection,
            all_sites,
            output,
        } => export(session, &collection, all_sites, output.as_deref()).await,
        Command::Import {
            input,
            all_sites,
            on_existing,
            id_field,
            collection,
            max_errors,
        } => {
            let mut reader = open_input(input.as_deref(), "import", "[INPUT]")?;
            let options = ImportOptions {
                site: (!all_sites).then(|| session.site.to_owned()),
                on_existing,
                in_flight: transfer::batches_in_flight(session.config.database.max_docs_per_site),
                errors: std::sync::Arc::new(transfer::ErrorBudget::new(max_errors)),
            };
            crate::interrupt::explain_transfer("import");
            let summary = match (id_field, collection) {
                (Some(id_field), Some(collection)) => {
                    let target = PlainTarget {
                        site: session.site.to_owned(),
                        collection,
                        id_field,
                        actor: session.actor.to_owned(),
                    };
                    import_plain(session.store, &mut reader, target, &options).await
                }
                _ => transfer::import(session.store, &mut reader, &options).await,
            }
            .map_err(|e| crate::interrupt::explain_disk_full(e, "import"))?;
            finish(summary, out)
        }
        Command::Copy {
            to,
            collection,
            follow,
            until_idle,
        } => {
            copy(
                session,
                &to,
                &collection,
                follow.then_some(until(until_idle)),
                out,
            )
            .await
        }
        _ => unreachable!("dispatched by execute"),
    }
}

/// `export`: the site's collection (or every site's) as JSON lines into `output` or standard
/// output.
async fn export(
    session: &Session<'_>,
    collection: &[String],
    all_sites: bool,
    output: Option<&Path>,
) -> Result<(), CliError> {
    let mut writer: Box<dyn std::io::Write> = match output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| CliError::io(&path.display().to_string(), e))?,
        )),
        None => Box::new(std::io::BufWriter::new(crate::output::stdout_writer())),
    };
    let (store, time) = (session.store, session.time);
    let written = if all_sites {
        crate::whole_store::export_all_sites(store, collection, time, &mut writer).await?
    } else {
        transfer::export(store, session.site, collection, time, &mut writer).await?
    };
    eprintln!("exported {written} documents");
    Ok(())
}

/// `copy --to TO`: the site's collection (or all of it) copied into the store at `to`; with
/// `follow`, then the changes that follow, until that says.
async fn copy(
    session: &Session<'_>,
    to: &str,
    collection: &[String],
    follow: Option<Until>,
    out: &mut Out,
) -> Result<(), CliError> {
    match follow {
        Some(_) => live_copy::explain_ctrl_c_while_copying(),
        None => crate::interrupt::explain_transfer("copy"),
    }
    let mut to = docstore_any::parse_url(to)?;
    store_identity::set_busy_timeout(&mut to, session.busy_timeout);
    store_identity::refuse_copy_onto_itself(&session.config.database, &to)?;
    if to.backend == Backend::Memory {
        warn_memory("the --to store");
    }
    let destination = docstore_any::open(&to).await?;
    let in_flight = transfer::batches_in_flight(to.max_docs_per_site);
    let (store, site) = (session.store, session.site);
    let Some(until) = follow else {
        let summary = transfer::copy(store, &destination, site, collection, in_flight)
            .await
            .map_err(|e| crate::interrupt::explain_disk_full(e, "copy"))?;
        return finish(summary, out);
    };
    let live =
        live_copy::copy_and_follow(store, &destination, site, collection, in_flight, until).await?;
    finish_live_copy(live, out)
}

/// `watch`: the changes of a collection, a site or the whole store, from where it says.
async fn watch_command(
    session: &Session<'_>,
    command: Command,
    out: &mut Out,
) -> Result<(), CliError> {
    let Command::Watch {
        collection,
        after,
        from,
        all_sites,
        jsonl,
        until_idle,
    } = command
    else {
        unreachable!("dispatched by execute")
    };
    let site = session.site;
    let scope = match (&collection, all_sites) {
        (_, true) => FeedScope::whole_store(),
        (Some(collection), false) => FeedScope::collection(site, collection)?,
        (None, false) => FeedScope::site(site)?,
    };
    let start = match (after, from) {
        (Some(cursor), _) => FeedStart::After(ChangeCursor::parse(&cursor)?),
        (None, FeedFrom::Start) => FeedStart::Oldest,
        (None, FeedFrom::Now) => FeedStart::Now,
        (None, FeedFrom::Snapshot) => FeedStart::Snapshot,
    };
    watch::watch(session.store, &scope, start, until(until_idle), jsonl, out).await?;
    Ok(())
}

/// When a following command (`watch`, `copy --follow`) ends: idle, or at Ctrl-C.
fn until(until_idle: bool) -> Until {
    if until_idle {
        Until::Idle
    } else {
        Until::Interrupted
    }
}

/// The collection of `key` written as `actor`: `Store::delete` records no actor on the change
/// feed, a collection handle's delete records its site's (docs/contract.md, "Change feed").
fn as_actor(store: &Store, key: &Key, actor: &str) -> Result<Collection<Data>, CliError> {
    let site = store.site(key.site())?.with_actor(actor)?;
    Ok(site.collection(key.collection())?)
}

/// Versions start at 1: a condition on version 0 could never hold.
fn check_version(version: u64) -> Result<(), CliError> {
    if version == 0 {
        return Err(CliError::invalid(
            "VERSION must be at least 1 (a document's first version is 1)",
        ));
    }
    Ok(())
}

/// The writes of `batch`, read and checked before the store is opened (a batch of checks
/// alone then never creates a database file).
fn read_batch(cli: &Cli) -> Result<Option<crate::batch::Batch>, CliError> {
    let Command::Batch { input } = &cli.command else {
        return Ok(None);
    };
    let text = match input.as_deref().and_then(crate::batch::inline) {
        Some(inline) => inline.to_owned(),
        None => read_all(
            &mut open_input(input.as_deref(), "batch", "[INPUT]")?,
            "the batch",
        )?,
    };
    let site = cli.site.as_deref().unwrap_or(DEFAULT_SITE);
    crate::batch::parse(&text, site).map(Some)
}

/// The input of `import` or `batch` (or a QUERY given as `@FILE`): the file named by INPUT or
/// by `@FILE`, or standard input for `-`, `@-` or no INPUT (refused when standard input is a
/// terminal: nothing would come; `what` names the missing argument).
fn open_input(
    input: Option<&Path>,
    command: &str,
    what: &str,
) -> Result<Box<dyn BufRead>, CliError> {
    let at_file = input.and_then(|p| p.to_str()?.strip_prefix('@').map(Path::new));
    match at_file.or(input) {
        Some(path) if path.as_os_str() != "-" => {
            let file = std::fs::File::open(path)
                .map_err(|e| CliError::io(&path.display().to_string(), e))?;
            Ok(Box::new(BufReader::new(file)))
        }
        _ if std::io::stdin().is_terminal() => Err(missing_input(command, what)),
        _ => Ok(Box::new(BufReader::new(std::io::stdin().lock()))),
    }
}

/// `import` writes into the site it is given, which must be named and valid: checked before
/// the store is opened or a line is read.
fn check_import_site(cli: &Cli) -> Result<(), CliError> {
    let Command::Import {
        all_sites: false, ..
    } = cli.command
    else {
        return Ok(());
    };
    let Some(site) = &cli.site else {
        return Err(CliError::new(
            exit::USAGE,
            "import: name the site to write into with --site SITE (or $DOCSTORE_SITE), or \
             restore every line into its own site with --all-sites",
        ));
    };
    docstore::key::validate_site(site)
        .map_err(|e| CliError::from(e).context(format!("import --site {site:?}")))
}

/// `import --id-field FIELD --collection COLLECTION` names a field and a valid collection:
/// checked before the store is opened or a line is read.
fn check_plain_import(cli: &Cli) -> Result<(), CliError> {
    let Command::Import {
        id_field: Some(id_field),
        collection: Some(collection),
        ..
    } = &cli.command
    else {
        return Ok(());
    };
    if id_field.is_empty() {
        return Err(CliError::new(
            exit::INVALID_ARGUMENT,
            "import --id-field: the field name is empty",
        ));
    }
    docstore::key::validate_collection(collection)
        .map_err(|e| CliError::from(e).context(format!("import --collection {collection:?}")))
}

/// `import --id-field`: plain documents of `reader` imported as new documents of `target`
/// (see [`crate::plain`]); the documents skipped while reading are counted with the others.
async fn import_plain(
    store: &Store,
    reader: &mut dyn BufRead,
    target: PlainTarget,
    options: &ImportOptions,
) -> Result<Summary, CliError> {
    let mut plain = PlainInput::new(reader, target)?.with_errors(options.errors.clone());
    let mut summary = transfer::import(store, &mut plain, options).await?;
    plain.add_skipped_to(&mut summary);
    Ok(summary)
}

/// A store error of a call on `key`, with the key in its message.
fn in_key(err: docstore::Error, key: &Key) -> CliError {
    match err {
        docstore::Error::NotFound { .. } => {
            CliError::new(exit::NOT_FOUND, format!("no document {key}"))
        }
        err => CliError::from(err).context(key),
    }
}

fn warn_memory(which: &str) {
    eprintln!(
        "warning: {which} is memory:, which keeps nothing: its documents are gone when this \
         command ends (every docstore command is a new process); use sqlite:FILE to keep them"
    );
}

/// Read commands never create a database: a mistyped path is an error naming it, not an
/// empty store answering "not found".
/// Opens the store; for a command that only reads, a SQLite file read-only, so that the
/// command changes nothing in it, as sqlite3 would not (docs/contract.md, "The command
/// line").
async fn open_store(config: &Config, only_reads: bool) -> Result<Store, CliError> {
    let mut database = config.database.clone();
    if only_reads && let Some(sqlite) = database.sqlite.as_mut() {
        sqlite.read_only = true;
    }
    Ok(docstore_any::open(&database).await?)
}

/// Whether `command` only reads its store. Every command not named here may write (a
/// batch too: even one of checks only runs as a write transaction).
fn only_reads(command: &Command) -> bool {
    match command {
        Command::Get { .. }
        | Command::GetMany { .. }
        | Command::Query { .. }
        | Command::Collections
        | Command::Sites
        | Command::Count { .. }
        | Command::Export { .. }
        | Command::Copy { .. }
        | Command::Watch { .. }
        | Command::Explain { .. } => true,
        Command::Fsck { repair } => !repair,
        _ => false,
    }
}

fn refuse_missing_sqlite(config: &Config) -> Result<(), CliError> {
    let database = &config.database;
    if database.backend != Backend::Sqlite {
        return Ok(());
    }
    let Some(sqlite) = &database.sqlite else {
        return Ok(());
    };
    let path = &sqlite.path;
    if path.as_os_str() == ":memory:" || path.exists() {
        return Ok(());
    }
    Err(CliError::new(
        exit::FAILURE,
        format!(
            "no SQLite database at {}: only create, put, import and a batch that writes create a new one; check the \
             path (--store, --config or ${STORE_ENV})",
            path.display()
        ),
    ))
}

/// A missing DynamoDB table, said for someone at a shell.
fn explain_missing_table(err: CliError, config: &Config) -> CliError {
    if !err.missing_table {
        return err;
    }
    let table = config
        .database
        .dynamodb
        .as_ref()
        .map_or("?", |d| d.table.as_str());
    CliError::new(
        exit::FAILURE,
        format!(
            "the DynamoDB table `{table}` does not exist at this endpoint and region (or is not \
             active yet); create it with `docstore --store <the same URL> create-table`"
        ),
    )
}

/// The configuration: `--store` or `--config` (at most one), else `$DOCSTORE_URL`, else the
/// default. A flag always beats the environment.
fn load_config(cli: &Cli) -> Result<Config, CliError> {
    match (&cli.store, &cli.config) {
        (Some(_), Some(_)) => Err(CliError::new(
            exit::USAGE,
            "--store and --config both choose the store: give one of them",
        )),
        (None, Some(path)) => config_file(path),
        (Some(url), None) => from_url(url),
        (None, None) => match std::env::var(STORE_ENV) {
            Ok(url) if !url.is_empty() => {
                from_url(&url).map_err(|e| e.context(format!("${STORE_ENV}")))
            }
            _ => from_url(DEFAULT_STORE),
        },
    }
}

fn from_url(url: &str) -> Result<Config, CliError> {
    Ok(Config {
        database: docstore_any::parse_url(url)?,
    })
}

/// The `[database]` table of a TOML file, whatever else the file holds; a relative
/// `sqlite.path` is taken from the file's folder.
fn config_file(path: &Path) -> Result<Config, CliError> {
    let text = crate::text::read_file(path)?;
    let mut config = config_text(&text, path)?;
    config.database.resolve_relative_paths(path);
    Ok(config)
}

/// The `[database]` table of the TOML `text` of the file at `path` (named in errors).
pub(crate) fn config_text(text: &str, path: &Path) -> Result<Config, CliError> {
    let invalid =
        |e: &dyn std::fmt::Display| CliError::invalid(format!("config {}: {e}", path.display()));
    let mut file: toml::Table = toml::from_str(text).map_err(|e| invalid(&e))?;
    let Some(database) = file.remove("database") else {
        return Err(invalid(
            &"no [database] table (it holds backend = \"memory\" | \"sqlite\" | \"dynamodb\" \
              and that backend's settings)",
        ));
    };
    let mut only = toml::Table::new();
    only.insert("database".to_owned(), database);
    Config::deserialize(toml::Value::Table(only)).map_err(|e| invalid(&e))
}

fn max_scan(config: &Config) -> Option<usize> {
    match config.database.backend {
        Backend::Dynamodb => config.database.dynamodb.as_ref().map(|d| d.max_scan),
        _ => None,
    }
}

/// The usage error for a command whose input would be read from a terminal.
fn missing_input(command: &str, what: &str) -> CliError {
    CliError::new(
        exit::USAGE,
        format!(
            "{command}: {what} is missing and standard input is a terminal; give it as an \
             argument, @FILE, or pipe it in (- or @- reads standard input)\n\n\
             Usage: docstore {command} --help"
        ),
    )
}

/// A JSON object from the argument: the text itself, `@FILE`, or standard input for `-`,
/// `@-` or no argument (refused when standard input is a terminal: nothing would come).
fn json_object(arg: Option<String>, what: &str, command: &str) -> Result<Data, CliError> {
    let read_stdin = || crate::text::read_text(&mut std::io::stdin(), "standard input");
    let text = match arg.as_deref() {
        Some("-" | "@-") => read_stdin()?,
        Some(file) if file.starts_with('@') => crate::text::read_file(Path::new(&file[1..]))?,
        Some(text) => text.to_owned(),
        None if std::io::stdin().is_terminal() => return Err(missing_input(command, what)),
        None => read_stdin()?,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let value: Value = json::parse(text, MAX_DEPTH)
        .map_err(|e| CliError::invalid(format!("{what} is not valid JSON: {e}")))?;
    docstore::object(value).map_err(|e| CliError::from(e).context(what))
}

/// All of `reader` as text (not UTF-8 is invalid input).
fn read_all(reader: &mut impl Read, what: &str) -> Result<String, CliError> {
    crate::text::read_text(reader, what)
}

/// The QUERY argument: the text itself, or read from `@FILE`, or from standard input for `-`
/// or `@-` (as `import` and `batch` read their input, see [`open_input`]).
fn query_text(arg: Option<String>, command: &str) -> Result<Option<String>, CliError> {
    match arg {
        Some(arg) if arg == "-" || arg.starts_with('@') => {
            let mut input = open_input(Some(Path::new(&arg)), command, "QUERY")?;
            let text = read_all(&mut input, "the query")?;
            Ok(Some(text.trim_start_matches('\u{feff}').to_owned()))
        }
        arg => Ok(arg),
    }
}

/// A query from its text or JSON form; RFC 3339 strings compared with `$created_at` or
/// `$updated_at` become nanoseconds.
pub(crate) fn parse_query(text: Option<&str>) -> Result<Query, CliError> {
    let Some(text) = text else {
        return Ok(Query::new());
    };
    let mut query = if text.trim_start().starts_with('{') {
        json::check(text, usize::MAX)
            .map_err(|e| CliError::invalid(format!("query: {e}")))
            .and_then(|()| {
                serde_json::from_str(text)
                    .map_err(|e| CliError::invalid(format!("query is not a valid JSON query: {e}")))
            })?
    } else {
        Query::parse(text).map_err(|e| {
            let line = text.lines().nth(e.line - 1).unwrap_or("");
            let pad = " ".repeat(e.column - 1);
            let place = if text.contains('\n') {
                format!("line {} column {}", e.line, e.column)
            } else {
                format!("column {}", e.column)
            };
            CliError::invalid(format!(
                "invalid query: {}\n  {line}\n  {pad}^ {place}",
                e.message
            ))
        })?
    };
    if let Some(filter) = &mut query.filter {
        timestamps_in(filter).map_err(CliError::invalid)?;
    }
    Ok(query)
}

/// Turns RFC 3339 strings compared with `$created_at` / `$updated_at` into nanoseconds.
fn timestamps_in(filter: &mut Filter) -> Result<(), String> {
    let is_time = |field: &str| matches!(field, "$created_at" | "$updated_at");
    let convert = |field: &str, value: &mut Value| -> Result<(), String> {
        if let Value::String(text) = value {
            let nanos = timefmt::parse_rfc3339(text).map_err(|e| format!("{field}: {e}"))?;
            *value = Value::from(nanos);
        }
        Ok(())
    };
    match filter {
        Filter::And(items) | Filter::Or(items) => {
            for item in items {
                timestamps_in(item)?;
            }
        }
        Filter::Not(inner) => timestamps_in(inner)?,
        Filter::Eq(f, v)
        | Filter::Ne(f, v)
        | Filter::Lt(f, v)
        | Filter::Lte(f, v)
        | Filter::Gt(f, v)
        | Filter::Gte(f, v)
            if is_time(f) =>
        {
            convert(f, v)?
        }
        Filter::In(f, values) if is_time(f) => {
            for v in values {
                convert(f, v)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// How `query` prints.
struct QueryOutput {
    all: bool,
    jsonl: bool,
    allow_partial: bool,
    max_scan: Option<usize>,
}

/// Prints one page, or every match as it arrives (`--all`, see [`run_walk`]).
///
/// The page is read before anything is printed, so every check of the query (limit,
/// cursor, collection, filter) fails with nothing on standard output.
async fn run_query(
    store: &Store,
    site: &str,
    collection: &str,
    query: Query,
    shape: QueryOutput,
    out: &mut Out,
) -> Result<(), CliError> {
    if shape.all {
        return run_walk(store, site, collection, query, shape, out).await;
    }
    let page = store.query(site, collection, &query).await?;
    if page.exhausted_scan {
        warn_partial(collection, shape.max_scan, &query);
    }
    if shape.jsonl {
        for document in &page.documents {
            out.document_line(document)?;
        }
        if let Some(next) = &page.next {
            out.flush()?;
            eprintln!("next page: --cursor {}", next.as_str());
        }
    } else {
        out.begin_documents()?;
        for document in &page.documents {
            out.listed_document(document)?;
        }
        out.end_documents(page.next.as_ref(), page.exhausted_scan, None)?;
    }
    partial_exit(page.exhausted_scan, &shape, out)
}

/// `query --all`: every match through the store's walk ([`Store::stream`]: page by page, or
/// sorted once when the plan sorts in memory), printed as it comes; memory holds a page.
///
/// The first match (or the end) is read before anything is printed, so every check of the
/// query fails with nothing on standard output. A later failure closes the printed object
/// with `"error"` and, in `next`, the cursor to resume at.
async fn run_walk(
    store: &Store,
    site: &str,
    collection: &str,
    query: Query,
    shape: QueryOutput,
    out: &mut Out,
) -> Result<(), CliError> {
    let page_size = query.limit.unwrap_or(ALL_PAGE);
    let mut walk = store.stream(site, collection, &query);
    let mut item = walk.try_next().await;
    if let Err(err) = &item
        && !matches!(err, docstore::Error::PartialAnswer(_))
    {
        return Err(CliError::from(item.unwrap_err()));
    }
    if !shape.jsonl {
        out.begin_documents()?;
    }
    let mut printed = 0usize;
    let mut partial = false;
    let failed = loop {
        match item {
            Ok(Some(document)) if shape.jsonl => out.document_line(&document)?,
            Ok(Some(document)) => out.listed_document(&document)?,
            Ok(None) => break None,
            Err(docstore::Error::PartialAnswer(_)) => {
                partial = true;
                warn_partial(collection, shape.max_scan, &query);
                break None;
            }
            Err(err) => break Some(CliError::from(err)),
        }
        printed += 1;
        if printed.is_multiple_of(page_size) {
            out.flush()?;
        }
        item = walk.try_next().await;
    };
    // Where to resume: after the last document printed, when the walk stopped early.
    let next = if failed.is_some() || partial {
        walk.resume_cursor()
    } else {
        None
    };
    if shape.jsonl {
        if let Some(next) = &next {
            out.flush()?;
            eprintln!("next page: --cursor {}", next.as_str());
        }
    } else {
        let error = failed.as_ref().map(|e| e.message.as_str());
        out.end_documents(next.as_ref(), partial, error)?;
    }
    if let Some(err) = failed {
        return Err(err);
    }
    partial_exit(partial, &shape, out)
}

/// The partial-answer exit (unless `--allow-partial`) once the answer is printed.
fn partial_exit(partial: bool, shape: &QueryOutput, out: &mut Out) -> Result<(), CliError> {
    if partial && !shape.allow_partial {
        out.flush()?;
        return Err(CliError::new(
            exit::PARTIAL_ANSWER,
            "the answer is partial (exhausted_scan, see the warning above); --allow-partial \
             accepts partial answers with exit code 0",
        ));
    }
    Ok(())
}

fn warn_partial(collection: &str, max_scan: Option<usize>, query: &Query) {
    let budget = max_scan.map_or("its scan budget".to_owned(), |n| {
        format!("max_scan = {n} items (or 64 MiB)")
    });
    let index = match suggested_index(collection, query) {
        Some(index) => format!(
            " An index would serve it exactly at any size; declare it in the config file \
             (and build it over the existing documents):\n{index}"
        ),
        None => String::new(),
    };
    eprintln!(
        "warning: partial answer: the store read only the first documents of `{collection}` \
         by id (it stops at {budget}) and evaluated the query on those, because no declared \
         index serves this query. Also exact at any size: a query in id order (no ORDER BY, or \
         ORDER BY $id). Or raise max_scan (?max_scan=N in the URL, database.dynamodb.max_scan \
         in a config file).{index}"
    );
}

/// A declaration of the index that would serve `query`: its equality fields, then its
/// order (as TOML for `[[database.indexes]]`); `None` when the query has neither.
fn suggested_index(collection: &str, query: &Query) -> Option<String> {
    let mut fields: Vec<docstore::Order> = Vec::new();
    let mut push = |order: docstore::Order| {
        if order.field != "$id" && !fields.iter().any(|f| f.field == order.field) {
            fields.push(order);
        }
    };
    let top = match &query.filter {
        Some(Filter::And(items)) => items.iter().collect(),
        Some(filter) => vec![filter],
        None => Vec::new(),
    };
    for filter in top {
        if let Filter::Eq(field, _) = filter {
            push(docstore::Order::asc(field.clone()));
        }
    }
    for order in &query.order {
        push(order.clone());
    }
    if fields.is_empty() {
        return None;
    }
    let text: Vec<String> = fields
        .iter()
        .map(|o| {
            let sign = if o.descending { "-" } else { "" };
            serde_json::to_string(&format!("{sign}{}", o.field)).expect("strings serialize")
        })
        .collect();
    let mut name: String = fields
        .iter()
        .map(|o| o.field.as_str())
        .collect::<Vec<_>>()
        .join("_")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    name = format!("by_{}", name.trim_matches('_'));
    name.truncate(64);
    Some(format!(
        "  [[database.indexes]]\n  collection = {collection:?}\n  name = {name:?}\n  fields = [{}]",
        text.join(", ")
    ))
}

/// Prints an import or copy summary; skipped documents or lines make the exit code 10.
fn finish(summary: Summary, out: &mut Out) -> Result<(), CliError> {
    out.value(&summary)?;
    let other_sites: u64 = summary.other_sites.values().sum();
    crate::output::say(format_args!(
        "imported {}, replaced {}, already present {}, skipped {}",
        summary.imported,
        summary.replaced,
        summary.already_present,
        summary.skipped.len() as u64 + other_sites
    ));
    if other_sites > 0 {
        eprintln!("{}", other_sites_message(&summary.other_sites));
    }
    if summary.skipped.is_empty() && other_sites == 0 {
        return Ok(());
    }
    Err(CliError::new(
        exit::SKIPPED,
        format!(
            "{} lines of other sites and {} documents or lines were skipped (see \
             \"other_sites\" and \"skipped\")",
            other_sites,
            summary.skipped.len()
        ),
    ))
}

/// One sentence for every line of another site than the one imported into.
fn other_sites_message(other_sites: &std::collections::BTreeMap<String, u64>) -> String {
    const SHOWN: usize = 5;
    let mut sites: Vec<String> = other_sites
        .iter()
        .take(SHOWN)
        .map(|(site, lines)| format!("{site:?}: {lines}"))
        .collect();
    if other_sites.len() > SHOWN {
        sites.push(format!("and {} more sites", other_sites.len() - SHOWN));
    }
    format!(
        "skipped {} lines of other sites ({}); import them with --site SITE, or restore every \
         line into its own site with --all-sites",
        other_sites.values().sum::<u64>(),
        sites.join(", ")
    )
}

/// Prints a live copy's summary; exit code 10 when documents were skipped or differ.
fn finish_live_copy(live: live_copy::LiveCopy, out: &mut Out) -> Result<(), CliError> {
    out.value(&live)?;
    let mismatched = live.mismatched.len() as u64 + live.more_mismatched;
    crate::output::say(format_args!(
        "imported {}, already present {}, skipped {}; followed {} changes; verified {} \
         documents, {mismatched} differ",
        live.copy.imported,
        live.copy.already_present,
        live.copy.skipped.len(),
        live.followed,
        live.verified,
    ));
    if mismatched > 0 || !live.copy.skipped.is_empty() {
        return Err(CliError::new(
            exit::SKIPPED,
            format!(
                "{mismatched} documents differ between the stores and {} were skipped (see \
                 \"mismatched\" and \"skipped\")",
                live.copy.skipped.len()
            ),
        ));
    }
    Ok(())
}

/// The DynamoDB store `config` names, for the commands that manage its table; `command` says
/// which one needs it when the store is not DynamoDB.
async fn dynamodb_store(
    config: &Config,
    command: &str,
) -> Result<(docstore_dynamodb::DynamoStore, String), CliError> {
    let database = &config.database;
    let dynamodb = match (database.backend, &database.dynamodb) {
        (Backend::Dynamodb, Some(dynamodb)) => dynamodb,
        _ => {
            return Err(CliError::invalid(format!(
                "{command} needs a dynamodb:// store"
            )));
        }
    };
    let store = docstore_dynamodb::DynamoStore::connect(dynamodb, database.store_options()).await?;
    Ok((store, dynamodb.table.clone()))
}

/// `docstore streams enable`.
async fn enable_stream(config: &Config, out: &mut Out) -> Result<(), CliError> {
    let (store, table) = dynamodb_store(config, "streams enable").await?;
    let enabled = store.enable_stream().await?;
    let status = if enabled.newly_enabled {
        eprintln!(
            "enabled the stream of table `{table}`: the change feed shows writes from now on \
             (nothing written before is in it)"
        );
        "enabled"
    } else {
        eprintln!("the stream of table `{table}` was already enabled; left as it is");
        "already enabled"
    };
    out.value(&json!({ "table": table, "stream_arn": enabled.stream_arn, "status": status }))?;
    out.flush()
}

/// `docstore ttl enable`.
async fn enable_ttl(config: &Config, out: &mut Out) -> Result<(), CliError> {
    let (store, table) = dynamodb_store(config, "ttl enable").await?;
    let status = if store.enable_ttl().await?.newly_enabled {
        eprintln!("enabled time to live on `expires` of table `{table}`");
        "enabled"
    } else {
        eprintln!(
            "time to live on `expires` of table `{table}` was already enabled; left as it is"
        );
        "already enabled"
    };
    out.value(&json!({ "table": table, "attribute": "expires", "status": status }))?;
    out.flush()
}

async fn create_table(config: &Config, out: &mut Out) -> Result<(), CliError> {
    use docstore::driver::Driver as _;
    let (store, table) = dynamodb_store(config, "create-table").await?;
    // A read that succeeds proves the table is there; any failure (missing table, or
    // something create_table will report too) leads to creating it.
    let probe = Key::new("docstore-cli", "create-table", "probe")?;
    let status = if store.get(&probe).await.is_ok() {
        eprintln!("table `{table}` exists; left as it is");
        "exists"
    } else {
        store.create_table().await?;
        eprintln!("created table `{table}`");
        "created"
    };
    out.value(&json!({ "table": table, "status": status }))?;
    out.flush()
}

/// `call`, expiring `seconds` after the write when `--expires-after` was given.
fn expiring<'a, R: 'a>(
    call: docstore::WriteCall<'a, R>,
    seconds: Option<u64>,
) -> docstore::WriteCall<'a, R> {
    match seconds {
        Some(seconds) => call.expires_after(std::time::Duration::from_secs(seconds)),
        None => call,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggested_index_has_the_equalities_then_the_order() {
        let query =
            Query::parse(r#"status = "open" and p > 1 order by $updated_at desc, $id"#).unwrap();
        let text = suggested_index("tickets", &query).unwrap();
        assert!(
            text.contains(r#"fields = ["status", "-$updated_at"]"#),
            "{text}"
        );
        assert!(text.contains(r#"name = "by_status_updated_at""#), "{text}");
        // The suggestion is a valid declaration.
        let declaration: toml::Table = toml::from_str(&text.replace("\n  ", "\n")).unwrap();
        let index = &declaration["database"]["indexes"][0];
        let index: docstore::index::Index = index.clone().try_into().unwrap();
        assert_eq!(index.collection, "tickets");
        assert_eq!(suggested_index("t", &Query::new()), None);
    }
}
