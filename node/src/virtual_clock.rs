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

/// One clock's work on its way: its locks' tasks that are awake, and their calls queued
/// for the JS thread that have not run there yet. Per clock, so that a JS environment
/// torn down with calls on their way (a worker thread ended; their callbacks then never
/// run) leaves other clocks' counts alone.
#[derive(Default)]
pub struct Work(AtomicUsize);

/// A clock's [`Work`], shared by its timer, its locks' tasks and its store's calls.
pub type WorkCount = Arc<Work>;

impl Work {
    /// One call queued for the JS thread: counted until it runs there.
    pub fn queued(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        crate::exit::sent();
    }

    /// The call counted by [`queued`](Self::queued) runs on the JS thread now (or was refused).
    pub fn arrived(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
        crate::exit::delivered();
    }

    fn add(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn done(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }

    fn count(&self) -> u32 {
        u32::try_from(self.0.load(Ordering::SeqCst)).unwrap_or(u32::MAX)
    }
}

/// A call queued for the JS thread, counted in `work` (a clock's) or else only for the
/// process's exit (`exit.rs`).
pub fn queued_on(work: Option<&Work>) {
    match work {
        Some(work) => work.queued(),
        None => crate::exit::sent(),
    }
}

/// The call counted by [`queued_on`] runs on the JS thread now (or was refused).
pub fn arrived_on(work: Option<&Work>) {
    match work {
        Some(work) => work.arrived(),
        None => crate::exit::delivered(),
    }
}

const IDLE: u8 = 0;
const AWAKE: u8 = 1;
const DONE: u8 = 2;

/// A future counted in its clock's [`Work`] from the moment it is woken (or made) until
/// its poll returns; a wake after it finished counts nothing.
pub struct Tracked<F> {
    inner: Pin<Box<F>>,
    state: Arc<TrackState>,
}

struct TrackState {
    state: AtomicU8,
    work: WorkCount,
}

impl TrackState {
    /// Ends the count of a wake-up not yet polled, if there is one, and sets `to`.
    fn set(&self, to: u8) {
        if self.state.swap(to, Ordering::SeqCst) == AWAKE {
            self.work.done();
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
        if self.state.state.compare_exchange(IDLE, AWAKE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            self.state.work.add();
        }
        self.inner.wake_by_ref();
    }
}

impl<F: Future> Tracked<F> {
    pub fn new(inner: F, work: WorkCount) -> Self {
        work.add();
        Self { inner: Box::pin(inner), state: Arc::new(TrackState { state: AtomicU8::new(AWAKE), work }) }
    }
}

/// Ends the count of the wake-up being polled when the poll returns, or unwinds.
struct PollCount<'a>(Option<&'a Work>);

impl Drop for PollCount<'_> {
    fn drop(&mut self) {
        if let Some(work) = self.0 {
            work.done();
        }
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Still counted while it runs: the count of this wake-up ends after the poll.
        let state = self.state.clone();
        let woken = state.state.swap(IDLE, Ordering::SeqCst) == AWAKE;
        let _counted = PollCount(woken.then_some(&*state.work));
        let waker = Waker::from(Arc::new(TrackWaker { state: state.clone(), inner: cx.waker().clone() }));
        let polled = self.inner.as_mut().poll(&mut Context::from_waker(&waker));
        if polled.is_ready() {
            state.set(DONE);
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
    work: WorkCount,
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
        let work = self.work.clone();
        Box::pin(async move {
            let (sent, settled) = oneshot::channel();
            work.queued();
            let arriving = work.clone();
            let status = sleep_until.call_with_return_value(
                until as f64,
                ThreadsafeFunctionCallMode::NonBlocking,
                move |returned, _env| {
                    arriving.arrived();
                    forward(returned, sent);
                    Ok(())
                },
            );
            if status != napi::Status::Ok {
                work.arrived();
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
                drop(runtime.spawn(Tracked::new(task, self.work.clone())));
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
                work: WorkCount::default(),
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

    /// How many tasks of the locks over this clock are awake, plus how many of their calls
    /// to the JS thread have not run there yet.
    #[napi]
    pub fn pending_work(&self) -> u32 {
        self.timer.work.count()
    }
}

impl VirtualClock {
    pub fn timer(&self) -> Arc<dyn Timer> {
        self.timer.clone()
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        self.timer.clone()
    }

    pub fn work(&self) -> WorkCount {
        self.timer.work.clone()
    }
}
