//! `performance.now()` and `setTimeout`, from whichever global scope runs us.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use locksmith_core::{BoxFuture, Clock, Timer};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;

    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    fn date_now() -> f64;

    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;

    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);
}

struct JsTimer;

impl Clock for JsTimer {
    fn now_ms(&self) -> u64 {
        performance_now() as u64
    }

    fn unix_time_ms(&self) -> Option<u64> {
        Some(date_now() as u64)
    }
}

/// A `setTimeout` as a future, ready once `performance.now()` has moved on by its
/// milliseconds: a runtime may fire a timer early by that clock (Node's timers count
/// from the event loop's cached time, which lags while a turn runs), and a wait that
/// wakes early spends its remaining milliseconds on extra attempts, so an early timer
/// is armed again for the rest. Dropping it before it fires clears the timer, so a sleep
/// that lost a race (a store call that answered before its timeout, a waiter woken by
/// a release) leaves no timer behind to keep the event loop alive.
struct Sleep {
    /// The timer armed last, and its handle; none before the first poll.
    armed: Option<(JsFuture, JsValue)>,
    until: f64,
    unref: bool,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some((fired, _)) = self.armed.as_mut() {
                if Pin::new(fired).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.armed = None;
            }
            let left = self.until - performance_now();
            if left <= 0.0 {
                return Poll::Ready(());
            }
            // A `setTimeout` for the rest; `unref`'d where the runtime has that (Node), so
            // that background work does not keep the process up. Elsewhere it is a number.
            let mut handle = JsValue::UNDEFINED;
            let promise = js_sys::Promise::new(&mut |resolve, _reject| {
                handle = set_timeout(&resolve, left.ceil());
            });
            if self.unref {
                if let Ok(unref) = js_sys::Reflect::get(&handle, &JsValue::from_str("unref")) {
                    if let Some(unref) = unref.dyn_ref::<js_sys::Function>() {
                        let _ = unref.call0(&handle);
                    }
                }
            }
            self.armed = Some((JsFuture::from(promise), handle));
        }
    }
}

impl Sleep {
    /// A sleep of `ms` from now; its timer is set at the first poll.
    fn start(ms: u64, unref: bool) -> Self {
        Self { armed: None, until: performance_now() + ms as f64, unref }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some((_, handle)) = self.armed.take() {
            clear_timeout(&handle);
        }
    }
}

impl Timer for JsTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        Box::pin(Sleep::start(ms, false))
    }

    fn sleep_in_background(&self, ms: u64) -> BoxFuture<'static, ()> {
        Box::pin(Sleep::start(ms, true))
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        wasm_bindgen_futures::spawn_local(task);
        true
    }
}

/// The one timer of the isolate.
pub fn timer() -> Arc<dyn Timer> {
    thread_local! {
        static TIMER: Arc<dyn Timer> = Arc::new(JsTimer);
    }
    TIMER.with(Clone::clone)
}

/// The test kit's virtual clock (`locksmith-js/testing`) as a timer: its time is set
/// from JS, and a sleep is the JS clock's promise for that time.
struct ClockTimer {
    now: std::cell::Cell<u64>,
    unix_start_ms: u64,
    sleep_until: js_sys::Function,
}

impl Clock for ClockTimer {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    fn unix_time_ms(&self) -> Option<u64> {
        Some(self.unix_start_ms + self.now.get())
    }
}

impl Timer for ClockTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        let until = JsValue::from_f64(self.now.get().saturating_add(ms) as f64);
        let slept = self.sleep_until.call1(&JsValue::NULL, &until).map(js_sys::Promise::from);
        Box::pin(async move {
            if let Ok(slept) = slept {
                let _ = JsFuture::from(slept).await;
            }
        })
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        wasm_bindgen_futures::spawn_local(task);
        true
    }
}

/// The wasm side of a test kit clock: the time the JS clock sets, and its sleeps.
#[wasm_bindgen]
pub struct WasmVirtualClock {
    timer: Arc<ClockTimer>,
}

#[wasm_bindgen]
impl WasmVirtualClock {
    /// A clock at `now_ms` whose wall clock reads `unix_start_ms` at time 0; a sleep
    /// calls `sleep_until(ms)`, which returns a promise.
    #[wasm_bindgen(constructor)]
    pub fn new(sleep_until: js_sys::Function, now_ms: f64, unix_start_ms: f64) -> Self {
        #[allow(clippy::arc_with_non_send_sync)] // wasm32: one thread
        let timer = Arc::new(ClockTimer {
            now: std::cell::Cell::new(now_ms as u64),
            unix_start_ms: unix_start_ms as u64,
            sleep_until,
        });
        Self { timer }
    }

    /// Sets the time (the JS clock only moves it forward).
    pub fn set(&self, now_ms: f64) {
        self.timer.now.set(now_ms as u64);
    }
}

impl WasmVirtualClock {
    pub fn timer(&self) -> Arc<dyn Timer> {
        self.timer.clone()
    }
}
