//! The memory store's state: the plain locks, the semaphores' and read-write locks' holds,
//! the waiters, the fencing counter and the sweep, and the operations on them at a given
//! `now` (the memory store's, under its lock, and a file store's, on the state it read
//! under its file lock).

#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
use std::collections::hash_map::RandomState;
use std::collections::HashMap;

use super::holds::Holds;
use super::waiters::Waiters;
use crate::error::Result;
use crate::store::{AllGrant, BoxFuture, Grant, HoldKind};

/// Below this many entries the map is never swept in passing.
const SWEEP_MIN_ENTRIES: usize = 256;
/// With at least [`SWEEP_MIN_ENTRIES`], an insert sweeps when this long has passed
/// since the last sweep, or when the map has doubled since then.
const SWEEP_INTERVAL_MS: u64 = 1_000;

/// The standard library's `SipHash`-1-3 with a per-map random key. Lock keys often come
/// from user input (`invoice:{id}`), and a hasher without a keyed, collision-resistant
/// design lets crafted keys pile into one bucket; `SipHash` is built to prevent that,
/// at some cost per hash over an unkeyed hasher.
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
pub(super) type Map<V> = HashMap<Box<str>, V, RandomState>;

/// On wasm32-unknown-unknown (the WebAssembly build; WASI targets have a random source)
/// the standard library has no random source: `RandomState`'s keys are two memory
/// addresses, the same from run to run, so `SipHash` keeps nobody from crafting
/// colliding keys there. [`Fnv`] hashes as well for that, in 0.6 KB less of the
/// (gzipped) WebAssembly module.
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub(super) type Map<V> = HashMap<Box<str>, V, std::hash::BuildHasherDefault<Fnv>>;

/// FNV-1a, 64-bit: a byte at a time, xor then multiply by the FNV prime.
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub(super) struct Fnv(u64);

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
impl Default for Fnv {
    fn default() -> Self {
        // The FNV offset basis.
        Self(0xcbf2_9ce4_8422_2325)
    }
}

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

pub(crate) struct State {
    pub(super) entries: Map<Entry>,
    /// Semaphores and read-write locks, apart from the plain locks and from each other.
    pub(super) semaphores: Map<Holds>,
    pub(super) rwlocks: Map<Holds>,
    /// The queues of fair plain locks, in the `queue` of a `Holds` that has nothing else
    /// (the semaphores' are in theirs; one map type less in the WebAssembly module).
    pub(super) fair: Map<Holds>,
    pub(super) waiters: Waiters,
    pub(super) last_fencing_token: u64,
    pub(super) last_sweep_ms: u64,
    pub(super) len_after_sweep: usize,
}

/// An owner, inline when it has the length of locksmith's own tokens (no allocation on
/// the hot path), boxed otherwise (any string a caller of the plain interface passes).
pub(super) enum Owner {
    Inline([u8; 32]),
    Boxed(Box<str>),
}

impl Owner {
    pub(super) fn new(owner: &str) -> Self {
        match <[u8; 32]>::try_from(owner.as_bytes()) {
            Ok(bytes) => Self::Inline(bytes),
            Err(_) => Self::Boxed(owner.into()),
        }
    }

    pub(super) fn as_str(&self) -> &str {
        match self {
            Self::Inline(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
            Self::Boxed(boxed) => boxed,
        }
    }

    pub(super) fn is(&self, owner: &str) -> bool {
        match self {
            Self::Inline(bytes) => bytes == owner.as_bytes(),
            Self::Boxed(boxed) => **boxed == *owner,
        }
    }
}

pub(super) struct Entry {
    pub(super) owner: Owner,
    pub(super) expires_at: u64,
    /// The hold's fencing token (an election's term, read by `holder`; a file store's
    /// readers show it).
    pub(super) token: u64,
    /// What the holder proclaimed (an election's value): it goes with the hold, so a
    /// new holder starts without one.
    pub(super) proclaimed: Option<Box<Proclaimed>>,
    /// Taken by a fair handle: the key refuses other handles while it is held.
    pub(super) fair: bool,
}

/// A value kept with a hold, with the sequence number its `proclaim` carried.
pub(super) struct Proclaimed {
    pub(super) seq: u64,
    pub(super) value: Box<str>,
}

/// A plain lock's live holder, as `holder(key)` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHolder {
    /// The owner token.
    pub owner: String,
    /// The fencing token its acquire minted.
    pub fencing_token: u64,
    /// Milliseconds left.
    pub remaining_ms: u64,
    /// The value it proclaimed last, if any.
    pub value: Option<String>,
}

