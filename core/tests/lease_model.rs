//! The lease model, on the fake clock: a hold's local deadline counts from the send
//! time of the request that set its expiry, less a drift allowance; the due check asks
//! one owner-specific question; lost is final; an extend on its way keeps a hold from
//! being called lost; a waiting acquire rides out an unreachable store.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::{select, Either};
use locksmith_core::{
    default_drift_ms, AcquireOptions, FakeTimer, HoldCheck, HoldEnd, Lock, LockError, LockStore, MemoryStore,
    Result, SyncLockStore, Timer,
};

mod common;
use common::{memory, owner_of, waiting};

/// A store over memory that answers asynchronously (so the handle counts down locally),
/// with knobs for the faults below.
struct Remote {
    inner: Arc<MemoryStore>,
    timer: FakeTimer,
    /// Milliseconds each call takes to answer (the store acts at once; the reply is late).
    delay_ms: AtomicU64,
    /// Milliseconds a release's reply takes on top (the key is freed at once).
    release_reply_ms: AtomicU64,
    /// Whether it answers `owner_remaining_time`.
    answers_hold_checks: bool,
    /// The store's clock runs slower: it keeps each hold this many times its TTL.
    ttl_factor: u64,
    /// Whether calls fail as if the store were out of reach.
    down: AtomicBool,
    /// The next acquire takes the key and then fails to answer, as a reply lost in an outage.
    lose_next_grant: AtomicBool,
    /// Milliseconds an extend spends on its way to the store before it is applied (read
    /// when it is sent): a request that lands late.
    extend_lands_ms: AtomicU64,
    /// The next extend is applied and then fails to answer.
    lose_next_extend_answer: AtomicBool,
    /// Run once right after the store answered `is_held_by` (a race the old two-question
    /// due check lost: the key changes hands between the questions).
    after_held_by: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    calls: Mutex<Vec<&'static str>>,
}

impl Remote {
    fn new(timer: &FakeTimer, inner: Arc<MemoryStore>) -> Self {
        Self {
            inner,
            timer: timer.clone(),
            delay_ms: AtomicU64::new(0),
            release_reply_ms: AtomicU64::new(0),
            answers_hold_checks: true,
            ttl_factor: 1,
            down: AtomicBool::new(false),
            lose_next_grant: AtomicBool::new(false),
            extend_lands_ms: AtomicU64::new(0),
            lose_next_extend_answer: AtomicBool::new(false),
            after_held_by: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
        }
    }

    async fn reply<T>(&self, op: &'static str, value: T) -> Result<T> {
        self.calls.lock().unwrap().push(op);
        if self.down.load(Ordering::SeqCst) {
            return Err(LockError::StoreUnavailable("connection refused".into()));
        }
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            self.timer.sleep(delay).await;
        }
        Ok(value)
    }
}

#[async_trait::async_trait]
impl LockStore for Remote {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        if self.down.load(Ordering::SeqCst) {
            return self.reply("acquire", false).await;
        }
        let taken = self.inner.acquire_now(key, owner, ttl_ms * self.ttl_factor).is_some();
        if self.lose_next_grant.swap(false, Ordering::SeqCst) {
            // The store is down from here on, for a while: the best-effort release fails too.
            self.down.store(true, Ordering::SeqCst);
            return Err(LockError::StoreUnavailable("connection reset".into()));
        }
        self.reply("acquire", taken).await
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        if self.down.load(Ordering::SeqCst) {
            return self.reply("release", false).await;
        }
        let released = self.inner.release_now(key, owner);
        let late = self.release_reply_ms.load(Ordering::SeqCst);
        if late > 0 {
            self.timer.sleep(late).await;
        }
        self.reply("release", released).await
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        if self.down.load(Ordering::SeqCst) {
            return self.reply("extend", false).await;
        }
        // Read when it is sent: the request's own way there and back.
        let lands = self.extend_lands_ms.load(Ordering::SeqCst);
        let answer_ms = self.delay_ms.load(Ordering::SeqCst);
        let lost = self.lose_next_extend_answer.swap(false, Ordering::SeqCst);
        if lands > 0 {
            self.timer.sleep(lands).await;
        }
        let extended = self.inner.extend_now(key, owner, ttl_ms * self.ttl_factor);
        self.calls.lock().unwrap().push("extend");
        if lost {
            return Err(LockError::StoreUnavailable("no answer".into()));
        }
        if answer_ms > 0 {
            self.timer.sleep(answer_ms).await;
        }
        Ok(extended)
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        let locked = self.inner.is_locked_now(key);
        self.reply("is_locked", locked).await
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        let left = self.inner.remaining_time_now(key);
        self.reply("remaining_time", left).await
    }
    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        let held = self.inner.is_held_by_now(key, owner);
        let answer = self.reply("is_held_by", Some(held)).await;
        if let Some(race) = self.after_held_by.lock().unwrap().take() {
            race();
        }
        answer
    }
    async fn owner_remaining_time(&self, key: &str, owner: &str) -> Result<HoldCheck> {
        if !self.answers_hold_checks {
            return Ok(HoldCheck::CannotTell);
        }
        // One look, as a store's single question would be (the memory store itself is
        // synchronous and never asked).
        let check = if self.inner.is_held_by_now(key, owner) {
            self.inner
                .remaining_time_now(key)
                .map_or(HoldCheck::NotHeld, |remaining_ms| HoldCheck::Held { remaining_ms })
        } else {
            HoldCheck::NotHeld
        };
        self.reply("owner_remaining_time", check).await
    }
}

