//! One-line texts for the history: what a call addressed and what it answered.
//!
//! They hold no timestamps, so a history does not depend on the clock.

use docstore::query::CompiledQuery;
use docstore::request::Answer;
use docstore::{Document, Key, Page, Recount, Write, WriteOutcome};

/// The summary of a stored document: `id v<version> <data>`.
pub(crate) fn document(doc: &Document) -> String {
    const MAX: usize = 80;
    let data = serde_json::to_string(&doc.data).unwrap_or_default();
    let data = match data.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &data[..cut]),
        None => data,
    };
    format!("{} v{} {data}", doc.id, doc.version)
}

/// `site/collection/id`.
pub(crate) fn path(key: &Key) -> String {
    format!("{}/{}/{}", key.site(), key.collection(), key.id())
}

/// The scope of a feed: `site/collection`, `site` or `*` (the whole store).
pub(crate) fn feed_scope(scope: &docstore::feed::FeedScope) -> String {
    match (scope.site_name(), scope.collection_name()) {
        (Some(site), Some(collection)) => format!("{site}/{collection}"),
        (Some(site), None) => site.to_owned(),
        _ => "*".to_owned(),
    }
}

/// `site/collection`, the page size and the position a cursor continues after.
pub(crate) fn query_target(site: &str, collection: &str, query: &CompiledQuery) -> String {
    let mut target = format!("{site}/{collection}");
    if let Some(limit) = query.limit() {
        target.push_str(&format!(" limit {limit}"));
    }
    if let Some(position) = query.after() {
        target.push_str(&format!(" after {}", position.id));
    }
    target
}

/// `[kind site/collection/id @v<n>, ...]`.
pub(crate) fn batch_target(writes: &[Write]) -> String {
    let parts: Vec<String> = writes
        .iter()
        .map(|write| {
            let key = path(write.key());
            match write {
                Write::UpdateIf {
                    expected_version, ..
                }
                | Write::DeleteIf {
                    expected_version, ..
                } => format!("{} {key} @v{expected_version}", write.kind()),
                Write::Check {
                    version: Some(version),
                    ..
                } => format!("check {key} @v{version}"),
                Write::Check { version: None, .. } => format!("check {key} absent"),
                Write::Restore { document, .. } => {
                    format!("restore {key} v{}", document.version)
                }
                _ => format!("{} {key}", write.kind()),
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

pub(crate) fn found(doc: &Option<Document>) -> String {
    doc.as_ref().map_or_else(|| "none".to_owned(), document)
}

pub(crate) fn found_many(docs: &[Option<Document>]) -> String {
    let parts: Vec<String> = docs.iter().map(found).collect();
    format!("[{}]", parts.join(", "))
}

pub(crate) fn outcomes(outcomes: &[WriteOutcome]) -> String {
    let parts: Vec<String> = outcomes
        .iter()
        .map(|outcome| match outcome {
            WriteOutcome::Written(doc) => document(doc),
            WriteOutcome::Deleted => "deleted".to_owned(),
            WriteOutcome::Checked => "checked".to_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// A single write's answer: the document it stored (or, repeated, as it stands).
pub(crate) fn written(answer: &Answer) -> String {
    match answer {
        Answer::Applied(applied) => match &applied[..] {
            [WriteOutcome::Written(doc)] => document(doc),
            _ => outcomes(applied),
        },
        Answer::Repeat(current) => match &current[..] {
            [Some(doc)] => document(doc),
            _ => format!("repeat of {}", found_many(current)),
        },
    }
}

/// A delete's answer: `deleted`, or `absent` when there was nothing to delete.
pub(crate) fn removed(answer: &Answer) -> String {
    match answer {
        Answer::Applied(applied) if matches!(applied[..], [WriteOutcome::Checked]) => "absent",
        _ => "deleted",
    }
    .to_owned()
}

/// A restore's answer: `ok`.
pub(crate) fn restored(_: &Answer) -> String {
    "ok".to_owned()
}

/// A batch's answer: its outcomes, or for a repeat the documents as they stand.
pub(crate) fn batch(answer: &Answer) -> String {
    match answer {
        Answer::Applied(applied) => outcomes(applied),
        Answer::Repeat(current) => format!("repeat of {}", found_many(current)),
    }
}

pub(crate) fn page(page: &Page) -> String {
    let ids: Vec<&str> = page.documents.iter().map(|d| d.id.as_str()).collect();
    let mut summary = format!("[{}]", ids.join(", "));
    if page.next.is_some() {
        summary.push_str(" next");
    }
    if page.exhausted_scan {
        summary.push_str(" exhausted scan");
    }
    summary
}

pub(crate) fn counts(collections: &[(String, u64)]) -> String {
    let parts: Vec<String> = collections
        .iter()
        .map(|(name, count)| format!("{name}: {count}"))
        .collect();
    format!("[{}]", parts.join(", "))
}

pub(crate) fn count(count: &u64) -> String {
    count.to_string()
}

pub(crate) fn recount(recount: &Recount) -> String {
    format!(
        "{} {} changed",
        counts(&recount.collections),
        recount.changes.len()
    )
}
