//! `Lock::all`: several keys all or nothing, on a store that takes them in one step (the
//! memory store) and on one that only has the one-key methods (the default: in order,
//! giving back what it took).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use locksmith_core::{
    AcquireOptions, BoxFuture, FakeTimer, Grant, Lock, LockError, LockStore, MemoryStore, Result,
    SyncLockStore,
};

mod common;
use common::waiting as wait;

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|k| (*k).to_owned()).collect()
}

/// A store with the one-key methods only, as a user's own store may be: `Lock::all`
/// runs on the trait's defaults. `fail_on` makes an acquire of that key fail after
/// taking it (an answer lost on the way).
struct OneByOne {
    inner: Arc<MemoryStore>,
    fail_on: Mutex<Option<String>>,
    calls: AtomicUsize,
    /// Whether it answers `is_held_by` (else the lock goes by its local deadline).
    tells_holder: bool,
}

impl OneByOne {
    fn new(inner: Arc<MemoryStore>) -> Self {
        Self { inner, fail_on: Mutex::new(None), calls: AtomicUsize::new(0), tells_holder: true }
    }
}

#[async_trait::async_trait]
impl LockStore for OneByOne {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }
    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let granted = self.inner.acquire_with_grant(key, owner, ttl_ms).await?;
        if self.fail_on.lock().unwrap().as_deref() == Some(key) {
            return Err(LockError::StoreUnavailable("the answer was lost".into()));
        }
        Ok(granted)
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
    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        if !self.tells_holder {
            return Ok(None);
        }
        self.inner.is_held_by(key, owner).await
    }
    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        self.inner.release_signal(key)
    }
}

/// A store under test: its name, its fake clock, the memory under it, the store.
type Case = (&'static str, FakeTimer, Arc<MemoryStore>, Arc<dyn LockStore>);

/// Both ways a store can take several keys, each on its own fake clock.
fn stores() -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    for name in ["memory (one step)", "one key at a time", "one key at a time, not telling who holds it"] {
        let timer = FakeTimer::new();
        let memory = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
        let store: Arc<dyn LockStore> = if name.starts_with("memory") {
            memory.clone()
        } else {
            Arc::new(OneByOne { tells_holder: !name.ends_with("it"), ..OneByOne::new(memory.clone()) })
        };
        out.push((name, timer, memory, store));
    }
    out
}

fn all(timer: &FakeTimer, store: &Arc<dyn LockStore>, list: &[&str], ttl: u64) -> Lock {
    Lock::all(keys(list), ttl, store.clone(), Arc::new(timer.clone())).unwrap()
}

fn one(timer: &FakeTimer, store: &Arc<dyn LockStore>, key: &str, ttl: u64) -> Lock {
    Lock::new(key, ttl, store.clone(), Arc::new(timer.clone())).unwrap()
}

#[test]
fn takes_every_key_or_none() {
    for (name, timer, memory, store) in stores() {
        let other = one(&timer, &store, "b", 10_000);
        let multi = all(&timer, &store, &["c", "a", "b"], 10_000);
        assert_eq!(multi.keys(), ["a", "b", "c"], "canonical order ({name})");
        assert_eq!(multi.kind_name(), "multi");
        timer.run(async {
            assert!(other.acquire(AcquireOptions::default()).await.unwrap());
            assert!(!multi.acquire(AcquireOptions::default()).await.unwrap(), "{name}");
            // Nothing of the refused attempt stays held.
            assert!(!memory.is_locked("a").await.unwrap(), "{name}");
            assert!(!memory.is_locked("c").await.unwrap(), "{name}");
            assert!(!multi.has_owner());
            assert!(multi.fencing_tokens().is_empty());
            assert!(other.release().await.unwrap());
            assert!(multi.acquire(AcquireOptions::default()).await.unwrap(), "{name}");
            for key in ["a", "b", "c"] {
                assert!(memory.is_locked(key).await.unwrap(), "{key} ({name})");
            }
            let tokens = multi.fencing_tokens();
            assert_eq!(tokens.len(), 3);
            assert!(tokens.iter().all(Option::is_some), "{tokens:?} ({name})");
            assert!(multi.is_locked().await.unwrap());
            assert_eq!(multi.count().await.unwrap(), 3);
            // Not re-entrant, like a lock.
            assert!(!multi.acquire(AcquireOptions::default()).await.unwrap());
            assert!(!other.acquire(AcquireOptions::default()).await.unwrap());
            assert!(multi.release().await.unwrap());
            for key in ["a", "b", "c"] {
                assert!(!memory.is_locked(key).await.unwrap(), "{key} released ({name})");
            }
            assert!(!multi.release().await.unwrap(), "a second release is a harmless false");
        });
    }
}

