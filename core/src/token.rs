//! Owner tokens: 128 bits from the operating system's CSPRNG, as 32 lowercase hex digits.

use std::cell::RefCell;
use std::fmt;

use crate::error::{LockError, Result};

const TOKEN_BYTES: usize = 16;
/// How many random bytes one call to the OS fetches: 64 tokens' worth. A token then
/// costs a copy, not a system call (one `getrandom` call is ~350 ns on Linux without the
/// vDSO version, several times a whole uncontended lock pair).
const BUFFER_BYTES: usize = 1024;

/// The secret that proves which acquisition holds a lock.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken([u8; 2 * TOKEN_BYTES]);

/// Random bytes not yet handed out, per thread. `fork()` copies it into the child, so
/// it remembers the fork generation it was filled in and is thrown away after a fork
/// (see `fork_generation`).
struct Entropy {
    bytes: [u8; BUFFER_BYTES],
    used: usize,
    generation: u64,
}

thread_local! {
    static ENTROPY: RefCell<Entropy> = const {
        RefCell::new(Entropy { bytes: [0; BUFFER_BYTES], used: BUFFER_BYTES, generation: 0 })
    };
}

impl OwnerToken {
    /// A fresh token from the operating system's CSPRNG (`crypto.getRandomValues` on
    /// wasm), drawn in batches.
    ///
    /// Safe across `fork()`: a child never reuses bytes its parent held (see
    /// `fork_generation`). Bytes are drawn on first use, never at start-up, so an
    /// isolate or VM snapshot taken before any lock was taken holds none.
    ///
    /// # Errors
    /// [`LockError::NoRandomSource`] when the platform has no secure random source (no
    /// `crypto.getRandomValues` on wasm) or it failed.
    pub fn generate() -> Result<Self> {
        let Some(generation) = fork_generation() else {
            // Forks cannot be detected: buffer nothing.
            let mut raw = [0u8; TOKEN_BYTES];
            getrandom::fill(&mut raw).map_err(|e| LockError::NoRandomSource(e.to_string()))?;
            return Ok(Self::from_raw(raw));
        };
        ENTROPY.with(|cell| {
            let mut pool = cell.borrow_mut();
            if pool.generation != generation || pool.used + TOKEN_BYTES > BUFFER_BYTES {
                getrandom::fill(&mut pool.bytes).map_err(|e| LockError::NoRandomSource(e.to_string()))?;
                pool.used = 0;
                pool.generation = generation;
            }
            let start = pool.used;
            let mut raw = [0u8; TOKEN_BYTES];
            raw.copy_from_slice(&pool.bytes[start..start + TOKEN_BYTES]);
            // Never hand out the same bytes twice.
            pool.bytes[start..start + TOKEN_BYTES].fill(0);
            pool.used += TOKEN_BYTES;
            Ok(Self::from_raw(raw))
        })
    }

    fn from_raw(raw: [u8; TOKEN_BYTES]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 2 * TOKEN_BYTES];
        for (i, b) in raw.iter().enumerate() {
            out[2 * i] = HEX[usize::from(b >> 4)];
            out[2 * i + 1] = HEX[usize::from(b & 0x0f)];
        }
        Self(out)
    }

    /// Parses a token as written by [`OwnerToken::as_str`]: 32 lowercase hex digits.
    pub fn parse(text: &str) -> Result<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 2 * TOKEN_BYTES
            || !bytes.iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        {
            return Err(LockError::InvalidSerializedLock("owner must be 32 lowercase hex digits".into()));
        }
        let mut out = [0u8; 2 * TOKEN_BYTES];
        out.copy_from_slice(bytes);
        Ok(Self(out))
    }

    /// The token as text, the form stores keep.
    #[must_use]
    #[allow(unsafe_code)] // a UTF-8 check of 32 known bytes costs a validator in the wasm module
    pub fn as_str(&self) -> &str {
        debug_assert!(self.0.iter().all(u8::is_ascii_hexdigit));
        // SAFETY: the bytes are ASCII hex digits: `from_raw` writes only those, `parse`
        // takes only those, and the field is private to this module.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

impl fmt::Debug for OwnerToken {
    // A token is a bearer secret: keep it out of logs and panics.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(..)")
    }
}

/// How many times this process has been forked from its ancestors (as far as it has
/// seen): a `pthread_atfork` child handler counts up in every child, so a buffer filled
/// before the fork no longer matches. Registered on first use; one relaxed atomic load
/// per token afterwards. `None` if the handler could not be registered.
#[cfg(unix)]
#[allow(unsafe_code)] // pthread_atfork has no safe wrapper in std.
fn fork_generation() -> Option<u64> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Once;

    static GENERATION: AtomicU64 = AtomicU64::new(0);
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    static REGISTER: Once = Once::new();

    extern "C" fn in_child() {
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }

    REGISTER.call_once(|| {
        // SAFETY: `in_child` only touches an atomic, and as a plain function it stays
        // valid for the life of the process.
        let registered = unsafe { libc::pthread_atfork(None, None, Some(in_child)) } == 0;
        REGISTERED.store(registered, Ordering::Relaxed);
    });
    REGISTERED.load(Ordering::Relaxed).then(|| GENERATION.load(Ordering::Relaxed))
}

/// Without `fork()` (Windows, wasm) a buffer can only be copied by a snapshot, and no
/// bytes are drawn before the first token.
#[cfg(not(unix))]
#[allow(clippy::unnecessary_wraps)] // The same signature as the unix version.
fn fork_generation() -> Option<u64> {
    Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_are_distinct_full_length_hex() {
        let mut seen = HashSet::new();
        let mut ones = 0u64;
        let n = 20_000;
        for _ in 0..n {
            let t = OwnerToken::generate().unwrap();
            assert_eq!(t.as_str().len(), 32);
            assert_eq!(OwnerToken::parse(t.as_str()).unwrap(), t);
            for c in t.as_str().chars() {
                ones += u64::from(c.to_digit(16).unwrap().count_ones());
            }
            assert!(seen.insert(t), "duplicate token");
        }
        // 128 bits per token: the share of one bits must sit near one half
        // (mean n*64, sd sqrt(n*128)/2 = 800; allow 6 sd).
        let mean = n * 64;
        assert!(ones.abs_diff(mean) < 4_800, "bit balance off: {ones} vs {mean}");
    }

    #[test]
    fn parse_refuses_other_shapes() {
        for bad in ["", "abc", &"A".repeat(32), &"g".repeat(32), &"a".repeat(33)] {
            assert_eq!(OwnerToken::parse(bad).unwrap_err().code(), "INVALID_SERIALIZED_LOCK");
        }
    }

    #[test]
    fn debug_hides_the_secret() {
        let t = OwnerToken::generate().unwrap();
        assert!(!format!("{t:?}").contains(t.as_str()));
    }
}
