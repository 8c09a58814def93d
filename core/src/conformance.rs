//! The store conformance suite: every documented behaviour, run against a store.
//!
//! A store's tests call [`store_conformance_suite!`](crate::store_conformance_suite)
//! with a [`Harness`]; each case becomes one `#[test]`. Times are chosen to hold on a
//! real clock against a real server (hundreds of milliseconds) and run instantly on a
//! [`FakeTimer`](crate::FakeTimer).

#![allow(clippy::missing_panics_doc)] // The cases are assertions; panicking is how they fail.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::future::join_all;

use crate::{AcquireOptions, AutoExtend, BoxFuture, HoldEnd, HoldKind, Lock, LockStore, Timer};

/// Drives one case's future to completion on the store's runtime.
pub type Runner = Arc<dyn Fn(BoxFuture<'static, ()>) + Send + Sync>;

/// A store under test with its clock and a way to run futures.
#[derive(Clone)]
pub struct Harness {
    /// The store.
    pub store: Arc<dyn LockStore>,
    /// The clock and sleep the store's locks use.
    pub timer: Arc<dyn Timer>,
    /// Runs a case.
    pub runner: Runner,
    /// Whether the store hands out fencing tokens.
    pub fencing: bool,
    /// Whether the store can say who holds a key (`is_held_by`), which makes
    /// `is_expired` exact when a restored copy extended the hold.
    pub exact_ownership: bool,
    /// Whether the store has semaphores and read-write locks (the permit methods); a
    /// store without them must refuse them with `UNSUPPORTED`.
    pub permits: bool,
    /// How late the runtime's timers and the store's round trips may make an attempt,
    /// in milliseconds: 0 on a fake clock, tens of milliseconds on a real one. Cases
    /// that check a deadline allow this much past it and no more.
    pub slack_ms: u64,
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

impl Harness {
    /// A key no other case uses.
    #[must_use]
    pub fn key(&self, name: &str) -> String {
        let n = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        format!("conformance:{name}:{}:{n}", std::process::id())
    }

    /// A lock on `key` in this store.
    ///
    /// # Panics
    /// On an invalid key or TTL.
    #[must_use]
    pub fn lock(&self, key: &str, ttl_ms: u64) -> Lock {
        Lock::new(key, ttl_ms, self.store.clone(), self.timer.clone()).expect("valid lock")
    }

    /// A handle of `kind` on `key` in this store.
    ///
    /// # Panics
    /// On an invalid key, TTL or kind.
    #[must_use]
    pub fn handle(&self, key: &str, ttl_ms: u64, kind: HoldKind) -> Lock {
        Lock::of_kind(key, ttl_ms, kind, self.store.clone(), self.timer.clone()).expect("valid handle")
    }

    /// Runs `future` with this harness's runner.
    pub fn run(&self, future: BoxFuture<'static, ()>) {
        (self.runner)(future);
    }

    async fn sleep(&self, ms: u64) {
        self.timer.sleep(ms).await;
    }

    fn now(&self) -> u64 {
        self.timer.now_ms()
    }
}

fn wait(timeout_ms: u64, retry_delay_ms: u64) -> AcquireOptions {
    AcquireOptions::default().with_timeout_ms(timeout_ms).with_retry_delay_ms(retry_delay_ms)
}

/// Generates one `#[test]` per conformance case for the harness `$make` builds.
#[macro_export]
macro_rules! store_conformance_suite {
    ($make:expr) => {
        $crate::store_conformance_suite!(@cases $make;
            free_lock_is_taken, second_holder_is_refused, timeout_zero_does_not_wait,
            waiter_gets_lock_freed_within_timeout, waiter_gives_up_at_timeout,
            last_attempt_happens_at_deadline, late_release_does_not_free_next_holder,
            extend_pushes_expiry, extend_after_loss_fails, extend_never_acquired_fails,
            hold_expires_on_its_own, remaining_time_null_when_unheld, is_expired_cases,
            serialize_restore_release, serialize_restore_extend, concurrent_acquirers_one_wins,
            acquire_while_holding_returns_false, release_is_owner_only, fencing_tokens_grow,
            keys_are_independent, hold_ends_released, hold_ends_lost_at_ttl,
            auto_extend_outlives_many_ttls, auto_extend_stops_at_its_cap,
            auto_extend_sees_theft, semaphore_admits_up_to_its_limit, semaphore_permits_expire,
            readers_share_and_a_writer_is_alone, a_waiting_writer_is_not_starved,
            a_writer_that_gives_up_lets_readers_in, permits_serialize_and_restore);
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let harness: $crate::conformance::Harness = $make;
                harness.run(Box::pin($crate::conformance::$case(harness.clone())));
            }
        )*
    };
}

