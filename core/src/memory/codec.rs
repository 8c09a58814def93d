//! The file store's side of the state: its form on disk ([`State::encode`],
//! [`State::decode`]), the views of its holds and waiters that its readers (the CLI)
//! show, and what only a file store does (a forced release, waking every waiter).
//! Not in the WebAssembly build, which has no file store.

use super::fair::Queue;
use super::holds::{Holder, Holds};
use super::state::{Entry, Map, Owner, Proclaimed, State};
use crate::store::HoldKind;

/// The sections of a file store's payload, first to last, which its format byte names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sections {
    /// The fencing counter and the holds.
    Holds,
    /// And the values holds proclaimed (an election leader's).
    Values,
    /// And the fair queues, with which holds fair handles took.
    Fair,
}

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

/// A read-write lock's waiting writer (its claim) or waiting reader, or a fair lock's or
/// semaphore's waiter (its place in the queue, in queue order), as the CLI sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitView {
    /// The lock key.
    pub key: String,
    /// `write` (a waiting writer's claim), `read`, or `lock` / `semaphore` (a place in a
    /// fair queue).
    pub kind: &'static str,
    /// The waiter's owner token.
    pub owner: String,
    /// Milliseconds until the wait's record lapses.
    pub remaining_ms: u64,
}

/// Whether fair handles hold the semaphore `h` at `now` (its flag outlives holds that ran out).
fn fair_holders(h: &Holds, now: u64) -> bool {
    h.fair && h.holders.iter().any(|x| x.expires_at > now)
}

/// A payload read from its start.
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
    fn queue(&mut self, queue: &mut Queue) -> Option<()> {
        for _ in 0..self.u32()? {
            let owner = Owner::new(self.str()?);
            queue.push(owner, self.u64()?, self.u32()?);
        }
        Some(())
    }
}

