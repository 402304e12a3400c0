//! The benchmark's data: ~1 KB documents made deterministically from their number, the
//! patches, the selective query (as a docstore [`Query`] and as the hand-written predicate
//! the baselines use), and RFC 7386 merge patch written out for the baselines.

use docstore::query::{Filter, Query};
use docstore::{Data, Document};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::cmp::Ordering;

/// The site every benchmark document lives in.
pub const SITE: &str = "bench";
/// The collection of the single-document and concurrency workloads.
pub const POINT_COLLECTION: &str = "point";
/// The collection of the query and walk workloads.
pub const QUERY_COLLECTION: &str = "query";
/// The actor of every write.
pub const ACTOR: &str = "bench";
/// The serialized size every document is padded to, in bytes.
pub const DOC_BYTES: usize = 1024;

/// The selective query: `status == "open"`, `category == "c7"`, `priority >= 50`.
pub const STATUS: &str = "open";
/// The selective query's category.
pub const CATEGORY: &str = "c7";
/// The selective query's lowest priority.
pub const PRIORITY_MIN: i64 = 50;
/// The selective query's page size.
pub const TOP: usize = 20;

const STATUSES: [&str; 5] = ["open", "closed", "pending", "review", "done"];
const CITIES: [&str; 8] = [
    "Lisbon", "Oslo", "Lyon", "Porto", "Kyoto", "Quito", "Perth", "Tartu",
];
const WORDS: [&str; 16] = [
    "alpha", "bravo", "delta", "gamma", "kilo", "lima", "mango", "nova", "oscar", "papa", "quartz",
    "romeo", "sierra", "tango", "ultra", "zulu",
];

/// SplitMix64: a tiny deterministic generator, so every run and every subject sees exactly
/// the same documents.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Shuffles `items` (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// The id of document number `n` (fixed width, so id order is number order).
pub fn id(n: usize) -> String {
    format!("doc-{n:08}")
}

/// Document number `n` in its `generation` (0 when created, 1 for the `put` workload):
/// ~[`DOC_BYTES`] of JSON with strings, integers, a float, a boolean, an array and a nested
/// object.
pub fn document(n: usize, generation: u64) -> Data {
    let mut rng = Rng::new((n as u64) << 8 | generation);
    let word = |rng: &mut Rng| WORDS[rng.below(WORDS.len() as u64) as usize];
    let mut data = json!({
        "title": format!("Ticket {n}: {} {}", word(&mut rng), word(&mut rng)),
        "status": STATUSES[rng.below(5) as usize],
        "category": format!("c{}", rng.below(20)),
        "priority": rng.below(100),
        "score": rng.below(1_000_000) as f64 / 1000.0 + 0.25,
        "owner": format!("user{}", rng.below(1000)),
        "tags": [format!("t{}", rng.below(50)), format!("t{}", rng.below(50)), format!("t{}", rng.below(50))],
        "address": {
            "city": CITIES[rng.below(CITIES.len() as u64) as usize],
            "zip": format!("{:05}", rng.below(100_000)),
            "country": "XX",
        },
        "active": rng.below(2) == 1,
        "counter": 0,
        "generation": generation,
        "body": "",
    });
    let size = serde_json::to_string(&data).expect("serializes").len();
    let mut body = String::new();
    while body.len() + size < DOC_BYTES {
        body.push_str(word(&mut rng));
        body.push(' ');
    }
    body.truncate(DOC_BYTES.saturating_sub(size));
    data["body"] = Value::String(body);
    match data {
        Value::Object(map) => map.into(),
        _ => unreachable!("built as an object"),
    }
}

/// A benchmark document as an application's own type: what the typed rows read and write
/// through [`docstore::Collection`]. The same fields as [`document`]'s JSON; fields the
/// patches add or remove are optional, so a patched document decodes too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// `Ticket <n>: <word> <word>`.
    pub title: String,
    /// One of five statuses.
    pub status: String,
    /// `c0`..`c19`.
    pub category: String,
    /// 0..100.
    pub priority: u64,
    /// A float, 0.25..1000.25.
    pub score: f64,
    /// `user0`..`user999`.
    pub owner: String,
    /// Three tags.
    pub tags: Vec<String>,
    /// A nested object.
    pub address: Address,
    /// A boolean.
    pub active: bool,
    /// 0 when created; the patches set it.
    pub counter: u64,
    /// The generation (0 when created, 1 for the `put` workload).
    pub generation: u64,
    /// Padding up to [`DOC_BYTES`].
    pub body: String,
    /// Added by the patches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// [`Ticket::address`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Address {
    /// A city.
    pub city: String,
    /// Five digits.
    pub zip: String,
    /// `XX`; the patches remove it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
}

/// Document number `n` in its `generation` as a [`Ticket`]: [`document`], decoded.
pub fn ticket(n: usize, generation: u64) -> Ticket {
    serde_json::from_value(Value::from(document(n, generation))).expect("a ticket's shape")
}

