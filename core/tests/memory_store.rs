//! `MemoryStore` and `Lock` behaviour beyond the shared suite: exact timings on the
//! fake clock, wake-on-release, the sweep, and failures mid-call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use locksmith_core::{
    validate, AcquireOptions, FakeTimer, Grant, Lock, LockError, LockStore, MemoryStore, Result,
    SyncLockStore,
};

mod common;
use common::waiting as wait;

fn setup() -> (FakeTimer, Arc<MemoryStore>) {
    let timer = FakeTimer::new();
    let store = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
    (timer, store)
}

fn lock(timer: &FakeTimer, store: &Arc<MemoryStore>, key: &str, ttl: u64) -> Lock {
    Lock::new(key, ttl, store.clone(), Arc::new(timer.clone())).unwrap()
}

#[test]
fn waiter_wakes_on_release_not_a_retry_delay_later() {
    let (timer, store) = setup();
    let (a, b) = (lock(&timer, &store, "k", 10_000), lock(&timer, &store, "k", 10_000));
    timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        let (got, ()) = futures_util::join!(b.acquire(wait(5_000, 1_000)), async {
            timer.sleep_for_test(120).await;
            assert!(a.release().await.unwrap());
        });
        assert!(got.unwrap());
    });
    assert_eq!(timer.now(), 120, "the waiter took the lock the moment it was released");
}

#[test]
fn waiter_gives_up_exactly_at_the_deadline() {
    let (timer, store) = setup();
    let (a, b) = (lock(&timer, &store, "k", 10_000), lock(&timer, &store, "k", 10_000));
    timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        assert!(!b.acquire(wait(300, 70)).await.unwrap());
    });
    assert_eq!(timer.now(), 300);
}

#[test]
fn attempts_counts_every_attempt_a_handle_sends() {
    let (timer, store) = setup();
    let (a, b) = (lock(&timer, &store, "k", 10_000), lock(&timer, &store, "k", 10_000));
    assert_eq!(b.attempts(), 0);
    timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        // Attempts at 0, 70, 140, 210 and 280 ms, and the last at the 300 ms deadline.
        assert!(!b.acquire(wait(300, 70)).await.unwrap());
    });
    assert_eq!((a.attempts(), b.attempts()), (1, 6));
    assert_eq!(b.try_acquire_now().map(Result::unwrap), Some(false));
    assert_eq!(b.attempts(), 7, "the synchronous attempt counts too");
}

#[test]
fn waiter_retries_on_expiry_within_one_retry_delay() {
    let (timer, store) = setup();
    let (a, b) = (lock(&timer, &store, "k", 130), lock(&timer, &store, "k", 10_000));
    timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        assert!(b.acquire(wait(1_000, 50)).await.unwrap());
    });
    assert_eq!(timer.now(), 150, "first attempt after the 130 ms expiry");
}

#[test]
fn expired_keys_are_swept() {
    let (timer, store) = setup();
    for i in 0..100_000 {
        assert!(store.acquire_now(&format!("k{i}"), "o", 10).is_some());
    }
    assert_eq!(store.entry_count(), 100_000);
    timer.advance(1_000);
    // The next insert a second after the last sweep sweeps in passing.
    assert!(store.acquire_now("fresh", "o", 10_000).is_some());
    assert_eq!(store.entry_count(), 1);
    for i in 0..1_000 {
        store.acquire_now(&format!("x{i}"), "o", 10);
    }
    timer.advance(20);
    store.sweep();
    assert_eq!(store.entry_count(), 1);
}

#[test]
fn a_million_cycles_leave_the_store_empty() {
    let (timer, store) = setup();
    let l = lock(&timer, &store, "hot", 1_000);
    for _ in 0..1_000_000 {
        assert!(l.try_acquire_now().unwrap().unwrap());
        assert!(l.release_now().unwrap());
    }
    assert_eq!(store.entry_count(), 0);
}

