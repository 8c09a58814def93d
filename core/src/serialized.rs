//! The serialized form of a held lock: one JSON object, the same in every runtime.

use crate::error::{LockError, Result};
use crate::store::HoldKind;
use crate::token::OwnerToken;
use crate::validate;

// `{"key":"invoice:42","ttlMs":30000,"owner":"<32 hex>","fencingToken":7,"expiresAt":1764500000000}`.
// `fencingToken` is present when the store gave one; `expiresAt` (milliseconds since
// the Unix epoch, by the serializing host's wall clock) when the runtime has a wall
// clock, and is optional on input so strings written before it existed still restore.
// `kind` (`"semaphore"`, `"read"` or `"write"`) is absent for a plain lock; `limit` is a
// semaphore's. A fair handle's kind is `"fair lock"` or `"fair semaphore"`. A lock on several keys has `keys` (an array of strings, in canonical
// order) instead of `key`, `fencingTokens` (one number or `null` per key) instead of
// `fencingToken`, and `kind` `"multi"`. The owner token makes this a bearer secret:
// whoever has the string can release or extend the lock.
//
// The text is written here ([`SerializedLock::to_json`]). It is read by the host's JSON
// reader (`JSON.parse` in both JS builds: js/api/serialized.mjs checks the JSON types of
// the fields and refuses unknown ones), and the values it found are checked here
// ([`SerializedLock::from_fields`]): a JSON reader of our own cost the WebAssembly module
// a tenth of its size.

/// The fields of a serialized lock as the host's JSON reader found them, before their
/// values are checked: `None` for a field that is absent or `null`. Numbers are JSON
/// numbers (`f64`); `fencing_tokens` has `None` for a `null` entry.
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Fields {
    pub key: Option<String>,
    pub keys: Option<Vec<String>>,
    pub ttl_ms: Option<f64>,
    pub owner: Option<String>,
    pub fencing_token: Option<f64>,
    pub expires_at: Option<f64>,
    pub kind: Option<String>,
    pub limit: Option<f64>,
    pub fencing_tokens: Option<Vec<Option<f64>>>,
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
    /// A fair lock or semaphore ([`crate::Lock::set_fair`]).
    pub fair: bool,
    /// The keys of a lock on several keys (then `key` is their label); empty otherwise.
    pub keys: Vec<String>,
    /// A lock on several keys: each key's fencing token.
    pub fencing_tokens: Vec<Option<u64>>,
}

