//! Fair locks and semaphores on the memory store (`Lock::set_fair`): grants in queue
//! order, a place that lasts the TTL from its latest attempt, places given up on timeout
//! and abort, and handles that disagree on fairness refused. On the fake clock.

use std::sync::{Arc, Mutex};

use locksmith_core::{AcquireOptions, FakeTimer, HoldKind, Lock, LockStore, MemoryStore};

mod common;
use common::{memory, waiting as wait};

fn fair(timer: &FakeTimer, store: &Arc<MemoryStore>, key: &str, ttl: u64) -> Lock {
    fair_on(store.clone(), Arc::new(timer.clone()), key, ttl)
}

/// A fair lock on `key` over any store and timer.
fn fair_on(store: Arc<dyn LockStore>, timer: Arc<dyn locksmith_core::Timer>, key: &str, ttl: u64) -> Lock {
    let mut lock = Lock::new(key, ttl, store, timer).unwrap();
    lock.set_fair().unwrap();
    lock
}

fn fair_semaphore(timer: &FakeTimer, store: &Arc<MemoryStore>, limit: u32, permits: u32) -> Lock {
    let mut lock =
        Lock::of_kind("s", 10_000, HoldKind::Permit { limit }, store.clone(), Arc::new(timer.clone()))
            .unwrap();
    lock.set_fair().unwrap();
    lock.set_permits(permits).unwrap();
    lock
}

/// Waiters that arrive at 0, 10, 20 ms while the key is held are granted in that order,
/// though the last to arrive retries first after the release (its retry delay is the
/// shortest): an unfair store would hand it the key.
#[test]
fn waiters_are_granted_in_arrival_order_whoever_retries_first() {
    let timer = FakeTimer::new();
    let store = Arc::new(MemoryStore::new(Arc::new(timer.clone())).without_release_signals());
    let holder = fair(&timer, &store, "k", 10_000);
    let order = Mutex::new(Vec::new());
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let turn = |name: &'static str, arrives: u64, retry: u64| {
            let (timer, order, lock) = (&timer, &order, fair(&timer, &store, "k", 10_000));
            async move {
                timer.sleep_for_test(arrives).await;
                assert!(lock.acquire(wait(5_000, retry)).await.unwrap(), "{name} timed out");
                order.lock().unwrap().push(name);
                timer.sleep_for_test(1).await;
                assert!(lock.release().await.unwrap());
            }
        };
        futures_util::join!(turn("a", 0, 97), turn("b", 10, 53), turn("c", 20, 5), async {
            timer.sleep_for_test(300).await;
            assert!(holder.release().await.unwrap());
        });
    });
    assert_eq!(*order.lock().unwrap(), ["a", "b", "c"]);
}

/// A fair semaphore admits its queue in order: a request for one permit that arrives
/// after a request for three waits behind it, though one permit is free meanwhile.
#[test]
fn a_smaller_later_request_does_not_overtake_a_larger_earlier_one() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let (holder, large, small) = (
        fair_semaphore(&timer, &store, 3, 2),
        fair_semaphore(&timer, &store, 3, 3),
        fair_semaphore(&timer, &store, 3, 1),
    );
    let order = Mutex::new(Vec::new());
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(
            async {
                assert!(large.acquire(wait(5_000, 20)).await.unwrap());
                order.lock().unwrap().push(("large", timer.now()));
                timer.sleep_for_test(50).await;
                assert!(large.release().await.unwrap());
            },
            async {
                timer.sleep_for_test(5).await;
                assert!(small.acquire(wait(5_000, 20)).await.unwrap());
                order.lock().unwrap().push(("small", timer.now()));
                assert!(small.release().await.unwrap());
            },
            async {
                timer.sleep_for_test(100).await;
                assert!(holder.release().await.unwrap());
            }
        );
    });
    // Unfair, the small one would have been in at 5 ms (2 + 1 ≤ 3).
    assert_eq!(*order.lock().unwrap(), [("large", 100), ("small", 150)]);
}

