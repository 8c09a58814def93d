//! A hold's life beyond the shared suite, on the fake clock: every waiter of a key is
//! woken in turn, a cancelled acquire leaves nothing held, and a restored lock knows
//! when its hold expires.

use std::sync::Arc;

use futures_util::future::{join_all, select, Either};
use locksmith_core::{
    AcquireOptions, AutoExtend, BoxFuture, Clock, FakeTimer, Grant, HoldEnd, Lock, LockStore, MemoryStore,
    Result, SyncLockStore, Timer,
};

mod common;
use common::waiting as wait;

fn setup() -> (FakeTimer, Arc<MemoryStore>) {
    let timer = FakeTimer::new();
    let store = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
    (timer, store)
}

#[test]
fn every_waiter_is_woken_in_turn_not_a_retry_delay_later() {
    let (timer, store) = setup();
    let timer_arc: Arc<FakeTimer> = Arc::new(timer.clone());
    let holder = Lock::new("k", 10_000, store.clone(), timer_arc.clone()).unwrap();
    let waiters: Vec<Lock> =
        (0..4).map(|_| Lock::new("k", 10_000, store.clone(), timer_arc.clone()).unwrap()).collect();
    let acquired_at = timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let waiting = join_all(waiters.iter().map(|w| {
            let timer = timer.clone();
            async move {
                // A retry delay far beyond the test: only a wake-up gets a waiter in.
                assert!(w.acquire(wait(60_000, 20_000)).await.unwrap());
                let at = timer.now();
                timer.sleep_for_test(10).await;
                assert!(w.release().await.unwrap());
                at
            }
        }));
        let release = async {
            timer.sleep_for_test(100).await;
            assert!(holder.release().await.unwrap());
        };
        let (mut at, ()) = futures_util::join!(waiting, release);
        at.sort_unstable();
        at
    });
    assert_eq!(acquired_at, vec![100, 110, 120, 130], "each release handed the key to the next waiter");
    store.sweep();
    assert_eq!(store.waiter_key_count(), 0, "no waiter record outlives its waiters");
}

#[test]
fn a_woken_waiter_that_gives_up_passes_its_wake_up_on() {
    use std::cell::Cell;
    use std::future::Future;
    use std::task::Poll;

    let (timer, store) = setup();
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let holder = Lock::new("k", 10_000, store.clone(), t.clone()).unwrap();
    let (quitter, stayer) = (
        Lock::new("k", 10_000, store.clone(), t.clone()).unwrap(),
        Lock::new("k", 10_000, store.clone(), t).unwrap(),
    );
    let released = Cell::new(false);
    let got = timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        // The quitter queues first; once the release has notified it, it is dropped
        // without being polled again: its wake-up must go to the stayer.
        let quit = async {
            let mut acquire = Box::pin(quitter.acquire(wait(60_000, 20_000)));
            std::future::poll_fn(|cx| {
                if released.get() {
                    return Poll::Ready(());
                }
                assert!(acquire.as_mut().poll(cx).is_pending(), "the quitter cannot get the key yet");
                Poll::Pending
            })
            .await;
            drop(acquire);
        };
        let stay = async {
            timer.sleep_for_test(10).await; // queued after the quitter
            stayer.acquire(wait(60_000, 20_000)).await.unwrap().then(|| timer.now())
        };
        let release = async {
            timer.sleep_for_test(100).await;
            assert!(holder.release().await.unwrap());
            released.set(true);
        };
        futures_util::join!(quit, stay, release).1
    });
    assert_eq!(got, Some(100), "the stayer got the wake-up the quitter was given");
}

#[test]
fn a_sweep_that_finds_a_hold_expired_wakes_its_waiter() {
    let (timer, store) = setup();
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let holder = Lock::new("k", 100, store.clone(), t.clone()).unwrap();
    let waiter = Lock::new("k", 10_000, store.clone(), t).unwrap();
    let got_at = timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let (got, ()) = futures_util::join!(
            async { waiter.acquire(wait(60_000, 20_000)).await.unwrap().then(|| timer.now()) },
            async {
                timer.sleep_for_test(150).await; // the hold expired at 100
                store.sweep();
            }
        );
        got
    });
    assert_eq!(got_at, Some(150), "woken by the sweep at 150, not at a retry 20 s after it began");
}

#[test]
fn waiter_records_go_with_the_holds_without_a_sweep() {
    let (timer, store) = setup();
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    for i in 0..200 {
        let key = format!("k{i}");
        let (holder, waiter) = (
            Lock::new(&key, 10_000, store.clone(), t.clone()).unwrap(),
            Lock::new(&key, 10_000, store.clone(), t.clone()).unwrap(),
        );
        timer.run(async {
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            let (got, ()) = futures_util::join!(waiter.acquire(wait(1_000, 500)), async {
                timer.sleep_for_test(5).await;
                assert!(holder.release().await.unwrap());
            });
            assert!(got.unwrap());
            assert!(waiter.release().await.unwrap());
        });
    }
    assert_eq!(store.entry_count(), 0);
    assert_eq!(store.waiter_key_count(), 0, "no waiter record outlives its key's holds");
}

