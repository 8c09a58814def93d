//! The sans-I/O Redis engine: commands in, bytes out; bytes in, completions out.
//!
//! The engine owns no socket, no thread and no clock. Its host (Node's `net`/`tls` in
//! the addon, a runtime's socket in the WebAssembly build, a plain `TcpStream` in
//! tests) does the I/O:
//!
//! 1. each operation ([`Engine::acquire`], [`Engine::release`], ...) encodes its command
//!    into the output buffer and returns a request id;
//! 2. once per turn of its event loop the host writes [`Engine::take_output`] in one go;
//! 3. every chunk that arrives goes to [`Engine::feed`], which parses each complete
//!    reply (with the `redis-protocol` crate), matches replies to requests in order, and
//!    hands back one [`Completion`] per finished request;
//! 4. now and then (a coarse timer) the host calls [`Engine::expire`]: a request past
//!    its deadline fails with `STORE_UNAVAILABLE`, and its reply, if one comes, is read
//!    and dropped. The connection stays: what was sent on it may still run (a frozen
//!    server resumes), and a lock's clean-up sent after it on the same connection then
//!    runs after it. Only a reply overdue by [`RESET_AFTER_MS`] more resets the
//!    connection: every pending request fails and the host reconnects.
//!
//! Scripts are called with `EVALSHA`; a `NOSCRIPT` reply (after `SCRIPT FLUSH` or a
//! restart) re-sends that one call as `EVAL`, which also caches the script again. Key
//! layout and scripts are the same as those of the stores over users' own Redis clients
//! (`js/stores/redis-client-store.mjs` loads the same files), so a lock taken through one is
//! the other's to release. Semaphores and read-write locks keep a sorted set of holders
//! per key, see [`crate::permit_key`] and the scripts' headers.

pub mod local;
pub mod reply;
mod resp;
mod scripts;
mod store;
pub mod subscriber;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use locksmith_core::{HoldKind, LockError, Result};
use redis_protocol::resp2::types::RangeFrame;

pub use scripts::{
    Script, ACQUIRE, ACQUIRE_ALL, EXTEND, FAIR_ACQUIRE, FAIR_RELEASE, FAIR_SEMAPHORE_ACQUIRE,
    OWNER_REMAINING, PERMIT_COUNT, PERMIT_EXTEND, PERMIT_REMAINING, RELEASE, RWLOCK_ACQUIRE, RWLOCK_RELEASE,
    SEMAPHORE_ACQUIRE, SEMAPHORE_RELEASE,
};
pub use store::{EngineStore, WANTS_SUBSCRIBER, WANTS_WRITE};
pub use subscriber::Subscriber;

use crate::{check_redis_version, FENCE_GRACE_MS, TRANSIENT_CODES};

/// The prefix put before every key unless the store is given another.
pub const DEFAULT_KEY_PREFIX: &str = "locksmith:";

/// How long past its deadline a reply may still come before the connection counts as
/// dead (besides the socket's own close, which the host reports at once).
pub const RESET_AFTER_MS: u64 = 10_000;

/// A request's id, unique among the engine's pending requests.
pub type RequestId = u32;

/// What a finished request resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `acquire`: the fencing token when taken, `None` when someone holds the key.
    Acquired(Option<u64>),
    /// `acquire` without fencing (see [`EngineOptions::fencing`]): taken or not, no token.
    Taken(bool),
    /// `acquire_all`: each key's fencing token when every key was taken, or the index of
    /// a key that is held (then none was taken).
    AcquiredAll(std::result::Result<Vec<u64>, usize>),
    /// `release`, `extend`, `is_locked`, `is_held_by`.
    Flag(bool),
    /// `remaining_time`, `permit_remaining_time`: milliseconds left, `None` when nothing
    /// is held.
    Millis(Option<u64>),
    /// `permit_count`: how many holds are live.
    Count(u64),
    /// The handshake, or another command whose answer is only "done".
    Done,
}

/// One finished request.
#[derive(Debug)]
pub struct Completion {
    /// The id its operation returned.
    pub id: RequestId,
    /// Its outcome.
    pub result: Result<Value>,
}

/// What the engine needs to know about the server and the user's settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Put before every key (`prefix{key}`).
    pub key_prefix: String,
    /// How long a request may wait for its reply, in milliseconds.
    pub command_timeout_ms: u64,
    /// Whether a lock's acquire mints a fencing token (`acquire.lua`). Without, it is one
    /// plain `SET key owner NX PX ttl`: no script, no `TIME`, no counter, and the hold
    /// has no token ([`Value::Taken`]). Nothing else changes: the key and its value are
    /// the same, so fenced and unfenced acquires on one key exclude each other, and the
    /// fenced ones' tokens still grow (the counter is theirs alone).
    pub fencing: bool,
}

/// How to log in and which database to use, from the URL.
#[derive(Debug, Clone, Default)]
pub struct Handshake {
    /// `AUTH [user] password`.
    pub auth: Option<(Option<String>, String)>,
    /// `SELECT db` when not 0.
    pub db: u32,
}

/// The command a request sent, kept to read its reply and to re-send a script as `EVAL`.
#[derive(Debug)]
enum Op {
    Acquire {
        key: String,
        owner: String,
        ttl_ms: u64,
    },
    /// Several locks at once, all or none (their keys in one hash slot).
    AcquireAll {
        keys: Vec<String>,
        owner: String,
        ttl_ms: u64,
    },
    /// `fair`: a fair lock's key (its release also gives up a waiter's place).
    Release {
        key: String,
        owner: String,
        fair: bool,
    },
    /// `fair`: a fair lock's key (its fair mark lives as long as the hold).
    Extend {
        key: String,
        owner: String,
        ttl_ms: u64,
        fair: bool,
    },
    /// A fair attempt on a lock (`kind` exclusive) or a semaphore (`Permit`, of `permits`):
    /// `waits` keeps the owner's place in the queue.
    FairAcquire {
        key: String,
        owner: String,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        waits: bool,
    },
    IsLocked {
        key: String,
    },
    RemainingTime {
        key: String,
    },
    IsHeldBy {
        key: String,
        owner: String,
    },
    /// How long `owner`'s own lock has left (a hold's due check).
    OwnerRemainingTime {
        key: String,
        owner: String,
    },
    /// The permit operations: `kind` is a semaphore's (`Permit`), `Read` or `Write`.
    PermitAcquire {
        key: String,
        owner: String,
        ttl_ms: u64,
        kind: HoldKind,
        /// How many of a semaphore's permits (1 for the other kinds).
        permits: u32,
    },
    PermitRelease {
        key: String,
        owner: String,
        kind: HoldKind,
    },
    PermitExtend {
        key: String,
        owner: String,
        ttl_ms: u64,
        kind: HoldKind,
    },
    PermitCount {
        key: String,
        kind: HoldKind,
    },
    PermitRemainingTime {
        key: String,
        owner: String,
        kind: HoldKind,
    },
    /// A step of the handshake: `last` finishes it; `info` is the version check.
    Handshake {
        last: bool,
        info: bool,
    },
    /// `ASKING` before a request sent on after an `ASK` redirect: its reply is dropped.
    Asking,
    /// `WAIT n timeout` after a write that grants or extends a hold (see
    /// [`Engine::set_min_replicas`]): its request completes when this answers.
    Wait,
}

