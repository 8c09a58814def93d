//! Argument validation: keys and durations in whole milliseconds. The bindings turn
//! JavaScript numbers into milliseconds with [`js`] (feature `js-numbers`).

use crate::error::{LockError, Result};

/// The longest key accepted, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 1024;
/// The longest TTL accepted, in milliseconds (2^31 - 1, about 24.8 days: the longest
/// delay a JS timer can express).
pub const MAX_TTL_MS: u64 = 2_147_483_647;
/// The TTL of `lock(key)` when none is given.
pub const DEFAULT_TTL_MS: u64 = 30_000;
/// The default pause between attempts while waiting.
pub const DEFAULT_RETRY_DELAY_MS: u64 = 50;

/// Checks a lock key: non-empty, at most [`MAX_KEY_BYTES`], no control characters.
/// Any other Unicode is fine.
pub fn key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(LockError::InvalidArgument("key must be a non-empty string".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(LockError::InvalidArgument(format!(
            "key is {} bytes long; the maximum is {MAX_KEY_BYTES} bytes of UTF-8",
            key.len()
        )));
    }
    if let Some(c) = key.chars().find(|c| c.is_control()) {
        return Err(LockError::InvalidArgument(format!(
            "key must not contain control characters; found U+{:04X}",
            c as u32
        )));
    }
    Ok(())
}

/// What an election's key starts with, before its name (see `Lock::for_election`). A
/// lock key has no control characters, so an election named `x` never shares its key
/// with `lock("x")` or any other lock.
pub const ELECTION_KEY_PREFIX: &str = "\u{1}election:";

/// The most keys one `lockAll` handle takes.
pub const MAX_KEYS_PER_LOCK: usize = 64;

/// Checks the keys of an all-or-nothing lock and puts them in canonical (byte-wise
/// sorted) order: 1 to [`MAX_KEYS_PER_LOCK`] keys, each a valid key, none repeated.
pub fn keys(mut keys: Vec<String>) -> Result<Vec<String>> {
    if keys.is_empty() || keys.len() > MAX_KEYS_PER_LOCK {
        return Err(LockError::InvalidArgument(format!(
            "lockAll() takes 1 to {MAX_KEYS_PER_LOCK} keys; got {}",
            keys.len()
        )));
    }
    for k in &keys {
        key(k)?;
    }
    // Insertion sort: at most 64 keys, and far less code in the WebAssembly build than
    // the standard library's sort.
    for i in 1..keys.len() {
        let mut j = i;
        while j > 0 && keys[j - 1] > keys[j] {
            keys.swap(j - 1, j);
            j -= 1;
        }
    }
    if let Some([twice, ..]) = keys.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(LockError::InvalidArgument(format!(
            "lockAll() keys must be distinct; {} is given twice",
            quote(twice)
        )));
    }
    Ok(keys)
}

/// Checks a TTL: at least 1 ms and at most [`MAX_TTL_MS`].
pub fn ttl_ms(ttl_ms: u64) -> Result<u64> {
    if !(1..=MAX_TTL_MS).contains(&ttl_ms) {
        return Err(LockError::InvalidArgument(format!(
            "ttlMs must be a whole number of milliseconds from 1 to {MAX_TTL_MS}; got {ttl_ms}"
        )));
    }
    Ok(ttl_ms)
}

/// Checks a hold kind: a semaphore admits at least one holder.
pub fn kind(kind: crate::HoldKind) -> Result<crate::HoldKind> {
    if let crate::HoldKind::Permit { limit: 0 } = kind {
        return Err(LockError::InvalidArgument(
            "limit must be a whole number from 1 to 4294967295; got 0".into(),
        ));
    }
    Ok(kind)
}

/// Checks how many permits a hold of `kind` asks for: from 1 to a semaphore's limit, and
/// exactly 1 for any other kind.
pub fn permits(kind: crate::HoldKind, permits: u32) -> Result<u32> {
    match kind {
        crate::HoldKind::Permit { limit } if (1..=limit).contains(&permits) => Ok(permits),
        crate::HoldKind::Permit { limit } => Err(LockError::InvalidArgument(format!(
            "permits must be a whole number from 1 to the semaphore's limit ({limit}); got {permits}"
        ))),
        _ if permits == 1 => Ok(1),
        kind => Err(LockError::InvalidArgument(format!(
            "permits is a semaphore's option; a {} handle takes one hold",
            kind.name()
        ))),
    }
}

