//! The holders of one semaphore or read-write lock, and who waits for a read-write lock:
//! weighted permits, and phase-fair turns of readers and writers.

use super::fair::Queue;
use super::state::Owner;
use crate::store::HoldKind;

/// The holders of one semaphore or read-write lock.
#[derive(Default)]
pub(super) struct Holds {
    pub(super) holders: Vec<Holder>,
    /// A semaphore's limit, set by its first holder: every handle must agree on it.
    pub(super) limit: Option<u32>,
    /// A refused writer's claim: new readers stay out until it gets in, gives up or
    /// its claim expires.
    pub(super) writer_waiting: Option<(Owner, u64)>,
    /// Readers refused while a writer held or claimed the lock, until their TTL from
    /// their latest attempt (phase-fair read-write locks).
    pub(super) readers_waiting: Vec<(Owner, u64)>,
    /// The readers whose turn it is: those waiting when the last writer's hold ended.
    /// They enter past a writer's claim, and no writer enters before they did (or gave
    /// up, or their turn ran out).
    pub(super) reader_turn: Vec<(Owner, u64)>,
    /// A fair semaphore's queue (see [`Holds::fair`]).
    pub(super) queue: Queue,
    /// Whether the holders were admitted fairly.
    pub(super) fair: bool,
}

pub(super) struct Holder {
    pub(super) owner: Owner,
    pub(super) expires_at: u64,
    pub(super) writer: bool,
    /// How many of a semaphore's permits it holds (1 for any other kind).
    pub(super) permits: u32,
    /// The hold's fencing token (0 until minted; not in the wasm build).
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) token: u64,
}

impl Holds {
    pub(super) fn prune(&mut self, now: u64) -> bool {
        let before = self.holders.len();
        let writer_ended = self.holders.iter().any(|h| h.writer && h.expires_at <= now);
        self.holders.retain(|h| h.expires_at > now);
        if self.writer_waiting.as_ref().is_some_and(|(_, until)| *until <= now) {
            self.writer_waiting = None;
        }
        self.readers_waiting.retain(|(_, until)| *until > now);
        self.reader_turn.retain(|(_, until)| *until > now);
        self.queue.prune(now);
        if writer_ended {
            self.readers_take_their_turn();
        }
        self.holders.len() != before
    }

    /// A writer's hold ended: the readers waiting now enter before the next writer.
    pub(super) fn readers_take_their_turn(&mut self) {
        self.reader_turn.append(&mut self.readers_waiting);
    }

    /// Forgets `owner` as a waiting reader (admitted, or given up).
    pub(super) fn forget_reader(&mut self, owner: &str) {
        self.readers_waiting.retain(|(o, _)| !o.is(owner));
        self.reader_turn.retain(|(o, _)| !o.is(owner));
    }

    pub(super) fn is_empty(&self) -> bool {
        self.holders.is_empty()
            && self.writer_waiting.is_none()
            && self.readers_waiting.is_empty()
            && self.reader_turn.is_empty()
            && self.queue.is_empty()
    }

    /// Whether the key is fair now: fair waiters queue for it, or fair handles hold it.
    pub(super) fn fair(&self) -> bool {
        !self.queue.is_empty() || (self.fair && !self.holders.is_empty())
    }

    pub(super) fn position(&self, owner: &str) -> Option<usize> {
        self.holders.iter().position(|h| h.owner.is(owner))
    }

    /// The permits held: a semaphore's holders' weights (one each for other kinds).
    pub(super) fn permits_held(&self) -> u64 {
        self.holders.iter().map(|h| u64::from(h.permits)).sum()
    }

    /// Admits `owner` as `kind` (with `permits` of a semaphore's) if the key allows it now.
    pub(super) fn admit(&mut self, owner: &str, expires_at: u64, kind: HoldKind, permits: u32) -> bool {
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