impl Op {
    /// Whether it grants or extends a hold (what `WAIT` follows with `minReplicas`).
    fn is_hold_write(&self) -> bool {
        matches!(
            self,
            Op::Acquire { .. }
                | Op::FairAcquire { .. }
                | Op::AcquireAll { .. }
                | Op::Extend { .. }
                | Op::PermitAcquire { .. }
                | Op::PermitExtend { .. }
        )
    }

    /// The lock key's name the operation is about (`None` for the connection's own steps).
    fn key(&self) -> Option<&str> {
        match self {
            Op::Acquire { key, .. }
            | Op::FairAcquire { key, .. }
            | Op::Release { key, .. }
            | Op::Extend { key, .. }
            | Op::IsLocked { key }
            | Op::RemainingTime { key }
            | Op::IsHeldBy { key, .. }
            | Op::OwnerRemainingTime { key, .. }
            | Op::PermitAcquire { key, .. }
            | Op::PermitRelease { key, .. }
            | Op::PermitExtend { key, .. }
            | Op::PermitCount { key, .. }
            | Op::PermitRemainingTime { key, .. } => Some(key),
            Op::AcquireAll { keys, .. } => keys.first().map(String::as_str),
            Op::Handshake { .. } | Op::Asking | Op::Wait => None,
        }
    }
}

/// Where a Redis Cluster reply sent a request instead of answering it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redirection {
    /// `MOVED slot host:port`: the slot lives there now.
    Moved { slot: u16, address: String },
    /// `ASK slot host:port`: this once, there, after `ASKING` (a slot being migrated).
    Ask { address: String },
    /// `TRYAGAIN` (a multi-key request while its slot is half migrated) or
    /// `CLUSTERDOWN`: the request did not run; send it again shortly.
    Retry,
}

/// A request the server did not run, to be sent on (see [`Engine::follow_redirects`]).
#[derive(Debug)]
pub(crate) struct Redirect {
    pending: Pending,
    pub(crate) to: Redirection,
}

impl Redirect {
    /// The lock key's name of the request.
    pub(crate) fn key(&self) -> Option<&str> {
        self.pending.op.key()
    }

    /// Its deadline, from when it was first sent.
    pub(crate) fn deadline_ms(&self) -> u64 {
        self.pending.deadline_ms
    }

    /// The request's id.
    pub(crate) fn id(&self) -> RequestId {
        self.pending.id
    }
}

/// A read-write lock's companion keys beside its holders (see `rwlock_acquire.lua`): the
/// writer, a waiting writer's claim, the waiting readers and the readers' turn.
fn rw_companions(holders: &str) -> [String; 4] {
    ["writer", "claim", "readers", "turn"].map(|suffix| format!("{holders}:{suffix}"))
}

/// Whether `key` is an election's (core's `Lock::for_election`): its extend and release
/// also send `<lock key>:value`, the leader's value (`proclaim.lua`), so that it expires
/// and goes with the hold. A plain lock's send what they always did.
fn is_election(key: &str) -> bool {
    key.starts_with(locksmith_core::validate::ELECTION_KEY_PREFIX)
}

/// `MOVED 3999 127.0.0.1:6381`, `ASK 3999 127.0.0.1:6381`, `TRYAGAIN ...`, `CLUSTERDOWN ...`.
fn redirection(error: &str) -> Option<Redirection> {
    let mut parts = error.split(' ');
    let kind = parts.next()?;
    if kind == "TRYAGAIN" || kind == "CLUSTERDOWN" {
        return Some(Redirection::Retry);
    }
    let slot = parts.next()?.parse().ok()?;
    let address = parts.next()?.to_owned();
    match kind {
        "MOVED" => Some(Redirection::Moved { slot, address }),
        "ASK" => Some(Redirection::Ask { address }),
        _ => None,
    }
}

#[derive(Debug)]
struct Pending {
    id: RequestId,
    op: Op,
    deadline_ms: u64,
    /// Failed at its deadline: its reply is read and dropped.
    abandoned: bool,
}

impl Pending {
    /// Its id, deadline and state with another op (`ASKING` in front of it).
    fn clone_head(&self) -> Self {
        Self { id: self.id, op: Op::Asking, deadline_ms: self.deadline_ms, abandoned: self.abandoned }
    }
}

/// The engine. See the [module documentation](self).
#[derive(Debug)]
pub struct Engine {
    options: EngineOptions,
    output: Vec<u8>,
    input: Vec<u8>,
    pending: VecDeque<Pending>,
    next_id: RequestId,
    /// A handshake step failed: the rest of its steps finish silently.
    handshake_failed: bool,
    /// A reply said `READONLY`: the server is a replica now.
    replica_seen: bool,
    /// Cluster: `MOVED`, `ASK`, `TRYAGAIN` and `CLUSTERDOWN` replies put their request
    /// in `redirects` instead of failing it, and release scripts publish with
    /// `SPUBLISH` (sharded pub/sub).
    cluster: bool,
    redirects: Vec<Redirect>,
    /// Request ids shared with the other engines of one store (one per cluster node).
    ids: Option<Arc<AtomicU32>>,
    /// `WAIT` for this many replicas, this long, after each write that grants or
    /// extends a hold.
    min_replicas: Option<(u32, u64)>,
    /// The outcome of such a write, until its `WAIT` answers.
    awaiting: Option<(RequestId, Result<Value>)>,
}