/// Checks a retry delay: at least 1 ms (0 would spin) and at most [`MAX_TTL_MS`].
pub fn retry_delay_ms(delay_ms: u64) -> Result<u64> {
    if !(1..=MAX_TTL_MS).contains(&delay_ms) {
        return Err(LockError::InvalidArgument(format!(
            "retryDelay must be a number of milliseconds above 0 and at most {MAX_TTL_MS}; got {delay_ms}"
        )));
    }
    Ok(delay_ms)
}

/// Numbers as JavaScript passes them (`f64`), checked and converted to whole
/// milliseconds, with messages that name the option at fault. For the bindings.
#[cfg(feature = "js-numbers")]
pub mod js {
    use super::{show, MAX_TTL_MS};
    use crate::error::{LockError, Result};

    /// A TTL (`ttlMs`): a whole number of milliseconds from 1 to [`MAX_TTL_MS`].
    pub fn ttl_ms(ttl: f64) -> Result<u64> {
        if !ttl.is_finite() || ttl < 1.0 || ttl.fract() != 0.0 || ttl > MAX_TTL_MS as f64 {
            return Err(LockError::InvalidArgument(format!(
                "ttlMs must be a whole number of milliseconds from 1 to {MAX_TTL_MS}; got {}",
                show(ttl)
            )));
        }
        Ok(ttl as u64)
    }

    /// A wait timeout (`timeout`): at least 0, fractions rounding up; `Infinity` waits
    /// until the lock is taken (or the wait aborted), as `u64::MAX` (the deadline
    /// saturates).
    pub fn timeout_ms(timeout: f64) -> Result<u64> {
        if timeout.is_nan() || timeout < 0.0 {
            return Err(LockError::InvalidArgument(format!(
                "timeout must be a number of milliseconds, 0 or more (Infinity: no limit); got {}",
                show(timeout)
            )));
        }
        Ok(timeout.ceil().min(u64::MAX as f64) as u64)
    }

    /// A retry delay (`retryDelay`): above 0 and at most [`MAX_TTL_MS`]. Fractions round up.
    pub fn retry_delay_ms(delay: f64) -> Result<u64> {
        positive_ms("retryDelay", delay)
    }

    /// The `permits` option: a whole number from 1 to 4294967295 (the lock then checks it
    /// against its semaphore's limit).
    pub fn permits(permits: f64) -> Result<u32> {
        if permits.fract() != 0.0 || !(1.0..=f64::from(u32::MAX)).contains(&permits) {
            return Err(LockError::InvalidArgument(format!(
                "permits must be a whole number of at least 1; got {}",
                super::show(permits)
            )));
        }
        Ok(permits as u32)
    }

    /// `acquire()`'s `timeout` and `retryDelay`; `None` takes the default.
    /// `after_refused_try`: the caller's `tryAcquireNow()` was refused just before (see
    /// [`crate::AcquireOptions::after_refused_try`]).
    pub fn acquire_options(
        timeout: Option<f64>,
        retry_delay: Option<f64>,
        after_refused_try: Option<bool>,
    ) -> Result<crate::AcquireOptions> {
        let mut options =
            crate::AcquireOptions::default().with_after_refused_try(after_refused_try == Some(true));
        if let Some(timeout) = timeout {
            options.timeout_ms = timeout_ms(timeout)?;
        }
        if let Some(delay) = retry_delay {
            options.retry_delay_ms = retry_delay_ms(delay)?;
        }
        Ok(options)
    }

    /// The `autoExtend` option of a lock with TTL `ttl_ms`: `intervalMs` (default a third
    /// of the TTL, at most half of it, so an extend lands in time even when one is slow) and
    /// `maxHoldMs` (default: no cap).
    pub fn auto_extend(
        ttl_ms: u64,
        interval: Option<f64>,
        max_hold: Option<f64>,
    ) -> Result<crate::AutoExtend> {
        let mut plan = crate::AutoExtend::for_ttl_ms(ttl_ms);
        if let Some(interval) = interval {
            let interval = positive_ms("autoExtend.intervalMs", interval)?;
            if interval > ttl_ms / 2 {
                return Err(LockError::InvalidArgument(format!(
                    "autoExtend.intervalMs must be at most half the lock's TTL ({} ms of {ttl_ms}), so an extend lands before the hold runs out even when one is slow; got {interval}",
                    ttl_ms / 2
                )));
            }
            plan = plan.with_interval_ms(interval);
        }
        if let Some(max_hold) = max_hold {
            plan = plan.with_max_hold_ms(positive_ms("autoExtend.maxHoldMs", max_hold)?);
        }
        Ok(plan)
    }