/// Runs `l.hold_ended()` for at most `within` ms; the time it ended and how.
fn ended_at(timer: &FakeTimer, l: &Lock, within: u64) -> Option<(u64, HoldEnd)> {
    timer.run(async {
        match select(Box::pin(l.hold_ended()), timer.sleep_for_test(within)).await {
            Either::Left((end, _)) => Some((timer.now(), end)),
            Either::Right(_) => None,
        }
    })
}

#[test]
fn the_local_deadline_is_the_send_time_plus_the_ttl_less_the_drift_allowance() {
    let timer = FakeTimer::new();
    let remote = Arc::new(Remote::new(&timer, memory(&timer)));
    remote.delay_ms.store(30, Ordering::SeqCst); // the grant arrives 30 ms after it was sent
    let l = Lock::new("k", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    assert_eq!(timer.now(), 30);
    let (at, end) = ended_at(&timer, &l, 5_000).expect("the hold ends");
    assert!(matches!(end, HoldEnd::Lost(LockError::NotHeld { .. })), "{end:?}");
    // Counted from the send time (0), never from the reply's arrival (30).
    assert_eq!(at, 1_000 - default_drift_ms(1_000));
    assert_eq!(default_drift_ms(1_000), 12, "1 % of the TTL + 2 ms");
}

#[test]
fn a_drift_allowance_of_the_ttl_or_more_is_refused() {
    let timer = FakeTimer::new();
    let mut l = Lock::new("k", 100, memory(&timer), Arc::new(timer.clone())).unwrap();
    assert_eq!(l.set_drift_ms(Some(100)).unwrap_err().code(), "INVALID_ARGUMENT");
    l.set_drift_ms(Some(40)).unwrap();
    assert_eq!(l.drift_ms(100), 40);
}

#[test]
fn the_due_check_asks_one_owner_specific_question() {
    // The old holder's hold expires; between "is it mine?" and "how long does the key
    // have?" a taker with a long TTL gets in. One question about this owner's own hold
    // cannot be fooled by that: the old handle's signal ends at its own deadline.
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    let remote = Arc::new(Remote::new(&timer, inner.clone()));
    let old = Lock::new("k", 60, remote.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(old.acquire(AcquireOptions::default())).unwrap());
    let taker_inner = inner.clone();
    let t = timer.clone();
    *remote.after_held_by.lock().unwrap() = Some(Box::new(move || {
        t.advance(61);
        assert!(taker_inner.acquire_now("k", "taker", 2_000).is_some());
    }));
    let (at, end) = ended_at(&timer, &old, 10_000).expect("the old hold ends");
    assert!(matches!(end, HoldEnd::Lost(_)), "{end:?}");
    assert!(at <= 60, "lost at its own deadline, not the taker's: {at} ms");
    assert!(!remote.calls.lock().unwrap().contains(&"is_held_by"), "no two-question check");
}

#[test]
fn a_hold_extended_elsewhere_is_kept_by_the_due_check() {
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    let remote = Arc::new(Remote::new(&timer, inner.clone()));
    let l = Lock::new("k", 200, remote.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    let copy = Lock::restore(l.serialized().unwrap(), remote.clone(), Arc::new(timer.clone()));
    let both = timer.run(async {
        let extend_elsewhere = async {
            timer.sleep_for_test(100).await;
            copy.extend(Some(1_000)).await.unwrap();
        };
        let watch = async {
            match select(Box::pin(l.hold_ended()), timer.sleep_for_test(800)).await {
                Either::Left((end, _)) => Some((timer.now(), end)),
                Either::Right(_) => None,
            }
        };
        futures_util::join!(extend_elsewhere, watch).1
    });
    assert!(both.is_none(), "still held after its own TTL: the copy extended it ({both:?})");
}

#[test]
fn lost_is_final_extend_rejects_and_release_frees_only_what_is_still_ours() {
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    // A store whose clock runs slow (it keeps holds twice their TTL) and that cannot
    // answer the due check: the handle calls the hold lost at its own deadline.
    let mut r = Remote::new(&timer, inner.clone());
    r.answers_hold_checks = false;
    r.ttl_factor = 2;
    let remote = Arc::new(r);
    let l = Lock::new("k", 100, remote.clone(), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    let (at, end) = ended_at(&timer, &l, 1_000).expect("lost");
    assert!(matches!(end, HoldEnd::Lost(_)));
    assert_eq!(at, 100 - default_drift_ms(100));
    assert!(inner.is_held_by_now("k", &owner_of(&l)), "the store still has it");
    let err = timer.run(l.extend(None)).unwrap_err();
    assert_eq!(err.code(), "LOCK_NOT_HELD", "an extend after 'lost' fails, though the store would extend");
    assert!(timer.run(l.is_expired()).unwrap(), "a lost hold reads as expired");
    assert!(timer.run(l.release()).unwrap(), "release still frees the key, as it is still this owner's");
    assert!(!inner.is_locked_now("k"));
}

#[test]
fn a_due_check_answered_after_the_release_freed_the_key_is_not_a_loss() {
    // TTL 120 ms: the due check asks at 87 ms. The release, sent at 80, frees the key at
    // once and its reply takes 30 ms: the check finds the key free, the release's doing.
    // The hold ends released (its reply says so), not lost.
    let timer = FakeTimer::new();
    let remote = Arc::new(Remote::new(&timer, memory(&timer)));
    remote.release_reply_ms.store(30, Ordering::SeqCst);
    let l = Lock::new("k", 120, remote.clone(), Arc::new(timer.clone())).unwrap();
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        let (released, end) = futures_util::join!(
            async {
                timer.sleep_for_test(80).await;
                l.release().await.unwrap()
            },
            l.hold_ended()
        );
        assert!(released);
        assert_eq!(end, HoldEnd::Released, "at {} ms", timer.now());
        assert!(
            remote.calls.lock().unwrap().contains(&"owner_remaining_time"),
            "the due check ran meanwhile"
        );
    });
}

#[test]
fn a_release_that_finds_the_hold_gone_ends_it_lost_at_once() {
    // The store lost the hold (here: someone cleared it); the handle does not know until
    // its release answers false, and its signal says lost then, not at the deadline.
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    let l = Lock::new("k", 10_000, Arc::new(Remote::new(&timer, inner.clone())), Arc::new(timer.clone()))
        .unwrap();
    timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        inner.clear();
        let (released, end) = futures_util::join!(
            async {
                timer.sleep_for_test(50).await;
                l.release().await.unwrap()
            },
            l.hold_ended()
        );
        assert!(!released);
        let HoldEnd::Lost(err) = end else { panic!("{end:?}") };
        assert_eq!(err.code(), "LOCK_NOT_HELD");
        assert_eq!(timer.now(), 50, "at the release's answer");
    });
}