/// A free key is taken, and then reads as locked with time left.
pub async fn free_lock_is_taken(h: Harness) {
    let l = h.lock(&h.key("free"), 1_000);
    assert!(!l.is_locked().await.unwrap());
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    assert!(l.is_locked().await.unwrap());
    let left = l.remaining_time().await.unwrap().expect("time left");
    assert!(left > 0 && left <= 1_000, "{left}");
    assert!(l.release().await.unwrap());
    assert!(!l.is_locked().await.unwrap());
}

/// A second contender is refused while the first holds.
pub async fn second_holder_is_refused(h: Harness) {
    let key = h.key("second");
    let (a, b) = (h.lock(&key, 5_000), h.lock(&key, 5_000));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    assert!(!b.acquire(AcquireOptions::default()).await.unwrap());
    assert!(b.is_locked().await.unwrap(), "is_locked reports anyone's hold");
    assert!(!b.release().await.unwrap());
    assert!(a.is_locked().await.unwrap(), "the refused handle freed nothing");
    assert!(a.release().await.unwrap());
}

/// With timeout 0, a held key is refused at once.
pub async fn timeout_zero_does_not_wait(h: Harness) {
    let key = h.key("nowait");
    let (a, b) = (h.lock(&key, 5_000), h.lock(&key, 5_000));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    let start = h.now();
    assert!(!b.acquire(wait(0, 1_000)).await.unwrap());
    assert!(h.now() - start < 500, "did not wait a retry delay");
    a.release().await.unwrap();
}

/// A waiter gets the key once the holder releases within the waiter's timeout.
pub async fn waiter_gets_lock_freed_within_timeout(h: Harness) {
    let key = h.key("waiter");
    let (a, b) = (h.lock(&key, 5_000), h.lock(&key, 5_000));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    let start = h.now();
    let (got, ()) = futures_util::join!(b.acquire(wait(2_000, 50)), async {
        h.sleep(150).await;
        assert!(a.release().await.unwrap());
    });
    assert!(got.unwrap());
    let waited = h.now() - start;
    assert!((150..1_500).contains(&waited), "waited {waited} ms");
    assert!(b.release().await.unwrap());
}

/// A waiter whose timeout passes while the key stays held gives up, having waited it all.
pub async fn waiter_gives_up_at_timeout(h: Harness) {
    let key = h.key("giveup");
    let (a, b) = (h.lock(&key, 10_000), h.lock(&key, 10_000));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    let start = h.now();
    assert!(!b.acquire(wait(300, 70)).await.unwrap());
    let waited = h.now() - start;
    assert!((300..=300 + h.slack_ms).contains(&waited), "waited {waited} ms for a 300 ms timeout");
    assert!(a.is_locked().await.unwrap());
    a.release().await.unwrap();
}

/// The last attempt happens at the deadline, not one retry delay before it: a hold
/// that expires between the last regular retry and the deadline is taken.
pub async fn last_attempt_happens_at_deadline(h: Harness) {
    let key = h.key("deadline");
    let (a, b) = (h.lock(&key, 250), h.lock(&key, 5_000));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    let start = h.now();
    // Attempts at 0, 100, 200 find it held; the one at the 300 ms deadline does not.
    assert!(b.acquire(wait(300, 100)).await.unwrap(), "no attempt at the deadline");
    let waited = h.now() - start;
    // Taken at the deadline: not later (an attempt past the deadline), and not before
    // the hold expired.
    assert!((250..=300 + h.slack_ms).contains(&waited), "taken after {waited} ms");
    b.release().await.unwrap();
}

