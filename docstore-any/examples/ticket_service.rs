//! A multi-tenant ticket service over any store, written the way an app would: its own
//! `Ticket` type in each tenant's typed collection, settings from a TOML file's
//! `[database]` table, an HTTP-style handler that a client retries with its
//! `Idempotency-Key`, a read-modify-write, paged listing with cursors, an atomic move
//! between collections, and a per-tenant summary kept from the change feed across restarts.
//!
//! ```sh
//! cargo run -p docstore-any --example ticket_service              # SQLite in the temp folder
//! cargo run -p docstore-any --example ticket_service -- app.toml  # any [database] table
//! ```
//!
//! Run it twice: the second run repeats two of the first run's requests with the same keys
//! (each answers as it did, nothing is created twice), and the summary goes on from the
//! cursor the first run saved.
//!
//! **Glue** — code that is not the service's business (retries, error mapping, idempotency,
//! paging, config, feed handling, field names) — is marked `// glue`, and the body of
//! `http_status`: 25 lines. Retries 0 (the store retries `Unavailable` itself, every write
//! under one identity); idempotency 4 (the tenant's key, its identity, a ticket id from it,
//! `.write_id`); error mapping 10 (`http_status`, a missing ticket's `NotFound`); paging 2
//! (cursor text in and out); field names 1; feed handling 6 (the saved start, saving the
//! summary with its cursor, waiting for changes); config 2.
//! `docstore-any/tests/ticket_service.rs` runs this module under injected faults.

use docstore::{
    ChangeCursor, Collection, Cursor, Error, ErrorKind, FeedStart, Filter, Query, Store,
    TypedChange, Versioned, WriteId,
};
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the service stores, per tenant, in the collection `tickets`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ticket {
    pub(crate) title: String,
    pub(crate) status: Status,
    pub(crate) priority: u8,
    pub(crate) assignee: Option<String>,
}

/// Where a ticket stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Open,
    InProgress,
    Closed,
}

/// `POST /tickets` with an `Idempotency-Key` header.
#[derive(Clone, Debug)]
pub(crate) struct CreateTicket {
    pub(crate) tenant: String,
    pub(crate) user: String,
    pub(crate) idempotency_key: String,
    pub(crate) title: String,
    pub(crate) priority: u8,
}

/// What the handler answers: an HTTP status and the ticket or the error's text.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) ticket: Option<Versioned<Ticket>>,
    pub(crate) error: Option<String>,
}

/// One page of a listing and the cursor a client hands back for the next.
#[derive(Debug)]
pub(crate) struct ListPage {
    pub(crate) tickets: Vec<Versioned<Ticket>>,
    pub(crate) next: Option<String>,
}

/// The service: a store, shared by every request and task.
#[derive(Clone)]
pub(crate) struct Service {
    pub(crate) store: Store,
}

impl Service {
    /// The tenant's tickets, written as `user`: nothing reached from it touches another tenant.
    pub(crate) fn tickets(&self, tenant: &str, user: &str) -> docstore::Result<Collection<Ticket>> {
        self.store
            .site(tenant)?
            .with_actor(user)?
            .collection("tickets")
    }

    /// `POST /tickets`: 201 with the ticket. A client that repeats the request with the same
    /// key (after a 503, a timeout, a crash) gets the same ticket, created once.
    pub(crate) async fn create_ticket(&self, request: &CreateTicket) -> Response {
        match self.create(request).await {
            Ok(ticket) => Response {
                status: 201,
                ticket: Some(ticket),
                error: None,
            },
            Err(err) => Response {
                status: http_status(&err),
                ticket: None,
                error: Some(err.to_string()),
            },
        }
    }

    async fn create(&self, request: &CreateTicket) -> docstore::Result<Versioned<Ticket>> {
        let tickets = self.tickets(&request.tenant, &request.user)?;
        let ticket = Ticket {
            title: request.title.clone(),
            status: Status::Open,
            priority: request.priority,
            assignee: None,
        };
        // The identity protects one document, so the ticket's id comes from the key too.
        let key = format!("{}/{}", request.tenant, request.idempotency_key); // glue
        let write_id = WriteId::from_key(&key)?; // glue
        let id = format!("T-{}", &write_id.as_str()[..16]); // glue
        tickets.create(&id, &ticket).write_id(write_id).await // glue
    }

    /// Assigns a ticket. Repeating it is harmless: a ticket already assigned to `assignee`
    /// is left as it is (no new version).
    pub(crate) async fn assign(
        &self,
        tenant: &str,
        user: &str,
        id: &str,
        assignee: &str,
    ) -> docstore::Result<Versioned<Ticket>> {
        let tickets = self.tickets(tenant, user)?;
        let assigned = tickets.modify(id, |ticket| {
            ticket.assignee = Some(assignee.to_owned());
            ticket.status = Status::InProgress;
        });
        assigned.await
    }

