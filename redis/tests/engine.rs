//! The sans-I/O engine against a real `redis-server`, driven over tokio sockets by the
//! tests' own host (host/mod.rs; in Node the host is `js/redis/driver.mjs`): the store
//! conformance suite, the key layout other clients share, the EVAL fallback after
//! `SCRIPT FLUSH`, release notifications on a second socket, and the keys of semaphores
//! and read-write locks (where they live, and that they go).

mod host;
mod race;
mod server;
use host::{connect, connect_with, runtime, Admin, Settings, TokioTimer};
use race::ReleasesAfterAFailedAttempt;

use std::sync::Arc;
use std::time::Duration;

use locksmith_core::conformance::Harness;
use locksmith_core::{AcquireOptions, HoldKind, Lock, LockStore};
use locksmith_redis::engine::reply::ReplyValue;

fn harness() -> Harness {
    let server = server::shared();
    Harness {
        store: connect(server.port, true),
        timer: Arc::new(TokioTimer::default()),
        runner: Arc::new(|future| runtime().block_on(future)),
        fencing: true,
        exact_ownership: true,
        permits: true,
        slack_ms: 100,
    }
}

locksmith_core::store_conformance_suite!(harness());

#[test]
fn locks_are_laid_out_as_every_locksmith_client_reads_them() {
    // `<prefix>{<key>}` holds the owner with the TTL, `…:fence` the last token: the
    // layout the stores over ioredis, node-redis and Upstash share with the engine.
    let server = server::shared();
    let engine = connect(server.port, false);
    let grace = i64::try_from(locksmith_redis::FENCE_GRACE_MS).unwrap();
    runtime().block_on(async {
        let mut admin = Admin::connect(server.port).await;
        let key = "locksmith:{shared-layout}".to_owned();
        let token = engine.acquire_with_grant("shared-layout", "owner-a", 5_000).await.unwrap().unwrap();
        assert_eq!(admin.command(&["GET", &key]).await, ReplyValue::Text("owner-a".into()));
        let ttls = admin.pttls(&[key.clone(), format!("{key}:fence")]).await;
        assert!(ttls[0] > 4_000 && ttls[0] <= 5_000, "{ttls:?}");
        assert!(
            ttls[1] > 5_000 && ttls[1] <= 5_000 + grace,
            "the fence outlives the lock, bounded: {ttls:?}"
        );
        let fence = admin.command(&["GET", &format!("{key}:fence")]).await;
        assert_eq!(fence, ReplyValue::Text(token.fencing_token.unwrap().to_string()));
        assert!(engine.release("shared-layout", "owner-a").await.unwrap());
        assert_eq!(admin.pttls(std::slice::from_ref(&key)).await, [-2]);
        // A lock another client wrote with the same layout is held, and its owner's to free.
        admin.command(&["SET", &key, "owner-b", "PX", "5000"]).await;
        assert!(engine.is_locked("shared-layout").await.unwrap());
        assert_eq!(engine.is_held_by("shared-layout", "owner-b").await.unwrap(), Some(true));
        assert!(!engine.acquire("shared-layout", "owner-c", 5_000).await.unwrap());
        assert!(!engine.release("shared-layout", "owner-c").await.unwrap());
        assert!(engine.release("shared-layout", "owner-b").await.unwrap());
        let next = engine.acquire_with_grant("shared-layout", "owner-c", 5_000).await.unwrap().unwrap();
        assert!(next.fencing_token > token.fencing_token, "{next:?} after {token:?}");
        assert!(engine.release("shared-layout", "owner-c").await.unwrap());
    });
}

#[test]
fn scripts_are_sent_again_after_script_flush() {
    let server = server::shared();
    let engine = connect(server.port, false);
    runtime().block_on(async {
        assert!(engine.acquire("flushed", "me", 5_000).await.unwrap());
        let mut admin = Admin::connect(server.port).await;
        assert_eq!(admin.command(&["SCRIPT", "FLUSH"]).await, ReplyValue::Text("OK".into()));
        assert!(engine.extend("flushed", "me", 5_000).await.unwrap());
        assert!(engine.release("flushed", "me").await.unwrap());
        // The permit scripts too, each on its first call after the flush.
        let sem = HoldKind::Permit { limit: 2 };
        assert!(engine.acquire_permit("flushed", "me", 5_000, sem).await.unwrap().is_some());
        assert_eq!(engine.permit_count("flushed", sem).await.unwrap(), 1);
        assert!(engine.permit_remaining_time("flushed", "me", sem).await.unwrap().is_some());
        assert!(engine.extend_permit("flushed", "me", 5_000, sem).await.unwrap());
        assert!(engine.release_permit("flushed", "me", sem).await.unwrap());
        assert!(engine.acquire_permit("flushed", "me", 5_000, HoldKind::Write).await.unwrap().is_some());
        assert!(engine.release_permit("flushed", "me", HoldKind::Write).await.unwrap());
    });
}

