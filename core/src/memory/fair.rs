//! The queue of a fair lock or semaphore: waiters in the order they first asked, each
//! place a lease that the waiter's next attempt renews, so a waiter that stopped asking
//! (crashed, paused, gone) loses its place when its lease runs out.

use super::state::Owner;

/// One waiter's place: who, until when, and how many permits it asks for.
pub(super) struct Place {
    owner: Owner,
    until: u64,
    permits: u32,
}

/// A key's fair queue, first come first served.
#[derive(Default)]
pub(super) struct Queue {
    places: Vec<Place>,
}

impl Queue {
    /// Drops the places whose lease ran out by `now`.
    pub(super) fn prune(&mut self, now: u64) {
        self.places.retain(|p| p.until > now);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// `owner` asks again: its place is renewed until `until` (or taken at the end of the
    /// queue, if it had none and `waits`). Whether it is now first in the queue, counting
    /// a caller that does not wait and has no place as first only in an empty queue.
    pub(super) fn stand(&mut self, owner: &str, until: u64, permits: u32, waits: bool) -> bool {
        if let Some(place) = self.places.iter_mut().find(|p| p.owner.is(owner)) {
            place.until = until;
            place.permits = permits;
        } else if waits {
            self.places.push(Place { owner: Owner::new(owner), until, permits });
        } else {
            return self.places.is_empty();
        }
        self.places.first().is_some_and(|p| p.owner.is(owner))
    }

    /// Gives up `owner`'s place: `true` if it had one.
    pub(super) fn leave(&mut self, owner: &str) -> bool {
        let before = self.places.len();
        self.places.retain(|p| !p.owner.is(owner));
        self.places.len() != before
    }
}

/// A file store's side of a queue: its places as they are written, and read back.
#[cfg(not(target_arch = "wasm32"))]
impl Queue {
    /// The places, first to last: owner, lease end, permits asked for.
    pub(super) fn places(&self) -> impl Iterator<Item = (&Owner, u64, u32)> {
        self.places.iter().map(|p| (&p.owner, p.until, p.permits))
    }

    /// Puts a place read back from a file at the end of the queue.
    pub(super) fn push(&mut self, owner: Owner, until: u64, permits: u32) {
        self.places.push(Place { owner, until, permits });
    }
}
