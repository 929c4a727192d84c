//! Ids: a prefix, the time in ms (hex, so ids sort by creation) and 64 random bits.

use rand::Rng;

/// A new id like `j_0190f3a2b4c1_5f1e...`.
pub fn new_id(prefix: &str) -> String {
    let ms = crate::store::now_ms().max(0) as u64;
    let r: u64 = rand::rng().random();
    format!("{prefix}_{ms:012x}{r:016x}")
}

/// Whether `s` looks like an id this server made (letters, digits, `_`; bounded length):
/// checked before an id reaches a file path.
pub fn is_valid(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
