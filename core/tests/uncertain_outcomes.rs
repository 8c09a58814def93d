//! Uncertain outcomes, on the fake clock: a store call whose answer does not come may
//! still take effect later. An owner token is never reused while a call carrying it may
//! still take effect; a clean-up undoes only its own attempt, and only once that attempt
//! has settled; a wait never overruns its deadline by a clean-up; the handle's deadline
//! and drift allowance hold whatever watched the hold.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use locksmith_core::{
    default_drift_ms, AcquireOptions, FakeTimer, HoldCheck, HoldEnd, Lock, LockError, LockStore, MemoryStore,
    Result, SyncLockStore, Timer,
};

mod common;
use common::{owner_of, waiting};

/// A store over memory whose calls can be late, fail, or be applied after their answer.
struct Lagging {
    inner: Arc<MemoryStore>,
    timer: FakeTimer,
    /// An acquire is applied, and answered, this many ms after it is sent.
    acquire_ms: AtomicU64,
    /// While set, every call fails after `frozen_ms` without doing anything (a server
    /// that stopped answering, behind a command timeout).
    frozen: AtomicBool,
    frozen_ms: AtomicU64,
    /// The next acquire fails at once without being applied.
    fail_next_acquire: AtomicBool,
    /// While set, a release fails after 100 ms and is applied 500 ms after it was sent.
    slow_releases: AtomicBool,
    /// This many releases fail at once without being applied.
    failed_releases: AtomicU64,
    /// The store's clock runs this many thousandths fast: a TTL of t of its ms ends after
    /// t * 1000 / rate real ms, and it reports remaining time in its own ms.
    clock_rate: u64,
    owners: Mutex<Vec<String>>,
}

impl Lagging {
    fn new(timer: &FakeTimer) -> Arc<Self> {
        Arc::new(Self {
            inner: Arc::new(MemoryStore::new(Arc::new(timer.clone()))),
            timer: timer.clone(),
            acquire_ms: AtomicU64::new(0),
            frozen: AtomicBool::new(false),
            frozen_ms: AtomicU64::new(0),
            fail_next_acquire: AtomicBool::new(false),
            slow_releases: AtomicBool::new(false),
            failed_releases: AtomicU64::new(0),
            clock_rate: 1_000,
            owners: Mutex::new(Vec::new()),
        })
    }

    async fn frozen(&self) -> Result<()> {
        if self.frozen.load(Ordering::SeqCst) {
            self.timer.sleep(self.frozen_ms.load(Ordering::SeqCst)).await;
            return Err(LockError::StoreUnavailable("timed out".into()));
        }
        Ok(())
    }

    fn real_ms(&self, store_ms: u64) -> u64 {
        store_ms * 1_000 / self.clock_rate
    }
}

#[async_trait::async_trait]
impl LockStore for Lagging {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.owners.lock().unwrap().push(owner.to_owned());
        self.frozen().await?;
        if self.fail_next_acquire.swap(false, Ordering::SeqCst) {
            return Err(LockError::StoreUnavailable("connection reset".into()));
        }
        let late = self.acquire_ms.load(Ordering::SeqCst);
        if late == 0 {
            return Ok(self.inner.acquire_now(key, owner, self.real_ms(ttl_ms)).is_some());
        }
        // On its way: applied then whether or not its caller still waits for it.
        let answer = Arc::new(Mutex::new(None));
        let (inner, key, owner, ttl_ms, timer) =
            (self.inner.clone(), key.to_owned(), owner.to_owned(), self.real_ms(ttl_ms), self.timer.clone());
        let slot = answer.clone();
        assert!(self.timer.spawn(Box::pin(async move {
            timer.sleep(late).await;
            *slot.lock().unwrap() = Some(inner.acquire_now(&key, &owner, ttl_ms).is_some());
        })));
        self.timer.sleep(late + 1).await;
        let granted = answer.lock().unwrap().take();
        Ok(granted.expect("applied"))
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        self.frozen().await?;
        if self.failed_releases.load(Ordering::SeqCst) > 0 {
            self.failed_releases.fetch_sub(1, Ordering::SeqCst);
            return Err(LockError::StoreUnavailable("connection reset".into()));
        }
        if self.slow_releases.load(Ordering::SeqCst) {
            let (inner, key, owner, timer) =
                (self.inner.clone(), key.to_owned(), owner.to_owned(), self.timer.clone());
            assert!(self.timer.spawn(Box::pin(async move {
                timer.sleep(500).await;
                inner.release_now(&key, &owner);
            })));
            self.timer.sleep(100).await;
            return Err(LockError::StoreUnavailable("timed out".into()));
        }
        Ok(self.inner.release_now(key, owner))
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.frozen().await?;
        Ok(self.inner.extend_now(key, owner, self.real_ms(ttl_ms)))
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        self.frozen().await?;
        Ok(self.inner.is_locked_now(key))
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        self.frozen().await?;
        Ok(self.inner.remaining_time_now(key).map(|ms| ms * self.clock_rate / 1_000))
    }
    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        self.frozen().await?;
        Ok(Some(self.inner.is_held_by_now(key, owner)))
    }
    async fn owner_remaining_time(&self, key: &str, owner: &str) -> Result<HoldCheck> {
        self.frozen().await?;
        Ok(match self.inner.remaining_time_now(key) {
            Some(ms) if self.inner.is_held_by_now(key, owner) => {
                HoldCheck::Held { remaining_ms: ms * self.clock_rate / 1_000 }
            }
            _ => HoldCheck::NotHeld,
        })
    }
}