/// A holder that outlived its TTL cannot free the next holder's lock.
pub async fn late_release_does_not_free_next_holder(h: Harness) {
    let key = h.key("late");
    let (a, b) = (h.lock(&key, 100), h.lock(&key, 5_000));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    h.sleep(200).await;
    assert!(b.acquire(AcquireOptions::default()).await.unwrap());
    assert!(!a.release().await.unwrap(), "a lost its lock; release must not delete b's");
    assert!(a.is_expired().await.unwrap(), "a late release leaves a lost hold reported lost");
    assert!(b.is_locked().await.unwrap());
    assert!(!b.is_expired().await.unwrap());
    let c = h.lock(&key, 5_000);
    assert!(!c.acquire(AcquireOptions::default()).await.unwrap());
    assert!(b.release().await.unwrap());
}

/// `extend` pushes the expiry out, by the lock's TTL or the given one.
pub async fn extend_pushes_expiry(h: Harness) {
    let l = h.lock(&h.key("extend"), 300);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    h.sleep(200).await;
    l.extend(None).await.unwrap();
    h.sleep(200).await;
    assert!(l.is_locked().await.unwrap(), "extended past the first TTL");
    assert!(!l.is_expired().await.unwrap());
    l.extend(Some(5_000)).await.unwrap();
    let left = l.remaining_time().await.unwrap().unwrap();
    assert!(left > 300 && left <= 5_000, "{left}");
    assert_eq!(l.ttl_ms(), 300, "extend(ttl) does not change the lock's TTL");
    assert!(l.release().await.unwrap());
}

/// `extend` after the hold was lost fails with `LOCK_NOT_HELD`.
pub async fn extend_after_loss_fails(h: Harness) {
    let key = h.key("extendlost");
    let l = h.lock(&key, 100);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    h.sleep(200).await;
    assert_eq!(l.extend(None).await.unwrap_err().code(), "LOCK_NOT_HELD");
    let other = h.lock(&key, 5_000);
    assert!(other.acquire(AcquireOptions::default()).await.unwrap());
    let err = l.extend(None).await.unwrap_err();
    assert_eq!(err.code(), "LOCK_NOT_HELD");
    assert_eq!(err.key(), Some(key.as_str()));
    assert!(other.remaining_time().await.unwrap().unwrap() > 1_000, "other's hold untouched");
    other.release().await.unwrap();
}

/// `extend` before any acquire, or after release, fails with `LOCK_NOT_HELD`.
pub async fn extend_never_acquired_fails(h: Harness) {
    let l = h.lock(&h.key("extendnever"), 1_000);
    assert_eq!(l.extend(None).await.unwrap_err().code(), "LOCK_NOT_HELD");
    assert!(!l.is_locked().await.unwrap(), "a failed extend takes nothing");
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    assert!(l.release().await.unwrap());
    assert_eq!(l.extend(None).await.unwrap_err().code(), "LOCK_NOT_HELD");
}

/// A hold ends by itself after its TTL.
pub async fn hold_expires_on_its_own(h: Harness) {
    let key = h.key("expires");
    let l = h.lock(&key, 150);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    h.sleep(300).await;
    assert!(!l.is_locked().await.unwrap());
    assert_eq!(l.remaining_time().await.unwrap(), None);
    assert!(h.lock(&key, 1_000).acquire(AcquireOptions::default()).await.unwrap());
}

/// Remaining time is `None` for a key nobody holds.
pub async fn remaining_time_null_when_unheld(h: Harness) {
    let l = h.lock(&h.key("remaining"), 1_000);
    assert_eq!(l.remaining_time().await.unwrap(), None);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    assert!(l.remaining_time().await.unwrap().is_some());
    l.release().await.unwrap();
    assert_eq!(l.remaining_time().await.unwrap(), None);
}

/// `is_expired`: we held it and no longer do.
pub async fn is_expired_cases(h: Harness) {
    let key = h.key("expired");
    let l = h.lock(&key, 150);
    assert!(!l.is_expired().await.unwrap(), "never acquired");
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    assert!(!l.is_expired().await.unwrap(), "held");
    h.sleep(300).await;
    assert!(l.is_expired().await.unwrap(), "expired, nobody holds it");
    let other = h.lock(&key, 5_000);
    assert!(other.acquire(AcquireOptions::default()).await.unwrap());
    assert!(l.is_expired().await.unwrap(), "expired, someone else holds it");
    assert!(!other.is_expired().await.unwrap());
    assert!(other.release().await.unwrap());
    assert!(!other.is_expired().await.unwrap(), "released, not lost");
}

