//! `JsStoreBridge`: any JS object with the five async `LockStore` methods, awaited
//! from Rust. The JS side hands over one dispatch function that always returns a
//! promise; whatever that promise resolves to is checked against the store contract
//! in core. A call that throws, rejects, or does not settle within the store's
//! operation timeout becomes a typed error.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::future::{select, Either};
use locksmith_core::contract::{self, Answer, Call, ForeignLockStore, ForeignStore};
use locksmith_core::{BoxFuture, HoldKind, LockStore, Result, Timer};
use napi::bindgen_prelude::{CallbackContext, PromiseRaw, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::lock::{new_handle_on, new_lock_on, restore_lock_on, NativeLock, Runner, SerializedArgs};
use crate::virtual_clock::{arrived_on, queued_on, VirtualClock, WorkCount};

/// One store call, as the JS dispatcher receives it.
#[napi(object)]
pub struct StoreCall {
    pub op: String,
    pub key: String,
    pub owner: Option<String>,
    pub ttl_ms: Option<f64>,
    /// For the permit methods: `semaphore`, `read` or `write`.
    pub kind: Option<String>,
    /// A semaphore's limit.
    pub limit: Option<u32>,
    /// For `onRelease` / `offRelease`: which subscription.
    pub id: Option<f64>,
    /// For `acquirePermit` on a store with `permitWeights`, and `acquireFair`: how many permits.
    pub permits: Option<u32>,
    /// For `acquireFair`: whether the caller waits.
    pub waits: Option<bool>,
}

/// Error-first (`CalleeHandled`), weak (does not keep Node alive). Its promise is read
/// on the JS thread (see [`forward`]).
type Dispatch =
    ThreadsafeFunction<StoreCall, PromiseRaw<'static, Value>, StoreCall, napi::Status, true, true>;

/// What a dispatched call's promise settled to: its value, or the reason it failed.
/// Plain Rust on purpose. A `napi::Error` made from a JS value holds a reference into
/// the JS heap, and dropping one on tokio's thread frees that reference off the JS
/// thread, which corrupts V8's handles: the process crashes later, somewhere else
/// (a store failing often, as during an outage, made it likely).
type Settled = std::result::Result<Value, String>;

/// Runs on the JS thread with what `dispatch` returned: sends what its promise settles
/// to through `sent`, as plain Rust. Every JS value is read, and every `napi::Error`
/// dropped, here on the JS thread.
pub(crate) fn forward(returned: napi::Result<PromiseRaw<'_, Value>>, sent: oneshot::Sender<Settled>) {
    let sent = Rc::new(Cell::new(Some(sent)));
    let settle = |sent: &Cell<Option<oneshot::Sender<Settled>>>, outcome: Settled| {
        if let Some(sent) = sent.take() {
            // The caller may have stopped waiting (its timeout): nothing to do then.
            let _ = sent.send(outcome);
        }
    };
    let (on_value, on_failure) = (sent.clone(), sent.clone());
    let attached = returned.and_then(|promise| {
        promise
            .then(move |ctx: CallbackContext<Value>| {
                settle(&on_value, Ok(ctx.value));
                Ok(())
            })?
            .catch(move |ctx: CallbackContext<Unknown<'_>>| {
                settle(&on_failure, Err(napi::Error::from(ctx.value).reason.clone()));
                Ok(())
            })
            .map(|_| ())
    });
    if let Err(err) = attached {
        settle(&sent, Err(err.reason.clone()));
    }
}

#[allow(clippy::struct_excessive_bools)] // which optional methods the store has: independent flags
struct JsStore {
    dispatch: Arc<Dispatch>,
    timeout_ms: u64,
    /// The store has the optional `isHeldBy(key, owner)`.
    has_is_held_by: bool,
    /// The store has the optional permit methods.
    has_permits: bool,
    /// The store has the optional `onRelease(key, listener, kind)`.
    has_on_release: bool,
    /// The store has the optional `ownerRemainingTime(key, owner)`.
    has_owner_remaining_time: bool,
    /// The store carries weighted permits (`permitWeights: true`).
    has_permit_weights: bool,
    /// The store has the optional `acquireAll(keys, owner, ttlMs)`.
    has_acquire_all: bool,
    /// The store has the optional `acquireFair(...)`.
    has_fair: bool,
    /// The id of the next `onRelease` subscription.
    next_subscription: AtomicU64,
    /// What the operation timeout sleeps on: the locks' timer.
    timer: Arc<dyn Timer>,
    /// The store is on a test kit clock: its calls to the JS thread are counted (see
    /// `virtual_clock.rs`).
    counted: Option<WorkCount>,
}