#[test]
fn an_extend_still_unanswered_at_the_deadline_does_not_keep_the_hold() {
    // A slow store: every answer takes 120 ms. The extend sent at 250 ms is answered at
    // 370 ms, past the hold's deadline (295 ms). Only a request that succeeded moves the
    // deadline: the hold is lost at 295 ms, and the late success cannot bring it back.
    let timer = FakeTimer::new();
    let remote = Arc::new(Remote::new(&timer, memory(&timer)));
    remote.delay_ms.store(120, Ordering::SeqCst);
    let l = Lock::new("k", 300, remote.clone(), Arc::new(timer.clone())).unwrap();
    let (extended, ended) = timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        let extend = async {
            timer.sleep_for_test(250 - 120).await;
            l.extend(None).await
        };
        let watch = async { (l.hold_ended().await, timer.now()) };
        futures_util::join!(extend, watch)
    });
    assert!(matches!(ended.0, HoldEnd::Lost(_)), "{:?}", ended.0);
    assert_eq!(
        ended.1,
        300 - default_drift_ms(300),
        "lost at the deadline of the last request that succeeded"
    );
    assert_eq!(extended.unwrap_err().code(), "LOCK_NOT_HELD", "lost is final");
}

#[test]
fn an_extend_answered_after_a_later_one_does_not_move_the_deadline_back() {
    // Two extends in flight at once (auto-extend and a caller's own): the one sent at
    // 100 ms is answered at 180 ms, after the one sent at 120 ms (answered at 140 ms).
    // Both were applied, and whichever was applied last was applied after 120 ms: the
    // deadline counts from 120 ms. (It counted from the last answer's own send, 100 ms:
    // the hold ended 20 ms early.)
    let timer = FakeTimer::new();
    let mut r = Remote::new(&timer, memory(&timer));
    r.answers_hold_checks = false;
    let remote = Arc::new(r);
    let l = Lock::new("k", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let ended = timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        let first = async {
            timer.sleep_for_test(100).await;
            remote.delay_ms.store(80, Ordering::SeqCst);
            l.extend(None).await
        };
        let second = async {
            timer.sleep_for_test(120).await;
            remote.delay_ms.store(20, Ordering::SeqCst);
            l.extend(None).await
        };
        let watch = async { (l.hold_ended().await, timer.now()) };
        let (a, b, ended) = futures_util::join!(first, second, watch);
        a.unwrap();
        b.unwrap();
        ended
    });
    assert!(matches!(ended.0, HoldEnd::Lost(_)), "{:?}", ended.0);
    assert_eq!(ended.1, 120 + 1_000 - default_drift_ms(1_000), "counted from the later send");

    // Overlapping extends with different TTLs: whichever was applied last may be the
    // shorter one, so the shorter TTL counts, from the later send.
    let l = Lock::new("k2", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let start = timer.now();
    let ended = timer.run(async {
        remote.delay_ms.store(0, Ordering::SeqCst);
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        // The longer one, sent first, is answered last (it counted 5 s from 100 ms).
        let long = async {
            timer.sleep_for_test(100).await;
            remote.delay_ms.store(90, Ordering::SeqCst);
            l.extend(Some(5_000)).await
        };
        let short = async {
            timer.sleep_for_test(110).await;
            remote.delay_ms.store(10, Ordering::SeqCst);
            l.extend(Some(2_000)).await
        };
        let watch = async { (l.hold_ended().await, timer.now()) };
        let (a, b, ended) = futures_util::join!(long, short, watch);
        a.unwrap();
        b.unwrap();
        ended
    });
    assert_eq!(
        ended.1 - start,
        110 + 2_000 - default_drift_ms(2_000),
        "the shorter TTL, from the later send"
    );
}