/// A waiter that stops asking (it crashed, or its process is paused) loses its place
/// once its TTL has passed since its last attempt; the next in line is granted then.
#[test]
fn a_place_lapses_a_ttl_after_its_last_attempt() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    timer.run(async {
        // The "crashed" waiter: one store call that keeps a place, and nothing after it.
        let ghost =
            store.acquire_fair("k", "ghost-owner", 1_000, HoldKind::Exclusive, 1, true).await.unwrap();
        assert!(ghost.is_some(), "first in an empty queue of a free key: granted");
        assert!(store.release("k", "ghost-owner").await.unwrap());
        assert_eq!(
            store.acquire_fair("k", "ghost", 1_000, HoldKind::Exclusive, 1, true).await.unwrap().map(|_| ()),
            Some(())
        );
        let queued = store.acquire_fair("k", "stuck", 1_000, HoldKind::Exclusive, 1, true).await.unwrap();
        assert!(queued.is_none(), "held: it queues");
        assert!(store.release("k", "ghost").await.unwrap());
        // "stuck" is first now and asks no more; a fair handle waits behind it until its
        // place lapses, 1 s after its last attempt.
        let next = fair(&timer, &store, "k", 1_000);
        assert!(next.acquire(wait(5_000, 100)).await.unwrap());
        assert!((1_000..=1_100).contains(&timer.now()), "granted at {} ms", timer.now());
    });
}

/// A waiter that times out, or whose wait is aborted, gives its place up at once.
#[test]
fn timed_out_and_aborted_waiters_leave_the_queue() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let (holder, quitter, aborted, last) = (
        fair(&timer, &store, "k", 10_000),
        fair(&timer, &store, "k", 10_000),
        fair(&timer, &store, "k", 10_000),
        fair(&timer, &store, "k", 10_000),
    );
    let abort = locksmith_core::Abort::new();
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(
            async { assert!(!quitter.acquire(wait(100, 30)).await.unwrap()) },
            async {
                let err = aborted.acquire_abortable(wait(5_000, 30), &abort).await.unwrap_err();
                assert_eq!(err.code(), "ABORTED");
            },
            async {
                timer.sleep_for_test(10).await;
                assert!(last.acquire(wait(5_000, 1_000)).await.unwrap());
                assert_eq!(timer.now(), 200, "granted when the holder released, not a place's TTL later");
            },
            async {
                timer.sleep_for_test(150).await;
                abort.abort();
                timer.sleep_for_test(50).await;
                assert!(holder.release().await.unwrap());
            }
        );
    });
}

/// Fairness belongs to the key: a handle that is not fair is refused while fair handles
/// hold or wait for the key, and a fair one while other handles hold it.
#[test]
fn handles_that_disagree_on_fairness_are_refused() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let plain = || Lock::new("k", 10_000, store.clone(), t.clone()).unwrap();
    let (f, p) = (fair(&timer, &store, "k", 10_000), plain());
    timer.run(async {
        assert!(f.acquire(AcquireOptions::default()).await.unwrap());
        let err = p.acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(err.to_string().contains("is fair"), "{err}");
        let err = p.try_acquire_now().unwrap().unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "the synchronous path refuses too");
        assert!(f.release().await.unwrap());
        // Free and nobody queued: the key takes either kind of handle again.
        assert!(p.acquire(AcquireOptions::default()).await.unwrap());
        let err = fair(&timer, &store, "k", 10_000).acquire(AcquireOptions::default()).await.unwrap_err();
        assert!(err.to_string().contains("not fair; this handle is fair"), "{err}");
        assert!(p.release().await.unwrap());
    });
    let rw = Lock::of_kind("rw", 1_000, HoldKind::Write, store.clone(), t.clone());
    assert_eq!(rw.unwrap().set_fair().unwrap_err().code(), "INVALID_ARGUMENT");
    let all = Lock::all(vec!["a".into(), "b".into()], 1_000, store.clone(), t);
    assert_eq!(all.unwrap().set_fair().unwrap_err().code(), "INVALID_ARGUMENT");
}

/// An acquire that does not wait takes the key only when nobody queues for it, and
/// leaves no place behind.
#[test]
fn an_immediate_fair_acquire_keeps_no_place() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let (holder, waiter, quick) = (
        fair(&timer, &store, "k", 10_000),
        fair(&timer, &store, "k", 10_000),
        fair(&timer, &store, "k", 10_000),
    );
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        assert!(!quick.acquire(AcquireOptions::default()).await.unwrap(), "held");
        futures_util::join!(async { assert!(waiter.acquire(wait(5_000, 50)).await.unwrap()) }, async {
            timer.sleep_for_test(10).await;
            assert!(holder.release().await.unwrap());
            // Free, but the waiter is first in the queue.
            assert!(!quick.acquire(AcquireOptions::default()).await.unwrap());
        });
        assert!(waiter.release().await.unwrap());
        assert!(quick.acquire(AcquireOptions::default()).await.unwrap(), "nobody queues any more");
    });
}