#[test]
fn sync_fast_path_matches_async_semantics() {
    let (timer, store) = setup();
    let (a, b) = (lock(&timer, &store, "k", 100), lock(&timer, &store, "k", 100));
    assert_eq!(a.extend_now(None).unwrap().unwrap_err().code(), "LOCK_NOT_HELD");
    assert!(a.try_acquire_now().unwrap().unwrap());
    assert!(!a.try_acquire_now().unwrap().unwrap(), "not re-entrant");
    assert!(!b.try_acquire_now().unwrap().unwrap());
    assert!(a.fencing_token().is_some());
    a.extend_now(Some(500)).unwrap().unwrap();
    timer.advance(400);
    assert!(!b.try_acquire_now().unwrap().unwrap());
    timer.advance(200);
    assert!(b.try_acquire_now().unwrap().unwrap());
    assert!(!a.release_now().unwrap());
    assert!(b.fencing_token() > a.fencing_token());
    let err = a.extend_now(None).unwrap().unwrap_err();
    assert_eq!(err.code(), "LOCK_NOT_HELD");
    assert!(err.to_string().starts_with("locksmith: lock \"k\" is not held"), "{err}");
}

#[test]
fn invalid_arguments_are_refused() {
    let (timer, store) = setup();
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let cases: Vec<(&str, u64)> =
        vec![("", 1), ("a\0b", 1), ("k", 0), ("k", validate::MAX_TTL_MS + 1), ("k", u64::MAX)];
    for (key, ttl) in cases {
        let err = Lock::new(key, ttl, store.clone(), t.clone()).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{key:?} {ttl}");
    }
    let l = lock(&timer, &store, "k", 100);
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        assert_eq!(l.extend(Some(0)).await.unwrap_err().code(), "INVALID_ARGUMENT");
        assert_eq!(l.acquire(wait(10, 0)).await.unwrap_err().code(), "INVALID_ARGUMENT", "retry delay 0");
        assert!(!l.is_expired().await.unwrap(), "a refused extend leaves the hold alone");
    });
    for (timeout, retry) in
        [(Some(-1.0), None), (Some(f64::NAN), None), (None, Some(0.0)), (None, Some(-3.0))]
    {
        assert_eq!(
            validate::js::acquire_options(timeout, retry, None).unwrap_err().code(),
            "INVALID_ARGUMENT"
        );
    }
    assert_eq!(validate::js::acquire_options(None, None, None).unwrap(), wait(0, 50));
}

/// Takes the key in the inner store, then reports a failure: the answer was lost.
struct LosesAcquireAnswers {
    inner: Arc<MemoryStore>,
    fail: AtomicBool,
}

#[async_trait::async_trait]
impl LockStore for LosesAcquireAnswers {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        let taken = self.inner.acquire(key, owner, ttl_ms).await?;
        if self.fail.load(Ordering::SeqCst) {
            return Err(LockError::StoreUnavailable("connection reset".into()));
        }
        Ok(taken)
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        self.inner.release(key, owner).await
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.inner.extend(key, owner, ttl_ms).await
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        self.inner.is_locked(key).await
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        self.inner.remaining_time(key).await
    }
}

#[test]
fn a_failed_acquire_leaves_no_hold_behind() {
    let (timer, inner) = setup();
    let store = Arc::new(LosesAcquireAnswers { inner: inner.clone(), fail: AtomicBool::new(true) });
    let l = Lock::new("k", 1_000, store.clone(), Arc::new(timer.clone())).unwrap();
    timer.run(async {
        let err = l.acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "STORE_UNAVAILABLE");
        // The error answers at once; the attempt's token is released in the background.
        assert!(err.hold_may_remain(), "{err}");
        timer.sleep_for_test(1).await;
        assert!(!inner.is_locked_now("k"), "the hold taken before the failure was released");
        assert!(!l.is_expired().await.unwrap());
        store.fail.store(false, Ordering::SeqCst);
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        // A store without owner lookup: is_expired falls back to the local expiry estimate.
        assert!(!l.is_expired().await.unwrap());
        assert_eq!(l.fencing_token(), None, "this store gives no tokens");
    });
    timer.advance(1_000);
    timer.run(async {
        assert!(l.is_expired().await.unwrap());
    });
    let _ = Grant::default();
}

