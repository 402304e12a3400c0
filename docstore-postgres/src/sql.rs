//! The fixed statements of one store, with its schema's name in them (the only SQL text not
//! written here; checked by [`crate::schema::check_name`]). Every value is a parameter.

/// The statements, built once at open.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) schema: String,
    pub(crate) lock_for_write: String,
    pub(crate) kept: String,
    pub(crate) insert: String,
    pub(crate) update: String,
    pub(crate) delete: String,
    pub(crate) count_into: String,
    pub(crate) count_down: String,
    pub(crate) keep_ids: String,
    pub(crate) forget_ids: String,
    pub(crate) prune_ids: String,
    pub(crate) log_changes: String,
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
        let keys =
            "(site, collection, id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))";
        Statements {
            lock_for_write: format!(
                "SELECT site, collection, {doc} FROM {s}.documents WHERE {keys} \
                 ORDER BY site, collection, id FOR UPDATE"
            ),
            kept: format!(
                "SELECT site, collection, id, ids, deleted_at FROM {s}.write_ids WHERE {keys} \
                 ORDER BY site, collection, id FOR UPDATE"
            ),
            insert: format!(
                "INSERT INTO {s}.documents (site, collection, id, data, raw, created_at, \
                 updated_at, created_by, updated_by, version) \
                 VALUES ($1, $2, $3, $4::text::jsonb, $5, $6, $7, $8, $9, $10)"
            ),
            update: format!(
                "UPDATE {s}.documents SET data = $4::text::jsonb, raw = $5, updated_at = $6, \
                 updated_by = $7, version = $8 \
                 WHERE site = $1 AND collection = $2 AND id = $3 AND version = $9"
            ),
            delete: format!(
                "DELETE FROM {s}.documents \
                 WHERE site = $1 AND collection = $2 AND id = $3 AND version = $4"
            ),
            count_into: format!(
                "INSERT INTO {s}.counters AS c (site, collection, n) VALUES ($1, $2, $3) \
                 ON CONFLICT (site, collection) DO UPDATE SET n = c.n + excluded.n"
            ),
            count_down: format!(
                "UPDATE {s}.counters SET n = n + $3 WHERE site = $1 AND collection = $2"
            ),
            keep_ids: format!(
                "INSERT INTO {s}.write_ids (site, collection, id, ids, deleted_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (site, collection, id) \
                 DO UPDATE SET ids = excluded.ids, deleted_at = excluded.deleted_at"
            ),
            forget_ids: format!(
                "DELETE FROM {s}.write_ids WHERE site = $1 AND collection = $2 AND id = $3"
            ),
            prune_ids: format!("DELETE FROM {s}.write_ids WHERE deleted_at < $1"),
            // The advisory lock is taken before the first position is drawn and held to the
            // commit: positions are drawn in commit order (see `crate::feed`).
            log_changes: format!(
                "WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($1), pg_notify($2, '')) \
                 INSERT INTO {s}.changes (position, site, collection, id, kind, version, body, \
                 created_at, created_by, time, actor) \
                 SELECT nextval('{s}.change_positions'), c.* FROM lock, unnest($3::text[], \
                 $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], $9::bigint[], \
                 $10::text[], $11::bigint[], $12::text[]) AS c"
            ),
            get: format!(
                "SELECT {doc} FROM {s}.documents WHERE site = $1 AND collection = $2 AND id = $3"
            ),
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
            head: format!("SELECT coalesce(max(position), 0) FROM {s}.changes"),
            changes: format!(
                "SELECT site, collection, id, position, kind, version, body, created_at, \
                 created_by, time, actor FROM {s}.changes WHERE position > $1 \
                 AND ($2::text IS NULL OR site = $2) AND ($3::text IS NULL OR collection = $3) \
                 ORDER BY position LIMIT $4"
            ),
            schema: s,
        }
    }
}