/// A serialized lock restored elsewhere releases the same hold.
pub async fn serialize_restore_release(h: Harness) {
    let key = h.key("handoff");
    let a = h.lock(&key, 5_000);
    assert_eq!(a.serialize().unwrap_err().code(), "LOCK_NOT_HELD");
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    let text = a.serialized().unwrap();
    let b = Lock::restore(text, h.store.clone(), h.timer.clone());
    assert_eq!(b.key(), key);
    assert_eq!(b.ttl_ms(), 5_000);
    assert_eq!(b.fencing_token(), a.fencing_token());
    assert!(b.release().await.unwrap());
    assert!(!b.is_locked().await.unwrap());
    assert!(!a.release().await.unwrap(), "already released through the copy");
}

/// A serialized lock restored elsewhere extends the same hold.
pub async fn serialize_restore_extend(h: Harness) {
    let key = h.key("handoffext");
    let a = h.lock(&key, 300);
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    let b = Lock::restore(a.serialized().unwrap(), h.store.clone(), h.timer.clone());
    h.sleep(200).await;
    b.extend(Some(2_000)).await.unwrap();
    h.sleep(300).await;
    assert!(a.is_locked().await.unwrap());
    if h.exact_ownership {
        assert!(!a.is_expired().await.unwrap(), "the original handle still owns the hold");
    }
    assert!(a.release().await.unwrap());
}

/// Many contenders at once: exactly one wins.
pub async fn concurrent_acquirers_one_wins(h: Harness) {
    let key = h.key("race");
    let locks: Vec<Lock> = (0..24).map(|_| h.lock(&key, 5_000)).collect();
    let results = join_all(locks.iter().map(|l| l.acquire(AcquireOptions::default()))).await;
    let winners = results.into_iter().map(Result::unwrap).filter(|won| *won).count();
    assert_eq!(winners, 1);
    for l in &locks {
        l.release().await.unwrap();
    }
    assert!(!h.lock(&key, 1).is_locked().await.unwrap());
}

/// A handle that holds its key does not take it again, nor wait for itself.
pub async fn acquire_while_holding_returns_false(h: Harness) {
    let l = h.lock(&h.key("reentrant"), 5_000);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let token = l.fencing_token();
    let start = h.now();
    assert!(!l.acquire(wait(1_000, 50)).await.unwrap());
    assert!(h.now() - start < 500, "did not wait for itself");
    assert_eq!(l.fencing_token(), token, "the hold is unchanged");
    assert!(l.release().await.unwrap());
    assert!(l.acquire(AcquireOptions::default()).await.unwrap(), "free again after release");
    assert!(l.release().await.unwrap());
}

/// Release without a hold, and a second release, are harmless `false`.
pub async fn release_is_owner_only(h: Harness) {
    let key = h.key("release");
    let l = h.lock(&key, 5_000);
    assert!(!l.release().await.unwrap());
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    assert!(l.release().await.unwrap());
    assert!(!l.release().await.unwrap());
    // The store-level contract: a wrong owner frees nothing.
    assert!(h.store.acquire(&key, "a-token", 5_000).await.unwrap());
    assert!(!h.store.release(&key, "another-token").await.unwrap());
    assert!(!h.store.extend(&key, "another-token", 5_000).await.unwrap());
    assert!(h.store.is_locked(&key).await.unwrap());
    assert!(h.store.release(&key, "a-token").await.unwrap());
}

/// Fencing tokens, where the store keeps them, grow with every hold of a key.
pub async fn fencing_tokens_grow(h: Harness) {
    let key = h.key("fencing");
    let mut last = 0;
    for _ in 0..4 {
        let l = h.lock(&key, 5_000);
        assert_eq!(l.fencing_token(), None);
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        match l.fencing_token() {
            Some(token) => {
                assert!(h.fencing, "the store gives tokens");
                assert!(token > last, "{token} after {last}");
                last = token;
            }
            None => assert!(!h.fencing, "the store should give a fencing token"),
        }
        assert!(l.release().await.unwrap());
        assert_eq!(l.fencing_token(), None, "no token once released");
    }
}