#[test]
fn without_release_signals_waiters_poll() {
    let timer = FakeTimer::new();
    let store = Arc::new(MemoryStore::new(Arc::new(timer.clone())).without_release_signals());
    let (a, b) = (lock(&timer, &store, "k", 10_000), lock(&timer, &store, "k", 10_000));
    timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        let (got, ()) = futures_util::join!(b.acquire(wait(5_000, 100)), async {
            timer.sleep_for_test(120).await;
            assert!(a.release().await.unwrap());
        });
        assert!(got.unwrap());
    });
    assert_eq!(timer.now(), 200, "the waiter found the lock free at its next poll");
}

/// `reset` makes a used handle a fresh lock on another key: no hold, no history, no
/// signal of its old hold; a bad key or TTL leaves it as it was.
#[test]
fn reset_handle_is_a_fresh_lock() {
    let (timer, store) = setup();
    let mut l = lock(&timer, &store, "first", 1_000);
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        assert!(l.release().await.unwrap());
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        timer.sleep_for_test(1_500).await;
        assert!(l.is_expired().await.unwrap(), "lost to its TTL before the reset");
    });
    assert_eq!(l.reset("", 1_000).unwrap_err().code(), "INVALID_ARGUMENT");
    assert_eq!(l.reset("second", 0).unwrap_err().code(), "INVALID_ARGUMENT");
    assert_eq!((l.key(), l.ttl_ms()), ("first", 1_000), "a refused reset changes nothing");

    l.reset("second", 2_000).unwrap();
    assert_eq!((l.key(), l.ttl_ms()), ("second", 2_000));
    assert!(!l.has_owner());
    assert_eq!(l.held_generation(), None);
    assert_eq!(l.fencing_token(), None);
    timer.run(async {
        assert!(!l.is_expired().await.unwrap(), "the old hold's loss is forgotten");
        assert!(!l.release().await.unwrap());
        assert_eq!(l.extend(None).await.unwrap_err().code(), "LOCK_NOT_HELD");
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        assert!(store.is_locked_now("second"));
        assert!(!store.is_locked_now("first"));
        timer.sleep_for_test(1_500).await;
        assert!(store.is_locked_now("second"), "held for the new TTL");
        assert!(l.release().await.unwrap());
    });
}

/// After `reset`, the first hold has the generation the old handle's first hold had; how
/// that old hold ended must not be taken for the new one's end.
#[test]
fn reset_forgets_how_old_holds_ended() {
    use futures_util::future::{select, Either};
    let (timer, store) = setup();
    let mut l = lock(&timer, &store, "first", 1_000);
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        assert!(l.release().await.unwrap());
    });
    l.reset("second", 1_000).unwrap();
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        match select(Box::pin(l.hold_ended()), Box::pin(timer.sleep_for_test(100))).await {
            Either::Left((end, _)) => panic!("the new hold is still held, yet its watch ended: {end:?}"),
            Either::Right(((), _)) => {}
        }
        assert!(l.release().await.unwrap());
        assert!(matches!(l.hold_ended().await, locksmith_core::HoldEnd::Released));
    });
}

/// After `reset`, a stop of the old handle's first hold's auto-extend must not stop the
/// new first hold's.
#[test]
fn reset_forgets_an_old_auto_extend_stop() {
    use futures_util::future::{select, Either};
    let (timer, store) = setup();
    let mut l = lock(&timer, &store, "first", 300);
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        l.stop_extending();
        assert!(l.release().await.unwrap());
    });
    l.reset("second", 300).unwrap();
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        let plan = locksmith_core::AutoExtend::for_ttl_ms(300);
        match select(Box::pin(l.keep_extending(plan)), Box::pin(timer.sleep_for_test(1_000))).await {
            Either::Left(((), _)) => panic!("auto-extend stopped on its own"),
            Either::Right(((), _)) => {}
        }
        assert!(store.is_locked_now("second"), "held past three TTLs by auto-extend");
        assert!(l.release().await.unwrap());
    });
}

