//! Random identities of write calls, used to recognise a write's own effect after a lost answer.

use std::fmt;

/// A random identity of one write call (128 bits, as 32 lowercase hex digits).
///
/// A network backend stores it with the item that `create` or `update_if` writes. When the
/// SDK resends a write whose answer was lost, and the resend's condition fails on what the first
/// attempt stored, the backend compares the stored identity with its own: equal means the write
/// is its own and succeeded. Data, actor, version and timestamps alone never identify a write.
///
/// ```
/// let a = docstore::WriteId::random();
/// let b = docstore::WriteId::random();
/// assert_ne!(a, b);
/// assert_eq!(a.as_str().len(), 32);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteId(String);

impl WriteId {
    /// A fresh identity from the thread-local cryptographically secure generator.
    pub fn random() -> Self {
        let bits: u128 = rand::random();
        WriteId(format!("{bits:032x}"))
    }

    /// Wraps an identity read back from storage.
    pub fn from_stored(text: impl Into<String>) -> Self {
        WriteId(text.into())
    }

    /// The identity as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WriteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
