//! The test kit's virtual clock (`locksmith-js/testing`), as a `Timer` for the locks over
//! a test store: its time is set from JS, and each sleep is a promise that the JS clock
//! resolves when its time comes.
//!
//! The JS clock moves time only once nothing is running, so this side counts what is
//! on its way: tasks of those locks that are awake on tokio ([`Tracked`]), and calls
//! queued for the JS thread that have not run there yet. The JS side reads the sum
//! (`pendingWork()`): when it is zero and the JS thread's own queue is empty, every lock
//! over the clock waits for the clock or for a store call that the JS side holds.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use locksmith_core::{BoxFuture, Clock, Timer};
use napi::bindgen_prelude::PromiseRaw;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::js_store::forward;

/// Awake tasks and calls on their way to the JS thread, of the locks over a virtual clock.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// One call queued for the JS thread: counted until it runs there.
pub fn queued() {
    PENDING.fetch_add(1, Ordering::SeqCst);
    crate::exit::sent();
}

/// The call counted by [`queued`] runs on the JS thread now.
pub fn arrived() {
    PENDING.fetch_sub(1, Ordering::SeqCst);
    crate::exit::delivered();
}

/// How many tasks of the locks over a virtual clock are awake, plus how many of their
/// calls to the JS thread have not run there yet.
#[napi(js_name = "pendingWork")]
pub fn pending_work() -> u32 {
    u32::try_from(PENDING.load(Ordering::SeqCst)).unwrap_or(u32::MAX)
}

const IDLE: u8 = 0;
const AWAKE: u8 = 1;
const DONE: u8 = 2;

/// A future counted in [`PENDING`] from the moment it is woken (or made) until its poll
/// returns; a wake after it finished counts nothing.
pub struct Tracked<F> {
    inner: Pin<Box<F>>,
    state: Arc<TrackState>,
}

struct TrackState(AtomicU8);

impl TrackState {
    /// Ends the count of a wake-up not yet polled, if there is one, and sets `to`.
    fn set(&self, to: u8) {
        if self.0.swap(to, Ordering::SeqCst) == AWAKE {
            PENDING.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

struct TrackWaker {
    state: Arc<TrackState>,
    inner: Waker,
}

impl Wake for TrackWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.0.compare_exchange(IDLE, AWAKE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            PENDING.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.wake_by_ref();
    }
}

impl<F: Future> Tracked<F> {
    pub fn new(inner: F) -> Self {
        PENDING.fetch_add(1, Ordering::SeqCst);
        Self { inner: Box::pin(inner), state: Arc::new(TrackState(AtomicU8::new(AWAKE))) }
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Still counted while it runs: the count of this wake-up ends after the poll.
        let woken = self.state.0.swap(IDLE, Ordering::SeqCst) == AWAKE;
        let waker =
            Waker::from(Arc::new(TrackWaker { state: self.state.clone(), inner: cx.waker().clone() }));
        let polled = self.inner.as_mut().poll(&mut Context::from_waker(&waker));
        if polled.is_ready() {
            self.state.set(DONE);
        }
        if woken {
            PENDING.fetch_sub(1, Ordering::SeqCst);
        }
        polled
    }
}

impl<F> Drop for Tracked<F> {
    fn drop(&mut self) {
        self.state.set(DONE);
    }
}

/// `sleepUntil(ms)`: the JS clock's promise that resolves at that time.
type SleepUntil = ThreadsafeFunction<f64, PromiseRaw<'static, Value>, f64, napi::Status, false, true>;

struct ClockTimer {
    now: AtomicU64,
    /// What `unix_time_ms` adds to `now`.
    unix_offset_ms: u64,
    sleep_until: Arc<SleepUntil>,
}

impl Clock for ClockTimer {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn unix_time_ms(&self) -> Option<u64> {
        Some(self.unix_offset_ms + self.now_ms())
    }
}

impl Timer for ClockTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        let until = self.now_ms().saturating_add(ms);
        let sleep_until = self.sleep_until.clone();
        Box::pin(async move {
            let (sent, settled) = oneshot::channel();
            queued();
            let status = sleep_until.call_with_return_value(
                until as f64,
                ThreadsafeFunctionCallMode::NonBlocking,
                move |returned, _env| {
                    arrived();
                    forward(returned, sent);
                    Ok(())
                },
            );
            if status != napi::Status::Ok {
                arrived();
                // The JS thread is gone: nothing will move the clock again.
                return std::future::pending().await;
            }
            // A promise dropped unsettled (the JS heap torn down at exit) is not time
            // that passed: going on would queue calls to a JS thread that is gone.
            if settled.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(runtime.spawn(Tracked::new(task)));
                true
            }
            Err(_) => false,
        }
    }
}

/// The native side of a test kit clock: the time the JS clock sets, and its sleeps.
#[napi]
pub struct VirtualClock {
    timer: Arc<ClockTimer>,
}

#[napi]
impl VirtualClock {
    /// A clock at `nowMs` whose wall clock reads `unixStartMs` at time 0; a sleep calls
    /// `sleepUntil(ms)`, which returns a promise.
    #[napi(constructor)]
    pub fn new(sleep_until: SleepUntil, now_ms: f64, unix_start_ms: f64) -> Self {
        Self {
            timer: Arc::new(ClockTimer {
                now: AtomicU64::new(now_ms as u64),
                unix_offset_ms: unix_start_ms as u64,
                sleep_until: Arc::new(sleep_until),
            }),
        }
    }

    /// Sets the time (the JS clock only moves it forward).
    #[napi]
    pub fn set(&self, now_ms: f64) {
        self.timer.now.store(now_ms as u64, Ordering::SeqCst);
    }
}

impl VirtualClock {
    pub fn timer(&self) -> Arc<dyn Timer> {
        self.timer.clone()
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        self.timer.clone()
    }
}