/// The memory store, saying that locks of this process wait on a key when `waiting`
/// is set, and counting acquire attempts.
struct WithLocalWaiters {
    inner: Arc<MemoryStore>,
    waiting: AtomicBool,
    attempts: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl LockStore for WithLocalWaiters {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.inner.acquire(key, owner, ttl_ms).await
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        self.inner.release(key, owner).await
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.inner.extend(key, owner, ttl_ms).await
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        self.inner.is_locked(key).await
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        self.inner.remaining_time(key).await
    }
    fn release_signal(&self, key: &str) -> Option<locksmith_core::BoxFuture<'static, ()>> {
        self.inner.release_signal(key)
    }
    fn has_local_waiters(&self, _key: &str) -> bool {
        self.waiting.load(Ordering::SeqCst)
    }
}

/// Behind waiters of its own process, an acquire that may wait queues instead of trying
/// first; it still tries at its deadline, and one that may not wait tries at once.
#[test]
fn an_acquire_that_may_wait_queues_behind_local_waiters() {
    let (timer, inner) = setup();
    let store = Arc::new(WithLocalWaiters {
        inner,
        waiting: AtomicBool::new(false),
        attempts: std::sync::atomic::AtomicUsize::new(0),
    });
    let on = |key: &str| Lock::new(key, 10_000, store.clone(), Arc::new(timer.clone())).unwrap();
    let (holder, queued, immediate) = (on("k"), on("k"), on("k"));
    let attempts = || store.attempts.load(Ordering::SeqCst);
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        store.waiting.store(true, Ordering::SeqCst);
        let before = attempts();
        assert!(!queued.acquire(wait(300, 1_000)).await.unwrap());
        assert_eq!(attempts() - before, 1, "one attempt, at the deadline, none on arrival");
    });
    assert_eq!(timer.now(), 300);
    timer.run(async {
        let before = attempts();
        assert!(!immediate.acquire(AcquireOptions::default()).await.unwrap());
        assert_eq!(attempts() - before, 1, "an acquire that may not wait tries");
        // Queued, it gets the key when the holder releases.
        let (got, ()) = futures_util::join!(queued.acquire(wait(5_000, 1_000)), async {
            timer.sleep_for_test(50).await;
            assert!(holder.release().await.unwrap());
        });
        assert!(got.unwrap());
    });
    assert_eq!(timer.now(), 350, "woken by the release");
}

/// A waiter keeps its place among the store's listeners across the retries its timer
/// starts: releases wake waiters in arrival order even after each retried a few times.
#[test]
fn waiters_keep_their_place_across_retries() {
    let (timer, inner) = setup();
    let store = Arc::new(WithLocalWaiters {
        inner,
        waiting: AtomicBool::new(true),
        attempts: std::sync::atomic::AtomicUsize::new(0),
    });
    let on = || Lock::new("k", 10_000, store.clone(), Arc::new(timer.clone())).unwrap();
    let holder = on();
    let order = Mutex::new(Vec::new());
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let turn = |name: &'static str, arrives: u64| {
            let (timer, order, lock) = (&timer, &order, on());
            async move {
                timer.sleep_for_test(arrives).await;
                // Retries at +50 ms: a, b and c try again at 50/60/70, 100/110/120, ...
                assert!(lock.acquire(wait(5_000, 50)).await.unwrap(), "{name} timed out");
                order.lock().unwrap().push(name);
                timer.sleep_for_test(3).await;
                assert!(lock.release().await.unwrap());
            }
        };
        futures_util::join!(turn("a", 0), turn("b", 10), turn("c", 20), async {
            timer.sleep_for_test(205).await;
            assert!(holder.release().await.unwrap());
        });
    });
    assert_eq!(*order.lock().unwrap(), ["a", "b", "c"]);
}