impl Entry {
    pub(super) fn live(&self, now: u64) -> bool {
        self.expires_at > now
    }

    pub(super) fn held_by(&self, owner: &str, now: u64) -> bool {
        self.live(now) && self.owner.is(owner)
    }
}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            entries: Map::default(),
            semaphores: Map::default(),
            rwlocks: Map::default(),
            fair: Map::default(),
            waiters: Waiters::default(),
            last_fencing_token: 0,
            last_sweep_ms: 0,
            len_after_sweep: 0,
        }
    }

    /// Everything the store keeps per key.
    pub(super) fn len(&self) -> usize {
        self.entries.len() + self.semaphores.len() + self.rwlocks.len() + self.fair.len() + self.waiters.len()
    }

    pub(super) fn holds_of(&mut self, kind: HoldKind) -> &mut Map<Holds> {
        match kind {
            HoldKind::Permit { .. } => &mut self.semaphores,
            _ => &mut self.rwlocks,
        }
    }

    /// Wakes every waiter of a semaphore or read-write lock: a release can admit
    /// several (readers), and each checks for itself.
    pub(super) fn wake_permit_waiters(&mut self, key: &str, kind: HoldKind) {
        self.waiters.wake(key, Some(kind), usize::MAX);
    }

    /// Wakes one waiter of `key`: a woken waiter that gives up passes the wake-up on.
    pub(super) fn wake_one_waiter(&mut self, key: &str) {
        self.waiters.wake(key, None, 1);
    }

    pub(super) fn sweep(&mut self, now: u64) {
        let waiters = &self.waiters;
        self.entries.retain(|key, entry| {
            let live = entry.live(now);
            if !live {
                // A fair lock's waiters each check whether they are first.
                waiters.nudge(key, None, if entry.fair { usize::MAX } else { 1 });
            }
            live
        });
        for (map, kind) in
            [(&mut self.semaphores, HoldKind::Permit { limit: 1 }), (&mut self.rwlocks, HoldKind::Read)]
        {
            map.retain(|key, holds| {
                if holds.prune(now) {
                    waiters.nudge(key, Some(kind), usize::MAX);
                }
                !holds.is_empty()
            });
        }
        self.fair.retain(|_, holds| {
            holds.queue.prune(now);
            !holds.queue.is_empty()
        });
        self.waiters.forget_unheard();
        // Give memory back after a burst of keys has expired.
        if self.entries.capacity() > 1024 && self.entries.capacity() > 4 * self.entries.len() {
            self.entries.shrink_to_fit();
        }
        self.last_sweep_ms = now;
        self.len_after_sweep = self.len();
    }

    fn sweep_in_passing(&mut self, now: u64) {
        let len = self.len();
        if len >= SWEEP_MIN_ENTRIES
            && (len >= 2 * self.len_after_sweep.max(1)
                || now.saturating_sub(self.last_sweep_ms) >= SWEEP_INTERVAL_MS)
        {
            self.sweep(now);
        }
    }

    fn live_entry(&self, key: &str, now: u64) -> Option<&Entry> {
        self.entries.get(key).filter(|e| e.live(now))
    }

    /// Whether fair waiters queue for the plain lock `key` (their expired places dropped).
    fn fair_queued(&mut self, key: &str, now: u64) -> bool {
        if self.fair.is_empty() {
            return false;
        }
        let Some(queue) = self.fair.get_mut(key).map(|h| &mut h.queue) else {
            return false;
        };
        queue.prune(now);
        if queue.is_empty() {
            self.fair.remove(key);
            return false;
        }
        true
    }

    fn next_fencing_token(&mut self) -> u64 {
        self.last_fencing_token += 1;
        self.last_fencing_token
    }
}

