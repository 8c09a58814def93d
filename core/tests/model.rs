//! Model-based property test: random interleavings of acquire / release / extend /
//! clock advances from several owners on a few keys, `MemoryStore` checked step by
//! step against a small reference model. Never two owners at once; only the owner
//! releases or extends; holds end at their TTL; fencing tokens only grow per key.

use std::collections::HashMap;
use std::sync::Arc;

use locksmith_core::{AcquireOptions, FakeTimer, Lock, MemoryStore, SyncLockStore};
use proptest::prelude::*;

const OWNERS: u8 = 3;
const KEYS: u8 = 2;

#[derive(Debug, Clone)]
enum Op {
    Acquire { owner: u8, key: u8, ttl: u64 },
    Release { owner: u8, key: u8 },
    Extend { owner: u8, key: u8, ttl: u64 },
    Advance(u64),
    Inspect { owner: u8, key: u8 },
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    let owner = 0..OWNERS;
    let key = 0..KEYS;
    prop_oneof![
        3 => (owner.clone(), key.clone(), 1..200u64).prop_map(|(owner, key, ttl)| Op::Acquire { owner, key, ttl }),
        2 => (owner.clone(), key.clone()).prop_map(|(owner, key)| Op::Release { owner, key }),
        2 => (owner.clone(), key.clone(), 1..200u64).prop_map(|(owner, key, ttl)| Op::Extend { owner, key, ttl }),
        3 => (0..150u64).prop_map(Op::Advance),
        2 => (owner, key).prop_map(|(owner, key)| Op::Inspect { owner, key }),
        1 => Just(Op::Sweep),
    ]
}

/// The reference: per key, who holds it until when.
#[derive(Default)]
struct Model {
    now: u64,
    holds: HashMap<u8, (u8, u64)>,
}

impl Model {
    fn holder(&self, key: u8) -> Option<(u8, u64)> {
        self.holds.get(&key).copied().filter(|(_, until)| *until > self.now)
    }
}

fn owner_name(owner: u8) -> String {
    format!("owner-{owner}")
}

fn key_name(key: u8) -> String {
    format!("key-{key}")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn memory_store_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let timer = FakeTimer::new();
        let store = MemoryStore::new(Arc::new(timer.clone()));
        let mut model = Model::default();
        let mut last_token: HashMap<u8, u64> = HashMap::new();
        for op in ops {
            match op {
                Op::Acquire { owner, key, ttl } => {
                    let expected = model.holder(key).is_none();
                    let grant = store.acquire_now(&key_name(key), &owner_name(owner), ttl);
                    prop_assert_eq!(grant.is_some(), expected, "acquire {:?}", op);
                    if let Some(grant) = grant {
                        model.holds.insert(key, (owner, model.now + ttl));
                        let token = grant.fencing_token.unwrap();
                        prop_assert!(token > last_token.get(&key).copied().unwrap_or(0));
                        last_token.insert(key, token);
                    }
                }
                Op::Release { owner, key } => {
                    let expected = model.holder(key).is_some_and(|(o, _)| o == owner);
                    prop_assert_eq!(store.release_now(&key_name(key), &owner_name(owner)), expected);
                    if expected {
                        model.holds.remove(&key);
                    }
                }
                Op::Extend { owner, key, ttl } => {
                    let expected = model.holder(key).is_some_and(|(o, _)| o == owner);
                    prop_assert_eq!(store.extend_now(&key_name(key), &owner_name(owner), ttl), expected);
                    if expected {
                        model.holds.insert(key, (owner, model.now + ttl));
                    }
                }
                Op::Advance(ms) => {
                    timer.advance(ms);
                    model.now += ms;
                }
                Op::Inspect { owner, key } => {
                    let holder = model.holder(key);
                    prop_assert_eq!(store.is_locked_now(&key_name(key)), holder.is_some());
                    prop_assert_eq!(
                        store.remaining_time_now(&key_name(key)),
                        holder.map(|(_, until)| until - model.now)
                    );
                    prop_assert_eq!(
                        store.is_held_by_now(&key_name(key), &owner_name(owner)),
                        holder.is_some_and(|(o, _)| o == owner)
                    );
                }
                Op::Sweep => store.sweep(),
            }
            // Never two owners at once.
            for key in 0..KEYS {
                let holders = (0..OWNERS)
                    .filter(|o| store.is_held_by_now(&key_name(key), &owner_name(*o)))
                    .count();
                prop_assert!(holders <= 1);
            }
        }
    }

    /// The same interleavings through `Lock` handles: whichever handles believe they
    /// hold (not expired), at most one per key does, and it is the store's holder.
    #[test]
    fn lock_handles_never_overlap(ops in prop::collection::vec(op(), 1..80)) {
        let timer = FakeTimer::new();
        let store: Arc<MemoryStore> = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
        let handles: Vec<Vec<Lock>> = (0..OWNERS)
            .map(|_| (0..KEYS).map(|k| Lock::new(&key_name(k), 100, store.clone(), Arc::new(timer.clone())).unwrap()).collect())
            .collect();
        timer.run(async {
            for op in ops {
                match op {
                    Op::Acquire { owner, key, ttl } => {
                        let opts = AcquireOptions::default().with_timeout_ms(ttl % 3 * 40).with_retry_delay_ms(1 + ttl % 50);
                        handles[owner as usize][key as usize].acquire(opts).await.unwrap();
                    }
                    Op::Release { owner, key } => {
                        handles[owner as usize][key as usize].release().await.unwrap();
                    }
                    Op::Extend { owner, key, ttl } => {
                        let _ = handles[owner as usize][key as usize].extend(Some(ttl)).await;
                    }
                    Op::Advance(ms) => timer.advance(ms),
                    Op::Inspect { .. } | Op::Sweep => store.sweep(),
                }
                for key in 0..KEYS as usize {
                    let mut believers = 0;
                    for per_owner in &handles {
                        let l = &per_owner[key];
                        if l.fencing_token().is_some() && !l.is_expired().await.unwrap() {
                            believers += 1;
                        }
                    }
                    assert!(believers <= 1, "two handles hold {key}");
                    assert_eq!(believers == 1, store.is_locked_now(&key_name(key as u8)));
                }
            }
        });
    }
}