/// Holding one key says nothing about another.
pub async fn keys_are_independent(h: Harness) {
    let (a, b) = (h.lock(&h.key("indep-a"), 5_000), h.lock(&h.key("indep-b"), 5_000));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    assert!(!b.is_locked().await.unwrap());
    assert!(b.acquire(AcquireOptions::default()).await.unwrap());
    assert!(a.release().await.unwrap() && b.release().await.unwrap());
}

/// The end of a hold that this handle released is reported as released.
pub async fn hold_ends_released(h: Harness) {
    let l = h.lock(&h.key("ends-released"), 5_000);
    assert!(matches!(l.hold_ended().await, HoldEnd::Lost(_)), "nothing held: lost at once");
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let (end, ()) = futures_util::join!(l.hold_ended(), async {
        h.sleep(50).await;
        assert!(l.release().await.unwrap());
    });
    assert_eq!(end, HoldEnd::Released);
}

/// A hold nobody extends is reported lost at its local deadline: its TTL less the drift
/// allowance from the acquire's send time, not before.
pub async fn hold_ends_lost_at_ttl(h: Harness) {
    let l = h.lock(&h.key("ends-ttl"), 200);
    // Before the acquire: the deadline runs from its send time, and a slow round trip
    // would otherwise count against it (lost "after 195 ms" on a loaded machine).
    let start = h.now();
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let end = l.hold_ended().await;
    let after = h.now() - start;
    match end {
        HoldEnd::Lost(err) => assert_eq!(err.code(), "LOCK_NOT_HELD"),
        HoldEnd::Released => panic!("not released"),
    }
    let earliest = 200 - crate::lock::default_drift_ms(200);
    assert!(
        (earliest..=200 + h.slack_ms).contains(&after),
        "reported lost after {after} ms for a 200 ms TTL"
    );
}

/// Auto-extend keeps a hold through work that lasts many TTLs, and stops at release.
pub async fn auto_extend_outlives_many_ttls(h: Harness) {
    let key = h.key("auto-extend");
    let l = h.lock(&key, 150);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let other = h.lock(&key, 5_000);
    let ((), end, ()) =
        futures_util::join!(l.keep_extending(AutoExtend::for_ttl_ms(150)), l.hold_ended(), async {
            for _ in 0..8 {
                h.sleep(100).await;
                assert!(!other.acquire(AcquireOptions::default()).await.unwrap(), "held throughout");
            }
            assert!(!l.is_expired().await.unwrap());
            assert!(l.release().await.unwrap());
        });
    assert_eq!(end, HoldEnd::Released, "kept for 800 ms of a 150 ms TTL, then released");
}

/// Auto-extend stops at its cap; the hold then expires at its TTL.
pub async fn auto_extend_stops_at_its_cap(h: Harness) {
    let l = h.lock(&h.key("auto-cap"), 150);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let start = h.now();
    let plan = AutoExtend::for_ttl_ms(150).with_max_hold_ms(300);
    let ((), end) = futures_util::join!(l.keep_extending(plan), l.hold_ended());
    let after = h.now() - start;
    assert!(matches!(end, HoldEnd::Lost(ref err) if err.code() == "LOCK_NOT_HELD"), "{end:?}");
    // Extended last at 300 ms at the latest, so it ends by 450 ms; and not before the cap.
    assert!((300..=450 + h.slack_ms).contains(&after), "ended after {after} ms");
}

/// A hold freed behind the holder's back and taken by another is reported lost at the
/// next auto-extend.
pub async fn auto_extend_sees_theft(h: Harness) {
    let key = h.key("auto-theft");
    let l = h.lock(&key, 300);
    assert!(l.acquire(AcquireOptions::default()).await.unwrap());
    let copy = Lock::restore(l.serialized().unwrap(), h.store.clone(), h.timer.clone());
    let thief = h.lock(&key, 5_000);
    let ((), end, ()) =
        futures_util::join!(l.keep_extending(AutoExtend::for_ttl_ms(300)), l.hold_ended(), async {
            h.sleep(20).await;
            assert!(copy.release().await.unwrap());
            assert!(thief.acquire(AcquireOptions::default()).await.unwrap());
        });
    assert!(matches!(end, HoldEnd::Lost(ref err) if err.code() == "LOCK_NOT_HELD"), "{end:?}");
    assert!(thief.release().await.unwrap(), "the thief's hold was left alone");
}

