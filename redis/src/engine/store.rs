//! [`EngineStore`]: a [`LockStore`] whose futures the host completes by feeding the
//! engine the bytes its own socket received. Every future of the store is polled on the
//! host's thread (see [`local`](super::local)); the host writes
//! [`take_output`](EngineStore::take_output) once per turn.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use locksmith_core::{validate, BoxFuture, Clock, Grant, HoldKind, LockError, LockStore, Result};

use super::{Completion, Engine, EngineOptions, Handshake, RequestId, Subscriber, Value};

enum Slot {
    Waiting(Option<Waker>),
    Done(Result<Value>),
}

struct Shared {
    engine: Engine,
    slots: HashMap<RequestId, Slot>,
    done: Vec<Completion>,
}

/// Locks in Redis over a connection that the host drives. See the module docs.
pub struct EngineStore {
    shared: Mutex<Shared>,
    clock: Arc<dyn Clock>,
    closed: AtomicBool,
    subscriber: Option<Subscriber>,
}

impl std::fmt::Debug for EngineStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineStore").field("engine", &self.shared().engine).finish_non_exhaustive()
    }
}

impl EngineStore {
    /// A store with nothing pending; `clock` stamps command deadlines. With a
    /// `subscriber`, waiters wake on release notifications.
    #[must_use]
    pub fn new(options: EngineOptions, clock: Arc<dyn Clock>, subscriber: Option<Subscriber>) -> Self {
        Self {
            subscriber,
            shared: Mutex::new(Shared {
                engine: Engine::new(options),
                slots: HashMap::new(),
                done: Vec::new(),
            }),
            clock,
            closed: AtomicBool::new(false),
        }
    }

    /// The release notifications' engine, when the store has one.
    #[must_use]
    pub fn subscriber(&self) -> Option<&Subscriber> {
        self.subscriber.as_ref()
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The prefix put before every key.
    #[must_use]
    pub fn key_prefix(&self) -> String {
        self.shared().engine.options().key_prefix.clone()
    }

    fn request(&self, make: impl FnOnce(&mut Engine, u64) -> RequestId) -> ReplyFuture<'_> {
        if self.closed.load(Ordering::Relaxed) {
            return ReplyFuture { store: self, id: None };
        }
        let now = self.clock.now_ms();
        let mut shared = self.shared();
        let id = make(&mut shared.engine, now);
        shared.slots.insert(id, Slot::Waiting(None));
        ReplyFuture { store: self, id: Some(id) }
    }

    /// Queues the handshake of a new connection in front of everything else (see
    /// [`Engine::handshake`]); the future ends when the server has answered all of it.
    pub fn handshake(&self, handshake: &Handshake) -> impl Future<Output = Result<()>> + Send + '_ {
        let reply = self.request(|engine, now| engine.handshake(handshake, now));
        async move { reply.await.map(|_| ()) }
    }

    /// The bytes to write now, if any.
    pub fn take_output(&self) -> Option<Vec<u8>> {
        let mut shared = self.shared();
        shared.engine.has_output().then(|| shared.engine.take_output())
    }

    /// Hands the engine a chunk the socket received; wakes the futures it settles.
    ///
    /// # Errors
    /// The bytes are out of step: drop the connection, then call
    /// [`connection_lost`](Self::connection_lost).
    pub fn feed(&self, bytes: &[u8]) -> Result<()> {
        let now = self.clock.now_ms();
        let (fed, wakers) = {
            let shared = &mut *self.shared();
            let fed = shared.engine.feed(bytes, now, &mut shared.done);
            (fed, Self::settle(shared))
        };
        wakers.into_iter().for_each(Waker::wake);
        fed
    }

    /// Whether a reply said `READONLY` since the last call (see [`Engine::take_replica_seen`]).
    pub fn take_replica_seen(&self) -> bool {
        self.shared().engine.take_replica_seen()
    }

    /// Fails requests past their deadline; `true` when the host must drop the connection.
    pub fn expire(&self) -> bool {
        let now = self.clock.now_ms();
        let (reset, wakers) = {
            let shared = &mut *self.shared();
            let reset = shared.engine.expire(now, &mut shared.done);
            (reset, Self::settle(shared))
        };
        wakers.into_iter().for_each(Waker::wake);
        reset
    }

    /// The connection is gone: pending requests fail with `STORE_UNAVAILABLE`.
    pub fn connection_lost(&self, why: &str) {
        let wakers = {
            let shared = &mut *self.shared();
            shared.engine.connection_lost(why, &mut shared.done);
            Self::settle(shared)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// When the earliest pending request times out, on the clock's scale.
    #[must_use]
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.shared().engine.next_deadline_ms()
    }

    /// Requests waiting for a reply.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.shared().engine.pending()
    }

    /// Later operations fail with `STORE_CLOSED`; pending ones fail now.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let wakers = {
            let shared = &mut *self.shared();
            let mut done = std::mem::take(&mut shared.done);
            shared.engine.connection_lost("the store was closed", &mut done);
            for completion in &mut done {
                completion.result = Err(LockError::StoreClosed);
            }
            shared.done = done;
            Self::settle(shared)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn settle(shared: &mut Shared) -> Vec<Waker> {
        let mut wakers = Vec::new();
        for Completion { id, result } in shared.done.drain(..) {
            if let Some(slot) = shared.slots.get_mut(&id) {
                if let Slot::Waiting(waker) = std::mem::replace(slot, Slot::Done(result)) {
                    wakers.extend(waker);
                }
            }
        }
        wakers
    }
}

