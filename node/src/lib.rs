//! locksmith's native Node addon: converts types, calls `locksmith-core`, maps errors.
//! No lock logic lives here.

// napi-rs hands JS strings over as owned `String`s.
#![allow(clippy::needless_pass_by_value)]

mod error;
mod js_store;
mod lock;
mod memory;
mod redis;
mod timer;
