//! `LockError` → JS. The reason carries the stable code first (`CODE message`); the JS
//! surface turns it into the matching `LockError` subclass with `err.code`.

use locksmith_core::LockError;

/// `CODE locksmith: …`, or `CODE+ locksmith: …` when a hold may remain
/// ([`LockError::hold_may_remain`]): what the JS surface reads.
pub fn reason(err: &LockError) -> String {
    format!("{}{} {err}", err.code(), if err.hold_may_remain() { "+" } else { "" })
}

pub fn to_napi(err: &LockError) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, reason(err))
}

pub trait IntoNapi<T> {
    fn napi(self) -> napi::Result<T>;
}

impl<T> IntoNapi<T> for locksmith_core::Result<T> {
    fn napi(self) -> napi::Result<T> {
        self.map_err(|e| to_napi(&e))
    }
}
