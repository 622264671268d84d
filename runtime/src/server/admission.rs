//! Who gets a connection slot. A connection takes one of the
//! `max_connections` slots only once it has authenticated (a paired
//! wearable's encrypted handshake, or a plain link's first bytes where
//! plain links are served); until then it is a handshake, and handshakes
//! have a budget of their own, in all and per source address. When a
//! budget is full the oldest handshake is dropped for the new one, so
//! strangers holding idle sockets cannot keep a paired wearable out: they
//! only push each other out.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::store::lock;

/// Most handshakes in progress at once.
pub const MAX_HANDSHAKES: usize = 16;
/// Most handshakes in progress from one source address.
pub const MAX_HANDSHAKES_PER_ADDRESS: usize = 8;

/// The handheld's handshakes and served connections.
pub(super) struct Admission {
    inner: Mutex<Inner>,
    max_served: usize,
}

#[derive(Default)]
struct Inner {
    /// Handshakes in progress, oldest first.
    handshakes: VecDeque<Pending>,
    served: usize,
}

struct Pending {
    id: u64,
    address: String,
    evict: oneshot::Sender<()>,
}

/// A served connection's slot, given back on drop.
pub(super) struct Slot(Arc<Admission>);

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.0.inner).served -= 1;
    }
}

/// The address part of a link's name (`1.2.3.4:5678` → `1.2.3.4`).
pub(super) fn address(name: &str) -> &str {
    match name.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => name,
    }
}

impl Admission {
    pub(super) fn new(max_served: usize) -> Arc<Self> {
        Arc::new(Admission { inner: Mutex::default(), max_served })
    }

    /// Connection `id` from `address` starts its handshake. The receiver
    /// fires if a newer handshake pushes it out.
    pub(super) fn begin(&self, id: u64, address: &str) -> oneshot::Receiver<()> {
        let mut inner = lock(&self.inner);
        let same = inner.handshakes.iter().filter(|p| p.address == address).count();
        let oldest = if same >= MAX_HANDSHAKES_PER_ADDRESS {
            inner.handshakes.iter().position(|p| p.address == address)
        } else if inner.handshakes.len() >= MAX_HANDSHAKES {
            Some(0)
        } else {
            None
        };
        if let Some(i) = oldest.and_then(|i| inner.handshakes.remove(i)) {
            let _ = i.evict.send(());
        }
        let (evict, evicted) = oneshot::channel();
        inner.handshakes.push_back(Pending { id, address: address.to_string(), evict });
        evicted
    }

    /// Connection `id`'s handshake ended without authenticating.
    pub(super) fn abandoned(&self, id: u64) {
        lock(&self.inner).handshakes.retain(|p| p.id != id);
    }

    /// Connection `id` authenticated: its slot, or `None` when every slot
    /// is taken (the handheld is busy).
    pub(super) fn authenticated(self: &Arc<Self>, id: u64) -> Option<Slot> {
        let mut inner = lock(&self.inner);
        inner.handshakes.retain(|p| p.id != id);
        if inner.served >= self.max_served {
            return None;
        }
        inner.served += 1;
        Some(Slot(self.clone()))
    }

    /// Handshakes in progress and connections served.
    pub(super) fn counts(&self) -> (usize, usize) {
        let inner = lock(&self.inner);
        (inner.handshakes.len(), inner.served)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_handshake_makes_way_and_slots_count_the_authenticated() {
        let a = Admission::new(2);
        // One address fills its own budget: its oldest is pushed out.
        let mut first = a.begin(0, "10.0.0.1");
        for id in 1..MAX_HANDSHAKES_PER_ADDRESS as u64 {
            let _ = a.begin(id, "10.0.0.1");
        }
        assert!(first.try_recv().is_err(), "not evicted while the budget holds");
        let _ = a.begin(99, "10.0.0.1");
        assert!(first.try_recv().is_ok(), "the oldest from the address makes way");
        assert_eq!(a.counts().0, MAX_HANDSHAKES_PER_ADDRESS);
        // Other addresses fill the global budget: the oldest overall goes.
        let mut others = vec![];
        for id in 100..100 + (MAX_HANDSHAKES - MAX_HANDSHAKES_PER_ADDRESS) as u64 {
            others.push(a.begin(id, &format!("10.0.1.{id}")));
        }
        assert_eq!(a.counts().0, MAX_HANDSHAKES);
        let mut newest = a.begin(200, "10.0.2.1");
        assert_eq!(a.counts().0, MAX_HANDSHAKES);
        assert!(newest.try_recv().is_err());
        // Slots go to the authenticated only, up to the limit.
        let one = a.authenticated(200).expect("a slot");
        let two = a.authenticated(100).expect("a slot");
        assert!(a.authenticated(101).is_none(), "busy");
        assert_eq!(a.counts(), (MAX_HANDSHAKES - 3, 2));
        drop(one);
        assert!(a.authenticated(102).is_some());
        drop(two);
        a.abandoned(103);
        assert_eq!(a.counts().0, MAX_HANDSHAKES - 5);
        assert_eq!(address("127.0.0.1:4000"), "127.0.0.1");
        assert_eq!(address("[::1]:4000"), "[::1]");
        assert_eq!(address("memory"), "memory");
    }
}
