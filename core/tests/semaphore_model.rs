//! Model-based property test for semaphores: random interleavings of acquire, release,
//! extend and clock advances from several handles on one semaphore, checked step by step
//! against a reference. Never more than `limit` holders; every answer as the model says.

use std::sync::Arc;

use locksmith_core::{AcquireOptions, FakeTimer, HoldKind, Lock, MemoryStore};
use proptest::prelude::*;

const HANDLES: usize = 5;
const LIMIT: u32 = 2;
const TTL: u64 = 100;

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize),
    Release(usize),
    Extend(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..HANDLES).prop_map(Op::Acquire),
        3 => (0..HANDLES).prop_map(Op::Release),
        2 => (0..HANDLES).prop_map(Op::Extend),
        3 => (0..80u64).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn a_semaphore_behaves_like_its_model(ops in proptest::collection::vec(op(), 1..80)) {
        let timer = FakeTimer::new();
        let store = Arc::new(MemoryStore::new(Arc::new(timer.clone())));
        let kind = HoldKind::Permit { limit: LIMIT };
        let handles: Vec<Lock> = (0..HANDLES)
            .map(|_| Lock::of_kind("pool", TTL, kind, store.clone(), Arc::new(timer.clone())).unwrap())
            .collect();
        // The model: when each handle's permit runs out, if it has one.
        let mut until: [Option<u64>; HANDLES] = [None; HANDLES];
        let live = |until: &[Option<u64>; HANDLES], now: u64| until.iter().filter(|u| u.is_some_and(|t| t > now)).count();
        for op in ops {
            let now = timer.now();
            match op {
                Op::Acquire(h) => {
                    let holds = until[h].is_some_and(|t| t > now);
                    let expected = !holds && live(&until, now) < LIMIT as usize;
                    let got = timer.run(handles[h].acquire(AcquireOptions::default())).unwrap();
                    prop_assert_eq!(got, expected, "acquire by {} at {}", h, now);
                    if got {
                        until[h] = Some(now + TTL);
                    }
                }
                Op::Release(h) => {
                    let holds = until[h].is_some_and(|t| t > now);
                    let got = timer.run(handles[h].release()).unwrap();
                    prop_assert_eq!(got, holds, "release by {} at {}", h, now);
                    if got {
                        until[h] = None;
                    }
                }
                Op::Extend(h) => {
                    // Before its local deadline (the TTL less the drift allowance); after
                    // it the handle refuses, and this caller then releases.
                    let holds = until[h].is_some_and(|t| t > now + locksmith_core::default_drift_ms(TTL));
                    let got = timer.run(handles[h].extend(None));
                    prop_assert_eq!(got.is_ok(), holds, "extend by {} at {}", h, now);
                    if holds {
                        until[h] = Some(now + TTL);
                    } else if until[h].is_some_and(|t| t > now) {
                        prop_assert!(timer.run(handles[h].release()).unwrap(), "release after a refused extend");
                        until[h] = None;
                    }
                }
                Op::Advance(ms) => timer.advance(ms),
            }
            let now = timer.now();
            let count = timer.run(handles[0].count()).unwrap();
            prop_assert_eq!(count, live(&until, now) as u64, "count at {}", now);
            prop_assert!(count <= u64::from(LIMIT));
        }
    }
}
