//! `docstore index list|add|build|drop`: the indexes a DynamoDB table holds. SQLite and memory
//! stores build the indexes declared in `--config` when they open, so for them `list` shows
//! the declarations and the other actions explain that.

use crate::args::IndexAction;
use crate::exit::{self, CliError};
use crate::output::Out;
use crate::{interrupt, progress};
use docstore::config::{Backend, Config};
use docstore::index::Index;
use docstore_dynamodb::{DynamoStore, IndexState, TableIndex};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Runs one index action against the store `config` names; `store_flags` are the options
/// that chose it (`--config FILE` or `--store URL`, shell-quoted, or empty), repeated in the
/// next-step hint.
pub async fn run(
    action: &IndexAction,
    config: &Config,
    store_flags: &str,
    out: &mut Out,
) -> Result<(), CliError> {
    let database = &config.database;
    let dynamodb = match (database.backend, &database.dynamodb) {
        (Backend::Dynamodb, Some(dynamodb)) => dynamodb,
        _ => {
            if let IndexAction::List = action {
                for index in database.indexes.declarations() {
                    out.line(&declared(&index))?;
                }
                return Ok(());
            }
            return Err(CliError::invalid(
                "index add|build|drop manage a DynamoDB table's indexes; SQLite and memory \
                 stores build the indexes declared in --config ([[database.indexes]]) when \
                 they open",
            ));
        }
    };
    let store = DynamoStore::connect(dynamodb, database.store_options()).await?;
    match action {
        IndexAction::List => {
            for index in store.list_indexes().await? {
                out.line(&held(&index))?;
            }
        }
        IndexAction::Add {
            collection,
            name,
            unique,
            fields,
        } => {
            let index = if fields.is_empty() {
                database
                    .indexes
                    .declarations()
                    .into_iter()
                    .find(|i| i.collection == *collection && i.name == *name)
                    .ok_or_else(|| {
                        CliError::invalid(format!(
                            "index add: give the fields of `{name}` (e.g. `status -$updated_at`) \
                             or declare it in --config"
                        ))
                    })?
            } else {
                let index = Index::parse(collection.clone(), name.clone(), fields.iter())?;
                if *unique { index.unique() } else { index }
            };
            if *unique && !index.unique {
                return Err(CliError::invalid(format!(
                    "index add --unique: `{name}` is declared in --config without `unique = true`"
                )));
            }
            index.validate()?;
            let added = store.add_index(&index).await?;
            let message = added_message(&added.index, added.slot, added.state, store_flags);
            eprintln!("{message}");
            out.value(&held(&added))?;
        }
        IndexAction::Build {
            collection,
            name,
            progress_interval,
        } => {
            let interval = Duration::from_secs(*progress_interval);
            let built = build(&store, collection, name, store_flags, interval).await?;
            eprintln!("index `{name}` of `{collection}` is built");
            out.value(&held(&built))?;
        }
        IndexAction::Drop { collection, name } => {
            let held = store.list_indexes().await?;
            if !held
                .iter()
                .any(|i| i.index.collection == *collection && i.index.name == *name)
            {
                return Err(CliError::new(
                    exit::NOT_FOUND,
                    format!(
                        "the table holds no index `{name}` of `{collection}` (`docstore index \
                         list` shows the ones it holds)"
                    ),
                ));
            }
            store.drop_index(collection, name).await?;
            out.value(&json!({"collection": collection, "name": name, "state": "dropped"}))?;
        }
    }
    Ok(())
}

/// What an index build has done so far, for its progress and for what Ctrl-C says.
#[derive(Default)]
struct BuildCounts {
    /// Items of the table read (every collection and site).
    scanned: AtomicU64,
    /// Documents of the collection given their key.
    updated: AtomicU64,
}

impl BuildCounts {
    fn status(&self) -> String {
        format!(
            "{} items scanned, {} documents given their key",
            self.scanned.load(Ordering::Relaxed),
            self.updated.load(Ordering::Relaxed)
        )
    }
}