#[test]
fn weighted_permits_count_toward_the_limit_and_go_with_their_hold() {
    use locksmith_core::HoldKind;
    let (timer, store) = setup();
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let sem = |ttl| Lock::of_kind("s", ttl, HoldKind::Permit { limit: 5 }, store.clone(), t.clone()).unwrap();
    let (a, b, c) = (sem(10_000), sem(10_000), sem(200));
    a.set_permits(3).unwrap();
    b.set_permits(3).unwrap();
    c.set_permits(2).unwrap();
    timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        assert_eq!(a.count().await.unwrap(), 3, "a holder of three counts three");
        assert!(!b.acquire(AcquireOptions::default()).await.unwrap(), "3 + 3 > 5");
        assert!(c.acquire(AcquireOptions::default()).await.unwrap(), "3 + 2 fits");
        assert_eq!(a.count().await.unwrap(), 5);
        a.extend(None).await.unwrap();
        assert_eq!(a.count().await.unwrap(), 5, "an extend keeps the weight");
        assert!(a.release().await.unwrap());
        assert_eq!(a.count().await.unwrap(), 2);
        // c's two permits go with its hold when its TTL passes.
        timer.sleep_for_test(300).await;
        assert_eq!(a.count().await.unwrap(), 0);
        assert!(b.acquire(AcquireOptions::default()).await.unwrap());
    });
}

#[test]
fn permits_are_checked_against_the_limit_and_the_kind() {
    use locksmith_core::HoldKind;
    let (timer, store) = setup();
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let sem = Lock::of_kind("s", 1_000, HoldKind::Permit { limit: 3 }, store.clone(), t.clone()).unwrap();
    for bad in [0, 4] {
        let err = sem.set_permits(bad).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(err.to_string().contains("from 1 to the semaphore's limit (3)"), "{err}");
    }
    assert_eq!(sem.permits(), 1, "a refused value leaves the handle's permits as they were");
    let plain = lock(&timer, &store, "k", 1_000);
    assert!(plain.set_permits(1).is_ok());
    let err = plain.set_permits(2).unwrap_err();
    assert!(err.to_string().contains("permits is a semaphore's option"), "{err}");
    let reader = Lock::of_kind("rw", 1_000, HoldKind::Read, store.clone(), t).unwrap();
    assert_eq!(reader.set_permits(2).unwrap_err().code(), "INVALID_ARGUMENT");
}

#[test]
fn a_waiting_acquire_keeps_the_permits_it_started_with() {
    use locksmith_core::HoldKind;
    let (timer, store) = setup();
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let sem = || Lock::of_kind("s", 10_000, HoldKind::Permit { limit: 5 }, store.clone(), t.clone()).unwrap();
    let (holder, waiter) = (sem(), sem());
    holder.set_permits(4).unwrap();
    waiter.set_permits(3).unwrap();
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let (taken, ()) = futures_util::join!(waiter.acquire(wait(5_000, 10)), async {
            timer.sleep_for_test(20).await;
            // Another call on the same handle asks for one permit meanwhile.
            waiter.set_permits(1).unwrap();
            timer.sleep_for_test(20).await;
            assert!(holder.release().await.unwrap());
        });
        assert!(taken.unwrap());
        assert_eq!(waiter.count().await.unwrap(), 3, "the wait took the three it asked for");
    });
}

#[test]
fn holder_and_proclaim_keep_a_value_with_its_hold() {
    use locksmith_core::SyncLockStore;
    let timer = locksmith_core::FakeTimer::new();
    let store = locksmith_core::MemoryStore::new(std::sync::Arc::new(timer.clone()));
    assert_eq!(store.holder("e"), None);
    let token = store.acquire_now("e", "a", 500).unwrap().fencing_token.unwrap();
    assert!(store.proclaim("e", "a", "v1", 1));
    assert!(store.proclaim("e", "a", "v0", 1), "not newer: kept, still held");
    assert!(!store.proclaim("e", "b", "vb", 5));
    let h = store.holder("e").unwrap();
    assert_eq!(
        (h.owner.as_str(), h.fencing_token, h.remaining_ms, h.value.as_deref()),
        ("a", token, 500, Some("v1"))
    );
    assert!(store.extend_now("e", "a", 800));
    assert_eq!(store.holder("e").unwrap().value.as_deref(), Some("v1"), "an extend keeps it");
    assert!(store.release_now("e", "a"));
    assert_eq!(store.holder("e"), None);
    assert!(store.acquire_now("e", "b", 500).is_some());
    assert_eq!(store.holder("e").unwrap().value, None, "a new holder starts without one");
    timer.advance(501);
    assert_eq!(store.holder("e"), None);
}