impl Engine {
    /// An engine with nothing pending.
    #[must_use]
    pub fn new(options: EngineOptions) -> Self {
        Self {
            options,
            output: Vec::with_capacity(4096),
            input: Vec::new(),
            pending: VecDeque::new(),
            next_id: 1,
            handshake_failed: false,
            replica_seen: false,
            cluster: false,
            redirects: Vec::new(),
            ids: None,
            min_replicas: None,
            awaiting: None,
        }
    }

    /// The options it was made with.
    #[must_use]
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The Redis key of a lock: `<prefix>{<key>}`.
    #[must_use]
    pub fn lock_key(&self, key: &str) -> String {
        crate::lock_key(&self.options.key_prefix, key)
    }

    fn next_id(&mut self) -> RequestId {
        if let Some(ids) = &self.ids {
            // Zero is never handed out, as below.
            let id = ids.fetch_add(1, Ordering::Relaxed);
            return if id == 0 { ids.fetch_add(1, Ordering::Relaxed) } else { id };
        }
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        id
    }

    fn push(&mut self, op: Op, now_ms: u64) -> RequestId {
        let id = self.next_id();
        self.send(Pending {
            id,
            op,
            deadline_ms: now_ms + self.options.command_timeout_ms,
            abandoned: false,
        });
        id
    }

    /// Encodes a request and queues it, with a `WAIT` after it when it grants or
    /// extends a hold and [`set_min_replicas`](Self::set_min_replicas) asks for one.
    fn send(&mut self, pending: Pending) {
        self.encode(&pending.op, false);
        let wait = self.min_replicas.is_some() && pending.op.is_hold_write();
        let (id, deadline_ms) = (pending.id, pending.deadline_ms);
        self.pending.push_back(pending);
        if wait {
            self.encode(&Op::Wait, false);
            self.pending.push_back(Pending { id, op: Op::Wait, deadline_ms, abandoned: false });
        }
    }

    /// After each write that grants or extends a hold (acquire and extend, of locks and
    /// of permits), send `WAIT replicas timeout_ms` on the same connection: the write's
    /// outcome is held back until it answers, and a grant or extension that fewer than
    /// `replicas` replicas acknowledged fails with `STORE_UNAVAILABLE` (its caller then
    /// frees what the attempt took). `WAIT` holds up the connection's later replies
    /// until it answers. `replicas` 0 turns it off.
    pub fn set_min_replicas(&mut self, replicas: u32, timeout_ms: u64) {
        self.min_replicas = (replicas > 0).then_some((replicas, timeout_ms));
    }