impl SerializedLock {
    /// The JSON text.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(96 + self.key.len());
        if self.keys.is_empty() {
            out.push_str("{\"key\":");
            write_string(&mut out, &self.key);
        } else {
            out.push_str("{\"keys\":[");
            for (i, key) in self.keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(&mut out, key);
            }
            out.push(']');
        }
        out.push_str(",\"ttlMs\":");
        out.push_str(&self.ttl_ms.to_string());
        out.push_str(",\"owner\":\"");
        out.push_str(self.owner.as_str());
        out.push('"');
        if let Some(token) = self.fencing_token {
            out.push_str(",\"fencingToken\":");
            out.push_str(&token.to_string());
        }
        if !self.keys.is_empty() {
            out.push_str(",\"fencingTokens\":[");
            for (i, token) in self.fencing_tokens.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match token {
                    Some(token) => out.push_str(&token.to_string()),
                    None => out.push_str("null"),
                }
            }
            out.push_str("],\"kind\":\"multi\"");
        }
        if let Some(at) = self.expires_at_unix_ms {
            out.push_str(",\"expiresAt\":");
            out.push_str(&at.to_string());
        }
        match self.kind {
            HoldKind::Exclusive if self.fair => out.push_str(",\"kind\":\"fair lock\""),
            HoldKind::Permit { limit } => {
                out.push_str(if self.fair {
                    ",\"kind\":\"fair semaphore\",\"limit\":"
                } else {
                    ",\"kind\":\"semaphore\",\"limit\":"
                });
                out.push_str(&limit.to_string());
            }
            HoldKind::Read => out.push_str(",\"kind\":\"read\""),
            HoldKind::Write => out.push_str(",\"kind\":\"write\""),
            _ => {}
        }
        out.push('}');
        out
    }

    /// The lock `fields` describe, when every value is one [`to_json`](Self::to_json)
    /// could have written.
    pub fn from_fields(fields: Fields) -> Result<Self> {
        let bad = |why: String| LockError::InvalidSerializedLock(why);
        let missing = |name: &str| bad(format!("missing field `{name}`"));
        let keys = match (fields.key.is_some(), fields.keys) {
            (true, Some(_)) => return Err(bad("both `key` and `keys`".into())),
            (false, None) => return Err(missing("key")),
            (_, Some(keys)) => {
                let sorted = validate::keys(keys.clone()).map_err(|e| bad(strip(&e)))?;
                if sorted != keys {
                    return Err(bad("keys must be in the order serialize() writes them".into()));
                }
                if fields.kind.as_deref() != Some("multi") || fields.fencing_token.is_some() {
                    return Err(bad("keys go with kind \"multi\" and fencingTokens".into()));
                }
                if fields.fencing_tokens.as_ref().is_some_and(|t| t.len() != keys.len()) {
                    return Err(bad("fencingTokens must have one entry per key".into()));
                }
                keys
            }
            (true, None) => {
                validate::key(fields.key.as_deref().unwrap_or_default()).map_err(|e| bad(strip(&e)))?;
                if fields.fencing_tokens.is_some() {
                    return Err(bad("fencingTokens go with keys".into()));
                }
                Vec::new()
            }
        };
        let ttl = fields.ttl_ms.ok_or_else(|| missing("ttlMs"))?;
        let ttl_ms = whole(ttl, 1, validate::MAX_TTL_MS, "ttlMs must be a whole number of milliseconds")?;
        let owner = OwnerToken::parse(fields.owner.as_deref().ok_or_else(|| missing("owner"))?)?;
        // A token is a positive safe integer, as a store gives it.
        let token = |n: f64| whole(n, 1, MAX_SAFE_TOKEN, "a fencing token is a whole number");
        let fencing_token = fields.fencing_token.map(token).transpose()?;
        let expires_at_unix_ms = fields
            .expires_at
            .map(|at| {
                whole(
                    at,
                    0,
                    MAX_SAFE_TOKEN,
                    "expiresAt is a whole number of milliseconds since the Unix epoch",
                )
            })
            .transpose()?;
        let limit = fields
            .limit
            .map(|n| {
                whole(n, 1, u64::from(u32::MAX), "a semaphore's limit is a whole number").map(|l| l as u32)
            })
            .transpose()?;
        let (kind, fair) = match (fields.kind.as_deref(), limit) {
            (None, None) => (HoldKind::Exclusive, false),
            (Some("multi"), None) if !keys.is_empty() => (HoldKind::Exclusive, false),
            (Some("fair lock"), None) if keys.is_empty() => (HoldKind::Exclusive, true),
            (Some("semaphore"), Some(limit)) => (HoldKind::Permit { limit }, false),
            (Some("fair semaphore"), Some(limit)) => (HoldKind::Permit { limit }, true),
            (Some("read"), None) => (HoldKind::Read, false),
            (Some("write"), None) => (HoldKind::Write, false),
            (kind, limit) => {
                return Err(bad(format!(
                    "kind {} with limit {}: expected no kind (a lock), \"fair lock\", \"semaphore\" or \"fair semaphore\" with a limit from 1, \"read\" or \"write\"",
                    kind.map_or_else(|| "none".into(), validate::quote),
                    limit.map_or_else(|| "none".into(), |l| l.to_string())
                )))
            }
        };
        let fencing_tokens = match fields.fencing_tokens {
            Some(tokens) => tokens.into_iter().map(|t| t.map(token).transpose()).collect::<Result<_>>()?,
            None => vec![None; keys.len()],
        };
        Ok(Self {
            key: if keys.is_empty() { fields.key.unwrap_or_default() } else { keys.join(", ") },
            ttl_ms,
            owner,
            fencing_token,
            expires_at_unix_ms,
            kind,
            fair,
            keys,
            fencing_tokens,
        })
    }
}