/// The operations, on the state as it is at `now` (the memory store's lock held, or a
/// file store's state read under its file lock). A release wakes this process's waiters.
impl State {
    pub(crate) fn acquire(&mut self, key: &str, owner: &str, ttl_ms: u64, now: u64) -> Option<Grant> {
        let expires_at = now.saturating_add(ttl_ms);
        // A free key that fair waiters queue for is theirs first (the lock sees why).
        if self.fair_queued(key, now) && self.live_entry(key, now).is_none() {
            return None;
        }
        let token = match self.entries.get_mut(key) {
            Some(entry) if entry.live(now) => return None,
            Some(_) => {
                let token = self.next_fencing_token();
                let entry = self.entries.get_mut(key)?;
                entry.owner = Owner::new(owner);
                entry.expires_at = expires_at;
                entry.token = token;
                entry.proclaimed = None;
                entry.fair = false;
                token
            }
            None => {
                self.sweep_in_passing(now);
                let token = self.next_fencing_token();
                self.entries.insert(
                    key.into(),
                    Entry { owner: Owner::new(owner), expires_at, token, proclaimed: None, fair: false },
                );
                token
            }
        };
        Some(Grant::with_fencing_token(token))
    }

    pub(crate) fn release(&mut self, key: &str, owner: &str, now: u64) -> bool {
        // One lookup on the common path (the holder releases); the entry goes back in
        // when someone else holds the key.
        match self.entries.remove_entry(key) {
            Some((_, entry)) if entry.held_by(owner, now) => {
                if entry.fair {
                    // Each fair waiter checks whether it is first.
                    self.waiters.wake(key, None, usize::MAX);
                } else {
                    self.wake_one_waiter(key);
                }
                true
            }
            Some((held, entry)) => {
                self.entries.insert(held, entry);
                self.leave_fair_queue(key, owner);
                false
            }
            None => {
                self.leave_fair_queue(key, owner);
                false
            }
        }
    }

    /// `owner` gives up its place in the fair queue of `key`, if it has one; the waiters
    /// behind it check whether they are first now.
    fn leave_fair_queue(&mut self, key: &str, owner: &str) {
        if self.fair.is_empty() {
            return;
        }
        let Some(queue) = self.fair.get_mut(key).map(|h| &mut h.queue) else {
            return;
        };
        if queue.leave(owner) {
            if queue.is_empty() {
                self.fair.remove(key);
            }
            self.waiters.wake(key, None, usize::MAX);
        }
    }

    /// Whether `key` is fair now: held by a fair handle, or queued for by fair waiters.
    /// A handle that is not fair is refused on such a key (see `LockStore::fair_key`).
    pub(crate) fn fair_key(&mut self, key: &str, kind: HoldKind, now: u64) -> bool {
        if kind != HoldKind::Exclusive {
            return self.holds_of(kind).get_mut(key).is_some_and(|holds| {
                holds.prune(now);
                holds.fair()
            });
        }
        self.live_entry(key, now).is_some_and(|e| e.fair) || self.fair_queued(key, now)
    }

