//! locksmith for edge runtimes and browsers: the wasm-bindgen layer. It converts
//! types, calls `locksmith-core` and maps errors; no lock logic lives here.
//!
//! The clock is `performance.now()`, sleeping is `setTimeout`, owner tokens come from
//! `crypto.getRandomValues` (through getrandom), and JS stores are awaited through
//! their promises.

// Core shares stores as `Arc<dyn LockStore>` on every target; on wasm32 there is one
// thread, so the `Arc`s are never sent anywhere.
#![allow(clippy::arc_with_non_send_sync)]
// Everything here is for wasm32; on other targets the crate is empty, so
// `cargo build --workspace` on the host passes over it.
#![cfg(target_arch = "wasm32")]

mod js_store;
mod lock;
mod memory;
mod timer;

use locksmith_core::LockError;

// Made for wasm32: a few KB smaller than the default allocator (dlmalloc), and faster.
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();
use wasm_bindgen::JsValue;

/// `LockError` → JS: an `Error` whose message carries the stable code first
/// (`CODE message`); the JS surface turns it into the matching `LockError` subclass.
fn to_js(err: &LockError) -> JsValue {
    js_sys::Error::new(&format!("{}{} {err}", err.code(), if err.hold_may_remain() { "+" } else { "" }))
        .into()
}

trait IntoJs<T> {
    fn js(self) -> Result<T, JsValue>;
}

impl<T> IntoJs<T> for locksmith_core::Result<T> {
    fn js(self) -> Result<T, JsValue> {
        self.map_err(|e| to_js(&e))
    }
}
