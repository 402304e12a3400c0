//! The ticket service example (`examples/ticket_service.rs`) under the faults real backends
//! show: every create a client sends through the handler, repeated with its key after a 503,
//! is applied exactly once, and the feed-driven summary, restarted after every failure,
//! counts exactly the tickets the store holds.

#[allow(dead_code)] // the example's `main` and demo config are not run here
#[path = "../examples/ticket_service.rs"]
mod ticket_service;

use docstore::retry::{BackoffConfig, RetryPolicy};
use docstore::{ChangeKind, FeedStart, Query, Store, StoreOptions, WriteId};
use docstore_memory::MemoryStore;
use docstore_testing::{FaultyDriver, Plan, strategy};
use futures_util::TryStreamExt;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::sync::Arc;
use std::time::Duration;
use ticket_service::{CreateTicket, Service, Status, Summary, Ticket};

const TENANTS: [&str; 2] = ["acme", "globex"];
const REQUESTS: usize = 3;
/// How often the store retries a call itself: fewer than `strategy::MAX_RUN`, so a run of
/// lost answers can outlast it and reach the handler as a 503 the client repeats.
const RETRIES: u32 = 3;
/// How often a client repeats one request before it gives up (plans end after
/// `strategy::SCRIPT_CALLS` calls, so a correct service never needs this many).
const CLIENT_TRIES: usize = 40;

/// A memory store that retries `Unavailable` [`RETRIES`] times without waiting.
fn memory() -> Store {
    let no_wait = BackoffConfig::new(Duration::ZERO, Duration::ZERO, 1.0);
    let retry = RetryPolicy::default()
        .with_max_retries(RETRIES)
        .with_budget(Duration::from_secs(3600))
        .with_backoff(no_wait);
    Store::new(MemoryStore::with_options(
        StoreOptions::default().with_retry(retry),
    ))
}

fn request(tenant: &str, n: usize) -> CreateTicket {
    CreateTicket {
        tenant: tenant.into(),
        user: "client".into(),
        idempotency_key: format!("request-{n}"),
        title: format!("ticket {n}"),
        priority: n as u8,
    }
}

/// A client: sends `request` until it is answered, the same key every time.
async fn create_as_client(service: &Service, request: &CreateTicket) -> Result<String, String> {
    for _ in 0..CLIENT_TRIES {
        let response = service.create_ticket(request).await;
        match (response.status, response.ticket) {
            (201, Some(ticket)) => return Ok(ticket.id),
            (503, _) => continue,
            (status, _) => return Err(format!("{status}: {:?}", response.error)),
        }
    }
    Err(format!("{request:?} still 503 after {CLIENT_TRIES} tries"))
}

/// Assigns, again after a 503 or a conflict (assigning is idempotent).
async fn assign_as_client(service: &Service, tenant: &str, id: &str) -> Result<(), String> {
    for _ in 0..CLIENT_TRIES {
        match service.assign(tenant, "lead", id, "sam").await {
            Ok(_) => return Ok(()),
            Err(err) if matches!(ticket_service::http_status(&err), 503 | 409) => continue,
            Err(err) => return Err(format!("assign {id}: {err}")),
        }
    }
    Err(format!(
        "assign {id}: still failing after {CLIENT_TRIES} tries"
    ))
}

/// The summary task, restarted after every failure as a supervisor would.
async fn summary_as_task(service: &Service, tenant: &str) -> Result<Summary, String> {
    for _ in 0..CLIENT_TRIES {
        match Summary::catch_up(service, tenant).await {
            Ok(summary) => return Ok(summary),
            Err(err) if err.is_retryable() => continue,
            Err(err) => return Err(format!("summary of {tenant}: {err}")),
        }
    }
    Err(format!("summary of {tenant}: still failing"))
}

/// The ids of the tickets whose creation the store's own feed records, in feed order.
async fn created_tickets(store: &Store, tenant: &str) -> Vec<String> {
    let site = store.site(tenant).unwrap();
    let page = site.changes(&FeedStart::Oldest, 1000).await.unwrap();
    assert!(page.caught_up, "one page holds the whole test's feed");
    page.changes
        .iter()
        .filter(|c| c.key.collection() == "tickets" && c.kind == ChangeKind::Created)
        .map(|c| c.key.id().to_owned())
        .collect()
}

/// The tickets `tenant` holds, read past the faults.
async fn tickets_of(store: &Store, tenant: &str) -> Vec<Ticket> {
    let tickets = store.site(tenant).unwrap().collection::<Ticket>("tickets");
    let stream = tickets.unwrap().stream(&Query::new());
    stream.map_ok(|t| t.value).try_collect().await.unwrap()
}