    /// A handle's kind as the JS surface names it: `"lock"`, `"semaphore"` (with its
    /// `limit`), `"read"` or `"write"`; `"fair lock"` and `"fair semaphore"` are those
    /// kinds too (the binding makes the handle fair: `Lock::set_fair`).
    pub fn kind(name: &str, limit: Option<f64>) -> Result<crate::HoldKind> {
        Ok(match name {
            // An election's lock: a plain lock, on the election's key (Lock::for_election).
            "lock" | "election" | "fair lock" => crate::HoldKind::Exclusive,
            "semaphore" | "fair semaphore" => {
                crate::HoldKind::Permit { limit: self::limit(limit.unwrap_or(f64::NAN))? }
            }
            "read" => crate::HoldKind::Read,
            "write" => crate::HoldKind::Write,
            other => {
                return Err(LockError::InvalidArgument(format!(
                    "kind must be lock, semaphore, read or write; got {}",
                    super::quote(other)
                )))
            }
        })
    }

    /// A semaphore's `limit`: a whole number from 1 to 2^32 - 1.
    pub fn limit(limit: f64) -> Result<u32> {
        if !limit.is_finite() || limit < 1.0 || limit.fract() != 0.0 || limit > f64::from(u32::MAX) {
            return Err(LockError::InvalidArgument(format!(
                "limit must be a whole number from 1 to 4294967295; got {}",
                show(limit)
            )));
        }
        Ok(limit as u32)
    }

    /// Any other duration option called `name`: above 0 and at most [`MAX_TTL_MS`]
    /// milliseconds. Fractions round up.
    pub fn positive_ms(name: &str, ms: f64) -> Result<u64> {
        if !ms.is_finite() || ms <= 0.0 || ms > MAX_TTL_MS as f64 {
            return Err(LockError::InvalidArgument(format!(
                "{name} must be a number of milliseconds above 0 and at most {MAX_TTL_MS}; got {}",
                show(ms)
            )));
        }
        Ok(ms.ceil() as u64)
    }
}

