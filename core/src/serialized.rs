//! The serialized form of a held lock: one JSON object, the same in every runtime.

use serde::{Deserialize, Serialize};

use crate::error::{LockError, Result};
use crate::store::HoldKind;
use crate::token::OwnerToken;
use crate::validate;

/// Longer input is refused before it is parsed.
pub const MAX_SERIALIZED_BYTES: usize = 16 * 1024;

/// `{"key":"invoice:42","ttlMs":30000,"owner":"<32 hex>","fencingToken":7,"expiresAt":1764500000000}`.
/// `fencingToken` is present when the store gave one; `expiresAt` (milliseconds since
/// the Unix epoch, by the serializing host's wall clock) when the runtime has a wall
/// clock, and is optional on input so strings written before it existed still restore.
/// The owner token makes this a bearer secret: whoever has the string can release or
/// extend the lock.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Wire<'a> {
    #[serde(borrow)]
    key: std::borrow::Cow<'a, str>,
    ttl_ms: serde_json::Number,
    #[serde(borrow)]
    owner: std::borrow::Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fencing_token: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    /// `"semaphore"`, `"read"` or `"write"`; absent for a plain lock.
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    /// A semaphore's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limit: Option<u32>,
}

/// A held lock as it travels between processes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SerializedLock {
    /// The lock key.
    pub key: String,
    /// The lock's TTL.
    pub ttl_ms: u64,
    /// Who holds it.
    pub owner: OwnerToken,
    /// The fencing token of the hold, if the store gave one.
    pub fencing_token: Option<u64>,
    /// When the hold expires at the latest, in milliseconds since the Unix epoch.
    pub expires_at_unix_ms: Option<u64>,
    /// A lock, a semaphore permit, a read or a write lock.
    pub kind: HoldKind,
}

impl SerializedLock {
    /// The JSON text.
    #[must_use]
    pub fn to_json(&self) -> String {
        let wire = Wire {
            key: self.key.as_str().into(),
            ttl_ms: self.ttl_ms.into(),
            owner: self.owner.as_str().into(),
            fencing_token: self.fencing_token,
            expires_at: self.expires_at_unix_ms,
            kind: match self.kind {
                HoldKind::Permit { .. } => Some("semaphore".into()),
                HoldKind::Read => Some("read".into()),
                HoldKind::Write => Some("write".into()),
                _ => None,
            },
            limit: match self.kind {
                HoldKind::Permit { limit } => Some(limit),
                _ => None,
            },
        };
        serde_json::to_string(&wire).unwrap_or_default()
    }

    /// Parses text written by [`to_json`](Self::to_json), and nothing else.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: String| LockError::InvalidSerializedLock(why);
        if text.len() > MAX_SERIALIZED_BYTES {
            return Err(bad(format!(
                "it is {} bytes long; a serialized lock is at most {MAX_SERIALIZED_BYTES}",
                text.len()
            )));
        }
        let wire: Wire<'_> = serde_json::from_str(text).map_err(|e| {
            bad(format!("expected JSON {{\"key\", \"ttlMs\", \"owner\"}} from serialize(): {e}"))
        })?;
        validate::key(&wire.key).map_err(|e| bad(strip(&e)))?;
        let ttl_ms = wire
            .ttl_ms
            .as_u64()
            .ok_or_else(|| {
                bad(format!(
                    "ttlMs must be a whole number of milliseconds from 1 to {}; got {}",
                    validate::MAX_TTL_MS,
                    wire.ttl_ms
                ))
            })
            .and_then(|ms| validate::ttl_ms(ms).map_err(|e| bad(strip(&e))))?;
        let owner = OwnerToken::parse(&wire.owner)?;
        let kind = match (wire.kind.as_deref(), wire.limit) {
            (None, None) => HoldKind::Exclusive,
            (Some("semaphore"), Some(limit)) if limit >= 1 => HoldKind::Permit { limit },
            (Some("read"), None) => HoldKind::Read,
            (Some("write"), None) => HoldKind::Write,
            (kind, limit) => {
                return Err(bad(format!(
                    "kind {kind:?} with limit {limit:?}: expected no kind (a lock), \"semaphore\" with a limit from 1, \"read\" or \"write\""
                )))
            }
        };
        Ok(Self {
            key: wire.key.into_owned(),
            ttl_ms,
            owner,
            fencing_token: wire.fencing_token,
            expires_at_unix_ms: wire.expires_at,
            kind,
        })
    }
}