#[test]
fn a_late_clean_up_of_an_unanswered_attempt_cannot_free_the_next_attempts_hold() {
    // The first attempt fails unanswered; its clean-up release times out but reaches the
    // store 500 ms after it was sent. Meanwhile the wait's next attempt takes the key.
    // With one token for both attempts, that late release freed the new hold while the
    // handle still counted it as live: a second holder got in.
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    store.fail_next_acquire.store(true, Ordering::SeqCst);
    store.slow_releases.store(true, Ordering::SeqCst);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let a = Lock::new("k", 10_000, store.clone(), t.clone()).unwrap();
    let b = Lock::new("k", 10_000, store.clone(), t).unwrap();
    assert!(timer.run(a.acquire(waiting(5_000, 50))).unwrap());
    let owners = store.owners.lock().unwrap().clone();
    assert_eq!(owners.len(), 2, "{owners:?}");
    assert_ne!(owners[0], owners[1], "the attempt after an unanswered one has a fresh token");
    store.slow_releases.store(false, Ordering::SeqCst);
    timer.run(timer.sleep_for_test(1_000));
    assert!(store.inner.is_held_by_now("k", &owner_of(&a)), "a's hold outlived the late release");
    assert!(!timer.run(b.acquire(AcquireOptions::default())).unwrap(), "no second holder");
    assert!(a.live_generation().is_some());
}

#[test]
fn an_abort_during_an_attempt_applied_late_leaves_nothing_held_once_it_settles() {
    // The store applies (and answers) an acquire 100 ms after it is sent; the wait is
    // aborted at 30 ms. The abort answers at once and says a hold may remain; the
    // attempt's release goes out once it has settled, so the key does not stay held.
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    store.acquire_ms.store(100, Ordering::SeqCst);
    let l = Lock::new("k", 10_000, store.clone(), Arc::new(timer.clone())).unwrap();
    let abort = locksmith_core::Abort::new();
    let (answer, ()) = timer.run(async {
        futures_util::join!(l.acquire_abortable(waiting(5_000, 50), &abort), async {
            timer.sleep_for_test(30).await;
            abort.abort();
        })
    });
    let err = answer.unwrap_err();
    assert_eq!(err.code(), "ABORTED");
    assert!(err.hold_may_remain(), "an attempt was on its way: {err}");
    assert!(err.to_string().contains("may remain"), "{err}");
    assert_eq!(timer.now(), 30, "answered at the abort");
    timer.run(timer.sleep_for_test(200));
    assert!(!store.inner.is_locked_now("k"), "the late grant was released once it settled");
    assert!(!timer.run(l.release()).unwrap(), "the handle holds nothing");
}

#[test]
fn an_abort_between_attempts_says_nothing_may_remain() {
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let (a, b) = (
        Lock::new("k", 10_000, store.clone(), t.clone()).unwrap(),
        Lock::new("k", 10_000, store, t).unwrap(),
    );
    let abort = locksmith_core::Abort::new();
    let (answer, ()) = timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(b.acquire_abortable(waiting(5_000, 1_000), &abort), async {
            timer.sleep_for_test(300).await;
            abort.abort();
        })
    });
    let err = answer.unwrap_err();
    assert_eq!(err.code(), "ABORTED");
    assert!(!err.hold_may_remain(), "{err}");
}

