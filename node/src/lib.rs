//! locksmith's native Node addon: converts types, calls `locksmith-core`, maps errors.
//! No lock logic lives here.

// napi-rs hands JS strings over as owned `String`s.
#![allow(clippy::needless_pass_by_value)]

mod completion;
mod error;
mod exit;
mod file;
mod js_store;
mod lock;
mod memory;
mod redis_engine;
mod timer;
mod virtual_clock;

/// One tokio worker thread: the work per lock call is tiny and I/O-bound, and every
/// extra thread costs a cross-thread wake-up per call on a small machine.
#[napi_derive::module_init]
fn init() {
    if let Ok(runtime) = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
}
