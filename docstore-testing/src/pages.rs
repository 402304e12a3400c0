//! Short pages: ending a query's page early with a cursor the walk can continue from.

use docstore::Page;
use docstore::query::CompiledQuery;

/// Cuts `page` short and gives `(kept, returned)`; `None`, leaving the page alone, when there
/// is nothing to do. `draw` picks one of the possible answers:
///
/// - keep the first `kept` documents, `1 <= kept < returned`, with a `next` cursor after the
///   last one kept;
/// - on the last page (no `next`), keep all of them and add a `next` cursor after the last
///   one, so the following page is empty, as DynamoDB may answer.
///
/// The cursor is the one the store itself would give after that document
/// ([`CompiledQuery::cursor_after`](docstore::query::CompiledQuery::cursor_after)), so the
/// next page starts right after it and a walk still returns every document exactly once.
/// Every page keeps at least one document, so a walk ends even when every page is cut.
pub(crate) fn shorten(page: &mut Page, query: &CompiledQuery, draw: u64) -> Option<(usize, usize)> {
    let returned = page.documents.len();
    let choices = returned.saturating_sub(1) + usize::from(page.next.is_none() && returned > 0);
    if choices == 0 {
        return None;
    }
    let kept = 1 + usize::try_from(draw % u64::try_from(choices).ok()?).ok()?;
    let cursor = query.cursor_after(&page.documents[kept - 1]);
    page.documents.truncate(kept);
    page.next = Some(cursor);
    Some((kept, returned))
}
