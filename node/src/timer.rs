//! The clock and sleep of native locks: `Instant` and tokio.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use locksmith_core::{BoxFuture, Clock, MonotonicClock, Timer};

struct TokioTimer(MonotonicClock);

impl Clock for TokioTimer {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
}

impl Timer for TokioTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        // Created on first poll, inside the runtime.
        Box::pin(async move { tokio::time::sleep(Duration::from_millis(ms)).await })
    }
}

/// The one timer of the process, shared by every store and lock (and every worker thread).
pub fn timer() -> Arc<dyn Timer> {
    static TIMER: OnceLock<Arc<dyn Timer>> = OnceLock::new();
    TIMER.get_or_init(|| Arc::new(TokioTimer(MonotonicClock::new()))).clone()
}
