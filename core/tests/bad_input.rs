//! Bad input, table-driven: every case gets its documented error code and a message
//! starting with `locksmith:`; nothing panics; no failed call leaves a hold behind.

use std::sync::Arc;

use locksmith_core::validate::{self, js};
use locksmith_core::{
    AcquireOptions, FakeTimer, Lock, MemoryStore, SerializedFields, SerializedLock, SyncLockStore,
};
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
        ("negative infinite timeout", Some(f64::NEG_INFINITY), None),
        ("zero retry delay", None, Some(0.0)),
        ("negative retry delay", None, Some(-10.0)),
        ("NaN retry delay", None, Some(f64::NAN)),
        ("infinite retry delay", None, Some(f64::INFINITY)),
        ("retry delay above the maximum", None, Some(1e10)),
    ];
    for (what, timeout, retry) in &options {
        let err = js::acquire_options(*timeout, *retry, None).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{what}");
        assert!(err.to_string().starts_with("locksmith: "), "{what}: {err}");
    }
    // A serialized lock's values (its JSON is read by the host: js/api/serialized.mjs).
    let good = || SerializedFields {
        key: Some("a".into()),
        ttl_ms: Some(1.0),
        owner: Some(OWNER.into()),
        ..SerializedFields::default()
    };
    let serialized: Vec<(&str, SerializedFields)> = vec![
        ("nothing", SerializedFields::default()),
        ("missing owner", SerializedFields { owner: None, ..good() }),
        ("missing key", SerializedFields { key: None, ..good() }),
        ("missing TTL", SerializedFields { ttl_ms: None, ..good() }),
        ("negative TTL", SerializedFields { ttl_ms: Some(-5.0), ..good() }),
        ("NaN TTL", SerializedFields { ttl_ms: Some(f64::NAN), ..good() }),
        ("infinite TTL", SerializedFields { ttl_ms: Some(f64::INFINITY), ..good() }),
        ("uppercase owner", SerializedFields { owner: Some(OWNER.to_uppercase()), ..good() }),
        ("owner too long", SerializedFields { owner: Some(format!("{OWNER}0")), ..good() }),
        ("key too long", SerializedFields { key: Some("k".repeat(1 << 20)), ..good() }),
        ("fencing token of 0.5", SerializedFields { fencing_token: Some(0.5), ..good() }),
    ];
    for (what, fields) in &serialized {
        let err = SerializedLock::from_fields(fields.clone()).unwrap_err();
        assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK", "{what}");
        assert!(err.to_string().starts_with("locksmith: invalid serialized lock: "), "{what}");
    }
    // The same fields with the defect removed restore.
    let restored =
        Lock::restore(SerializedLock::from_fields(good()).unwrap(), memory.clone(), Arc::new(timer.clone()));
    assert_eq!(restored.key(), "a");

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

    /// Any values at all: a serialized lock or INVALID_SERIALIZED_LOCK, never a panic.
    #[test]
    fn from_fields_never_panics(
        key in proptest::option::of(".{0,40}"),
        keys in proptest::option::of(proptest::collection::vec("[a-c\n]{0,3}", 0..4)),
        ttl in proptest::option::of(any::<f64>()),
        owner in proptest::option::of("[0-9a-fA-F]{30,34}"),
        token in proptest::option::of(any::<f64>()),
        expires_at in proptest::option::of(any::<f64>()),
        kind in proptest::option::of("multi|semaphore|read|write|lock|"),
        limit in proptest::option::of(any::<f64>()),
        tokens in proptest::option::of(proptest::collection::vec(proptest::option::of(any::<f64>()), 0..4)),
    ) {
        let fields = SerializedFields {
            key, keys, ttl_ms: ttl, owner, fencing_token: token, expires_at, kind, limit, fencing_tokens: tokens,
        };
        if let Err(err) = SerializedLock::from_fields(fields) {
            prop_assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK");
        }
    }

    /// A held lock's values with one changed: a restored copy releases the hold only when
    /// it still names the same key and owner.
    #[test]
    fn restore_of_changed_values_releases_only_the_same_hold(
        key in "[a-z:🔒]{1,20}",
        ttl in 1u64..1_000_000,
        other_key in proptest::option::of("[a-z:🔒]{1,20}"),
        other_owner in any::<bool>(),
        token in proptest::option::of(1u64..(1 << 53)),
    ) {
        let (timer, memory) = store();
        let owner = locksmith_core::OwnerToken::generate().unwrap();
        prop_assert!(memory.acquire_now(&key, owner.as_str(), ttl).is_some());
        let fields = SerializedFields {
            key: Some(other_key.clone().unwrap_or_else(|| key.clone())),
            ttl_ms: Some(ttl as f64),
            owner: Some(if other_owner { OWNER.into() } else { owner.as_str().into() }),
            fencing_token: token.map(|t| t as f64),
            ..SerializedFields::default()
        };
        let restored = Lock::restore(SerializedLock::from_fields(fields).unwrap(), memory.clone(), Arc::new(timer.clone()));
        let same = other_key.is_none_or(|k| k == key) && !other_owner;
        prop_assert_eq!(timer.run(restored.release()).unwrap(), same);
        prop_assert_eq!(memory.is_locked_now(&key), !same);
    }
}