/// Creates, assigns and summarises through a store faulted by `plan`; checks the result on
/// the store underneath.
async fn scenario(plan: Plan) -> Result<(), String> {
    let inner = memory();
    let faulty = Arc::new(FaultyDriver::new(inner.clone(), plan));
    let service = Service {
        store: Store::from_driver(faulty.clone()),
    };
    let fail = |why: String| format!("{why}\n{}", faulty.history());
    for tenant in TENANTS {
        // The summary starts before the tickets and catches up between the requests, so it
        // counts the feed's changes, not only a snapshot.
        summary_as_task(&service, tenant).await.map_err(fail)?;
        let mut ids = Vec::new();
        for n in 0..REQUESTS {
            let created = create_as_client(&service, &request(tenant, n)).await;
            ids.push(created.map_err(fail)?);
            summary_as_task(&service, tenant).await.map_err(fail)?;
        }
        let assigned = assign_as_client(&service, tenant, &ids[0]).await;
        assigned.map_err(fail)?;
        let summary = summary_as_task(&service, tenant).await.map_err(fail)?;

        let mut created = created_tickets(&inner, tenant).await;
        created.sort();
        ids.sort();
        if created != ids {
            return Err(fail(format!(
                "{tenant}: answered {ids:?}, created {created:?}"
            )));
        }
        let expected = Summary::of(&tickets_of(&inner, tenant).await);
        if summary.counts() != expected.counts() {
            return Err(fail(format!(
                "{tenant}: {summary:?}, the tickets: {expected:?}"
            )));
        }
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true) // latency faults take no real time
        .build()
        .unwrap()
}

#[test]
fn every_create_applies_once_and_the_summary_counts_the_tickets_under_faults() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let rt = runtime();
    let result = runner.run(&strategy::plan(), |plan| {
        rt.block_on(scenario(plan)).map_err(TestCaseError::fail)
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}

#[test]
fn a_restarted_summary_goes_on_from_its_saved_cursor() {
    runtime().block_on(async {
        let service = Service { store: memory() };
        for n in 0..REQUESTS {
            let created = service.create_ticket(&request("acme", n)).await;
            assert_eq!(created.status, 201, "{:?}", created.error);
        }
        let first = Summary::catch_up(&service, "acme").await.unwrap();
        assert_eq!(
            first.changes, REQUESTS as u64,
            "the snapshot: each ticket once"
        );

        // Later, in a new process: one more ticket, one assigned, one closed (moved out).
        let created = service.create_ticket(&request("acme", REQUESTS)).await;
        let id = created.ticket.unwrap().id;
        service.assign("acme", "lead", &id, "sam").await.unwrap();
        service.close("acme", "lead", &id).await.unwrap();
        let resumed = Summary::catch_up(&service, "acme").await.unwrap();
        assert_eq!(resumed.changes, REQUESTS as u64 + 3, "only the new changes");
        let expected = Summary::of(&tickets_of(&service.store, "acme").await);
        assert_eq!(resumed.counts(), expected.counts());
        assert_eq!(
            resumed.by_status.get(&Status::Open),
            Some(&(REQUESTS as u64))
        );
    });
}

#[test]
fn a_repeated_request_answers_the_same_ticket_and_keys_are_per_tenant() {
    runtime().block_on(async {
        let service = Service { store: memory() };
        let first = service
            .create_ticket(&request("acme", 1))
            .await
            .ticket
            .unwrap();
        let again = service.create_ticket(&request("acme", 1)).await;
        assert_eq!((again.status, again.ticket.unwrap()), (201, first.clone()));
        let other = service
            .create_ticket(&request("globex", 1))
            .await
            .ticket
            .unwrap();
        assert_ne!(other.id, first.id);
        let key = WriteId::from_key("acme/request-1").unwrap();
        assert_eq!(first.id, format!("T-{}", &key.as_str()[..16]));
    });
}

#[test]
fn listing_pages_through_every_ticket_once_and_errors_map_to_statuses() {
    runtime().block_on(async {
        let service = Service { store: memory() };
        for n in 0..5 {
            service
                .create_ticket(&request("acme", n))
                .await
                .ticket
                .unwrap();
        }
        let (mut seen, mut after) = (Vec::new(), None);
        loop {
            let page = service.list("acme", Status::Open, 2, after).await.unwrap();
            seen.extend(page.tickets.into_iter().map(|t| t.value.priority));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, vec![4, 3, 2, 1, 0], "most urgent first, each once");

        let missing = service.close("acme", "lead", "T-none").await.unwrap_err();
        assert_eq!(ticket_service::http_status(&missing), 404);
        let bad_cursor = service.list("acme", Status::Open, 2, Some("nonsense".into()));
        assert_eq!(
            ticket_service::http_status(&bad_cursor.await.unwrap_err()),
            400
        );
        let bad_key = CreateTicket {
            tenant: "bad tenant!".into(),
            ..request("acme", 9)
        };
        assert_eq!(service.create_ticket(&bad_key).await.status, 400);
    });
}