    /// A fair handle's attempt on `key` of `kind` (see `LockStore::acquire_fair`). Only
    /// the first in the queue is admitted, so a later, smaller semaphore request never
    /// overtakes an earlier, larger one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fair_attempt(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        waits: bool,
        now: u64,
    ) -> Result<Option<Grant>> {
        match kind {
            HoldKind::Exclusive => self.acquire_fair(key, owner, ttl_ms, waits, now),
            kind @ HoldKind::Permit { .. } => {
                self.acquire_permits_as(key, owner, ttl_ms, kind, permits, Some(waits), now)
            }
            _ => Err(crate::error::LockError::InvalidArgument(
                "`fair` is for locks and semaphores: read-write locks are phase-fair already".into(),
            )),
        }
    }

    /// A fair attempt on the plain lock `key`: `owner` takes (or renews, until its TTL
    /// from now) its place in the key's queue, and is granted the key when it is first
    /// and the key is free. One that does not `wait` keeps no place. A key held by a
    /// handle that is not fair refuses it.
    pub(crate) fn acquire_fair(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        waits: bool,
        now: u64,
    ) -> Result<Option<Grant>> {
        let until = now.saturating_add(ttl_ms);
        if let Some(entry) = self.live_entry(key, now) {
            if !entry.fair {
                return Err(crate::store::fair_on_unfair_key(key, HoldKind::Exclusive));
            }
            if entry.owner.is(owner) {
                return Ok(None);
            }
        }
        let free = self.live_entry(key, now).is_none();
        let queue = &mut self.fair.entry(key.into()).or_default().queue;
        queue.prune(now);
        let first = queue.stand(owner, until, 1, waits);
        if !(first && free) {
            if !waits {
                queue.leave(owner);
            }
            if queue.is_empty() {
                self.fair.remove(key);
            }
            return Ok(None);
        }
        queue.leave(owner);
        if queue.is_empty() {
            self.fair.remove(key);
        }
        let token = self.next_fencing_token();
        if !self.entries.contains_key(key) {
            self.sweep_in_passing(now);
        }
        self.entries.insert(
            key.into(),
            Entry { owner: Owner::new(owner), expires_at: until, token, proclaimed: None, fair: true },
        );
        Ok(Some(Grant::with_fencing_token(token)))
    }

    pub(crate) fn extend(&mut self, key: &str, owner: &str, ttl_ms: u64, now: u64) -> bool {
        match self.entries.get_mut(key) {
            Some(entry) if entry.held_by(owner, now) => {
                entry.expires_at = now.saturating_add(ttl_ms);
                true
            }
            _ => false,
        }
    }

    pub(crate) fn is_locked(&self, key: &str, now: u64) -> bool {
        self.live_entry(key, now).is_some()
    }

    pub(crate) fn remaining_time(&self, key: &str, now: u64) -> Option<u64> {
        self.live_entry(key, now).map(|e| e.expires_at - now)
    }

    pub(crate) fn is_held_by(&self, key: &str, owner: &str, now: u64) -> bool {
        self.entries.get(key).is_some_and(|e| e.held_by(owner, now))
    }

    /// The live holder of the plain lock `key`, with its token, time left and value.
    pub(crate) fn holder(&self, key: &str, now: u64) -> Option<KeyHolder> {
        self.live_entry(key, now).map(|e| KeyHolder {
            owner: e.owner.as_str().to_owned(),
            fencing_token: e.token,
            remaining_ms: e.expires_at - now,
            value: e.proclaimed.as_ref().map(|p| p.value.to_string()),
        })
    }

    /// Keeps `value` with `owner`'s live hold of `key`, unless the hold keeps one with a
    /// `seq` at least this one (a late proclaim never undoes a newer one). `true` when
    /// `owner` holds `key`.
    pub(crate) fn proclaim(&mut self, key: &str, owner: &str, value: &str, seq: u64, now: u64) -> bool {
        let Some(entry) = self.entries.get_mut(key).filter(|e| e.held_by(owner, now)) else {
            return false;
        };
        if entry.proclaimed.as_ref().is_none_or(|p| p.seq < seq) {
            entry.proclaimed = Some(Box::new(Proclaimed { seq, value: value.into() }));
        }
        true
    }

    /// Takes every one of `keys` for `owner`, or, if any is held, none.
    pub(crate) fn acquire_all(&mut self, keys: &[String], owner: &str, ttl_ms: u64, now: u64) -> AllGrant {
        // A key fair waiters queue for is theirs first: busy to a lock on several keys.
        if let Some(held) = keys.iter().position(|key| self.is_locked(key, now) || self.fair_queued(key, now))
        {
            // A release of one of the free keys may have woken this attempt: its wake-up
            // goes on to that key's next waiter, which may need nothing else.
            for key in keys {
                if !self.is_locked(key, now) {
                    self.waiters.nudge(key, None, 1);
                }
            }
            return AllGrant::Busy(Some(held));
        }
        AllGrant::Granted(
            keys.iter().map(|key| self.acquire(key, owner, ttl_ms, now).unwrap_or_default()).collect(),
        )
    }

    /// The listener of `key`'s next release; ready at once when the key is free.
    pub(crate) fn release_signal(&mut self, key: &str, now: u64) -> BoxFuture<'static, ()> {
        if self.live_entry(key, now).is_none() {
            // Free already: the next attempt should not wait.
            return Box::pin(std::future::ready(()));
        }
        self.waiters.listen(key, None)
    }

    pub(crate) fn acquire_permits(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        now: u64,
    ) -> Result<Option<Grant>> {
        self.acquire_permits_as(key, owner, ttl_ms, kind, permits, None, now)
    }

    /// `fair`: `None` for a handle that is not fair, else whether the fair one waits.
    #[allow(clippy::too_many_arguments)]
    fn acquire_permits_as(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        fair: Option<bool>,
        now: u64,
    ) -> Result<Option<Grant>> {
        crate::validate::kind(kind)?;
        let permits = crate::validate::permits(kind, permits)?;
        if !self.holds_of(kind).contains_key(key) {
            self.sweep_in_passing(now);
        }
        let holds = self.holds_of(kind).entry(key.into()).or_default();
        holds.prune(now);
        if holds.position(owner).is_some() {
            return Ok(None);
        }
        if let HoldKind::Permit { limit } = kind {
            match holds.limit {
                Some(held) if held != limit && !holds.holders.is_empty() => {
                    return Err(crate::error::LockError::InvalidArgument(format!(
                        "semaphore {} is held with limit {held}; this handle asks for {limit}: every handle of a semaphore must use the same limit",
                        crate::validate::quote(key)
                    )));
                }
                _ => holds.limit = Some(limit),
            }
        }
        let until = now.saturating_add(ttl_ms);
        match fair {
            // The key's fair waiters and holders refuse it (the lock sees why).
            None if holds.fair() => return Ok(None),
            None => {}
            Some(_) if !holds.holders.is_empty() && !holds.fair => {
                return Err(crate::store::fair_on_unfair_key(key, kind))
            }
            Some(waits) => {
                if !holds.queue.stand(owner, until, permits, waits) {
                    if !waits {
                        holds.queue.leave(owner);
                    }
                    return Ok(None);
                }
                if !waits {
                    // Not kept, whatever the answer: it asks once.
                    holds.queue.leave(owner);
                }
            }
        }
        if !holds.admit(owner, until, kind, permits) {
            return Ok(None);
        }
        holds.fair = fair.is_some();
        if fair.is_some() {
            holds.queue.leave(owner);
            // The next in the queue may fit beside it.
            self.wake_permit_waiters(key, kind);
        }
        let token = self.next_fencing_token();
        // Admitted holders go last.
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(holder) = self.holds_of(kind).get_mut(key).and_then(|h| h.holders.last_mut()) {
            holder.token = token;
        }
        Ok(Some(Grant::with_fencing_token(token)))
    }

    pub(crate) fn release_permit(&mut self, key: &str, owner: &str, kind: HoldKind, now: u64) -> bool {
        let Some(holds) = self.holds_of(kind).get_mut(key) else {
            return false;
        };
        holds.prune(now);
        if holds.writer_waiting.as_ref().is_some_and(|(claimant, _)| claimant.is(owner)) {
            holds.writer_waiting = None;
        }
        holds.forget_reader(owner);
        holds.queue.leave(owner);
        let gone = holds.position(owner).map(|i| holds.holders.swap_remove(i));
        if gone.as_ref().is_some_and(|h| h.writer) {
            holds.readers_take_their_turn();
        }
        let released = gone.is_some();
        if holds.is_empty() {
            self.holds_of(kind).remove(key);
        }
        self.wake_permit_waiters(key, kind);
        released
    }

    pub(crate) fn extend_permit(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        now: u64,
    ) -> bool {
        let Some(holds) = self.holds_of(kind).get_mut(key) else {
            return false;
        };
        holds.prune(now);
        match holds.position(owner) {
            Some(i) => {
                holds.holders[i].expires_at = now.saturating_add(ttl_ms);
                true
            }
            None => false,
        }
    }

    pub(crate) fn permit_count(&mut self, key: &str, kind: HoldKind, now: u64) -> u64 {
        self.holds_of(kind).get(key).map_or(0, |holds| {
            holds.holders.iter().filter(|h| h.expires_at > now).map(|h| u64::from(h.permits)).sum()
        })
    }

    pub(crate) fn permit_remaining_time(
        &mut self,
        key: &str,
        owner: &str,
        kind: HoldKind,
        now: u64,
    ) -> Option<u64> {
        self.holds_of(kind).get(key).and_then(|holds| {
            holds.holders.iter().find(|h| h.owner.is(owner) && h.expires_at > now).map(|h| h.expires_at - now)
        })
    }

    /// The listener of the next release among `key`'s holds of `kind`.
    pub(crate) fn permit_release_signal(&mut self, key: &str, kind: HoldKind) -> BoxFuture<'static, ()> {
        self.waiters.listen(key, Some(kind))
    }
}