/// `index build`: builds the index with progress on standard error (a spinner on a
/// terminal, else a line every `interval`; none with `-q`), and says how far it got and how
/// to resume on Ctrl-C.
async fn build(
    store: &DynamoStore,
    collection: &str,
    name: &str,
    store_flags: &str,
    interval: Duration,
) -> Result<TableIndex, CliError> {
    let counts = Arc::new(BuildCounts::default());
    let said = Arc::clone(&counts);
    let resume = format!("docstore{store_flags} index build {collection} {name}");
    let (c, n) = (collection.to_owned(), name.to_owned());
    interrupt::explain_ctrl_c(move || Some(interrupted_build(&c, &n, &said.status(), &resume)));
    let mut progress =
        BuildProgressShown::new(format!("index build {collection} {name}"), interval);
    progress.say("waiting until every writer maintains the index".to_owned());
    let built = store
        .build_index(collection, name, |done| {
            counts.scanned.store(done.scanned, Ordering::Relaxed);
            counts.updated.store(done.updated, Ordering::Relaxed);
            progress.say(counts.status());
        })
        .await;
    progress.finish();
    Ok(built?)
}

/// What Ctrl-C during `index build` says: the index stays `building` (every writer keeps
/// maintaining it; queries do not use it yet), how far the build got, and the command that
/// resumes it.
fn interrupted_build(collection: &str, name: &str, status: &str, resume: &str) -> String {
    format!(
        "interrupted: index build stopped ({status}). The index `{name}` of `{collection}` \
         stays building: every writer keeps maintaining it and queries do not use it yet; \
         the keys given so far are written. Run `{resume}` to resume: it goes on from the \
         last page position recorded in the table, skipping documents that have their key"
    )
}

/// Where an index build shows its progress: a spinner on a terminal, lines otherwise,
/// nothing with `-q`.
enum BuildProgressShown {
    Spinner(ProgressBar),
    Lines(progress::Lines),
    Silent,
}

impl BuildProgressShown {
    fn new(what: String, interval: Duration) -> Self {
        if progress::quiet() {
            return BuildProgressShown::Silent;
        }
        if !std::io::stderr().is_terminal() {
            return BuildProgressShown::Lines(progress::Lines::new(what, interval));
        }
        let template =
            ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("a valid template");
        BuildProgressShown::Spinner(ProgressBar::new_spinner().with_style(template))
    }

    fn say(&mut self, status: String) {
        match self {
            BuildProgressShown::Spinner(bar) => {
                bar.set_message(status);
                bar.tick();
            }
            BuildProgressShown::Lines(lines) => lines.report(|| status),
            BuildProgressShown::Silent => {}
        }
    }

    fn finish(&self) {
        if let BuildProgressShown::Spinner(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// What `index add` says: where the index is, and while it is building, the command that
/// builds it with the same store options.
fn added_message(index: &Index, slot: usize, added: IndexState, store_flags: &str) -> String {
    let (collection, name) = (&index.collection, &index.name);
    let place = format!(
        "index `{name}` of `{collection}` is on the table (slot {slot}, {})",
        state(added)
    );
    match added {
        IndexState::Built => format!("{place}; queries use it"),
        IndexState::Building => format!(
            "{place}; run `docstore{store_flags} index build {collection} {name}` to give older \
             documents their keys"
        ),
    }
}

fn state(state: IndexState) -> &'static str {
    match state {
        IndexState::Building => "building",
        IndexState::Built => "built",
    }
}

fn declared(index: &Index) -> Value {
    let mut value = serde_json::to_value(index).expect("an index serializes");
    value["state"] = json!("declared");
    value
}

fn held(index: &TableIndex) -> Value {
    let mut value = serde_json::to_value(&index.index).expect("an index serializes");
    value["slot"] = json!(index.slot);
    value["partitions"] = json!(index.partitions);
    value["state"] = json!(state(index.state));
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_after_add_repeats_the_store_options_and_only_while_building() {
        let index = Index::parse(
            "tickets".to_owned(),
            "by_status".to_owned(),
            ["status"].iter(),
        )
        .unwrap();
        let flags = " --config app.toml";
        let building = added_message(&index, 2, IndexState::Building, flags);
        assert!(
            building.contains("`docstore --config app.toml index build tickets by_status`"),
            "{building}"
        );
        let built = added_message(&index, 2, IndexState::Built, flags);
        assert!(!built.contains("index build"), "{built}");
        assert!(built.contains("queries use it"), "{built}");
    }
}
