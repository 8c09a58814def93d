//! Owner tokens: 128 bits from the operating system's CSPRNG, as 32 lowercase hex digits.

use std::fmt;

use crate::error::{LockError, Result};

const TOKEN_BYTES: usize = 16;

/// The secret that proves which acquisition holds a lock.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken([u8; 2 * TOKEN_BYTES]);

impl OwnerToken {
    /// A fresh token, drawn from the operating system's CSPRNG (`crypto.getRandomValues`
    /// on wasm) on every call.
    ///
    /// Nothing is buffered in the process: a buffer of entropy would be copied by
    /// `fork()` and by VM or isolate snapshots, and two copies would then mint the same
    /// tokens. The kernel's generator is reseeded across both.
    ///
    /// # Errors
    /// [`LockError::NoRandomSource`] when the platform has no secure random source (no
    /// `crypto.getRandomValues` on wasm) or it failed.
    pub fn generate() -> Result<Self> {
        let mut raw = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut raw).map_err(|e| LockError::NoRandomSource(e.to_string()))?;
        Ok(Self::from_raw(raw))
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
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for OwnerToken {
    // A token is a bearer secret: keep it out of logs and panics.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(..)")
    }
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