/// For stores without permits: the first call says `UNSUPPORTED`, and nothing is taken.
async fn refuses_permits(h: &Harness) -> bool {
    if h.permits {
        return false;
    }
    let s = h.handle(&h.key("unsupported"), 1_000, HoldKind::Permit { limit: 2 });
    assert_eq!(s.acquire(AcquireOptions::default()).await.unwrap_err().code(), "UNSUPPORTED");
    assert!(!s.has_owner(), "a refused semaphore holds nothing");
    let w = h.handle(&h.key("unsupported"), 1_000, HoldKind::Write);
    assert_eq!(w.acquire(wait(100, 10)).await.unwrap_err().code(), "UNSUPPORTED");
    true
}

/// A semaphore of 3 under 12 contenders: never more than 3 inside, and all get through.
pub async fn semaphore_admits_up_to_its_limit(h: Harness) {
    if refuses_permits(&h).await {
        return;
    }
    let key = h.key("semaphore");
    let kind = HoldKind::Permit { limit: 3 };
    let inside = AtomicU64::new(0);
    let most = AtomicU64::new(0);
    let contenders: Vec<Lock> = (0..12).map(|_| h.handle(&key, 5_000, kind)).collect();
    join_all(contenders.iter().map(|s| {
        let (inside, most, h) = (&inside, &most, &h);
        async move {
            assert!(s.acquire(wait(10_000, 20)).await.unwrap(), "every contender gets a permit in time");
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            assert!(s.count().await.unwrap() <= 3);
            h.sleep(30).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            assert!(s.release().await.unwrap());
        }
    }))
    .await;
    assert_eq!(most.load(Ordering::SeqCst), 3, "three at once, never more");
    assert_eq!(h.handle(&key, 1_000, kind).count().await.unwrap(), 0);
    // Every handle must agree on the limit while the semaphore is held.
    let one = h.handle(&key, 5_000, HoldKind::Permit { limit: 1 });
    assert!(one.acquire(AcquireOptions::default()).await.unwrap());
    let three = h.handle(&key, 5_000, HoldKind::Permit { limit: 3 });
    assert_eq!(three.acquire(AcquireOptions::default()).await.unwrap_err().code(), "INVALID_ARGUMENT");
    assert_eq!(one.count().await.unwrap(), 1, "the mismatched handle took nothing");
    assert!(one.release().await.unwrap());
}

/// Each permit expires on its own TTL: a crashed holder frees its permit.
pub async fn semaphore_permits_expire(h: Harness) {
    if refuses_permits(&h).await {
        return;
    }
    let key = h.key("semaphore-ttl");
    let kind = HoldKind::Permit { limit: 2 };
    let (a, b, c) = (h.handle(&key, 150, kind), h.handle(&key, 5_000, kind), h.handle(&key, 5_000, kind));
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    assert!(b.acquire(AcquireOptions::default()).await.unwrap());
    assert!(!c.acquire(AcquireOptions::default()).await.unwrap(), "full");
    let start = h.now();
    assert!(c.acquire(wait(2_000, 20)).await.unwrap(), "a's permit expired");
    assert!(h.now() - start >= 100);
    assert!(a.is_expired().await.unwrap());
    assert!(!a.release().await.unwrap(), "a lost permit releases nothing");
    assert_eq!(c.count().await.unwrap(), 2);
    assert!(b.release().await.unwrap() && c.release().await.unwrap());
}

