//! `performance.now()` and `setTimeout`, from whichever global scope runs us.

use std::sync::Arc;

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

impl Timer for JsTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        let promise = js_sys::Promise::new(&mut |resolve, _reject| {
            set_timeout(&resolve, ms as f64);
        });
        Box::pin(async move {
            let _ = JsFuture::from(promise).await;
        })
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