/// `text` in double quotes, with `"`, `\` and control characters escaped (`\u{1b}`): how
/// messages name keys and other strings. Not `Debug` formatting, whose Unicode tables
/// would add several KB to the WebAssembly build.
#[must_use]
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() => {
                let _ = std::fmt::Write::write_fmt(&mut out, format_args!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Formats a number for a message, the way JS prints the common cases (`NaN`,
/// `Infinity`, `12`, `0.5`, `-3.25`). Written out by hand: core's float formatting
/// would add about 11 KB to the WebAssembly build for a handful of error messages.
#[must_use]
pub fn show(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sign = if n < 0.0 { "-" } else { "" };
    let abs = n.abs();
    if abs >= 1e15 || (abs != 0.0 && abs < 1e-6) {
        // Outside the plain range: the order of magnitude is what the reader needs. The
        // power of ten is found by multiplying (exact up to 1e22), not with `log10`, whose
        // code would be most of this function in the WebAssembly build.
        let (mut exp, mut power) = (0i32, 1.0f64);
        let mantissa = if abs >= 1.0 {
            while power * 10.0 <= abs {
                power *= 10.0;
                exp += 1;
            }
            abs / power
        } else {
            // Scaled up step by step: a power of ten this small would not be finite.
            let mut mantissa = abs;
            while mantissa < 1.0 {
                mantissa *= 10.0;
                exp -= 1;
            }
            mantissa
        };
        // The powers past 1e22 are rounded: a mantissa that would print as 10 is 1, one up.
        let (mantissa, exp) =
            if mantissa >= 9.999_999_5 { (mantissa / 10.0, exp + 1) } else { (mantissa, exp) };
        return format!("{sign}{}e{}{exp}", show(mantissa), if exp > 0 { "+" } else { "" });
    }
    let whole = abs.trunc() as u64;
    let mut fraction = ((abs - abs.trunc()) * 1e6).round() as u64;
    if fraction == 1_000_000 {
        return format!("{sign}{}", whole + 1);
    }
    if fraction == 0 {
        return format!("{sign}{whole}");
    }
    let mut digits = 6;
    while fraction.is_multiple_of(10) {
        fraction /= 10;
        digits -= 1;
    }
    format!("{sign}{whole}.{fraction:0digits$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(key("invoice:42").is_ok());
        assert!(key("ключ:🔒:請求書").is_ok());
        assert!(key(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        for bad in ["", "a\0b", "line\nbreak", "tab\there", "\u{7f}"] {
            let err = key(bad).unwrap_err();
            assert_eq!(err.code(), "INVALID_ARGUMENT", "{bad:?}");
            assert!(err.to_string().starts_with("locksmith: "));
        }
        assert!(key(&"k".repeat(MAX_KEY_BYTES + 1)).unwrap_err().to_string().contains("1025 bytes"));
    }

    #[test]
    fn quotes_like_debug_for_common_text() {
        for text in ["invoice:42", "a \"b\" \\ c", "tab\there\n\r", "\u{1b}\u{0}", "🔒", ""] {
            assert_eq!(quote(text), format!("{text:?}"));
        }
    }

    #[test]
    fn shows_numbers_like_js() {
        for (n, text) in [
            (0.0, "0"),
            (12.0, "12"),
            (-1.0, "-1"),
            (0.5, "0.5"),
            (1.25, "1.25"),
            (-3.000_001, "-3.000001"),
            (2_147_483_648.0, "2147483648"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (1e300, "1e+300"),
            (1e21, "1e+21"),
            (-2.5e15, "-2.5e+15"),
            (1e-7, "1e-7"),
            (3.25e-300, "3.25e-300"),
            (f64::MAX, "1.797693e+308"),
            (f64::MIN_POSITIVE, "2.225074e-308"),
        ] {
            assert_eq!(show(n), text, "{n}");
        }
        // Every order of magnitude outside the plain range, against the standard
        // library's exponent form rounded to the same 7 significant digits.
        for exp in (-320..-6).chain(15..309) {
            for mantissa in ["1", "2.5", "9.999999", "9.9999996", "4.2424242"] {
                let Ok(n) = format!("{mantissa}e{exp}").parse::<f64>() else { continue };
                if n == 0.0 || n.is_infinite() {
                    continue;
                }
                let std = format!("{n:.6e}");
                let (digits, power) = std.split_once('e').unwrap();
                let digits = digits.trim_end_matches('0').trim_end_matches('.');
                let sign = if power.starts_with('-') { "" } else { "+" };
                assert_eq!(show(n), format!("{digits}e{sign}{power}"), "{n:e}");
            }
        }
    }

    #[test]
    fn whole_milliseconds() {
        assert_eq!(ttl_ms(1).unwrap(), 1);
        assert_eq!(ttl_ms(MAX_TTL_MS).unwrap(), MAX_TTL_MS);
        for bad in [0, MAX_TTL_MS + 1, u64::MAX] {
            let err = ttl_ms(bad).unwrap_err();
            assert_eq!(err.code(), "INVALID_ARGUMENT", "{bad}");
            assert!(err.to_string().starts_with("locksmith: ttlMs must be"), "{err}");
        }
        assert_eq!(retry_delay_ms(1).unwrap(), 1);
        for bad in [0, MAX_TTL_MS + 1] {
            assert!(retry_delay_ms(bad).unwrap_err().to_string().contains("retryDelay"), "{bad}");
        }
    }

    #[cfg(feature = "js-numbers")]
    #[test]
    fn js_numbers() {
        assert_eq!(js::ttl_ms(1.0).unwrap(), 1);
        assert_eq!(js::ttl_ms(MAX_TTL_MS as f64).unwrap(), MAX_TTL_MS);
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY, MAX_TTL_MS as f64 + 1.0] {
            assert_eq!(js::ttl_ms(bad).unwrap_err().code(), "INVALID_ARGUMENT", "{bad}");
        }
        assert!(js::ttl_ms(f64::NAN).unwrap_err().to_string().contains("got NaN"));
        assert_eq!(js::timeout_ms(0.0).unwrap(), 0);
        assert_eq!(js::timeout_ms(0.2).unwrap(), 1);
        assert_eq!(js::timeout_ms(f64::INFINITY).unwrap(), u64::MAX);
        for bad in [-1.0, f64::NAN, f64::NEG_INFINITY] {
            let err = js::timeout_ms(bad).unwrap_err();
            assert!(err.to_string().starts_with("locksmith: timeout must be"), "{bad}: {err}");
        }
        assert_eq!(js::retry_delay_ms(0.5).unwrap(), 1);
        for bad in [0.0, -5.0, f64::NAN, f64::NEG_INFINITY, 1e12] {
            let err = js::retry_delay_ms(bad).unwrap_err();
            assert!(err.to_string().starts_with("locksmith: retryDelay must be"), "{bad}: {err}");
        }
        let err = js::positive_ms("operationTimeoutMs", 0.0).unwrap_err();
        assert!(err.to_string().starts_with("locksmith: operationTimeoutMs must be"), "{err}");
    }
}
