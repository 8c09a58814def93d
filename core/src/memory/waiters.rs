//! This process's waiters of each key, woken by releases.

#[cfg(not(target_arch = "wasm32"))]
use std::sync::Arc;

#[cfg(not(target_arch = "wasm32"))]
use event_listener::Event;

#[cfg(not(target_arch = "wasm32"))]
use super::state::Map;
use crate::store::{BoxFuture, HoldKind};

/// The waiters of each key, kept apart from the holds so a release that removes a hold
/// still reaches everyone queued behind it; a key's record goes once nobody listens.
/// `kind` is `None` for a plain lock, else the kind of a semaphore's or read-write
/// lock's holds, which wait apart from a plain lock of the same key.
///
/// The WebAssembly build keeps none: its memory store never signals releases (see
/// [`super::MemoryStore::without_release_signals`]), so its waiters poll, and none of
/// this is in the module.
#[derive(Default)]
pub(super) struct Waiters {
    #[cfg(not(target_arch = "wasm32"))]
    map: Map<Arc<Event>>,
    /// How many releases (and forced frees) woke, or would have woken, waiters: a file
    /// store tells other processes by it.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) wakes: u64,
}

#[cfg(not(target_arch = "wasm32"))]
impl Waiters {
    /// A name no lock key can have for the waiters of a semaphore or read-write lock
    /// (keys never hold control characters).
    fn name(key: &str, kind: Option<HoldKind>) -> std::borrow::Cow<'_, str> {
        match kind {
            // A fair lock's waiters listen with the plain lock's (`Some(Exclusive)`).
            None | Some(HoldKind::Exclusive) => key.into(),
            Some(HoldKind::Permit { .. }) => format!("\u{1}semaphore\u{1}{key}").into(),
            Some(_) => format!("\u{1}rwlock\u{1}{key}").into(),
        }
    }

    /// A release: wakes `n` waiters of the key, and counts the wake-up.
    pub(super) fn wake(&mut self, key: &str, kind: Option<HoldKind>, n: usize) {
        self.wakes = self.wakes.wrapping_add(1);
        let name = Self::name(key, kind);
        if let Some(event) = self.map.get(&*name) {
            event.notify(n);
            // Nobody left to wake (the waiters of earlier releases got in or gave up):
            // the record goes with the hold.
            if event.total_listeners() == 0 {
                self.map.remove(&*name);
            }
        }
    }

    /// Wakes `n` waiters of the key, with no release to count (an expiry found in passing,
    /// a wake-up passed on).
    pub(super) fn nudge(&self, key: &str, kind: Option<HoldKind>, n: usize) {
        if let Some(event) = self.map.get(&*Self::name(key, kind)) {
            event.notify(n);
        }
    }

    /// Wakes `n` waiters of every key.
    pub(super) fn wake_every_key(&mut self, n: usize) {
        for event in self.map.values() {
            event.notify(n);
        }
        self.forget_unheard();
    }

    /// Drops the records nobody listens to.
    pub(super) fn forget_unheard(&mut self) {
        self.map.retain(|_, event| event.total_listeners() > 0);
    }

    /// The listener of the key's next wake-up.
    pub(super) fn listen(&mut self, key: &str, kind: Option<HoldKind>) -> BoxFuture<'static, ()> {
        let name = Self::name(key, kind);
        let event = match self.map.get(&*name) {
            Some(event) => event.clone(),
            None => self.map.entry(name.into()).or_default().clone(),
        };
        Box::pin(event.listen())
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Nobody waits here: see [`Waiters`].
#[cfg(target_arch = "wasm32")]
#[allow(clippy::unused_self)] // the same methods as the other build's
impl Waiters {
    pub(super) fn wake(&mut self, _: &str, _: Option<HoldKind>, _: usize) {}
    pub(super) fn nudge(&self, _: &str, _: Option<HoldKind>, _: usize) {}
    pub(super) fn wake_every_key(&mut self, _: usize) {}
    pub(super) fn forget_unheard(&mut self) {}
    pub(super) fn listen(&mut self, _: &str, _: Option<HoldKind>) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
    pub(super) fn len(&self) -> usize {
        0
    }
}
