//! The application code under test: boards holding lists of tickets, and two ways of moving a
//! ticket from one board to another with `update_if` and retries.

use docstore::{Data, Error, Key, Result, Store};
use serde_json::{Value, json};

/// Attempts per step before giving up.
const ATTEMPTS: usize = 50;

/// The actor the moves write as.
const ACTOR: &str = "mover";

/// A board: the ticket ids on it, and the version they were read at.
struct Board {
    tickets: Vec<String>,
    version: u64,
}

/// A board's document data: `{"tickets": [...]}`.
pub fn board_data(tickets: &[&str]) -> Data {
    docstore::object(json!({ "tickets": tickets })).expect("an object")
}

/// The tickets of a board document's data.
pub fn tickets(data: &Data) -> Vec<String> {
    data.get("tickets")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn read(store: &Store, key: &Key) -> Result<Board> {
    let doc = store.get(key).await?.ok_or_else(|| Error::not_found(key))?;
    Ok(Board {
        tickets: tickets(&doc.data),
        version: doc.version,
    })
}

/// Writes `tickets` to the board if it is still at `version`.
async fn write(store: &Store, key: &Key, tickets: &[String], version: u64) -> Result<()> {
    let patch = docstore::object(json!({ "tickets": tickets }))?;
    store.update_if(key, &patch, version, ACTOR).await.map(drop)
}

/// Runs `step` until it succeeds, retrying what is worth retrying: `Unavailable` (transient)
/// and `Conflict` (someone wrote the board since we read it; read it again).
async fn retry(mut step: impl AsyncFnMut() -> Result<()>) -> Result<()> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match step().await {
            Err(err @ (Error::Unavailable { .. } | Error::Conflict { .. })) => last = Some(err),
            done => return done,
        }
    }
    Err(last.expect("at least one attempt"))
}

/// The naive move: take the ticket off `from`, then append it to `to`, each step retried.
///
/// Looks right, and survives unavailability and conflicts. But when the append's answer is
/// lost, the retry reads the board *with* the ticket already on it and appends it again.
pub async fn move_naive(store: &Store, from: &Key, to: &Key, ticket: &str) -> Result<()> {
    retry(async || {
        let mut board = read(store, from).await?;
        board.tickets.retain(|t| t != ticket);
        write(store, from, &board.tickets, board.version).await
    })
    .await?;
    retry(async || {
        let mut board = read(store, to).await?;
        board.tickets.push(ticket.to_owned());
        write(store, to, &board.tickets, board.version).await
    })
    .await
}

/// The correct move: each step is idempotent — it looks at the board it just read and does
/// nothing when its change is already there (perhaps written by an attempt whose answer was
/// lost). The ticket is added to `to` before it leaves `from`, so it is never on no board.
pub async fn move_ticket(store: &Store, from: &Key, to: &Key, ticket: &str) -> Result<()> {
    retry(async || {
        let mut board = read(store, to).await?;
        if board.tickets.iter().any(|t| t == ticket) {
            return Ok(());
        }
        board.tickets.push(ticket.to_owned());
        write(store, to, &board.tickets, board.version).await
    })
    .await?;
    retry(async || {
        let mut board = read(store, from).await?;
        if !board.tickets.iter().any(|t| t == ticket) {
            return Ok(());
        }
        board.tickets.retain(|t| t != ticket);
        write(store, from, &board.tickets, board.version).await
    })
    .await
}