/// Grants at once, answers 100 ms later: an acquire whose answer is lost in transit.
struct SlowAnswers {
    inner: Arc<MemoryStore>,
    timer: FakeTimer,
}

#[async_trait::async_trait]
impl LockStore for SlowAnswers {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }
    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        let grant = self.inner.acquire_now(key, owner, ttl_ms);
        self.timer.sleep_for_test(100).await;
        Ok(grant)
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        Ok(self.inner.release_now(key, owner))
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.inner.extend_now(key, owner, ttl_ms))
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        Ok(self.inner.is_locked_now(key))
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.inner.remaining_time_now(key))
    }
}

/// Cancels `lock.acquire()` at 50 ms, after the store granted the key and before the
/// answer arrived.
fn cancel_mid_acquire(timer: &FakeTimer, lock: &Lock) {
    timer.run(async {
        match select(Box::pin(lock.acquire(AcquireOptions::default())), timer.sleep_for_test(50)).await {
            Either::Left(_) => panic!("the answer takes 100 ms"),
            Either::Right(((), _)) => {}
        }
    });
}

#[test]
fn a_cancelled_acquire_releases_what_the_store_granted() {
    let (timer, memory) = setup();
    let store = Arc::new(SlowAnswers { inner: memory.clone(), timer: timer.clone() });
    let lock = Lock::new("k", 60_000, store, Arc::new(timer.clone())).unwrap();
    cancel_mid_acquire(&timer, &lock);
    assert!(memory.is_locked_now("k"), "granted in the store, unknown to the caller");
    assert_eq!(timer.spawned_tasks(), 1, "a release was started in the background");
    // Let the background release run.
    timer.run(timer.sleep_for_test(1));
    assert_eq!(timer.spawned_tasks(), 0);
    assert!(!memory.is_locked_now("k"), "the orphaned hold was released, not left for its TTL");
    assert!(!lock.has_owner());
}

/// The fake timer without a way to spawn.
struct NoSpawn(FakeTimer);

impl Clock for NoSpawn {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
}

impl Timer for NoSpawn {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        self.0.sleep_for_test(ms)
    }
}

#[test]
fn without_spawn_a_cancelled_reacquire_after_a_lost_hold_is_remembered() {
    let (timer, memory) = setup();
    let store = Arc::new(SlowAnswers { inner: memory.clone(), timer: timer.clone() });
    let lock = Lock::new("k", 200, store, Arc::new(NoSpawn(timer.clone()))).unwrap();
    // A first hold, lost to its TTL without a release: the handle still has its owner.
    assert!(timer.run(lock.acquire(AcquireOptions::default())).unwrap());
    timer.advance(300);
    cancel_mid_acquire(&timer, &lock);
    assert!(memory.is_locked_now("k"), "the second attempt was granted");
    assert!(timer.run(lock.release()).unwrap(), "release() frees the cancelled attempt's hold");
    assert!(!memory.is_locked_now("k"));
}

#[test]
fn without_spawn_a_cancelled_acquire_leaves_its_token_to_release() {
    let (timer, memory) = setup();
    let store = Arc::new(SlowAnswers { inner: memory.clone(), timer: timer.clone() });
    let lock = Lock::new("k", 60_000, store, Arc::new(NoSpawn(timer.clone()))).unwrap();
    cancel_mid_acquire(&timer, &lock);
    assert!(memory.is_locked_now("k"));
    assert!(lock.has_owner(), "the handle remembers the attempt's token");
    assert!(timer.run(lock.release()).unwrap(), "and release() frees the hold");
    assert!(!memory.is_locked_now("k"));
}

/// A store with the five documented methods only: it cannot say who holds a key, so
/// `is_expired` relies on what the handle knows of its expiry.
struct PlainStore(Arc<MemoryStore>);

#[async_trait::async_trait]
impl LockStore for PlainStore {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.0.acquire_now(key, owner, ttl_ms).is_some())
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        Ok(self.0.release_now(key, owner))
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.0.extend_now(key, owner, ttl_ms))
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        Ok(self.0.is_locked_now(key))
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.0.remaining_time_now(key))
    }
}

