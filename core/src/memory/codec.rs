//! The file store's side of the state: its form on disk ([`State::encode`],
//! [`State::decode`]), the views of its holds and waiters that its readers (the CLI)
//! show, and what only a file store does (a forced release, waking every waiter).
//! Not in the WebAssembly build, which has no file store.

use super::holds::{Holder, Holds};
use super::state::{Entry, Map, Owner, Proclaimed, State};
use crate::store::HoldKind;

/// A hold as a file store's readers (the CLI) see it.
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
    /// The value a plain lock's holder proclaimed (an election's leader), if any.
    pub value: Option<String>,
}

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
            value: None,
        }
    }
}

/// A read-write lock's waiting writer (its claim) or waiting reader, as the CLI sees it.
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

impl State {
    /// How many releases have woken waiters (see `wakes`).
    pub(crate) fn wakes(&self) -> u64 {
        self.waiters.wakes
    }

    /// Tokens from now on are above `floor`.
    pub(crate) fn raise_fencing_token(&mut self, floor: u64) {
        self.last_fencing_token = self.last_fencing_token.max(floor);
    }

    /// Writes the holds live at `now` and the fencing counter (not the waiters, which
    /// are this process's) to `out`: the form a file store keeps on disk.
    /// Whether it wrote the values section (the file's format then says so).
    pub(crate) fn encode(&self, now: u64, out: &mut Vec<u8>) -> bool {
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
        // The values holds proclaimed, after everything else and only when there is one,
        // so a file without any reads as before.
        let proclaimed: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, e)| e.live(now))
            .filter_map(|(key, e)| e.proclaimed.as_ref().map(|p| (key, p)))
            .collect();
        if proclaimed.is_empty() {
            return false;
        }
        n(out, proclaimed.len());
        for (key, p) in proclaimed {
            str_(out, key);
            out.extend_from_slice(&p.seq.to_le_bytes());
            str_(out, &p.value);
        }
        true
    }

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
                entries
                    .insert(key, Entry { owner, expires_at, token: r.u64()?, proclaimed: None, fair: false });
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
                    map.insert(
                        key,
                        Holds {
                            holders,
                            limit,
                            writer_waiting,
                            readers_waiting,
                            reader_turn,
                            ..Holds::default()
                        },
                    );
                }
            }
            if !r.0.is_empty() {
                for _ in 0..r.u32()? {
                    let key: Box<str> = r.str()?.into();
                    let seq = r.u64()?;
                    let value: Box<str> = r.str()?.into();
                    entries.get_mut(&*key)?.proclaimed = Some(Box::new(Proclaimed { seq, value }));
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

    /// Drops every hold, keeping the fencing counter and the waiters.
    pub(crate) fn clear_holds(&mut self) {
        self.entries.clear();
        self.semaphores.clear();
        self.rwlocks.clear();
        self.len_after_sweep = 0;
    }

    /// Every hold live at `now`, and the read-write locks' waiting writers and readers
    /// (what `locksmith list|inspect|watch` show of a lock file).
    pub(crate) fn views(&self, now: u64) -> (Vec<HoldView>, Vec<WaitView>) {
        let mut holds = Vec::new();
        let mut waiting = Vec::new();
        for (key, e) in self.entries.iter().filter(|(_, e)| e.live(now)) {
            let mut view = HoldView::new(key, "lock", &e.owner, e.expires_at - now, e.token, 1, None);
            view.value = e.proclaimed.as_ref().map(|p| p.value.to_string());
            holds.push(view);
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

    /// Wakes every waiter of this process (another process changed the state).
    pub(crate) fn wake_all(&mut self) {
        self.waiters.wake_every_key(usize::MAX);
    }
}