#[test]
fn a_waiting_lock_holds_nothing_and_wakes_when_the_key_it_waits_for_is_released() {
    for (name, timer, memory, store) in stores() {
        let holder = one(&timer, &store, "b", 60_000);
        let multi = all(&timer, &store, &["a", "b"], 10_000);
        let single_a = one(&timer, &store, "a", 10_000);
        timer.run(async {
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            let (got, ()) = futures_util::join!(multi.acquire(wait(5_000, 2_000)), async {
                timer.sleep_for_test(30).await;
                // While it waits, `a` is free for anyone.
                assert!(!memory.is_locked("a").await.unwrap(), "{name}");
                assert!(single_a.acquire(AcquireOptions::default()).await.unwrap());
                assert!(single_a.release().await.unwrap());
                timer.sleep_for_test(90).await;
                assert!(holder.release().await.unwrap());
            });
            assert!(got.unwrap(), "{name}");
        });
        // Woken by the release at 120 ms, not at a retry 2 s later.
        assert_eq!(timer.now(), 120, "{name}");
    }
}

#[test]
fn a_refused_attempt_passes_the_wake_up_of_a_free_key_to_its_next_waiter() {
    // The memory store's one-step acquire: the release of b wakes the lockAll (its
    // longest waiter), which finds c held and passes the wake-up on to the plain waiter.
    let timer = FakeTimer::new();
    let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
    let (holder_b, holder_c) = (one(&timer, &store, "b", 60_000), one(&timer, &store, "c", 60_000));
    let multi = all(&timer, &store, &["b", "c"], 10_000);
    let single = one(&timer, &store, "b", 10_000);
    let got_at = timer.run(async {
        assert!(holder_b.acquire(AcquireOptions::default()).await.unwrap());
        let multi_waits = multi.acquire(wait(8_000, 5_000));
        let single_waits = async {
            timer.sleep_for_test(10).await; // queued behind the lockAll
            single.acquire(wait(8_000, 5_000)).await.unwrap().then(|| timer.now())
        };
        let (multi_got, single_got, ()) = futures_util::join!(multi_waits, single_waits, async {
            timer.sleep_for_test(20).await;
            assert!(holder_c.acquire(AcquireOptions::default()).await.unwrap());
            timer.sleep_for_test(80).await;
            assert!(holder_b.release().await.unwrap());
            // Let the plain waiter go before c frees, so the lockAll's next retry finds b held.
            timer.sleep_for_test(6_000).await;
        });
        assert!(!multi_got.unwrap(), "b stays with the plain waiter past the lockAll's deadline");
        single_got
    });
    assert_eq!(got_at, Some(100), "the plain waiter got b at its release, not at a retry 5 s later");
}

#[test]
fn a_wait_ends_at_its_deadline_with_nothing_held() {
    for (name, timer, memory, store) in stores() {
        let holder = one(&timer, &store, "z", 60_000);
        let multi = all(&timer, &store, &["a", "z"], 10_000);
        timer.run(async {
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            assert!(!multi.acquire(wait(300, 70)).await.unwrap(), "{name}");
            assert!(!memory.is_locked("a").await.unwrap(), "{name}");
        });
        assert_eq!(timer.now(), 300, "{name}");
    }
}

#[test]
fn an_acquire_that_fails_midway_gives_back_every_key_it_may_hold() {
    let timer = FakeTimer::new();
    let memory = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
    let flaky = Arc::new(OneByOne::new(memory.clone()));
    *flaky.fail_on.lock().unwrap() = Some("b".into());
    let store: Arc<dyn LockStore> = flaky.clone();
    let multi = all(&timer, &store, &["a", "b", "c"], 10_000);
    timer.run(async {
        let err = multi.acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "STORE_UNAVAILABLE");
        for key in ["a", "b", "c"] {
            assert!(!memory.is_locked(key).await.unwrap(), "{key}");
        }
        // A wait rides the outage out and gets every key once the store answers again.
        *flaky.fail_on.lock().unwrap() = None;
        assert!(multi.acquire(wait(1_000, 50)).await.unwrap());
        assert!(memory.is_locked("c").await.unwrap());
    });
}

