//! Quick start: a few documents in a SQLite file (or any store: set DOCSTORE_URL), one
//! optimistic update, one query.
//!
//! ```sh
//! cargo run -p docstore-any --example quickstart
//! DOCSTORE_URL=memory: cargo run -p docstore-any --example quickstart
//! ```

use docstore::Key;
use docstore::query::{Filter, Query};
use serde_json::json;

#[tokio::main]
async fn main() -> docstore::Result<()> {
    let url = std::env::var("DOCSTORE_URL").unwrap_or_else(|_| "sqlite:quickstart.db".into());
    let store = docstore_any::open_url(&url).await?;
    println!("store: {url}");

    // put is an upsert, so running the example twice is fine.
    let tickets = [
        (
            "T-1",
            json!({"title": "Printer on fire", "status": "open", "priority": 5}),
        ),
        (
            "T-2",
            json!({"title": "Coffee machine empty", "status": "open", "priority": 3}),
        ),
        (
            "T-3",
            json!({"title": "Update the wiki", "status": "closed", "priority": 1}),
        ),
    ];
    for (id, data) in tickets {
        let key = Key::new("acme", "tickets", id)?;
        let doc = store
            .put(&key, docstore::object(data)?, "quickstart")
            .await?;
        println!("put {id} -> version {}", doc.version);
    }

    // An optimistic update: only applies if nobody wrote T-2 since we read it.
    let key = Key::new("acme", "tickets", "T-2")?;
    let read = store.get(&key).await?.expect("just written");
    let patch = docstore::object(json!({"status": "in progress", "assignee": "sam"}))?;
    let updated = store.update_if(&key, &patch, read.version, "sam").await?;
    println!(
        "T-2 is now {} (version {})",
        updated.data["status"], updated.version
    );

    // Open tickets with priority >= 3, newest change first.
    let query = Query::new()
        .filter(Filter::ne("status", "closed").and(Filter::gte("priority", 3)))
        .order_by_desc("$updated_at")
        .limit(20);
    let page = store.query("acme", "tickets", &query).await?;
    for doc in &page.documents {
        println!(
            "{:>4}  {:<12} {}",
            doc.id,
            doc.data["status"].as_str().unwrap_or(""),
            doc.data["title"]
        );
    }
    println!("{} documents in site acme", store.count("acme").await?);
    Ok(())
}
