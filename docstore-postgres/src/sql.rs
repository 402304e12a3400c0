//! The fixed statements of one store, with its schema's name in them (the only SQL text not
//! written here; checked by [`crate::schema::check_name`]). Every value is a parameter.

/// The statements, built once at open: the writes' and the reads'.
#[derive(Debug)]
pub(crate) struct Statements {
    /// The schema's name, quoted.
    pub(crate) schema: String,
    pub(crate) write: Writes,
    pub(crate) read: Reads,
}

/// What a write's transaction sends: its locking read, the document, counter, identity,
/// claim and change statements.
#[derive(Debug)]
pub(crate) struct Writes {
    pub(crate) lock: String,
    pub(crate) insert: String,
    /// A create in one statement ([`crate::create`]).
    pub(crate) create: String,
    pub(crate) update: String,
    pub(crate) delete: String,
    pub(crate) count: String,
    pub(crate) keep_ids: String,
    /// `keep_ids` for many keys at once: parallel arrays of the same five values.
    pub(crate) keep_many_ids: String,
    pub(crate) forget_ids: String,
    pub(crate) prune_ids: String,
    pub(crate) log_changes: String,
    pub(crate) log_change: String,
    /// `update`, `keep_ids` and `log_change` as one statement ([`crate::fused`]).
    pub(crate) update_fused: Option<String>,
    pub(crate) claim: String,
    pub(crate) release_claim: String,
    pub(crate) release_claims: String,
    pub(crate) set_counter: String,
}

/// What reads, counts, pages the feed and finds claims' holders and expired documents.
#[derive(Debug)]
pub(crate) struct Reads {
    pub(crate) get: String,
    pub(crate) get_many: String,
    pub(crate) site_count: String,
    pub(crate) collections: String,
    pub(crate) sites: String,
    pub(crate) counted: String,
    pub(crate) counters: String,
    pub(crate) size: String,
    pub(crate) head: String,
    pub(crate) changes: String,
    pub(crate) holders: String,
    pub(crate) expired: String,
}

/// A row not expired at the instant in parameter `$n` (`docs/contract.md`, "Expiry"): what
/// every read asks for.
pub(crate) fn live(n: usize) -> String {
    format!("(expires_at IS NULL OR expires_at > ${n})")
}

/// One key's row: the key's names in the first three parameters.
const KEY: &str = "site = $1 AND collection = $2 AND id = $3";

impl Statements {
    pub(crate) fn new(schema: &str) -> Self {
        let s = format!("\"{schema}\"");
        let mut write = Writes::new(&s);
        write.update_fused = crate::fused::update(&write);
        Statements {
            write,
            read: Reads::new(&s),
            schema: s,
        }
    }
}

impl Writes {
    /// The statements in schema `s` (quoted), but the fused one.
    fn new(s: &str) -> Self {
        let (doc, key) = (crate::rows::DOC_COLUMNS, KEY);
        let log = format!(
            "WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($1), pg_notify($2, '')) \
             INSERT INTO {s}.changes (position, site, collection, id, kind, version, body, \
             created_at, created_by, time, actor, expires_at, previous) \
             SELECT nextval('{s}.change_positions'),"
        );
        let change = "$3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], \
             $9::bigint[], $10::text[], $11::bigint[], $12::text[], $13::bigint[], $14::text[]";
        Writes {
            // One key's document and identities, locked; one row, NULLs for what is missing.
            lock: format!(
                "WITH d AS MATERIALIZED (SELECT {doc} FROM {s}.documents WHERE {key} FOR UPDATE), \
                 w AS MATERIALIZED (SELECT ids, deleted_at FROM {s}.write_ids WHERE {key} \
                 FOR UPDATE) SELECT d.*, w.* FROM (SELECT) AS one LEFT JOIN d ON TRUE \
                 LEFT JOIN w ON TRUE"
            ),
            create: crate::create::statement(s),
            insert: format!(
                "INSERT INTO {s}.documents (site, collection, id, data, raw, updated_at, \
                 updated_by, version, expires_at, created_at, created_by) \
                 VALUES ($1, $2, $3, $4::text::jsonb, $5, $6, $7, $8, $9, $10, $11)"
            ),
            // The row is locked since the write read it: no version to check again.
            update: format!(
                "UPDATE {s}.documents SET data = $4::text::jsonb, raw = $5, updated_at = $6, \
                 updated_by = $7, version = $8, expires_at = $9 WHERE {key}"
            ),
            delete: format!("DELETE FROM {s}.documents WHERE {key}"),
            // The check constraint holds an inserted row too, hence `greatest` (a decrement
            // finds its row: the document it counts was there).
            count: format!(
                "INSERT INTO {s}.counters AS c (site, collection, n) \
                 VALUES ($1, $2, greatest($3::bigint, 0)) \
                 ON CONFLICT (site, collection) DO UPDATE SET n = c.n + $3::bigint"
            ),
            keep_ids: format!(
                "INSERT INTO {s}.write_ids (site, collection, id, ids, deleted_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (site, collection, id) \
                 DO UPDATE SET ids = excluded.ids, deleted_at = excluded.deleted_at"
            ),
            keep_many_ids: format!(
                "INSERT INTO {s}.write_ids (site, collection, id, ids, deleted_at) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
                 $5::bigint[]) ON CONFLICT (site, collection, id) \
                 DO UPDATE SET ids = excluded.ids, deleted_at = excluded.deleted_at"
            ),
            forget_ids: format!("DELETE FROM {s}.write_ids WHERE {key}"),
            prune_ids: format!("DELETE FROM {s}.write_ids WHERE deleted_at < $1"),
            // The advisory lock is taken before the first position is drawn and held to the
            // commit: positions are drawn in commit order (see `crate::feed`).
            log_changes: format!("{log} c.* FROM lock, unnest({change}) AS c"),
            // One change: the arrays' first elements (no `unnest` to execute).
            log_change: format!("{log} {} FROM lock", first(change)),
            update_fused: None,
            claim: format!(
                "INSERT INTO {s}.unique_claims (site, collection, id, ix, claim) \
                 VALUES ($1, $2, $3, $4, $5)"
            ),
            release_claim: format!("DELETE FROM {s}.unique_claims WHERE {key} AND ix = $4"),
            release_claims: format!("DELETE FROM {s}.unique_claims WHERE {key}"),
            set_counter: format!(
                "INSERT INTO {s}.counters (site, collection, n) VALUES ($1, $2, $3) \
                 ON CONFLICT (site, collection) DO UPDATE SET n = excluded.n"
            ),
        }
    }
}

