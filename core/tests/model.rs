//! Model-based property test: random interleavings of acquire / release / extend /
//! clock advances from several owners on a few keys, `MemoryStore` checked step by
//! step against a small reference model. Never two owners at once; only the owner
//! releases or extends; holds end at their TTL; fencing tokens only grow per key.
//! Then `Lock` handles from concurrent tasks, whose awaits interleave: never two
//! tasks inside one key's critical section.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use locksmith_core::{
    AcquireOptions, BoxFuture, FakeTimer, Grant, Lock, LockStore, MemoryStore, Result, SyncLockStore,
};
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

    /// Tasks on one executor take locks through a store that yields at every call, and
    /// sleep inside their critical sections: whoever is inside a key's section is alone
    /// there, holds the lock the whole time, and fencing tokens grow in entry order.
    #[test]
    fn lock_handles_never_overlap(tasks in prop::collection::vec(prop::collection::vec(visit(), 1..8), 2..=4)) {
        let timer = FakeTimer::new();
        let store = Arc::new(Yielding(Arc::new(MemoryStore::new(Arc::new(timer.clone())))));
        let outcome = contend(&timer, &(store as Arc<dyn LockStore>), &tasks);
        prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
    }
}

/// One critical section of one task: which key, the lock's TTL, how long the work
/// inside takes (always less than the TTL, extended or not), and how long to wait.
#[derive(Debug, Clone)]
struct Visit {
    key: u8,
    ttl: u64,
    hold: u64,
    extend: bool,
    timeout: u64,
    retry_delay: u64,
}

fn visit() -> impl Strategy<Value = Visit> {
    (0..KEYS, 2..200u64, any::<bool>(), 0..3u64, 1..60u64).prop_flat_map(
        |(key, ttl, extend, timeout, retry_delay)| {
            (0..ttl).prop_map(move |hold| Visit {
                key,
                ttl,
                hold,
                extend,
                timeout: timeout * 70,
                retry_delay,
            })
        },
    )
}

/// Runs every task's visits concurrently on `timer`'s executor. `Err` describes the
/// first violation seen: two tasks inside one key's section, a section whose lock was
/// gone at its end, or a fencing token that did not grow.
fn contend(timer: &FakeTimer, store: &Arc<dyn LockStore>, tasks: &[Vec<Visit>]) -> Result<(), String> {
    let inside: RefCell<Vec<Option<usize>>> = RefCell::new(vec![None; KEYS as usize]);
    let last_token: RefCell<Vec<Option<u64>>> = RefCell::new(vec![None; KEYS as usize]);
    let entered = Cell::new(0usize);
    let task = |id: usize, visits: &[Vec<Visit>]| {
        let visits = visits[id].clone();
        let (store, inside, last_token, entered) = (store.clone(), &inside, &last_token, &entered);
        async move {
            for v in visits {
                let key = v.key as usize;
                let l = Lock::new(&key_name(v.key), v.ttl, store.clone(), Arc::new(timer.clone())).unwrap();
                let options =
                    AcquireOptions::default().with_timeout_ms(v.timeout).with_retry_delay_ms(v.retry_delay);
                if !l.acquire(options).await.map_err(|e| e.to_string())? {
                    continue;
                }
                if let Some(other) = inside.borrow_mut()[key].replace(id) {
                    return Err(format!(
                        "overlap: task {id} entered key {key} while task {other} was inside"
                    ));
                }
                entered.set(entered.get() + 1);
                if let Some(token) = l.fencing_token() {
                    let mut last = last_token.borrow_mut();
                    if last[key].is_some_and(|prev| token <= prev) {
                        return Err(format!("fencing token {token} after {:?} on key {key}", last[key]));
                    }
                    last[key] = Some(token);
                }
                timer.sleep_for_test(v.hold / 2).await;
                // An extend before the hold's local deadline (its TTL less the drift allowance);
                // after it the handle refuses, whatever the store still has.
                if v.extend && v.hold / 2 < v.ttl - locksmith_core::default_drift_ms(v.ttl) {
                    l.extend(Some(v.ttl)).await.map_err(|e| format!("extend inside the section: {e}"))?;
                }
                if l.is_expired().await.map_err(|e| e.to_string())? {
                    return Err(format!("task {id} lost key {key} inside its section"));
                }
                timer.sleep_for_test(v.hold - v.hold / 2).await;
                if inside.borrow_mut()[key].take() != Some(id) {
                    return Err(format!("overlap: task {id} left key {key} while another was marked inside"));
                }
                if !l.release().await.map_err(|e| e.to_string())? {
                    return Err(format!("task {id} no longer held key {key} at the end of its section"));
                }
            }
            Ok::<(), String>(())
        }
    };
    let results = timer.run(futures_util::future::join_all((0..tasks.len()).map(|id| task(id, tasks))));
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    if entered.get() == 0 {
        return Err("no task ever entered a critical section".into());
    }
    Ok(())
}

/// The overlap check can fail: against a store that grants every acquire, two tasks
/// end up inside one key's section.
#[test]
fn the_overlap_check_sees_a_store_that_grants_everything() {
    let timer = FakeTimer::new();
    let store = Arc::new(Yielding(Arc::new(GrantsEverything)));
    let both = vec![Visit { key: 0, ttl: 100, hold: 50, extend: false, timeout: 0, retry_delay: 10 }];
    let outcome = contend(&timer, &(store as Arc<dyn LockStore>), &[both.clone(), both]);
    assert!(outcome.as_ref().is_err_and(|e| e.starts_with("overlap")), "{outcome:?}");
}

/// Returns control to the executor once before it completes, so other tasks run.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A store that yields to the executor before and after every call to the inner
/// store, as a networked store would.
struct Yielding<S>(Arc<S>);

#[async_trait::async_trait]
impl<S: LockStore + 'static> LockStore for Yielding<S> {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        YieldNow(false).await;
        let out = self.0.acquire(key, owner, ttl_ms).await;
        YieldNow(false).await;
        out
    }
    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        YieldNow(false).await;
        let out = self.0.release(key, owner).await;
        YieldNow(false).await;
        out
    }
    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        YieldNow(false).await;
        let out = self.0.extend(key, owner, ttl_ms).await;
        YieldNow(false).await;
        out
    }
    async fn is_locked(&self, key: &str) -> Result<bool> {
        YieldNow(false).await;
        self.0.is_locked(key).await
    }
    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        YieldNow(false).await;
        self.0.remaining_time(key).await
    }
    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        YieldNow(false).await;
        let out = self.0.acquire_with_grant(key, owner, ttl_ms).await;
        YieldNow(false).await;
        out
    }
    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        YieldNow(false).await;
        self.0.is_held_by(key, owner).await
    }
    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        self.0.release_signal(key)
    }
}

/// Not a lock: every acquire succeeds.
struct GrantsEverything;

#[async_trait::async_trait]
impl LockStore for GrantsEverything {
    async fn acquire(&self, _key: &str, _owner: &str, _ttl_ms: u64) -> Result<bool> {
        Ok(true)
    }
    async fn release(&self, _key: &str, _owner: &str) -> Result<bool> {
        Ok(true)
    }
    async fn extend(&self, _key: &str, _owner: &str, _ttl_ms: u64) -> Result<bool> {
        Ok(true)
    }
    async fn is_locked(&self, _key: &str) -> Result<bool> {
        Ok(true)
    }
    async fn remaining_time(&self, _key: &str) -> Result<Option<u64>> {
        Ok(Some(1))
    }
}