/// A lock on several keys is not fair: it does not take a key fair waiters queue for
/// (the key is busy to it), and says why.
#[test]
fn a_lock_on_several_keys_does_not_barge_past_a_fair_queue() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let (holder, waiter) = (fair(&timer, &store, "b", 10_000), fair(&timer, &store, "b", 10_000));
    let all = Lock::all(vec!["a".into(), "b".into()], 10_000, store.clone(), t).unwrap();
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(async { assert!(waiter.acquire(wait(5_000, 50)).await.unwrap()) }, async {
            timer.sleep_for_test(10).await;
            assert!(holder.release().await.unwrap());
            // "b" is free, and the waiter is first in its queue.
            let err = all.acquire(AcquireOptions::default()).await.unwrap_err();
            assert!(err.to_string().contains("lockAll() cannot take it"), "{err}");
            assert!(!store.is_locked("a").await.unwrap(), "nothing taken");
        });
        assert!(waiter.release().await.unwrap());
        assert!(all.acquire(AcquireOptions::default()).await.unwrap(), "nobody queues any more");
    });
}

/// The memory store behind a test's own `LockStore`: its fair attempts applied at once
/// and answered `delay_ms` late, and (`local_waiters`) saying this process has waiters
/// on every key, as a store that counts its own process's waiters would (a plain lock
/// then holds its first attempt back behind them).
struct Wrapped {
    inner: Arc<MemoryStore>,
    timer: FakeTimer,
    delay_ms: u64,
    local_waiters: bool,
}

#[async_trait::async_trait]
impl LockStore for Wrapped {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> locksmith_core::Result<bool> {
        self.inner.acquire(key, owner, ttl_ms).await
    }
    async fn release(&self, key: &str, owner: &str) -> locksmith_core::Result<bool> {
        self.inner.release(key, owner).await
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> locksmith_core::Result<bool> {
        self.inner.extend(key, owner, ttl_ms).await
    }
    async fn is_locked(&self, key: &str) -> locksmith_core::Result<bool> {
        self.inner.is_locked(key).await
    }
    async fn remaining_time(&self, key: &str) -> locksmith_core::Result<Option<u64>> {
        self.inner.remaining_time(key).await
    }
    async fn acquire_fair(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        waits: bool,
    ) -> locksmith_core::Result<Option<locksmith_core::Grant>> {
        let answer = self.inner.acquire_fair(key, owner, ttl_ms, kind, permits, waits).await;
        if self.delay_ms > 0 {
            self.timer.sleep_for_test(self.delay_ms).await;
        }
        answer
    }
    fn permit_release_signal(
        &self,
        key: &str,
        kind: HoldKind,
    ) -> Option<locksmith_core::BoxFuture<'static, ()>> {
        self.inner.permit_release_signal(key, kind)
    }
    fn has_local_waiters(&self, _key: &str) -> bool {
        self.local_waiters
    }
}

/// A fair handle's first attempt takes its place at once, even behind this process's
/// waiters: held back until its retry delay, it would queue after a later arrival that
/// retries sooner.
#[test]
fn a_fair_waiter_takes_its_place_on_arrival_behind_local_waiters() {
    let timer = FakeTimer::new();
    let store =
        Arc::new(Wrapped { inner: memory(&timer), timer: timer.clone(), delay_ms: 0, local_waiters: true });
    let on = || fair_on(store.clone(), Arc::new(timer.clone()), "k", 10_000);
    let (holder, early, late) = (on(), on(), on());
    let order = Mutex::new(Vec::new());
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(
            async {
                assert!(early.acquire(wait(5_000, 1_000)).await.unwrap());
                order.lock().unwrap().push("early");
                assert!(early.release().await.unwrap());
            },
            async {
                timer.sleep_for_test(10).await;
                assert!(late.acquire(wait(5_000, 5)).await.unwrap());
                order.lock().unwrap().push("late");
                assert!(late.release().await.unwrap());
            },
            async {
                timer.sleep_for_test(100).await;
                assert!(holder.release().await.unwrap());
            }
        );
    });
    assert_eq!(*order.lock().unwrap(), ["early", "late"]);
}

/// A wait dropped by its caller (a timeout of the caller's own around `acquire`) gives
/// its place up: the waiter behind it is granted at the release, not a TTL later.
#[test]
fn a_dropped_fair_wait_gives_its_place_up() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let (holder, dropped, next) = (
        fair(&timer, &store, "k", 10_000),
        fair(&timer, &store, "k", 10_000),
        fair(&timer, &store, "k", 10_000),
    );
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(
            async {
                let wait = std::pin::pin!(dropped.acquire(wait(5_000, 30)));
                let cut = std::pin::pin!(timer.sleep_for_test(50));
                assert!(matches!(
                    futures_util::future::select(wait, cut).await,
                    futures_util::future::Either::Right(_)
                ));
            },
            async {
                timer.sleep_for_test(10).await;
                assert!(next.acquire(wait(5_000, 1_000)).await.unwrap());
                assert_eq!(timer.now(), 100, "granted at the release");
            },
            async {
                timer.sleep_for_test(100).await;
                assert!(holder.release().await.unwrap());
            }
        );
    });
}