#[napi]
pub struct JsStoreBridge {
    inner: Arc<ForeignLockStore<JsStore>>,
    runner: Runner,
}

#[napi]
impl JsStoreBridge {
    #[napi(constructor)]
    #[allow(clippy::too_many_arguments)] // one flag per optional store method, as the JS side passes them
    pub fn new(
        dispatch: Dispatch,
        operation_timeout_ms: f64,
        has_is_held_by: bool,
        has_permits: bool,
        has_on_release: bool,
        has_owner_remaining_time: Option<bool>,
        has_permit_weights: Option<bool>,
        has_acquire_all: Option<bool>,
        clock: Option<&VirtualClock>,
        has_fair: Option<bool>,
    ) -> napi::Result<Self> {
        let timeout_ms = crate::error::IntoNapi::napi(locksmith_core::validate::js::positive_ms(
            "operationTimeoutMs",
            operation_timeout_ms,
        ))?;
        let runner = clock.map_or_else(Runner::tokio, |clock| Runner::on_clock(clock.timer(), clock.work()));
        Ok(Self {
            inner: Arc::new(ForeignLockStore(JsStore {
                dispatch: Arc::new(dispatch),
                timeout_ms,
                has_is_held_by,
                has_permits,
                has_on_release,
                has_owner_remaining_time: has_owner_remaining_time.unwrap_or(false),
                has_permit_weights: has_permit_weights.unwrap_or(false),
                has_acquire_all: has_acquire_all.unwrap_or(false),
                has_fair: has_fair.unwrap_or(false),
                next_subscription: AtomicU64::new(0),
                timer: runner.timer.clone(),
                counted: runner.tracked.clone(),
            })),
            runner,
        })
    }

    #[napi]
    pub fn lock(&self, key: String, ttl_ms: f64) -> napi::Result<NativeLock> {
        new_lock_on(self.inner.clone() as Arc<dyn LockStore>, self.runner.clone(), &key, ttl_ms)
    }

    #[napi]
    pub fn handle(
        &self,
        key: String,
        ttl_ms: f64,
        kind: String,
        limit: Option<f64>,
    ) -> napi::Result<NativeLock> {
        new_handle_on(
            self.inner.clone() as Arc<dyn LockStore>,
            self.runner.clone(),
            &key,
            ttl_ms,
            &kind,
            limit,
        )
    }

    #[napi]
    pub fn restore(&self, fields: SerializedArgs) -> napi::Result<NativeLock> {
        restore_lock_on(self.inner.clone() as Arc<dyn LockStore>, self.runner.clone(), fields)
    }
}

fn describe(value: &Value) -> Answer {
    match value {
        Value::Bool(b) => Answer::Bool(*b),
        Value::Number(n) => Answer::Number(n.as_f64().unwrap_or(f64::NAN)),
        Value::Null => Answer::Nothing,
        Value::String(s) => Answer::Text(s.clone()),
        Value::Array(_) => Answer::Other("an array".into()),
        Value::Object(o) => {
            if let Some(number) = o.get("nonFinite").and_then(Value::as_str) {
                Answer::Number(contract::non_finite(number))
            } else if let Some(code) = o.get("refused").and_then(Value::as_str) {
                let message = o.get("message").and_then(Value::as_str).unwrap_or_default();
                Answer::refusal(code, message.to_owned())
            } else {
                Answer::Other("an object".into())
            }
        }
    }
}