    #[allow(clippy::too_many_lines)] // one arm per operation: every command's encoding in one place
    fn encode(&mut self, op: &Op, eval: bool) {
        let prefix = &self.options.key_prefix;
        // The release scripts' optional last argument: publish on the key's shard.
        let publish: &[&[u8]] = if self.cluster { &[b"SPUBLISH"] } else { &[] };
        let out = &mut self.output;
        match op {
            Op::Acquire { key, owner, ttl_ms } if !self.options.fencing => {
                let lock_key = crate::lock_key(prefix, key);
                let ttl = ttl_ms.to_string();
                resp::command(
                    out,
                    &[b"SET", lock_key.as_bytes(), owner.as_bytes(), b"NX", b"PX", ttl.as_bytes()],
                );
            }
            Op::Acquire { key, owner, ttl_ms } => {
                let ttl = ttl_ms.to_string();
                let fence_ttl = ttl_ms.saturating_add(FENCE_GRACE_MS).to_string();
                // With the fair mark (acquire.lua's KEYS[3]): refused while fair handles
                // hold the key or wait for it.
                let lock_key = crate::lock_key(prefix, key);
                let fence_key = format!("{lock_key}:fence");
                let mark_key = format!("{lock_key}:fair");
                resp::script_on(
                    out,
                    &ACQUIRE,
                    eval,
                    &[&lock_key, &fence_key, &mark_key],
                    &[owner.as_bytes(), ttl.as_bytes(), fence_ttl.as_bytes()],
                );
            }
            Op::FairAcquire { key, owner, ttl_ms, kind: HoldKind::Permit { limit }, permits, waits } => {
                let holders = crate::permit_key(prefix, key, HoldKind::Permit { limit: *limit });
                let [queue, places, mark] = crate::fair_companions(&holders);
                let (limit_key, fence, weights) =
                    (format!("{holders}:limit"), format!("{holders}:fence"), format!("{holders}:weights"));
                let (ttl, limit, grace, permits) =
                    (ttl_ms.to_string(), limit.to_string(), FENCE_GRACE_MS.to_string(), permits.to_string());
                let waits: &[u8] = if *waits { b"1" } else { b"0" };
                let args: Vec<&[u8]> = [
                    owner.as_bytes(),
                    ttl.as_bytes(),
                    limit.as_bytes(),
                    grace.as_bytes(),
                    permits.as_bytes(),
                    waits,
                ]
                .into_iter()
                .chain(publish.iter().copied())
                .collect();
                resp::script_on(
                    out,
                    &FAIR_SEMAPHORE_ACQUIRE,
                    eval,
                    &[&holders, &limit_key, &fence, &weights, &queue, &places, &mark],
                    &args,
                );
            }
            Op::FairAcquire { key, owner, ttl_ms, waits, .. } => {
                let ttl = ttl_ms.to_string();
                let fence_ttl = ttl_ms.saturating_add(FENCE_GRACE_MS).to_string();
                let keys = crate::fair_keys(prefix, key);
                let [lock_key, queue, places, mark] = &keys;
                let fence_key = format!("{lock_key}:fence");
                let waits: &[u8] = if *waits { b"1" } else { b"0" };
                resp::script_on(
                    out,
                    &FAIR_ACQUIRE,
                    eval,
                    &[lock_key, &fence_key, queue, places, mark],
                    &[owner.as_bytes(), ttl.as_bytes(), fence_ttl.as_bytes(), waits],
                );
            }
            Op::AcquireAll { keys, owner, ttl_ms } => {
                let ttl = ttl_ms.to_string();
                let fence_ttl = ttl_ms.saturating_add(FENCE_GRACE_MS).to_string();
                // Each lock key, then its fencing counter and its fair mark.
                let mut names = Vec::with_capacity(3 * keys.len());
                for key in keys {
                    let lock_key = crate::lock_key(prefix, key);
                    let fence_key = format!("{lock_key}:fence");
                    let mark_key = format!("{lock_key}:fair");
                    names.extend([lock_key, fence_key, mark_key]);
                }
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                resp::script_on(
                    out,
                    &ACQUIRE_ALL,
                    eval,
                    &names,
                    &[owner.as_bytes(), ttl.as_bytes(), fence_ttl.as_bytes()],
                );
            }
            Op::Release { key, owner, fair } => {
                let args: Vec<&[u8]> =
                    [owner.as_bytes()].into_iter().chain(publish.iter().copied()).collect();
                if *fair {
                    let keys = crate::fair_keys(prefix, key);
                    let [lock_key, queue, places, mark] = &keys;
                    resp::script_on(out, &FAIR_RELEASE, eval, &[lock_key, queue, places, mark], &args);
                } else if is_election(key) {
                    // An election's hold takes its leader's value along (release.lua's KEYS[2]).
                    let lock_key = crate::lock_key(prefix, key);
                    let value_key = format!("{lock_key}:value");
                    resp::script_on(out, &RELEASE, eval, &[&lock_key, &value_key], &args);
                } else {
                    resp::script(out, &RELEASE, eval, prefix, key, false, &args);
                }
            }
            Op::Extend { key, owner, ttl_ms, fair } => {
                let ttl = ttl_ms.to_string();
                let fence_ttl = ttl_ms.saturating_add(FENCE_GRACE_MS).to_string();
                let args = [owner.as_bytes(), ttl.as_bytes(), fence_ttl.as_bytes()];
                if *fair {
                    // A fair hold keeps its fair mark at least as long (extend.lua's KEYS[3], 'fair').
                    let lock_key = crate::lock_key(prefix, key);
                    let fence_key = format!("{lock_key}:fence");
                    let mark = format!("{lock_key}:fair");
                    let args = [args[0], args[1], args[2], b"fair".as_slice()];
                    resp::script_on(out, &EXTEND, eval, &[&lock_key, &fence_key, &mark], &args);
                } else if is_election(key) {
                    // An election's hold keeps its leader's value as long as its fencing
                    // counter (extend.lua's KEYS[3]).
                    let lock_key = crate::lock_key(prefix, key);
                    let fence_key = format!("{lock_key}:fence");
                    let value_key = format!("{lock_key}:value");
                    resp::script_on(out, &EXTEND, eval, &[&lock_key, &fence_key, &value_key], &args);
                } else {
                    resp::script(out, &EXTEND, eval, prefix, key, true, &args);
                }
            }
            Op::PermitAcquire { key, owner, ttl_ms, kind, permits } => {
                let holders = crate::permit_key(prefix, key, *kind);
                let ttl = ttl_ms.to_string();
                let grace = FENCE_GRACE_MS.to_string();
                let fence = format!("{holders}:fence");
                if let HoldKind::Permit { limit } = kind {
                    let limit_key = format!("{holders}:limit");
                    let weights = format!("{holders}:weights");
                    let limit = limit.to_string();
                    let permits = permits.to_string();
                    let args = [
                        owner.as_bytes(),
                        ttl.as_bytes(),
                        limit.as_bytes(),
                        grace.as_bytes(),
                        permits.as_bytes(),
                    ];
                    // With the fair mark (semaphore_acquire.lua's KEYS[5]): refused while
                    // fair handles hold the semaphore or wait for it.
                    let mark = format!("{holders}:fair");
                    resp::script_on(
                        out,
                        &SEMAPHORE_ACQUIRE,
                        eval,
                        &[&holders, &limit_key, &fence, &weights, &mark],
                        &args,
                    );
                } else {
                    let [w, c, r, t] = rw_companions(&holders);
                    let mode: &[u8] = if *kind == HoldKind::Read { b"read" } else { b"write" };
                    let args = [owner.as_bytes(), ttl.as_bytes(), mode, grace.as_bytes()];
                    resp::script_on(
                        out,
                        &RWLOCK_ACQUIRE,
                        eval,
                        &[holders.as_str(), &w, &c, &fence, &r, &t],
                        &args,
                    );
                }
            }
            Op::PermitRelease { key, owner, kind } => {
                let holders = crate::permit_key(prefix, key, *kind);
                let args: Vec<&[u8]> =
                    [owner.as_bytes()].into_iter().chain(publish.iter().copied()).collect();
                if let HoldKind::Permit { .. } = kind {
                    let limit_key = format!("{holders}:limit");
                    let weights = format!("{holders}:weights");
                    // Fair or not, a release gives up the owner's place in the fair queue
                    // (semaphore_release.lua's KEYS[4..6]).
                    let [queue, places, mark] = crate::fair_companions(&holders);
                    resp::script_on(
                        out,
                        &SEMAPHORE_RELEASE,
                        eval,
                        &[&holders, &limit_key, &weights, &queue, &places, &mark],
                        &args,
                    );
                } else {
                    let [w, c, r, t] = rw_companions(&holders);
                    resp::script_on(out, &RWLOCK_RELEASE, eval, &[holders.as_str(), &w, &c, &r, &t], &args);
                }
            }
            Op::PermitExtend { key, owner, ttl_ms, kind } => {
                let holders = crate::permit_key(prefix, key, *kind);
                let companion = format!(
                    "{holders}:{}",
                    if matches!(kind, HoldKind::Permit { .. }) { "limit" } else { "writer" }
                );
                let fence = format!("{holders}:fence");
                let ttl = ttl_ms.to_string();
                let grace = FENCE_GRACE_MS.to_string();
                let args = [owner.as_bytes(), ttl.as_bytes(), grace.as_bytes()];
                if matches!(kind, HoldKind::Permit { .. }) {
                    // The fair mark last, kept at least as long where it stands ('fair').
                    let weights = format!("{holders}:weights");
                    let mark = format!("{holders}:fair");
                    let args = [args[0], args[1], args[2], b"fair".as_slice()];
                    resp::script_on(
                        out,
                        &PERMIT_EXTEND,
                        eval,
                        &[&holders, &companion, &fence, &weights, &mark],
                        &args,
                    );
                } else {
                    resp::script_on(out, &PERMIT_EXTEND, eval, &[&holders, &companion, &fence], &args);
                }
            }
            Op::PermitCount { key, kind } => {
                let holders = crate::permit_key(prefix, key, *kind);
                if matches!(kind, HoldKind::Permit { .. }) {
                    let weights = format!("{holders}:weights");
                    resp::script_on(out, &PERMIT_COUNT, eval, &[&holders, &weights], &[]);
                } else {
                    resp::script_on(out, &PERMIT_COUNT, eval, &[&holders], &[]);
                }
            }
            Op::PermitRemainingTime { key, owner, kind } => {
                let holders = crate::permit_key(prefix, key, *kind);
                resp::script_on(out, &PERMIT_REMAINING, eval, &[&holders], &[owner.as_bytes()]);
            }
            Op::IsLocked { key } => resp::key_command(out, b"EXISTS", prefix, key),
            Op::RemainingTime { key } => resp::key_command(out, b"PTTL", prefix, key),
            Op::IsHeldBy { key, .. } => resp::key_command(out, b"GET", prefix, key),
            Op::OwnerRemainingTime { key, owner } => {
                resp::script(out, &OWNER_REMAINING, eval, prefix, key, false, &[owner.as_bytes()]);
            }
            Op::Asking => resp::command(out, &[b"ASKING"]),
            Op::Wait => {
                let (replicas, timeout) = self.min_replicas.unwrap_or((0, 0));
                resp::command(
                    out,
                    &[b"WAIT", replicas.to_string().as_bytes(), timeout.to_string().as_bytes()],
                );
            }
            Op::Handshake { .. } => unreachable!("handshake steps are encoded by `handshake`"),
        }
    }

