//! A map bounded in bytes that drops its least recently used entries first
//! (the handheld's plans, loaded models and pushed models).

use std::collections::HashMap;
use std::hash::Hash;

/// Entries with a size each; inserting past the limit evicts the least
/// recently used others (never the entry just inserted, which may exceed
/// the limit alone).
#[derive(Debug)]
pub struct ByteLru<K, V> {
    entries: HashMap<K, (V, u64, u64)>,
    bytes: u64,
    clock: u64,
    limit: u64,
}

impl<K: Eq + Hash + Clone, V> ByteLru<K, V> {
    /// An empty map holding at most `limit` bytes.
    pub fn new(limit: u64) -> ByteLru<K, V> {
        ByteLru { entries: HashMap::new(), bytes: 0, clock: 0, limit }
    }

    /// The entry, now the most recently used.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        self.clock += 1;
        let now = self.clock;
        self.entries.get_mut(key).map(|(v, _, used)| {
            *used = now;
            &*v
        })
    }

    /// Whether `key` is held (not counted as a use).
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// Inserts (or replaces) `key` with its size; returns what was evicted
    /// to make room, least recently used first.
    pub fn insert(&mut self, key: K, value: V, bytes: u64) -> Vec<(K, V)> {
        self.clock += 1;
        let now = self.clock;
        if let Some((_, old, _)) = self.entries.insert(key, (value, bytes, now)) {
            self.bytes -= old;
        }
        self.bytes = self.bytes.saturating_add(bytes);
        let mut evicted = vec![];
        while self.bytes > self.limit {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| e.2 != now)
                .min_by_key(|(_, e)| e.2)
                .map(|(k, _)| k.clone());
            let Some(k) = oldest else { break };
            if let Some(v) = self.remove(&k) {
                evicted.push((k, v));
            }
        }
        evicted
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.entries.remove(key).map(|(v, b, _)| {
            self.bytes -= b;
            v
        })
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The keys, in no order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_first_and_never_the_new_entry() {
        let mut m = ByteLru::new(100);
        assert!(m.insert("a", 1, 40).is_empty());
        assert!(m.insert("b", 2, 40).is_empty());
        assert_eq!(m.get(&"a"), Some(&1)); // b is now the older
        assert_eq!(m.insert("c", 3, 40), vec![("b", 2)]);
        assert_eq!(m.bytes(), 80);
        assert!(m.contains(&"a") && m.contains(&"c") && !m.contains(&"b"));
        // One entry larger than the limit: everything else goes, it stays.
        let evicted = m.insert("huge", 4, 500);
        assert_eq!(evicted.len(), 2, "{evicted:?}");
        assert_eq!((m.len(), m.bytes()), (1, 500));
        // Replacing an entry counts its new size once.
        m.insert("huge", 5, 10);
        assert_eq!((m.len(), m.bytes()), (1, 10));
        assert_eq!(m.remove(&"huge"), Some(5));
        assert!(m.is_empty() && m.bytes() == 0);
    }
}
