//! `FileStore`: the conformance suite on a fake clock, and what a file shared by several
//! stores (as by several processes) must do.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use locksmith_core::conformance::Harness;
use locksmith_core::{AcquireOptions, FakeTimer, FileStore, HoldKind, Lock, LockStore};

/// A lock file of this test's own (removed when the test process ends its case).
fn temp_path(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("locksmith-file-store-{}-{name}-{n}.lock", std::process::id()))
}

fn harness() -> Harness {
    let timer = FakeTimer::new();
    Harness {
        store: Arc::new(FileStore::open(temp_path("conformance"), Arc::new(timer.clone())).unwrap()),
        timer: Arc::new(timer.clone()),
        runner: timer.runner(),
        fencing: true,
        exact_ownership: true,
        permits: true,
        slack_ms: 0,
    }
}

locksmith_core::store_conformance_suite!(harness());

/// Two stores on one file, as two processes would have, on one fake clock.
fn pair() -> (FakeTimer, Arc<FileStore>, Arc<FileStore>, PathBuf) {
    let timer = FakeTimer::new();
    let path = temp_path("pair");
    let a = Arc::new(FileStore::open(&path, Arc::new(timer.clone())).unwrap());
    let b = Arc::new(FileStore::open(&path, Arc::new(timer.clone())).unwrap());
    (timer, a, b, path)
}

fn lock(store: &Arc<FileStore>, timer: &FakeTimer, key: &str, kind: HoldKind) -> Lock {
    Lock::of_kind(key, 1_000, kind, store.clone(), Arc::new(timer.clone())).unwrap()
}