    /// Cluster: a redirect or retry reply (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`)
    /// leaves its request for [`take_redirects`](Self::take_redirects) instead of
    /// failing it; ids come from `ids`, shared by the engines of every node.
    /// Release scripts then publish with `SPUBLISH`, on the key's shard.
    pub(crate) fn follow_redirects(&mut self, ids: Arc<AtomicU32>) {
        self.cluster = true;
        self.ids = Some(ids);
    }

    /// The requests that redirect or retry replies sent on since the last call.
    pub(crate) fn take_redirects(&mut self) -> Vec<Redirect> {
        std::mem::take(&mut self.redirects)
    }

    /// Sends a redirected request on this connection, with its id and deadline (after
    /// `ASKING` for an `ASK`).
    pub(crate) fn adopt(&mut self, redirect: Redirect) {
        let Redirect { pending, to } = redirect;
        if matches!(to, Redirection::Ask { .. }) {
            self.encode(&Op::Asking, false);
            self.pending.push_back(Pending { op: Op::Asking, ..pending.clone_head() });
        }
        self.send(pending);
    }

    /// Takes the lock `key` for `owner` if it is free (and mints a fencing token).
    pub fn acquire(&mut self, key: &str, owner: &str, ttl_ms: u64, now_ms: u64) -> RequestId {
        self.push(Op::Acquire { key: key.to_owned(), owner: owner.to_owned(), ttl_ms }, now_ms)
    }

    /// Takes every one of `keys` for `owner`, or none (one script: on a cluster, the
    /// keys must share a hash slot; see [`EngineStore`]).
    pub fn acquire_all(&mut self, keys: &[String], owner: &str, ttl_ms: u64, now_ms: u64) -> RequestId {
        self.push(Op::AcquireAll { keys: keys.to_vec(), owner: owner.to_owned(), ttl_ms }, now_ms)
    }

    /// Frees `key` if `owner` holds it, and tells waiters.
    pub fn release(&mut self, key: &str, owner: &str, now_ms: u64) -> RequestId {
        self.push(Op::Release { key: key.to_owned(), owner: owner.to_owned(), fair: false }, now_ms)
    }

    /// Sets `key`'s expiry to `ttl_ms` from now if `owner` holds it.
    pub fn extend(&mut self, key: &str, owner: &str, ttl_ms: u64, now_ms: u64) -> RequestId {
        self.push(Op::Extend { key: key.to_owned(), owner: owner.to_owned(), ttl_ms, fair: false }, now_ms)
    }