impl Reads {
    /// The statements in schema `s` (quoted).
    fn new(s: &str) -> Self {
        let (doc, key) = (crate::rows::DOC_COLUMNS, KEY);
        let keys =
            "(site, collection, id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))";
        Reads {
            get: format!(
                "SELECT {doc} FROM {s}.documents WHERE {key} AND {}",
                live(4)
            ),
            get_many: format!(
                "SELECT site, collection, {doc} FROM {s}.documents WHERE {keys} AND {}",
                live(4)
            ),
            // The counters count expired documents until they are removed.
            site_count: format!(
                "SELECT (SELECT coalesce(sum(n), 0) FROM {s}.counters WHERE site = $1)::bigint \
                 - (SELECT count(*) FROM {s}.documents WHERE site = $1 AND expires_at <= $2)"
            ),
            collections: format!(
                "SELECT * FROM (SELECT collection, n - (SELECT count(*) FROM {s}.documents d \
                 WHERE d.site = c.site AND d.collection = c.collection AND expires_at <= $2) \
                 AS n FROM {s}.counters c WHERE site = $1) AS live WHERE n > 0 ORDER BY collection"
            ),
            sites: format!(
                "SELECT DISTINCT site FROM {s}.documents WHERE {} ORDER BY 1",
                live(1)
            ),
            counted: format!(
                "SELECT collection, count(*) FROM {s}.documents WHERE site = $1 \
                 GROUP BY collection ORDER BY collection"
            ),
            counters: format!("SELECT collection, n FROM {s}.counters WHERE site = $1"),
            size: format!(
                "SELECT n - (SELECT count(*) FROM {s}.documents WHERE site = $1 \
                 AND collection = $2 AND expires_at <= $3) FROM {s}.counters \
                 WHERE site = $1 AND collection = $2"
            ),
            head: format!(
                "SELECT greatest((SELECT coalesce(max(position), 0) FROM {s}.changes), \
                 pruned_through), pruned_through FROM {s}.meta"
            ),
            changes: format!(
                "SELECT site, collection, id, position, kind, version, body, created_at, \
                 created_by, time, actor, expires_at, previous FROM {s}.changes \
                 WHERE position > $1 \
                 AND ($2::text IS NULL OR site = $2) AND ($3::text IS NULL OR collection = $3) \
                 ORDER BY position LIMIT $4"
            ),
            // The holders of claims ($1 sites, $2 indexes, $3 claims), whether their
            // document is there and when it expires.
            holders: format!(
                "SELECT u.site, u.collection, u.id, u.ix, u.claim, d.id IS NOT NULL, d.expires_at \
                 FROM unnest($1::text[], $2::text[], $3::bytea[]) AS c(s, i, v) \
                 JOIN {s}.unique_claims u ON u.site = c.s AND u.ix = c.i \
                 AND u.digest = sha256(c.v) AND u.claim = c.v LEFT JOIN {s}.documents d \
                 ON d.site = u.site AND d.collection = u.collection AND d.id = u.id"
            ),
            expired: format!(
                "SELECT site, collection, id FROM {s}.documents WHERE expires_at <= $1 \
                 ORDER BY expires_at LIMIT $2"
            ),
        }
    }
}

/// The first element of each array in `arrays` (`$3::text[], …` → `($3::text[])[1], …`).
fn first(arrays: &str) -> String {
    let columns: Vec<String> = arrays.split(", ").map(|c| format!("({c})[1]")).collect();
    columns.join(", ")
}