/// The reply to one request.
struct ReplyFuture<'a> {
    store: &'a EngineStore,
    /// `None` when the store was closed.
    id: Option<RequestId>,
}

impl Future for ReplyFuture<'_> {
    type Output = Result<Value>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Value>> {
        let Some(id) = self.id else { return Poll::Ready(Err(LockError::StoreClosed)) };
        let mut shared = self.store.shared();
        match shared.slots.get_mut(&id) {
            Some(Slot::Waiting(waker)) => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            Some(Slot::Done(_)) => match shared.slots.remove(&id) {
                Some(Slot::Done(result)) => Poll::Ready(result),
                _ => unreachable!(),
            },
            None => Poll::Ready(Err(LockError::StoreUnavailable("redis: the request was lost".into()))),
        }
    }
}

impl Drop for ReplyFuture<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.store.shared().slots.remove(&id);
        }
    }
}

/// The kinds the permit scripts serve: a semaphore's (with a valid limit), read, write.
fn permit_kind(kind: HoldKind) -> Result<HoldKind> {
    match validate::kind(kind)? {
        kind @ (HoldKind::Permit { .. } | HoldKind::Read | HoldKind::Write) => Ok(kind),
        other => Err(LockError::InvalidArgument(format!(
            "a {} is not a semaphore or read-write lock",
            other.name()
        ))),
    }
}

fn unexpected(op: &str, value: &Value) -> LockError {
    LockError::StoreError(format!("redis engine: {op} got {value:?}"))
}

#[async_trait::async_trait]
impl LockStore for EngineStore {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }

    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        match self.request(|e, now| e.acquire(key, owner, ttl_ms, now)).await? {
            Value::Acquired(token) => Ok(token.map(Grant::with_fencing_token)),
            other => Err(unexpected("acquire", &other)),
        }
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        match self.request(|e, now| e.release(key, owner, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("release", &other)),
        }
    }

    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        match self.request(|e, now| e.extend(key, owner, ttl_ms, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("extend", &other)),
        }
    }

    async fn is_locked(&self, key: &str) -> Result<bool> {
        match self.request(|e, now| e.is_locked(key, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("is_locked", &other)),
        }
    }

    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        match self.request(|e, now| e.remaining_time(key, now)).await? {
            Value::Millis(ms) => Ok(ms),
            other => Err(unexpected("remaining_time", &other)),
        }
    }

    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        match self.request(|e, now| e.is_held_by(key, owner, now)).await? {
            Value::Flag(flag) => Ok(Some(flag)),
            other => Err(unexpected("is_held_by", &other)),
        }
    }

    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        let subscriber = self.subscriber.as_ref()?;
        let channel = format!("{}:released", crate::lock_key(&self.key_prefix(), key));
        Some(subscriber.signal(channel))
    }

    async fn acquire_permit(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
    ) -> Result<Option<Grant>> {
        let kind = permit_kind(kind)?;
        match self.request(|e, now| e.acquire_permit(key, owner, ttl_ms, kind, now)).await? {
            Value::Acquired(token) => Ok(token.map(Grant::with_fencing_token)),
            other => Err(unexpected("acquire_permit", &other)),
        }
    }

    async fn release_permit(&self, key: &str, owner: &str, kind: HoldKind) -> Result<bool> {
        let kind = permit_kind(kind)?;
        match self.request(|e, now| e.release_permit(key, owner, kind, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("release_permit", &other)),
        }
    }

    async fn extend_permit(&self, key: &str, owner: &str, ttl_ms: u64, kind: HoldKind) -> Result<bool> {
        let kind = permit_kind(kind)?;
        match self.request(|e, now| e.extend_permit(key, owner, ttl_ms, kind, now)).await? {
            Value::Flag(flag) => Ok(flag),
            other => Err(unexpected("extend_permit", &other)),
        }
    }

    async fn permit_count(&self, key: &str, kind: HoldKind) -> Result<u64> {
        let kind = permit_kind(kind)?;
        match self.request(|e, now| e.permit_count(key, kind, now)).await? {
            Value::Count(count) => Ok(count),
            other => Err(unexpected("permit_count", &other)),
        }
    }

    async fn permit_remaining_time(&self, key: &str, owner: &str, kind: HoldKind) -> Result<Option<u64>> {
        let kind = permit_kind(kind)?;
        match self.request(|e, now| e.permit_remaining_time(key, owner, kind, now)).await? {
            Value::Millis(ms) => Ok(ms),
            other => Err(unexpected("permit_remaining_time", &other)),
        }
    }

    fn permit_release_signal(&self, key: &str, kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        let subscriber = self.subscriber.as_ref()?;
        let channel = format!("{}:released", crate::permit_key(&self.key_prefix(), key, kind));
        Some(subscriber.signal_all(channel))
    }
}
