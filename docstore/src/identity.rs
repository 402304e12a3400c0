//! Write identities: what lets a backend tell a write's own effect from anyone else's — after
//! an answer was lost inside one call, and across calls when an application retries one.

use crate::{Error, Result};
use sha2::{Digest, Sha256};
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

/// The longest client key [`WriteId::from_key`] takes, in bytes (more than any HTTP header
/// or reference needs, and bounded so a hostile one costs little to refuse).
pub const MAX_KEY_BYTES: usize = 1024;

/// What is hashed before a client key, so that the identities of keys are never the
/// identities any other use of SHA-256 over the same text would give.
const KEY_DOMAIN: &[u8] = b"docstore write identity from a client key\0";

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

    /// The identity of a client-chosen key — an HTTP `Idempotency-Key`, an order reference,
    /// a job id — so that the client's retries of one request are one call to the store.
    ///
    /// The identity is the first 128 bits of the SHA-256 of the key (under a prefix of its
    /// own), so it is the same for the same key in every process, on every backend and
    /// across versions, and two different keys meet on one identity only with the
    /// chance of a 128-bit collision (none in practice). The key is always hashed, even one
    /// that is already an identity's text: `from_key(k)` and `parse(k)` differ. Any text of
    /// 1 to [`MAX_KEY_BYTES`] bytes is a key; an empty one (a missing header) or a longer one
    /// is [`Error::InvalidArgument`].
    ///
    /// What it protects, and for how long, is what any caller identity gives
    /// (`docs/contract.md`, "Caller write identities"): a write repeated with it applies once
    /// and answers as the first did, as long as the document still holds the identity — among
    /// the identities of its last [`KEPT_WRITE_IDS`] caller-identified writes; a delete's for
    /// [`DELETE_IDS_KEPT_FOR`]. After that a repeat is a new write. The identity is held per
    /// document: one key may cover a request's writes to several documents, but every write of
    /// one document needs its own key (a second write of the same document with the same key
    /// is taken for a repeat and applies nothing), so derive one per step
    /// (`format!("{key}/assign")`). Keys are the client's, so put whatever scopes them in the
    /// key: two clients' `"order-1"` on one document are one identity, `"acme/order-1"` and
    /// `"globex/order-1"` are not.
    ///
    /// ```
    /// use docstore::WriteId;
    ///
    /// let id = WriteId::from_key("order-8812")?;
    /// assert_eq!(id, WriteId::from_key("order-8812")?); // the client's retry: the same call
    /// assert_ne!(id, WriteId::from_key("order-8813")?);
    /// // Fixed forever: SHA-256 of a prefix and the key, its first 128 bits.
    /// assert_eq!(id.as_str(), "39c8ad502b712a0c5dbfea0fa70eea2c");
    /// assert!(WriteId::from_key("").is_err());
    /// # Ok::<(), docstore::Error>(())
    /// ```
    pub fn from_key(key: &str) -> Result<Self> {
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(Error::invalid(format!(
                "a client key for a write identity is 1 to {MAX_KEY_BYTES} bytes, not {}",
                key.len()
            )));
        }
        let digest = Sha256::new()
            .chain_update(KEY_DOMAIN)
            .chain_update(key.as_bytes())
            .finalize();
        let digits: String = digest[..DIGITS / 2]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        Ok(WriteId(digits))
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

/// What a backend keeps for one key: the identities of the writes that made its document, or
/// — after a caller-identified delete — of that delete and the writes before it, with when
/// the delete recorded them. The one rule every driver applies to tell a repeated call from
/// a new one (see [`Origin`](crate::driver::Origin)).
///
/// ```
/// use docstore::WriteId;
/// use docstore::identity::KeptIds;
///
/// let (create, delete) = (WriteId::random(), WriteId::random());
/// let standing = KeptIds { ids: KeptIds::after(&create, None), deleted_at: None };
/// assert!(standing.repeats_write(&create));
/// let deleted = KeptIds { ids: KeptIds::after(&delete, Some(&standing)), deleted_at: Some(10) };
/// assert!(deleted.repeats_delete(&delete, 11) && !deleted.repeats_write(&create));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptIds {
    /// The identities, newest first.
    pub ids: WriteIds,
    /// When a delete recorded them (unix nanoseconds); `None` while the document stands.
    pub deleted_at: Option<i64>,
}

