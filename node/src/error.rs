//! `LockError` → JS. The reason carries the stable code first (`CODE message`); the JS
//! surface turns it into the matching `LockError` subclass with `err.code`.

use locksmith_core::LockError;

pub fn to_napi(err: &LockError) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, format!("{} {err}", err.code()))
}

pub trait IntoNapi<T> {
    fn napi(self) -> napi::Result<T>;
}

impl<T> IntoNapi<T> for locksmith_core::Result<T> {
    fn napi(self) -> napi::Result<T> {
        self.map_err(|e| to_napi(&e))
    }
}