impl JsStore {
    async fn invoke(
        &self,
        Call { op, key, owner, ttl_ms, kind, permits, waits }: Call<'_>,
    ) -> Result<Answer> {
        let call = StoreCall {
            op: op.to_owned(),
            key: key.to_owned(),
            owner: owner.map(str::to_owned),
            ttl_ms: ttl_ms.map(|t| t as f64),
            kind: kind.map(|k| k.name().to_owned()),
            limit: kind.and_then(HoldKind::limit),
            id: None,
            permits,
            waits,
        };
        let answered = Box::pin(async {
            match self.send(call)?.await {
                Ok(settled) => settled,
                // Its promise was dropped unsettled (the JS heap torn down at exit): no
                // answer, as for a call that never settles; the timeout below ends it.
                Err(_) => std::future::pending().await,
            }
        });
        let settled = match select(answered, self.timer.sleep(self.timeout_ms)).await {
            Either::Left((settled, _)) => settled,
            Either::Right(_) => return Err(contract::timed_out(op, self.timeout_ms)),
        };
        settled.map(|v| describe(&v)).map_err(|reason| contract::failed(op, &reason))
    }

    /// Queues `dispatch(call)` for the JS thread; the receiver gets what its promise
    /// settles to.
    fn send(&self, call: StoreCall) -> std::result::Result<oneshot::Receiver<Settled>, String> {
        let (sent, settled) = oneshot::channel();
        queued_on(self.counted.as_deref());
        let arriving = self.counted.clone();
        let status = self.dispatch.call_with_return_value(
            Ok(call),
            ThreadsafeFunctionCallMode::NonBlocking,
            move |returned, _env| {
                arrived_on(arriving.as_deref());
                forward(returned, sent);
                Ok(())
            },
        );
        if status != napi::Status::Ok {
            arrived_on(self.counted.as_deref());
        }
        if status == napi::Status::Ok {
            Ok(settled)
        } else {
            Err(format!("the JS thread did not take the call ({status})"))
        }
    }
}

#[async_trait::async_trait]
impl ForeignStore for JsStore {
    async fn call(&self, call: Call<'_>) -> Result<Answer> {
        self.invoke(call).await
    }

    fn has_is_held_by(&self) -> bool {
        self.has_is_held_by
    }

    fn has_owner_remaining_time(&self) -> bool {
        self.has_owner_remaining_time
    }

    fn has_permits(&self) -> bool {
        self.has_permits
    }

    fn has_permit_weights(&self) -> bool {
        self.has_permit_weights
    }

    fn has_acquire_all(&self) -> bool {
        self.has_acquire_all
    }

    fn has_fair(&self) -> bool {
        self.has_fair
    }

    fn release_signal(&self, key: &str, kind: Option<HoldKind>) -> Option<BoxFuture<'static, ()>> {
        if !self.has_on_release {
            return None;
        }
        let id = self.next_subscription.fetch_add(1, Ordering::Relaxed) as f64;
        let call = StoreCall {
            op: "onRelease".to_owned(),
            key: key.to_owned(),
            owner: None,
            ttl_ms: None,
            kind: kind.map(|k| k.name().to_owned()),
            limit: kind.and_then(HoldKind::limit),
            id: Some(id),
            permits: None,
            waits: None,
        };
        // Queued now, ahead of the acquire attempt that follows, so a release between
        // that attempt and the wait is not missed.
        let woken = self.send(call).ok()?;
        let unsubscribe = Unsubscribe { dispatch: self.dispatch.clone(), id };
        Some(Box::pin(async move {
            let _unsubscribe = unsubscribe;
            // The promise resolves when the listener is called. A store that could not
            // subscribe gives no wake-up: the retry delay stands.
            if !matches!(woken.await, Ok(Ok(_))) {
                std::future::pending::<()>().await;
            }
        }))
    }
}

/// Ends one `onRelease` subscription when the wait it served is over.
struct Unsubscribe {
    dispatch: Arc<Dispatch>,
    id: f64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let call = StoreCall {
            op: "offRelease".to_owned(),
            key: String::new(),
            owner: None,
            ttl_ms: None,
            kind: None,
            limit: None,
            id: Some(self.id),
            permits: None,
            waits: None,
        };
        crate::exit::sent();
        let status = self.dispatch.call_with_return_value(
            Ok(call),
            ThreadsafeFunctionCallMode::NonBlocking,
            |_, _| {
                crate::exit::delivered();
                Ok(())
            },
        );
        if status != napi::Status::Ok {
            crate::exit::delivered();
        }
    }
}
