//! `RedisEngine`: the sans-I/O Redis engine (`locksmith_redis::engine`) for a JS
//! driver on Node's own sockets (`js/redis-engine.cjs`). No thread, no promise here:
//! an operation returns a request id, `takeOutput()` gives the bytes of a turn,
//! `feed(chunk)` gives the outcomes of every reply in a chunk.
//!
//! Outcomes travel as one `Float64Array` of `[id, value]` pairs, to cross the boundary
//! once per chunk: the value is the fencing token (`acquire`, 0 when not taken), 1/0
//! (`release`, `extend`, `isLocked`, the handshake), milliseconds or -1 for none
//! (`remainingTime`), or `-2 - i` for the i-th message of `errors()` (`CODE message`).

use std::time::Instant;

use locksmith_core::validate;
use locksmith_redis::engine::{Completion, Engine, EngineOptions, Handshake, Value};
use napi::bindgen_prelude::{Buffer, BufferSlice, Float64Array};
use napi_derive::napi;

use crate::error::IntoNapi;

#[napi]
pub struct RedisEngine {
    engine: Engine,
    started: Instant,
    done: Vec<Completion>,
    errors: Vec<String>,
}

#[napi]
impl RedisEngine {
    #[napi(constructor)]
    pub fn new(key_prefix: String, command_timeout_ms: f64) -> napi::Result<Self> {
        let command_timeout_ms = validate::js::positive_ms("commandTimeoutMs", command_timeout_ms).napi()?;
        Ok(Self {
            engine: Engine::new(EngineOptions { key_prefix, command_timeout_ms }),
            started: Instant::now(),
            done: Vec::new(),
            errors: Vec::new(),
        })
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    #[napi]
    pub fn acquire(&mut self, key: String, owner: String, ttl_ms: f64) -> napi::Result<u32> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        let now = self.now();
        Ok(self.engine.acquire(&key, &owner, ttl_ms, now))
    }

    #[napi]
    pub fn release(&mut self, key: String, owner: String) -> u32 {
        let now = self.now();
        self.engine.release(&key, &owner, now)
    }

    #[napi]
    pub fn extend(&mut self, key: String, owner: String, ttl_ms: f64) -> napi::Result<u32> {
        let ttl_ms = validate::js::ttl_ms(ttl_ms).napi()?;
        let now = self.now();
        Ok(self.engine.extend(&key, &owner, ttl_ms, now))
    }

    #[napi]
    pub fn is_locked(&mut self, key: String) -> u32 {
        let now = self.now();
        self.engine.is_locked(&key, now)
    }

    #[napi]
    pub fn remaining_time(&mut self, key: String) -> u32 {
        let now = self.now();
        self.engine.remaining_time(&key, now)
    }

    /// Queues the handshake of a new connection in front of everything else.
    #[napi]
    pub fn handshake(&mut self, user: Option<String>, password: Option<String>, db: u32) -> u32 {
        let auth = password.map(|password| (user, password));
        let now = self.now();
        self.engine.handshake(&Handshake { auth, db }, now)
    }

    /// The bytes to write now, or `null`.
    #[napi]
    pub fn take_output(&mut self) -> Option<Buffer> {
        self.engine.has_output().then(|| Buffer::from(self.engine.take_output()))
    }

    /// Outcomes of every reply in `chunk`, or `null` when none finished. Throws when the
    /// bytes are out of step: the host then drops the connection.
    #[napi]
    pub fn feed(&mut self, chunk: BufferSlice<'_>) -> napi::Result<Option<Float64Array>> {
        let now = self.now();
        let mut done = std::mem::take(&mut self.done);
        let fed = self.engine.feed(&chunk, now, &mut done);
        let outcomes = self.outcomes(&mut done);
        self.done = done;
        fed.napi()?;
        Ok(outcomes)
    }

    /// Fails requests past their deadline. `null` when none was; otherwise the outcomes,
    /// and the host must drop the connection and reconnect.
    #[napi]
    pub fn expire(&mut self) -> Option<Float64Array> {
        let now = self.now();
        let mut done = std::mem::take(&mut self.done);
        self.engine.expire(now, &mut done);
        let outcomes = self.outcomes(&mut done);
        self.done = done;
        outcomes
    }

    /// The connection is gone: every pending request fails with `STORE_UNAVAILABLE`.
    #[napi]
    pub fn connection_lost(&mut self, why: String) -> Option<Float64Array> {
        let mut done = std::mem::take(&mut self.done);
        self.engine.connection_lost(&why, &mut done);
        let outcomes = self.outcomes(&mut done);
        self.done = done;
        outcomes
    }

    /// Requests waiting for a reply.
    #[napi(getter)]
    pub fn pending(&self) -> u32 {
        self.engine.pending() as u32
    }

    /// The error messages the last outcomes point at.
    #[napi]
    pub fn errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    fn outcomes(&mut self, done: &mut Vec<Completion>) -> Option<Float64Array> {
        if done.is_empty() {
            return None;
        }
        self.errors.clear();
        let mut pairs = Vec::with_capacity(done.len() * 2);
        for completion in done.drain(..) {
            pairs.push(f64::from(completion.id));
            pairs.push(match completion.result {
                Ok(Value::Acquired(token)) => token.map_or(0.0, |t| t as f64),
                Ok(Value::Flag(flag)) => f64::from(u8::from(flag)),
                Ok(Value::Millis(ms)) => ms.map_or(-1.0, |ms| ms as f64),
                Ok(Value::Done) => 1.0,
                Err(err) => {
                    self.errors.push(format!("{} {err}", err.code()));
                    -1.0 - self.errors.len() as f64
                }
            });
        }
        Some(Float64Array::new(pairs))
    }
}
