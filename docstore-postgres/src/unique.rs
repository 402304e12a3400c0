//! Unique indexes (`docs/contract.md`, "Unique indexes"). Table `unique_claims` holds the
//! value each document claims in each unique index of its collection — computed in Rust
//! (`docstore::index::unique`, exact for every value) and written in the document's own
//! transaction — under a constraint of one holder per site, index and value. A write
//! releases every claim it changes before it inserts any (see the `write` module), so a
//! batch is judged as it leaves the documents (it may move or swap values), and a second
//! claimant waits at its insert for the first one's transaction, before it takes the feed's
//! lock. A clash fails the transaction, and nothing is written; the write is then judged by
//! the core ([`docstore::index::unique::judge`]) on the holders read after the rollback
//! ([`judge`]), which names the index, the value and the holder, or runs the write again:
//! after a racing holder is gone, or once the expired holders (and the claims of documents
//! no longer there) are removed.
//!
//! Claims are written by stores declaring the index: every process writing a schema declares
//! the same unique indexes. The first open declaring one builds its claims ([`build`]).

use crate::error::Fail;
use crate::store::Inner;
use docstore::batch::Decision;
use docstore::index::unique::{self, Clash, Holder};
use docstore::index::{CompiledIndex, IndexSet};
use docstore::request::Request;

/// Why `request`, whose `decisions` failed on a unique value, failed, judged in the core on
/// the holders read here ([`unique::judge`]): its refusal
/// ([`docstore::Error::UniqueViolation`]), [`Fail::Stale`] with the keys to clear first, or
/// `None` when no holder is left (a racing writer's, since gone: the write runs again).
pub(crate) async fn judge(
    inner: &Inner,
    client: &deadpool_postgres::Client,
    request: &Request<'_>,
    decisions: &[Decision],
    now: i64,
) -> Result<Option<Fail>, Fail> {
    let indexes = &inner.options.indexes;
    let claims = request.claims(decisions, indexes);
    let (mut sites, mut names, mut values) = (Vec::new(), Vec::new(), Vec::new());
    for (position, claim) in &claims {
        sites.push(request.ops()[*position].key().site());
        names.push(crate::keys::name(claim.index.declaration()));
        values.push(claim.value.as_slice());
    }
    let statement = client.prepare_cached(&inner.sql.read.holders).await?;
    let rows = client.query(&statement, &[&sites, &names, &values]).await?;
    let holders = rows.iter().map(|row| {
        Ok(Holder {
            key: crate::rows::key(row)?,
            index: row.try_get(3)?,
            value: row.try_get(4)?,
            present: row.try_get(5)?,
            expires_at: row.try_get(6)?,
        })
    });
    let holders = holders.collect::<Result<Vec<Holder<String>>, Fail>>()?;
    let label = |index: &CompiledIndex| crate::keys::name(index.declaration());
    Ok(
        match unique::judge(request, decisions, indexes, label, holders, now) {
            Clash::Refused(refusal) => Some(Fail::Store(refusal)),
            Clash::Stale(keys) => Some(Fail::Stale(keys)),
            Clash::Again => None,
        },
    )
}

/// Claims the values of the documents already stored (not expired at `now`) for each
/// declared unique index not built yet, in `tx`, which holds the schema's migration lock
/// (`s`: the quoted schema). Documents sharing a value refuse the declaration
/// ([`docstore::Error::InvalidArgument`] naming up to 10 pairs), and the open with it.
pub(crate) async fn build(
    tx: &tokio_postgres::Transaction<'_>,
    s: &str,
    indexes: &IndexSet,
    now: i64,
) -> Result<(), Fail> {
    let built = format!("INSERT INTO {s}.unique_indexes VALUES ($1) ON CONFLICT DO NOTHING");
    let read = format!(
        "SELECT site, {} FROM {s}.documents WHERE collection = $1 AND {}",
        crate::rows::DOC_COLUMNS,
        crate::sql::live(2)
    );
    let claim = format!(
        "INSERT INTO {s}.unique_claims (site, collection, id, ix, claim) \
         SELECT site, $2, id, $3, claim FROM unnest($1::text[], $4::text[], $5::bytea[]) \
         AS t(site, id, claim)"
    );
    for index in indexes.iter().filter(|index| index.is_unique()) {
        let name = crate::keys::name(index.declaration());
        if tx.execute(&built, &[&name]).await? == 0 {
            continue;
        }
        let rows = tx.query(&read, &[&index.collection(), &now]).await?;
        let documents = rows.iter().map(|row| {
            let site: String = row.try_get(0)?;
            Ok::<_, Fail>((site, crate::rows::document(row, 1)?))
        });
        let built = unique::build(index, documents.collect::<Result<Vec<_>, _>>()?)?;
        let sites: Vec<&str> = built.iter().map(|c| c.site.as_str()).collect();
        let ids: Vec<&str> = built.iter().map(|c| c.id.as_str()).collect();
        let claims: Vec<&[u8]> = built.iter().map(|c| c.value.as_slice()).collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&sites, &index.collection(), &name, &ids, &claims];
        tx.execute(&claim, &params).await?;
    }
    Ok(())
}