impl Reader<'_> {
    /// The fair section: which plain locks fair handles hold, the plain locks' queues
    /// (returned), and the semaphores' fairness and queues (into `semaphores`).
    fn fair_section(&mut self, entries: &mut Map<Entry>, semaphores: &mut Map<Holds>) -> Option<Map<Holds>> {
        for _ in 0..self.u32()? {
            entries.get_mut(self.str()?)?.fair = true;
        }
        let mut fair = Map::default();
        for _ in 0..self.u32()? {
            let key: Box<str> = self.str()?.into();
            let mut holds = Holds::default();
            self.queue(&mut holds.queue)?;
            fair.insert(key, holds);
        }
        for _ in 0..self.u32()? {
            let key: Box<str> = self.str()?.into();
            let holds = semaphores.entry(key).or_default();
            holds.fair = self.take(1)?[0] == 1;
            self.queue(&mut holds.queue)?;
        }
        Some(fair)
    }
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
    /// are this process's) to `out`: the form a file store keeps on disk. What sections
    /// it wrote (the file's format then says so).
    pub(crate) fn encode(&self, now: u64, out: &mut Vec<u8>) -> Sections {
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
        // The values holds proclaimed, then the fair queues: each section only when it
        // (or the one after it) has something, so a file without reads as before.
        let proclaimed: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, e)| e.live(now))
            .filter_map(|(key, e)| e.proclaimed.as_ref().map(|p| (key, p)))
            .collect();
        let fair = self.has_fairness(now);
        if proclaimed.is_empty() && !fair {
            return Sections::Holds;
        }
        n(out, proclaimed.len());
        for (key, p) in proclaimed {
            str_(out, key);
            out.extend_from_slice(&p.seq.to_le_bytes());
            str_(out, &p.value);
        }
        if !fair {
            return Sections::Values;
        }
        // The plain locks held by fair handles, then the fair queues of plain locks, then
        // the semaphores' (whether their holders came in fairly, and their queue).
        let fair_held: Vec<_> = self.entries.iter().filter(|(_, e)| e.live(now) && e.fair).collect();
        n(out, fair_held.len());
        for (key, _) in fair_held {
            str_(out, key);
        }
        let queue = |out: &mut Vec<u8>, q: &Queue| {
            let live: Vec<_> = q.places().filter(|(_, until, _)| *until > now).collect();
            n(out, live.len());
            for (o, until, permits) in live {
                owner(out, o);
                out.extend_from_slice(&until.to_le_bytes());
                out.extend_from_slice(&permits.to_le_bytes());
            }
        };
        let queued = |q: &Queue| q.places().any(|(_, until, _)| until > now);
        let plain: Vec<_> = self.fair.iter().filter(|(_, h)| queued(&h.queue)).collect();
        n(out, plain.len());
        for (key, holds) in plain {
            str_(out, key);
            queue(out, &holds.queue);
        }
        let semaphores: Vec<_> =
            self.semaphores.iter().filter(|(_, h)| fair_holders(h, now) || queued(&h.queue)).collect();
        n(out, semaphores.len());
        for (key, holds) in semaphores {
            str_(out, key);
            out.push(u8::from(holds.fair));
            queue(out, &holds.queue);
        }
        Sections::Fair
    }

    /// Whether anything fair is live at `now`: a hold of a fair handle, or a place in a queue.
    fn has_fairness(&self, now: u64) -> bool {
        let queued = |q: &Queue| q.places().any(|(_, until, _)| until > now);
        self.entries.values().any(|e| e.fair && e.live(now))
            || self.fair.values().any(|h| queued(&h.queue))
            || self.semaphores.values().any(|h| fair_holders(h, now) || queued(&h.queue))
    }

    /// Replaces the holds and the fencing counter with those `bytes` (from
    /// [`encode`](Self::encode)) hold, keeping this process's waiters. `None`, with the
    /// holds left empty, when `bytes` are not such a form.
    pub(crate) fn decode(&mut self, bytes: &[u8], sections: Sections) -> Option<()> {
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
            // (A format 2 file written by an earlier release may end without its values.)
            if sections != Sections::Holds && !r.0.is_empty() {
                for _ in 0..r.u32()? {
                    let key: Box<str> = r.str()?.into();
                    let seq = r.u64()?;
                    let value: Box<str> = r.str()?.into();
                    entries.get_mut(&*key)?.proclaimed = Some(Box::new(Proclaimed { seq, value }));
                }
            }
            let fair = if sections == Sections::Fair {
                let [semaphores, _] = &mut maps;
                r.fair_section(&mut entries, semaphores)?
            } else {
                Map::default()
            };
            r.0.is_empty().then_some((last, entries, maps, fair))
        })();
        let (last, entries, [semaphores, rwlocks], fair) = parsed?;
        self.last_fencing_token = self.last_fencing_token.max(last);
        self.entries = entries;
        self.semaphores = semaphores;
        self.rwlocks = rwlocks;
        self.fair = fair;
        self.len_after_sweep = self.len();
        Some(())
    }

    /// Drops every hold and place in a queue, keeping the fencing counter and the waiters.
    pub(crate) fn clear_holds(&mut self) {
        self.entries.clear();
        self.semaphores.clear();
        self.rwlocks.clear();
        self.fair.clear();
        self.len_after_sweep = 0;
    }

    /// Every hold live at `now`, the read-write locks' waiting writers and readers, and
    /// the places in fair queues (what `locksmith list|inspect|watch` show of a lock file).
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
        // Fair queues, each in its order: first in line first.
        let queues = self.fair.iter().map(|(key, h)| ("lock", key, &h.queue));
        for (kind, key, queue) in
            queues.chain(self.semaphores.iter().map(|(key, h)| ("semaphore", key, &h.queue)))
        {
            for (o, until, _) in queue.places().filter(|(_, until, _)| *until > now) {
                waiting.push(WaitView {
                    key: key.to_string(),
                    kind,
                    owner: o.as_str().to_owned(),
                    remaining_ms: until - now,
                });
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
