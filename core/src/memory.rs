//! `MemoryStore`: locks in a map in this process, with lazy expiry and a sweep.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

#[cfg(not(target_arch = "wasm32"))]
use event_listener::Event;

use crate::error::Result;
use crate::store::{AllGrant, BoxFuture, Clock, Grant, HoldKind, LockStore, SyncLockStore};

/// Below this many entries the map is never swept in passing.
const SWEEP_MIN_ENTRIES: usize = 256;
/// With at least [`SWEEP_MIN_ENTRIES`], an insert sweeps when this long has passed
/// since the last sweep, or when the map has doubled since then.
const SWEEP_INTERVAL_MS: u64 = 1_000;

/// Locks held in this process's memory.
///
/// Expired holds are dropped when their key is next touched, and a sweep drops the
/// rest as the map grows or time passes, so memory follows the live locks. Each
/// release (or expiry found by a sweep) wakes one waiter of the key, and every grant
/// carries a fencing token from a counter that only grows.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    release_signals: bool,
}

/// The standard library's `SipHash`-1-3 with a per-map random key. Lock keys often come
/// from user input (`invoice:{id}`), and a hasher without a keyed, collision-resistant
/// design lets crafted keys pile into one bucket; `SipHash` is built to prevent that,
/// at some cost per hash over an unkeyed hasher.
type Map<V> = HashMap<Box<str>, V, RandomState>;

pub(crate) struct State {
    entries: Map<Entry>,
    /// Semaphores and read-write locks, apart from the plain locks and from each other.
    semaphores: Map<Holds>,
    rwlocks: Map<Holds>,
    waiters: Waiters,
    last_fencing_token: u64,
    last_sweep_ms: u64,
    len_after_sweep: usize,
}

/// An owner, inline when it has the length of locksmith's own tokens (no allocation on
/// the hot path), boxed otherwise (any string a caller of the plain interface passes).
enum Owner {
    Inline([u8; 32]),
    Boxed(Box<str>),
}

impl Owner {
    fn new(owner: &str) -> Self {
        match <[u8; 32]>::try_from(owner.as_bytes()) {
            Ok(bytes) => Self::Inline(bytes),
            Err(_) => Self::Boxed(owner.into()),
        }
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    fn as_str(&self) -> &str {
        match self {
            Self::Inline(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
            Self::Boxed(boxed) => boxed,
        }
    }

    fn is(&self, owner: &str) -> bool {
        match self {
            Self::Inline(bytes) => bytes == owner.as_bytes(),
            Self::Boxed(boxed) => **boxed == *owner,
        }
    }
}

struct Entry {
    owner: Owner,
    expires_at: u64,
    /// The hold's fencing token (kept for a file store's readers; not in the wasm build).
    #[cfg(not(target_arch = "wasm32"))]
    token: u64,
}

impl Entry {
    fn live(&self, now: u64) -> bool {
        self.expires_at > now
    }

    fn held_by(&self, owner: &str, now: u64) -> bool {
        self.live(now) && self.owner.is(owner)
    }
}

/// A hold as a file store's readers (the CLI) see it.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldView {
    /// The lock key.
    pub key: String,
    /// `lock`, `semaphore`, `read` or `write`.
    pub kind: &'static str,
    /// The owner token (a bearer secret: show a fingerprint of it).
    pub owner: String,
    /// Milliseconds left.
    pub remaining_ms: u64,
    /// The hold's fencing token.
    pub fencing_token: u64,
    /// A semaphore hold's permits (1 for other kinds).
    pub permits: u32,
    /// A semaphore's limit.
    pub limit: Option<u32>,
}

#[cfg(not(target_arch = "wasm32"))]
impl HoldView {
    fn new(
        key: &str,
        kind: &'static str,
        owner: &Owner,
        remaining_ms: u64,
        fencing_token: u64,
        permits: u32,
        limit: Option<u32>,
    ) -> Self {
        Self {
            key: key.to_owned(),
            kind,
            owner: owner.as_str().to_owned(),
            remaining_ms,
            fencing_token,
            permits,
            limit,
        }
    }
}

/// A read-write lock's waiting writer (its claim) or waiting reader, as the CLI sees it.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitView {
    /// The lock key.
    pub key: String,
    /// `write` (a waiting writer's claim) or `read`.
    pub kind: &'static str,
    /// The waiter's owner token.
    pub owner: String,
    /// Milliseconds until the wait's record lapses.
    pub remaining_ms: u64,
}