/// Readers share the key; a writer is alone.
pub async fn readers_share_and_a_writer_is_alone(h: Harness) {
    if refuses_permits(&h).await {
        return;
    }
    let key = h.key("rw");
    let (r1, r2, w) = (
        h.handle(&key, 5_000, HoldKind::Read),
        h.handle(&key, 5_000, HoldKind::Read),
        h.handle(&key, 5_000, HoldKind::Write),
    );
    assert!(r1.acquire(AcquireOptions::default()).await.unwrap());
    assert!(r2.acquire(AcquireOptions::default()).await.unwrap(), "readers share");
    assert_eq!(r1.count().await.unwrap(), 2);
    assert!(!w.acquire(AcquireOptions::default()).await.unwrap(), "no writer while read");
    assert!(w.release().await.is_ok());
    assert!(r1.release().await.unwrap() && r2.release().await.unwrap());
    assert!(w.acquire(AcquireOptions::default()).await.unwrap(), "alone once the readers left");
    let r3 = h.handle(&key, 5_000, HoldKind::Read);
    assert!(!r3.acquire(AcquireOptions::default()).await.unwrap(), "no reader while written");
    let w2 = h.handle(&key, 5_000, HoldKind::Write);
    assert!(!w2.acquire(AcquireOptions::default()).await.unwrap(), "no second writer");
    // A plain lock and a semaphore on the same name are other things.
    assert!(h.lock(&key, 1_000).acquire(AcquireOptions::default()).await.unwrap());
    assert!(w.release().await.unwrap());
}

/// A waiting writer keeps new readers out, so a stream of readers cannot starve it.
pub async fn a_waiting_writer_is_not_starved(h: Harness) {
    if refuses_permits(&h).await {
        return;
    }
    let key = h.key("rw-starve");
    let r1 = h.handle(&key, 5_000, HoldKind::Read);
    let w = h.handle(&key, 5_000, HoldKind::Write);
    let r2 = h.handle(&key, 5_000, HoldKind::Read);
    assert!(r1.acquire(AcquireOptions::default()).await.unwrap());
    let (writer_got, ()) = futures_util::join!(w.acquire(wait(3_000, 20)), async {
        h.sleep(60).await;
        assert!(
            !r2.acquire(AcquireOptions::default()).await.unwrap(),
            "a new reader waits behind the writer"
        );
        assert!(r1.release().await.unwrap());
    });
    assert!(writer_got.unwrap(), "the writer got in once the reader left");
    assert!(!r2.acquire(AcquireOptions::default()).await.unwrap());
    assert!(w.release().await.unwrap());
    assert!(r2.acquire(AcquireOptions::default()).await.unwrap(), "readers again after the writer");
    assert!(r2.release().await.unwrap());
}

/// A writer that gives up waiting takes its claim with it.
pub async fn a_writer_that_gives_up_lets_readers_in(h: Harness) {
    if refuses_permits(&h).await {
        return;
    }
    let key = h.key("rw-giveup");
    let (r1, w, r2) = (
        h.handle(&key, 5_000, HoldKind::Read),
        h.handle(&key, 5_000, HoldKind::Write),
        h.handle(&key, 5_000, HoldKind::Read),
    );
    assert!(r1.acquire(AcquireOptions::default()).await.unwrap());
    assert!(!w.acquire(wait(100, 20)).await.unwrap());
    assert!(r2.acquire(AcquireOptions::default()).await.unwrap(), "the claim went with the writer");
    assert!(r1.release().await.unwrap() && r2.release().await.unwrap());
}

/// A permit serialized and restored elsewhere releases the same permit.
pub async fn permits_serialize_and_restore(h: Harness) {
    if refuses_permits(&h).await {
        return;
    }
    let key = h.key("permit-handoff");
    let kind = HoldKind::Permit { limit: 2 };
    let a = h.handle(&key, 5_000, kind);
    assert!(a.acquire(AcquireOptions::default()).await.unwrap());
    let b = Lock::restore(a.serialized().unwrap(), h.store.clone(), h.timer.clone());
    assert_eq!(b.kind(), kind);
    assert_eq!(b.count().await.unwrap(), 1);
    assert!(b.release().await.unwrap());
    assert_eq!(a.count().await.unwrap(), 0);
    let w = h.handle(&key, 5_000, HoldKind::Write);
    assert!(w.acquire(AcquireOptions::default()).await.unwrap());
    let copy = Lock::restore(w.serialized().unwrap(), h.store.clone(), h.timer.clone());
    assert_eq!(copy.kind(), HoldKind::Write);
    assert!(copy.release().await.unwrap());
}
