//! The fixed statements of one store, with its schema's name in them (the only SQL text not
//! written here; checked by [`crate::schema::check_name`]). Every value is a parameter.

/// The statements, built once at open.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) schema: String,
    pub(crate) lock: String,
    pub(crate) insert: String,
    /// A create in one statement ([`crate::create`]).
    pub(crate) create: String,
    pub(crate) update: String,
    pub(crate) delete: String,
    pub(crate) count: String,
    pub(crate) keep_ids: String,
    pub(crate) forget_ids: String,
    pub(crate) prune_ids: String,
    pub(crate) log_changes: String,
    pub(crate) log_change: String,
    /// `update`, `keep_ids` and `log_change` as one statement ([`crate::fused`]).
    pub(crate) update_fused: Option<String>,
    pub(crate) get: String,
    pub(crate) get_many: String,
    pub(crate) site_count: String,
    pub(crate) collections: String,
    pub(crate) sites: String,
    pub(crate) counted: String,
    pub(crate) counters: String,
    pub(crate) size: String,
    pub(crate) set_counter: String,
    pub(crate) head: String,
    pub(crate) changes: String,
}

impl Statements {
    pub(crate) fn new(schema: &str) -> Self {
        let s = format!("\"{schema}\"");
        let doc = crate::rows::DOC_COLUMNS;
        let key = "site = $1 AND collection = $2 AND id = $3";
        let keys =
            "(site, collection, id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))";
        let log = format!(
            "WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($1), pg_notify($2, '')) \
             INSERT INTO {s}.changes (position, site, collection, id, kind, version, body, \
             created_at, created_by, time, actor) SELECT nextval('{s}.change_positions'),"
        );
        let change = "$3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], \
             $9::bigint[], $10::text[], $11::bigint[], $12::text[]";
        let mut statements = Statements {
            // One key's document and identities, locked; one row, NULLs for what is missing.
            lock: format!(
                "WITH d AS MATERIALIZED (SELECT {doc} FROM {s}.documents WHERE {key} FOR UPDATE), \
                 w AS MATERIALIZED (SELECT ids, deleted_at FROM {s}.write_ids WHERE {key} \
                 FOR UPDATE) SELECT d.*, w.* FROM (SELECT) AS one LEFT JOIN d ON TRUE \
                 LEFT JOIN w ON TRUE"
            ),
            create: crate::create::statement(&s),
            insert: format!(
                "INSERT INTO {s}.documents (site, collection, id, data, raw, updated_at, \
                 updated_by, version, created_at, created_by) \
                 VALUES ($1, $2, $3, $4::text::jsonb, $5, $6, $7, $8, $9, $10)"
            ),
            // The row is locked since the write read it: no version to check again.
            update: format!(
                "UPDATE {s}.documents SET data = $4::text::jsonb, raw = $5, updated_at = $6, \
                 updated_by = $7, version = $8 WHERE {key}"
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
            forget_ids: format!("DELETE FROM {s}.write_ids WHERE {key}"),
            prune_ids: format!("DELETE FROM {s}.write_ids WHERE deleted_at < $1"),
            // The advisory lock is taken before the first position is drawn and held to the
            // commit: positions are drawn in commit order (see `crate::feed`).
            log_changes: format!("{log} c.* FROM lock, unnest({change}) AS c"),
            // One change: the arrays' first elements (no `unnest` to execute).
            log_change: format!("{log} {} FROM lock", first(change)),
            get: format!("SELECT {doc} FROM {s}.documents WHERE {key}"),
            get_many: format!("SELECT site, collection, {doc} FROM {s}.documents WHERE {keys}"),
            site_count: format!(
                "SELECT coalesce(sum(n), 0)::bigint FROM {s}.counters WHERE site = $1"
            ),
            collections: format!(
                "SELECT collection, n FROM {s}.counters WHERE site = $1 AND n > 0 ORDER BY collection"
            ),
            sites: format!(
                "SELECT DISTINCT site FROM {s}.counters WHERE n > 0 UNION \
                 SELECT DISTINCT site FROM {s}.documents ORDER BY 1"
            ),
            counted: format!(
                "SELECT collection, count(*) FROM {s}.documents WHERE site = $1 \
                 GROUP BY collection ORDER BY collection"
            ),
            counters: format!("SELECT collection, n FROM {s}.counters WHERE site = $1"),
            size: format!("SELECT n FROM {s}.counters WHERE site = $1 AND collection = $2"),
            set_counter: format!(
                "INSERT INTO {s}.counters (site, collection, n) VALUES ($1, $2, $3) \
                 ON CONFLICT (site, collection) DO UPDATE SET n = excluded.n"
            ),
            head: format!(
                "SELECT greatest((SELECT coalesce(max(position), 0) FROM {s}.changes), \
                 pruned_through), pruned_through FROM {s}.meta"
            ),
            changes: format!(
                "SELECT site, collection, id, position, kind, version, body, created_at, \
                 created_by, time, actor FROM {s}.changes WHERE position > $1 \
                 AND ($2::text IS NULL OR site = $2) AND ($3::text IS NULL OR collection = $3) \
                 ORDER BY position LIMIT $4"
            ),
            schema: s,
            update_fused: None,
        };
        statements.update_fused = crate::fused::update(&statements);
        statements
    }
}

/// The first element of each array in `arrays` (`$3::text[], …` → `($3::text[])[1], …`).
fn first(arrays: &str) -> String {
    let columns: Vec<String> = arrays.split(", ").map(|c| format!("({c})[1]")).collect();
    columns.join(", ")
}