#[test]
fn overlapping_locks_in_any_order_all_get_through_and_never_share_a_key() {
    for (name, timer, _memory, store) in stores() {
        let sets: [&[&str]; 6] =
            [&["a", "b", "c"], &["c", "b"], &["d", "a"], &["b", "d"], &["a", "b", "c", "d"], &["c"]];
        let handles: Vec<Lock> = sets.iter().map(|set| all(&timer, &store, set, 1_000)).collect();
        let holders: Mutex<HashMap<String, usize>> = Mutex::new(HashMap::new());
        let done = AtomicUsize::new(0);
        timer.run(async {
            let runs = handles.iter().enumerate().map(|(i, handle)| {
                let (timer, holders, done) = (&timer, &holders, &done);
                async move {
                    for _ in 0..5 {
                        assert!(handle.acquire(wait(60_000, 7)).await.unwrap(), "{name}: {i} gave up");
                        for key in handle.keys() {
                            let before = holders.lock().unwrap().insert(key.clone(), i);
                            assert!(before.is_none(), "{name}: {key} held by {before:?} and {i}");
                        }
                        timer.sleep_for_test(3 + i as u64).await;
                        for key in handle.keys() {
                            holders.lock().unwrap().remove(key);
                        }
                        assert!(handle.release().await.unwrap());
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
            futures_util::future::join_all(runs).await;
        });
        assert_eq!(done.load(Ordering::Relaxed), 6, "{name}");
    }
}

#[test]
fn extend_and_loss_cover_every_key() {
    for (name, timer, memory, store) in stores() {
        let multi = all(&timer, &store, &["a", "b"], 1_000);
        let thief = one(&timer, &store, "b", 10_000);
        timer.run(async {
            assert!(multi.acquire(AcquireOptions::default()).await.unwrap());
            timer.sleep_for_test(600).await;
            multi.extend(Some(2_000)).await.unwrap();
            let left = multi.remaining_time().await.unwrap().unwrap();
            assert!((1_900..=2_000).contains(&left), "{left} ({name})");
            assert!(!multi.is_expired().await.unwrap());
            // One key taken over (here by force): the hold of all is lost.
            memory.clear();
            assert!(memory.acquire("a", "someone else's", 10_000).await.unwrap());
            assert!(thief.acquire(AcquireOptions::default()).await.unwrap());
            // (A store that cannot say who holds a key leaves the handle its deadline.)
            assert_eq!(multi.is_expired().await.unwrap(), !name.ends_with("it"), "{name}");
            let err = multi.extend(None).await.unwrap_err();
            assert_eq!(err.code(), "LOCK_NOT_HELD", "{name}");
            assert!(!multi.release().await.unwrap(), "{name}: a lost hold's release is false");
            assert!(thief.is_locked().await.unwrap(), "someone else's hold is left alone");
        });
    }
}

#[test]
fn a_hold_that_finds_one_key_gone_gives_the_others_back() {
    for (name, timer, memory, store) in stores() {
        let multi = all(&timer, &store, &["a", "b", "c"], 10_000);
        let thief = one(&timer, &store, "b", 10_000);
        timer.run(async {
            assert!(multi.acquire(AcquireOptions::default()).await.unwrap());
            // b changes hands behind the handle's back (its token, serialized, was used).
            let text = multi.serialize().unwrap();
            let owner = text.split("\"owner\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
            assert!(memory.release("b", &owner).await.unwrap());
            assert!(thief.acquire(AcquireOptions::default()).await.unwrap());
            assert_eq!(multi.extend(None).await.unwrap_err().code(), "LOCK_NOT_HELD", "{name}");
            timer.sleep_for_test(1).await;
            assert!(!memory.is_locked("a").await.unwrap(), "a given back ({name})");
            assert!(!memory.is_locked("c").await.unwrap(), "c given back ({name})");
            assert!(thief.is_locked().await.unwrap(), "the thief keeps b ({name})");
            assert!(!multi.release().await.unwrap());
        });
    }
}

#[test]
fn serialize_and_restore_carry_every_key() {
    for (name, timer, memory, store) in stores() {
        timer.set_unix_time_ms(1_764_500_000_000);
        let multi = all(&timer, &store, &["b", "a"], 5_000);
        timer.run(async {
            assert!(multi.acquire(AcquireOptions::default()).await.unwrap());
            let text = multi.serialize().unwrap();
            assert!(text.contains(r#""keys":["a","b"]"#), "{text}");
            let restored = Lock::restore(multi.serialized().unwrap(), store.clone(), Arc::new(timer.clone()));
            assert_eq!(restored.keys(), ["a", "b"]);
            assert_eq!(restored.kind_name(), "multi");
            assert_eq!(restored.fencing_tokens(), multi.fencing_tokens(), "{name}");
            assert!(!restored.is_expired().await.unwrap());
            assert!(restored.release().await.unwrap(), "{name}");
            assert!(!memory.is_locked("a").await.unwrap());
            assert!(!memory.is_locked("b").await.unwrap());
        });
    }
}

#[test]
fn bad_key_lists_are_invalid_arguments() {
    let timer = FakeTimer::new();
    let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
    let t = Arc::new(timer);
    let too_many: Vec<String> =
        (0..=locksmith_core::validate::MAX_KEYS_PER_LOCK).map(|i| format!("k{i}")).collect();
    for (list, why) in [
        (Vec::new(), "1 to 64 keys; got 0"),
        (keys(&["a", "b", "a"]), "\"a\" is given twice"),
        (keys(&["a", ""]), "non-empty"),
        (keys(&["a", "b\n"]), "control characters"),
        (too_many, "got 65"),
    ] {
        let err = Lock::all(list, 1_000, store.clone(), t.clone()).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(err.to_string().contains(why), "{err}");
    }
    let err = Lock::all(keys(&["a"]), 0, store, t).unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
}

#[test]
fn an_aborted_wait_holds_nothing() {
    for (name, timer, memory, store) in stores() {
        let holder = one(&timer, &store, "b", 60_000);
        let multi = all(&timer, &store, &["a", "b"], 10_000);
        let abort = locksmith_core::Abort::new();
        timer.run(async {
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            let (got, ()) = futures_util::join!(multi.acquire_abortable(wait(5_000, 50), &abort), async {
                timer.sleep_for_test(120).await;
                abort.abort();
            });
            assert_eq!(got.unwrap_err().code(), "ABORTED", "{name}");
            assert!(!memory.is_locked("a").await.unwrap(), "{name}");
            assert!(!multi.has_owner());
        });
    }
}

#[test]
fn a_due_check_during_the_release_does_not_take_the_keys_from_under_it() {
    // TTL 120 ms: the due check asks at 87 ms (30 ms before the 117 ms deadline). The
    // release is sent at 80: a is freed at once, b's release is 20 ms in transit. The
    // due check finds a gone; that is the release's doing, not a loss, so nothing gives
    // b back behind the release (which would then find b gone and answer false).
    let timer = FakeTimer::new();
    let (memory, store) = scripted(&timer, vec![("b", 20, 0, false)]);
    let multi = all(&timer, &store, &["a", "b"], 120);
    timer.run(async {
        assert!(multi.acquire(AcquireOptions::default()).await.unwrap());
        let (released, end) = futures_util::join!(
            async {
                timer.sleep_for_test(80).await;
                multi.release().await.unwrap()
            },
            multi.hold_ended()
        );
        assert!(released, "the holder's own release frees both keys");
        assert_eq!(end, locksmith_core::HoldEnd::Released, "the signal says released, not lost");
        assert!(!memory.is_locked("a").await.unwrap() && !memory.is_locked("b").await.unwrap());
    });
}

/// Over memory, answering asynchronously (so a hold gets its due check); each release of a
/// key listed in `plan` follows its entry once: `(key, ms in transit, ms before the reply,
/// fails instead of arriving)`.
struct ScriptedReleases {
    inner: Arc<MemoryStore>,
    timer: FakeTimer,
    plan: Mutex<Vec<(&'static str, u64, u64, bool)>>,
}

#[async_trait::async_trait]
impl LockStore for ScriptedReleases {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.inner.acquire(key, owner, ttl_ms).await
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        let step = {
            let mut plan = self.plan.lock().unwrap();
            plan.iter().position(|(k, ..)| *k == key).map(|at| plan.remove(at))
        };
        let (_, transit, reply, fails) = step.unwrap_or(("", 0, 0, false));
        locksmith_core::Timer::sleep(&self.timer, transit).await;
        if fails {
            return Err(LockError::StoreUnavailable("the release never arrived".into()));
        }
        let released = self.inner.release(key, owner).await;
        locksmith_core::Timer::sleep(&self.timer, reply).await;
        released
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
    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        self.inner.is_held_by(key, owner).await
    }
    async fn owner_remaining_time(&self, key: &str, owner: &str) -> Result<locksmith_core::HoldCheck> {
        // One look, as a networked store's single question (memory itself is never asked).
        Ok(
            match self.inner.is_held_by_now(key, owner).then(|| self.inner.remaining_time_now(key)).flatten()
            {
                Some(remaining_ms) => locksmith_core::HoldCheck::Held { remaining_ms },
                None => locksmith_core::HoldCheck::NotHeld,
            },
        )
    }
}

fn scripted(
    timer: &FakeTimer,
    plan: Vec<(&'static str, u64, u64, bool)>,
) -> (Arc<MemoryStore>, Arc<dyn LockStore>) {
    let memory = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
    let store =
        Arc::new(ScriptedReleases { inner: memory.clone(), timer: timer.clone(), plan: Mutex::new(plan) });
    (memory, store)
}

#[test]
fn two_releases_that_cross_end_the_hold_released_if_either_freed_it() {
    // The first release frees the key and its reply takes 30 ms; the second, sent 1 ms
    // later, finds nothing and answers first. The hold was released, not lost.
    let timer = FakeTimer::new();
    let (_, store) = scripted(&timer, vec![("k", 0, 30, false)]);
    let l = one(&timer, &store, "k", 10_000);
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        let (first, second, end) = futures_util::join!(
            l.release(),
            async {
                timer.sleep_for_test(1).await;
                l.release().await
            },
            l.hold_ended()
        );
        assert_eq!((first.unwrap(), second.unwrap()), (true, false));
        assert_eq!(end, locksmith_core::HoldEnd::Released);
    });
}

#[test]
fn a_release_that_fails_half_way_stops_auto_extend_and_the_due_check_gives_the_rest_back() {
    // Auto-extend would extend at 1 000 ms; the release sent at 995 ms frees a at once and
    // fails on b after 50 ms. A hold being released is not extended any more, so nothing
    // keeps b alive: the due check before the hold's deadline finds a gone, ends the hold
    // lost and gives b back (it had stayed extended for as long as the process ran).
    let timer = FakeTimer::new();
    let (memory, store) = scripted(&timer, vec![("b", 50, 0, true)]);
    let multi = all(&timer, &store, &["a", "b"], 9_000);
    timer.run(async {
        assert!(multi.acquire(AcquireOptions::default()).await.unwrap());
        let plan = locksmith_core::AutoExtend::for_ttl_ms(9_000).with_interval_ms(1_000);
        let watch = async { (multi.hold_ended().await, timer.now()) };
        let user = async {
            timer.sleep_for_test(995).await;
            assert_eq!(multi.release().await.unwrap_err().code(), "STORE_UNAVAILABLE");
            timer.sleep_for_test(10).await;
            (memory.is_locked_now("a"), memory.is_locked_now("b"))
        };
        let ((), (end, at), locked) = futures_util::join!(multi.keep_extending(plan), watch, user);
        assert_eq!(locked, (false, true), "a freed by the release, b not");
        assert!(matches!(end, locksmith_core::HoldEnd::Lost(_)), "{end:?}");
        assert!(at < 9_000 - locksmith_core::default_drift_ms(9_000), "before its deadline: {at}");
        timer.sleep_for_test(10).await;
        assert!(!memory.is_locked_now("b"), "b given back");
    });
}