/// The message of an argument error without its `locksmith: ` prefix, to nest it.
fn strip(err: &LockError) -> String {
    match err {
        LockError::InvalidArgument(msg) => msg.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SerializedLock {
        SerializedLock {
            key: "import:99 \"quoted\" ✓".into(),
            ttl_ms: 60_000,
            owner: OwnerToken::generate().unwrap(),
            fencing_token: Some(7),
            expires_at_unix_ms: Some(1_764_500_000_000),
            kind: HoldKind::Exclusive,
        }
    }

    #[test]
    fn round_trips() {
        let s = sample();
        let json = s.to_json();
        assert!(json.contains("\"ttlMs\":60000"), "{json}");
        assert!(json.contains("\"fencingToken\":7"), "{json}");
        assert!(json.contains("\"expiresAt\":1764500000000"), "{json}");
        assert_eq!(SerializedLock::parse(&json).unwrap(), s);
        let plain = SerializedLock { fencing_token: None, expires_at_unix_ms: None, ..s };
        assert!(!plain.to_json().contains("fencing"));
        assert!(!plain.to_json().contains("expiresAt"));
        for kind in [HoldKind::Permit { limit: 3 }, HoldKind::Read, HoldKind::Write] {
            let other = SerializedLock { kind, ..plain.clone() };
            assert_eq!(SerializedLock::parse(&other.to_json()).unwrap(), other, "{kind:?}");
        }
        let bad = plain.to_json().replace('}', ",\"kind\":\"semaphore\"}");
        assert_eq!(
            SerializedLock::parse(&bad).unwrap_err().code(),
            "INVALID_SERIALIZED_LOCK",
            "a semaphore needs its limit"
        );
        assert_eq!(SerializedLock::parse(&plain.to_json()).unwrap(), plain);
    }

    #[test]
    fn refuses_everything_else() {
        let owner = "0123456789abcdef0123456789abcdef";
        let cases = [
            ("", "expected JSON"),
            ("garbage", "expected JSON"),
            ("{\"key\":\"a\",\"ttlMs\":1", "expected JSON"),
            ("[]", "expected JSON"),
            ("null", "expected JSON"),
            (&format!("{{\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "missing field `key`"),
            (&format!("{{\"key\":\"a\",\"owner\":\"{owner}\"}}"), "missing field `ttlMs`"),
            ("{\"key\":\"a\",\"ttlMs\":1}", "missing field `owner`"),
            (&format!("{{\"key\":5,\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "expected a string"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":\"1\",\"owner\":\"{owner}\"}}"), "expected a JSON number"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":1.5,\"owner\":\"{owner}\"}}"), "ttlMs"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":0,\"owner\":\"{owner}\"}}"), "ttlMs"),
            (&format!("{{\"key\":\"\",\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "non-empty"),
            ("{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"short\"}", "32 lowercase hex"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"x\":1}}"), "unknown field"),
            (
                &format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"fencingToken\":-1}}"),
                "expected u64",
            ),
        ];
        for (input, why) in cases {
            let err = SerializedLock::parse(input).unwrap_err();
            assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK", "{input}");
            let msg = err.to_string();
            assert!(msg.starts_with("locksmith: invalid serialized lock: "), "{msg}");
            assert!(msg.contains(why), "{input} -> {msg}");
        }
        let huge = format!("{{\"key\":\"{}\",\"ttlMs\":1,\"owner\":\"{owner}\"}}", "k".repeat(20_000));
        assert!(SerializedLock::parse(&huge).unwrap_err().to_string().contains("at most"));
    }
}