/// `text` as a JSON string literal: quotes, backslashes and control characters escaped.
fn write_string(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(char::from(HEX[(c as usize) >> 4]));
                out.push(char::from(HEX[(c as usize) & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `n` as a whole number from `min` to `max`; else the error that says so, `what` first.
fn whole(n: f64, min: u64, max: u64, what: &str) -> Result<u64> {
    if n.fract() == 0.0 && (min as f64..=max as f64).contains(&n) {
        return Ok(n as u64);
    }
    Err(LockError::InvalidSerializedLock(format!("{what} from {min} to {max}; got {}", validate::show(n))))
}

/// The largest fencing token a JS number carries exactly.
const MAX_SAFE_TOKEN: u64 = (1 << 53) - 1;

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
            fair: false,
            keys: Vec::new(),
            fencing_tokens: Vec::new(),
        }
    }

    /// What JSON.parse and js/api/serialized.mjs make of `text`, with `serde_json` as the
    /// JSON reader (the JS tests check the JS side's refusals of JSON types and names).
    fn fields_of(text: &str) -> Fields {
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let get = |name: &str| value.get(name).filter(|v| !v.is_null());
        let string = |name: &str| get(name).map(|v| v.as_str().unwrap().to_owned());
        let number = |name: &str| get(name).map(|v| v.as_f64().unwrap());
        Fields {
            key: string("key"),
            keys: get("keys")
                .map(|v| v.as_array().unwrap().iter().map(|k| k.as_str().unwrap().into()).collect()),
            ttl_ms: number("ttlMs"),
            owner: string("owner"),
            fencing_token: number("fencingToken"),
            expires_at: number("expiresAt"),
            kind: string("kind"),
            limit: number("limit"),
            fencing_tokens: get("fencingTokens")
                .map(|v| v.as_array().unwrap().iter().map(serde_json::Value::as_f64).collect()),
        }
    }

    fn read(text: &str) -> Result<SerializedLock> {
        SerializedLock::from_fields(fields_of(text))
    }

    #[test]
    fn a_lock_on_several_keys_round_trips() {
        let s = SerializedLock {
            key: "a, b \"q\"".into(),
            fencing_token: None,
            keys: vec!["a".into(), "b \"q\"".into()],
            fencing_tokens: vec![Some(3), None],
            ..sample()
        };
        let json = s.to_json();
        assert!(json.starts_with(r#"{"keys":["a","b \"q\""],"#), "{json}");
        assert!(json.contains(r#""fencingTokens":[3,null],"kind":"multi""#), "{json}");
        assert_eq!(read(&json).unwrap(), s);
        let owner = s.owner.as_str();
        // `null` for the token list is an absent one: no token known for any key.
        let unknown = format!(
            r#"{{"keys":["a","b"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":null}}"#
        );
        assert_eq!(read(&unknown).unwrap().fencing_tokens, [None, None]);
        // The longest keys, escaped at twice their length.
        let widest = SerializedLock {
            keys: (0..crate::validate::MAX_KEYS_PER_LOCK)
                .map(|i| format!("{i:02}{}", "\"".repeat(crate::validate::MAX_KEY_BYTES - 2)))
                .collect(),
            fencing_tokens: vec![Some(9_007_199_254_740_991); crate::validate::MAX_KEYS_PER_LOCK],
            ..s.clone()
        };
        let widest = SerializedLock { key: widest.keys.join(", "), ..widest };
        assert!(widest.to_json().len() > 128 * 1024);
        assert_eq!(read(&widest.to_json()).unwrap(), widest);
        for bad in [
            // Out of canonical order, repeated, empty, with `key` too.
            format!(r#"{{"keys":["b","a"],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":["a","a"],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":[],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":["a\n"],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"key":"a","keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            // Without kind multi, with a lock's one token, tokens of the wrong length.
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}"}}"#),
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingToken":1}}"#),
            format!(r#"{{"keys":["a","b"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[1]}}"#),
            format!(r#"{{"key":"a","ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"key":"a","ttlMs":1,"owner":"{owner}","fencingTokens":[1]}}"#),
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[-1]}}"#),
            // Tokens are positive safe integers; a lock's list goes with keys, even empty.
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[0]}}"#),
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[1.5]}}"#),
            format!(
                r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[9007199254740992]}}"#
            ),
            format!(r#"{{"key":"a","ttlMs":1,"owner":"{owner}","fencingTokens":[]}}"#),
            format!(r#"{{"keys":["a","b"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[]}}"#),
        ] {
            let err = read(&bad).unwrap_err();
            assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK", "{bad}");
        }
    }

    #[test]
    fn round_trips() {
        let s = sample();
        let json = s.to_json();
        assert!(json.contains("\"ttlMs\":60000"), "{json}");
        assert!(json.contains("\"fencingToken\":7"), "{json}");
        assert!(json.contains("\"expiresAt\":1764500000000"), "{json}");
        assert_eq!(read(&json).unwrap(), s);
        let plain = SerializedLock { fencing_token: None, expires_at_unix_ms: None, ..s };
        assert!(!plain.to_json().contains("fencing"));
        assert!(!plain.to_json().contains("expiresAt"));
        for kind in [HoldKind::Permit { limit: 3 }, HoldKind::Read, HoldKind::Write] {
            let other = SerializedLock { kind, ..plain.clone() };
            assert_eq!(read(&other.to_json()).unwrap(), other, "{kind:?}");
        }
        let bad = plain.to_json().replace('}', ",\"kind\":\"semaphore\"}");
        assert_eq!(read(&bad).unwrap_err().code(), "INVALID_SERIALIZED_LOCK", "a semaphore needs its limit");
        assert_eq!(read(&plain.to_json()).unwrap(), plain);
    }

    /// The fields as `serde_json` wrote and read them before the format had its own writer.
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Oracle {
        key: String,
        ttl_ms: u64,
        owner: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fencing_token: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
    }

    /// Byte for byte what `serde_json` wrote, for any key, and read back.
    #[test]
    fn same_text_as_serde_json() {
        let keys = ["a", "import:99 \"quoted\" ✓", "back\\slash/", "\u{2028}🔒", "e\u{301}"];
        for (i, key) in keys.into_iter().enumerate() {
            let kinds = [HoldKind::Exclusive, HoldKind::Permit { limit: 3 }, HoldKind::Read, HoldKind::Write];
            let s = SerializedLock {
                key: key.into(),
                fencing_token: (i % 2 == 0).then_some(MAX_SAFE_TOKEN),
                expires_at_unix_ms: (i % 3 != 0).then_some(1_764_500_000_000),
                kind: kinds[i % 4],
                // A fair lock, then a fair semaphore.
                fair: i == 0 || i == 1,
                ..sample()
            };
            let oracle = Oracle {
                key: key.into(),
                ttl_ms: s.ttl_ms,
                owner: s.owner.as_str().into(),
                fencing_token: s.fencing_token,
                expires_at: s.expires_at_unix_ms,
                kind: match s.kind {
                    HoldKind::Exclusive if s.fair => Some("fair lock".into()),
                    HoldKind::Permit { .. } if s.fair => Some("fair semaphore".into()),
                    HoldKind::Permit { .. } => Some("semaphore".into()),
                    HoldKind::Read => Some("read".into()),
                    HoldKind::Write => Some("write".into()),
                    _ => None,
                },
                limit: match s.kind {
                    HoldKind::Permit { limit } => Some(limit),
                    _ => None,
                },
            };
            assert_eq!(s.to_json(), serde_json::to_string(&oracle).unwrap());
            assert_eq!(serde_json::from_str::<Oracle>(&s.to_json()).unwrap(), oracle);
            assert_eq!(read(&s.to_json()).unwrap(), s);
        }
        // Keys cannot hold control characters, but the writer escapes them as serde_json did.
        let control = SerializedLock { key: "\u{1}\t\n\u{1f}".into(), ..sample() };
        assert!(control.to_json().starts_with(r#"{"key":"\u0001\t\n\u001f","#), "{}", control.to_json());
    }

    #[test]
    fn refuses_values_serialize_never_writes() {
        let owner = "0123456789abcdef0123456789abcdef";
        let cases = [
            (format!("{{\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "missing field `key`"),
            (format!("{{\"key\":\"a\",\"owner\":\"{owner}\"}}"), "missing field `ttlMs`"),
            ("{\"key\":\"a\",\"ttlMs\":1}".into(), "missing field `owner`"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1.5,\"owner\":\"{owner}\"}}"), "ttlMs must be a whole number"),
            (format!("{{\"key\":\"a\",\"ttlMs\":0,\"owner\":\"{owner}\"}}"), "ttlMs"),
            (format!("{{\"key\":\"a\",\"ttlMs\":2147483648,\"owner\":\"{owner}\"}}"), "ttlMs"),
            (format!("{{\"key\":\"\",\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "non-empty"),
            ("{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"short\"}".into(), "32 lowercase hex"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"fencingToken\":-1}}"), "fencing token"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"fencingToken\":0}}"), "fencing token"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"expiresAt\":-5}}"), "expiresAt"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"expiresAt\":1e300}}"), "expiresAt"),
            (
                format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"limit\":4294967296,\"kind\":\"semaphore\"}}"),
                "limit",
            ),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"limit\":0,\"kind\":\"semaphore\"}}"), "limit"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"limit\":2}}"), "kind none with limit 2"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"kind\":\"mutex\"}}"), "kind \"mutex\""),
        ];
        for (input, why) in cases {
            let err = read(&input).unwrap_err();
            assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK", "{input}");
            let msg = err.to_string();
            assert!(msg.starts_with("locksmith: invalid serialized lock: "), "{msg}");
            assert!(msg.contains(why), "{input} -> {msg}");
        }
        // Not a number: what a host might pass for a JSON number it could not carry.
        let nan = Fields {
            ttl_ms: Some(f64::NAN),
            ..fields_of(&format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\"}}"))
        };
        assert!(SerializedLock::from_fields(nan).unwrap_err().to_string().contains("got NaN"));
    }
}