#[test]
fn a_shorter_extend_still_unanswered_or_failed_caps_the_deadline() {
    // An extend of 500 ms sent at 100 ms lands at 400 ms (the key then expires at 900 ms)
    // while one of 5 s, sent at 110 ms, landed and was answered at once. The short one
    // may land after the long one, so until it is answered, and for good if it fails, the
    // deadline counts no more than 500 ms from the long one's send. (The hold counted on
    // 5 s while the key had expired at 900 ms.)
    for fails in [false, true] {
        let timer = FakeTimer::new();
        let mut r = Remote::new(&timer, memory(&timer));
        r.answers_hold_checks = false;
        let remote = Arc::new(r);
        let l = Lock::new("k", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
        let ended = timer.run(async {
            assert!(l.acquire(AcquireOptions::default()).await.unwrap());
            let short = async {
                timer.sleep_for_test(100).await;
                remote.extend_lands_ms.store(300, Ordering::SeqCst);
                remote.delay_ms.store(1_600, Ordering::SeqCst);
                remote.lose_next_extend_answer.store(fails, Ordering::SeqCst);
                l.extend(Some(500)).await
            };
            let long = async {
                timer.sleep_for_test(110).await;
                remote.extend_lands_ms.store(0, Ordering::SeqCst);
                remote.delay_ms.store(0, Ordering::SeqCst);
                l.extend(Some(5_000)).await
            };
            let watch = async { (l.hold_ended().await, timer.now()) };
            let (_, long, ended) = futures_util::join!(short, long, watch);
            long.unwrap();
            ended
        });
        assert!(matches!(ended.0, HoldEnd::Lost(_)), "{:?}", ended.0);
        assert!(
            ended.1 <= 900,
            "the key expired at 900 ms; the hold counted on it until {} (fails: {fails})",
            ended.1
        );
        assert_eq!(
            ended.1,
            110 + 500 - default_drift_ms(500),
            "the short TTL, from the long extend's send (fails: {fails})"
        );
    }
}

#[test]
fn a_signal_read_after_the_deadline_is_already_lost() {
    let timer = FakeTimer::new();
    let mut r = Remote::new(&timer, memory(&timer));
    r.answers_hold_checks = false;
    let l = Lock::new("k", 100, Arc::new(r), Arc::new(timer.clone())).unwrap();
    assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
    assert!(l.live_generation().is_some());
    timer.advance(100);
    assert_eq!(l.live_generation(), None, "past the deadline, nothing is certainly held");
    match timer.run(l.hold_ended()) {
        HoldEnd::Lost(err) => assert_eq!(err.code(), "LOCK_NOT_HELD"),
        HoldEnd::Released => panic!("lost, not released"),
    }
}

#[test]
fn a_waiting_acquire_rides_out_an_outage_until_its_deadline() {
    let timer = FakeTimer::new();
    let remote = Arc::new(Remote::new(&timer, memory(&timer)));
    remote.down.store(true, Ordering::SeqCst);
    let l = Lock::new("k", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let wait = AcquireOptions::default().with_timeout_ms(8_000).with_retry_delay_ms(50);
    let taken = timer.run(async {
        let back = async {
            timer.sleep_for_test(3_500).await;
            remote.down.store(false, Ordering::SeqCst);
        };
        futures_util::join!(l.acquire(wait), back).0
    });
    assert!(taken.unwrap(), "taken once the store was back");
    assert!(timer.now() >= 3_500 && timer.now() <= 4_600, "retried at most 1 s apart: {}", timer.now());
    let tries = remote.calls.lock().unwrap().iter().filter(|c| **c == "acquire").count();
    assert!((5..=15).contains(&tries), "backed off, doubling to 1 s: {tries} attempts");

    // A wait that outlasts: the last error, after an attempt at the deadline.
    let timer = FakeTimer::new();
    let remote = Arc::new(Remote::new(&timer, memory(&timer)));
    remote.down.store(true, Ordering::SeqCst);
    let l = Lock::new("k", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let err = timer.run(l.acquire(AcquireOptions::default().with_timeout_ms(2_500))).unwrap_err();
    assert_eq!(err.code(), "STORE_UNAVAILABLE");
    assert_eq!(timer.now(), 2_500, "the last attempt is at the deadline");

    // An acquire that does not wait fails at once.
    let err = timer.run(l.acquire(AcquireOptions::default())).unwrap_err();
    assert_eq!(err.code(), "STORE_UNAVAILABLE");
    assert_eq!(timer.now(), 2_500);
}

/// A store that answers with a contract violation: a wait does not ride that out.
struct Broken;

#[async_trait::async_trait]
impl LockStore for Broken {
    async fn acquire(&self, _: &str, _: &str, _: u64) -> Result<bool> {
        Err(LockError::StoreContractViolation("store.acquire() resolved to a string".into()))
    }
    async fn release(&self, _: &str, _: &str) -> Result<bool> {
        Ok(false)
    }
    async fn extend(&self, _: &str, _: &str, _: u64) -> Result<bool> {
        Ok(false)
    }
    async fn is_locked(&self, _: &str) -> Result<bool> {
        Ok(false)
    }
    async fn remaining_time(&self, _: &str) -> Result<Option<u64>> {
        Ok(None)
    }
}

#[test]
fn a_waiting_acquire_does_not_retry_a_configuration_or_contract_error() {
    let timer = FakeTimer::new();
    let l = Lock::new("k", 1_000, Arc::new(Broken), Arc::new(timer.clone())).unwrap();
    let err = timer.run(l.acquire(AcquireOptions::default().with_timeout_ms(5_000))).unwrap_err();
    assert_eq!(err.code(), "STORE_CONTRACT_VIOLATION");
    assert_eq!(timer.now(), 0, "failed at once");
}

/// Phase-fair read-write locks, on the memory store: a waiting writer keeps new readers
/// out; when a writer's hold ends, the readers waiting then enter before the next writer.
#[test]
fn read_write_locks_are_phase_fair() {
    use locksmith_core::HoldKind;
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let handle = |kind| Lock::of_kind("rw", 10_000, kind, store.clone(), t.clone()).unwrap();
    let (w1, w2) = (handle(HoldKind::Write), handle(HoldKind::Write));
    let (r1, r2, r3) = (handle(HoldKind::Read), handle(HoldKind::Read), handle(HoldKind::Read));
    let (first, read1, read2, second, late_read) = timer.run(async {
        futures_util::join!(
            take(&timer, &w1, 0, 100),  // holds 0..100
            take(&timer, &r1, 10, 50),  // waits behind w1
            take(&timer, &r2, 20, 50),  // waits behind w1
            take(&timer, &w2, 30, 50),  // waits, and claims: new readers stay out
            take(&timer, &r3, 110, 10), // arrives during the readers' turn, behind w2's claim
        )
    });
    assert_eq!(first, 0);
    assert_eq!(
        (read1, read2),
        (100, 100),
        "the readers waiting at the writer's release enter then, past w2's claim"
    );
    assert_eq!(second, 150, "the next writer enters once those readers are done");
    assert!(
        late_read >= 200,
        "a reader arriving during the turn waits behind the claimed writer: {late_read}"
    );
}

/// Starts after `at` ms, acquires (waiting), holds `hold` ms, releases: its grant time.
async fn take(timer: &FakeTimer, l: &Lock, at: u64, hold: u64) -> u64 {
    timer.sleep_for_test(at).await;
    let waiting = AcquireOptions::default().with_timeout_ms(60_000).with_retry_delay_ms(10);
    assert!(l.acquire(waiting).await.unwrap());
    let granted = timer.now();
    timer.sleep_for_test(hold).await;
    assert!(l.release().await.unwrap());
    granted
}

#[test]
fn a_wait_after_an_unanswered_grant_is_not_refused_by_its_own_orphan() {
    // The first attempt takes the key, but its answer is lost and the store goes down
    // (the best-effort release fails too). When the store is back, the wait's next attempt
    // is refused by that very hold: the handle finds it is its own and has the lock, instead
    // of being refused by its own token until its deadline.
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    let remote = Arc::new(Remote::new(&timer, inner.clone()));
    remote.lose_next_grant.store(true, Ordering::SeqCst);
    let l = Lock::new("k", 10_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let taken = timer.run(async {
        let back = async {
            timer.sleep_for_test(200).await;
            remote.down.store(false, Ordering::SeqCst);
        };
        futures_util::join!(
            l.acquire(AcquireOptions::default().with_timeout_ms(2_000).with_retry_delay_ms(50)),
            back
        )
        .0
    });
    assert!(taken.unwrap(), "its own unanswered grant is its hold");
    assert!(timer.now() < 1_500, "found once the store was back: {} ms", timer.now());
    assert!(timer.run(l.release()).unwrap(), "and it can release it");
    assert!(!inner.is_locked_now("k"));
}

#[test]
fn an_aborted_wait_stops_at_once_and_holds_nothing() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let (a, b) = (
        Lock::new("k", 10_000, store.clone(), t.clone()).unwrap(),
        Lock::new("k", 10_000, store.clone(), t).unwrap(),
    );
    let abort = locksmith_core::Abort::new();
    let (waited, stopped_at) = timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        let (waited, ()) = futures_util::join!(b.acquire_abortable(waiting(10_000, 1_000), &abort), async {
            timer.sleep_for_test(250).await;
            abort.abort();
        });
        (waited, timer.now())
    });
    assert_eq!(waited.unwrap_err().code(), "ABORTED");
    assert_eq!(stopped_at, 250, "the wait ended when it was aborted, not at a retry or its deadline");
    assert_eq!(b.attempts(), 1, "one attempt at the start, none after the abort");
    timer.run(async {
        assert!(a.release().await.unwrap());
        assert!(!b.release().await.unwrap(), "the aborted handle holds nothing");
    });
    assert!(!store.is_locked_now("k"));
}

#[test]
fn an_already_aborted_acquire_takes_nothing() {
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let l = Lock::new("k", 10_000, store.clone(), Arc::new(timer.clone())).unwrap();
    let abort = locksmith_core::Abort::new();
    abort.abort();
    let answer = timer.run(l.acquire_abortable(AcquireOptions::default(), &abort));
    assert_eq!(answer.unwrap_err().code(), "ABORTED");
    assert_eq!(l.attempts(), 0);
    assert!(!store.is_locked_now("k"));
}

#[test]
fn an_attempt_in_flight_when_the_wait_is_aborted_is_released_again() {
    // The store takes the key at once but answers 100 ms later; the abort comes at 30 ms,
    // while the grant is on its way: the guard frees it, so nothing stays held.
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    let remote = Arc::new(Remote::new(&timer, inner.clone()));
    remote.delay_ms.store(100, Ordering::SeqCst);
    let l = Lock::new("k", 10_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let abort = locksmith_core::Abort::new();
    let (answer, ()) = timer.run(async {
        futures_util::join!(l.acquire_abortable(waiting(5_000, 50), &abort), async {
            timer.sleep_for_test(30).await;
            assert!(inner.is_locked_now("k"), "the store granted the attempt in flight");
            abort.abort();
        })
    });
    assert_eq!(answer.unwrap_err().code(), "ABORTED");
    assert_eq!(timer.now(), 30);
    timer.run(timer.sleep_for_test(500));
    assert!(!inner.is_locked_now("k"), "the grant that raced the abort was released");
    assert!(!timer.run(l.is_expired()).unwrap(), "the handle records no hold");
}

#[test]
fn an_aborted_writer_gives_up_its_claim_so_readers_get_in() {
    use locksmith_core::HoldKind;
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let handle = |kind| Lock::of_kind("rw", 10_000, kind, store.clone(), t.clone()).unwrap();
    let (r1, w, r2) = (handle(HoldKind::Read), handle(HoldKind::Write), handle(HoldKind::Read));
    let abort = locksmith_core::Abort::new();
    let (writer, reader_at) = timer.run(async {
        assert!(r1.acquire(AcquireOptions::default()).await.unwrap());
        let (writer, reader_at, ()) = futures_util::join!(
            w.acquire_abortable(waiting(60_000, 10), &abort),
            async {
                // Behind the waiting writer's claim, a new reader waits...
                timer.sleep_for_test(20).await;
                assert!(r2.acquire(waiting(60_000, 10)).await.unwrap());
                timer.now()
            },
            async {
                // ... until the writer gives up.
                timer.sleep_for_test(100).await;
                abort.abort();
            }
        );
        (writer, reader_at)
    });
    assert_eq!(writer.unwrap_err().code(), "ABORTED");
    assert!(
        (100..=120).contains(&reader_at),
        "the reader got in once the claim was given up, at {reader_at}"
    );
}

#[test]
fn an_abort_that_comes_with_a_release_sends_no_attempt() {
    // The holder releases and the waiter's signal aborts in the same turn: the wait wakes
    // for both, and ends as aborted without trying the free key.
    let timer = FakeTimer::new();
    let store = memory(&timer);
    let t: Arc<FakeTimer> = Arc::new(timer.clone());
    let (a, b) = (
        Lock::new("k", 10_000, store.clone(), t.clone()).unwrap(),
        Lock::new("k", 10_000, store.clone(), t).unwrap(),
    );
    let abort = locksmith_core::Abort::new();
    let (waited, ()) = timer.run(async {
        assert!(a.acquire(AcquireOptions::default()).await.unwrap());
        futures_util::join!(b.acquire_abortable(waiting(10_000, 1_000), &abort), async {
            timer.sleep_for_test(100).await;
            assert!(a.release().await.unwrap());
            abort.abort();
        })
    });
    assert_eq!(waited.unwrap_err().code(), "ABORTED");
    assert_eq!(b.attempts(), 1, "no attempt after the abort");
    assert!(!store.is_locked_now("k"));
}

#[test]
fn a_failed_extend_no_longer_caps_once_every_extend_is_answered() {
    // A short extend (5 s) succeeds while a long one (30 s) is still on its way; the long
    // one then fails (applied, answer lost). Nothing is unanswered any more, and the only
    // extend that may still land is the 30 s one: a later 30 s extend answered alone counts
    // 30 s from its send. (The 5 s one's cap outlived the answers: the hold was given up at
    // 9610 ms while the store kept it 22 s more.)
    let timer = FakeTimer::new();
    let mut r = Remote::new(&timer, memory(&timer));
    r.answers_hold_checks = false;
    let remote = Arc::new(r);
    let l = Lock::new("k", 30_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let out = timer.run(async {
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        let short = async {
            timer.sleep_for_test(100).await;
            remote.extend_lands_ms.store(0, Ordering::SeqCst);
            remote.delay_ms.store(200, Ordering::SeqCst);
            remote.lose_next_extend_answer.store(false, Ordering::SeqCst);
            l.extend(Some(5_000)).await
        };
        let long = async {
            timer.sleep_for_test(110).await;
            remote.extend_lands_ms.store(500, Ordering::SeqCst);
            remote.delay_ms.store(0, Ordering::SeqCst);
            remote.lose_next_extend_answer.store(true, Ordering::SeqCst);
            l.extend(None).await
        };
        let (s, lg) = futures_util::join!(short, long);
        assert!(s.is_ok());
        assert!(lg.is_err());
        timer.sleep_for_test(1_000).await; // t = 1610
        remote.extend_lands_ms.store(0, Ordering::SeqCst);
        l.extend(None).await.unwrap(); // 30 s from 1610, the store keeps it to 31610
        timer.sleep_for_test(8_000).await; // t = 9610
        let at = timer.now();
        (at, l.live_generation().is_some(), l.extend(None).await, remote.inner.remaining_time_now("k"))
    });
    assert!(out.1, "the hold was given up at {} though the store keeps it {:?} ms more", out.0, out.3);
}

#[test]
fn a_due_check_answered_after_a_shorter_extend_landed_does_not_move_the_deadline() {
    // The key was extended elsewhere to 5.5 s (a restored copy). The due check is
    // evaluated at the store at 888 ms and answered at 948 ms; a 300 ms extend sent at
    // 890 ms lands at 910 ms (the key now expires at 1210 ms) and is answered then. The
    // look's answer predates that landing: it must not move the deadline (it moved it to
    // about 5.4 s, and the handle held on past the key's expiry).
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    let remote = Arc::new(Remote::new(&timer, inner.clone()));
    let l = Lock::new("k", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let owner = {
        assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
        owner_of(&l)
    };
    let out = timer.run(async {
        let watch = async {
            match select(Box::pin(l.hold_ended()), timer.sleep_for_test(2_000)).await {
                Either::Left((end, _)) => Some((timer.now(), end)),
                Either::Right(_) => None,
            }
        };
        let script = async {
            timer.sleep_for_test(500).await;
            assert!(inner.extend_now("k", &owner, 5_000)); // elsewhere: to 5500
            timer.sleep_for_test(350).await; // 850
            remote.delay_ms.store(60, Ordering::SeqCst);
            timer.sleep_for_test(40).await; // 890
            remote.delay_ms.store(0, Ordering::SeqCst);
            remote.extend_lands_ms.store(20, Ordering::SeqCst);
            let r = l.extend(Some(300)).await;
            remote.extend_lands_ms.store(0, Ordering::SeqCst);
            r
        };
        let (ended, extended) = futures_util::join!(watch, script);
        (ended, extended, timer.now())
    });
    let _ = out;
    timer.advance(1_300 - timer.now().min(1_300));
    assert!(
        l.live_generation().is_none() || inner.is_held_by_now("k", &owner),
        "the handle believes it holds a key the store let go"
    );
}

#[test]
fn a_failed_extend_crossing_the_due_check_does_not_end_a_hold_the_store_keeps() {
    // A restored copy extended the key to 5.5 s; the due check, sent at 888 ms, is answered
    // at 948 ms; an extend sent at 890 ms is applied (the key now runs to 1890 ms) and its
    // answer lost. The check's answer crossed the extend, so it cannot set the deadline;
    // the hold is asked again rather than given up at its old deadline (it was lost at
    // 988 ms while the store kept the key 900 ms more).
    let timer = FakeTimer::new();
    let inner = memory(&timer);
    let remote = Arc::new(Remote::new(&timer, inner.clone()));
    let l = Lock::new("k", 1_000, remote.clone(), Arc::new(timer.clone())).unwrap();
    let owner = {
        assert!(timer.run(l.acquire(AcquireOptions::default())).unwrap());
        owner_of(&l)
    };
    let out = timer.run(async {
        let watch = async {
            match select(Box::pin(l.hold_ended()), timer.sleep_for_test(3_000)).await {
                Either::Left((end, _)) => Some((timer.now(), end)),
                Either::Right(_) => None,
            }
        };
        let script = async {
            timer.sleep_for_test(500).await;
            assert!(inner.extend_now("k", &owner, 5_000)); // a restored copy: to 5500
            timer.sleep_for_test(350).await; // 850
            remote.delay_ms.store(60, Ordering::SeqCst);
            timer.sleep_for_test(40).await; // 890: the due check (sent 888) is on its way
            remote.delay_ms.store(0, Ordering::SeqCst);
            remote.lose_next_extend_answer.store(true, Ordering::SeqCst);
            l.extend(None).await // applied (to 1890), answer lost
        };
        let (ended, extended) = futures_util::join!(watch, script);
        (ended, extended.is_err(), inner.remaining_time_now("k"))
    });
    let (ended, failed, _) = out;
    assert!(failed);
    if let Some((at, end)) = ended {
        let left = inner.remaining_time_now("k");
        // at 'at', store expiry is 1890 at least
        assert!(
            at >= 1_800,
            "lost at {at} ({end:?}) though the store keeps the key to >= 1890 (left now {left:?})"
        );
    }
}