    /// One page of the tenant's tickets in `status`, most urgent first.
    pub(crate) async fn list(
        &self,
        tenant: &str,
        status: Status,
        page_size: usize,
        after: Option<String>,
    ) -> docstore::Result<ListPage> {
        let tickets = self.tickets(tenant, "reader")?;
        let query = Query::new()
            .filter(Filter::eq("status", status)) // glue
            .order_by_desc("priority")
            .limit(page_size)
            .after(after.map(Cursor::from)); // glue
        let page = tickets.query(&query).await?;
        Ok(ListPage {
            tickets: page.items,
            next: page.next.map(|cursor| cursor.to_string()), // glue
        })
    }

    /// Closes a ticket by moving it to `archive`, atomically: it is in one collection or the
    /// other, never both or neither.
    pub(crate) async fn close(&self, tenant: &str, user: &str, id: &str) -> docstore::Result<()> {
        let tickets = self.tickets(tenant, user)?;
        let archive = tickets.site().collection::<Ticket>("archive")?;
        let Some(ticket) = tickets.get(id).await? else {
            return Err(Error::not_found(&tickets.key(id)?)); // glue
        };
        let closed = Ticket {
            status: Status::Closed,
            ..ticket.value
        };
        let moved = tickets.site().batch();
        let moved = moved.create(&archive, id, &closed);
        moved
            .delete_if(&tickets, id, ticket.version)
            .commit()
            .await?;
        Ok(())
    }
}

/// The HTTP status of an error: its kind decides, a batch's too. Glue, all of it: the
/// 9 lines of the `match`.
pub(crate) fn http_status(err: &Error) -> u16 {
    match err.kind() {
        ErrorKind::NotFound => 404,
        ErrorKind::AlreadyExists | ErrorKind::Conflict => 409,
        ErrorKind::InvalidArgument => 400,
        ErrorKind::TooLarge => 413,
        ErrorKind::QuotaExceeded => 403,
        ErrorKind::CursorExpired => 410,
        _ if err.is_retryable() => 503,
        _ => 500,
    }
}

/// A tenant's tickets counted per status and per assignee, kept from the feed of its
/// `tickets` collection, and stored with the cursor it has counted up to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Summary {
    pub(crate) by_status: BTreeMap<Status, u64>,
    pub(crate) by_assignee: BTreeMap<String, u64>,
    /// How many changes the summary has counted (a restart counts none twice).
    pub(crate) changes: u64,
    /// What each ticket was counted as: memory and SQLite give no previous value with a
    /// change, so the summary keeps what it needs to uncount an update or a delete.
    pub(crate) counted: BTreeMap<String, Counted>,
    /// The feed cursor after the last change counted.
    pub(crate) cursor: Option<String>,
}

/// The fields of a ticket that the summary counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Counted {
    pub(crate) status: Status,
    pub(crate) assignee: Option<String>,
}

impl Counted {
    fn of(ticket: &Ticket) -> Self {
        Counted {
            status: ticket.status,
            assignee: ticket.assignee.clone(),
        }
    }
}

/// Where each tenant's summary is kept.
const SUMMARIES: &str = "summaries";

impl Summary {
    /// The summary `tickets` would have, counted from the tickets themselves.
    pub(crate) fn of<'a>(tickets: impl IntoIterator<Item = &'a Ticket>) -> Self {
        let mut summary = Summary::default();
        tickets
            .into_iter()
            .for_each(|t| summary.count(&Counted::of(t), true));
        summary
    }

    /// The counts alone, to compare summaries kept in different ways.
    pub(crate) fn counts(&self) -> (&BTreeMap<Status, u64>, &BTreeMap<String, u64>) {
        (&self.by_status, &self.by_assignee)
    }

    fn count(&mut self, ticket: &Counted, add: bool) {
        let who = ticket.assignee.clone().unwrap_or_else(|| "nobody".into());
        bump(&mut self.by_status, ticket.status, add);
        bump(&mut self.by_assignee, who, add);
    }

    /// Counts one change: the ticket as it was (the change's previous value where the
    /// backend gives it, else what was counted) out, the ticket as it is in.
    fn apply(&mut self, change: TypedChange<Ticket>) {
        let counted = self.counted.remove(&change.id);
        let before = change.previous.map(|t| Counted::of(&t.value)).or(counted);
        if let Some(before) = before {
            self.count(&before, false);
        }
        match change.value {
            Ok(Some(ticket)) => {
                let now = Counted::of(&ticket.value);
                self.count(&now, true);
                self.counted.insert(change.id, now);
            }
            Ok(None) => {}
            Err(undecodable) => eprintln!("not counted: {undecodable}"),
        }
        self.changes += 1;
    }

    /// Reads the tenant's feed to its end from the saved cursor (a new summary: from a
    /// snapshot of every ticket), saving the summary with its cursor after each page; the
    /// summary as saved last. A failure loses nothing: the next call resumes where the last
    /// save was.
    pub(crate) async fn catch_up(service: &Service, tenant: &str) -> docstore::Result<Summary> {
        let tickets = service.tickets(tenant, "summary")?;
        let saved = tickets.site().collection::<Summary>(SUMMARIES)?;
        let mut summary = saved
            .get("tickets")
            .await?
            .map_or_else(Summary::default, |s| s.value);
        loop {
            let start = summary.cursor.as_deref().unwrap_or("snapshot"); // glue
            let start = FeedStart::parse(start)?; // glue
            let page = tickets.changes(&start, 100).await?;
            page.changes
                .into_iter()
                .for_each(|change| summary.apply(change));
            summary.cursor = Some(page.next.to_string()); // glue
            saved.put("tickets", &summary).await?; // glue
            if page.caught_up {
                return Ok(summary);
            }
        }
    }

    /// The background task: keeps the tenant's summary up to date, waiting for changes in
    /// between; returns only on an error (run it again: it resumes).
    pub(crate) async fn follow(service: Service, tenant: String) -> docstore::Result<()> {
        loop {
            let summary = Summary::catch_up(&service, &tenant).await?;
            let cursor = ChangeCursor::parse(summary.cursor.as_deref().unwrap_or_default()); // glue
            service.store.wait_for_changes(&cursor?).await?; // glue
        }
    }
}

