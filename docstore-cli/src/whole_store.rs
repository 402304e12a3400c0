//! Commands over every site of a store: `sites`, `export --all-sites` and `fsck` without a
//! site, all walking [`Store::sites`] (the sites holding a document, by name).

use crate::exit::{self, CliError};
use crate::output::Out;
use crate::timefmt::TimeFormat;
use crate::transfer;
use docstore::{RecountMode, Store, UniqueProblem};
use serde_json::{Value, json};
use std::io::Write;

/// `sites`: one JSON array of `{"site", "count"}` (the count from the counters, as `count`
/// gives it), by name.
pub async fn list_sites(store: &Store, out: &mut Out) -> Result<(), CliError> {
    let mut listing: Vec<Value> = Vec::new();
    for site in store.sites().await? {
        let count = store.count(&site).await?;
        listing.push(json!({ "site": site, "count": count }));
    }
    out.value(&listing)
}

/// `export --all-sites`: every site's documents (or those of the `only` collections), site by
/// site in name order, as `export` writes one site's; returns how many.
pub async fn export_all_sites(
    store: &Store,
    only: &[String],
    time: TimeFormat,
    out: &mut dyn Write,
) -> Result<u64, CliError> {
    let mut written = 0;
    for site in store.sites().await? {
        written += transfer::export(store, &site, only, time, out).await?;
    }
    Ok(written)
}

/// What `fsck` found over the sites it checked.
#[derive(Debug, Default)]
struct Checked {
    sites: usize,
    collections: usize,
    differ: usize,
    /// Unique-index problems found (repaired ones included).
    unique: usize,
    /// Unique-index problems that stand after the run (all of them without `--repair`;
    /// documents sharing a value with it).
    unique_left: usize,
}

/// `fsck`: checks the counters and the unique indexes of `site`, or of every site of the
/// store when `None`; prints each difference as a JSON line and a summary on standard error;
/// exit code 12 when something differed and was not repaired (documents sharing a unique
/// value are never repaired).
pub async fn fsck(
    store: &Store,
    site: Option<&str>,
    repair: bool,
    out: &mut Out,
) -> Result<(), CliError> {
    let sites = match site {
        Some(site) => vec![site.to_owned()],
        None => store.sites().await?,
    };
    let mut checked = Checked::default();
    for site in &sites {
        check_site(store, site, repair, out, &mut checked).await?;
    }
    let scope = match site {
        Some(_) => String::new(),
        None => format!("{} sites, ", checked.sites),
    };
    let differ = checked.differ;
    eprintln!(
        "{scope}{} collections with documents; {differ} counters differed{}; {} unique-index \
         problems, {} left",
        checked.collections,
        if repair && differ > 0 {
            " and were repaired"
        } else {
            ""
        },
        checked.unique,
        checked.unique_left,
    );
    if checked.unique_left > 0 {
        out.flush()?;
        let fix = if repair {
            "documents sharing a unique value are never repaired: change or delete all but one"
        } else {
            "`docstore fsck --repair` repairs the missing and left-over records; documents \
             sharing a value are never repaired"
        };
        return Err(CliError::new(
            exit::COUNTERS_DIFFER,
            format!("{} unique-index problems stand; {fix}", checked.unique_left),
        ));
    }
    if differ > 0 && !repair {
        out.flush()?;
        return Err(CliError::new(
            exit::COUNTERS_DIFFER,
            format!(
                "{differ} collection counters disagree with the documents; \
                 `docstore fsck --repair` sets them to the true counts"
            ),
        ));
    }
    Ok(())
}

/// Recounts one site, prints its differences and adds them to `checked`.
async fn check_site(
    store: &Store,
    site: &str,
    repair: bool,
    out: &mut Out,
    checked: &mut Checked,
) -> Result<(), CliError> {
    let mode = if repair {
        RecountMode::Repair
    } else {
        RecountMode::Report
    };
    let recount = store.recount(site, mode).await?;
    for change in &recount.changes {
        out.line(&json!({
            "site": site,
            "collection": change.collection,
            "counter": change.counter,
            "documents": change.documents,
            "repaired": repair,
        }))?;
    }
    for problem in &recount.unique {
        let repaired = repair && problem.is_repairable();
        out.line(&unique_line(site, problem, repaired))?;
        checked.unique += 1;
        checked.unique_left += usize::from(!repaired);
    }
    checked.sites += 1;
    checked.collections += recount.collections.len();
    checked.differ += recount.changes.len();
    Ok(())
}

/// The JSON line of one unique-index problem.
fn unique_line(site: &str, problem: &UniqueProblem, repaired: bool) -> serde_json::Value {
    let (collection, index, problem_name, ids) = match problem {
        UniqueProblem::Missing {
            collection,
            index,
            id,
        } => (collection, index, "missing", vec![id]),
        UniqueProblem::Orphan {
            collection,
            index,
            holder,
        } => (collection, index, "orphan", vec![holder]),
        UniqueProblem::Shared {
            collection,
            index,
            ids,
        } => (collection, index, "shared", ids.iter().collect()),
    };
    json!({
        "site": site,
        "collection": collection,
        "unique_index": index,
        "problem": problem_name,
        "ids": ids,
        "repaired": repaired,
    })
}