/// The holders of one semaphore or read-write lock.
#[derive(Default)]
struct Holds {
    holders: Vec<Holder>,
    /// A semaphore's limit, set by its first holder: every handle must agree on it.
    limit: Option<u32>,
    /// A refused writer's claim: new readers stay out until it gets in, gives up or
    /// its claim expires.
    writer_waiting: Option<(Owner, u64)>,
    /// Readers refused while a writer held or claimed the lock, until their TTL from
    /// their latest attempt (phase-fair read-write locks).
    readers_waiting: Vec<(Owner, u64)>,
    /// The readers whose turn it is: those waiting when the last writer's hold ended.
    /// They enter past a writer's claim, and no writer enters before they did (or gave
    /// up, or their turn ran out).
    reader_turn: Vec<(Owner, u64)>,
}

struct Holder {
    owner: Owner,
    expires_at: u64,
    writer: bool,
    /// How many of a semaphore's permits it holds (1 for any other kind).
    permits: u32,
    /// The hold's fencing token (0 until minted; not in the wasm build).
    #[cfg(not(target_arch = "wasm32"))]
    token: u64,
}

impl Holds {
    fn prune(&mut self, now: u64) -> bool {
        let before = self.holders.len();
        let writer_ended = self.holders.iter().any(|h| h.writer && h.expires_at <= now);
        self.holders.retain(|h| h.expires_at > now);
        if self.writer_waiting.as_ref().is_some_and(|(_, until)| *until <= now) {
            self.writer_waiting = None;
        }
        self.readers_waiting.retain(|(_, until)| *until > now);
        self.reader_turn.retain(|(_, until)| *until > now);
        if writer_ended {
            self.readers_take_their_turn();
        }
        self.holders.len() != before
    }

    /// A writer's hold ended: the readers waiting now enter before the next writer.
    fn readers_take_their_turn(&mut self) {
        self.reader_turn.append(&mut self.readers_waiting);
    }

    /// Forgets `owner` as a waiting reader (admitted, or given up).
    fn forget_reader(&mut self, owner: &str) {
        self.readers_waiting.retain(|(o, _)| !o.is(owner));
        self.reader_turn.retain(|(o, _)| !o.is(owner));
    }

    fn is_empty(&self) -> bool {
        self.holders.is_empty()
            && self.writer_waiting.is_none()
            && self.readers_waiting.is_empty()
            && self.reader_turn.is_empty()
    }

    fn position(&self, owner: &str) -> Option<usize> {
        self.holders.iter().position(|h| h.owner.is(owner))
    }

    /// The permits held: a semaphore's holders' weights (one each for other kinds).
    fn permits_held(&self) -> u64 {
        self.holders.iter().map(|h| u64::from(h.permits)).sum()
    }

    /// Admits `owner` as `kind` (with `permits` of a semaphore's) if the key allows it now.
    fn admit(&mut self, owner: &str, expires_at: u64, kind: HoldKind, permits: u32) -> bool {
        let admitted = match kind {
            HoldKind::Permit { limit } => self.permits_held() + u64::from(permits) <= u64::from(limit),
            // Past a writer's claim only in the readers' turn.
            HoldKind::Read => {
                !self.holders.iter().any(|h| h.writer)
                    && (self.writer_waiting.is_none() || self.reader_turn.iter().any(|(o, _)| o.is(owner)))
            }
            HoldKind::Write => {
                self.holders.is_empty()
                    && self.reader_turn.is_empty()
                    && self.writer_waiting.as_ref().is_none_or(|(claimant, _)| claimant.is(owner))
            }
            _ => false,
        };
        if kind == HoldKind::Read {
            if admitted {
                self.forget_reader(owner);
            } else if !self.reader_turn.iter().any(|(o, _)| o.is(owner)) {
                // Waiting (until its TTL from this attempt): it enters in the next readers' turn.
                self.readers_waiting.retain(|(o, _)| !o.is(owner));
                self.readers_waiting.push((Owner::new(owner), expires_at));
            }
        }
        if admitted {
            if kind == HoldKind::Write {
                self.writer_waiting = None;
            }
            self.holders.push(Holder {
                owner: Owner::new(owner),
                expires_at,
                writer: kind == HoldKind::Write,
                permits,
                #[cfg(not(target_arch = "wasm32"))]
                token: 0,
            });
        } else if kind == HoldKind::Write
            && self.writer_waiting.as_ref().is_none_or(|(claimant, _)| claimant.is(owner))
        {
            // Claimed, or the claim renewed by the claimant's next attempt.
            self.writer_waiting = Some((Owner::new(owner), expires_at));
        }
        admitted
    }
}

