//! The one timer of the process, shared by every store and lock (and worker thread):
//! `Instant` for the clock, the addon's tokio runtime for sleeping and spawning.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use locksmith_core::{BoxFuture, Clock, MonotonicClock, Timer};

pub fn timer() -> Arc<dyn Timer> {
    static TIMER: OnceLock<Arc<dyn Timer>> = OnceLock::new();
    TIMER.get_or_init(|| Arc::new(TokioTimer::default())).clone()
}

#[derive(Debug, Default, Clone, Copy)]
struct TokioTimer(MonotonicClock);

impl Clock for TokioTimer {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn unix_time_ms(&self) -> Option<u64> {
        self.0.unix_time_ms()
    }
}

impl Timer for TokioTimer {
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        // The sleep is created on first poll, inside the runtime.
        Box::pin(async move { tokio::time::sleep(Duration::from_millis(ms)).await })
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> bool {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(runtime.spawn(task));
                true
            }
            Err(_) => false,
        }
    }
}
