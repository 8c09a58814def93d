//! Calls on their way to the JS thread when the event loop runs out of work. A
//! threadsafe function does not keep the loop alive, so a call that a background task
//! (a lock's watch or auto-extend, woken just then) queues as the loop ends would be
//! delivered while Node tears the environment down, when no JS can run: napi-rs then
//! aborts the process. Every call is counted from its queueing to its delivery, and at
//! `beforeExit` the JS side gives the loop another turn while any is on its way
//! (`callsInTransit()`, js/node.cjs).

use std::sync::atomic::{AtomicUsize, Ordering};

use napi_derive::napi;

static IN_TRANSIT: AtomicUsize = AtomicUsize::new(0);

/// A call is queued for the JS thread.
pub fn sent() {
    IN_TRANSIT.fetch_add(1, Ordering::SeqCst);
}

/// The call counted by [`sent`] reached the JS thread, or was refused.
pub fn delivered() {
    IN_TRANSIT.fetch_sub(1, Ordering::SeqCst);
}

/// How many calls are on their way to the JS thread.
#[napi(js_name = "callsInTransit")]
pub fn calls_in_transit() -> u32 {
    u32::try_from(IN_TRANSIT.load(Ordering::SeqCst)).unwrap_or(u32::MAX)
}