/// The waiters of each key, kept apart from the holds so a release that removes a hold
/// still reaches everyone queued behind it; a key's record goes once nobody listens.
/// `kind` is `None` for a plain lock, else the kind of a semaphore's or read-write
/// lock's holds, which wait apart from a plain lock of the same key.
///
/// The WebAssembly build keeps none: its memory store never signals releases (see
/// [`MemoryStore::without_release_signals`]), so its waiters poll, and none of this is
/// in the module.
#[derive(Default)]
struct Waiters {
    #[cfg(not(target_arch = "wasm32"))]
    map: Map<Arc<Event>>,
    /// How many releases (and forced frees) woke, or would have woken, waiters: a file
    /// store tells other processes by it.
    #[cfg(not(target_arch = "wasm32"))]
    wakes: u64,
}

#[cfg(not(target_arch = "wasm32"))]
impl Waiters {
    /// A name no lock key can have for the waiters of a semaphore or read-write lock
    /// (keys never hold control characters).
    fn name(key: &str, kind: Option<HoldKind>) -> std::borrow::Cow<'_, str> {
        match kind {
            None => key.into(),
            Some(HoldKind::Permit { .. }) => format!("\u{1}semaphore\u{1}{key}").into(),
            Some(_) => format!("\u{1}rwlock\u{1}{key}").into(),
        }
    }

    /// A release: wakes `n` waiters of the key, and counts the wake-up.
    fn wake(&mut self, key: &str, kind: Option<HoldKind>, n: usize) {
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
    fn nudge(&self, key: &str, kind: Option<HoldKind>, n: usize) {
        if let Some(event) = self.map.get(&*Self::name(key, kind)) {
            event.notify(n);
        }
    }

    /// Wakes `n` waiters of every key.
    fn wake_every_key(&mut self, n: usize) {
        for event in self.map.values() {
            event.notify(n);
        }
        self.forget_unheard();
    }

    /// Drops the records nobody listens to.
    fn forget_unheard(&mut self) {
        self.map.retain(|_, event| event.total_listeners() > 0);
    }

    /// The listener of the key's next wake-up.
    fn listen(&mut self, key: &str, kind: Option<HoldKind>) -> BoxFuture<'static, ()> {
        let name = Self::name(key, kind);
        let event = match self.map.get(&*name) {
            Some(event) => event.clone(),
            None => self.map.entry(name.into()).or_default().clone(),
        };
        Box::pin(event.listen())
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// Nobody waits here: see [`Waiters`].
#[cfg(target_arch = "wasm32")]
#[allow(clippy::unused_self)] // the same methods as the other build's
impl Waiters {
    fn wake(&mut self, _: &str, _: Option<HoldKind>, _: usize) {}
    fn nudge(&self, _: &str, _: Option<HoldKind>, _: usize) {}
    fn wake_every_key(&mut self, _: usize) {}
    fn forget_unheard(&mut self) {}
    fn listen(&mut self, _: &str, _: Option<HoldKind>) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
    fn len(&self) -> usize {
        0
    }
}

impl MemoryStore {
    /// An empty store on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { clock, state: Mutex::new(State::new()), release_signals: true }
    }

    /// Turns wake-on-release off: waiters poll at their retry delay. For runtimes where
    /// one request must not resume another's work — on workerd, a waiter woken from the
    /// releasing request would run its next steps in that request's context.
    /// The WebAssembly build's store never signals (its code for it is left out).
    #[must_use]
    pub fn without_release_signals(mut self) -> Self {
        self.release_signals = false;
        self
    }

    fn signals_releases(&self) -> bool {
        self.release_signals && cfg!(not(target_arch = "wasm32"))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock; recover the map if one ever does.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops every expired hold now. Bindings call this from an idle timer so expired
    /// keys do not wait for the next insert to go.
    pub fn sweep(&self) {
        let now = self.clock.now_ms();
        self.state().sweep(now);
    }

    /// How many keys the map holds, expired ones not yet swept included.
    #[must_use]
    pub fn entry_count(&self) -> usize {
        self.state().entries.len()
    }

    /// Drops every hold.
    pub fn clear(&self) {
        let mut state = self.state();
        state.entries.clear();
        state.semaphores.clear();
        state.rwlocks.clear();
        state.len_after_sweep = 0;
        state.waiters.wake_every_key(1);
    }

    /// How many keys have a waiter record, for tests of memory use.
    #[must_use]
    pub fn waiter_key_count(&self) -> usize {
        self.state().waiters.len()
    }
}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            entries: Map::default(),
            semaphores: Map::default(),
            rwlocks: Map::default(),
            waiters: Waiters::default(),
            last_fencing_token: 0,
            last_sweep_ms: 0,
            len_after_sweep: 0,
        }
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// How many releases have woken waiters (see `wakes`).
    pub(crate) fn wakes(&self) -> u64 {
        self.waiters.wakes
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// Tokens from now on are above `floor`.
    pub(crate) fn raise_fencing_token(&mut self, floor: u64) {
        self.last_fencing_token = self.last_fencing_token.max(floor);
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// Writes the holds live at `now` and the fencing counter (not the waiters, which
    /// are this process's) to `out`: the form a file store keeps on disk.
    pub(crate) fn encode(&self, now: u64, out: &mut Vec<u8>) {
        fn str_(out: &mut Vec<u8>, s: &str) {
            out.extend_from_slice(&u32::try_from(s.len()).unwrap_or(u32::MAX).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        fn owner(out: &mut Vec<u8>, o: &Owner) {
            match o {
                Owner::Inline(bytes) => str_(out, std::str::from_utf8(bytes).unwrap_or_default()),
                Owner::Boxed(boxed) => str_(out, boxed),
            }
        }
        fn n(out: &mut Vec<u8>, v: usize) {
            out.extend_from_slice(&u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes());
        }
        fn waiting(out: &mut Vec<u8>, list: &[(Owner, u64)], now: u64) {
            let live: Vec<_> = list.iter().filter(|(_, until)| *until > now).collect();
            n(out, live.len());
            for (o, until) in live {
                owner(out, o);
                out.extend_from_slice(&until.to_le_bytes());
            }
        }
        out.extend_from_slice(&self.last_fencing_token.to_le_bytes());
        let live: Vec<_> = self.entries.iter().filter(|(_, e)| e.live(now)).collect();
        n(out, live.len());
        for (key, entry) in live {
            str_(out, key);
            owner(out, &entry.owner);
            out.extend_from_slice(&entry.expires_at.to_le_bytes());
            out.extend_from_slice(&entry.token.to_le_bytes());
        }
        for map in [&self.semaphores, &self.rwlocks] {
            n(out, map.len());
            for (key, holds) in map {
                str_(out, key);
                out.extend_from_slice(&holds.limit.unwrap_or(0).to_le_bytes());
                n(out, holds.holders.len());
                for h in &holds.holders {
                    owner(out, &h.owner);
                    out.extend_from_slice(&h.expires_at.to_le_bytes());
                    out.push(u8::from(h.writer));
                    out.extend_from_slice(&h.permits.to_le_bytes());
                    out.extend_from_slice(&h.token.to_le_bytes());
                }
                waiting(out, holds.writer_waiting.as_slice(), now);
                waiting(out, &holds.readers_waiting, now);
                waiting(out, &holds.reader_turn, now);
            }
        }
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// Replaces the holds and the fencing counter with those `bytes` (from
    /// [`encode`](Self::encode)) hold, keeping this process's waiters. `None`, with the
    /// holds left empty, when `bytes` are not such a form.
    pub(crate) fn decode(&mut self, bytes: &[u8]) -> Option<()> {
        struct Reader<'a>(&'a [u8]);
        impl Reader<'_> {
            fn take(&mut self, n: usize) -> Option<&[u8]> {
                if self.0.len() < n {
                    return None;
                }
                let (head, rest) = self.0.split_at(n);
                self.0 = rest;
                Some(head)
            }
            fn u64(&mut self) -> Option<u64> {
                Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
            }
            fn u32(&mut self) -> Option<u32> {
                Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
            }
            fn str(&mut self) -> Option<&str> {
                let n = self.u32()? as usize;
                std::str::from_utf8(self.take(n)?).ok()
            }
            fn waiting(&mut self) -> Option<Vec<(Owner, u64)>> {
                (0..self.u32()?).map(|_| Some((Owner::new(self.str()?), self.u64()?))).collect()
            }
        }
        self.clear_holds();
        let mut r = Reader(bytes);
        let parsed = (|| {
            let last = r.u64()?;
            let mut entries = Map::default();
            for _ in 0..r.u32()? {
                let key: Box<str> = r.str()?.into();
                let owner = Owner::new(r.str()?);
                let expires_at = r.u64()?;
                entries.insert(key, Entry { owner, expires_at, token: r.u64()? });
            }
            let mut maps = [Map::default(), Map::default()];
            for map in &mut maps {
                for _ in 0..r.u32()? {
                    let key: Box<str> = r.str()?.into();
                    let limit = Some(r.u32()?).filter(|l| *l > 0);
                    let mut holders = Vec::new();
                    for _ in 0..r.u32()? {
                        let owner = Owner::new(r.str()?);
                        let expires_at = r.u64()?;
                        let writer = r.take(1)?[0] == 1;
                        let permits = r.u32()?;
                        holders.push(Holder { owner, expires_at, writer, permits, token: r.u64()? });
                    }
                    let writer_waiting = r.waiting()?.into_iter().next();
                    let readers_waiting = r.waiting()?;
                    let reader_turn = r.waiting()?;
                    map.insert(key, Holds { holders, limit, writer_waiting, readers_waiting, reader_turn });
                }
            }
            r.0.is_empty().then_some((last, entries, maps))
        })();
        let (last, entries, [semaphores, rwlocks]) = parsed?;
        self.last_fencing_token = self.last_fencing_token.max(last);
        self.entries = entries;
        self.semaphores = semaphores;
        self.rwlocks = rwlocks;
        self.len_after_sweep = self.len();
        Some(())
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// Drops every hold, keeping the fencing counter and the waiters.
    pub(crate) fn clear_holds(&mut self) {
        self.entries.clear();
        self.semaphores.clear();
        self.rwlocks.clear();
        self.len_after_sweep = 0;
    }

    /// Everything the store keeps per key.
    fn len(&self) -> usize {
        self.entries.len() + self.semaphores.len() + self.rwlocks.len() + self.waiters.len()
    }

    fn holds_of(&mut self, kind: HoldKind) -> &mut Map<Holds> {
        match kind {
            HoldKind::Permit { .. } => &mut self.semaphores,
            _ => &mut self.rwlocks,
        }
    }

    /// Wakes every waiter of a semaphore or read-write lock: a release can admit
    /// several (readers), and each checks for itself.
    fn wake_permit_waiters(&mut self, key: &str, kind: HoldKind) {
        self.waiters.wake(key, Some(kind), usize::MAX);
    }

    /// Wakes one waiter of `key`: a woken waiter that gives up passes the wake-up on.
    fn wake_one_waiter(&mut self, key: &str) {
        self.waiters.wake(key, None, 1);
    }

    fn sweep(&mut self, now: u64) {
        let waiters = &self.waiters;
        self.entries.retain(|key, entry| {
            let live = entry.live(now);
            if !live {
                waiters.nudge(key, None, 1);
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
        let token = match self.entries.get_mut(key) {
            Some(entry) if entry.live(now) => return None,
            Some(_) => {
                let token = self.next_fencing_token();
                let entry = self.entries.get_mut(key)?;
                entry.owner = Owner::new(owner);
                entry.expires_at = expires_at;
                #[cfg(not(target_arch = "wasm32"))]
                {
                    entry.token = token;
                }
                token
            }
            None => {
                self.sweep_in_passing(now);
                let token = self.next_fencing_token();
                self.entries.insert(
                    key.into(),
                    Entry {
                        owner: Owner::new(owner),
                        expires_at,
                        #[cfg(not(target_arch = "wasm32"))]
                        token,
                    },
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
                self.wake_one_waiter(key);
                true
            }
            Some((key, entry)) => {
                self.entries.insert(key, entry);
                false
            }
            None => false,
        }
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

    /// Takes every one of `keys` for `owner`, or, if any is held, none.
    pub(crate) fn acquire_all(&mut self, keys: &[String], owner: &str, ttl_ms: u64, now: u64) -> AllGrant {
        if let Some(held) = keys.iter().position(|key| self.is_locked(key, now)) {
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
        if !holds.admit(owner, now.saturating_add(ttl_ms), kind, permits) {
            return Ok(None);
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

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// Every hold live at `now`, and the read-write locks' waiting writers and readers
    /// (what `locksmith list|inspect|watch` show of a lock file).
    pub(crate) fn views(&self, now: u64) -> (Vec<HoldView>, Vec<WaitView>) {
        let mut holds = Vec::new();
        let mut waiting = Vec::new();
        for (key, e) in self.entries.iter().filter(|(_, e)| e.live(now)) {
            holds.push(HoldView::new(key, "lock", &e.owner, e.expires_at - now, e.token, 1, None));
        }
        for (rw, map) in [(false, &self.semaphores), (true, &self.rwlocks)] {
            for (key, h) in map {
                for holder in h.holders.iter().filter(|x| x.expires_at > now) {
                    let kind = match (rw, holder.writer) {
                        (false, _) => "semaphore",
                        (true, true) => "write",
                        (true, false) => "read",
                    };
                    let left = holder.expires_at - now;
                    holds.push(HoldView::new(
                        key,
                        kind,
                        &holder.owner,
                        left,
                        holder.token,
                        holder.permits,
                        h.limit,
                    ));
                }
                let waits = h
                    .writer_waiting
                    .iter()
                    .map(|w| ("write", w))
                    .chain(h.readers_waiting.iter().chain(&h.reader_turn).map(|w| ("read", w)));
                for (kind, (o, until)) in waits.filter(|(_, (_, until))| *until > now) {
                    waiting.push(WaitView {
                        key: key.to_string(),
                        kind,
                        owner: o.as_str().to_owned(),
                        remaining_ms: until - now,
                    });
                }
            }
        }
        holds.sort_by(|a, b| (&a.key, a.kind, &a.owner).cmp(&(&b.key, b.kind, &b.owner)));
        (holds, waiting)
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// Frees every hold of `key` (lock, semaphore and read-write), whoever holds it, and
    /// wakes this process's waiters; what it freed.
    pub(crate) fn force_release(&mut self, key: &str, now: u64) -> Vec<HoldView> {
        let (holds, _) = self.views(now);
        let freed: Vec<HoldView> = holds.into_iter().filter(|h| h.key == key).collect();
        if self.entries.remove(key).is_some() {
            self.wake_one_waiter(key);
        }
        for kind in [HoldKind::Permit { limit: 1 }, HoldKind::Read] {
            if let Some(holds) = self.holds_of(kind).get_mut(key) {
                if holds.holders.iter().any(|h| h.writer) {
                    holds.readers_take_their_turn();
                }
                holds.holders.clear();
                // And what waits: a dead writer's claim would keep readers out until it lapsed.
                holds.writer_waiting = None;
                holds.readers_waiting.clear();
                holds.reader_turn.clear();
                if holds.is_empty() {
                    self.holds_of(kind).remove(key);
                }
                self.wake_permit_waiters(key, kind);
            }
        }
        freed
    }

    #[cfg(not(target_arch = "wasm32"))] // the file store's
    /// Wakes every waiter of this process (another process changed the state).
    pub(crate) fn wake_all(&mut self) {
        self.waiters.wake_every_key(usize::MAX);
    }
}

impl SyncLockStore for MemoryStore {
    fn acquire_now(&self, key: &str, owner: &str, ttl_ms: u64) -> Option<Grant> {
        let now = self.clock.now_ms();
        self.state().acquire(key, owner, ttl_ms, now)
    }

    fn release_now(&self, key: &str, owner: &str) -> bool {
        let now = self.clock.now_ms();
        self.state().release(key, owner, now)
    }

    fn extend_now(&self, key: &str, owner: &str, ttl_ms: u64) -> bool {
        let now = self.clock.now_ms();
        self.state().extend(key, owner, ttl_ms, now)
    }

    fn is_locked_now(&self, key: &str) -> bool {
        let now = self.clock.now_ms();
        self.state().is_locked(key, now)
    }

    fn remaining_time_now(&self, key: &str) -> Option<u64> {
        let now = self.clock.now_ms();
        self.state().remaining_time(key, now)
    }

    fn is_held_by_now(&self, key: &str, owner: &str) -> bool {
        let now = self.clock.now_ms();
        self.state().is_held_by(key, owner, now)
    }
}

#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
impl LockStore for MemoryStore {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_now(key, owner, ttl_ms).is_some())
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        Ok(self.release_now(key, owner))
    }

    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.extend_now(key, owner, ttl_ms))
    }

    async fn is_locked(&self, key: &str) -> Result<bool> {
        Ok(self.is_locked_now(key))
    }

    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.remaining_time_now(key))
    }

    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        Ok(self.acquire_now(key, owner, ttl_ms))
    }

    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        Ok(Some(self.is_held_by_now(key, owner)))
    }

    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        if !self.signals_releases() {
            return None;
        }
        let now = self.clock.now_ms();
        Some(self.state().release_signal(key, now))
    }

    fn pass_on_release(&self, key: &str) {
        self.state().waiters.nudge(key, None, 1);
    }

    fn as_sync(&self) -> Option<&dyn SyncLockStore> {
        Some(self)
    }

    fn acquire_all<'a>(
        &'a self,
        keys: &'a [String],
        owner: &'a str,
        ttl_ms: u64,
    ) -> Option<BoxFuture<'a, Result<AllGrant>>> {
        let now = self.clock.now_ms();
        Some(Box::pin(std::future::ready(Ok(self.state().acquire_all(keys, owner, ttl_ms, now)))))
    }

    async fn acquire_permit(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
    ) -> Result<Option<Grant>> {
        self.acquire_permits(key, owner, ttl_ms, kind, 1).await
    }

    async fn acquire_permits(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
    ) -> Result<Option<Grant>> {
        let now = self.clock.now_ms();
        self.state().acquire_permits(key, owner, ttl_ms, kind, permits, now)
    }

    async fn release_permit(&self, key: &str, owner: &str, kind: HoldKind) -> Result<bool> {
        let now = self.clock.now_ms();
        Ok(self.state().release_permit(key, owner, kind, now))
    }

    async fn extend_permit(&self, key: &str, owner: &str, ttl_ms: u64, kind: HoldKind) -> Result<bool> {
        let now = self.clock.now_ms();
        Ok(self.state().extend_permit(key, owner, ttl_ms, kind, now))
    }

    async fn permit_count(&self, key: &str, kind: HoldKind) -> Result<u64> {
        let now = self.clock.now_ms();
        Ok(self.state().permit_count(key, kind, now))
    }

    async fn permit_remaining_time(&self, key: &str, owner: &str, kind: HoldKind) -> Result<Option<u64>> {
        let now = self.clock.now_ms();
        Ok(self.state().permit_remaining_time(key, owner, kind, now))
    }

    fn permit_release_signal(&self, key: &str, kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        if !self.signals_releases() {
            return None;
        }
        Some(self.state().permit_release_signal(key, kind))
    }
}