impl KeptIds {
    /// Whether a write with `id` repeats one that wrote the standing document.
    pub fn repeats_write(&self, id: &WriteId) -> bool {
        self.deleted_at.is_none() && self.ids.holds(id)
    }

    /// Whether a delete (or a batch) with `id` repeats one this key keeps: on a standing
    /// document, or on a delete record within [`DELETE_IDS_KEPT_FOR`] of `now` (whether or
    /// not a document was created at the key since).
    pub fn repeats_delete(&self, id: &WriteId, now: i64) -> bool {
        self.ids.holds(id)
            && self
                .deleted_at
                .is_none_or(|at| now - at < DELETE_IDS_KEPT_FOR_NANOS)
    }

    /// What a key keeps after a write with `id` stored its document: `id`, then what the key
    /// kept before (`earlier`, a standing document's identities or a delete record's).
    pub fn written(id: &WriteId, earlier: Option<&KeptIds>) -> KeptIds {
        KeptIds {
            ids: KeptIds::after(id, earlier),
            deleted_at: None,
        }
    }

    /// What a key keeps after a delete with `id` removed its document at `now`: a delete
    /// record of `id`, then the identities of earlier deletes of the key (`earlier` when it
    /// is a delete record: a standing document's identities go with it).
    pub fn deleted(id: &WriteId, earlier: Option<&KeptIds>, now: i64) -> KeptIds {
        let earlier = earlier.filter(|kept| kept.deleted_at.is_some());
        KeptIds {
            ids: KeptIds::after(id, earlier),
            deleted_at: Some(now),
        }
    }

    /// When these are a delete record: the instant before which a backend keeping them
    /// forgets older delete records ([`DELETE_IDS_KEPT_FOR`] before the delete), as it keeps
    /// them; `None` for a standing document's identities.
    ///
    /// ```
    /// use docstore::WriteId;
    /// use docstore::identity::{DELETE_IDS_KEPT_FOR_NANOS, KeptIds};
    ///
    /// let id = WriteId::random();
    /// let now = 2 * DELETE_IDS_KEPT_FOR_NANOS;
    /// let deleted = KeptIds::deleted(&id, None, now);
    /// assert_eq!(deleted.prunes_before(), Some(DELETE_IDS_KEPT_FOR_NANOS));
    /// assert_eq!(KeptIds::written(&id, Some(&deleted)).prunes_before(), None);
    /// ```
    pub fn prunes_before(&self) -> Option<i64> {
        let horizon = |at: i64| at.saturating_sub(DELETE_IDS_KEPT_FOR_NANOS);
        self.deleted_at.map(horizon)
    }

    /// The identities a key keeps after a write (or delete) with `id`: `id`, then those of
    /// `earlier` (what the key kept before it) as far as room allows.
    pub fn after(id: &WriteId, earlier: Option<&KeptIds>) -> WriteIds {
        let mut ids = WriteIds::default();
        ids.record(id);
        if let Some(earlier) = earlier {
            ids.extend_older(&earlier.ids);
        }
        ids
    }
}

/// How long a backend remembers the identity of a delete that the caller identified (on a
/// record of the deleted key, since the document is gone): a repeated delete within this
/// window is recognised, and never removes a document created at the key since.
pub const DELETE_IDS_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// [`DELETE_IDS_KEPT_FOR`] in the nanoseconds of document timestamps.
pub const DELETE_IDS_KEPT_FOR_NANOS: i64 = DELETE_IDS_KEPT_FOR.as_nanos() as i64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_key_is_one_to_max_key_bytes() {
        let longest = "k".repeat(MAX_KEY_BYTES);
        assert!(WriteId::from_key(&longest).is_ok());
        let longer = WriteId::from_key(&format!("{longest}k")).unwrap_err();
        assert!(matches!(longer, Error::InvalidArgument(_)), "{longer}");
        assert!(matches!(
            WriteId::from_key(""),
            Err(Error::InvalidArgument(_))
        ));
        let id = WriteId::from_key("550e8400e29b41d4a716446655440000").unwrap();
        assert_ne!(
            id.as_str(),
            "550e8400e29b41d4a716446655440000",
            "always hashed"
        );
        assert_eq!(WriteId::parse(id.as_str()).unwrap(), id, "a valid identity");
    }
}
