//! The writes of a single update as one statement. After its locking read, an update of one
//! document writes three rows — the document, its kept identities, the change — each its own
//! statement, its own answer and, on a loaded client, often its own wake-up; one statement
//! with the first two as data-modifying `WITH` queries does the same in one. They are the
//! statements of [`crate::sql`] themselves, renumbered, so the two never drift apart. The
//! change is inserted last, its feed lock taken once the other two finished (the lock's row
//! reads a count of each), so the lock is held for the least time, as in the pipeline.

use crate::sql::Writes;

/// What every change insert of [`Writes`] starts with: the feed's lock, in a `WITH`
/// query named `lock` (the statement's `$1` and `$2`).
const LOCK: &str =
    "WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($1), pg_notify($2, '')) ";

/// The fused statement of `writes` (data-modifying statements, run first) and `log` (a change
/// insert starting with [`LOCK`]), whose parameters are theirs one after the other; `None`
/// when `log` does not start so.
pub(crate) fn statement(writes: &[&str], log: &str) -> Option<String> {
    let insert = log.strip_prefix(LOCK)?;
    let (mut sql, mut offset) = ("WITH ".to_owned(), 0);
    let mut counted = Vec::new();
    for (i, write) in writes.iter().enumerate() {
        sql.push_str(&format!(
            "w{i} AS ({} RETURNING 1), ",
            renumber(write, offset)
        ));
        counted.push(format!("(SELECT count(*) FROM w{i}) AS c{i}"));
        offset += parameters(write);
    }
    sql.push_str(&format!(
        "lock AS MATERIALIZED (SELECT pg_advisory_xact_lock(${}), pg_notify(${}, '') FROM {}) {}",
        offset + 1,
        offset + 2,
        counted.join(", "),
        renumber(insert, offset)
    ));
    Some(sql)
}

/// The update, identity and change statements of one update, fused; `None` when the change
/// insert is not of the expected shape.
pub(crate) fn update(sql: &Writes) -> Option<String> {
    statement(&[&sql.update, &sql.keep_ids], &sql.log_change)
}

/// The highest `$n` in `sql`.
fn parameters(sql: &str) -> usize {
    numbered(sql).map(|(_, n, _)| n).max().unwrap_or(0)
}

/// `sql` with every `$n` as `$(n + offset)`.
fn renumber(sql: &str, offset: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut last = 0;
    for (start, n, end) in numbered(sql) {
        out.push_str(&sql[last..start]);
        out.push_str(&format!("${}", n + offset));
        last = end;
    }
    out.push_str(&sql[last..]);
    out
}

/// Each `$n` of `sql`: where it starts, `n`, where it ends.
fn numbered(sql: &str) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    let bytes = sql.as_bytes();
    (0..bytes.len()).filter_map(move |i| {
        if bytes[i] != b'$' {
            return None;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let n = sql[i + 1..i + 1 + digits].parse().ok()?;
        Some((i, n, i + 1 + digits))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_follow_each_other() {
        let log = format!("{LOCK}INSERT INTO c SELECT $3, $4 FROM lock");
        let fused = statement(
            &[
                "UPDATE d SET a = $2 WHERE k = $1",
                "DELETE FROM e WHERE k = $1",
            ],
            &log,
        )
        .unwrap();
        assert_eq!(
            fused,
            "WITH w0 AS (UPDATE d SET a = $2 WHERE k = $1 RETURNING 1), \
             w1 AS (DELETE FROM e WHERE k = $3 RETURNING 1), \
             lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($4), pg_notify($5, '') \
             FROM (SELECT count(*) FROM w0) AS c0, (SELECT count(*) FROM w1) AS c1) \
             INSERT INTO c SELECT $6, $7 FROM lock"
        );
        assert!(statement(&["UPDATE d SET a = $1"], "INSERT INTO c VALUES ($1)").is_none());
    }

    #[test]
    fn the_stores_statements_fuse() {
        let sql = crate::sql::Statements::new("s");
        let fused = update(&sql.write).expect("the change insert starts with the feed lock");
        assert_eq!(parameters(&fused), 9 + 5 + 14);
        assert!(fused.contains("pg_advisory_xact_lock($15), pg_notify($16, '')"));
    }
}