#[test]
fn permit_keys_share_the_lock_slot_expire_with_their_holds_and_go_on_release() {
    let server = server::shared();
    let engine = connect(server.port, false);
    let grace = i64::try_from(locksmith_redis::FENCE_GRACE_MS).unwrap();
    runtime().block_on(async {
        let mut admin = Admin::connect(server.port).await;
        let sem = HoldKind::Permit { limit: 2 };
        let holders = "locksmith:{keys}:semaphore".to_owned();
        let keys = [holders.clone(), format!("{holders}:limit"), format!("{holders}:fence")];
        assert!(engine.acquire_permit("keys", "a", 300, sem).await.unwrap().is_some());
        assert!(engine.acquire_permit("keys", "b", 400, sem).await.unwrap().is_some());
        for (key, ttl) in keys.iter().zip(admin.pttls(&keys).await) {
            // The latest permit's TTL plus the bound, no more.
            assert!(ttl > 300 && ttl <= 400 + grace, "{key}: PTTL {ttl}");
        }
        for key in &keys {
            // Redis Cluster hashes the first `{...}`: the lock key's own.
            assert!(key.starts_with("locksmith:{keys}:"), "{key} hashes with the lock key");
        }
        assert!(engine.release_permit("keys", "a", sem).await.unwrap());
        assert!(engine.release_permit("keys", "b", sem).await.unwrap());
        let left = admin.pttls(&keys).await;
        assert_eq!(&left[..2], &[-2, -2], "the holders and the limit go with the last holder");
        assert!(left[2] > 0 && left[2] <= 400 + grace, "the fencing counter expires soon after");

        let rw = "locksmith:{keys}:rw".to_owned();
        let rw_keys = [rw.clone(), format!("{rw}:writer"), format!("{rw}:claim"), format!("{rw}:fence")];
        assert!(engine.acquire_permit("keys", "r", 200, HoldKind::Read).await.unwrap().is_some());
        assert!(engine.acquire_permit("keys", "w", 200, HoldKind::Write).await.unwrap().is_none());
        let held = admin.pttls(&rw_keys).await;
        assert!(held[0] > 0 && held[0] <= 200 + grace, "{held:?}");
        assert_eq!(held[1], -2, "no writer");
        assert!(held[2] > 0 && held[2] <= 200, "the refused writer's claim expires with its TTL: {held:?}");
        assert!(!engine.release_permit("keys", "w", HoldKind::Write).await.unwrap(), "a claim is no hold");
        assert!(engine.acquire_permit("keys", "w2", 200, HoldKind::Write).await.unwrap().is_none());
        // Nobody releases: every key is gone once the holds and the bound have passed.
        tokio::time::sleep(Duration::from_millis(400 + 1_000 + 100)).await;
        assert_eq!(admin.pttls(&rw_keys).await, [-2, -2, -2, -2]);
        assert_eq!(admin.pttls(&keys).await, [-2, -2, -2]);

        assert!(engine.acquire_permit("keys", "w3", 5_000, HoldKind::Write).await.unwrap().is_some());
        let held = admin.pttls(&rw_keys).await;
        assert!(held[1] > 5_000 && held[1] <= 5_000 + grace, "the writer lives as its hold: {held:?}");
        // A reader refused meanwhile waits in `:readers`, expiring with its TTL; the
        // writer's release makes it the readers' turn (`:turn`), gone when it gives up.
        let waits = [format!("{rw}:readers"), format!("{rw}:turn")];
        assert!(engine.acquire_permit("keys", "r2", 300, HoldKind::Read).await.unwrap().is_none());
        let waiting = admin.pttls(&waits).await;
        assert!(waiting[0] > 0 && waiting[0] <= 300, "a waiting reader expires with its TTL: {waiting:?}");
        assert!(engine.release_permit("keys", "w3", HoldKind::Write).await.unwrap());
        assert_eq!(&admin.pttls(&rw_keys).await[..3], &[-2, -2, -2]);
        let turn = admin.pttls(&waits).await;
        assert!(turn[0] == -2 && turn[1] > 0 && turn[1] <= 300, "the readers' turn, bounded: {turn:?}");
        assert!(!engine.release_permit("keys", "r2", HoldKind::Read).await.unwrap(), "a wait is no hold");
        assert_eq!(admin.pttls(&waits).await, [-2, -2], "nothing left of the wait");
    });
}

