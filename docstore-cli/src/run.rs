//! Running one parsed command line.

use crate::args::{Cli, Command, DEFAULT_STORE};
use crate::exit::CliError;
use crate::output::print;
use crate::text_query;
use crate::transfer::{self, Summary};
use docstore::config::{Backend, Config};
use docstore::{Data, Document, Key, Query, Store};
use serde_json::{Value, json};
use std::io::{BufReader, Read};

/// Runs the command; the caller turns an error into its message and exit code.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    let config = load_config(&cli)?;
    if let Command::CreateTable = cli.command {
        return create_table(&config).await;
    }
    let store = docstore_any::open(&config).await?;
    let store: &dyn Store = store.as_ref();
    let site = cli.site.as_str();
    let actor = cli.actor.as_str();
    let key = |collection: &str, id: &str| Key::new(site, collection, id);
    match cli.command {
        Command::Get { collection, id } => match store.get(&key(&collection, &id)?).await? {
            Some(document) => print(&document),
            None => {
                return Err(CliError::new(
                    3,
                    format!("no document {site}/{collection}/{id}"),
                ));
            }
        },
        Command::Create {
            collection,
            id,
            data,
        } => {
            let data = json_object(data, "DATA")?;
            print(&store.create(&key(&collection, &id)?, data, actor).await?);
        }
        Command::Put {
            collection,
            id,
            data,
        } => {
            let data = json_object(data, "DATA")?;
            print(&store.put(&key(&collection, &id)?, data, actor).await?);
        }
        Command::Update {
            collection,
            id,
            patch,
        } => {
            let patch = json_object(patch, "PATCH")?;
            print(&store.update(&key(&collection, &id)?, &patch, actor).await?);
        }
        Command::UpdateIf {
            collection,
            id,
            version,
            patch,
        } => {
            let patch = json_object(patch, "PATCH")?;
            print(
                &store
                    .update_if(&key(&collection, &id)?, &patch, version, actor)
                    .await?,
            );
        }
        Command::Delete { collection, id } => {
            let deleted = store.delete(&key(&collection, &id)?).await?;
            print(&json!({ "deleted": deleted }));
        }
        Command::DeleteIf {
            collection,
            id,
            version,
        } => {
            store.delete_if(&key(&collection, &id)?, version).await?;
            print(&json!({ "deleted": true }));
        }
        Command::Query {
            collection,
            query,
            cursor,
            all,
        } => {
            let mut query = parse_query(query.as_deref())?;
            if let Some(cursor) = cursor {
                query.cursor = Some(cursor.into());
            }
            run_query(store, site, &collection, query, all).await?;
        }
        Command::Collections => {
            let listing: Vec<Value> = store
                .collections(site)
                .await?
                .into_iter()
                .map(|(collection, count)| json!({ "collection": collection, "count": count }))
                .collect();
            print(&listing);
        }
        Command::Count => print(&store.count(site).await?),
        Command::Export { collection, output } => {
            let mut out: Box<dyn std::io::Write> = match output {
                Some(path) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(&path)
                        .map_err(|e| CliError::io(&path.display().to_string(), e))?,
                )),
                None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            };
            let written = transfer::export(store, site, &collection, &mut out).await?;
            eprintln!("exported {written} documents");
        }
        Command::Import { input } => {
            let mut reader: Box<dyn std::io::BufRead> = match input {
                Some(path) if path.as_os_str() != "-" => Box::new(BufReader::new(
                    std::fs::File::open(&path)
                        .map_err(|e| CliError::io(&path.display().to_string(), e))?,
                )),
                _ => Box::new(BufReader::new(std::io::stdin().lock())),
            };
            let summary = transfer::import(store, &mut reader).await?;
            finish(summary)?;
        }
        Command::Copy { to, collection } => {
            let destination = docstore_any::open_url(&to).await?;
            let summary = transfer::copy(store, destination.as_ref(), site, &collection).await?;
            finish(summary)?;
        }
        Command::CreateTable => unreachable!("handled before opening the store"),
    }
    Ok(())
}

/// The configuration from `--config` (TOML) or the store URL.
fn load_config(cli: &Cli) -> Result<Config, CliError> {
    match &cli.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::io(&path.display().to_string(), e))?;
            toml::from_str(&text)
                .map_err(|e| CliError::invalid(format!("config {}: {e}", path.display())))
        }
        None => Ok(docstore_any::parse_url(
            cli.store.as_deref().unwrap_or(DEFAULT_STORE),
        )?),
    }
}

/// A JSON object from the argument, or from standard input when it is absent or `-`.
fn json_object(arg: Option<String>, what: &str) -> Result<Data, CliError> {
    let text = match arg {
        Some(text) if text != "-" => text,
        _ => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| CliError::io("reading standard input", e))?;
            text
        }
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::invalid(format!("{what} is not valid JSON: {e}")))?;
    Ok(docstore::object(value)?)
}

/// A query from its text or JSON form.
fn parse_query(text: Option<&str>) -> Result<Query, CliError> {
    let Some(text) = text else {
        return Ok(Query::new());
    };
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text)
            .map_err(|e| CliError::invalid(format!("query is not a valid JSON query: {e}")));
    }
    text_query::parse(text).map_err(|e| {
        let pad = " ".repeat(e.column - 1);
        CliError::invalid(format!(
            "invalid query: {}\n  {text}\n  {pad}^ column {}",
            e.message, e.column
        ))
    })
}

async fn run_query(
    store: &dyn Store,
    site: &str,
    collection: &str,
    mut query: Query,
    all: bool,
) -> Result<(), CliError> {
    if !all {
        let page = store.query(site, collection, &query).await?;
        print(&json!({
            "documents": page.documents,
            "next": page.next,
            "exhausted_scan": page.exhausted_scan,
        }));
        return Ok(());
    }
    let mut documents: Vec<Document> = Vec::new();
    let mut exhausted_scan = false;
    loop {
        let page = store.query(site, collection, &query).await?;
        documents.extend(page.documents);
        exhausted_scan |= page.exhausted_scan;
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    print(&json!({ "documents": documents, "next": null, "exhausted_scan": exhausted_scan }));
    Ok(())
}

/// Prints an import or copy summary; skipped documents make the exit code 10.
fn finish(summary: Summary) -> Result<(), CliError> {
    print(&summary);
    eprintln!(
        "imported {}, already present {}, skipped {}",
        summary.imported,
        summary.already_present,
        summary.skipped.len()
    );
    if summary.skipped.is_empty() {
        Ok(())
    } else {
        Err(CliError::new(
            10,
            format!(
                "{} documents were skipped (see \"skipped\")",
                summary.skipped.len()
            ),
        ))
    }
}

async fn create_table(config: &Config) -> Result<(), CliError> {
    let database = &config.database;
    let dynamodb = match (database.backend, &database.dynamodb) {
        (Backend::Dynamodb, Some(dynamodb)) => dynamodb,
        _ => return Err(CliError::invalid("create-table needs a dynamodb:// store")),
    };
    let store = docstore_dynamodb::DynamoStore::connect(dynamodb, database.store_options()).await?;
    store.create_table().await?;
    print(&json!({ "created": dynamodb.table }));
    Ok(())
}