/// A wait aborted while its attempt is on its way gives its place up once the attempt
/// settles (the attempt's clean-up), not a TTL later.
#[test]
fn a_fair_wait_aborted_mid_attempt_gives_its_place_up() {
    let timer = FakeTimer::new();
    let store =
        Arc::new(Wrapped { inner: memory(&timer), timer: timer.clone(), delay_ms: 40, local_waiters: false });
    let on = || fair_on(store.clone(), Arc::new(timer.clone()), "k", 10_000);
    let (holder, aborted, next) = (on(), on(), on());
    let abort = locksmith_core::Abort::new();
    timer.run(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(
            async {
                let err = aborted.acquire_abortable(wait(5_000, 1_000), &abort).await.unwrap_err();
                assert_eq!(err.code(), "ABORTED");
            },
            async {
                timer.sleep_for_test(5).await;
                assert!(next.acquire(wait(5_000, 1_000)).await.unwrap());
                assert!(
                    timer.now() <= 200,
                    "granted at {} ms: the aborted waiter's place is gone",
                    timer.now()
                );
            },
            async {
                timer.sleep_for_test(10).await;
                abort.abort(); // the first attempt's answer is due at 40 ms
                timer.sleep_for_test(90).await;
                assert!(holder.release().await.unwrap());
            }
        );
    });
}

/// The fake timer without a way to spawn (a runtime that cannot run work in the
/// background): what a dropped wait leaves is recorded on the handle instead.
struct NoSpawn(FakeTimer);

impl locksmith_core::Clock for NoSpawn {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
}

impl locksmith_core::Timer for NoSpawn {
    fn sleep(&self, ms: u64) -> locksmith_core::BoxFuture<'static, ()> {
        self.0.sleep_for_test(ms)
    }
}

/// Runs `test` on a thread of its own and fails if it has not finished in 10 s (a
/// deadlock would otherwise hang the suite).
fn within_10_s(test: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        test();
        let _ = done.send(());
    });
    assert!(
        finished.recv_timeout(std::time::Duration::from_secs(10)).is_ok(),
        "the test did not finish: a deadlock?"
    );
}

/// Without spawn, a dropped fair wait neither deadlocks on the handle's own state (it
/// used to: the hold's lock was still taken when the clean-up took it again) nor records
/// what it leaves over a hold another call of the same handle was granted meanwhile.
#[test]
fn without_spawn_a_dropped_fair_wait_neither_hangs_nor_clobbers_a_hold() {
    within_10_s(|| {
        let timer = FakeTimer::new();
        let store = memory(&timer);
        let t: Arc<NoSpawn> = Arc::new(NoSpawn(timer.clone()));
        let on = |key: &str| fair_on(store.clone(), t.clone(), key, 10_000);
        let (holder, waiter) = (on("k"), on("k"));
        timer.run(async {
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            // Two waits on one handle: the first is granted at the release (100 ms), the
            // second is dropped after it.
            futures_util::join!(
                async { assert!(waiter.acquire(wait(5_000, 20)).await.unwrap()) },
                async {
                    timer.sleep_for_test(5).await;
                    let second = std::pin::pin!(waiter.acquire(wait(5_000, 20)));
                    let cut = std::pin::pin!(timer.sleep_for_test(150));
                    let _ = futures_util::future::select(second, cut).await;
                },
                async {
                    timer.sleep_for_test(100).await;
                    assert!(holder.release().await.unwrap());
                }
            );
            assert!(!waiter.is_expired().await.unwrap(), "the handle still knows its hold");
            assert!(waiter.release().await.unwrap(), "and releases it");
        });
        // (The second wait's place could not be recorded over that hold: it lapses with
        // its lease.) One waiter, dropped while another key is held: no deadlock; its place
        // lapses a TTL after its last attempt (nothing can give it up in the background).
        let (holder, lone) = (on("k2"), on("k2"));
        timer.run(async {
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            let wait_ = std::pin::pin!(lone.acquire(wait(5_000, 20)));
            let cut = std::pin::pin!(timer.sleep_for_test(50));
            let _ = futures_util::future::select(wait_, cut).await;
            assert!(holder.release().await.unwrap());
            timer.sleep_for_test(10_000).await;
            assert!(on("k2").acquire(AcquireOptions::default()).await.unwrap(), "the place lapsed");
        });
    });
}