#[test]
fn a_restored_lock_expires_when_the_original_hold_does() {
    let (timer, memory) = setup();
    let store: Arc<dyn LockStore> = Arc::new(PlainStore(memory));
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let original = Lock::new("k", 1_000, store.clone(), t.clone()).unwrap();
    let (restored, expired) = timer.run(async {
        assert!(original.acquire(AcquireOptions::default()).await.unwrap());
        timer.sleep_for_test(800).await;
        let restored = Lock::restore(original.serialized().unwrap(), store.clone(), t.clone());
        // The hold ends at 1 000 ms and someone else takes the key.
        timer.sleep_for_test(250).await;
        let next = Lock::new("k", 60_000, store.clone(), t.clone()).unwrap();
        assert!(next.acquire(AcquireOptions::default()).await.unwrap());
        let expired = restored.is_expired().await.unwrap();
        (restored, expired)
    });
    assert!(expired, "restored at 800 ms, the copy's hold ended at 1 000 ms, not 1 800 ms");
    assert!(timer.run(original.is_expired()).unwrap());
    drop(restored);
}

#[test]
fn a_restored_copy_keeps_an_expiry_extended_past_the_ttl() {
    let (timer, memory) = setup();
    let store: Arc<dyn LockStore> = Arc::new(PlainStore(memory));
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let original = Lock::new("k", 1_000, store.clone(), t.clone()).unwrap();
    let expired = timer.run(async {
        assert!(original.acquire(AcquireOptions::default()).await.unwrap());
        original.extend(Some(60_000)).await.unwrap();
        let copy = Lock::restore(original.serialized().unwrap(), store.clone(), t.clone());
        timer.sleep_for_test(2_000).await;
        copy.is_expired().await.unwrap()
    });
    assert!(!expired, "extended to 60 s: still held at 2 s");
}

#[test]
fn the_expiry_travels_as_wall_clock_time_between_hosts() {
    let (timer, memory) = setup();
    let store: Arc<dyn LockStore> = Arc::new(PlainStore(memory));
    let original = Lock::new("k", 1_000, store.clone(), Arc::new(timer.clone())).unwrap();
    let held = timer.run(async {
        assert!(original.acquire(AcquireOptions::default()).await.unwrap());
        original.serialized().unwrap()
    });
    let text = held.to_json();
    let sent_at = timer.unix_time_ms().unwrap();
    assert!(text.contains(&format!("\"expiresAt\":{}", sent_at + 1_000)), "{text}");

    // Another host reads it 900 ms later by its wall clock: 100 ms are left.
    let other = FakeTimer::new();
    other.set_unix_time_ms(sent_at + 900);
    let copy = Lock::restore(held.clone(), store.clone(), Arc::new(other.clone()));
    other.advance(150);
    assert!(other.run(copy.is_expired()).unwrap(), "past the hold's end by the wall clock");

    // A string from before `expiresAt` existed still restores, with its full TTL.
    let mut old_form = held;
    old_form.expires_at_unix_ms = None;
    let old_copy = Lock::restore(old_form, store, Arc::new(other.clone()));
    assert_eq!(old_copy.key(), "k");
}

/// A store whose extends fail as if it were out of reach, while `down` is set.
struct Flaky {
    inner: Arc<MemoryStore>,
    down: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl LockStore for Flaky {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.inner.acquire_now(key, owner, ttl_ms).is_some())
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        Ok(self.inner.release_now(key, owner))
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(locksmith_core::LockError::StoreUnavailable("connection refused".into()));
        }
        Ok(self.inner.extend_now(key, owner, ttl_ms))
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        Ok(self.inner.is_locked_now(key))
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.inner.remaining_time_now(key))
    }
}

#[test]
fn auto_extend_rides_out_a_short_outage_and_reports_a_long_one() {
    let (timer, memory) = setup();
    let store = Arc::new(Flaky { inner: memory, down: false.into() });
    let l = Lock::new("k", 300, store.clone(), Arc::new(timer.clone())).unwrap();
    let (end, lost_at) = timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        let outages = async {
            // Down across one extend (at 100 ms), back before the hold would expire.
            timer.sleep_for_test(90).await;
            store.down.store(true, std::sync::atomic::Ordering::SeqCst);
            timer.sleep_for_test(100).await;
            store.down.store(false, std::sync::atomic::Ordering::SeqCst);
            // Then down for good from 550 ms.
            timer.sleep_for_test(360).await;
            store.down.store(true, std::sync::atomic::Ordering::SeqCst);
        };
        let ((), end, ()) =
            futures_util::join!(l.keep_extending(AutoExtend::for_ttl_ms(300)), l.hold_ended(), outages);
        (end, timer.now())
    });
    match end {
        HoldEnd::Lost(err) => assert_eq!(err.code(), "STORE_UNAVAILABLE", "{err}"),
        HoldEnd::Released => panic!("not released"),
    }
    // Extended at 200 (after retries), 300, 400 and 500 ms; the one at 600 ms fails and
    // is retried until the hold runs out at 800 ms less the drift allowance (1 % of the
    // TTL + 2 ms): lost then, not earlier.
    assert_eq!(lost_at, 800 - locksmith_core::default_drift_ms(300), "lost when the last extend ran out");
}