    /// A fair attempt on `key` for `owner` (`kind`: a lock, or a semaphore's `permits`):
    /// taken when `owner` is first in the key's queue and the key has room; otherwise,
    /// when `waits`, `owner` takes or renews its place (a lease of `ttl_ms`). Finishes
    /// with the fencing token, `None`, or `INVALID_ARGUMENT` when handles that are not
    /// fair hold the key (or a semaphore's holders use another limit).
    #[allow(clippy::too_many_arguments)] // the store contract's own arguments
    pub fn fair_acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        waits: bool,
        now_ms: u64,
    ) -> RequestId {
        self.push(
            Op::FairAcquire { key: key.to_owned(), owner: owner.to_owned(), ttl_ms, kind, permits, waits },
            now_ms,
        )
    }

    /// A fair lock's release: frees `key` if `owner` holds it, gives up `owner`'s place
    /// in the queue either way, and tells waiters.
    pub fn fair_release(&mut self, key: &str, owner: &str, now_ms: u64) -> RequestId {
        self.push(Op::Release { key: key.to_owned(), owner: owner.to_owned(), fair: true }, now_ms)
    }

    /// A fair hold's extend: as [`extend`](Self::extend), its fair mark kept as long.
    pub fn fair_extend(&mut self, key: &str, owner: &str, ttl_ms: u64, now_ms: u64) -> RequestId {
        self.push(Op::Extend { key: key.to_owned(), owner: owner.to_owned(), ttl_ms, fair: true }, now_ms)
    }

    /// Whether anyone holds `key`.
    pub fn is_locked(&mut self, key: &str, now_ms: u64) -> RequestId {
        self.push(Op::IsLocked { key: key.to_owned() }, now_ms)
    }

    /// Milliseconds until `key`'s hold expires.
    pub fn remaining_time(&mut self, key: &str, now_ms: u64) -> RequestId {
        self.push(Op::RemainingTime { key: key.to_owned() }, now_ms)
    }

    /// Whether `owner` holds `key`.
    pub fn is_held_by(&mut self, key: &str, owner: &str, now_ms: u64) -> RequestId {
        self.push(Op::IsHeldBy { key: key.to_owned(), owner: owner.to_owned() }, now_ms)
    }

    /// Milliseconds left on `owner`'s own hold of `key`, `None` when `owner` does not
    /// hold it: one script, so the answer is about this owner's hold alone.
    pub fn owner_remaining_time(&mut self, key: &str, owner: &str, now_ms: u64) -> RequestId {
        self.push(Op::OwnerRemainingTime { key: key.to_owned(), owner: owner.to_owned() }, now_ms)
    }

    /// Takes a hold of `kind` on `key` for `owner`: `permits` of a semaphore's permits
    /// (`Permit`), a read or a write lock; a refused writer claims the key. Any kind but
    /// `Permit` and `Read` is taken as `Write`: callers pass only these three (see
    /// [`EngineStore`]). A semaphore's attempt fails with `INVALID_ARGUMENT` while its
    /// fair mark stands (fair handles hold it or wait for it).
    pub fn acquire_permit(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        now_ms: u64,
    ) -> RequestId {
        self.push(
            Op::PermitAcquire { key: key.to_owned(), owner: owner.to_owned(), ttl_ms, kind, permits },
            now_ms,
        )
    }

    /// Gives back `owner`'s hold of `key` (and a waiting writer's claim, or its place in a
    /// semaphore's fair queue), and tells waiters.
    pub fn release_permit(&mut self, key: &str, owner: &str, kind: HoldKind, now_ms: u64) -> RequestId {
        self.push(Op::PermitRelease { key: key.to_owned(), owner: owner.to_owned(), kind }, now_ms)
    }

    /// Sets the expiry of `owner`'s hold of `key` to `ttl_ms` from now, if it has one.
    pub fn extend_permit(
        &mut self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        now_ms: u64,
    ) -> RequestId {
        self.push(Op::PermitExtend { key: key.to_owned(), owner: owner.to_owned(), ttl_ms, kind }, now_ms)
    }

    /// How many holds of `key` are live.
    pub fn permit_count(&mut self, key: &str, kind: HoldKind, now_ms: u64) -> RequestId {
        self.push(Op::PermitCount { key: key.to_owned(), kind }, now_ms)
    }

    /// Milliseconds until `owner`'s hold of `key` expires.
    pub fn permit_remaining_time(
        &mut self,
        key: &str,
        owner: &str,
        kind: HoldKind,
        now_ms: u64,
    ) -> RequestId {
        self.push(Op::PermitRemainingTime { key: key.to_owned(), owner: owner.to_owned(), kind }, now_ms)
    }

    /// Queues the handshake of a new connection before anything else in the output:
    /// `AUTH`, `SELECT`, the version check (`INFO server`) and `SCRIPT LOAD` of every
    /// script. Call it right after [`connection_lost`](Self::connection_lost)
    /// (or on a new engine), before the socket is written to. Its id completes with
    /// [`Value::Done`] or the first failure.
    pub fn handshake(&mut self, handshake: &Handshake, now_ms: u64) -> RequestId {
        let id = self.next_id();
        let deadline_ms = now_ms + self.options.command_timeout_ms;
        let mut bytes = Vec::new();
        let mut steps = Vec::new();
        if let Some((user, password)) = &handshake.auth {
            match user {
                Some(user) => resp::command(&mut bytes, &[b"AUTH", user.as_bytes(), password.as_bytes()]),
                None => resp::command(&mut bytes, &[b"AUTH", password.as_bytes()]),
            }
            steps.push(false);
        }
        if handshake.db != 0 {
            resp::command(&mut bytes, &[b"SELECT", handshake.db.to_string().as_bytes()]);
            steps.push(false);
        }
        resp::command(&mut bytes, &[b"INFO", b"server"]);
        steps.push(true);
        for script in scripts::ALL {
            resp::command(&mut bytes, &[b"SCRIPT", b"LOAD", script.source.as_bytes()]);
            steps.push(false);
        }
        let count = steps.len();
        for (i, info) in steps.into_iter().enumerate().rev() {
            let op = Op::Handshake { last: i + 1 == count, info };
            self.pending.push_front(Pending { id, op, deadline_ms, abandoned: false });
        }
        bytes.extend_from_slice(&self.output);
        self.output = bytes;
        self.handshake_failed = false;
        id
    }

    /// Whether a reply said `READONLY` (the server was demoted to a replica) since the
    /// last call. Such a request fails with `STORE_UNAVAILABLE`; a host that can find
    /// the new master (Sentinel) drops the connection and connects there.
    pub fn take_replica_seen(&mut self) -> bool {
        std::mem::take(&mut self.replica_seen)
    }

    /// Whether there are bytes to write.
    #[must_use]
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// The bytes to write, all of them; the engine's buffer is then empty.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// Copies the output into `out` and empties the engine's buffer (keeping its
    /// capacity): how many bytes, or `None` (and nothing taken) when they do not fit.
    pub fn take_output_into(&mut self, out: &mut [u8]) -> Option<usize> {
        let len = self.output.len();
        out.get_mut(..len)?.copy_from_slice(&self.output);
        self.output.clear();
        Some(len)
    }

    /// Appends the output to `sink` and empties the engine's buffer (keeping its capacity).
    pub fn drain_output_into(&mut self, sink: &mut Vec<u8>) {
        sink.extend_from_slice(&self.output);
        self.output.clear();
    }

    /// How many requests wait for a reply (or for their bytes to be written).
    #[must_use]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The earliest deadline of a pending request.
    #[must_use]
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.pending.iter().map(|p| p.deadline_ms).min()
    }

    /// Parses every complete reply in `bytes` (after any partial one kept from before)
    /// and pushes a completion for each finished request into `done`.
    ///
    /// # Errors
    /// Bytes that are not RESP, or a reply that no request waits for: the connection is
    /// out of step and must be dropped (call [`connection_lost`](Self::connection_lost)).
    pub fn feed(&mut self, bytes: &[u8], now_ms: u64, done: &mut Vec<Completion>) -> Result<()> {
        if self.input.is_empty() {
            let used = self.parse(bytes, now_ms, done)?;
            if used < bytes.len() {
                self.input.extend_from_slice(&bytes[used..]);
            }
        } else {
            let mut input = std::mem::take(&mut self.input);
            input.extend_from_slice(bytes);
            let used = self.parse(&input, now_ms, done)?;
            input.drain(..used);
            self.input = input;
        }
        Ok(())
    }

    fn parse(&mut self, buf: &[u8], now_ms: u64, done: &mut Vec<Completion>) -> Result<usize> {
        let mut at = 0;
        while at < buf.len() {
            let decoded = redis_protocol::resp2::decode::decode_range(&buf[at..])
                .map_err(|e| LockError::StoreUnavailable(format!("redis: unreadable reply: {e}")))?;
            let Some((frame, used)) = decoded else { break };
            let reply = Reply { buf: &buf[at..at + used], frame };
            at += used;
            let Some(request) = self.pending.pop_front() else {
                return Err(LockError::StoreUnavailable("redis: a reply that no request waits for".into()));
            };
            self.settle(request, &reply, now_ms, done);
        }
        Ok(at)
    }

    fn settle(&mut self, request: Pending, reply: &Reply<'_>, now_ms: u64, done: &mut Vec<Completion>) {
        let Pending { id, op, abandoned, deadline_ms } = request;
        if abandoned || matches!(op, Op::Asking) {
            return;
        }
        if let Op::Wait = op {
            // Only the WAIT after a write that answered has an outcome to release; one
            // after a write that was redirected or sent again is dropped.
            if let Some((held, result)) = self.awaiting.take() {
                if held == id {
                    done.push(Completion { id, result: self.replicated(result, reply) });
                } else {
                    self.awaiting = Some((held, result));
                }
            }
            return;
        }
        if let Some(error) = reply.error() {
            self.settle_error(Pending { id, op, deadline_ms, abandoned: false }, error, now_ms, done);
            return;
        }
        let result = match op {
            // Unfenced: `+OK` when set, nil when the key exists (of any type).
            Op::Acquire { .. } if !self.options.fencing => {
                reply.bulk().map(|set| Value::Taken(set.is_some()))
            }
            Op::Acquire { key, .. } => hold_answer(&key, HoldKind::Exclusive, false, reply),
            Op::FairAcquire { key, kind, .. } => hold_answer(&key, kind, true, reply),
            Op::AcquireAll { keys, .. } => match reply.integer() {
                Ok(held) => Ok(Value::AcquiredAll(Err(usize::try_from(held.unsigned_abs())
                    .unwrap_or(1)
                    .saturating_sub(1)))),
                Err(_) => reply.bulk().and_then(|text| {
                    let tokens: Option<Vec<u64>> = std::str::from_utf8(text.unwrap_or_default())
                        .ok()
                        .map(|text| text.split(' ').filter_map(|t| t.parse().ok()).collect());
                    match tokens {
                        Some(tokens) if tokens.len() == keys.len() => Ok(Value::AcquiredAll(Ok(tokens))),
                        _ => Err(LockError::StoreError(format!(
                            "redis engine: acquire_all answered {:?}",
                            String::from_utf8_lossy(text.unwrap_or_default())
                        ))),
                    }
                }),
            },
            Op::Release { .. }
            | Op::Extend { .. }
            | Op::IsLocked { .. }
            | Op::PermitRelease { .. }
            | Op::PermitExtend { .. } => reply.integer().map(|n| Value::Flag(n == 1)),
            Op::PermitAcquire { key, kind, .. } => hold_answer(&key, kind, false, reply),
            Op::PermitCount { .. } => reply.integer().map(|n| Value::Count(u64::try_from(n).unwrap_or(0))),
            Op::PermitRemainingTime { .. } | Op::OwnerRemainingTime { .. } => {
                reply.integer().map(|ms| Value::Millis(u64::try_from(ms).ok().filter(|ms| *ms > 0)))
            }
            Op::RemainingTime { key } => reply.integer().and_then(|ms| match ms {
                -2 => Ok(Value::Millis(None)),
                -1 => Err(LockError::StoreError(format!(
                    "redis key {} exists without an expiry: something other than locksmith wrote it",
                    self.lock_key(&key)
                ))),
                ms => Ok(Value::Millis(Some(u64::try_from(ms).unwrap_or(0)))),
            }),
            Op::IsHeldBy { owner, .. } => {
                reply.bulk().map(|holder| Value::Flag(holder == Some(owner.as_bytes())))
            }
            Op::Asking | Op::Wait => return,
            Op::Handshake { last, info } => {
                if self.handshake_failed {
                    return;
                }
                if info {
                    if let Some(Ok(text)) = reply.bulk().ok().flatten().map(std::str::from_utf8) {
                        if let Err(err) = check_redis_version(text) {
                            self.handshake_failed = true;
                            done.push(Completion { id, result: Err(err) });
                            return;
                        }
                    }
                }
                if !last {
                    return;
                }
                Ok(Value::Done)
            }
        };
        if self.pending.front().is_some_and(|next| next.id == id && matches!(next.op, Op::Wait)) {
            self.awaiting = Some((id, result));
            return;
        }
        done.push(Completion { id, result });
    }

    /// An error reply: a redirect (cluster), a script to send again as `EVAL`, a refused
    /// handshake, or the request's failure.
    fn settle_error(&mut self, request: Pending, error: &str, now_ms: u64, done: &mut Vec<Completion>) {
        let Pending { id, op, deadline_ms, .. } = request;
        self.replica_seen |= error.starts_with("READONLY");
        if self.cluster && op.key().is_some() {
            if let Some(to) = redirection(error) {
                let pending = Pending { id, op, deadline_ms, abandoned: false };
                self.redirects.push(Redirect { pending, to });
                return;
            }
        }
        if error.starts_with("NOSCRIPT")
            && !matches!(
                op,
                Op::IsLocked { .. } | Op::RemainingTime { .. } | Op::IsHeldBy { .. } | Op::Handshake { .. }
            )
        {
            let deadline_ms = now_ms + self.options.command_timeout_ms;
            self.send_as_eval(Pending { id, op, deadline_ms, abandoned: false });
            return;
        }
        if let Op::Handshake { .. } = op {
            if self.handshake_failed {
                return;
            }
            self.handshake_failed = true;
            let err = if error.starts_with("WRONGPASS")
                || error.starts_with("NOAUTH")
                || error.contains("invalid password")
            {
                LockError::StoreError(format!("redis refused the credentials: {error}"))
            } else {
                server_error(error)
            };
            done.push(Completion { id, result: Err(err) });
            return;
        }
        done.push(Completion { id, result: Err(server_error(error)) });
    }

    /// Sends a script again as `EVAL` (after `NOSCRIPT`), with its `WAIT` if it has one.
    fn send_as_eval(&mut self, pending: Pending) {
        self.encode(&pending.op, true);
        let wait = self.min_replicas.is_some() && pending.op.is_hold_write();
        let (id, deadline_ms) = (pending.id, pending.deadline_ms);
        self.pending.push_back(pending);
        if wait {
            self.encode(&Op::Wait, false);
            self.pending.push_back(Pending { id, op: Op::Wait, deadline_ms, abandoned: false });
        }
    }

    /// A write's outcome once its `WAIT` answered: a grant or an extension that fewer
    /// replicas than asked acknowledged fails.
    fn replicated(&self, result: Result<Value>, reply: &Reply<'_>) -> Result<Value> {
        let (wanted, timeout) = self.min_replicas.unwrap_or((0, 0));
        let granted = matches!(
            result,
            Ok(Value::Acquired(Some(_)) | Value::Taken(true) | Value::AcquiredAll(Ok(_)) | Value::Flag(true))
        );
        // WAIT refused (a master demoted under the write: "ERR WAIT cannot be used with
        // replica instances"): nobody can say the write will survive. Like a lost
        // connection, that is the store being out of reach, which a waiting acquire rides out.
        if let Some(error) = reply.error() {
            return if granted {
                Err(LockError::StoreUnavailable(format!(
                    "redis: the write ran, but WAIT for {wanted} replicas failed: {error}"
                )))
            } else {
                result
            };
        }
        match reply.integer() {
            Ok(acked) if granted && acked < i64::from(wanted) => Err(LockError::StoreUnavailable(format!(
                "redis: {acked} of the {wanted} replicas asked for (minReplicas) acknowledged the write within {timeout} ms"
            ))),
            Err(err) if granted => Err(err),
            _ => result,
        }
    }

    /// Fails every request whose deadline has passed (its reply, if it comes, is
    /// dropped). Returns `true` when the oldest reply is overdue by [`RESET_AFTER_MS`]:
    /// every pending request has then failed, and the host must drop the socket and
    /// reconnect.
    pub fn expire(&mut self, now_ms: u64, done: &mut Vec<Completion>) -> bool {
        let timeout = self.options.command_timeout_ms;
        let mut last = None;
        for request in &mut self.pending {
            if request.abandoned || request.deadline_ms > now_ms {
                continue;
            }
            request.abandoned = true;
            // A handshake is several steps under one id: report it once.
            if last == Some(request.id) {
                continue;
            }
            last = Some(request.id);
            let error = LockError::StoreUnavailable(format!("redis did not answer within {timeout} ms"));
            done.push(Completion { id: request.id, result: Err(error) });
        }
        let overdue =
            self.pending.front().is_some_and(|p| p.deadline_ms.saturating_add(RESET_AFTER_MS) <= now_ms);
        if overdue {
            self.fail_all(
                || LockError::StoreUnavailable("redis: no reply for too long; reconnecting".into()),
                done,
            );
        }
        overdue
    }

    /// The connection dropped (or the host dropped it): every pending request fails with
    /// `STORE_UNAVAILABLE` (`why` says what happened), and unsent output is discarded.
    pub fn connection_lost(&mut self, why: &str, done: &mut Vec<Completion>) {
        self.fail_all(|| LockError::StoreUnavailable(format!("redis: {why}")), done);
    }

    fn fail_all(&mut self, error: impl Fn() -> LockError, done: &mut Vec<Completion>) {
        self.awaiting = None;
        self.output.clear();
        self.input.clear();
        let mut last = None;
        for request in self.pending.drain(..) {
            // A handshake is several steps under one id: report it once.
            if request.abandoned || last == Some(request.id) {
                continue;
            }
            last = Some(request.id);
            done.push(Completion { id: request.id, result: Err(error()) });
        }
    }
}

