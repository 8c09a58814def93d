//! The Lua scripts and their SHA1s (the same files the stores over users' own Redis
//! clients load): the lock's, and those of semaphores and read-write locks.

use std::sync::OnceLock;

/// A Lua script and its SHA1, as `EVALSHA` names it.
#[derive(Debug)]
pub struct Script {
    /// The Lua source.
    pub source: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    const fn new(source: &'static str) -> Self {
        Self { source, sha: OnceLock::new() }
    }

    /// The lowercase hex SHA1 of the source.
    pub fn sha(&self) -> &str {
        self.sha.get_or_init(|| sha1_smol::Sha1::from(self.source).digest().to_string())
    }
}

/// `acquire.lua`: KEYS lock, fence (and the fair mark); ARGV owner, ttl, fence ttl.
pub static ACQUIRE: Script = Script::new(include_str!("../lua/acquire.lua"));
/// `release.lua`: KEYS lock (and an election's value); ARGV owner.
pub static RELEASE: Script = Script::new(include_str!("../lua/release.lua"));
/// `extend.lua`: KEYS lock, fence (and an election's value); ARGV owner, ttl, fence ttl.
pub static EXTEND: Script = Script::new(include_str!("../lua/extend.lua"));
/// `semaphore_acquire.lua`: KEYS holders, limit, fence, weights, fair mark; ARGV owner, ttl,
/// limit, grace, permits.
pub static SEMAPHORE_ACQUIRE: Script = Script::new(include_str!("../lua/semaphore_acquire.lua"));
/// `semaphore_release.lua`: KEYS holders, limit, weights, fair queue, places, fair mark;
/// ARGV owner, publish command.
pub static SEMAPHORE_RELEASE: Script = Script::new(include_str!("../lua/semaphore_release.lua"));
/// `rwlock_acquire.lua`: KEYS holders, writer, claim, fence; ARGV owner, ttl, mode, grace.
pub static RWLOCK_ACQUIRE: Script = Script::new(include_str!("../lua/rwlock_acquire.lua"));
/// `rwlock_release.lua`: KEYS holders, writer, claim; ARGV owner.
pub static RWLOCK_RELEASE: Script = Script::new(include_str!("../lua/rwlock_release.lua"));
/// `permit_extend.lua`: KEYS holders, then the keys that live as long (a semaphore's fair
/// mark last); ARGV owner, ttl, grace (and `fair` with a mark).
pub static PERMIT_EXTEND: Script = Script::new(include_str!("../lua/permit_extend.lua"));
/// `permit_count.lua`: KEYS holders.
pub static PERMIT_COUNT: Script = Script::new(include_str!("../lua/permit_count.lua"));
/// `permit_remaining.lua`: KEYS holders; ARGV owner.
pub static PERMIT_REMAINING: Script = Script::new(include_str!("../lua/permit_remaining.lua"));
/// `owner_remaining.lua`: KEYS lock; ARGV owner.
pub static OWNER_REMAINING: Script = Script::new(include_str!("../lua/owner_remaining.lua"));

/// `acquire_all.lua`: KEYS lock, fence, fair mark of each key; ARGV owner, ttl, fence ttl.
pub static ACQUIRE_ALL: Script = Script::new(include_str!("../lua/acquire_all.lua"));

/// `fair_acquire.lua`: KEYS lock, fence, queue, places, fair mark; ARGV owner, ttl, fence ttl, waits.
pub static FAIR_ACQUIRE: Script = Script::new(include_str!("../lua/fair_acquire.lua"));
/// `fair_release.lua`: KEYS lock, queue, places, fair mark; ARGV owner.
pub static FAIR_RELEASE: Script = Script::new(include_str!("../lua/fair_release.lua"));
/// `fair_semaphore_acquire.lua`: KEYS holders, limit, fence, weights, queue, places, fair
/// mark; ARGV owner, ttl, limit, grace, permits, waits, publish command.
pub static FAIR_SEMAPHORE_ACQUIRE: Script = Script::new(include_str!("../lua/fair_semaphore_acquire.lua"));

/// Every script, in the order the handshake loads them.
pub static ALL: [&Script; 15] = [
    &ACQUIRE,
    &RELEASE,
    &EXTEND,
    &SEMAPHORE_ACQUIRE,
    &SEMAPHORE_RELEASE,
    &RWLOCK_ACQUIRE,
    &RWLOCK_RELEASE,
    &PERMIT_EXTEND,
    &PERMIT_COUNT,
    &PERMIT_REMAINING,
    &OWNER_REMAINING,
    &ACQUIRE_ALL,
    &FAIR_ACQUIRE,
    &FAIR_RELEASE,
    &FAIR_SEMAPHORE_ACQUIRE,
];
