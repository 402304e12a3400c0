//! Write identities: what lets a backend tell a write's own effect from anyone else's — after
//! an answer was lost inside one call, and across calls when an application retries one.

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The identity of one write call: 128 bits, written as 32 lowercase hex digits.
///
/// Every write carries one. Without one from the caller, a backend that needs it (DynamoDB,
/// whose SDK resends a write whose answer was lost) draws a fresh one per call. An application
/// gives its own to make a call safe to repeat: a call repeated with the same identity — say,
/// after it ended [`Error::Unavailable`] — finds the identity on the document its first
/// attempt wrote, applies nothing more and answers with that document (see
/// [`WriteCall::write_id`](crate::WriteCall::write_id) and `docs/contract.md`, "Write
/// identities"). Data, actor, version and timestamps alone never identify a write.
///
/// ```
/// use docstore::WriteId;
///
/// let a = WriteId::random();
/// assert_ne!(a, WriteId::random());
/// assert_eq!(a.as_str().len(), 32);
///
/// // An identity the app already has, such as a request's UUID:
/// let from_request: WriteId = "550E8400-e29b-41d4-a716-446655440000".parse()?;
/// assert_eq!(from_request.as_str(), "550e8400e29b41d4a716446655440000");
/// assert!("not an identity".parse::<WriteId>().is_err());
/// # Ok::<(), docstore::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteId(String);

/// Hex digits in an identity.
const DIGITS: usize = 32;

impl WriteId {
    /// A fresh identity from the thread-local cryptographically secure generator.
    pub fn random() -> Self {
        let bits: u128 = rand::random();
        WriteId(format!("{bits:032x}"))
    }

    /// An identity from its text: 32 hex digits, or a UUID in its hyphenated form (any case);
    /// [`Error::InvalidArgument`] otherwise. The same as `text.parse()`.
    pub fn parse(text: &str) -> Result<Self> {
        let digits: String = match text.len() {
            36 if is_hyphenated_uuid(text) => text.chars().filter(|c| *c != '-').collect(),
            _ => text.to_owned(),
        };
        if digits.len() != DIGITS || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::invalid(format!(
                "a write identity is 32 hex digits or a hyphenated UUID, not {text:?}"
            )));
        }
        Ok(WriteId(digits.to_ascii_lowercase()))
    }

    /// Wraps an identity read back from storage (written by this library, so not checked).
    pub fn from_stored(text: impl Into<String>) -> Self {
        WriteId(text.into())
    }

    /// The identity as stored: 32 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `8-4-4-4-12` hex digits with hyphens between.
fn is_hyphenated_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len)
}

impl FromStr for WriteId {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        WriteId::parse(text)
    }
}

impl fmt::Display for WriteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The write identities a document keeps (its last writes', newest first, at most
/// [`KEPT_WRITE_IDS`]): the window within which a repeated call is recognised.
pub const KEPT_WRITE_IDS: usize = 16;

/// The identities of the last writes a backend keeps for one document (or for one deleted
/// key), newest first, at most [`KEPT_WRITE_IDS`]: the one way every driver records and
/// looks them up.
///
/// ```
/// use docstore::WriteId;
/// use docstore::identity::WriteIds;
///
/// let mut ids = WriteIds::default();
/// let first = WriteId::random();
/// ids.record(&first);
/// for _ in 0..15 {
///     ids.record(&WriteId::random());
/// }
/// assert!(ids.holds(&first));
/// ids.record(&WriteId::random());
/// assert!(!ids.holds(&first), "displaced by the 17th");
/// assert_eq!(WriteIds::decode(&ids.encode()), ids);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteIds(Vec<WriteId>);

impl WriteIds {
    /// Whether `id` is one of these.
    pub fn holds(&self, id: &WriteId) -> bool {
        self.0.contains(id)
    }

    /// The identities, newest first.
    pub fn iter(&self) -> impl Iterator<Item = &WriteId> {
        self.0.iter()
    }

    /// Adds `id` as the newest, forgetting the oldest beyond [`KEPT_WRITE_IDS`].
    pub fn record(&mut self, id: &WriteId) {
        self.0.insert(0, id.clone());
        self.0.truncate(KEPT_WRITE_IDS);
    }

    /// Adds the identities of `older` after these, as far as room allows (a deleted key's
    /// identities carried into its next deletion's).
    pub fn extend_older(&mut self, older: &WriteIds) {
        let room = KEPT_WRITE_IDS.saturating_sub(self.0.len());
        self.0.extend(older.0.iter().take(room).cloned());
    }

    /// The identities as one line of text (space-separated, newest first), as SQLite keeps
    /// them.
    pub fn encode(&self) -> String {
        let texts: Vec<&str> = self.0.iter().map(WriteId::as_str).collect();
        texts.join(" ")
    }

    /// The identities [`encode`](Self::encode) wrote.
    pub fn decode(text: &str) -> Self {
        text.split_whitespace().map(WriteId::from_stored).collect()
    }
}

/// Identities read back from storage, newest first (at most [`KEPT_WRITE_IDS`] are kept).
impl FromIterator<WriteId> for WriteIds {
    fn from_iter<I: IntoIterator<Item = WriteId>>(ids: I) -> Self {
        WriteIds(ids.into_iter().take(KEPT_WRITE_IDS).collect())
    }
}

/// How long a backend remembers the identity of a delete that the caller identified (on a
/// record of the deleted key, since the document is gone): a repeated delete within this
/// window is recognised, and never removes a document created at the key since.
pub const DELETE_IDS_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// [`DELETE_IDS_KEPT_FOR`] in the nanoseconds of document timestamps.
pub const DELETE_IDS_KEPT_FOR_NANOS: i64 = DELETE_IDS_KEPT_FOR.as_nanos() as i64;
