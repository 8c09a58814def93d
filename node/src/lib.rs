//! locksmith's native Node addon: converts types, calls `locksmith-core`, maps errors.
//! No lock logic lives here.

mod error;
mod js_store;
mod lock;
mod memory;
mod timer;
