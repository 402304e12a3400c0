//! What every PostgreSQL test file shares: the server `scripts/with-postgres` started, and a
//! schema of its own for each store a test opens (tests run side by side on one server).

#![allow(dead_code)] // each test file uses its part

/// The server's URL, as `scripts/with-postgres` passes it.
pub fn server() -> String {
    std::env::var("DOCSTORE_POSTGRES_URL").expect(
        "DOCSTORE_POSTGRES_URL is not set: run under scripts/with-postgres \
         (e.g. scripts/with-postgres cargo test -p docstore-postgres)",
    )
}

/// The server's URL with a schema named after `prefix`, this process and the instant: one no
/// other run or test has used.
pub fn schema_url(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let run = nanos ^ u64::from(std::process::id()).rotate_left(40);
    format!("{}?schema={prefix}_{run:x}", server())
}