/// `map[key] += 1` or `-= 1`, an entry at zero removed.
fn bump<K: Ord>(map: &mut BTreeMap<K, u64>, key: K, add: bool) {
    let n = map.entry(key).or_default();
    *n = if add { *n + 1 } else { n.saturating_sub(1) };
    map.retain(|_, n| *n > 0);
}

/// A config file for the demo when none is given: SQLite in the temp folder (a relative
/// path in a config file is taken from the file's folder).
fn demo_config() -> std::io::Result<std::path::PathBuf> {
    let file = std::env::temp_dir().join("ticket_service.toml");
    let toml =
        "[database]\nbackend = \"sqlite\"\n[database.sqlite]\npath = \"ticket_service.db\"\n";
    std::fs::write(&file, toml)?;
    Ok(file)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = std::env::args()
        .nth(1)
        .map_or_else(demo_config, |f| Ok(f.into()))?;
    let database = docstore_any::load_config(&file)?; // glue
    let service = Service {
        store: docstore_any::open(&database).await?, // glue
    };
    println!("config: {}", file.display());

    // The summary follows acme's tickets in the background, from wherever it got to.
    let follower = tokio::spawn(Summary::follow(service.clone(), "acme".into()));

    // Two requests every run repeats, and one of this run only (its ticket gets closed).
    let this_run = WriteId::random();
    let requests = [
        ("k-1", "Printer on fire", 5),
        ("k-2", "No coffee", 3),
        (this_run.as_str(), "Wiki", 1),
    ];
    let mut ids = Vec::new();
    for (key, title, priority) in requests {
        let request = CreateTicket {
            tenant: "acme".into(),
            user: "alice".into(),
            idempotency_key: key.into(),
            title: title.into(),
            priority,
        };
        // A client that never saw the answer sends the request again: the same ticket.
        let first = service.create_ticket(&request).await;
        let again = service.create_ticket(&request).await;
        let ticket = first
            .ticket
            .ok_or(format!("{}: {:?}", first.status, first.error))?;
        let repeat = again.ticket.ok_or("the repeat failed")?;
        println!(
            "{} {} v{} (repeat: {} v{})",
            first.status, ticket.id, ticket.version, again.status, repeat.version
        );
        ids.push(ticket.id);
    }
    let taken = service.assign("acme", "sam", &ids[1], "sam").await?;
    println!("{} assigned to sam (v{})", taken.id, taken.version);

    let mut after = None;
    loop {
        let page = service.list("acme", Status::Open, 1, after).await?;
        page.tickets
            .iter()
            .for_each(|t| println!("open: {} p{} {}", t.id, t.value.priority, t.value.title));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    match service.close("acme", "sam", &ids[2]).await {
        Ok(()) => println!("{} closed and archived", ids[2]),
        Err(err) => println!("{} not closed: {} {err}", ids[2], http_status(&err)),
    }

    // A restart: the background task stops; a new one goes on from the saved cursor.
    follower.abort();
    let _cancelled = follower.await;
    let summary = Summary::catch_up(&service, "acme").await?;
    println!(
        "acme: {:?}, {:?} ({} changes counted)",
        summary.by_status, summary.by_assignee, summary.changes
    );
    let tickets = service.tickets("acme", "reader")?.stream(&Query::new());
    let tickets: Vec<Ticket> = tickets.map_ok(|t| t.value).try_collect().await?;
    assert_eq!(
        summary.counts(),
        Summary::of(&tickets).counts(),
        "the summary counts the tickets"
    );
    Ok(())
}