/// The `k`-th patch: a counter, a new key and a nested change (so the merge recurses).
pub fn patch(k: u64) -> Data {
    let value = json!({
        "counter": k,
        "note": format!("patched {k}"),
        "address": {"zip": format!("{:05}", k % 100_000), "country": null},
    });
    match value {
        Value::Object(map) => map.into(),
        _ => unreachable!("built as an object"),
    }
}

/// The selective query as docstore spells it: filter, sort by `score` descending, 20.
pub fn selective_query() -> Query {
    Query::new()
        .filter(
            Filter::eq("status", STATUS)
                .and(Filter::eq("category", CATEGORY))
                .and(Filter::gte("priority", PRIORITY_MIN)),
        )
        .order_by_desc("score")
        .limit(TOP)
}

/// The selective filter, hand-written.
pub fn selective_matches(data: &Data) -> bool {
    data.get("status").and_then(Value::as_str) == Some(STATUS)
        && data.get("category").and_then(Value::as_str) == Some(CATEGORY)
        && data
            .get("priority")
            .and_then(Value::as_i64)
            .is_some_and(|p| p >= PRIORITY_MIN)
}

/// The selective query's order, hand-written: `score` descending, then id.
pub fn selective_order(a: &Document, b: &Document) -> Ordering {
    let score = |d: &Document| {
        d.data
            .get("score")
            .and_then(Value::as_f64)
            .unwrap_or(f64::MIN)
    };
    score(b).total_cmp(&score(a)).then_with(|| a.id.cmp(&b.id))
}

/// RFC 7386 merge patch, as a baseline writes it: `null` removes, objects merge
/// recursively, anything else replaces.
pub fn merge(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(inner) => {
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(map) = slot {
                    merge(map, inner);
                }
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
}

/// Now in unix nanoseconds, as the baselines stamp their writes.
pub fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// How many of a bulk load's first documents [`check_bulk_loaded`] reads back: enough to
/// meet every partition of a DynamoDB table (each id's partition is a hash of it).
const PROBED: usize = 32;

/// Checks that `store` reads the query collection a bulk load wrote around it (`count`
/// documents) as its own documents: the first ones, each written by [`ACTOR`]; `backend`
/// names it in the error.
pub async fn check_bulk_loaded(
    store: &docstore::Store,
    backend: &str,
    count: usize,
) -> crate::BenchResult<()> {
    for n in 0..count.min(PROBED) {
        let probe = docstore::Key::new(SITE, QUERY_COLLECTION, id(n))?;
        let found = store.get(&probe).await?;
        if found.is_none_or(|doc| doc.created_by != ACTOR) {
            let what = format!("{backend} does not read bulk-loaded document {}", id(n));
            return Err(what.into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_about_a_kilobyte_and_deterministic() {
        for n in [0, 1, 99_999] {
            let doc = document(n, 0);
            let size = serde_json::to_string(&doc).unwrap().len();
            assert!((DOC_BYTES - 8..=DOC_BYTES).contains(&size), "{size}");
            assert_eq!(doc, document(n, 0));
            assert_ne!(doc, document(n, 1));
        }
    }

    #[test]
    fn tickets_are_the_documents() {
        for n in [0, 1, 99_999] {
            for generation in [0, 1] {
                let ticket = ticket(n, generation);
                let data = docstore::object(serde_json::to_value(&ticket).unwrap()).unwrap();
                assert_eq!(data, document(n, generation));
            }
        }
        // A patched document decodes too.
        let mut doc = document(5, 0);
        docstore::merge_patch(&mut doc, &patch(7));
        let patched: Ticket = serde_json::from_value(Value::from(doc)).unwrap();
        assert_eq!(patched.note.as_deref(), Some("patched 7"));
        assert_eq!(patched.address.country, None);
    }

    #[test]
    fn hand_written_merge_is_docstores() {
        let mut a = document(3, 0);
        let mut b = a.clone();
        for k in 0..3 {
            merge(&mut a, &patch(k));
            docstore::merge_patch(&mut b, &patch(k));
        }
        assert_eq!(a, b);
    }

    #[test]
    fn hand_written_filter_is_the_reference() {
        let query = selective_query();
        let filter = query.filter.as_ref().unwrap();
        let mut matched = 0;
        for n in 0..5_000 {
            let doc = Document {
                expires_at: None,
                id: id(n),
                data: document(n, 0),
                created_at: 0,
                updated_at: 0,
                created_by: String::new(),
                updated_by: String::new(),
                version: 1,
            };
            let expected = docstore::query::matches(filter, &doc).unwrap();
            assert_eq!(selective_matches(&doc.data), expected);
            matched += usize::from(expected);
        }
        // About 1 in 200.
        assert!((10..=50).contains(&matched), "{matched}");
    }
}
