//! The one timer of the process, shared by every store and lock (and worker thread).

use std::sync::{Arc, OnceLock};

use locksmith_core::Timer;
use locksmith_redis::TokioTimer;

pub fn timer() -> Arc<dyn Timer> {
    static TIMER: OnceLock<Arc<dyn Timer>> = OnceLock::new();
    TIMER.get_or_init(|| Arc::new(TokioTimer::default())).clone()
}
