//! A cut's identity: the hex of its prefix mask, as both peers name a cut
//! on the wire and in reports.

use std::fmt;

use serde::Serialize;

/// Which layers a cut runs on the wearable, as hex digits of its mask (bit
/// `i` of digit `i / 4` is layer `i`). Two cuts of one model are the same
/// cut exactly when their keys are equal. Built by `tandem_core::Cut::key`;
/// a key from a peer is checked against the model by `Cut::from_key`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct CutKey(String);

impl CutKey {
    /// The key of a prefix mask.
    pub fn of_mask(prefix: &[bool]) -> CutKey {
        let mut s = String::with_capacity(prefix.len() / 4 + 1);
        for chunk in prefix.chunks(4) {
            let v = chunk.iter().enumerate().fold(0u8, |acc, (i, &b)| acc | (u8::from(b) << i));
            s.push(char::from_digit(u32::from(v), 16).unwrap_or('0'));
        }
        CutKey(s)
    }

    /// A key as the wire carried it. Not checked here: only the model can
    /// say whether it names a cut (`Cut::from_key`).
    pub fn from_wire(key: impl Into<String>) -> CutKey {
        CutKey(key.into())
    }

    /// The hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hex digits, owned (for the wire).
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for CutKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for CutKey {
    /// A key as the wire carried it ([`CutKey::from_wire`]).
    fn from(key: &str) -> CutKey {
        CutKey::from_wire(key)
    }
}

impl From<String> for CutKey {
    /// A key as the wire carried it ([`CutKey::from_wire`]).
    fn from(key: String) -> CutKey {
        CutKey::from_wire(key)
    }
}

impl PartialEq<str> for CutKey {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CutKey {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_are_hex_digits_low_layer_first() {
        assert_eq!(CutKey::of_mask(&[true, false, false, false, true]).as_str(), "11");
        assert_eq!(CutKey::of_mask(&[false, true, true, true]).as_str(), "e");
        assert_eq!(CutKey::of_mask(&[]).as_str(), "");
        assert_ne!(CutKey::of_mask(&[true, false]), CutKey::of_mask(&[false, true]));
    }
}