#[test]
fn a_wait_rides_out_an_outage_when_the_handle_still_records_an_earlier_hold() {
    // The handle's last hold ran out unreleased and nothing read its signal; then the
    // store stops answering for 1.5 s. A waiting acquire rides that out like any other
    // outage (it had failed at once on the check of the old hold).
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    store.frozen_ms.store(300, Ordering::SeqCst);
    let l = Lock::new("k", 100, store.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    timer.advance(200);
    store.frozen.store(true, Ordering::SeqCst);
    let (taken, ()) = timer.run(async {
        futures_util::join!(l.acquire(waiting(5_000, 50)), async {
            timer.sleep_for_test(1_500).await;
            store.frozen.store(false, Ordering::SeqCst);
        })
    });
    assert!(taken.unwrap(), "taken once the store answered again");
    assert!(timer.now() >= 1_700 && timer.now() < 3_000, "at {}", timer.now());
}

#[test]
fn a_failed_attempt_at_the_deadline_does_not_wait_for_its_clean_up() {
    // timeout 500; calls to a frozen store fail after 300 ms. The store freezes at
    // 450 ms: the attempt sent then fails at 750 ms, and the wait answers then. (It used
    // to await the attempt's clean-up release, another 300 ms on the frozen store.)
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    store.frozen_ms.store(300, Ordering::SeqCst);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let (a, b) = (
        Lock::new("k", 10_000, store.clone(), t.clone()).unwrap(),
        Lock::new("k", 10_000, store.clone(), t).unwrap(),
    );
    assert!(timer.run(a.acquire(AcquireOptions::default())).unwrap());
    let (answer, ()) = timer.run(async {
        futures_util::join!(b.acquire(waiting(500, 100)), async {
            timer.sleep_for_test(450).await;
            store.frozen.store(true, Ordering::SeqCst);
        })
    });
    let err = answer.unwrap_err();
    assert_eq!(err.code(), "STORE_UNAVAILABLE");
    assert!(err.hold_may_remain(), "its clean-up was not answered: {err}");
    assert!(timer.now() <= 800, "one command timeout past the deadline at most: {} ms", timer.now());
}

#[test]
fn an_extend_past_the_local_deadline_is_refused_though_nothing_watched_the_hold() {
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    let l = Lock::new("k", 5_000, store.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    timer.advance(5_000 - default_drift_ms(5_000) + 1);
    assert!(store.inner.is_held_by_now("k", &owner_of(&l)), "the store still has it");
    let err = timer.run(l.extend(None)).unwrap_err();
    assert_eq!(err.code(), "LOCK_NOT_HELD", "{err}");
    assert!(matches!(timer.run(l.hold_ended()), HoldEnd::Lost(_)));
    // Just before the deadline, an extend goes through.
    let l = Lock::new("k2", 5_000, store, Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    timer.advance(5_000 - default_drift_ms(5_000) - 1);
    assert!(timer.run(l.extend(None)).is_ok());
}

#[test]
fn the_due_check_after_a_long_extend_allows_drift_for_the_time_it_trusts() {
    // A 1 s lock extended to an hour on a store whose clock runs 0.5 % fast (inside the
    // 1 % the default allowance covers). The due check trusts the store's remaining time;
    // its drift allowance must follow that time, not the lock's 1 s TTL, or the handle
    // counts the hold as live after the store has freed the key.
    let timer = FakeTimer::new();
    let mut late = Arc::into_inner(Lagging::new(&timer)).unwrap();
    late.clock_rate = 1_005;
    let store = Arc::new(late);
    let l = Lock::new("k", 1_000, store.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    timer.run(l.extend(Some(3_600_000))).unwrap();
    let extended_at = timer.now();
    let gone_at = extended_at + 3_600_000 * 1_000 / 1_005;
    let end = timer.run(async { (l.hold_ended().await, timer.now()) });
    assert!(matches!(end.0, HoldEnd::Lost(_)), "{:?}", end.0);
    assert!(
        end.1 <= gone_at,
        "the handle counted the hold live until {} ms; the store freed it at {gone_at}",
        end.1
    );
    assert!(!store.inner.is_locked_now("k") || timer.now() < gone_at);
}

#[test]
fn an_extend_to_a_shorter_ttl_counts_from_its_send_even_unanswered() {
    // A 10 s hold is extended by 1 s; the store applies the extend but its answer is lost.
    // The store now frees the key 1 s after the send: so must the handle's deadline.
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    store.frozen_ms.store(300, Ordering::SeqCst);
    let l = Lock::new("k", 10_000, store.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    store.inner.extend_now("k", &owner_of(&l), 1_000); // applied, ...
    store.frozen.store(true, Ordering::SeqCst); // ... and its answer lost
    assert_eq!(timer.run(l.extend(Some(1_000))).unwrap_err().code(), "STORE_UNAVAILABLE");
    store.frozen.store(false, Ordering::SeqCst);
    let end = timer.run(async { (l.hold_ended().await, timer.now()) });
    assert!(matches!(end.0, HoldEnd::Lost(_)), "{:?}", end.0);
    assert!(end.1 <= 1_000, "live by the handle's reckoning until {} ms; the store freed it at 1000", end.1);
}

#[test]
fn a_lock_all_whose_give_back_failed_frees_its_keys_soon_not_at_their_ttl() {
    // Taken key by key: "a" is granted, "b" is held by someone else, and giving "a" back
    // fails (twice). The attempt's clean-up is tried again in the background, so "a" is
    // free well before its 10 s TTL.
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let other = Lock::new("b", 10_000, store.clone(), t.clone()).unwrap();
    assert!(timer.run(other.acquire(AcquireOptions::default())).unwrap());
    let all = Lock::all(vec!["a".into(), "b".into()], 10_000, store.clone(), t).unwrap();
    store.failed_releases.store(2, Ordering::SeqCst);
    let err = timer.run(all.acquire(AcquireOptions::default())).unwrap_err();
    assert_eq!(err.code(), "STORE_UNAVAILABLE");
    assert!(err.hold_may_remain(), "{err}");
    assert!(store.inner.is_locked_now("a"), "the give-back failed");
    timer.run(timer.sleep_for_test(500));
    assert!(!store.inner.is_locked_now("a"), "given back by the clean-up, not kept until the TTL");
    assert!(store.inner.is_locked_now("b"), "the other owner's key is left alone");
}

#[test]
fn an_abort_that_comes_with_a_release_passes_the_wake_up_on() {
    // b and c wait on a held key (c behind b); a releases at 100 ms and b's wait is
    // aborted in the same turn. The release woke b only; b hands the wake-up on, so c
    // takes the key then rather than at its next retry (1 s later).
    let timer = FakeTimer::new();
    let store = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let handle = || Lock::new("k", 10_000, store.clone(), t.clone()).unwrap();
    let (a, b, c) = (handle(), handle(), handle());
    let abort = locksmith_core::Abort::new();
    let (waited, taken_at, ()) = timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(
            b.acquire_abortable(waiting(10_000, 1_000), &abort),
            async {
                timer.sleep_for_test(10).await;
                assert!(c.acquire(waiting(10_000, 1_000)).await.unwrap());
                timer.now()
            },
            async {
                timer.sleep_for_test(100).await;
                assert!(a.release().await.unwrap());
                abort.abort();
            }
        )
    });
    assert_eq!(waited.unwrap_err().code(), "ABORTED");
    assert_eq!(taken_at, 100, "c was woken by the release b gave back");
}

#[test]
fn a_release_that_fails_stops_auto_extend_so_the_hold_runs_out_at_its_ttl() {
    // An auto-extended hold's release fails (the store out of reach for a moment). The
    // hold is not extended any more: it ends at its TTL, as the caller wanted it gone,
    // rather than being kept alive by auto-extend until the process exits.
    let timer = FakeTimer::new();
    let store = Lagging::new(&timer);
    let l = Lock::new("k", 1_000, store.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    let end = timer.run(async {
        // (At most 5 s of it: a release that let it go on would extend forever.)
        let extending = locksmith_core::AutoExtend::for_ttl_ms(1_000).with_max_hold_ms(5_000);
        let extending = l.keep_extending(extending);
        let work = async {
            timer.sleep_for_test(500).await;
            store.failed_releases.store(1, Ordering::SeqCst);
            assert_eq!(l.release().await.unwrap_err().code(), "STORE_UNAVAILABLE");
            let end = l.hold_ended().await;
            (end, timer.now())
        };
        futures_util::join!(extending, work).1
    });
    assert!(matches!(end.0, HoldEnd::Lost(_)), "{:?}", end.0);
    assert!(end.1 < 2_000, "ran out at its TTL after the last extend, not kept alive: at {} ms", end.1);
    timer.run(timer.sleep_for_test(1_000));
    assert!(!store.inner.is_locked_now("k"), "and the store let it go");
}