#[test]
fn two_stores_on_one_file_exclude_each_other() {
    let (timer, a, b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    run(Box::pin(async move {
        let la = lock(&a, &t, "k", HoldKind::Exclusive);
        let lb = lock(&b, &t, "k", HoldKind::Exclusive);
        assert!(la.acquire(AcquireOptions::default()).await.unwrap());
        assert!(!lb.acquire(AcquireOptions::default()).await.unwrap(), "the other store sees the hold");
        assert!(b.is_locked("k").await.unwrap());
        let ta = la.fencing_token().unwrap();
        assert!(la.release().await.unwrap());
        assert!(lb.acquire(AcquireOptions::default()).await.unwrap(), "and its release");
        assert!(lb.fencing_token().unwrap() > ta, "tokens grow across the stores");
        // Semaphores: permits counted across both.
        let sem = HoldKind::Permit { limit: 3 };
        assert!(a.acquire_permits("s", "o1", 1_000, sem, 2).await.unwrap().is_some());
        assert!(b.acquire_permits("s", "o2", 1_000, sem, 2).await.unwrap().is_none(), "2 + 2 > 3");
        assert!(b.acquire_permits("s", "o2", 1_000, sem, 1).await.unwrap().is_some());
        assert_eq!(a.permit_count("s", sem).await.unwrap(), 3);
        // Read-write: a writer in one store keeps the other's reader out.
        assert!(a.acquire_permit("rw", "w", 1_000, HoldKind::Write).await.unwrap().is_some());
        assert!(b.acquire_permit("rw", "r", 1_000, HoldKind::Read).await.unwrap().is_none());
        // Holds expire on the (fake) wall clock for both.
        t.advance(1_001);
        assert!(!a.is_locked("k").await.unwrap());
        assert!(b.acquire_permit("rw", "r", 1_000, HoldKind::Read).await.unwrap().is_some());
    }));
    let _ = std::fs::remove_file(path);
}

/// The generation and release count in the header (bytes 16..32).
fn header_counts(path: &std::path::Path) -> (u64, u64) {
    let bytes = std::fs::read(path).unwrap();
    (
        u64::from_le_bytes(bytes[16..24].try_into().unwrap()),
        u64::from_le_bytes(bytes[24..32].try_into().unwrap()),
    )
}

#[test]
fn a_refused_acquire_writes_nothing_and_only_releases_count_as_releases() {
    let (timer, a, b, path) = pair();
    let run = timer.runner();
    let p = path.clone();
    let t = timer.clone();
    run(Box::pin(async move {
        assert!(a.acquire("k", "o", 1_000).await.unwrap());
        let (generation, releases) = header_counts(&p);
        // Later on the clock (the fencing counter's floor moves with it): still nothing to write.
        t.advance(5);
        assert!(!b.acquire("k", "o2", 1_000).await.unwrap());
        assert_eq!(header_counts(&p), (generation, releases), "a refusal changes nothing");
        assert!(a.extend("k", "o", 2_000).await.unwrap());
        assert_eq!(header_counts(&p), (generation + 1, releases), "an extend is a write, not a release");
        assert!(a.release("k", "o").await.unwrap());
        assert_eq!(header_counts(&p), (generation + 2, releases + 1));
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_file_that_is_not_a_lock_file_is_refused_and_tokens_grow_across_a_remade_file() {
    let (timer, a, _b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    let p = path.clone();
    run(Box::pin(async move {
        let first = a.acquire_with_grant("j", "o", 1_000).await.unwrap().unwrap().fencing_token.unwrap();
        // Some other file: refused (at open), and left alone.
        let other = p.with_extension("other");
        std::fs::write(&other, b"not a lock file at all, but long enough to be read as one: 0123456789")
            .unwrap();
        let err = FileStore::open(&other, Arc::new(t.clone())).err().unwrap();
        assert_eq!(err.code(), "STORE_ERROR", "{err}");
        assert!(err.to_string().contains("is not a locksmith lock file"), "{err}");
        assert!(std::fs::read(&other).unwrap().starts_with(b"not a lock file"));
        let _ = std::fs::remove_file(&other);
        // A lock file whose holds were damaged: refused too (not read as empty).
        let mut bytes = std::fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        let damaged = FileStore::open(&p, Arc::new(t.clone())).unwrap();
        let err = damaged.is_locked("j").await.unwrap_err();
        assert!(err.to_string().contains("is damaged"), "{err}");
        // Deleted and made again: tokens are the wall clock's microseconds, so they grow.
        std::fs::remove_file(&p).unwrap();
        t.advance(1);
        let remade = FileStore::open(&p, Arc::new(t.clone())).unwrap();
        let next = remade.acquire_with_grant("j", "o2", 1_000).await.unwrap().unwrap().fencing_token.unwrap();
        assert!(next > first, "{next} > {first}");
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn an_operation_waits_for_the_os_lock_then_fails_unavailable() {
    let (timer, _a, _b, path) = pair();
    let a = Arc::new(FileStore::open(&path, Arc::new(timer.clone())).unwrap().with_busy_timeout_ms(50));
    let other = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    other.lock().unwrap();
    let run = timer.runner();
    let a2 = a.clone();
    run(Box::pin(async move {
        let err = a2.acquire("k", "o", 1_000).await.unwrap_err();
        assert_eq!(err.code(), "STORE_UNAVAILABLE", "{err}");
        assert!(err.to_string().contains("kept the lock file"), "{err}");
    }));
    other.unlock().unwrap();
    let run = timer.runner();
    run(Box::pin(async move {
        assert!(a.acquire("k", "o", 1_000).await.unwrap(), "works once the file is free");
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn changed_wakes_a_waiter_of_another_store() {
    let (timer, a, b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    run(Box::pin(async move {
        let la = lock(&a, &t, "k", HoldKind::Exclusive);
        assert!(la.acquire(AcquireOptions::default()).await.unwrap());
        let lb = lock(&b, &t, "k", HoldKind::Exclusive);
        let started = t.now();
        let waiter = async {
            // A retry delay longer than the wait: only a wake-up lets it in early.
            lb.acquire(AcquireOptions::default().with_timeout_ms(900).with_retry_delay_ms(5_000)).await
        };
        let releaser = async {
            t.sleep_for_test(50).await;
            assert!(la.release().await.unwrap());
            b.changed(); // what the watcher of b's process does
        };
        let (got, ()) = futures_util::join!(waiter, releaser);
        assert!(got.unwrap());
        assert!(t.now() - started < 100, "woken at the release, not at a retry");
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_closed_store_refuses() {
    let (timer, a, _b, path) = pair();
    a.close();
    let run = timer.runner();
    run(Box::pin(async move {
        assert_eq!(a.acquire("k", "o", 1_000).await.unwrap_err().code(), "STORE_CLOSED");
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_missing_directory_is_a_store_error() {
    let err = FileStore::open("/nonexistent-locksmith-dir/x.lock", Arc::new(FakeTimer::new())).err().unwrap();
    assert_eq!(err.code(), "STORE_ERROR");
    assert!(err.to_string().contains("/nonexistent-locksmith-dir/x.lock"), "{err}");
}

#[test]
fn a_waiting_writers_claim_and_the_readers_turn_cross_stores() {
    let (timer, a, b, path) = pair();
    let run = timer.runner();
    run(Box::pin(async move {
        // A reader holds (in a); a writer (in b) is refused and claims the lock.
        assert!(a.acquire_permit("rw", "r1", 1_000, HoldKind::Read).await.unwrap().is_some());
        assert!(b.acquire_permit("rw", "w", 1_000, HoldKind::Write).await.unwrap().is_none());
        // The claim is in the file: a new reader in a is kept out.
        assert!(a.acquire_permit("rw", "r2", 1_000, HoldKind::Read).await.unwrap().is_none());
        // The reader leaves: the writer gets in (its claim), r2 waits for its turn.
        assert!(a.release_permit("rw", "r1", HoldKind::Read).await.unwrap());
        assert!(b.acquire_permit("rw", "w", 1_000, HoldKind::Write).await.unwrap().is_some());
        let (holds, waiting) = a.holds().await.unwrap();
        assert_eq!(holds.iter().map(|h| (h.kind, h.owner.as_str())).collect::<Vec<_>>(), [("write", "w")]);
        assert_eq!(waiting.iter().map(|w| (w.kind, w.owner.as_str())).collect::<Vec<_>>(), [("read", "r2")]);
        // The writer ends: r2's turn, ahead of a new writer.
        assert!(b.release_permit("rw", "w", HoldKind::Write).await.unwrap());
        assert!(a.acquire_permit("rw", "w2", 1_000, HoldKind::Write).await.unwrap().is_none());
        assert!(b.acquire_permit("rw", "r2", 1_000, HoldKind::Read).await.unwrap().is_some());
        // A forced release frees every hold of the key, whoever has it.
        let freed = a.force_release("rw").await.unwrap();
        assert_eq!(freed.iter().map(|h| h.owner.as_str()).collect::<Vec<_>>(), ["r2"]);
        assert!(b.permit_count("rw", HoldKind::Read).await.unwrap() == 0);
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_file_deleted_under_the_store_is_refused_not_used_alone() {
    let (timer, a, _b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    let p = path.clone();
    run(Box::pin(async move {
        assert!(a.acquire("k", "o", 10_000).await.unwrap());
        std::fs::remove_file(&p).unwrap();
        let fresh = FileStore::open(&p, Arc::new(t.clone())).unwrap();
        assert!(fresh.acquire("k", "o2", 10_000).await.unwrap(), "the new file has no holds");
        t.advance(300);
        let err = a.release("k", "o").await.unwrap_err();
        assert_eq!(err.code(), "STORE_ERROR");
        assert!(err.to_string().contains("was deleted or replaced"), "{err}");
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_file_from_an_earlier_boot_holds_nothing_and_an_emptied_one_is_refused() {
    let (timer, a, _b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    let p = path.clone();
    run(Box::pin(async move {
        assert!(a.acquire("k", "o", 60_000).await.unwrap());
        // As a power loss leaves it: the header of another boot over a payload cut short.
        let mut bytes = std::fs::read(&p).unwrap();
        let other_boot = u64::from_le_bytes(bytes[52..60].try_into().unwrap()).wrapping_add(1).max(1);
        bytes[52..60].copy_from_slice(&other_boot.to_le_bytes());
        let offset = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
        bytes.truncate(offset + 3);
        std::fs::write(&p, &bytes).unwrap();
        let after_boot = FileStore::open(&p, Arc::new(t.clone())).unwrap();
        if u64::from_le_bytes(std::fs::read(&p).unwrap()[52..60].try_into().unwrap()) != 0 {
            assert!(!after_boot.is_locked("k").await.unwrap(), "the earlier boot's holds are gone");
            assert!(after_boot.acquire("k", "o2", 1_000).await.unwrap());
        }
        // Emptied under a store that has read it: refused, not taken for a new file.
        std::fs::File::create(&p).unwrap();
        let err = after_boot.is_locked("k").await.unwrap_err();
        assert!(err.to_string().contains("was emptied"), "{err}");
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_forced_release_clears_a_dead_writers_claim() {
    let (timer, a, b, path) = pair();
    let run = timer.runner();
    run(Box::pin(async move {
        assert!(a.acquire_permit("rw", "r", 1_000, HoldKind::Read).await.unwrap().is_some());
        assert!(b.acquire_permit("rw", "w", 60_000, HoldKind::Write).await.unwrap().is_none(), "claims");
        assert!(a.release_permit("rw", "r", HoldKind::Read).await.unwrap());
        // The writer's process died; its claim keeps readers out until it lapses.
        assert!(a.acquire_permit("rw", "r2", 1_000, HoldKind::Read).await.unwrap().is_none());
        a.force_release("rw").await.unwrap();
        assert!(a.acquire_permit("rw", "r2", 1_000, HoldKind::Read).await.unwrap().is_some());
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn open_existing_does_not_make_a_file() {
    let path = temp_path("existing");
    let err = FileStore::open_existing(&path, Arc::new(FakeTimer::new())).err().unwrap();
    assert_eq!(err.code(), "STORE_ERROR");
    assert!(!path.exists());
}

#[test]
fn a_file_emptied_and_written_again_under_a_store_is_refused() {
    let (timer, a, _b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    let p = path.clone();
    run(Box::pin(async move {
        assert!(a.acquire("k", "o", 60_000).await.unwrap());
        std::fs::File::create(&p).unwrap();
        let fresh = FileStore::open(&p, Arc::new(t.clone())).unwrap();
        assert!(fresh.acquire("k", "o2", 60_000).await.unwrap());
        let err = a.release("k", "o").await.unwrap_err();
        assert!(err.to_string().contains("emptied and written again"), "{err}");
    }));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_device_is_not_a_lock_file() {
    let err = FileStore::open("/dev/null", Arc::new(FakeTimer::new())).err().unwrap();
    assert_eq!(err.code(), "STORE_ERROR");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

/// What a lock file's first write leaves before its header: holds written, header zeros.
#[test]
fn a_file_whose_first_write_stopped_before_its_header_opens_empty() {
    let path = temp_path("zero-header");
    std::fs::write(&path, vec![0u8; 4096 + 100]).unwrap();
    let timer = FakeTimer::new();
    let store = Arc::new(FileStore::open(&path, Arc::new(timer.clone())).unwrap());
    let run = timer.runner();
    let t = timer.clone();
    run(Box::pin(async move {
        let l = lock(&store, &t, "k", HoldKind::Exclusive);
        assert!(l.acquire(AcquireOptions::default()).await.unwrap(), "no holds in it");
        assert!(l.release().await.unwrap());
    }));
    let _ = std::fs::remove_file(&path);
}

/// Another process makes the file and is writing its first header while this one opens
/// it: the open waits for that process's OS lock and reads the header then.
#[test]
fn an_open_during_the_first_write_waits_for_the_header() {
    use std::io::{Seek, SeekFrom, Write};
    let path = temp_path("first-write");
    // A real lock file's header, to put back while the other "process" holds the lock.
    {
        let timer = FakeTimer::new();
        let store = Arc::new(FileStore::open(&path, Arc::new(timer.clone())).unwrap());
        let run = timer.runner();
        let t = timer.clone();
        run(Box::pin(async move {
            let l = lock(&store, &t, "k", HoldKind::Exclusive);
            assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        }));
    }
    let written = std::fs::read(&path).unwrap();
    let writer = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    writer.lock().unwrap();
    let mut torn = written.clone();
    torn[..8].copy_from_slice(b"half-wri");
    std::fs::write(&path, &torn).unwrap();
    let finish = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut w = &writer;
        w.seek(SeekFrom::Start(0)).unwrap();
        w.write_all(&written[..64]).unwrap();
        writer.unlock().unwrap();
    });
    let timer = FakeTimer::new();
    let opened = FileStore::open(&path, Arc::new(timer.clone()));
    finish.join().unwrap();
    assert!(opened.is_ok(), "{:?}", opened.err());
    // A file that is not a lock file is still refused (after the same wait).
    std::fs::write(&path, b"some other file's bytes, not a lock file at all; long enough for a header")
        .unwrap();
    let Err(err) = FileStore::open(&path, Arc::new(timer)) else { panic!("a foreign file was opened") };
    assert!(err.to_string().contains("is not a locksmith lock file"), "{err}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_proclaimed_value_is_shared_through_the_file_and_goes_with_its_hold() {
    let (timer, a, b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    let p = path.clone();
    run(Box::pin(async move {
        assert_eq!(b.holder("e").await.unwrap(), None);
        let token = a.acquire_with_grant("e", "leader", 1_000).await.unwrap().unwrap().fencing_token.unwrap();
        assert_eq!(std::fs::read(&p).unwrap()[4], 1, "format 1 while no hold has a value");
        assert!(a.proclaim("e", "leader", "{\"v\":1}", 1).await.unwrap());
        assert_eq!(std::fs::read(&p).unwrap()[4], 2, "format 2 while one has: an earlier release says so");
        let seen = b.holder("e").await.unwrap().expect("the other store sees the holder");
        assert_eq!((seen.owner.as_str(), seen.fencing_token, seen.remaining_ms), ("leader", token, 1_000));
        assert_eq!(seen.value.as_deref(), Some("{\"v\":1}"));
        // Not newer: kept as it was; someone else: refused.
        assert!(b.proclaim("e", "leader", "old", 1).await.unwrap());
        assert!(!b.proclaim("e", "other", "x", 9).await.unwrap());
        assert!(b.proclaim("e", "leader", "{\"v\":2}", 2).await.unwrap());
        assert_eq!(a.holder("e").await.unwrap().unwrap().value.as_deref(), Some("{\"v\":2}"));
        // The CLI's view shows it too.
        let (holds, _) = a.holds().await.unwrap();
        assert_eq!(holds[0].value.as_deref(), Some("{\"v\":2}"));
        // Expired: gone, and the next holder starts without a value.
        t.advance(1_001);
        assert_eq!(b.holder("e").await.unwrap(), None);
        assert!(!a.proclaim("e", "leader", "late", 3).await.unwrap());
        assert!(b.acquire("e", "next", 1_000).await.unwrap());
        assert_eq!(a.holder("e").await.unwrap().unwrap().value, None);
        // A file without values is format 1 again, as an earlier release reads it.
        assert!(b.release("e", "next").await.unwrap());
        assert_eq!(std::fs::read(&p).unwrap()[4], 1);
    }));
    let _ = std::fs::remove_file(path);
}

/// A fair lock on `key` over `store`.
fn fair(store: &Arc<FileStore>, timer: &FakeTimer, key: &str, kind: HoldKind, permits: u32) -> Lock {
    let mut lock = Lock::of_kind(key, 1_000, kind, store.clone(), Arc::new(timer.clone())).unwrap();
    lock.set_fair().unwrap();
    lock.set_permits(permits).unwrap();
    lock
}

fn wait(timeout_ms: u64, retry_delay_ms: u64) -> AcquireOptions {
    AcquireOptions::default().with_timeout_ms(timeout_ms).with_retry_delay_ms(retry_delay_ms)
}

/// Waiters of three stores (three processes) on one file are granted in the order they
/// took their places, though the last to arrive retries first after the release: the
/// queue is in the file, not in one process. A fair semaphore's too: a later, smaller
/// request of another process does not overtake an earlier, larger one.
#[test]
#[allow(clippy::many_single_char_names)] // three stores, as three processes: a, b, c
fn fair_queues_are_in_the_file_and_grant_in_arrival_order_across_stores() {
    let (timer, a, b, path) = pair();
    let c = Arc::new(FileStore::open(&path, Arc::new(timer.clone())).unwrap());
    let run = timer.runner();
    let t = timer.clone();
    let p = path.clone();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let o = order.clone();
    run(Box::pin(async move {
        let holder = fair(&a, &t, "k", HoldKind::Exclusive, 1);
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        assert_eq!(
            std::fs::read(&p).unwrap()[4],
            3,
            "format 3 while a fair handle holds: an earlier release refuses it"
        );
        let turn = |name: &'static str, store: &Arc<FileStore>, arrives: u64, retry: u64| {
            let (t, o, lock) = (t.clone(), o.clone(), fair(store, &t, "k", HoldKind::Exclusive, 1));
            async move {
                t.sleep_for_test(arrives).await;
                assert!(lock.acquire(wait(5_000, retry)).await.unwrap(), "{name} timed out");
                o.lock().unwrap().push(name);
                t.sleep_for_test(1).await;
                assert!(lock.release().await.unwrap());
            }
        };
        futures_util::join!(turn("b", &b, 0, 97), turn("c", &c, 10, 5), turn("a", &a, 20, 3), async {
            t.sleep_for_test(300).await;
            assert!(holder.release().await.unwrap());
        });
        assert_eq!(std::fs::read(&p).unwrap()[4], 1, "format 1 again once nothing fair is left");
        // A fair semaphore's hold that ran out (its holder gone) leaves nothing fair either.
        let gone = fair(&a, &t, "lapsed", HoldKind::Permit { limit: 2 }, 1);
        assert!(gone.acquire(AcquireOptions::default()).await.unwrap());
        assert_eq!(std::fs::read(&p).unwrap()[4], 3);
        t.advance(1_001);
        assert!(b.acquire("other", "o", 1_000).await.unwrap());
        assert_eq!(std::fs::read(&p).unwrap()[4], 1, "format 1 once the fair semaphore's hold ran out");
        assert!(b.release("other", "o").await.unwrap());
        // A fair semaphore of 3: 2 held (a), 3 asked for (b), then 1 (c), which would fit.
        let sem = HoldKind::Permit { limit: 3 };
        let (held, large, small) =
            (fair(&a, &t, "s", sem, 2), fair(&b, &t, "s", sem, 3), fair(&c, &t, "s", sem, 1));
        assert!(held.acquire(AcquireOptions::default()).await.unwrap());
        let at = t.now();
        futures_util::join!(
            async {
                assert!(large.acquire(wait(5_000, 20)).await.unwrap());
                o.lock().unwrap().push("large");
                t.sleep_for_test(50).await;
                assert!(large.release().await.unwrap());
            },
            async {
                t.sleep_for_test(5).await;
                assert!(small.acquire(wait(5_000, 7)).await.unwrap());
                o.lock().unwrap().push("small");
                assert!(t.now() >= at + 150, "in after the large one's release, at {}", t.now() - at);
                assert!(small.release().await.unwrap());
            },
            async {
                t.sleep_for_test(100).await;
                assert!(held.release().await.unwrap());
            }
        );
    }));
    assert_eq!(*order.lock().unwrap(), ["b", "c", "a", "large", "small"]);
    let _ = std::fs::remove_file(path);
}

/// A place another process took and stopped renewing (it crashed) lasts its TTL from its
/// last attempt, then the next waiter is granted; a handle that is not fair is refused
/// with `INVALID_ARGUMENT` while the file says the key is fair.
#[test]
fn a_crashed_waiters_place_in_the_file_lapses_and_unfair_handles_are_refused() {
    let (timer, a, b, path) = pair();
    let run = timer.runner();
    let t = timer.clone();
    run(Box::pin(async move {
        let holder = fair(&a, &t, "k", HoldKind::Exclusive, 1);
        assert!(holder.acquire(AcquireOptions::default()).await.unwrap());
        // The crashed waiter: one attempt of another process (its place), then nothing.
        assert!(b.acquire_fair("k", "gone", 1_000, HoldKind::Exclusive, 1, true).await.unwrap().is_none());
        let unfair = lock(&b, &t, "k", HoldKind::Exclusive);
        let err = unfair.acquire(AcquireOptions::default()).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{err}");
        t.sleep_for_test(10).await;
        let next = fair(&b, &t, "k", HoldKind::Exclusive, 1);
        let started = t.now();
        let (granted, ()) = futures_util::join!(next.acquire(wait(5_000, 50)), async {
            t.sleep_for_test(100).await;
            assert!(holder.release().await.unwrap());
        });
        assert!(granted.unwrap());
        // The place was taken at `started - 10` for 1 000 ms; the waiter asks every 50 ms.
        let waited = t.now() - started;
        assert!((990..=1_040).contains(&waited), "granted {waited} ms after it asked");
        assert!(next.release().await.unwrap());
    }));
    let _ = std::fs::remove_file(path);
}