/// A server error reply mapped to a locksmith error.
fn server_error(message: &str) -> LockError {
    let code = message.split(' ').next().unwrap_or("");
    if TRANSIENT_CODES.contains(&code) {
        LockError::StoreUnavailable(format!("redis: {message}"))
    } else {
        LockError::StoreError(format!("redis: {message}"))
    }
}

/// One reply: its frame and the bytes it ranges over.
struct Reply<'a> {
    buf: &'a [u8],
    frame: RangeFrame,
}

impl Reply<'_> {
    fn error(&self) -> Option<&str> {
        match &self.frame {
            RangeFrame::Error(range) => {
                Some(std::str::from_utf8(&self.buf[range.0..range.1]).unwrap_or("ERR"))
            }
            _ => None,
        }
    }

    fn integer(&self) -> Result<i64> {
        match &self.frame {
            RangeFrame::Integer(n) => Ok(*n),
            other => Err(unexpected("an integer", other)),
        }
    }

    fn bulk(&self) -> Result<Option<&[u8]>> {
        match &self.frame {
            RangeFrame::BulkString(range) | RangeFrame::SimpleString(range) => {
                Ok(Some(&self.buf[range.0..range.1]))
            }
            RangeFrame::Null => Ok(None),
            other => Err(unexpected("a string", other)),
        }
    }
}