#[test]
fn permit_fencing_tokens_grow() {
    let server = server::shared();
    let engine = connect(server.port, false);
    runtime().block_on(async {
        for kind in [HoldKind::Permit { limit: 2 }, HoldKind::Read, HoldKind::Write] {
            let mut last = 0;
            for owner in ["a", "b", "c"] {
                let token = engine.acquire_permit("tokens", owner, 5_000, kind).await.unwrap();
                let token = token.and_then(|g| g.fencing_token).expect("a token");
                assert!(token > last, "{kind:?}: {token} after {last}");
                last = token;
                assert!(engine.release_permit("tokens", owner, kind).await.unwrap());
            }
        }
    });
}

#[test]
fn permit_waiters_wake_on_release_not_at_their_retry_delay() {
    let server = server::shared();
    let store = connect(server.port, true);
    let timer = Arc::new(TokioTimer::default());
    let handle = |kind| Lock::of_kind("permit-notified", 10_000, kind, store.clone(), timer.clone()).unwrap();
    let wait = AcquireOptions::default().with_timeout_ms(8_000).with_retry_delay_ms(5_000);
    runtime().block_on(async {
        // One release of a writer lets every waiting reader in: all of them wake.
        let writer = handle(HoldKind::Write);
        let readers = [handle(HoldKind::Read), handle(HoldKind::Read), handle(HoldKind::Read)];
        assert!(writer.acquire(AcquireOptions::default()).await.unwrap());
        let started = std::time::Instant::now();
        let release = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(writer.release().await.unwrap());
        };
        let (got, ()) =
            tokio::join!(futures_util::future::join_all(readers.iter().map(|r| r.acquire(wait))), release);
        assert!(got.into_iter().all(|r| r.unwrap()));
        assert!(started.elapsed() < Duration::from_millis(1_500), "woke after {:?}", started.elapsed());
        for reader in &readers {
            assert!(reader.release().await.unwrap());
        }
        // A semaphore's permit given back wakes its waiter.
        let sem = HoldKind::Permit { limit: 1 };
        let (holder, waiter) = (handle(sem), handle(sem));
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let started = std::time::Instant::now();
        let release = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(holder.release().await.unwrap());
        };
        let (got, ()) = tokio::join!(waiter.acquire(wait), release);
        assert!(got.unwrap());
        assert!(started.elapsed() < Duration::from_millis(1_500), "woke after {:?}", started.elapsed());
        assert!(waiter.release().await.unwrap());
    });
}

#[test]
fn a_waiter_wakes_on_release_not_at_its_retry_delay() {
    let server = server::shared();
    let store = connect(server.port, true);
    let timer = Arc::new(TokioTimer::default());
    let holder = Lock::new("notified", 10_000, store.clone(), timer.clone()).unwrap();
    let waiter = Lock::new("notified", 10_000, store.clone(), timer).unwrap();
    runtime().block_on(async {
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        let started = std::time::Instant::now();
        let wait =
            waiter.acquire(AcquireOptions::default().with_timeout_ms(8_000).with_retry_delay_ms(5_000));
        let release = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(holder.release().await.unwrap());
        };
        let (acquired, ()) = tokio::join!(wait, release);
        assert!(acquired.unwrap());
        assert!(started.elapsed() < Duration::from_millis(1_500), "woke after {:?}", started.elapsed());
    });
}

#[test]
fn a_release_right_after_a_failed_attempt_wakes_the_waiter() {
    let server = server::shared();
    // The subscriber connection is slow, so its SUBSCRIBE reaches Redis after the release.
    let slow = Settings { notify: true, subscriber_delay_ms: 100, ..Settings::default() };
    let inner = connect_with(server.port, &slow).unwrap();
    let direct = connect(server.port, false);
    let store = Arc::new(ReleasesAfterAFailedAttempt::new(inner));
    let timer = Arc::new(TokioTimer::default());
    runtime().block_on(async {
        for round in 0..5 {
            let key = format!("engine-right-after-{round}");
            let holder = Arc::new(Lock::new(&key, 30_000, direct.clone(), timer.clone()).unwrap());
            assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
            *store.holder.lock().unwrap() = Some(holder);
            let waiter = Lock::new(&key, 30_000, store.clone(), timer.clone()).unwrap();
            let start = std::time::Instant::now();
            assert!(waiter
                .acquire(AcquireOptions::default().with_timeout_ms(10_000).with_retry_delay_ms(5_000))
                .await
                .unwrap());
            let slept = start.elapsed();
            assert!(slept < Duration::from_secs(1), "round {round}: the waiter slept {slept:?}");
            assert!(waiter.release().await.unwrap());
        }
    });
}
