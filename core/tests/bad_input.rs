//! Bad input, table-driven: every case gets its documented error code and a message
//! starting with `locksmith:`; nothing panics; no failed call leaves a hold behind.

use std::sync::Arc;

use locksmith_core::validate::{self, js};
use locksmith_core::{AcquireOptions, FakeTimer, Lock, MemoryStore, SerializedLock, SyncLockStore};
use proptest::prelude::*;

fn store() -> (FakeTimer, Arc<MemoryStore>) {
    let timer = FakeTimer::new();
    (timer.clone(), Arc::new(MemoryStore::new(Arc::new(timer))))
}

const OWNER: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn bad_input_table() {
    let (timer, memory) = store();
    let long_key = "k".repeat(1025);
    let huge = format!("{{\"key\":\"{}\",\"ttlMs\":1,\"owner\":\"{OWNER}\"}}", "k".repeat(1 << 20));
    // (what, key, ttl, expected code)
    let locks: Vec<(&str, &str, f64, &str)> = vec![
        ("empty key", "", 1_000.0, "INVALID_ARGUMENT"),
        ("NUL in key", "a\0b", 1_000.0, "INVALID_ARGUMENT"),
        ("newline in key", "a\nb", 1_000.0, "INVALID_ARGUMENT"),
        ("carriage return in key", "a\rb", 1_000.0, "INVALID_ARGUMENT"),
        ("escape in key", "a\u{1b}[31m", 1_000.0, "INVALID_ARGUMENT"),
        ("C1 control in key", "a\u{85}b", 1_000.0, "INVALID_ARGUMENT"),
        ("key over 1024 bytes", &long_key, 1_000.0, "INVALID_ARGUMENT"),
        ("zero TTL", "k", 0.0, "INVALID_ARGUMENT"),
        ("negative TTL", "k", -1.0, "INVALID_ARGUMENT"),
        ("NaN TTL", "k", f64::NAN, "INVALID_ARGUMENT"),
        ("infinite TTL", "k", f64::INFINITY, "INVALID_ARGUMENT"),
        ("negative infinite TTL", "k", f64::NEG_INFINITY, "INVALID_ARGUMENT"),
        ("fractional TTL", "k", 1.5, "INVALID_ARGUMENT"),
        ("tiny TTL", "k", 0.000_1, "INVALID_ARGUMENT"),
        ("TTL above the maximum", "k", 2_147_483_648.0, "INVALID_ARGUMENT"),
        ("TTL far above the maximum", "k", 1e300, "INVALID_ARGUMENT"),
    ];
    let held = Lock::new("held", 1_000, memory.clone(), Arc::new(timer.clone())).unwrap();
    assert!(held.try_acquire_now().unwrap().unwrap());
    for (what, key, ttl, code) in &locks {
        let err = js::ttl_ms(*ttl)
            .and_then(|ttl| Lock::new(key, ttl, memory.clone(), Arc::new(timer.clone())))
            .unwrap_err();
        assert_eq!(err.code(), *code, "{what}");
        assert!(err.to_string().starts_with("locksmith: "), "{what}: {err}");
        // The row is refused for what it names: with that one value made good, it passes.
        let key_is_bad = ttl.to_bits() == 1_000.0_f64.to_bits();
        let (good_key, good_ttl) = if key_is_bad { ("k", *ttl) } else { (*key, 1_000.0) };
        assert!(
            js::ttl_ms(good_ttl)
                .and_then(|ttl| Lock::new(good_key, ttl, memory.clone(), Arc::new(timer.clone())))
                .is_ok(),
            "{what}, corrected"
        );
    }
    // Whole milliseconds out of range, given to extend, leave the hold as it was.
    for ttl in [0, validate::MAX_TTL_MS + 1, u64::MAX] {
        let err = timer.run(held.extend(Some(ttl))).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "extend({ttl})");
        assert_eq!(memory.remaining_time_now("held"), Some(1_000), "extend({ttl})");
    }
    assert!(timer.run(held.release()).unwrap());
    let options: Vec<(&str, Option<f64>, Option<f64>)> = vec![
        ("negative timeout", Some(-1.0), None),
        ("NaN timeout", Some(f64::NAN), None),
        ("infinite timeout", Some(f64::INFINITY), None),
        ("zero retry delay", None, Some(0.0)),
        ("negative retry delay", None, Some(-10.0)),
        ("NaN retry delay", None, Some(f64::NAN)),
        ("infinite retry delay", None, Some(f64::INFINITY)),
        ("retry delay above the maximum", None, Some(1e10)),
    ];
    for (what, timeout, retry) in &options {
        let err = js::acquire_options(*timeout, *retry).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{what}");
        assert!(err.to_string().starts_with("locksmith: "), "{what}: {err}");
    }
    let serialized: Vec<(&str, String)> = vec![
        ("garbage", "garbage".into()),
        ("empty", String::new()),
        ("truncated JSON", format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{OWNER}\"")),
        ("JSON array", "[\"a\",1]".into()),
        ("JSON string", "\"a\"".into()),
        ("missing owner", "{\"key\":\"a\",\"ttlMs\":1}".into()),
        ("missing key", format!("{{\"ttlMs\":1,\"owner\":\"{OWNER}\"}}")),
        ("missing TTL", format!("{{\"key\":\"a\",\"owner\":\"{OWNER}\"}}")),
        ("key of the wrong type", format!("{{\"key\":[],\"ttlMs\":1,\"owner\":\"{OWNER}\"}}")),
        ("TTL as a string", format!("{{\"key\":\"a\",\"ttlMs\":\"1\",\"owner\":\"{OWNER}\"}}")),
        ("negative TTL", format!("{{\"key\":\"a\",\"ttlMs\":-5,\"owner\":\"{OWNER}\"}}")),
        ("uppercase owner", format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{}\"}}", OWNER.to_uppercase())),
        ("owner too long", format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{OWNER}0\"}}")),
        ("unknown field", format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{OWNER}\",\"x\":0}}")),
        ("duplicate field", format!("{{\"key\":\"a\",\"key\":\"b\",\"ttlMs\":1,\"owner\":\"{OWNER}\"}}")),
        (
            "fencing token of the wrong type",
            format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{OWNER}\",\"fencingToken\":\"1\"}}"),
        ),
        ("huge string", huge),
    ];
    for (what, text) in &serialized {
        let err = Lock::restore(text, memory.clone(), Arc::new(timer.clone())).unwrap_err();
        assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK", "{what}");
        assert!(err.to_string().starts_with("locksmith: invalid serialized lock: "), "{what}");
    }
    // The same text with the defect removed restores.
    let good = format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{OWNER}\"}}");
    assert_eq!(Lock::restore(&good, memory.clone(), Arc::new(timer.clone())).unwrap().key(), "a");

    // Calls out of order.
    let l = Lock::new("k", 1_000, memory.clone(), Arc::new(timer.clone())).unwrap();
    timer.run(async {
        assert_eq!(l.extend(None).await.unwrap_err().code(), "LOCK_NOT_HELD", "extend before acquire");
        assert_eq!(l.serialize().unwrap_err().code(), "LOCK_NOT_HELD", "serialize before acquire");
        assert!(!l.release().await.unwrap(), "release before acquire");
        assert!(l.acquire(AcquireOptions::default()).await.unwrap());
        assert!(l.release().await.unwrap());
        assert!(!l.release().await.unwrap(), "double release");
        assert_eq!(l.extend(Some(0)).await.unwrap_err().code(), "INVALID_ARGUMENT");
    });
    assert_eq!(memory.entry_count(), 0, "no failed call left a hold behind");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4_000, ..ProptestConfig::default() })]

    /// Anything at all: `restore` answers with a value or INVALID_SERIALIZED_LOCK, never a panic.
    #[test]
    fn restore_never_panics_on_arbitrary_text(text in ".{0,200}") {
        if let Err(err) = SerializedLock::parse(&text) {
            prop_assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK");
        }
    }

    /// Valid serialized locks, cut or with one byte changed: still a value or the right error.
    #[test]
    fn restore_never_panics_on_mutated_locks(
        key in "[a-z:🔒]{1,20}",
        ttl in 1u64..1_000_000,
        token in proptest::option::of(1u64..u64::MAX),
        expires_at in proptest::option::of(0u64..u64::MAX),
        cut in 0usize..120,
        flip in 0usize..120,
        byte in any::<u8>(),
    ) {
        let (timer, memory) = store();
        let mut lock = SerializedLock::parse(&format!("{{\"key\":\"k\",\"ttlMs\":1,\"owner\":\"{OWNER}\"}}")).unwrap();
        lock.key = key;
        lock.ttl_ms = ttl;
        lock.owner = locksmith_core::OwnerToken::generate().unwrap();
        lock.fencing_token = token;
        lock.expires_at_unix_ms = expires_at;
        let text = lock.to_json();
        prop_assert_eq!(&SerializedLock::parse(&text).unwrap(), &lock);
        let mut bytes = text.into_bytes();
        if flip < bytes.len() {
            bytes[flip] = byte;
        }
        bytes.truncate(cut.max(1).min(bytes.len()));
        let mutated = String::from_utf8_lossy(&bytes);
        // The original is a live hold in the store; a restored copy can release it only
        // when it still names the same key and owner.
        prop_assert!(memory.acquire_now(&lock.key, lock.owner.as_str(), ttl).is_some());
        match Lock::restore(&mutated, memory.clone(), Arc::new(timer.clone())) {
            Ok(restored) => {
                let copy = SerializedLock::parse(&restored.serialize().unwrap()).unwrap();
                let same = copy.key == lock.key && copy.owner == lock.owner;
                prop_assert_eq!(timer.run(restored.release()).unwrap(), same, "release by {:?}", copy);
                prop_assert_eq!(memory.is_locked_now(&lock.key), !same);
            }
            Err(err) => {
                prop_assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK");
                prop_assert!(memory.is_locked_now(&lock.key));
            }
        }
    }
}
