//! Who gets a connection slot. A connection takes one of the
//! `max_connections` slots only once it has authenticated (a paired
//! wearable's encrypted handshake, or a plain link's first bytes where
//! plain links are served); until then it is a handshake, and handshakes
//! have a budget of their own, in all and per source address. When a
//! budget is full a handshake is dropped for the new one: the oldest whose
//! peer has sent nothing yet, else the oldest, among those past a short
//! grace (a peer's first bytes may not have been read yet); while every
//! one is within it the new one is let in beyond the budget. Strangers holding idle
//! sockets cannot keep a paired wearable out (it speaks at once, they
//! never do): they only push each other out. The pairing listener uses the
//! same rule for its attempts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::store::lock;

/// Most handshakes in progress at once.
pub const MAX_HANDSHAKES: usize = 16;
/// Most handshakes in progress from one source address.
pub const MAX_HANDSHAKES_PER_ADDRESS: usize = 8;
/// A handshake this young is never pushed out: its peer's first bytes may
/// be on their way (or not yet read). While every handshake is this young
/// a new one is let in beyond the budget.
pub const HANDSHAKE_GRACE: Duration = Duration::from_millis(500);

/// The handheld's handshakes and served connections.
pub(crate) struct Admission {
    inner: Mutex<Inner>,
    max_served: usize,
    max_handshakes: usize,
    per_address: usize,
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
    /// When its link was accepted.
    since: Instant,
    /// Set once the peer's first bytes arrive.
    heard: Arc<AtomicBool>,
    evict: oneshot::Sender<()>,
}

/// A served connection's slot, given back on drop.
pub(crate) struct Slot(Arc<Admission>);

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.0.inner).served -= 1;
    }
}

/// The address part of a link's name (`1.2.3.4:5678` → `1.2.3.4`).
pub(crate) fn address(name: &str) -> &str {
    match name.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => name,
    }
}

impl Admission {
    /// Up to `max_served` served connections, with the handshake budgets
    /// [`MAX_HANDSHAKES`] and [`MAX_HANDSHAKES_PER_ADDRESS`].
    pub(crate) fn new(max_served: usize) -> Arc<Self> {
        Self::with_budgets(max_served, MAX_HANDSHAKES, MAX_HANDSHAKES_PER_ADDRESS)
    }

    /// Up to `max_served` served connections, `max_handshakes` handshakes,
    /// `per_address` from one address.
    pub(crate) fn with_budgets(max_served: usize, max_handshakes: usize, per_address: usize) -> Arc<Self> {
        Arc::new(Admission {
            inner: Mutex::default(),
            max_served,
            max_handshakes: max_handshakes.max(1),
            per_address: per_address.max(1),
        })
    }

    /// Connection `id` from `address` starts its handshake (`heard` is set
    /// once its first bytes arrive). The receiver fires if a newer
    /// handshake pushes it out.
    pub(crate) fn begin(
        &self,
        id: u64,
        address: &str,
        heard: Arc<AtomicBool>,
        now: Instant,
    ) -> oneshot::Receiver<()> {
        let mut inner = lock(&self.inner);
        let same = inner.handshakes.iter().filter(|p| p.address == address).count();
        let among: Option<&dyn Fn(&Pending) -> bool> = if same >= self.per_address {
            Some(&|p: &Pending| p.address == address)
        } else if inner.handshakes.len() >= self.max_handshakes {
            Some(&|_: &Pending| true)
        } else {
            None
        };
        if let Some(among) = among {
            let settled = |p: &Pending| among(p) && now.saturating_duration_since(p.since) >= HANDSHAKE_GRACE;
            let quiet = inner.handshakes.iter().position(|p| settled(p) && !p.heard.load(Ordering::Relaxed));
            let victim = quiet.or_else(|| inner.handshakes.iter().position(settled));
            if let Some(p) = victim.and_then(|i| inner.handshakes.remove(i)) {
                let _ = p.evict.send(());
            }
        }
        let (evict, evicted) = oneshot::channel();
        inner.handshakes.push_back(Pending { id, address: address.to_string(), since: now, heard, evict });
        evicted
    }

    /// Connection `id`'s handshake ended without authenticating.
    pub(crate) fn abandoned(&self, id: u64) {
        lock(&self.inner).handshakes.retain(|p| p.id != id);
    }

    /// Connection `id` authenticated: its slot, or `None` when every slot
    /// is taken (the handheld is busy).
    pub(crate) fn authenticated(self: &Arc<Self>, id: u64) -> Option<Slot> {
        let mut inner = lock(&self.inner);
        inner.handshakes.retain(|p| p.id != id);
        if inner.served >= self.max_served {
            return None;
        }
        inner.served += 1;
        Some(Slot(self.clone()))
    }

    /// Handshakes in progress and connections served.
    pub(crate) fn counts(&self) -> (usize, usize) {
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
        let quiet = || Arc::new(AtomicBool::new(false));
        // Handshakes opened long ago (past their grace), and now.
        let now = Instant::now() + HANDSHAKE_GRACE * 4;
        let then = now - HANDSHAKE_GRACE * 2;
        // One address fills its own budget: its oldest quiet one is pushed
        // out, not an older one that has spoken.
        let mut spoke = a.begin(0, "10.0.0.1", Arc::new(AtomicBool::new(true)), then);
        let mut first = a.begin(1, "10.0.0.1", quiet(), then);
        for id in 2..MAX_HANDSHAKES_PER_ADDRESS as u64 {
            drop(a.begin(id, "10.0.0.1", quiet(), then));
        }
        assert!(first.try_recv().is_err(), "not evicted while the budget holds");
        drop(a.begin(99, "10.0.0.1", quiet(), now));
        assert!(first.try_recv().is_ok(), "the oldest quiet one from the address makes way");
        assert!(spoke.try_recv().is_err(), "a peer that spoke keeps its place");
        assert_eq!(a.counts().0, MAX_HANDSHAKES_PER_ADDRESS);
        // Other addresses fill the global budget: the oldest overall goes.
        let mut others = vec![];
        for id in 100..100 + (MAX_HANDSHAKES - MAX_HANDSHAKES_PER_ADDRESS) as u64 {
            others.push(a.begin(id, &format!("10.0.1.{id}"), quiet(), then));
        }
        assert_eq!(a.counts().0, MAX_HANDSHAKES);
        let mut newest = a.begin(200, "10.0.2.1", quiet(), now);
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
        // A handshake within its grace is never pushed out: the budget
        // stretches until one is old enough to go.
        let b = Admission::with_budgets(1, 1, 1);
        let t = Instant::now();
        let mut young = b.begin(1, "10.0.0.1", quiet(), t);
        let mut second = b.begin(2, "10.0.0.1", quiet(), t + Duration::from_millis(1));
        assert!(young.try_recv().is_err(), "evicted within its grace");
        assert_eq!(b.counts().0, 2);
        drop(b.begin(3, "10.0.0.1", quiet(), t + HANDSHAKE_GRACE + Duration::from_millis(1)));
        assert!(young.try_recv().is_ok(), "the oldest settled one makes way");
        assert!(second.try_recv().is_err());
        assert_eq!(address("127.0.0.1:4000"), "127.0.0.1");
        assert_eq!(address("[::1]:4000"), "[::1]");
        assert_eq!(address("memory"), "memory");
    }
}
