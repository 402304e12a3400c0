//! Quick start: a small ticket service over any store — SQLite in `./quickstart.db` by
//! default, any other by URL (`DOCSTORE_URL=memory:`, `dynamodb://table?...`).
//!
//! ```sh
//! cargo run -p docstore-any --example quickstart
//! DOCSTORE_URL=memory: cargo run -p docstore-any --example quickstart
//! ```
//!
//! It shows the shape of an app: its own `Ticket` type, one `Site` per request (the tenant
//! and the user come from the request, and nothing reachable from the site can touch another
//! tenant), `modify` for a read-change-write that retries on conflicts, a write repeated
//! with the identity its `Unavailable` carries (the store has retried it already), and a
//! streamed listing.

use docstore::{Collection, Error, Query, Site, Store};
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};

/// What the app stores: its own type, no JSON maps in sight.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Ticket {
    title: String,
    status: Status,
    priority: u8,
    assignee: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Open,
    InProgress,
    Closed,
}

/// What a request handler gets: the tenant's site, writing as the request's user.
fn tickets_for(store: &Store, tenant: &str, user: &str) -> docstore::Result<Collection<Ticket>> {
    store
        .site(tenant)?
        .with_actor(user)?
        .collection::<Ticket>("tickets")
}

/// Opens a ticket unless it exists already (so running the example twice is fine).
async fn open_ticket(
    tickets: &Collection<Ticket>,
    id: &str,
    title: &str,
    priority: u8,
) -> docstore::Result<()> {
    let ticket = Ticket {
        title: title.into(),
        status: Status::Open,
        priority,
        assignee: None,
    };
    // The store retries `Unavailable` itself (a timeout, throttling), every try under one
    // write identity. If its budget ends, the error carries that identity: the same call
    // with it applies once, where a new call might answer `AlreadyExists` to its own write.
    let mut created = tickets.create(id, &ticket).await;
    if let Err(err @ Error::Unavailable { .. }) = &created {
        let again = err
            .write_id()
            .cloned()
            .expect("a write's Unavailable carries one");
        created = tickets.create(id, &ticket).write_id(again).await;
    }
    match created {
        Ok(created) => println!("opened {id} (version {})", created.version),
        Err(Error::AlreadyExists) => println!("{id} exists already"),
        Err(err) => return Err(err),
    }
    Ok(())
}

/// Takes a ticket: read, change, write back if nobody wrote in between, else again.
async fn take(tickets: &Collection<Ticket>, id: &str, user: &str) -> docstore::Result<()> {
    let taken = tickets
        .modify(id, |ticket| {
            ticket.status = Status::InProgress;
            ticket.assignee = Some(user.to_owned());
        })
        .await?;
    println!(
        "{id} taken by {} (version {}, by {})",
        user, taken.version, taken.updated_by
    );
    Ok(())
}

/// Every open ticket of the tenant, most urgent first, page by page however many there are.
async fn list_open(site: &Site) -> docstore::Result<()> {
    let tickets = site.collection::<Ticket>("tickets")?;
    let open = Query::parse(r#"status != "closed" order by priority desc"#)?;
    let mut stream = tickets.stream(&open);
    while let Some(ticket) = stream.try_next().await? {
        let who = ticket.value.assignee.as_deref().unwrap_or("nobody");
        println!(
            "{:>4}  p{}  {:<12} {:<8} {}",
            ticket.id,
            ticket.value.priority,
            format!("{:?}", ticket.value.status),
            who,
            ticket.value.title
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> docstore::Result<()> {
    let url = std::env::var("DOCSTORE_URL").unwrap_or_else(|_| "sqlite:quickstart.db".into());
    let store = docstore_any::open_url(&url).await?;
    println!("store: {url}");

    // A request from alice at tenant acme.
    let tickets = tickets_for(&store, "acme", "alice")?;
    open_ticket(&tickets, "T-1", "Printer on fire", 5).await?;
    open_ticket(&tickets, "T-2", "Coffee machine empty", 3).await?;
    open_ticket(&tickets, "T-3", "Update the wiki", 1).await?;

    // A request from sam: he takes T-2.
    take(&tickets_for(&store, "acme", "sam")?, "T-2", "sam").await?;

    // Another tenant's request sees none of acme's tickets.
    let globex = tickets_for(&store, "globex", "gina")?;
    assert!(globex.get("T-1").await?.is_none());

    list_open(tickets.site()).await?;
    println!("{} documents in site acme", tickets.site().count().await?);
    Ok(())
}