/// An acquire script's answer on `key` of `kind` (`fair`: a fair handle's attempt): the
/// fencing token, or 0 when not taken. A key whose fairness is not the handle's answers -1
/// for a lock (`acquire.lua`, `fair_acquire.lua`) and nil for a semaphore, whose -L says
/// it is held with another limit L (`semaphore_acquire.lua`, `fair_semaphore_acquire.lua`).
fn hold_answer(key: &str, kind: HoldKind, fair: bool, reply: &Reply<'_>) -> Result<Value> {
    let refused = || {
        if fair {
            locksmith_core::fair_on_unfair_key(key, kind)
        } else {
            locksmith_core::not_fair_on_fair_key(key, kind)
        }
    };
    let acquired = |t: i64| Value::Acquired(u64::try_from(t).ok().filter(|t| *t > 0));
    match kind {
        HoldKind::Permit { .. } if matches!(reply.bulk(), Ok(None)) => Err(refused()),
        HoldKind::Permit { limit } => reply.integer().and_then(|t| {
            if t < 0 {
                return Err(LockError::InvalidArgument(format!(
                    "semaphore {} is held with limit {}; this handle asks for {limit}: every handle of a semaphore must use the same limit",
                    locksmith_core::validate::quote(key),
                    t.unsigned_abs()
                )));
            }
            Ok(acquired(t))
        }),
        HoldKind::Exclusive => reply.integer().and_then(|t| if t == -1 { Err(refused()) } else { Ok(acquired(t)) }),
        _ => reply.integer().map(acquired),
    }
}

fn unexpected(wanted: &str, got: &RangeFrame) -> LockError {
    LockError::StoreError(format!("redis: expected {wanted}, got {got:?}"))
}

#[cfg(test)]
mod tests;
